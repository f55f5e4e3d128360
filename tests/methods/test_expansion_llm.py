"""Query expansion with an LLM, against the real scripted chat server through the real ``openai`` client.

What the model is asked (the entities prompt carries the ontology, the expansion prompt the
document triples the graph gave), what its answers become (``expanded = query + expansions``),
and what happens when it misbehaves: errors, garbage, empty answers, hostile text and spent
budgets all leave the query unexpanded — never an empty result. LKQE's triples land in a
named graph of the KB's own expansion store, with the passage each came from.
"""

from __future__ import annotations

import json

import pytest
from support.chat_server import Reply, chat_server, error, malformed  # noqa: F401 (fixture)
from pyoxigraph import NamedNode, Store

from support.fixtures_kb import movie_kb, names, node  # noqa: F401 - fixtures
from support.chat_server import settings  # noqa: F401 - the LLM on the test's scripted server
from kqe_rdf.kb.build import build_kb
from kqe_rdf.core.config import Settings
from kqe_rdf.evaluation.runner import evaluate
from kqe_rdf.methods.expansion import expand
from kqe_rdf.methods.expansion.lkqe import ExpansionStore
from kqe_rdf.methods.expansion.prompts import EXPANSIONS_SCHEMA
from kqe_rdf.kb.importers import get_importer
from kqe_rdf.kb.knowledge_base import KnowledgeBase
from kqe_rdf.evaluation.querysets import EvalQuery, QuerySet
from kqe_rdf.methods.registry import pipeline

QUESTION = "who directed Kismet"
K = 5


def answer(**value) -> str:
    return json.dumps(value)


KISMET = answer(entities=[{"name": "Kismet", "type": "Movie"}])
PASSAGES3 = answer(expansions=["Kismet (1944) was directed by William Dieterle.", "A film by William Dieterle.",
                               "Dieterle directed Kismet starring Ronald Colman."])


def unexpanded(kb, query: str, k: int = K):
    """What every failure must still return: the final retriever's results for the query itself."""
    return [h.iri for h in pipeline(Settings().kar.final, kb, Settings(), k).search(query)]


# ------------------------------------------------------------------------------ KAR


def test_kar_asks_for_entities_with_the_ontology_then_expands_from_the_document_triples(movie_kb, chat_server,
                                                                                      settings):
    chat_server.script(KISMET, PASSAGES3)
    exp = expand(movie_kb, settings(), QUESTION, "kar")

    entities_prompt, expansion_prompt = chat_server.prompt(0), chat_server.prompt(1)
    assert movie_kb.schema.describe_for_prompt() in entities_prompt and f"Query: {QUESTION}" in entities_prompt
    assert chat_server.requests[0]["response_format"]["type"] == "json_schema"
    assert chat_server.requests[1]["response_format"]["json_schema"]["schema"] == EXPANSIONS_SCHEMA
    assert "\n".join(exp.context) in expansion_prompt and "Write 3 short passages" in expansion_prompt
    assert any("--directed by--> (William Dieterle" in line for line in exp.context)
    assert exp.entities[0] == {"text": "Kismet", "found_by": "llm", "nodes": [
        {"iri": node(movie_kb, "Kismet"), "name": "Kismet", "link": "exact",
         "score": exp.entities[0]["nodes"][0]["score"]}]}
    assert exp.method == "kar" and exp.llm == "llm:scripted"
    assert exp.expanded == QUESTION + " " + " ".join(json.loads(PASSAGES3)["expansions"])
    assert exp.llm_usage["calls"] == 2 and exp.llm_usage["total_tokens"] > 0 and exp.notes == []


def test_kar_searches_with_the_expanded_query_and_counts_llm_calls_per_query(movie_kb, chat_server, settings):
    chat_server.script(KISMET, PASSAGES3)
    qs = QuerySet("kismet", [EvalQuery("1", QUESTION, {"William Dieterle": 1})])
    result = evaluate(movie_kb, qs, ["kar"], settings(), depth=K, trec_measures=())
    [kar] = result.results
    assert kar.llm_usage["calls"] == 2 and result.table()[0]["llm calls/query"] == 2.0
    assert kar.metrics["Hit@5"] == 1.0  # the LLM's passages name the director


