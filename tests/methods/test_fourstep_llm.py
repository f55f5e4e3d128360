"""4StepFocus with an LLM, against a real local chat server through the real ``openai`` client.

``pipeline("4step", kb, settings, k)`` uses the LLM that ``settings`` configure: it asks for
triplets over the ontology's relations (JSON), and with ``rerank=True`` for an ordering of the
top results. Whatever the model answers — a good reading, near-miss relation names, prose,
HTML, nothing, an error, a hostile string — the stage answers, and its explanation says which
reading it used. Each test scripts the server (``chat_server.script(...)``) on the tiny movie KB
of ``fixtures_kb``; timeouts and backoff are short, so failure paths take a fraction of a second.
"""

from __future__ import annotations

import json

import pytest
from support.chat_server import ChatServer, Reply, chat_server, delay, error, malformed  # noqa: F401 (fixtures)
from support.chat_server import settings as server_settings  # noqa: F401 (fixture)

from support.fixtures_kb import movie_kb, names, node  # noqa: F401 - fixtures
from kqe_rdf.core.config import Settings
from kqe_rdf.evaluation.runner import evaluate
from kqe_rdf.methods.fourstep.pipeline import FourStep, LLMReranker, LLMTriplets
from kqe_rdf.methods.reading import OfflineTriplets
from kqe_rdf.evaluation.querysets import EvalQuery, QuerySet
from kqe_rdf.methods.registry import pipeline
from kqe_rdf.methods.reading.triplets import TRIPLETS_SCHEMA

M = "https://w3id.org/kqe/metaqa#"
K = 5
QUESTION = "who directed Kismet"


def reading(*triplets: tuple[str, str, str], answer: str = "?x", **extra: object) -> str:
    """An LLM's JSON answer with these (head, relation, tail) triplets."""
    return json.dumps({"answer": answer, **extra,
                       "triplets": [{"head": h, "relation": r, "tail": t} for h, r, t in triplets]})


KISMET = reading(("Kismet", "directed_by", "?x"))


@pytest.fixture
def settings(server_settings):
    """The test server's settings with the LLM asked for every request (``fourstep_llm_reading="always"``): these
    tests are about what is done with its answer; by default a confident offline reading asks nothing."""
    return lambda **overrides: server_settings(**{"fourstep_llm_reading": "always", **overrides})


@pytest.fixture(scope="module")
def offline_kismet(movie_kb):
    """What the offline reading returns for QUESTION: what every LLM failure must still give."""
    return pipeline("4step-offline", movie_kb, Settings(), K).run(QUESTION)


# ------------------------------------------------------------------- the request


def test_the_triplet_prompt_gives_the_relations_with_their_directions_and_the_query(movie_kb, chat_server, settings):
    chat_server.script(KISMET)
    pipeline("4step", movie_kb, settings(), K).run(QUESTION)

    [request] = chat_server.requests
    prompt = chat_server.prompt(0)
    assert movie_kb.schema.describe_for_prompt() in prompt
    for relation, domain, range_, backwards in [("directed_by", "Movie", "Person", "Person directed Movie"),
                                                ("starred_actors", "Movie", "Person", "Person starred in Movie"),
                                                ("release_year", "Movie", "Year", "Year release year of Movie")]:
        assert f"- {relation}: {domain} -> {range_};" in prompt
        assert f'(read backwards: "{backwards}")' in prompt
    assert "Request: who directed Kismet" in request["messages"][-1]["content"]
    assert request["model"] == "scripted" and request["temperature"] == 0
    assert request["response_format"] == {"type": "json_schema",
                                          "json_schema": {"name": "triplets", "schema": TRIPLETS_SCHEMA}}
    assert "JSON" in request["messages"][-1]["content"]


# -------------------------------------------------------------------- good answers


