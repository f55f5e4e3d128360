"""Query expansion without an LLM, on real KBs: KAR's steps one by one, the baselines, LKQE offline, CLI.

``expand(kb, settings, text, method)`` returns the expanded query and the knowledge it came
from; ``pipeline(method, kb, settings, k)`` searches with it. Each KAR step is checked on the
tiny movie KB (``fixtures_kb``) or the product KB (``conftest``): entities from the mention
finder, neighbours by SPARQL with relation and direction, filtering by *document*
embeddings (the ablation by names), document triples within the token budget, and an
offline expansion that carries the graph's facts into the final query.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner

from support.fixtures_kb import bio_kb, movie_kb, names, node  # noqa: F401 - fixtures
from kqe_rdf.kb.build import build_kb
from kqe_rdf.cli import cli
from kqe_rdf.core.config import Settings
from kqe_rdf.core.errors import KqeError
from kqe_rdf.evaluation.runner import evaluate, query_records
from kqe_rdf.methods.expansion import Expansion, expand, expander
from kqe_rdf.methods.expansion.kar import Neighbourhood
from kqe_rdf.methods.expansion.text import estimate_tokens, in_clauses
from kqe_rdf.kb.importers import get_importer
from kqe_rdf.kb.knowledge_base import KnowledgeBase
from kqe_rdf.evaluation.querysets import EvalQuery, QuerySet
from kqe_rdf.methods.registry import EXPANSION, METHODS, pipeline

M = "https://w3id.org/kqe/metaqa#"
OFFLINE = Settings()
#: KAR's own propagation over every neighbour of the linked names (the grounded reading off: tested below).
NEIGHBOURS = Settings(kar_grounded=False)


@pytest.fixture(autouse=True)
def no_llm(monkeypatch):
    """The CLI reads OPENAI_BASE_URL and KQE_* from the environment: these tests run with no LLM."""
    for key in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "KQE_LLM_MODEL", "KQE_LLM_BASE_URL", "KQE_CONFIG"):
        monkeypatch.delenv(key, raising=False)


def edge(exp, name: str) -> dict:
    [found] = [n for n in exp.neighbours if n["name"] == name]
    return found


# ------------------------------------------------------------------ KAR, step by step


def test_kar_offline_reads_the_entity_follows_its_relations_and_puts_the_facts_in_the_query(movie_kb):
    exp = expand(movie_kb, NEIGHBOURS, "who directed Kismet", "kar-offline")

    assert exp.method == "kar-offline" and exp.llm == "offline" and exp.llm_usage is None
    [entity, pseudo] = exp.entities
    assert (entity["text"], entity["found_by"], entity["nodes"][0]["iri"]) == ("Kismet", "mention",
                                                                               node(movie_kb, "Kismet"))
    assert pseudo["found_by"] == "query" and pseudo["text"] == "who directed Kismet"
    dieterle = edge(exp, "William Dieterle")
    assert (dieterle["relation"], dieterle["relation_iri"], dieterle["direction"], dieterle["hop"]) == (
        "directed by", f"{M}directed_by", "out", 1)
    assert dieterle["from"] == node(movie_kb, "Kismet")
    assert exp.expanded.startswith("who directed Kismet ")
    assert len(exp.expansions) == NEIGHBOURS.kar.passages == 1  # offline: the best neighbour's passage
    three = expand(movie_kb, Settings(kar_grounded=False, kar_passages=3), "who directed Kismet", "kar-offline")
    assert len(three.expansions) == 3 and three.neighbours == exp.neighbours
    assert any("Kismet directed by William Dieterle." in e for e in three.expansions)
    assert three.expansions[0] == exp.expansions[0]


def test_kar_offline_takes_its_entities_and_facts_from_the_grounded_reading(movie_kb):
    """The reading's answer (Michael Mann directed Heat, which shares Robert De Niro with Taxi Driver) with the
    facts along its path, not Taxi Driver's every neighbour."""
    question = "who directed the films that share actors with Taxi Driver"
    exp = expand(movie_kb, OFFLINE, question, "kar-offline")
    around = expand(movie_kb, NEIGHBOURS, question, "kar-offline")

    assert exp.entities[0]["text"] == "Taxi Driver" and exp.entities[0]["found_by"] == "grounded reading"
    [mann] = exp.neighbours
    assert (mann["name"], mann["relation"], mann["from_name"], mann["hop"]) == ("Michael Mann", "directed by", "Heat", 3)
    assert mann["facts"] == ["Taxi Driver starred actors Robert De Niro", "Heat starred actors Robert De Niro",
                             "Heat directed by Michael Mann"]
    assert mann["source"] == "grounded reading: answer 1 of 4step-offline, path starred actors / starred actors / " \
                             "directed by"
    assert exp.expansions[0].startswith("Taxi Driver starred actors Robert De Niro; Heat starred actors Robert De "
                                        "Niro; Heat directed by Michael Mann.")
    assert "Michael Mann" not in " ".join(around.expansions)  # one hop around Taxi Driver never reaches him


