"""`kqe-rdf demo` on a small real bio KB (HPO-format files through the bio importer, no dense index).

The demo's requests are written for the full HPO KB; here they show that every section runs, in its order,
with its provenance, and that the hybrid section embeds its own candidates when the KB has no dense index.
"""

from __future__ import annotations

import re

from click.testing import CliRunner

from support.fixtures_kb import write_hpo
from kqe_rdf.kb.build import build_kb
from kqe_rdf.cli import cli
from kqe_rdf.kb.importers.bio import BioImporter


def test_the_demo_shows_each_method_with_its_provenance_in_order(tmp_path, monkeypatch):
    source = write_hpo(tmp_path / "hpo")
    build_kb(BioImporter([source]), tmp_path / "kb")  # no `kb embed`: the demo must not need one
    monkeypatch.setenv("COLUMNS", "200")

    result = CliRunner().invoke(cli, ["demo", "--kb", str(tmp_path / "kb")])
    assert result.exit_code == 0, result.output
    out = " ".join(result.output.split())  # rich wraps long lines
    sections = ["1. A phenotype list, answered by the structural method (4step-offline)",
                "2. SPARQL with a search inside it", "3. Query expansion with KG knowledge (kar-offline)",
                "4. Hybrid search: BM25 + dense vectors"]
    assert [out.index(s) for s in sections] == sorted(out.index(s) for s in sections)
    structural = out[out.index(sections[0]):out.index(sections[1])]
    assert "first answer" in structural and "s after start" in structural
    assert "(?x, hasPhenotype, seizures)" in structural  # the triplets it read
    assert "linked 'seizures' → Seizure (exact" in structural
    assert "SELECT DISTINCT" in structural and "hasPhenotype" in structural  # the SPARQL
    # why the first answers were chosen: the hierarchy match of each request term, with the annotation behind it
    assert ("Generalized epilepsy with forehead anomaly because Seizure (IC 0.405): annotated with Bilateral "
            "tonic-clonic seizure") in structural
    assert "Frontal bossing syndrome │ OMIM:100002 │ -1.069 │ top-up" in structural  # no seizures: below the paths
    # the bare list a user types reads the same relation, from the graph
    bare = structural[structural.index("the same as a bare list"):]
    assert "read: (?x, hasPhenotype, seizures)" in bare and "read from the graph" in bare
    assert "provenance: the search block ran bm25" in out
    assert "KG facts it came from" in out
    hybrid = out[out.index(sections[3]):]
    assert "BM25 candidates of this request, embedded in the background" in hybrid
    assert "bm25 rank" in hybrid and "dense rank" in hybrid
    assert re.search(r"\(\(BM25\(k=100\) \+ Dense\(over \d+ candidates\)\) % 10\)", hybrid)  # as PyTerrier writes it
    assert ">> %" not in out
    assert not (tmp_path / "kb" / "embeddings").exists()  # the KB itself is left as it was
