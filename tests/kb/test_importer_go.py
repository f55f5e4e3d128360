"""The `bio` importer with the Gene Ontology (``--option go=DIR|yes``): GO terms, human genes, annotations.

The test writes a tiny pair of SQLite files in exactly the table layout of the
Debian packages r-bioc-go.db (``GO.sqlite``) and r-bioc-org.hs.eg.db
(``org.Hs.eg.sqlite``), next to the tiny HPO folder of test_importer_bio, and builds a real KB from them.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from test_importer_bio import hpo_folder  # noqa: F401 (fixture: a tiny HPO folder whose gene is ETS1)

from kqe_rdf.kb.build import build_kb
from kqe_rdf.core.errors import InputError, KqeError
from kqe_rdf.kb.importers import go
from kqe_rdf.kb.importers.bio import BioImporter
from kqe_rdf.kb.knowledge_base import KnowledgeBase
from kqe_rdf.kb.records import Edge, ImportReport, Node
from support.paths import ROOT

# The CREATE statements of GO.db 3.16.0's GO.sqlite (the tables the importer reads).
GO_SCHEMA = """
CREATE TABLE metadata (name VARCHAR(80) PRIMARY KEY, value VARCHAR(255));
CREATE TABLE go_ontology (ontology VARCHAR(9) PRIMARY KEY, term_type VARCHAR(18) NOT NULL UNIQUE);
CREATE TABLE go_term (_id INTEGER PRIMARY KEY, go_id CHAR(10) NOT NULL UNIQUE, term VARCHAR(255) NOT NULL,
  ontology VARCHAR(9) NOT NULL, definition TEXT NULL, FOREIGN KEY (ontology) REFERENCES go_ontology (ontology));
CREATE TABLE go_obsolete (go_id CHAR(10) PRIMARY KEY, term VARCHAR(255) NOT NULL, ontology VARCHAR(9) NOT NULL,
  definition TEXT NULL, FOREIGN KEY (ontology) REFERENCES go_ontology (ontology));
CREATE TABLE go_synonym (_id INTEGER NOT NULL, synonym VARCHAR(255) NOT NULL, secondary CHAR(10) NULL,
  like_go_id SMALLINT, FOREIGN KEY (_id) REFERENCES go_term (_id));
CREATE TABLE go_bp_parents (_id INTEGER NOT NULL, _parent_id INTEGER NOT NULL, relationship_type VARCHAR(7) NOT NULL,
  FOREIGN KEY (_id) REFERENCES go_term (_id), FOREIGN KEY (_parent_id) REFERENCES go_term (_id));
CREATE TABLE go_mf_parents (_id INTEGER NOT NULL, _parent_id INTEGER NOT NULL, relationship_type VARCHAR(7) NOT NULL,
  FOREIGN KEY (_id) REFERENCES go_term (_id), FOREIGN KEY (_parent_id) REFERENCES go_term (_id));
CREATE TABLE go_cc_parents (_id INTEGER NOT NULL, _parent_id INTEGER NOT NULL, relationship_type VARCHAR(7) NOT NULL,
  FOREIGN KEY (_id) REFERENCES go_term (_id), FOREIGN KEY (_parent_id) REFERENCES go_term (_id));
"""
GO_ROWS = """
INSERT INTO metadata VALUES ('GOSOURCENAME', 'Gene Ontology'), ('GOSOURCEDATE', '2099-07-01');
INSERT INTO go_ontology VALUES ('universal', 'universal'), ('BP', 'biological_process'),
  ('MF', 'molecular_function'), ('CC', 'cellular_component');
INSERT INTO go_term VALUES
  (1, 'GO:0008150', 'biological_process', 'BP', 'A biological process is ...'),
  (2, 'GO:0006915', 'apoptotic process', 'BP', 'A programmed cell death process.'),
  (3, 'GO:0042981', 'regulation of apoptotic process', 'BP', 'Any process that modulates apoptosis.'),
  (4, 'GO:0043065', 'positive regulation of apoptotic process', 'BP', 'Any process that activates apoptosis.'),
  (5, 'GO:0003674', 'molecular_function', 'MF', NULL),
  (6, 'GO:0005515', 'protein binding', 'MF', 'Binding to a protein.'),
  (7, 'GO:0005575', 'cellular_component', 'CC', NULL),
  (8, 'GO:0005634', 'nucleus', 'CC', 'A membrane-bounded organelle holding the chromosomes.'),
  (9, 'all', 'all', 'universal', NULL);
