"""A user's own KGQA data: a `head<TAB>relation<TAB>tail` KG built with `kb build triples`, its questions read
with `eval irn` (issue 23, item 1). Tiny inline fixtures, the real command line, and bad input."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

import pytest

from kqe_rdf.core.errors import InputError
from kqe_rdf.evaluation.querysets import load_irn
from kqe_rdf.kb.build import build_kb
from kqe_rdf.kb.importers.triples import TriplesImporter
from kqe_rdf.kb.knowledge_base import KnowledgeBase

KG = """Ann_LEE\tplays_in_club\tFC_Lyon
FC_Lyon\tplays_in_club_inverse\tAnn_LEE
Bo_KIM\tplays_in_club\tFC_Nice
FC_Nice\tplays_in_club_inverse\tBo_KIM
FC_Lyon\tis_in_country\tFrance
FC_Nice\tis_in_country\tFrance
Ann_LEE\tplays_position\tDefender
Bo_KIM\tplays_position\tForward
Bo_KIM\tknows_inverse\tAnn_LEE
"""
QUESTIONS = """which club does Ann_LEE play for ?\tFC_Lyon\tAnn_LEE#plays_in_club#FC_Lyon#<end>#FC_Lyon\tFC_Lyon/
where is the club that Bo_KIM plays for ?\tFrance\tBo_KIM#plays_in_club#FC_Nice#is_in_country#France\tFrance/
name a player who plays at Defender position at the club FC_Lyon ?\tAnn_LEE\tDefender#plays_position_inverse#Ann_LEE#<end>#Ann_LEE*FC_Lyon#plays_in_club_inverse#Ann_LEE#<end>#Ann_LEE\tAnn_LEE/\textra
"""


@pytest.fixture(scope="module")
def kg(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("triples")
    (folder / "kb.txt").write_text(KG)
    (folder / "questions.txt.gz").write_bytes(gzip.compress(QUESTIONS.encode()))
    return folder


@pytest.fixture(scope="module")
def kg_kb(kg):
    build_kb(TriplesImporter([kg / "kb.txt"]), kg / "kb")
    return KnowledgeBase.open(kg / "kb")


def test_names_come_from_the_ids_and_the_ids_stay_aliases(kg_kb):
    from kqe_rdf.kb.linking import Linker

    doc = kg_kb.document(kg_kb.resolve_identifiers({"Ann_LEE"})["Ann_LEE"][0])
    assert doc.name == "Ann LEE"
    [mention] = Linker(kg_kb).mentions("where does Ann_LEE play")
    assert mention.text == "Ann_LEE" and mention.candidates[0].iri == doc.iri


def test_the_ontology_is_derived_and_an_exact_inverse_is_folded(kg_kb):
    schema = kg_kb.schema
    labels = {r.label for r in schema.relations.values()}
    assert {"plays in club", "is in country", "plays position", "knows inverse"} <= labels
    folded = schema.relation("plays_in_club_inverse")
    assert folded.inverse.endswith("#plays_in_club") and folded.label == "plays in club (inverse)"
    # the folded inverse is not stored; 'knows_inverse' has no 'knows' to be the inverse of: stored as it is
    counts = {r.rsplit("#", 1)[-1]: n for r, n in kg_kb.relation_counts.items() if n}
    assert counts == {"plays_in_club": 2, "is_in_country": 2, "plays_position": 2, "knows_inverse": 1}


def test_a_names_file_names_the_nodes(kg, tmp_path):
    names = tmp_path / "names.tsv"
    names.write_text("Ann_LEE\tAnn Lee-Park\n")
    build_kb(TriplesImporter([kg / "kb.txt"], names=str(names)), tmp_path / "kb")
    kb = KnowledgeBase.open(tmp_path / "kb")
    assert kb.document(kb.resolve_identifiers({"Ann_LEE"})["Ann_LEE"][0]).name == "Ann Lee-Park"


def test_a_pipe_separated_file_reads_the_same(tmp_path):
    (tmp_path / "kb.txt").write_text("Kismet|directed_by|William Dieterle\n")
    build_kb(TriplesImporter([tmp_path / "kb.txt"]), tmp_path / "kb")
    kb = KnowledgeBase.open(tmp_path / "kb")
    assert kb.resolve_identifiers({"William Dieterle"})["William Dieterle"]


@pytest.mark.parametrize("text, message", [
    ("a\tb\n", "3 fields separated by TAB"),
    ("a\tb\tc\td\n", "3 fields separated by TAB"),
    ("\n\n", "no head<TAB>relation<TAB>tail line"),
])
def test_bad_lines_are_refused_naming_the_file_and_line(tmp_path, text, message):
    (tmp_path / "kb.txt").write_text(text)
    with pytest.raises(InputError, match=message):
        list(TriplesImporter([tmp_path / "kb.txt"])._parsed())


def test_irn_questions_keep_the_text_and_every_answer_and_the_path_for_reports_only(kg):
    qs = load_irn(kg / "questions.txt.gz")
    assert [q.text for q in qs][0] == "which club does Ann_LEE play for ?"
    third = qs.queries[2]
    assert third.answers == {"Ann_LEE": 1}
    assert third.facets == {"path": "plays_position_inverse / plays_in_club_inverse", "relations": "2-relation",
                            "constraints": "2 constraints"}
    assert qs.queries[1].facets["relations"] == "2-relation" and "constraints" not in qs.queries[1].facets


def test_irn_refuses_a_line_without_its_columns(tmp_path):
    (tmp_path / "q.txt").write_text("who is it\tX\n")
    with pytest.raises(InputError, match="q.txt:1"):
        load_irn(tmp_path / "q.txt")


def test_irn_reads_pathquestions_own_layout_with_every_answer_in_parentheses(tmp_path):
    (tmp_path / "q.txt").write_text(
        " what is the gender of Let_Me_In 's artist ?\tMale(Male/)\tLet_Me_In#__music__album__artist#Michael_Giacchino"
        "#__people__person__gender#Male\n"
        "what is the tracks of X 's tracks ?\tX(X/Y/)\tX#__music__recording__tracks#X#__music__recording__tracks#X\n")
    first, second = load_irn(tmp_path / "q.txt")
    assert first.text == "what is the gender of Let_Me_In 's artist ?" and first.answers == {"Male": 1}
    assert first.facets == {"path": "__music__album__artist / __people__person__gender", "relations": "2-relation"}
    assert second.answers == {"X": 1, "Y": 1}


def test_build_and_eval_as_a_user_runs_them(kg, tmp_path):
    kb = tmp_path / "kb"
    run = [sys.executable, "-m", "kqe_rdf"]
    built = subprocess.run(run + ["kb", "build", "triples", str(kg / "kb.txt"), "--kb", str(kb), "--no-embed"],
                           capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stderr
    assert "read backwards: declared owl:inverseOf" in " ".join((built.stdout + built.stderr).split())
    done = subprocess.run(run + ["eval", "irn", str(kg / "questions.txt.gz"), "--kb", str(kb), "-m", "4step-offline",
                                 "--json"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    metrics = result["results"]
    assert [m["Hit@1"] for m in metrics] == [1.0], metrics


PLAIN = """<http://ex.org/ann> <http://www.w3.org/2000/01/rdf-schema#label> "Ann Smith" .
<http://ex.org/bob> <http://www.w3.org/2000/01/rdf-schema#label> "Bob Smith" .
<http://ex.org/carl> <http://www.w3.org/2000/01/rdf-schema#label> "Carl Jones" .
<http://ex.org/lyon> <http://www.w3.org/2000/01/rdf-schema#label> "Lyon" .
<http://ex.org/ann> <http://ex.org/vocab/parent> <http://ex.org/bob> .
<http://ex.org/ann> <http://ex.org/vocab/spouse> <http://ex.org/carl> .
<http://ex.org/carl> <http://ex.org/vocab/placeOfBirth> <http://ex.org/lyon> .
"""


def test_plain_rdf_without_classes_has_relations_and_is_read(tmp_path):
    """Issue 23, item 2: nodes with labels and object properties but no rdf:type get the default class."""
    from kqe_rdf.kb.importers.rdf import RdfImporter
    from kqe_rdf.methods.reading import OfflineTriplets

    (tmp_path / "people.nt").write_text(PLAIN)
    manifest = build_kb(RdfImporter([tmp_path / "people.nt"]), tmp_path / "kb")
    assert manifest["counts"]["edges"] == 3
    kb = KnowledgeBase.open(tmp_path / "kb")
    assert [local for local, _n in kb.info()["types"]] == ["Entity"]
    reading = OfflineTriplets(kb)("where was Ann Smith's husband born")
    assert [t.relation.rsplit("/", 1)[-1] for t in reading.triplets] == ["spouse", "placeOfBirth"]


def test_gold_answers_written_as_names_resolve_on_a_kb_whose_ids_are_iris(tmp_path):
    from kqe_rdf.kb.importers.rdf import RdfImporter

    (tmp_path / "people.nt").write_text(PLAIN)
    build_kb(RdfImporter([tmp_path / "people.nt"]), tmp_path / "kb")
    kb = KnowledgeBase.open(tmp_path / "kb")
    assert kb.resolve_identifiers({"Lyon"}) == {}
    assert kb.resolve_identifiers({"Lyon"}, by_name=True) == {"Lyon": ["http://ex.org/lyon"]}


def test_rdf_nodes_without_text_are_named_from_their_iris_and_keep_their_edges(tmp_path):
    """Issue 36, item 6: IRIs only, and a Turtle value node with no label (``schema:Female``)."""
    from kqe_rdf.kb.importers.rdf import RdfImporter

    (tmp_path / "people.nt").write_text(
        "<http://ex.org/Ann_Smith> <http://ex.org/v/parent> <http://ex.org/Bob_Smith> .\n"
        "<http://ex.org/Bob_Smith> <http://ex.org/v/placeOfBirth> <http://ex.org/Lyon> .\n"
        "<http://ex.org/Bob_Smith> <http://ex.org/v/age> \"61\" .\n"
        "_:b1 <http://ex.org/v/parent> <http://ex.org/Ann_Smith> .\n")
    manifest = build_kb(RdfImporter([tmp_path / "people.nt"]), tmp_path / "kb")
    assert manifest["counts"]["nodes"] == 3 and manifest["counts"]["edges"] == 2
    assert manifest["counts"]["skipped_edges"] == 1  # the blank node's statement: reported, not silently lost
    [unnamed] = [w for w in manifest["warnings"] if w.startswith("3 nodes have no literal in a text property: "
                                                                 "named from their IRIs")]
    assert "the file's literal properties by use" in unnamed and "--label-property" in unnamed
    kb = KnowledgeBase.open(tmp_path / "kb")
    assert kb.resolve_identifiers({"Bob Smith"}, by_name=True) == {"Bob Smith": ["http://ex.org/Bob_Smith"]}

    (tmp_path / "people.ttl").write_text(
        "@prefix schema: <https://schema.org/> . @prefix owl: <http://www.w3.org/2002/07/owl#> .\n"
        "@prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> .\n"
        "schema:gender a owl:ObjectProperty ; rdfs:label \"gender\" .\n"
        "<http://ex.org/ann> a schema:Person ; schema:name \"Ann\" ; rdfs:label \"Ann\" ; schema:gender schema:Female .\n")
    manifest = build_kb(RdfImporter([tmp_path / "people.ttl"]), tmp_path / "kb2")
    assert manifest["counts"]["edges"] == 1 and manifest["counts"]["nodes"] == 2  # Ann and Female, not the property
    kb = KnowledgeBase.open(tmp_path / "kb2")
    assert kb.document("https://schema.org/Female").name == "Female"
