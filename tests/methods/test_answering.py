"""Question answering over KG, text and tables (``kqe_rdf.methods.answering``) on the tiny movie KB.

Each stage is shown on its own — intent, evidence from each source, pruning, the offline
and the LLM reader — and then the whole pipeline through ``answer()`` and ``kqe-rdf ask``, with the
grounded reading that answers before it turned off (``EVIDENCE``; that stage: ``test_grounded_answers.py``).
The LLM path talks to the scripted chat server (``chat_server``) through the real client;
what the "model" says is written next to each test. Tests that add a sentence index or
tables build their own copy of the movie KB (``movie_copy``), since the shared one is read-only.
"""

from __future__ import annotations

import json
import re

import pytest
from support.chat_server import chat_server, error, malformed  # noqa: F401 (fixture)
from click.testing import CliRunner

from support.fixtures_kb import MOVIES, metaqa_kb, movie_kb, node  # noqa: F401 - fixtures
from kqe_rdf.methods.answering import QuestionAnswering, answer, check_sources
from kqe_rdf.methods.answering.answer import LLMReader, OfflineReader
from kqe_rdf.methods.answering.evidence import (EntityRef, Evidence, KGFacts, NameFinder, SentenceIndex, TextSentences,
                                        document_sentences)
from kqe_rdf.methods.answering.focus import FocusCandidates
from kqe_rdf.methods.answering.intent import LLMIntent, OfflineIntent
from kqe_rdf.methods.answering.pruning import Pruner, Ranked, TextPool
from kqe_rdf.methods.answering.tables import list_tables, load_tables, register_table
from kqe_rdf.kb.build import build_kb
from kqe_rdf.cli import cli
from kqe_rdf.core.config import Settings
from kqe_rdf.core.errors import InputError, KqeError
from kqe_rdf.kb.importers.metaqa import MetaQAImporter
from kqe_rdf.kb.knowledge_base import KnowledgeBase
from kqe_rdf.kb.linking import Linker
from kqe_rdf.llm.client import LLM

M = "https://w3id.org/kqe/metaqa#"
#: The evidence pipeline on its own: the grounded reading that answers first is off (tests/methods/test_grounded_answers.py).
EVIDENCE = Settings(qa_pool_size=200, qa_prune_stages="40,10", qa_grounded=False)


def build_movies(folder, lines: str) -> KnowledgeBase:
    return metaqa_kb(folder, lines)


@pytest.fixture(scope="module")
def movie_copy(tmp_path_factory) -> KnowledgeBase:
    """The movie KB built again in this module's own folder (no embeddings: answering needs none)."""
    return build_movies(tmp_path_factory.mktemp("qa-movies"), MOVIES)


@pytest.fixture(scope="module")
def qa(movie_kb) -> QuestionAnswering:
    return QuestionAnswering(movie_kb, EVIDENCE)


@pytest.fixture
def llm_settings(chat_server):
    return Settings(llm_base_url=chat_server.url, llm_model="scripted", llm_cache="off", llm_timeout=0.5,
                    llm_max_retries=0, llm_backoff=0.01, qa_pool_size=200, qa_prune_stages="40,10", qa_grounded=False)


def write(path, text: str):
    path.write_text(text, encoding="utf-8")
    return path


# ------------------------------------------------------------------ intent


def test_the_offline_intent_names_answer_type_entities_and_relation(movie_kb):
    intent = OfflineIntent(movie_kb)("who directed Kismet")

    assert intent.answer_types == [M + "Person"]
    assert [(e.text, e.iris) for e in intent.entities] == [("Kismet", (node(movie_kb, "Kismet"),))]
    assert intent.relation == "directed"
    assert M + "directed_by" in intent.relations
    assert intent.source == "offline" and intent.notes == []


def test_the_offline_intent_reads_time_cues_and_says_when_no_entity_is_named(movie_kb):
    intent = OfflineIntent(movie_kb)("which films came out after 1990 about nothing known")

    assert intent.time == ["1990", "after"]
    assert intent.notes == ["no entity of the KB is named in the question"]


def intent_json(**frame) -> str:
    return json.dumps({"answer_type": None, "entities": [], "relation": "", "time": [], "location": [], **frame})