INSERT INTO go_obsolete VALUES ('GO:0000005', 'obsolete ribosomal chaperone activity', 'MF', 'OBSOLETE.');
INSERT INTO go_synonym VALUES (2, 'apoptosis', NULL, 0), (2, 'GO:0006917', 'GO:0006917', 1),
  (4, 'activation of apoptosis', NULL, 0);
INSERT INTO go_bp_parents VALUES (1, 9, 'isa'), (2, 1, 'isa'), (3, 1, 'isa'), (3, 2, 'regulates'),
  (4, 3, 'isa'), (4, 2, 'positively regulates');
INSERT INTO go_mf_parents VALUES (5, 9, 'isa'), (6, 5, 'isa');
INSERT INTO go_cc_parents VALUES (7, 9, 'isa'), (8, 7, 'isa');
"""

# The CREATE statements of org.Hs.eg.db 3.16.0's org.Hs.eg.sqlite (the tables and views the importer reads).
ORG_SCHEMA = """
CREATE TABLE metadata (name VARCHAR(80) PRIMARY KEY, value VARCHAR(255));
CREATE TABLE genes (_id INTEGER PRIMARY KEY, gene_id VARCHAR(10) NOT NULL UNIQUE);
CREATE TABLE gene_info (_id INTEGER NOT NULL UNIQUE, gene_name VARCHAR(255) NOT NULL, symbol VARCHAR(80) NOT NULL,
  FOREIGN KEY (_id) REFERENCES genes (_id));
CREATE TABLE alias (_id INTEGER NOT NULL, alias_symbol VARCHAR(80) NOT NULL, FOREIGN KEY (_id) REFERENCES genes (_id));
CREATE TABLE go_bp (_id INTEGER NOT NULL, go_id CHAR(10) NOT NULL, evidence CHAR(3) NOT NULL,
  FOREIGN KEY (_id) REFERENCES genes (_id));
CREATE TABLE go_mf (_id INTEGER NOT NULL, go_id CHAR(10) NOT NULL, evidence CHAR(3) NOT NULL,
  FOREIGN KEY (_id) REFERENCES genes (_id));
CREATE TABLE go_cc (_id INTEGER NOT NULL, go_id CHAR(10) NOT NULL, evidence CHAR(3) NOT NULL,
  FOREIGN KEY (_id) REFERENCES genes (_id));
CREATE VIEW go AS SELECT _id, go_id, evidence, 'BP' AS 'ontology' FROM go_bp
  UNION SELECT _id, go_id, evidence, 'CC' FROM go_cc UNION SELECT _id, go_id, evidence, 'MF' FROM go_mf;
"""
# ETS1 is HPO's gene (NCBIGene:2113); TP53 has GO annotations only; the pseudogene has neither.
ORG_ROWS = """
INSERT INTO metadata VALUES ('EGSOURCEDATE', '2099-Sep12'), ('GOSOURCEDATE', '2099-07-01');
INSERT INTO genes VALUES (1, '2113'), (2, '7157'), (3, '100000001');
INSERT INTO gene_info VALUES (1, 'ETS proto-oncogene 1, transcription factor', 'ETS1'),
  (2, 'tumor protein p53', 'TP53'), (3, 'some pseudogene 1', 'SPG1P');
INSERT INTO alias VALUES (1, 'ETS1'), (1, 'ETS-1'), (1, 'EWSR2'), (2, 'TP53'), (2, 'P53'), (2, 'NUCLEUS'), (2, 'LFS1');
INSERT INTO go_bp VALUES (1, 'GO:0043065', 'IDA'), (1, 'GO:0043065', 'IMP'), (2, 'GO:0006915', 'IDA'),
  (2, 'GO:0009999', 'IEA');
INSERT INTO go_mf VALUES (1, 'GO:0003674', 'ND'), (2, 'GO:0005515', 'IPI');
INSERT INTO go_cc VALUES (2, 'GO:0005634', 'IDA'), (2, 'GO:0005634', 'TAS');
"""

def sqlite_file(path, script):
    con = sqlite3.connect(path)
    con.executescript(script)
    con.commit()
    con.close()
    return path


@pytest.fixture
def go_dir(tmp_path):
    """A folder as `dpkg-deb -x` leaves it: each SQLite file under its R package's extdata/."""
    root = tmp_path / "bioc" / "usr" / "lib" / "R" / "site-library"
    for package, name, script in (("GO.db", "GO.sqlite", GO_SCHEMA + GO_ROWS),
                                  ("org.Hs.eg.db", "org.Hs.eg.sqlite", ORG_SCHEMA + ORG_ROWS)):
        (root / package / "extdata").mkdir(parents=True)
        sqlite_file(root / package / "extdata" / name, script)
    return tmp_path / "bioc"