def test_a_good_reading_ranks_the_gold_answer_first_and_is_explained(movie_kb, chat_server, settings):
    chat_server.script(KISMET)
    batch = pipeline("4step", movie_kb, settings(), K).run(QUESTION)
    hits, explain = batch.ranked("q"), batch.explain["q"]
    kismet, dieterle = node(movie_kb, "Kismet"), node(movie_kb, "William Dieterle")

    assert names(movie_kb, hits[:1]) == ["William Dieterle"] and len(hits) == K
    # The LLM's reading agrees with the offline one: both count, and the explanation shows both.
    assert explain["triplets"]["source"] == "offline + llm:scripted (merged)"
    assert explain["readings"]["winner"] == "merged" and explain["llm_reading"]["outcome"] == "merged"
    assert explain["readings"]["llm"]["triplets"]["notes"] == []
    assert [(x["head"], x["relation"], x["tail"]) for x in explain["readings"]["llm"]["triplets"]["triplets"]] == [
        ("Kismet", f"{M}directed_by", "?x")]
    assert f"VALUES ?c0 {{ <{kismet}> }}" in explain["sparql"] and f"<{M}directed_by>" in explain["sparql"]
    [binding] = explain["support"][dieterle]
    assert (binding["x"], binding["c0"]) == (dieterle, kismet)
    assert explain["candidates"] == 1 and "error" not in explain
    assert len(chat_server.requests) == 1


@pytest.mark.parametrize("question, answer, mode, gold", [
    # the offline reader gets these two wrong (xfails in test_fourstep.py); the LLM's reading does not
    ("who is the director of Kismet", KISMET, "soft", ["William Dieterle"]),
    ("movies starring Robert De Niro directed by Martin Scorsese",
     reading(("?x", "starred_actors", "Robert De Niro"), ("?x", "directed_by", "Martin Scorsese"),
             answer_type="Movie"), "strict", ["Taxi Driver"]),
    ("who starred in the films directed by Ridley Scott",
     reading(("?m", "directed_by", "Ridley Scott"), ("?m", "starred_actors", "?x")), "soft",
     ["Harrison Ford", "Sigourney Weaver"]),
])
def test_the_llm_reading_answers_what_the_offline_one_cannot(movie_kb, chat_server, settings, question, answer,
                                                              mode, gold):
    chat_server.script(answer)
    batch = pipeline("4step", movie_kb, settings(fourstep_mode=mode), K).run(question)
    assert sorted(names(movie_kb, batch.ranked("q")[: len(gold)])) == gold
    assert batch.explain["q"]["candidates"] == len(gold)
    assert batch.explain["q"]["readings"]["winner"] in ("llm", "merged")


@pytest.mark.parametrize("relation", ["directed by", "directedBy", "Directed_By", "directed-by"])
def test_relation_names_close_to_the_ontologys_are_mapped(movie_kb, chat_server, settings, relation):
    chat_server.script(reading(("Kismet", relation, "?x")))
    batch = pipeline("4step", movie_kb, settings(), K).run(QUESTION)
    reading_ = batch.explain["q"]["readings"]["llm"]["triplets"]
    assert reading_["source"] == "llm:scripted" and reading_["notes"] == []
    assert [x["relation"] for x in reading_["triplets"]] == [f"{M}directed_by"]
    assert names(movie_kb, batch.ranked("q")[:1]) == ["William Dieterle"]


def test_an_unknown_relation_is_dropped_with_a_note_and_the_offline_reading_is_used(movie_kb, chat_server, settings,
                                                                                  offline_kismet):
    chat_server.script(reading(("Kismet", "ate", "?x")))
    batch = pipeline("4step", movie_kb, settings(), K).run(QUESTION)
    reading_ = batch.explain["q"]["triplets"]
    assert reading_["source"] == "offline (after LLM failure)"
    assert "relation 'ate' is not in the ontology" in reading_["notes"][0]
    assert reading_["notes"][0].endswith("the offline reading is used")
    assert [x["relation"] for x in reading_["triplets"]] == [f"{M}directed_by"]  # the offline reading's
    assert batch.ranked("q") == offline_kismet.ranked("q")


def test_an_unknown_relation_next_to_a_good_one_is_dropped_and_the_rest_is_used(movie_kb, chat_server, settings):
    chat_server.script(reading(("Kismet", "ate", "?x"), ("Kismet", "directed_by", "?x")))
    batch = pipeline("4step", movie_kb, settings(), K).run(QUESTION)
    reading_ = batch.explain["q"]["readings"]["llm"]["triplets"]
    assert reading_["source"] == "llm:scripted"
    assert [x["relation"] for x in reading_["triplets"]] == [f"{M}directed_by"]
    assert any("relation 'ate' is not in the ontology" in n for n in reading_["notes"])
    assert names(movie_kb, batch.ranked("q")[:1]) == ["William Dieterle"]