def test_the_llm_intent_is_checked_against_the_ontology_and_the_question(movie_kb, chat_server):
    chat_server.script(intent_json(answer_type="Person", entities=["Kismet", "Casablanca"], relation="directed by"))
    llm = LLM(model="scripted", base_url=chat_server.url, max_retries=0)

    intent = LLMIntent(movie_kb, llm, OfflineIntent(movie_kb))("who directed Kismet")

    assert intent.source == "llm:scripted"
    assert intent.answer_types == [M + "Person"]
    assert [e.text for e in intent.entities] == ["Kismet"]
    assert intent.notes == ["entity 'Casablanca' is not in the question; dropped"]
    assert "Movie -> Person" in chat_server.prompt(0)  # the schema comes from the ontology


def test_an_answer_type_the_ontology_lacks_is_dropped_and_the_offline_one_kept(movie_kb, chat_server):
    chat_server.script(intent_json(answer_type="Filmmaker", entities=["Kismet"], relation="directed"))
    llm = LLM(model="scripted", base_url=chat_server.url, max_retries=0)

    intent = LLMIntent(movie_kb, llm, OfflineIntent(movie_kb))("who directed Kismet")

    assert intent.answer_types == [M + "Person"]
    assert "answer type dropped" in intent.notes[0] and "Filmmaker" in intent.notes[0]


@pytest.mark.parametrize("reply", [malformed("<html>busy</html>"), error(500), "I think it is about Kismet."],
                         ids=["html", "http-500", "prose"])
def test_an_unusable_llm_intent_falls_back_to_the_offline_one(movie_kb, chat_server, reply):
    chat_server.script(reply, reply)
    llm = LLM(model="scripted", base_url=chat_server.url, max_retries=0)

    intent = LLMIntent(movie_kb, llm, OfflineIntent(movie_kb))("who directed Kismet")

    assert intent.source == "offline (after LLM failure)"
    assert intent.answer_types == [M + "Person"] and [e.text for e in intent.entities] == ["Kismet"]
    assert "the offline intent is used" in intent.notes[0]


# ------------------------------------------------------------------ evidence


def test_kg_facts_are_sentences_that_keep_their_triple(movie_kb):
    facts = KGFacts(movie_kb, Linker(movie_kb).index, hops=1)
    kismet = node(movie_kb, "Kismet")

    found = facts.collect([kismet], lambda texts: [0.0] * len(texts))

    fact = next(e for e in found if e.text == "Kismet directed by William Dieterle")
    assert fact.source == "kg" and fact.hop == 1
    assert fact.origin == {"head": kismet, "relation": M + "directed_by", "tail": node(movie_kb, "William Dieterle")}
    assert fact.nodes == {kismet, node(movie_kb, "William Dieterle")}
    assert len(found) == 8  # every edge of Kismet, once


def test_the_walk_goes_on_from_the_best_fitting_facts_only(movie_kb):
    facts = KGFacts(movie_kb, Linker(movie_kb).index, hops=2, expand_nodes=1)
    jeunet = node(movie_kb, "Jean-Pierre Jeunet")

    found = facts.collect([jeunet], lambda texts: [1.0 if "Delicatessen" in t else 0.0 for t in texts])

    assert {e.text for e in found if e.hop == 2} >= {"Delicatessen in language French", "Delicatessen has genre Comedy"}
    assert not any("Audrey Tautou" in e.text for e in found)  # Amélie was not the best fit: not walked from


def test_hubs_further_out_add_no_facts(movie_kb):
    facts = KGFacts(movie_kb, Linker(movie_kb).index, hops=2, expand_nodes=10, facts_per_node=4)
    kismet = node(movie_kb, "Kismet")

    found = facts.collect([kismet], lambda texts: [1.0] * len(texts))

    assert len([e for e in found if e.hop == 1]) == 4  # the question entity: capped, not dropped
    assert not any("English" in e.text for e in found if e.hop == 2)  # English has more than 4 movies


def test_document_sentences_drop_name_and_type_lines_and_keep_the_node():
    doc = "name: Kismet\ntype: movie\ndirected by: William Dieterle\nrelease year: 1944"

    assert document_sentences("Kismet", doc) == ["Kismet — directed by: William Dieterle",
                                                 "Kismet — release year: 1944"]