def test_the_ablations_send_entity_documents_or_name_filtered_triples(movie_kb, chat_server, settings):
    chat_server.script(KISMET, PASSAGES3, KISMET, PASSAGES3)
    nokg = expand(movie_kb, settings(), QUESTION, "kar-nokg")
    names_filtered = expand(movie_kb, settings(), QUESTION, "kar-namefilter")

    assert nokg.neighbours == [] and nokg.context[0].startswith("Kismet: ")
    assert nokg.context[0] in chat_server.prompt(1) and "-->" not in chat_server.prompt(1)
    assert names_filtered.neighbours and "\n".join(names_filtered.context) in chat_server.prompt(3)


@pytest.mark.parametrize("entities_reply", [
    [malformed("<html>Bad gateway</html>"), malformed("<html>Bad gateway</html>")],  # retried once
    ["not json at all", "still not json"],
    [answer(entities=[{"name": "Citizen Kane, a film not in this KB"}])],
    [error(400, "context length exceeded")],
])
def test_unusable_entities_fall_back_to_the_offline_mention_finder(movie_kb, chat_server, settings, entities_reply):
    chat_server.script(*entities_reply, PASSAGES3)
    exp = expand(movie_kb, settings(), QUESTION, "kar")

    assert exp.entities[0]["found_by"] == "mention" and exp.entities[0]["text"] == "Kismet"
    assert any("offline mention finder" in n for n in exp.notes)
    assert exp.expansions and "William Dieterle" in exp.expanded
    assert chat_server.pending == 0


@pytest.mark.parametrize("expansion_reply", [
    [error(400, "model overloaded")],
    [malformed("<html>oops</html>")],
    [answer(expansions=[])],
    [answer(expansions=["", "   "])],
    [Reply(content=None), Reply(content=None)],
])
def test_a_failed_expansion_searches_the_unexpanded_query_never_nothing(movie_kb, chat_server, settings,
                                                                        expansion_reply):
    chat_server.script(KISMET, *expansion_reply)
    batch = pipeline("kar", movie_kb, settings(), K).run(QUESTION)
    exp = batch.explain["q"]["expansion"]

    assert exp["expanded_query"] == QUESTION
    assert [h.iri for h in batch.ranked("q")] == unexpanded(movie_kb, QUESTION)
    assert exp["notes"] and exp["entities"][0]["found_by"] == "llm"
    assert chat_server.pending == 0


def test_the_server_being_down_degrades_to_the_offline_entities_and_the_unexpanded_query(movie_kb, settings):
    down = settings(llm_base_url="http://127.0.0.1:9/v1")
    batch = pipeline("kar", movie_kb, down, K).run(QUESTION)
    exp = batch.explain["q"]["expansion"]
    assert exp["expanded_query"] == QUESTION and len(batch.ranked("q")) == K
    assert any("entity parsing: LLM failed" in n for n in exp["notes"])


def test_a_spent_call_budget_leaves_the_query_unexpanded(movie_kb, chat_server, settings):
    chat_server.script(KISMET, PASSAGES3)
    exp = expand(movie_kb, settings(llm_max_calls_per_query=1), QUESTION, "kar")
    assert len(chat_server.requests) == 1
    assert exp.expanded == QUESTION and any("budget exceeded" in n for n in exp.notes)


def test_hostile_model_text_is_only_ever_search_text(movie_kb, chat_server, settings):
    hostile = answer(expansions=['"} ) ; DROP GRAPH <urn:x> ; SELECT * WHERE { ?s ?p ?o } #', "AND OR NOT ((( title:*",
                                 "x" * 50_000])
    chat_server.script(KISMET, hostile)
    hits = pipeline("kar", movie_kb, settings(kar_final="hybrid"), K).search(QUESTION)
    assert len(hits) == K


def test_expansions_are_clipped_to_the_output_budget(movie_kb, chat_server, settings):
    chat_server.script(KISMET, answer(expansions=["word " * 2000] * 5))
    exp = expand(movie_kb, settings(expansion_max_tokens=90, kar_expansions=3), QUESTION, "kar")
    assert len(exp.expansions) == 3 and all(len(e) <= 30 * 4 for e in exp.expansions)
    assert chat_server.requests[1]["max_tokens"] == 90


# ------------------------------------------------------------------------- baselines


