"""``ask`` answers with the structural reader's grounded reading first, and reads from text what the graph lacks.

On the tiny movie KB (``fixtures_kb.MOVIES``) the evidence reader alone (``qa_grounded=False``) picks a wrong
answer for a question 4StepFocus reads right; with the grounded reading first, ``ask`` gives 4step-offline's
ranked answers and cites the facts along the path. On the same triples built as an incomplete KB
(``kg_fraction=0.5``, seed 3: Kismet's and The Seventh Seal's directors, Kismet's release year and all of
William Dieterle's films are only sentences of the films' documents), ``kg`` alone cannot answer and
``kg,text`` reads the sentences.
"""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from support.fixtures_kb import MOVIES, bio_kb, metaqa_kb, movie_kb, names, node  # noqa: F401 - fixtures
from kqe_rdf.cli import cli
from kqe_rdf.core.config import Settings
from kqe_rdf.core.errors import KqeError
from kqe_rdf.kb.knowledge_base import KnowledgeBase
from kqe_rdf.methods.answering import QuestionAnswering
from kqe_rdf.methods.answering.answer import Reading
from kqe_rdf.methods.answering.grounded import Grounded
from kqe_rdf.methods.answering.tables import register_table
from kqe_rdf.methods.registry import pipeline

M = "https://w3id.org/kqe/metaqa#"
SETTINGS = Settings(qa_pool_size=200, qa_prune_stages="40,10")
QUESTION = "who directed the films that share actors with Taxi Driver"  # Heat shares Robert De Niro: Michael Mann


@pytest.fixture(scope="module")
def movies(tmp_path_factory) -> KnowledgeBase:
    """The movie KB of its own (the text source writes a sentence index into it)."""
    return metaqa_kb(tmp_path_factory.mktemp("grounded-movies"), MOVIES)


def test_a_grounded_reading_answers_with_4step_offlines_first_result_and_cites_its_path(movies):
    before = QuestionAnswering(movies, Settings(qa_pool_size=200, qa_prune_stages="40,10", qa_grounded=False))
    four_step = pipeline("4step-offline", movies, Settings(), 10)

    wrong = before(QUESTION, ("kg", "text"))
    result = QuestionAnswering(movies, SETTINGS)(QUESTION, ("kg", "text"))

    assert wrong.answer == "Robert De Niro"  # the evidence reader: the actor the facts around Taxi Driver name most
    assert result.answer == "Michael Mann" == names(movies, four_step.search(QUESTION))[0]
    assert result.method == "4step-offline (grounded reading)" and result.pruning is None
    assert [e.text for e in result.evidence] == ["Taxi Driver starred actors Robert De Niro",
                                                 "Heat starred actors Robert De Niro", "Heat directed by Michael Mann"]
    assert result.path["relations"] == ["starred actors", "starred actors", "directed by"]
    assert result.path["reading"][0]["constant"] == "Taxi Driver"
    for head, relation, tail in result.path["facts"]:  # every fact cited is an edge of the store
        assert movies.store.query(f"ASK {{ <{head}> <{relation}> <{tail}> }}")
    assert result.path["facts"][-1] == [node(movies, "Heat"), M + "directed_by", node(movies, "Michael Mann")]


def test_the_candidates_are_4step_offlines_ranked_answers(movie_kb):
    question = "which films have the same director as Unforgiven"

    result = QuestionAnswering(movie_kb, SETTINGS)(question, ("kg", "text"))
    ranked = names(movie_kb, pipeline("4step-offline", movie_kb, Settings(), 10).search(question))

    assert [c.name for c in result.candidates] == ranked[: len(result.candidates)] == \
        ["The Bridges of Madison County", "Gran Torino"]
    assert result.candidates[0].evidence == [e.id for e in result.evidence] and not result.candidates[1].evidence
    assert "Unforgiven" not in [c.name for c in result.candidates]  # the question's own film, as in 4step