def test_text_evidence_comes_from_a_sentence_index_built_once_in_the_kb(movie_copy):
    text = TextSentences(movie_copy, NameFinder(Linker(movie_copy).index), hits=5)

    found = text.collect("films in Swedish", [])

    assert (movie_copy.path / "sentences" / "sentences.json").is_file()
    swedish = next(e for e in found if e.text.startswith("Swedish — language of:"))
    assert swedish.origin == {"document": node(movie_copy, "Swedish"), "sentence": 0}
    assert {e.name for e in swedish.entities} == {"Swedish", "The Seventh Seal", "Wild Strawberries"}
    assert SentenceIndex(movie_copy).search("Seventh Seal", 1)[0][0] in {node(movie_copy, "The Seventh Seal"),
                                                                         node(movie_copy, "Max von Sydow"),
                                                                         node(movie_copy, "Ingmar Bergman"),
                                                                         node(movie_copy, "1957"),
                                                                         node(movie_copy, "Swedish")}


# ------------------------------------------------------------------ tables


@pytest.fixture
def table_kb(tmp_path) -> KnowledgeBase:
    """A movie KB of its own (tables are written into it)."""
    return build_movies(tmp_path, MOVIES)


def test_a_registered_table_is_stored_in_the_kb_with_rows_linked_through_the_entity_column(table_kb, tmp_path):
    csv = write(tmp_path / "Box Office.csv", "movie,gross\nHeat,187 million\nKismet,2 million\nNo Such Film,1\n")

    info = register_table(table_kb, csv, "movie")

    assert info["name"] == "box_office" and info["rows"] == 3 and info["linked_rows"] == 2
    assert info["unlinked_examples"] == ["No Such Film"]
    assert [t["name"] for t in list_tables(table_kb.path)] == ["box_office"]
    [table] = load_tables(table_kb.path)
    heat = table.rows[0]
    assert heat.nodes == (node(table_kb, "Heat"),)  # the movie, not the tag "heat": the column links to movies
    assert table.text(heat) == "box_office / movie: Heat, gross: 187 million"


def test_rebuilding_the_kb_keeps_its_registered_tables(table_kb, tmp_path):
    register_table(table_kb, write(tmp_path / "t.csv", "movie,gross\nHeat,1\n"), "movie")

    build_kb(MetaQAImporter([tmp_path / "src"]), table_kb.path)

    assert [r.values for r in load_tables(table_kb.path)[0].rows] == [("Heat", "1")]


def test_tsv_files_are_read_with_tabs(table_kb, tmp_path):
    tsv = write(tmp_path / "awards.tsv", "film\taward\nUnforgiven\tBest Picture, 1993\n")

    register_table(table_kb, tsv, "film")

    [table] = load_tables(table_kb.path)
    assert table.text(table.rows[0]) == "awards / film: Unforgiven, award: Best Picture, 1993"


@pytest.mark.parametrize("content, message", [
    ("", "the file is empty"),
    ("film,gross\nHeat,1\n", "no column 'movie' for --entity-column; the columns are film, gross"),
    ("movie,gross\nHeat,1\nKismet,2,3\n", "t.csv:3: expected 2 cells"),
    ("movie,movie\nHeat,1\n", "column name(s) movie appear more than once"),
    ("movie,gross\n", "a header but no rows"),
])
def test_bad_tables_are_refused_with_the_place_of_the_error(table_kb, tmp_path, content, message):
    with pytest.raises(InputError, match=re.escape(message)):
        register_table(table_kb, write(tmp_path / "t.csv", content), "movie")
    assert list_tables(table_kb.path) == []


def test_registering_a_name_twice_needs_replace_and_a_failed_replace_keeps_the_old_table(table_kb, tmp_path):
    register_table(table_kb, write(tmp_path / "t.csv", "movie,gross\nHeat,1\n"), "movie")

    with pytest.raises(KqeError, match="already registered; pass --replace"):
        register_table(table_kb, write(tmp_path / "t.csv", "movie,gross\nKismet,2\n"), "movie")
    with pytest.raises(InputError):
        register_table(table_kb, write(tmp_path / "t.csv", "movie,gross\nKismet,2,3\n"), "movie", replace=True)
    assert [r.values for r in load_tables(table_kb.path)[0].rows] == [("Heat", "1")]

    register_table(table_kb, write(tmp_path / "t.csv", "movie,gross\nKismet,2\n"), "movie", replace=True)
    assert [r.values for r in load_tables(table_kb.path)[0].rows] == [("Kismet", "2")]
    assert not [p for p in (table_kb.path / "tables").iterdir() if p.name.startswith(".")]