def test_a_grounded_fact_that_negates_what_the_request_names_is_never_appended(bio_kb):
    """"Frontal bossing syndrome lacks phenotype Seizure" is a fact of the graph, not one about a request that
    names seizures as present."""
    exp = expand(bio_kb, OFFLINE, "a disease with seizures", "kar-offline")

    assert exp.neighbours and all(n["source"].startswith("grounded reading") for n in exp.neighbours)
    assert not any("lacks" in fact for n in exp.neighbours for fact in n["facts"])
    assert not any("lacks" in e for e in exp.expansions)
    assert exp.neighbours[0]["name"] in {"Focal epilepsy type 1", "Generalized epilepsy with forehead anomaly"}


def test_neighbours_come_with_the_direction_of_the_stored_edge(movie_kb):
    hood = Neighbourhood(movie_kb)
    from_film = {(r, movie_kb.document(n).name, d) for r, n, d in hood(node(movie_kb, "Kismet"))}
    from_person = {(r, movie_kb.document(n).name, d) for r, n, d in hood(node(movie_kb, "William Dieterle"))}

    assert (f"{M}directed_by", "William Dieterle", "out") in from_film
    assert (f"{M}directed_by", "Kismet", "in") in from_person
    assert (f"{M}directed_by", "The Hunchback of Notre Dame", "in") in from_person
    assert all(d == "in" for _, _, d in from_person)


def test_the_fanout_limit_caps_neighbours_per_node_and_relation(movie_kb):
    eastwood = node(movie_kb, "Clint Eastwood")
    everything = Neighbourhood(movie_kb)(eastwood)
    capped = Neighbourhood(movie_kb, fanout=1)(eastwood)

    directed = [n for r, n, d in everything if r == f"{M}directed_by"]
    assert len(directed) == 3  # Unforgiven, Gran Torino, The Bridges of Madison County
    assert len([n for r, n, d in capped if r == f"{M}directed_by"]) == 1
    assert len(capped) == len({r for r, _, _ in everything})


@pytest.fixture(scope="module")
def hub_kb(tmp_path_factory):
    """A symptom shared by 40 diseases (a hub, as HPO's Seizure is), six of them named after what a request says."""
    folder = tmp_path_factory.mktemp("hub")
    named = ["Fever seizures syndrome", "Seizures with fever and rash", "Febrile seizures, familial",
             "Rash and fever of childhood", "Seizure disorder with fever", "Fever-induced seizures"]
    lines = [{"kind": "node", "id": "seizure", "type": "Symptom", "name": "Seizure"}]
    for i in range(40):
        name = named[i] if i < len(named) else f"Disorder number {i} of the kidney"
        lines += [{"kind": "node", "id": f"d{i}", "type": "Disease", "name": name},
                  {"kind": "edge", "head": f"d{i}", "relation": "hasSymptom", "tail": "seizure"}]
    (folder / "hub.jsonl").write_text("\n".join(json.dumps(line) for line in lines) + "\n", encoding="utf-8")
    build_kb(get_importer("jsonl")([folder / "hub.jsonl"]), folder / "kb")
    return KnowledgeBase.open(folder / "kb")