def test_a_phenotype_list_is_answered_with_the_annotations_that_match_each_term(bio_kb):
    question = "A patient presents with focal-onset seizure and intellectual disability. Which disease explains this?"

    result = QuestionAnswering(bio_kb, SETTINGS)(question, ("kg",))

    assert result.answer == "Focal epilepsy type 1"
    assert {e.text for e in result.evidence} == {
        "Focal epilepsy type 1 has phenotype Focal-onset seizure (for Focal-onset seizure)",
        "Focal epilepsy type 1 has phenotype Intellectual disability (for Intellectual disability)"}
    assert {e.origin["term"] for e in result.evidence} == {node(bio_kb, "HP:0007359"), node(bio_kb, "HP:0001249")}


def test_without_a_grounded_reading_the_evidence_pipeline_answers(movie_kb):
    qa = QuestionAnswering(movie_kb, SETTINGS)

    nothing = qa("who painted the Mona Lisa", ("kg",))

    assert nothing.answer is None and nothing.method == "offline" and nothing.path is None
    assert nothing.flags == ["no candidate answer in the evidence"]
    with pytest.raises(KqeError, match="qa_grounded_depth must be at least 1"):
        Settings(qa_grounded_depth=0)


# ------------------------------------------------------------------ what the graph lacks


@pytest.fixture(scope="module")
def half_kb(tmp_path_factory) -> KnowledgeBase:
    """The movie triples as an incomplete KB: half of the edges (seed 3) only as sentences of their heads."""
    return metaqa_kb(tmp_path_factory.mktemp("half-movies"), MOVIES, kg_fraction="0.5", seed="3")


def test_the_incomplete_kb_has_the_edges_these_tests_ask_about_as_text_only(half_kb):
    kismet = half_kb.document(node(half_kb, "Kismet")).text
    assert "Kismet directed by William Dieterle." in kismet and "directed by:" not in kismet
    assert "Kismet release year 1944." in kismet
    assert "directed:" not in half_kb.document(node(half_kb, "William Dieterle")).text  # no film of his in the graph
    assert "directed by: Ingmar Bergman" in half_kb.document(node(half_kb, "Wild Strawberries")).text


@pytest.mark.parametrize(("question", "answer", "sentence", "flag"), [
    ("who directed Kismet", "William Dieterle", "Kismet — Kismet directed by William Dieterle.",
     "the graph's reading leaves directed unread"),  # kg reads a path around the missing edge: an actor
    ("when was Kismet released", "1944", "Kismet — Kismet release year 1944.",
     "hops no word names: in language, language of"),  # kg: the year of another English film
    ("which films did William Dieterle direct", "Kismet", "Kismet — Kismet directed by William Dieterle.",
     "no grounded reading"),  # the edge read from its tail: the sentence is in the film's document
])
def test_with_text_ask_reads_the_relation_the_graph_lacks_from_sentences(half_kb, question, answer, sentence, flag):
    qa = QuestionAnswering(half_kb, SETTINGS)

    graph = qa(question, ("kg",))
    both = qa(question, ("kg", "text"))

    assert graph.answer != answer
    assert both.answer == answer and both.method.startswith("text facts")
    assert sentence in [e.text for e in both.evidence] and both.flags == [flag]
    assert both.evidence[0].origin["document"] == node(half_kb, "Kismet")


TITLES = """\
Straight Shooting|directed_by|John Ford
Directed by John Ford|directed_by|Peter Bogdanovich
Bully|written_by|Lee Hirsch
Creator|written_by|Jeremy Leven
"""


@pytest.mark.parametrize(("question", "answer"), [
    ("who directed Straight Shooting", "John Ford"),  # not the film "Directed by John Ford" the sentence contains
    ("who is the creator of the film script for Bully", "Lee Hirsch"),  # "creator" names a film too: not Bully's
])
def test_text_facts_read_the_names_on_each_side_of_the_relation(tmp_path, question, answer):
    kb = metaqa_kb(tmp_path, TITLES, kg_fraction="0")  # every edge a sentence: no reading of the graph at all

    result = QuestionAnswering(kb, SETTINGS)(question, ("kg", "text"))

    assert kb.manifest["counts"]["edges"] == 0
    assert result.answer == answer and result.flags == ["no grounded reading"]