def test_hyde_and_query2doc_append_a_generated_passage(movie_kb, chat_server, settings):
    chat_server.script("Passage: Kismet is a 1944 film directed by William Dieterle.", "Kismet, by Dieterle.")
    hyde = expand(movie_kb, settings(), QUESTION, "hyde")
    q2d = expand(movie_kb, settings(), QUESTION, "q2d")

    assert "Please write a passage to answer the question.\nQuestion: who directed Kismet" in chat_server.prompt(0)
    assert "Write a passage that answers the given query:" in chat_server.prompt(1)
    assert hyde.expanded == QUESTION + " Kismet is a 1944 film directed by William Dieterle."
    assert q2d.expanded == QUESTION + " Kismet, by Dieterle." and q2d.llm_usage["calls"] == 1


def test_rar_grounds_the_generation_on_the_top_passages(movie_kb, chat_server, settings):
    chat_server.script("Kismet was directed by William Dieterle.")
    exp = expand(movie_kb, settings(expansion_docs=2), QUESTION, "rar")
    top = unexpanded(movie_kb, QUESTION, 2)
    assert exp.passages == top
    for line in exp.context:
        assert line in chat_server.prompt(0)
    assert exp.context[0].startswith(movie_kb.document(top[0]).name + ": ")


def test_agr_analyzes_generates_and_refines_in_three_calls(movie_kb, chat_server, settings):
    chat_server.script("- the director of the film Kismet", "The director is William Dieterle.",
                       "Kismet (1944) was directed by William Dieterle.")
    exp = expand(movie_kb, settings(), QUESTION, "agr")
    assert "the director of the film Kismet" in chat_server.prompt(1)
    assert "The director is William Dieterle." in chat_server.prompt(2)
    assert exp.expansions == ["Kismet (1944) was directed by William Dieterle."] and exp.llm_usage["calls"] == 3


def test_agr_and_hyde_failures_leave_the_query_unexpanded(movie_kb, chat_server, settings):
    chat_server.script(error(400, "no"), Reply(content="   "))
    agr = pipeline("agr", movie_kb, settings(), K).run(QUESTION)
    hyde = pipeline("hyde", movie_kb, settings(), K).run(QUESTION)
    for batch in (agr, hyde):
        assert batch.explain["q"]["expansion"]["expanded_query"] == QUESTION
        assert [h.iri for h in batch.ranked("q")] == unexpanded(movie_kb, QUESTION)
    assert len(chat_server.requests) == 2  # AGR stopped after its failed analysis


# ------------------------------------------------------------------------------ LKQE


PASSAGES = """\
p1\tAspirin irreversibly inhibits cyclooxygenase. This blocks thromboxane synthesis in platelets.
p2\tIbuprofen is a reversible inhibitor of cyclooxygenase used for pain and fever.
p3\tThe Eiffel Tower is a wrought-iron lattice tower in Paris, completed in 1889.
p4\tLow-dose aspirin reduces the risk of heart attack by preventing platelet clots.
"""
LKQE_QUERY = "aspirin platelets"
SENTENCES = answer(sentences=[{"passage": 1, "sentence": "This blocks thromboxane synthesis in platelets."},
                              {"passage": 2, "sentence": "Low-dose aspirin reduces the risk of heart attack."},
                              {"passage": 99, "sentence": "a passage that was never shown"}])
TRIPLES = answer(triples=[{"head": "aspirin", "relation": "inhibits", "tail": "cyclooxygenase", "passage": 1},
                          {"head": "aspirin", "relation": "prevents", "tail": "platelet clots", "passage": 2},
                          {"head": "", "relation": "broken", "tail": "x"}])
COMPLETED = answer(triples=[{"head": "thromboxane", "relation": "activates", "tail": "platelets"}])
EXPANSION = "Aspirin blocks cyclooxygenase in platelets, so less thromboxane forms and clots are prevented."


@pytest.fixture
def passages_kb(tmp_path):
    """A fresh passage KB per test: LKQE writes its expansion store into the KB directory."""
    (tmp_path / "passages.tsv").write_text(PASSAGES, encoding="utf-8")
    build_kb(get_importer("passages")([tmp_path / "passages.tsv"]), tmp_path / "kb")
    return KnowledgeBase.open(tmp_path / "kb")