def test_name_filtering_a_hub_scores_only_the_names_that_share_the_requests_words(hub_kb):
    query = "seizure with fever and rash"
    # KAR's own propagation (not the structural reader's nodes), whose hops are what name filtering scores
    whole = Settings(kar_query_nodes=0, kar_neighbours=3, kar_grounded=False)
    bounded = Settings(kar_query_nodes=0, kar_neighbours=3, kar_name_hub=20, kar_encode_names=6, kar_grounded=False)
    scored_whole = expander("kar-namefilter-offline", hub_kb, whole)
    scored_bounded = expander("kar-namefilter-offline", hub_kb, bounded)
    all_names, few_names = scored_whole.expand(query), scored_bounded.expand(query)
    assert scored_whole.filter.encoded == 40 and scored_bounded.filter.encoded == 6  # a hop of 40 > 20: a hub
    assert few_names.neighbours == all_names.neighbours and few_names.expanded == all_names.expanded
    assert {n["name"] for n in few_names.neighbours} <= {"Fever seizures syndrome", "Seizures with fever and rash",
                                                        "Febrile seizures, familial", "Rash and fever of childhood",
                                                        "Seizure disorder with fever", "Fever-induced seizures"}
    # Below the hub size every name is scored, as before.
    small = expander("kar-namefilter-offline", hub_kb, Settings(kar_query_nodes=0, kar_name_hub=40, kar_grounded=False))
    small.expand(query)
    assert small.filter.encoded == 40


def test_filtering_scores_neighbours_by_their_documents_not_their_names(kb, iri):
    """The D500's *name* says nothing of birds; its document does, and document filtering ranks it first."""
    query = "a Nikon camera for photographing birds in flight"
    # Nikon's neighbours, not the query's top node's; the paper's filter (the encoder alone)
    only_entities = Settings(kar_query_nodes=0, kar_grounded=False, kar_filter="dense")
    by_document = expand(kb, only_entities, query, "kar-offline")
    by_name = expand(kb, only_entities, query, "kar-namefilter-offline")

    [nikon] = [e for e in by_document.entities if e["found_by"] == "mention"]
    assert nikon["nodes"][0]["iri"] == iri("nikon")
    q = kb.embed_query(query)
    for n in by_document.neighbours:
        assert n["score"] == pytest.approx(float(kb.dense.vector(n["iri"]) @ q), abs=1e-4)
    assert by_document.neighbours[0]["iri"] == iri("B001")
    names_vectors = kb.encoder.encode([n["name"] for n in by_name.neighbours])
    for n, vector in zip(by_name.neighbours, names_vectors):
        assert n["score"] == pytest.approx(float(vector @ q), abs=2e-3)
    assert by_name.neighbours[0]["iri"] == iri("B005")  # "Telephoto Zoom Lens" is the name nearest the query


def test_hybrid_filtering_fuses_the_documents_cosine_and_bm25_ranks(kb, iri):
    """kar_filter = "hybrid": a node's score is 1/(60 + its cosine rank) + 1/(60 + its BM25 rank) among the
    nodes scored, so a document BM25 finds but the encoder ranks low can still be kept."""
    query = "a Nikon camera for photographing birds in flight"
    kar = expander("kar-offline", kb, Settings(kar_filter="hybrid"))
    some = [iri(i) for i in ("B001", "B002", "B005", "B006", "B007")]
    cosine = {i: float(kb.dense.vector(i) @ kb.embed_query(query)) for i in some}
    bm25 = kb.text_index.scores_of(query, some)
    assert bm25 and set(bm25) <= set(some)
    expected = {i: 0.0 for i in some}
    for scores in (cosine, bm25):
        for rank, i in enumerate(sorted(scores, key=lambda i: (-scores[i], i)), 1):
            expected[i] += 1 / (60 + rank)
    assert kar.filter.scores(query, some) == pytest.approx(expected)
    assert expander("kar-offline", kb, Settings(kar_filter="dense")).filter.scores(query, some) == pytest.approx(
        cosine, abs=1e-4)
    with pytest.raises(KqeError, match="kar_filter"):
        Settings(kar_filter="names")