@pytest.fixture(scope="module")
def years_kb(tmp_path_factory) -> KnowledgeBase:
    """The movie KB with its release years moved out of the graph into a registered table "years"."""
    folder = tmp_path_factory.mktemp("qa-years")
    without_years = "\n".join(line for line in MOVIES.splitlines() if "|release_year|" not in line) + "\n"
    kb = build_movies(folder, without_years)
    years = "\n".join(f"{m},{y}" for m, _r, y in (line.split("|") for line in MOVIES.splitlines())
                      if _r == "release_year")
    register_table(kb, write(folder / "years.csv", "movie,release year\n" + years + "\n"), "movie")
    return kb


def test_a_relation_moved_from_the_graph_into_a_table_still_answers_questions(years_kb):
    qa = QuestionAnswering(years_kb, EVIDENCE)

    from_table = qa("when was Kismet released", ("kg", "tables"))
    graph_only = qa("when was Kismet released", ("kg",))

    assert from_table.answer == "1944"
    assert [e.origin for e in from_table.evidence] == [{"table": "years", "row": 1}]
    assert from_table.evidence[0].text == "years / movie: Kismet, release year: 1944"
    assert graph_only.answer != "1944"


def test_table_rows_are_read_for_the_nodes_whose_facts_the_walk_read_with_their_hop(years_kb):
    qa = QuestionAnswering(years_kb, Settings(qa_pool_size=200, qa_prune_stages="40,10", qa_kg_hops=2))
    intent = qa.intent("when was Kismet released")

    rows = {e.text: e.hop for e in qa.collect("when was Kismet released", intent, ("kg", "tables"))
            if e.source == "tables"}

    assert rows["years / movie: Kismet, release year: 1944"] == 1  # the asked film's own row: one edge away
    # Two hops read the facts of Kismet and of its neighbours (English, William Dieterle, ...): the films those
    # facts name (Unforgiven is "in language English") are reached, not read, so their rows stay out and
    # cannot outvote Kismet's own row.
    assert not any("Unforgiven" in text or "Hunchback" in text for text in rows)


def test_with_no_answer_type_the_relation_phrase_picks_the_value_from_the_table_or_the_graph(years_kb, movie_kb):
    question = "what was the release date of Kismet"  # "date" is no class cue: the frame has no answer type

    from_table = QuestionAnswering(years_kb, EVIDENCE)(question, ("kg", "text", "tables"))
    from_graph = QuestionAnswering(movie_kb, EVIDENCE)(question, ("kg", "text"))

    assert from_table.intent.answer_types == [] and from_table.intent.relation == "release date"
    assert from_table.answer == from_graph.answer == "1944"
    assert from_table.evidence[0].origin == {"table": "years", "row": 1}  # the column "release year" matches
    assert from_graph.candidates[0].type_match is None  # a relation match, not a type match


# ------------------------------------------------------------------ structural candidates (4StepFocus)


def test_4stepfocus_hits_are_kg_evidence_that_keeps_the_paths_they_satisfy(qa, movie_kb):
    intent = qa.intent("who directed Kismet")

    [hit] = qa.focus.collect("who directed Kismet", intent.answer_types, intent.seeds)

    assert hit.source == "kg" and hit.id == "focus-0"
    assert hit.text == "Kismet directed by William Dieterle"  # the satisfied path, with the hit in the answer's place
    assert hit.origin["node"] == node(movie_kb, "William Dieterle") and hit.origin["rank"] == 1
    assert hit.origin["bindings"][0]["x"] == node(movie_kb, "William Dieterle")
    assert node(movie_kb, "Kismet") in hit.origin["bindings"][0].values()
    assert hit.origin["triplets"][0]["relation"] == M + "directed_by"
    assert hit.prior == pytest.approx(1.0, abs=0.01)  # one path only this node satisfies (+ a similarity tie-break)
    assert hit.nodes == {node(movie_kb, "William Dieterle"), node(movie_kb, "Kismet")}