def test_lkqe_extracts_completes_stores_and_expands(passages_kb, chat_server, settings):
    chat_server.script(SENTENCES, TRIPLES, COMPLETED, EXPANSION)
    exp = expand(passages_kb, settings(lkqe_docs=2), LKQE_QUERY, "lkqe")
    bm25_top = [h.iri for h in pipeline("bm25", passages_kb, Settings(), 2).search(LKQE_QUERY)]

    assert exp.passages == bm25_top and exp.llm_usage["calls"] == 4
    for i, iri in enumerate(bm25_top, start=1):
        assert f"[{i}] <data>{passages_kb.document(iri).text.split()[0]}" in chat_server.prompt(0)
    assert "[1] <data>This blocks thromboxane synthesis in platelets.</data>" in chat_server.prompt(1)
    assert "never shown" not in chat_server.prompt(1)
    assert "aspirin | inhibits | cyclooxygenase" in chat_server.prompt(2)
    assert "thromboxane | activates | platelets" in chat_server.prompt(3)
    assert exp.triples == [
        {"head": "aspirin", "relation": "inhibits", "tail": "cyclooxygenase", "origin": "extracted",
         "passage": bm25_top[0]},
        {"head": "aspirin", "relation": "prevents", "tail": "platelet clots", "origin": "extracted",
         "passage": bm25_top[1]},
        {"head": "thromboxane", "relation": "activates", "tail": "platelets", "origin": "completed"}]
    words = EXPANSION.split()[: 15 * 2]
    assert exp.expanded == " ".join([LKQE_QUERY] * 3 + [" ".join(words)])

    # The graph is in the KB's own writable store, readable with SPARQL, with provenance.
    assert exp.graph and exp.graph.startswith("urn:kqe:lkqe:")
    store = ExpansionStore(passages_kb.path)
    assert store.load(exp.graph) == exp.triples
    rows = list(store.store.query(
        "SELECT ?passage WHERE { GRAPH ?g { ?t <http://www.w3.org/ns/prov#wasDerivedFrom> ?passage } }"))
    assert sorted(r["passage"].value for r in rows) == sorted(bm25_top)


def test_lkqe_reuses_a_stored_graph_and_asks_only_for_the_expansion(passages_kb, chat_server, settings):
    chat_server.script(SENTENCES, TRIPLES, COMPLETED, EXPANSION, EXPANSION)
    first = expand(passages_kb, settings(lkqe_docs=2), LKQE_QUERY, "lkqe")
    again = expand(passages_kb, settings(lkqe_docs=2), LKQE_QUERY, "lkqe")

    assert again.triples == first.triples and again.llm_usage["calls"] == 1
    assert any("reused" in n for n in again.notes) and len(chat_server.requests) == 5


def test_lkqe_failures_search_the_unexpanded_query_with_bm25(passages_kb, chat_server, settings):
    chat_server.script("nonsense", "more nonsense")
    batch = pipeline("lkqe", passages_kb, settings(lkqe_docs=2), 3).run(LKQE_QUERY)
    exp = batch.explain["q"]["expansion"]

    assert exp["expanded_query"] == LKQE_QUERY and exp["triples"] == [] and exp["graph"] is None
    assert [h.iri for h in batch.ranked("q")] == [h.iri for h in
                                                  pipeline("bm25", passages_kb, Settings(), 3).search(LKQE_QUERY)]
    assert any(n.startswith("key sentences: LLM answer unusable") for n in exp["notes"])


def test_lkqe_goes_on_without_storing_when_the_store_is_held_elsewhere(passages_kb, chat_server, settings):
    held = Store(str(passages_kb.path / "expansions"))  # another writer holds the store's lock
    try:
        chat_server.script(SENTENCES, TRIPLES, COMPLETED, EXPANSION)
        exp = expand(passages_kb, settings(lkqe_docs=2), LKQE_QUERY, "lkqe")
    finally:
        del held
    assert exp.graph is None and exp.expansions
    assert any("cannot be opened" in n for n in exp.notes)


def test_lkqe_store_can_be_turned_off(passages_kb, chat_server, settings):
    chat_server.script(SENTENCES, TRIPLES, COMPLETED, EXPANSION)
    exp = expand(passages_kb, settings(lkqe_docs=2, lkqe_store=False), LKQE_QUERY, "lkqe")
    assert exp.graph is None and len(exp.triples) == 3
    assert not (passages_kb.path / "expansions").exists()


def test_the_named_graph_is_not_in_the_main_store(passages_kb, chat_server, settings):
    chat_server.script(SENTENCES, TRIPLES, COMPLETED, EXPANSION)
    exp = expand(passages_kb, settings(lkqe_docs=2), LKQE_QUERY, "lkqe")
    assert NamedNode(exp.graph) not in set(passages_kb.store.named_graphs())