def test_a_guessed_answer_in_place_of_the_variable_is_read_as_the_variable(movie_kb, chat_server, settings):
    # qwen2.5-coder-1.5b wrote its guess (here "Alfred Hitchcock") where the answer variable belongs.
    chat_server.script(reading(("Kismet", "directed_by", "Alfred Hitchcock")))
    batch = pipeline("4step", movie_kb, settings(), K).run(QUESTION)
    reading_ = batch.explain["q"]["readings"]["llm"]["triplets"]
    assert reading_["source"] == "llm:scripted"
    assert names(movie_kb, batch.ranked("q")[:1]) == ["William Dieterle"]


def test_a_guessed_answer_that_cannot_be_of_the_class_asked_for_falls_back_to_the_offline_reading(
        movie_kb, chat_server, settings):
    # A 2-hop question squeezed into one triplet with a guessed genre: as a variable it would answer with films.
    chat_server.script(reading(("Ridley Scott", "directed_by", "Drama")))
    batch = pipeline("4step", movie_kb, settings(), K).run("what genres are the films directed by Ridley Scott")
    reading_ = batch.explain["q"]["triplets"]
    assert reading_["source"] == "offline (after LLM failure)"
    # "Drama" is no word of the request (the schema prompt's example genre): rejected before its class is asked.
    assert "LLM reading rejected: its answer 'Drama' is the prompt's example" in reading_["notes"][0]


# ---------------------------------------------------------------- garbage answers

GARBAGE = {
    "prose": (["I believe it was William Dieterle.", "Sorry, I cannot answer in JSON."],
              ["LLM answer unusable", "no JSON object or array"]),
    "html": ([malformed("<html><body><h1>502 Bad Gateway</h1></body></html>")] * 2,
             ["LLM failed", "not JSON", "502 Bad Gateway"]),
    "empty content": ([Reply(content=""), Reply(content=None)], ["LLM answer unusable", "the answer was empty"]),
    "truncated JSON": ([Reply('{"answer": "?x", "triplets": [{"head": "Kismet", "relation": "direc',
                              finish_reason="length")], ["LLM gave no triplet", "it gave no triplets"]),
    "wrong shape": (['{"answer": "?x", "triplets": "Kismet directed_by ?x"}', '{"triplets": null}'],
                    ["LLM answer unusable", "does not match the schema"]),
    "not a completion": ([{"object": "error", "detail": "overloaded"}] * 2, ["LLM failed", "not a chat completion"]),
    "500 until retries exhaust": ([error(500)] * 2, ["LLM failed", "failed 2 time(s)", "HTTP 500"]),
    "401": ([error(401, "invalid api key")], ["LLM failed", "HTTP 401", "check the API key"]),
    "timeout": ([delay(3.0, KISMET)] * 2, ["LLM failed", "no answer within 0.3 s"]),
}


@pytest.mark.parametrize("case", GARBAGE)
def test_a_garbage_answer_falls_back_to_the_offline_reading_and_says_so(movie_kb, chat_server, settings,
                                                                       offline_kismet, case):
    replies, said = GARBAGE[case]
    chat_server.script(*replies)
    batch = pipeline("4step", movie_kb, settings(llm_timeout=0.3), K).run(QUESTION)
    hits, explain = batch.ranked("q"), batch.explain["q"]

    assert hits == offline_kismet.ranked("q") and len(hits) == K
    assert names(movie_kb, hits[:1]) == ["William Dieterle"]
    reading_ = explain["triplets"]
    assert reading_["source"] == "offline (after LLM failure)"
    for words in said:
        assert words in reading_["notes"][0]
    assert reading_["notes"][0].endswith("the offline reading is used")
    assert "error" not in explain
    # every scripted reply was asked for: one re-ask after an unusable answer, one retry after a failure
    assert chat_server.pending == 0 and len(chat_server.requests) == len(replies)


def test_an_unreachable_server_falls_back_to_the_offline_reading(movie_kb, offline_kismet):
    with ChatServer() as gone:
        url = gone.url
    settings = Settings(llm_base_url=url, llm_model="scripted", llm_cache="off", llm_timeout=0.5,
                        llm_max_retries=0, fourstep_llm_reading="always")
    batch = pipeline("4step", movie_kb, settings, K).run(QUESTION)
    assert batch.ranked("q") == offline_kismet.ranked("q")
    assert "cannot connect" in batch.explain["q"]["triplets"]["notes"][0]