def test_nodes_without_a_stored_embedding_are_encoded_from_their_documents_within_the_cap(movie_kb, tmp_path):
    """A KB embedded only in part: the other neighbours' documents are encoded on the fly, at most kar_encode."""
    from kqe_rdf.kb.build import embed_kb

    kb_dir = tmp_path / "movies"
    import shutil

    shutil.copytree(movie_kb.path, kb_dir)
    shutil.rmtree(kb_dir / "embeddings")
    embed_kb(kb_dir, types=["Person"])
    partial = KnowledgeBase.open(kb_dir)
    exp = expand(partial, Settings(kar_encode=2, kar_query_nodes=0, kar_grounded=False, kar_filter="dense"),
                 "who directed Kismet", "kar-offline")
    # Kismet's neighbours: four people (stored) and four others (year, language, genre, tag), of which
    # only two may be encoded.
    people = {"William Dieterle", "Edward Knoblock", "Ronald Colman", "Marlene Dietrich"}
    found = {n["name"] for n in exp.neighbours}
    assert people <= found and len(found - people) == 2

    scorer = expander("kar-offline", partial, Settings(kar_encode=100)).documents
    kismet_doc = partial.document(node(partial, "Kismet"))
    [score] = scorer.scores("Kismet", [kismet_doc.iri]).values()
    assert score == pytest.approx(float(scorer.encoder.encode([kismet_doc.text])[0] @ partial.embed_query("Kismet")),
                                  abs=1e-5)


def test_two_hops_grow_from_the_best_first_hop_neighbours(movie_kb):
    exp = expand(movie_kb, Settings(kar_hops=2, kar_neighbours=20, kar_grounded=False), "actors in films by Ridley Scott",
                 "kar-offline")
    hops = {n["name"]: n for n in exp.neighbours}
    assert hops["Blade Runner"]["hop"] == 1 and hops["Alien"]["hop"] == 1
    second = [n for n in exp.neighbours if n["hop"] == 2]
    assert second and all(movie_kb.document(n["from"]).name in hops for n in second)
    assert {"Harrison Ford", "Sigourney Weaver"} <= set(hops)
    assert not [n for n in expand(movie_kb, NEIGHBOURS, "actors in films by Ridley Scott", "kar-offline").neighbours
                if n["hop"] == 2]


@pytest.mark.parametrize("budget", [40, 120, 5000])
def test_document_triples_stay_within_the_token_budget(movie_kb, budget):
    exp = expand(movie_kb, Settings(expansion_context_tokens=budget, kar_grounded=False), "who directed Kismet",
                 "kar-offline")

    assert exp.context_tokens <= budget
    assert estimate_tokens("\n".join(exp.context)) == exp.context_tokens
    assert all("--" in line and "-->" in line for line in exp.context)
    if budget == 5000:
        assert len(exp.context) == len(exp.neighbours)
        assert any(line.startswith("(Kismet") and "--directed by--> (William Dieterle: " in line
                   for line in exp.context)
        assert sum("(Kismet: " in line for line in exp.context) == 1  # a document is shown once, then named
    if budget == 40:
        assert len(exp.context) < len(exp.neighbours)


def test_kar_without_kg_uses_only_the_entity_documents(movie_kb):
    exp = expand(movie_kb, OFFLINE, "who directed Kismet", "kar-nokg-offline")
    assert exp.neighbours == []
    assert exp.context and exp.context[0].startswith("Kismet: ")
    assert exp.expansions[0].startswith("Kismet.")


def test_a_query_naming_nothing_in_the_kb_still_expands_from_the_query_itself(movie_kb):
    exp = expand(movie_kb, OFFLINE, "zzz qqq", "kar-offline")
    assert [e["found_by"] for e in exp.entities] == ["query"]
    assert exp.expanded.startswith("zzz qqq")


# ---------------------------------------------------------------- retrieval with expansions


def test_every_expansion_method_is_a_registered_retrieval_method():
    for method in ("kar", "kar-offline", "kar-nokg", "kar-nokg-offline", "kar-namefilter", "kar-namefilter-offline",
                   "prf-docs", "hyde", "q2d", "rar", "agr", "lkqe", "lkqe-offline"):
        assert method in METHODS


def test_kar_offline_search_finds_the_answer_the_graph_points_to_and_explains_it(movie_kb):
    stage = pipeline("kar-offline", movie_kb, OFFLINE, 5)
    batch = stage.run("who directed Kismet")
    assert len(batch.ranked("q")) == 5
    assert "William Dieterle" in names(movie_kb, batch.ranked("q")[:3])
    assert batch.explain["q"]["expansion"]["method"] == "kar-offline"
    assert repr(stage).startswith("Expand(kar-offline, offline) >> (BM25(k=100) + Dense(k=100))")  # kar_final: hybrid