def test_a_question_with_many_constraints_is_answered_by_the_node_that_satisfies_most(qa, movie_kb):
    question = "which movies starred Clint Eastwood and Gene Hackman"

    hits = qa.focus.collect(question, [M + "Movie"], qa.intent(question).seeds)
    result = qa(question, ("kg",))

    assert [h.origin["node"] for h in hits] == [node(movie_kb, "Unforgiven"), node(movie_kb, "Gran Torino")]
    assert hits[0].prior > 2 * hits[1].prior  # both paths (one only Unforgiven satisfies) against one
    assert hits[0].text == "Unforgiven starred actors Gene Hackman; Unforgiven starred actors Clint Eastwood"
    assert result.answer == "Unforgiven" and "focus-0" in [e.id for e in result.evidence]


def test_hits_tied_with_the_best_hit_not_shown_carry_no_weight(qa, movie_kb):
    question = "which movies are in English"  # five films satisfy the one path equally well
    seeds = qa.intent(question).seeds

    one = FocusCandidates(movie_kb, qa.linker, qa.offline_intent.reader, hits=1).collect(question, [M + "Movie"], seeds)
    every = FocusCandidates(movie_kb, qa.linker, qa.offline_intent.reader, hits=10).collect(question, [M + "Movie"],
                                                                                            seeds)

    assert len(one) == 1 and one[0].prior < 0.01  # it beats the films not shown by a similarity tie-break only
    assert len(every) == 5 and all(p.prior > 0.5 for p in every)  # nothing left out: each keeps its whole path


def test_the_reader_counts_a_structural_piece_as_the_paths_its_node_satisfies(qa, movie_kb):
    intent = qa.intent("who directed Kismet")
    pieces = qa.collect("who directed Kismet", intent, ("kg",))
    directed = next(Ranked(e, 1.0) for e in pieces if e.text == "Kismet directed by William Dieterle")
    other = Evidence("focus-0", "kg", "Kismet starred actors Ronald Colman", (EntityRef("Ronald Colman", (
        node(movie_kb, "Ronald Colman"),)),), {"node": node(movie_kb, "Ronald Colman")}, hop=1, prior=6.0)

    weighed = OfflineReader(movie_kb, qa.linker.index)(intent.question, intent, [Ranked(other, 1.0), directed])
    ignored = OfflineReader(movie_kb, qa.linker.index, prior_weight=0.0)(intent.question, intent,
                                                                         [Ranked(other, 1.0), directed])

    assert weighed.answer.name == "Ronald Colman"  # six weighted paths at rank 1 outweigh one fact at rank 2
    assert ignored.answer.name == "William Dieterle"


class Failing:
    """A triplet reader that breaks (as a bad schema or store error would)."""

    name = "failing"

    def __call__(self, query):
        raise KqeError("no triplets today")


def test_a_failing_4stepfocus_costs_only_its_own_pieces_and_says_why(qa, movie_kb):
    focus = FocusCandidates(movie_kb, qa.linker, Failing(), hits=5)
    notes: list[str] = []

    assert focus.collect("who directed Kismet", [M + "Person"], [], notes) == []
    assert notes == ["4StepFocus failed (no triplets today); no structural candidates"]
    off = QuestionAnswering(movie_kb, Settings(qa_pool_size=200, qa_prune_stages="40,10", qa_focus_hits=0,
                                               qa_grounded=False))
    result = off("who directed Kismet", ("kg",))
    assert result.answer == "William Dieterle" and not any(r.evidence.id.startswith("focus") for r in result.top)
    with pytest.raises(KqeError, match="qa_focus_hits must not be negative"):
        Settings(qa_focus_hits=-1)


# ------------------------------------------------------------------ pruning


def test_bm25_over_the_pool_keeps_numbers_and_stems_words():
    pool = TextPool(["Kismet release year 1944", "Kismet directed by William Dieterle", "Alien release year 1979"])

    assert [i for i, _ in pool.search("released in 1944", 5)] == [0, 2]
    assert pool.scores("directing")[1] > 0 and pool.scores("directing")[0] == 0