def test_a_fallback_that_finds_nothing_structured_still_gives_the_hybrid_results(movie_kb, chat_server, settings):
    # the LLM fails and the question names nothing the offline reader knows: the plain results remain
    chat_server.script(error(500), error(500))
    stage = pipeline("4step", movie_kb, settings(), K)
    batch = stage.run("tell me something nice")
    assert [h.iri for h in batch.ranked("q")] == [h.iri for h in stage.fallback.search("tell me something nice")]
    assert len(batch.ranked("q")) == K
    assert batch.explain["q"]["triplets"]["notes"][1] == "no entity of the KB is named in the query"


# ----------------------------------------------------------------- hostile answers

INJECTED_CONSTANT = 'Kismet"} ; DELETE WHERE { ?s ?p ?o } #'
HOSTILE = {
    "relation": reading(("Kismet", "directed_by> ?x } DROP ALL #", "?x")),
    "relation IRI": reading(("Kismet", "<http://example.org/x> } ; DROP ALL ; #", "?x")),
    "constant": reading((INJECTED_CONSTANT, "directed_by", "?x")),
    "variables and types": json.dumps({
        "answer": "?x> } DROP ALL #", "answer_type": "Person> } DROP ALL #",
        "triplets": [{"head": "Kismet", "head_type": 'Movie" } DROP ALL #', "relation": "directed_by",
                      "tail": "?x> } DROP ALL #", "tail_type": None}]}),
}


@pytest.mark.parametrize("case", HOSTILE)
def test_a_hostile_answer_never_reaches_sparql_as_written(movie_kb, chat_server, settings, case):
    before = len(movie_kb.store)  # quads
    chat_server.script(HOSTILE[case])
    batch = pipeline("4step", movie_kb, settings(), K).run(QUESTION)
    explain = batch.explain["q"]

    assert "error" not in explain  # the compiled query parsed and ran
    sparql = explain["sparql"]
    for fragment in ("DROP ALL", "DELETE WHERE", "example.org", '"'):
        assert fragment not in sparql  # (a variable may keep the letters, as ?x____DROP_ALL__)
    movie_kb.query(sparql)  # parses on its own too
    assert len(movie_kb.store) == before
    assert names(movie_kb, batch.ranked("q")[:1]) == ["William Dieterle"]


def test_a_hostile_relation_is_dropped_with_a_note(movie_kb, chat_server, settings):
    chat_server.script(HOSTILE["relation"])
    notes = pipeline("4step", movie_kb, settings(), K).run(QUESTION).explain["q"]["triplets"]["notes"]
    assert "relation 'directed_by> ?x } DROP ALL #' is not in the ontology" in notes[0]


def test_a_hostile_constant_is_rejected_before_it_is_linked(movie_kb, chat_server, settings):
    # A constant the request never writes is no reading of it: the reading is rejected, nothing of it runs.
    chat_server.script(HOSTILE["constant"])
    explain = pipeline("4step", movie_kb, settings(), K).run(QUESTION).explain["q"]
    assert explain["llm_reading"]["outcome"] == "rejected"
    assert f"constant {INJECTED_CONSTANT!r} is not in the request" in explain["llm_reading"]["why"]
    assert INJECTED_CONSTANT not in explain["linked"] and "DELETE" not in explain["sparql"]


# ---------------------------------------------------------------------- reranking


@pytest.fixture
def unranked(movie_kb, chat_server, settings):
    """The results for QUESTION with the KISMET reading and no reranker (what reranking starts from)."""
    chat_server.script(KISMET)
    hits = pipeline("4step", movie_kb, settings(), K).search(QUESTION)
    chat_server.requests.clear()
    return hits


def rerank(movie_kb, chat_server, settings, *replies, **options):
    chat_server.script(KISMET, *replies)
    stage = pipeline("4step", movie_kb, settings(rerank=True, **options), K)
    assert isinstance(stage.reranker, LLMReranker)
    return stage.run(QUESTION)