def test_prf_docs_appends_the_top_documents_of_the_final_retriever(movie_kb):
    exp = expand(movie_kb, Settings(expansion_docs=2), "Blade Runner", "prf-docs")
    top = [h.iri for h in pipeline(OFFLINE.kar.final, movie_kb, OFFLINE, 2).inner.search("Blade Runner")]
    assert exp.method == "prf-docs" and exp.passages == top
    assert exp.expansions[0].startswith(movie_kb.document(top[0]).name + ": ")


def test_llm_methods_say_they_need_an_llm_and_kar_runs_offline_without_one(movie_kb):
    for method in ("hyde", "q2d", "rar", "agr"):
        with pytest.raises(KqeError, match=f"{method} needs an LLM.*kar-offline"):
            pipeline(method, movie_kb, OFFLINE, 5)
    assert expand(movie_kb, OFFLINE, "who directed Kismet", "kar").method == "kar-offline"
    assert expand(movie_kb, OFFLINE, "who directed Kismet", "lkqe").method == "lkqe-offline"


def test_bad_input_gets_a_clear_error(movie_kb):
    with pytest.raises(KqeError, match="empty"):
        expand(movie_kb, OFFLINE, "  ", "kar-offline")
    with pytest.raises(KqeError, match="no expansion method 'kqr'.*kar-offline"):
        expand(movie_kb, OFFLINE, "x", "kqr")
    with pytest.raises(KqeError, match="kar_hops must be 1 or 2"):
        Settings(kar_hops=3)
    with pytest.raises(KqeError, match="kar_final must be"):
        Settings(kar_final="sparse")
    with pytest.raises(KqeError, match="lkqe_docs must be at least 1"):
        Settings(lkqe_docs=0)


def test_eval_runs_expansion_methods_like_any_other(movie_kb):
    qs = QuerySet("movies", [EvalQuery("1", "who directed Kismet", {"William Dieterle": 1}),
                             EvalQuery("2", "what films did Ridley Scott direct", {"Alien": 1, "Blade Runner": 1})])
    result = evaluate(movie_kb, qs, ["dense", "kar-offline", "prf-docs"], OFFLINE, depth=10, trec_measures=())
    by = {r.method: r for r in result.results}
    assert set(by) == {"dense", "kar-offline", "prf-docs"}
    assert by["kar-offline"].llm_usage is None and len(by["kar-offline"].run) == 20
    assert by["kar-offline"].metrics["Hit@5"] >= by["dense"].metrics["Hit@5"]


# ------------------------------------------------------------------- LKQE offline


PASSAGES = """\
p1\tAspirin irreversibly inhibits cyclooxygenase. This blocks thromboxane synthesis in platelets. Platelets cannot make new enzyme.
p2\tIbuprofen is a reversible inhibitor of cyclooxygenase used for pain and fever.
p3\tThe Eiffel Tower is a wrought-iron lattice tower in Paris, completed in 1889 for the World's Fair.
p4\tLow-dose aspirin reduces the risk of heart attack by preventing platelet clots in the coronary arteries.
p5\tParis is the capital of France; the Seine flows through the city.
"""


@pytest.fixture(scope="module")
def passages_kb(tmp_path_factory):
    """Five passages, no relations (a text collection without a KG), BM25 only."""
    folder = tmp_path_factory.mktemp("passages")
    (folder / "passages.tsv").write_text(PASSAGES, encoding="utf-8")
    kb_dir = folder / "kb"
    build_kb(get_importer("passages")([folder / "passages.tsv"]), kb_dir)
    return KnowledgeBase.open(kb_dir)


def test_lkqe_offline_adds_the_key_sentences_nearest_the_query_three_times_weighted(passages_kb):
    query = "how does aspirin affect platelets"
    exp = expand(passages_kb, Settings(lkqe_sentences=2, expansion_weight_full=0), query, "lkqe-offline")

    assert exp.method == "lkqe-offline" and exp.triples == [] and exp.graph is None
    assert len(exp.context) == 2 and all(s in PASSAGES for s in exp.context)
    assert any("platelet" in s.lower() for s in exp.context)
    assert exp.expanded.startswith(" ".join([query] * 3) + " ")
    assert len(exp.expansions[0].split()) <= 15 * len(query.split())
    assert not (passages_kb.path / "expansions").exists()