def test_pruning_keeps_the_pool_then_each_stage_and_prefers_question_entities(qa, movie_kb):
    intent = qa.intent("who directed Kismet")
    evidence = qa.collect("who directed Kismet", intent, ("kg",))
    pruner = Pruner(movie_kb, pool_size=20, stages=(8, 3))

    pruning = pruner.run("who directed Kismet", intent.seeds, evidence)

    assert list(pruning.sizes()) == ["pool", "bm25", "fusion@8", "fusion@3"]
    assert pruning.sizes()["pool"] == len(evidence) and pruning.sizes()["bm25"] == 20
    assert pruning.final[0].evidence.text == "Kismet directed by William Dieterle"
    assert set(pruning.final[0].features) >= {"bm25", "bm25_scaled", "dense_scaled", "entity_scaled"}
    assert pruning.final[0].features["entity_scaled"] == 1.0


def test_pruning_stages_must_shrink(movie_kb):
    with pytest.raises(KqeError, match="must shrink"):
        Pruner(movie_kb, pool_size=100, stages=(100, 30))
    with pytest.raises(KqeError, match="qa_prune_stages"):
        Settings(qa_prune_stages="30,100")


class PreferShort:
    """An extra scorer, as an LLM or cross-encoder would be plugged in: one score per piece."""

    name = "short"

    def score(self, question, evidence):
        return [-len(e.text) for e in evidence]


class Broken:
    name = "broken"

    def score(self, question, evidence):
        return [1.0]  # one score for many pieces


def test_an_extra_scorer_is_one_more_round_and_a_failing_one_keeps_the_order(qa, movie_kb):
    intent = qa.intent("who directed Kismet")
    evidence = qa.collect("who directed Kismet", intent, ("kg",))

    boosted = Pruner(movie_kb, 20, (8, 3), extra=PreferShort(), extra_weight=10.0).run("who directed Kismet",
                                                                                       intent.seeds, evidence)
    broken = Pruner(movie_kb, 20, (8, 3), extra=Broken()).run("who directed Kismet", intent.seeds, evidence)

    assert list(boosted.sizes())[-2:] == ["fusion@3", "short@3"]
    before = [r.evidence.text for r in boosted.stages[-2][1]]
    assert [r.evidence.text for r in boosted.final] == sorted(before, key=len)
    assert broken.final[0].evidence.text == "Kismet directed by William Dieterle"
    assert broken.notes == ["extra scorer broken failed (gave 1 scores for 3 pieces); order kept"]


# ------------------------------------------------------------------ answers, offline


def test_the_offline_answer_is_the_best_supported_entity_of_the_answer_type(qa, movie_kb):
    result = qa("who directed Kismet", ("kg",))

    assert result.answer == "William Dieterle" and result.method == "offline"
    assert result.nodes == (node(movie_kb, "William Dieterle"),)
    assert "Kismet directed by William Dieterle" in [e.text for e in result.evidence]
    assert result.candidates[0].type_match is True
    assert all(c.name != "Kismet" for c in result.candidates)  # the question's own entity is no answer


def test_a_two_hop_question_is_answered_through_the_bridge_entities(qa):
    result = qa("what languages are the films directed by Jean-Pierre Jeunet in", ("kg",))

    assert result.answer == "French"
    assert any(e.text.endswith("in language French") for e in result.evidence)


def test_a_question_naming_nothing_in_the_kb_gets_no_kg_answer_and_says_why(qa):
    result = qa("who painted the Mona Lisa", ("kg",))

    assert result.answer is None
    assert result.flags == ["no candidate answer in the evidence"]
    assert result.intent.notes == ["no entity of the KB is named in the question"]


# ------------------------------------------------------------------ answers, LLM


def cite(pattern: str, answer: str | None = None, extra: tuple[str, ...] = ()):
    """A scripted model that answers from the prompt: it cites the piece matching ``pattern``."""

    def reply(request):
        prompt = request["messages"][-1]["content"]
        match = re.search(r"\[([^\]]+)\] <data>" + pattern, prompt)
        ids = [match.group(1)] if match else []
        return json.dumps({"answer": answer, "evidence": [*ids, *extra]})

    return reply


KISMET_INTENT = intent_json(answer_type="Person", entities=["Kismet"], relation="directed by")