def test_go_terms_genes_and_annotations_join_hpo_genes(hpo_folder, go_dir):
    report = ImportReport()
    records = list(BioImporter([hpo_folder], doid="none", go=go_dir).records(report))
    nodes = {r.id: r for r in records if isinstance(r, Node)}
    edges = {(e.head, e.relation, e.tail): dict(e.qualifiers) for e in records if isinstance(e, Edge)}

    # GO terms with synonyms, secondary ids, definitions and aspect; GO.db's root 'all' is not a term
    apoptosis = nodes["GO:0006915"]
    assert (apoptosis.type, apoptosis.name, apoptosis.aliases, apoptosis.xrefs) == (
        "GOTerm", "apoptotic process", ("apoptosis",), ("GO:0006917",))
    assert dict(apoptosis.fields) == {"definition": "A programmed cell death process.", "aspect": "biological process"}
    assert apoptosis.iri_hint == "http://purl.obolibrary.org/obo/GO_0006915"
    assert "all" not in nodes and "GO:0000005" not in nodes  # obsolete terms live in their own table
    # is_a, regulates and positively regulates between terms
    assert {("GO:0043065", "goIsA", "GO:0042981"), ("GO:0042981", "regulates", "GO:0006915"),
            ("GO:0043065", "positivelyRegulates", "GO:0006915")} <= set(edges)

    # HPO's gene is one node (joined by NCBI Gene id) that gains its full name and aliases
    ets1 = [r for r in records if isinstance(r, Node) and r.id == "NCBIGene:2113"]
    assert len(ets1) == 1 and ets1[0].name == "ETS1" and ets1[0].aliases == ("ETS-1", "EWSR2")
    assert dict(ets1[0].fields) == {"fullName": "ETS proto-oncogene 1, transcription factor"}
    assert ("NCBIGene:2113", "associatedWith", "OMIM:147791") in edges
    # a gene with GO annotations only joins the KB; one with neither does not
    tp53 = nodes["NCBIGene:7157"]
    assert tp53.iri_hint == "http://identifiers.org/ncbigene/7157"
    # an alias that is a word of another node's name (the GO term "nucleus") is text, not a name to link
    assert tp53.aliases == ("P53", "LFS1") and dict(tp53.fields)["otherSymbols"] == "NUCLEUS"
    assert any("1 gene aliases are words of other names" in w for w in report.warnings)
    assert "NCBIGene:100000001" not in nodes

    # annotations by aspect, with every evidence code of the pair; ND ("no data") is left out
    assert edges[("NCBIGene:2113", "involvedIn", "GO:0043065")] == {"evidence": "IDA, IMP"}
    assert edges[("NCBIGene:7157", "enables", "GO:0005515")] == {"evidence": "IPI"}
    assert edges[("NCBIGene:7157", "locatedIn", "GO:0005634")] == {"evidence": "IDA, TAS"}
    assert not any(tail == "GO:0003674" and rel == "enables" for _, rel, tail in edges)
    assert any("1 gene annotations with evidence ND" in w for w in report.warnings)
    assert any("name GO ids absent from GO.sqlite" in w for w in report.warnings)  # GO:0009999


def test_limit_keeps_hpo_genes_and_the_terms_they_need(hpo_folder, go_dir):
    records = list(BioImporter([hpo_folder], limit=1, doid="none", go=go_dir).records(ImportReport()))
    ids = {r.id for r in records if isinstance(r, Node)}
    # ETS1's term, the terms it is_a / regulates, up to the root; not TP53 nor its terms
    assert {"GO:0043065", "GO:0042981", "GO:0006915", "GO:0008150"} <= ids
    assert not ids & {"NCBIGene:7157", "GO:0005515", "GO:0005634"}