def test_lkqe_keeps_whole_clauses_within_its_budget(passages_kb):
    """The budget (``lkqe_max_ratio`` × the query's words) takes the key sentences best first and, of the first one
    that does not fit, the leading clauses that do: nothing is cut inside a clause."""
    settings = Settings(lkqe_max_ratio=10, lkqe_sentences=5, expansion_weight_full=0)
    exp = expand(passages_kb, settings, "aspirin platelets", "lkqe-offline")

    added = exp.expansions[0]
    assert len(added.split()) <= 20 and added[-1] in ".,;:"
    assert " ".join(exp.context).startswith(added)
    assert in_clauses(["Paris is the capital of France; the Seine flows through the city."], 8) == \
        "Paris is the capital of France;"


def test_an_expansion_that_moves_nothing_is_weighted_to_zero_and_returns_bm25s_ranking_exactly(passages_kb):
    """Only p1 and p4 name aspirin and platelets; their key sentences keep BM25's first page as it is, so the
    expansion adds nothing the query had not found: weight 0, the results are BM25's, scores and all, and
    ``expand`` says why."""
    query = "aspirin platelets"
    exp = expand(passages_kb, OFFLINE, query, "lkqe-offline")
    assert exp.weight == 0 and exp.expanded == query and exp.expansions  # listed, weighed out
    assert exp.evidence["new"] == 0 and "adds nothing the query had not found" in exp.evidence["reason"]

    lkqe = pipeline("lkqe-offline", passages_kb, OFFLINE, 5).search(query)
    bm25 = pipeline("bm25", passages_kb, OFFLINE, 5).search(query)
    assert [(h.iri, h.score, h.rank) for h in lkqe] == [(h.iri, h.score, h.rank) for h in bm25]


def test_an_expansion_counts_by_the_share_of_new_hits_it_brings_to_the_first_page(passages_kb):
    """BM25 finds p1 and p4 for "aspirin inhibits"; at full weight the key sentences (cyclooxygenase) add p2: one
    new hit of three, a third of the page, where half counts fully (``expansion_weight_full``): weight 2/3. The
    query's words count three times (``lkqe_query_repeat``), the expansion's 2/3 each."""
    exp = expand(passages_kb, Settings(lkqe_sentences=2), "aspirin inhibits", "lkqe-offline")
    assert (exp.evidence["new"], exp.evidence["of"], exp.weight) == (1, 3, 0.6667)
    assert exp.bag["inhibits"] == 3 + 0.6667 * exp.expansions[0].lower().split().count("inhibits")

    hits = pipeline("lkqe-offline", passages_kb, Settings(lkqe_sentences=2), 5).search("aspirin inhibits")
    bm25 = pipeline("bm25", passages_kb, OFFLINE, 5).search("aspirin inhibits")
    assert {passages_kb.document(h.iri).identifier for h in bm25} == {"p1", "p4"}
    assert "p2" in {passages_kb.document(h.iri).identifier for h in hits}


def test_a_weight_below_one_scales_only_the_words_the_expansion_adds():
    """KAR's final query counts each distinct word once (a plain query); weighed, the words only the expansion has
    count by the weight; LKQE's counts every word (the query's three times); at 0 the query is searched alone."""
    plain = Expansion("seizures in children", "kar-offline", expansions=["Seizures: Dravet syndrome"], weight=0.5)
    assert plain.finish().bag == {"seizures": 1.0, "in": 1.0, "children": 1.0, "Seizures": 0.5, "Dravet": 0.5,
                                  "syndrome": 0.5}
    counted = Expansion("aspirin platelets", "lkqe-offline", expansions=["aspirin blocks"], weight=0.5)
    assert counted.finish(repeat=3, counted=True).bag == {"aspirin": 3.5, "platelets": 3.0, "blocks": 0.5}
    zero = Expansion("aspirin platelets", "lkqe-offline", expansions=["aspirin blocks"], weight=0.0)
    assert zero.finish(repeat=3, counted=True).bag is None and zero.expanded == "aspirin platelets"
    assert Expansion("a b", "kar-offline", expansions=["c"]).finish().bag is None  # weight 1: the plain query


def test_an_evaluation_keeps_each_querys_weight_in_its_per_query_record(passages_kb):
    qs = QuerySet("passages", [EvalQuery("1", "aspirin platelets", {"p1": 1}),
                               EvalQuery("2", "aspirin inhibits", {"p2": 1})])
    result = evaluate(passages_kb, qs, ["lkqe-offline"], OFFLINE, depth=5, trec_measures=())
    weights = {r["qid"]: r["explanation"]["weight"] for r in query_records(result, passages_kb)}
    assert weights == {"1": 0.0, "2": 0.6667}