def test_a_scripted_ranking_reorders_the_top_results(movie_kb, chat_server, settings, unranked):
    batch = rerank(movie_kb, chat_server, settings, '{"ranking": [3, 1]}')
    hits = batch.ranked("q")
    assert [h.iri for h in hits] == [unranked[i].iri for i in (2, 0, 1, 3, 4)]  # named first, the rest in order
    assert [h.rank for h in hits] == list(range(1, K + 1))
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    assert batch.explain["q"]["rerank"] == "reranked the top 5 by scripted"
    assert len(chat_server.requests) == 2


def test_the_reranker_prompt_shows_the_candidates_documents(movie_kb, chat_server, settings, unranked):
    rerank(movie_kb, chat_server, settings, '{"ranking": [1]}')
    request = chat_server.requests[1]
    prompt = chat_server.prompt(1)
    assert "Request: who directed Kismet" in prompt
    for number, hit in enumerate(unranked, start=1):
        assert f"[{number}] <data>{movie_kb.document(hit.iri).text[:600]}</data>" in prompt
    assert "{{" not in prompt  # the instructions reach the model as written, not as a format template
    assert request["response_format"]["json_schema"]["name"] == "ranking"


def test_invalid_numbers_in_a_ranking_are_ignored(movie_kb, chat_server, settings, unranked):
    # 0, 6 and 99 name no shown candidate, -2 is negative, 2 comes twice
    hits = rerank(movie_kb, chat_server, settings, '{"ranking": [0, 99, -2, 2, 6, 2, 1]}').ranked("q")
    assert [h.iri for h in hits] == [unranked[i].iri for i in (1, 0, 2, 3, 4)]


def test_only_the_top_depth_results_are_shown_and_reordered(movie_kb, chat_server, settings, unranked):
    hits = rerank(movie_kb, chat_server, settings, '{"ranking": [2, 1]}', rerank_depth=2).ranked("q")
    assert [h.iri for h in hits] == [unranked[i].iri for i in (1, 0, 2, 3, 4)]
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    prompt = chat_server.prompt(1)
    assert "[2] " in prompt and "[3] " not in prompt


@pytest.mark.parametrize("replies, note", [
    (["no idea, sorry", "still no idea"], "reranker answer unusable"),
    (['{"ranking": "1, 2, 3"}', '{"order": [1]}'], "reranker answer unusable"),
    (['{"ranking": [42, 0]}'], "reranker named no shown candidate"),
    ([error(500)] * 2, "reranker failed"),
    ([malformed("<html>busy</html>")] * 2, "reranker failed"),
])
def test_an_unusable_ranking_keeps_the_previous_order_exactly(movie_kb, chat_server, settings, unranked, replies,
                                                              note):
    batch = rerank(movie_kb, chat_server, settings, *replies)
    assert batch.ranked("q") == unranked  # same items, scores and ranks
    assert batch.explain["q"]["rerank"].startswith(note) and batch.explain["q"]["rerank"].endswith("order kept")
    assert chat_server.pending == 0


# --------------------------------------------------------------------------- usage

TINY = QuerySet("tiny", [EvalQuery("q1", "who directed Kismet", {"William Dieterle": 1}),
                         EvalQuery("q2", "who wrote Taxi Driver", {"Paul Schrader": 1})])
TOKENS = {"triplets": (300, 40), "ranking": (500, 10)}


def answer_from_prompt(request: dict) -> Reply:
    """The scripted model: a reading or a ranking, with fixed token counts per kind of request."""
    kind = request["response_format"]["json_schema"]["name"]
    if kind == "ranking":
        return Reply('{"ranking": [1]}', usage=TOKENS[kind])
    text = request["messages"][-1]["content"]
    if "Kismet" in text:
        return Reply(KISMET, usage=TOKENS[kind])
    return Reply(reading(("Taxi Driver", "written_by", "?x")), usage=TOKENS[kind])