def test_the_llm_answers_from_the_evidence_and_cites_it(movie_kb, chat_server, llm_settings):
    chat_server.script(KISMET_INTENT, cite("Kismet directed by William Dieterle", "William Dieterle"))

    result = answer(movie_kb, llm_settings, "who directed Kismet", ("kg",))

    assert result.answer == "William Dieterle" and result.method == "llm:scripted"
    assert result.nodes == (node(movie_kb, "William Dieterle"),)
    assert [e.text for e in result.evidence] == ["Kismet directed by William Dieterle"]
    assert result.flags == []
    prompt = chat_server.prompt(1)
    assert "Question: who directed Kismet" in prompt and "The answer is a person." in prompt
    assert len(re.findall(r"^\[[^\]]+\] ", prompt, re.M)) == 10  # only the pruned top evidence is shown
    assert result.usage["calls"] == 2 and result.usage["total_tokens"] > 0


def test_citations_of_evidence_that_does_not_exist_are_flagged_and_dropped(movie_kb, chat_server, llm_settings):
    chat_server.script(KISMET_INTENT, cite("Kismet directed by William Dieterle", "William Dieterle",
                                           extra=("kg-999", "E7")))

    result = answer(movie_kb, llm_settings, "who directed Kismet", ("kg",))

    assert result.answer == "William Dieterle" and result.method == "llm:scripted"
    assert result.flags == ["LLM cited evidence that does not exist: kg-999, E7; citations dropped"]
    assert [e.text for e in result.evidence] == ["Kismet directed by William Dieterle"]


def test_an_answer_only_in_uncited_evidence_gets_that_evidence_and_a_flag(movie_kb, chat_server, llm_settings):
    chat_server.script(KISMET_INTENT, json.dumps({"answer": "William Dieterle", "evidence": ["nonsense-1"]}))

    result = answer(movie_kb, llm_settings, "who directed Kismet", ("kg",))

    assert result.answer == "William Dieterle"
    assert result.flags[0] == "LLM cited evidence that does not exist: nonsense-1; citations dropped"
    assert "is not in the evidence it cited (none)" in result.flags[1]
    assert "Kismet directed by William Dieterle" in [e.text for e in result.evidence]


def test_an_llm_answer_outside_the_evidence_is_rejected_for_the_offline_one(movie_kb, chat_server, llm_settings):
    chat_server.script(KISMET_INTENT, cite("Kismet directed by William Dieterle", "Steven Spielberg"))

    result = answer(movie_kb, llm_settings, "who directed Kismet", ("kg",))

    assert result.answer == "William Dieterle"
    assert result.method.startswith("offline (after LLM: LLM answer 'Steven Spielberg' is not supported")
    assert result.flags == ["LLM answer 'Steven Spielberg' is not supported by the evidence; the offline answer is used"]


@pytest.mark.parametrize("reply, why", [
    (json.dumps({"answer": None, "evidence": []}), "LLM found no answer in the evidence"),
    (error(503), "LLM failed"),
    ("Sorry, I can only answer in prose.", "LLM answer unusable"),
], ids=["no-answer", "http-503", "prose"])
def test_when_the_llm_gives_no_usable_answer_the_offline_answer_stands(movie_kb, chat_server, llm_settings, reply, why):
    chat_server.script(KISMET_INTENT, reply, reply)

    result = answer(movie_kb, llm_settings, "who directed Kismet", ("kg",))

    assert result.answer == "William Dieterle"
    assert result.method.startswith(f"offline (after LLM: {why}")
    assert result.flags[-1].endswith("the offline answer is used")


def test_the_llm_reader_checks_an_answer_against_the_shown_pieces_only(qa, movie_kb):
    intent = qa.intent("who directed Kismet")
    ranked = qa.pruner.run("who directed Kismet", intent.seeds, qa.collect("who directed Kismet", intent, ("kg",))).final
    unused = LLM(model="never-called", base_url="http://127.0.0.1:9/v1")  # checked() makes no call
    reader = LLMReader(movie_kb, unused, OfflineReader(movie_kb, qa.linker.index))
    fallback = reader.offline("who directed Kismet", intent, ranked)
    directed = next(r.evidence.id for r in ranked if r.evidence.text == "Kismet directed by William Dieterle")

    ok = reader.checked({"answer": "william dieterle", "evidence": [directed]}, intent, ranked, fallback)

    assert ok.answer.name == "William Dieterle" and ok.answer.evidence == [directed] and ok.flags == []
    word = reader.checked({"answer": "directed", "evidence": [directed]}, intent, ranked, fallback)
    assert word.answer.name == "William Dieterle"  # a word of the sentence is no answer: the offline one stands
    assert word.flags == ["LLM answer 'directed' is not supported by the evidence; the offline answer is used"]