def shown_expansion(kb, request: str, method: str) -> tuple[str, str]:
    """``kqe-rdf expand REQUEST -m METHOD --show-context``: its output, and the same with the lines joined."""
    shown = CliRunner().invoke(cli, ["expand", request, "--kb", str(kb.path), "-m", method, "--show-context"])
    assert shown.exit_code == 0, shown.output
    return shown.output, " ".join(shown.output.split())


def test_cli_expand_shows_the_weight_and_its_evidence(passages_kb):
    output, text = shown_expansion(passages_kb, "aspirin platelets", "lkqe-offline")
    assert "weight 0: at full weight the expansion's first 2 hits are the query's own" in text
    assert "key sentences 4, best cosine" in text  # p1 has three, p4 one
    assert output.startswith("aspirin platelets\n")  # in a pipe: the query searched, as it is


def test_lkqe_offline_searches_with_bm25(passages_kb):
    hits = pipeline("lkqe-offline", passages_kb, OFFLINE, 3).search("how does aspirin affect platelets")
    assert [passages_kb.document(h.iri).identifier for h in hits][:2] in (["p1", "p4"], ["p4", "p1"])


def test_a_neighbour_cited_for_several_terms_is_one_passage_naming_it_once_then_its_document(bio_kb):
    """A reading of a list of phenotypes cites the disease once per term it matches; the passage says so in one
    sentence (its name once, the phenotypes listed) and keeps room for the disease's document, while the
    neighbour keeps every fact as cited."""
    exp = expand(bio_kb, OFFLINE, "A patient presents with seizure and high forehead. Which disease explains this?",
                 "kar-offline")

    first = exp.neighbours[0]
    assert first["name"] == "Generalized epilepsy with forehead anomaly" and len(first["facts"]) == 2
    assert all(fact.startswith(first["name"] + " has phenotype ") for fact in first["facts"])
    assert first["fact"] == ("Generalized epilepsy with forehead anomaly has phenotype Bilateral tonic-clonic "
                             "seizure, High forehead.")
    passage = exp.expansions[0]
    assert passage.startswith(first["fact"]) and passage.count(first["name"]) == 1
    sentence = passage[len(first["fact"]):].strip()  # of its document, the sentence nearest the request
    assert sentence and sentence in bio_kb.document(first["iri"]).text


# ----------------------------------------------------------------------------- CLI


def test_cli_expand_prints_the_expanded_query_and_with_show_context_its_knowledge(movie_kb):
    runner = CliRunner()
    plain = runner.invoke(cli, ["expand", "who directed Kismet", "--kb", str(movie_kb.path), "-m", "kar-offline"])
    assert plain.exit_code == 0, plain.output
    assert plain.output.startswith("who directed Kismet ")

    shown = runner.invoke(cli, ["expand", "who directed Kismet", "--kb", str(movie_kb.path), "-m", "kar-offline",
                                "--show-context"])
    assert shown.exit_code == 0, shown.output
    assert "entity 'Kismet' (grounded reading)" in shown.output
    assert "from the grounded reading: answer 1 of 4step-offline, path directed by: Kismet directed by William " \
           "Dieterle" in " ".join(shown.output.split())  # where the fact came from (lines wrap at the terminal)
    assert "--directed by--> (William Dieterle)" in shown.output
    assert "context (" in shown.output and "expansion 1:" in shown.output