def test_built_kb_has_the_go_closure_and_documents(hpo_folder, go_dir, tmp_path):
    importer = BioImporter([hpo_folder], doid="none", go=str(go_dir))
    manifest = build_kb(importer, tmp_path / "kb")
    assert manifest["counts"]["skipped_edges"] == 0
    assert manifest["dataset"]["go_release"] == "2099-07-01"
    assert manifest["dataset"]["ncbi_gene_release"] == "2099-Sep12"
    # GO is_a is declared transitive from GOTerm to itself, so the build stores its closure
    assert {"https://w3id.org/kqe/bio#goIsA", "https://w3id.org/kqe/bio#isA"} <= set(
        json.dumps(manifest["hierarchies"]).replace('"', " ").split())
    kb = KnowledgeBase.open(tmp_path / "kb")
    ask = ("ASK { <http://purl.obolibrary.org/obo/GO_0043065> <https://w3id.org/kqe/core#subsumedBy> "
           "<http://purl.obolibrary.org/obo/GO_0008150> }")
    assert bool(kb.store.query(ask, use_default_graph_as_union=True))
    # a gene's document reads its GO annotations in the ontology's words
    text = kb.document("http://identifiers.org/ncbigene/7157").text
    assert "tumor protein p53" in text and "enables" in text and "protein binding" in text


def test_missing_files_fail_with_how_to_get_them(hpo_folder, tmp_path, monkeypatch):
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(KqeError, match=r"holds no GO.sqlite and no org.Hs.eg.sqlite.*apt-get download "
                                       r"r-bioc-go.db r-bioc-org.hs.eg.db.*--option go=DIR"):
        BioImporter([hpo_folder], doid="none", go=empty).dataset_info()
    with pytest.raises(KqeError, match="no such folder"):
        BioImporter([hpo_folder], doid="none", go=tmp_path / "absent").dataset_info()
    # go=yes: nothing cached, no R library, and no apt-get to fetch with
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(go, "R_LIBRARIES", ())
    monkeypatch.setenv("PATH", str(empty))
    with pytest.raises(KqeError, match="apt-get and dpkg-deb are not available"):
        list(BioImporter([hpo_folder], doid="none", go="yes").records(ImportReport()))


def test_a_file_that_is_not_the_packages_sqlite_names_it(hpo_folder, go_dir):
    org = next(go_dir.rglob("org.Hs.eg.sqlite"))
    org.write_text("not a database", encoding="utf-8")
    with pytest.raises(InputError, match="not a readable SQLite database") as info:
        list(BioImporter([hpo_folder], doid="none", go=go_dir).records(ImportReport()))
    assert info.value.where == str(org)
    org.unlink()
    sqlite_file(org, "CREATE TABLE genes (_id INTEGER PRIMARY KEY, gene_id VARCHAR(10));")
    with pytest.raises(InputError, match="no table gene_info, alias.*r-bioc-org.hs.eg.db"):
        list(BioImporter([hpo_folder], doid="none", go=go_dir).records(ImportReport()))


def test_go_is_off_unless_asked(hpo_folder):
    records = list(BioImporter([hpo_folder], doid="none").records(ImportReport()))
    assert not any(isinstance(r, Node) and r.type == "GOTerm" for r in records)
    assert go.locate("none") is None and go.locate(None) is None


REAL_FILES = ROOT / "data" / "cache" / "bioc"  # where `--option go=yes` keeps them


@pytest.mark.slow
@pytest.mark.skipif(not (REAL_FILES / "GO.sqlite").is_file(), reason="run `kqe-rdf kb build bio --option go=yes` first")
def test_real_debian_files_join_hpo_genes():
    report = ImportReport()
    records = list(BioImporter([], doid="none", go=REAL_FILES).records(report))
    nodes = {r.id: r for r in records if isinstance(r, Node)}
    types = [n.type for n in nodes.values()]
    assert types.count("GOTerm") == 43558  # GO.db 3.16.0 (go-basic 2022-07-01)
    assert types.count("Gene") > 20000
    fbn1 = nodes["NCBIGene:2200"]  # an HPO gene (Marfan syndrome), now with its NCBI names
    assert fbn1.name == "FBN1" and dict(fbn1.fields)["fullName"] == "fibrillin 1"
    assert not report.duplicate_nodes
    relations = {r.relation for r in records if isinstance(r, Edge)}
    assert {"goIsA", "partOf", "regulates", "enables", "involvedIn", "locatedIn", "associatedWith"} <= relations