# ------------------------------------------------------------------ the API and the command line


def test_answer_checks_its_input(movie_kb):
    with pytest.raises(InputError, match="the question is empty"):
        answer(movie_kb, EVIDENCE, "   ")
    with pytest.raises(InputError, match="unknown evidence source.*web; choose from kg, text, tables"):
        answer(movie_kb, EVIDENCE, "who directed Kismet", ("kg", "web"))
    assert check_sources("kg, tables") == ("kg", "tables")
    assert check_sources(["kg,tables"]) == check_sources(["kg", "tables"]) == ("kg", "tables")  # as /answer passes them


def test_as_dict_is_json_with_answer_evidence_intent_and_stages(movie_copy):
    result = answer(movie_copy, EVIDENCE, "who directed Kismet")

    data = json.loads(json.dumps(result.as_dict()))
    assert data["answer"] == "William Dieterle" and data["sources"] == ["kg", "text", "tables"]
    assert data["intent"]["answer_types"] == ["person"] and data["intent"]["entities"][0]["text"] == "Kismet"
    assert list(data["stages"]) == ["pool", "bm25", "fusion@40", "fusion@10"]
    assert {e["id"] for e in data["evidence"]} <= {e["id"] for e in data["top_evidence"]}
    assert set(data["seconds"]) == {"intent", "evidence", "pruning", "answer", "total"}


def test_ask_prints_the_answer_its_evidence_and_the_intent(movie_copy, tmp_path):
    runner = CliRunner()
    years = write(tmp_path / "grosses.csv", "movie,gross\nKismet,2 million\n")

    added = runner.invoke(cli, ["tables", "add", str(years), "--kb", str(movie_copy.path), "--entity-column", "movie"])
    listed = runner.invoke(cli, ["tables", "list", "--kb", str(movie_copy.path)])
    asked = runner.invoke(cli, ["ask", "who directed Kismet", "--kb", str(movie_copy.path), "--offline"])
    as_json = runner.invoke(cli, ["ask", "what was the gross of Kismet", "--kb", str(movie_copy.path),
                                  "--sources", "tables", "--json"])

    assert added.exit_code == 0 and "registered table 'grosses': 1 rows, 1 linked" in added.output
    assert "grosses: 1 rows (1 linked), columns movie, gross" in listed.output
    assert asked.exit_code == 0, asked.output
    assert "answer: William Dieterle" in asked.output and "Kismet directed by William Dieterle" in asked.output
    assert "intent (offline): answer type person; entities Kismet" in asked.output
    data = json.loads(as_json.output)
    assert data["answer"] == "2 million" and data["evidence"][0]["origin"] == {"table": "grosses", "row": 1}


def test_ask_and_tables_report_bad_input_without_a_traceback(movie_copy, tmp_path):
    runner = CliRunner()
    bad = write(tmp_path / "bad.csv", "film,gross\nKismet,1\n")

    no_column = runner.invoke(cli, ["tables", "add", str(bad), "--kb", str(movie_copy.path), "--entity-column", "movie"])
    no_source = runner.invoke(cli, ["ask", "who directed Kismet", "--kb", str(movie_copy.path), "--sources", "web"])

    assert no_column.exit_code == 2 and "no column 'movie' for --entity-column" in no_column.output
    assert no_source.exit_code == 2 and "qa_sources must name some of kg, text, tables" in no_source.output


def test_an_add_killed_between_its_two_renames_is_put_back_by_the_next_add(table_kb, tmp_path):
    register_table(table_kb, write(tmp_path / "gross.csv", "movie,gross\nHeat,1\n"), "movie")
    tables = table_kb.path / "tables"
    (tables / "gross").rename(tables / ".gross.old-99999")  # where a kill -9 mid-swap leaves it
    (tables / ".other.tmp-99998").mkdir()  # and the work folder of another killed add
    assert [t["name"] for t in list_tables(table_kb.path)] == []

    register_table(table_kb, write(tmp_path / "years.csv", "movie,year\nHeat,1995\n"), "movie")
    assert [t["name"] for t in list_tables(table_kb.path)] == ["gross", "years"]
    assert sorted(p.name for p in tables.iterdir()) == ["gross", "years"]