@pytest.mark.parametrize("rerank_on, calls_per_query", [(False, 1), (True, 2)])
def test_evaluation_reports_the_llm_calls_and_tokens_the_server_answered(movie_kb, chat_server, settings, rerank_on,
                                                                        calls_per_query):
    chat_server.script(*[answer_from_prompt] * (len(TINY) * calls_per_query))
    result = evaluate(movie_kb, TINY, ["4step", "bm25"], settings(rerank=rerank_on), depth=K)
    fourstep, bm25 = result.table()

    assert len(chat_server.requests) == len(TINY) * calls_per_query
    kinds = [r["response_format"]["json_schema"]["name"] for r in chat_server.requests]
    tokens = sum(sum(TOKENS[kind]) for kind in kinds)
    assert fourstep["llm calls/query"] == calls_per_query
    assert fourstep["llm tokens/query"] == tokens / len(TINY)
    assert result.results[0].llm_usage["calls"] == len(chat_server.requests)
    assert "llm calls/query" not in bm25 and result.results[1].llm_usage is None
    assert fourstep["Hit@1"] == 1.0


def test_with_the_response_cache_a_second_evaluation_asks_the_server_nothing(movie_kb, chat_server, settings,
                                                                            tmp_path):
    cached = settings(llm_cache=tmp_path / "llm.sqlite")
    chat_server.script(answer_from_prompt, answer_from_prompt)
    first = evaluate(movie_kb, TINY, ["4step"], cached, depth=K)
    assert len(chat_server.requests) == 2 and first.table()[0]["llm calls/query"] == 1

    second = evaluate(movie_kb, TINY, ["4step"], cached, depth=K)
    assert len(chat_server.requests) == 2  # nothing new was asked
    # The cost columns still say what the method spends; the cache column says who paid it.
    assert second.table()[0]["llm calls/query"] == first.table()[0]["llm calls/query"] == 1
    assert second.table()[0]["llm tokens/query"] == first.table()[0]["llm tokens/query"] > 0
    assert (first.table()[0]["llm cache hits/query"], second.table()[0]["llm cache hits/query"]) == (0, 1)
    assert second.results[0].llm_usage["cache_hits"] == 2
    assert [(h.qid, h.doc_id) for h in second.results[0].run] == [(h.qid, h.doc_id) for h in first.results[0].run]
    assert second.results[0].metrics == first.results[0].metrics


def test_without_the_cache_a_second_evaluation_asks_again(movie_kb, chat_server, settings):
    chat_server.script(*[answer_from_prompt] * 4)
    evaluate(movie_kb, TINY, ["4step"], settings(), depth=K)
    evaluate(movie_kb, TINY, ["4step"], settings(), depth=K)
    assert len(chat_server.requests) == 4 and chat_server.pending == 0


# ------------------------------------------------------------------------ no LLM


def test_without_an_llm_4step_reads_offline(movie_kb):
    stage = pipeline("4step", movie_kb, Settings(rerank=True), K)
    assert isinstance(stage.inner, FourStep) and isinstance(stage.generator, OfflineTriplets)
    assert stage.llm is None and stage.reranker is None
    batch = stage.run(QUESTION)
    assert batch.explain["q"]["triplets"]["source"] == "offline"
    assert names(movie_kb, batch.ranked("q")[:1]) == ["William Dieterle"]


def test_4step_offline_never_asks_the_configured_llm(movie_kb, chat_server, settings):
    stage = pipeline("4step-offline", movie_kb, settings(rerank=True), K)
    batch = stage.run(QUESTION)
    assert stage.llm is None and stage.reranker is None
    assert batch.explain["q"]["triplets"]["source"] == "offline"
    assert chat_server.requests == []


def test_with_an_llm_4step_reads_with_it(movie_kb, settings):
    stage = pipeline("4step", movie_kb, settings(), K)
    assert isinstance(stage.generator, LLMTriplets) and stage.generator.name == "llm:scripted"
    assert stage.llm is stage.generator.llm and stage.reranker is None


def test_a_reading_with_no_instance_gives_way_to_the_offline_readers_grounded_path(movie_kb, chat_server, settings):
    # The model reads the request as a path that leaves Kismet through no edge of this KB.
    chat_server.script(reading(("Kismet", "directed_by", "?m"), ("?m", "directed_by", "?x")))
    batch = pipeline("4step", movie_kb, settings(), K).run(QUESTION)
    explain = batch.explain["q"]
    assert names(movie_kb, batch.ranked("q")[:1]) == ["William Dieterle"]
    assert explain["readings"]["winner"] == "offline" and explain["llm_reading"]["outcome"] == "lost"
    assert explain["readings"]["why"] == "the LLM's reading finds no candidate in the graph"
    assert explain["triplets"]["source"] == "offline"