def test_text_facts_read_one_fact_not_a_list(half_kb):
    qa = QuestionAnswering(half_kb, SETTINGS)
    one, listed = "who directed Kismet", "who directed Kismet, Heat, Alien and Witness"

    assert qa.text_facts(one, qa.offline_intent(one))[0].answer.name == "William Dieterle"
    assert qa.text_facts(listed, qa.offline_intent(listed)) is None  # four films: a list, left to the graph


def test_a_list_of_constants_is_no_one_hop_question_whose_edge_is_missing():
    """A phenopacket reads one relation from every listed phenotype; a word such as "decreased" in a phenotype's
    name that names a relation elsewhere does not make it a one-fact question for the text."""
    reading = Reading(None, [], "test")
    one = Grounded(reading, [], {"reading": [{"constant": "Kismet"}]}, unread=["decreased"], named=0)
    listed = Grounded(reading, [], {"reading": [{"constant": f"term {i}"} for i in range(4)]}, unread=["decreased"])

    assert one.weak and not listed.weak
    assert not Grounded(reading, [], {"reading": [{"constant": "X"}]}, unnamed=["has tags"], named=2).weak


def test_an_edge_the_graph_has_is_still_answered_by_the_grounded_reading(half_kb):
    result = QuestionAnswering(half_kb, SETTINGS)("who directed Wild Strawberries", ("kg", "text"))

    text_only = QuestionAnswering(half_kb, SETTINGS)("who directed Wild Strawberries", ("text",))

    assert result.answer == "Ingmar Bergman" and result.method == "4step-offline (grounded reading)"
    assert [e.text for e in result.evidence] == ["Wild Strawberries directed by Ingmar Bergman"]
    assert text_only.answer == "Ingmar Bergman" and text_only.method.startswith("text facts")  # no graph read
    assert [e.text for e in text_only.evidence] == ["Wild Strawberries — directed by: Ingmar Bergman",
                                                    "Ingmar Bergman — directed: Wild Strawberries"]  # both ends


def test_a_relation_moved_into_a_table_is_read_from_the_table_not_from_a_path_around_it(tmp_path):
    without_years = "\n".join(line for line in MOVIES.splitlines() if "|release_year|" not in line) + "\n"
    kb = metaqa_kb(tmp_path / "years", without_years)
    (tmp_path / "years.csv").write_text("movie,release year\nKismet,1944\n", encoding="utf-8")
    register_table(kb, tmp_path / "years.csv", "movie")

    result = QuestionAnswering(kb, SETTINGS)("when was Kismet released", ("kg", "tables"))

    assert result.answer == "1944" and result.method == "offline"  # the evidence pipeline, which reads the rows
    assert [e.origin for e in result.evidence] == [{"table": "years", "row": 1}]


def test_ask_shows_the_path_and_json_holds_the_reading(half_kb):
    runner = CliRunner()

    shown = runner.invoke(cli, ["ask", "who directed Wild Strawberries", "--kb", str(half_kb.path), "--offline",
                                "--sources", "kg"])
    data = json.loads(runner.invoke(cli, ["ask", "who directed Kismet", "--kb", str(half_kb.path), "--offline",
                                          "--sources", "kg,text", "--json"]).output)

    assert shown.exit_code == 0, shown.output
    assert "answer: Ingmar Bergman" in shown.output
    assert "because [path-0] Wild Strawberries directed by Ingmar Bergman" in shown.output
    assert "path Wild Strawberries: directed by" in shown.output
    assert data["answer"] == "William Dieterle" and data["path"] is None
    assert data["evidence"][0]["origin"]["relation"] == M + "directed_by"