def test_cli_expand_json_and_options(movie_kb):
    result = CliRunner().invoke(cli, ["expand", "actors in films by Ridley Scott", "--kb", str(movie_kb.path), "-m",
                                      "kar-offline", "--hops", "2", "--neighbours", "4", "--no-grounded", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["method"] == "kar-offline" and len(data["neighbours"]) == 4
    assert data["expanded_query"].startswith("actors in films by Ridley Scott")
    assert set(data) >= {"entities", "neighbours", "context", "expansions", "llm_usage", "notes"}


def test_cli_search_and_explain_with_an_expansion_method(movie_kb):
    result = CliRunner().invoke(cli, ["search", "who directed Kismet", "--kb", str(movie_kb.path), "-m", "kar-offline",
                                      "--explain"])
    assert result.exit_code == 0, result.output
    assert "William Dieterle" in result.output and "neighbour" in result.output


def test_cli_expand_errors_are_one_line(movie_kb):
    result = CliRunner().invoke(cli, ["expand", "who directed Kismet", "--kb", str(movie_kb.path), "-m", "hyde"])
    assert result.exit_code == 2
    assert result.output.startswith("error: hyde needs an LLM")
    offline = [name for name, (_family, _variant, alone) in EXPANSION.items() if alone]
    assert "kar-namefilter-offline" in offline and [m for m in offline if m not in result.output] == []
    bad = CliRunner().invoke(cli, ["expand", "x", "--kb", str(movie_kb.path), "--hops", "5"])
    assert bad.exit_code == 2 and "kar_hops must be 1 or 2" in bad.output


def test_the_expansion_vectors_are_unit_length(movie_kb):
    """Scores are cosines: on-the-fly encodings are normalised like the stored ones."""
    scorer = expander("kar-offline", movie_kb, OFFLINE).documents
    scorer._encode([node(movie_kb, "Kismet")])
    [vector] = scorer._vectors.values()
    assert np.linalg.norm(vector) == pytest.approx(1.0, abs=1e-5)


# ---------------------------------------------------------------- kar-offline's weight: what its KG evidence reaches


def test_kar_offline_counts_fully_when_the_linked_entity_and_its_relation_are_the_request(movie_kb):
    """"who directed Kismet": Kismet is linked by name and "directed" names the relation read from it; every word
    of the request is reached, so the KG's passage counts fully (MetaQA-like)."""
    exp = expand(movie_kb, OFFLINE, "who directed Kismet", "kar-offline")
    assert exp.weight == 1 and exp.evidence["reached"] == "directed kismet"
    assert "2 of the request's 2 words are linked entities' names or the relations read from them" in \
        exp.evidence["reason"]


def test_a_kar_offline_request_its_evidence_does_not_reach_is_weighted_to_zero_and_returns_bm25s_ranking(movie_kb):
    """A request that names no entity and no relation of the KB (long, in its own words, SciFact-like) still gets
    a passage, from the neighbours of its own best hit; none of its words is reached, so the weight is 0 and the
    final retriever searches the request alone: with BM25 as the final retriever, BM25's ranking exactly."""
    request = "a slow quiet tale of sorrow and hope somewhere in Madison beside the grey northern sea"
    settings = Settings(kar_final="bm25")
    exp = expand(movie_kb, settings, request, "kar-offline")
    assert exp.expansions and exp.weight == 0 and exp.expanded == request  # listed, weighed out
    assert exp.evidence["reached"] == "" and "searched as it is" in exp.evidence["reason"]

    kar = pipeline("kar-offline", movie_kb, settings, 5).search(request)
    bm25 = pipeline("bm25", movie_kb, settings, 5).search(request)
    assert kar and [(h.iri, h.score, h.rank) for h in kar] == [(h.iri, h.score, h.rank) for h in bm25]
    unweighed = pipeline("kar-offline", movie_kb, Settings(kar_final="bm25", kar_weight_full=0), 5).search(request)
    assert [(h.iri, h.score) for h in unweighed] != [(h.iri, h.score) for h in bm25]  # weight 1 (weighing off)


def test_a_request_partly_reached_counts_by_that_share_up_to_kar_weight_full(movie_kb):
    """Six words (stop words aside), one reached (Kismet): a sixth over ``kar_weight_full`` 0.25 is 0.67; with full
    weight from 0.15 on, 1."""
    request = "tell me something about Kismet please"
    exp = expand(movie_kb, Settings(kar_weight_full=0.25), request, "kar-offline")
    assert exp.evidence["reached"] == "kismet" and exp.weight == 0.6667
    assert exp.bag["Kismet"] == 1 and exp.bag["tags"] == 0.6667  # the words only the passage has count by it
    assert expand(movie_kb, Settings(kar_weight_full=0.15), request, "kar-offline").weight == 1


def test_cli_expand_shows_kar_offlines_weight_and_what_it_reached(movie_kb):
    _output, text = shown_expansion(movie_kb, "who directed Kismet", "kar-offline")
    assert "weight 1: 2 of the request's 2 words are linked entities' names or the relations read from them" in text
    assert "reached directed kismet" in text
