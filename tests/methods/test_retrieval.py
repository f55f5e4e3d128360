"""Retrieval stages on the product KB: named pipelines, type filters, composition, and awkward query text."""

from __future__ import annotations

import pytest

from kqe_rdf.kb.build import build_kb
from kqe_rdf.core.config import Settings
from kqe_rdf.core.errors import KqeError, SchemaError
from kqe_rdf.kb.importers.jsonl import JsonlImporter
from kqe_rdf.kb.knowledge_base import KnowledgeBase
from kqe_rdf.kb.text_index import plain_query
from kqe_rdf.methods.retrieval import BM25, Batch, Cutoff, Dense, Hit, Pipeline, Query, RRFusion, Stage, ranking
from kqe_rdf.methods.registry import pipeline

METHODS = ["bm25", "dense", "hybrid", "hybrid-rrf", "prf"]

QUERIES = {
    "a camera for wildlife photography compatible with my Nikon F-mount lenses": "B001",
    "tripod that folds small for travel": "B007",
    "mirrorless camera for vlogging and 4K video": "B003",
    "cheap portrait lens with background blur for my Canon": "B006",
}


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("text, expected", QUERIES.items(), ids=list(QUERIES.values()))
def test_each_method_ranks_the_right_product_first(kb, ids, method, text, expected):
    hits = pipeline(method, kb, Settings(), k=5).search(text)
    assert ids(hits)[0] == expected
    assert [h.rank for h in hits] == list(range(1, len(hits) + 1))
    assert all(h.qid == "q" for h in hits)
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)


@pytest.mark.parametrize("method", METHODS)
def test_k_caps_the_number_of_hits(kb, method):
    assert len(pipeline(method, kb, Settings(), k=3).search("camera")) == 3


def test_a_batch_answers_every_query(kb, ids):
    batch = Batch([Query("wildlife", "camera for birds in flight"), Query("tripod", "folding travel tripod")])
    out = BM25(kb, k=2)(batch)
    assert out.queries == batch.queries
    assert ids(out.ranked("wildlife"))[0] == "B001"
    assert ids(out.ranked("tripod"))[0] == "B007"
    assert out.ranked("not-asked") == []


@pytest.mark.parametrize("method", ["bm25", "dense", "hybrid", "prf"])
def test_a_type_filter_keeps_only_nodes_of_that_type(kb, ids, method):
    hits = pipeline(method, kb, Settings(), k=10, types=["Brand"]).search("Nikon F-mount lenses")
    assert ids(hits)[0] == "nikon"
    assert set(ids(hits)) <= {"nikon", "canon", "sony", "manfrotto"}


def test_an_unknown_type_or_method_is_refused_with_a_suggestion(kb):
    with pytest.raises(SchemaError, match="did you mean Product"):
        pipeline("bm25", kb, Settings(), k=5, types=["Prodcut"])
    with pytest.raises(KqeError, match="no retrieval method 'splade'; available: bm25, dense, hybrid, hybrid-rrf, prf"):
        pipeline("splade", kb, Settings(), k=5)


def test_cutoff_keeps_the_top_of_the_ranking(kb):
    full = BM25(kb, k=10).search("camera")
    assert (BM25(kb, k=10) % 2).search("camera") == full[:2]


def test_plus_fuses_two_rankings_by_reciprocal_rank(kb, ids):
    fused = BM25(kb, k=10) + Dense(kb, k=10)
    assert isinstance(fused, RRFusion)
    hits = fused.search("tripod that folds small for travel")
    assert ids(hits)[0] == "B007"
    assert hits[0].score == pytest.approx(2 / 61)  # first in both lists, RRF constant 60


def test_a_hybrid_searches_bm25_beside_the_dense_side_with_the_same_result(kb, monkeypatch):
    import threading

    from kqe_rdf.methods.retrieval import reciprocal_rank

    text = "a camera for wildlife photography compatible with my Nikon F-mount lenses"
    one_after_another = ranking("q", list(reciprocal_rank(
        [BM25(kb, k=10).search(text, names=False), Dense(kb, k=10).search(text, names=False)]).items()))

    threads = {}
    search, dense = kb.text_index.search, Dense.transform
    monkeypatch.setattr(kb.text_index, "search", lambda *a, **k: threads.setdefault(
        "bm25", threading.current_thread().name) and search(*a, **k))
    monkeypatch.setattr(Dense, "transform", lambda self, b: threads.setdefault(
        "dense", threading.current_thread().name) and dense(self, b))
    assert (BM25(kb, k=10) + Dense(kb, k=10)).search(text, names=False) == one_after_another
    assert threads == {"bm25": "kqe-bm25_0", "dense": threading.current_thread().name}


def test_later_starts_a_pipelines_bm25_and_finishes_when_called(kb, ids):
    text = "tripod that folds small for travel"
    pending = ((BM25(kb, k=10) + Dense(kb, k=10)) % 2).later(Batch([Query("t", text)]))
    assert ids(pending().ranked("t")) == ids((BM25(kb, k=10) + Dense(kb, k=10)).search(text))[:2]
    assert ids(BM25(kb, k=3).later(Batch([Query("t", "tripod")]))().ranked("t")) == ids(BM25(kb, k=3).search("tripod"))


class KeepProducts(Stage):
    """A re-ranking stage written against the protocol: drop hits that are not products."""

    def __init__(self, kb) -> None:
        self.kb = kb

    def transform(self, batch: Batch) -> Batch:
        product = self.kb.schema.node_class("Product").iri
        kept = {qid: [h for h in hits if product in self.kb.document(h.iri).types] for qid, hits in batch.hits.items()}
        return Batch(batch.queries, {qid: ranking(qid, [(h.iri, h.score) for h in hits]) for qid, hits in kept.items()})


def test_stages_compose_with_rshift(kb, ids):
    plain = ids(BM25(kb, k=10).search("Nikon"))
    assert "nikon" in plain

    composed = BM25(kb, k=10) >> KeepProducts(kb) >> Cutoff(2)
    assert isinstance(composed, Pipeline) and len(composed.stages) == 3  # flattened
    assert ids(composed.search("Nikon")) == [i for i in plain if i.startswith("B")][:2]


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("text", ["HP:0001250 AND (", '"unclosed', "-x", "*", "name:foo^", "a OR", "NOT", "[1 TO"])
def test_query_syntax_characters_never_raise(kb, method, text):
    hits = pipeline(method, kb, Settings(), k=5).search(text)
    assert isinstance(hits, list)


def test_raw_tantivy_syntax_is_still_available_to_those_who_ask(kb):
    hits = kb.text_index.search('"travel tripod"', k=5, raw=True)
    assert [iri.rsplit("/", 1)[-1] for iri, _ in hits][:1] == ["B007"]


@pytest.mark.parametrize("text", ["", "   \n"])
def test_an_empty_query_is_an_error(kb, text):
    with pytest.raises(KqeError, match="the query is empty"):
        pipeline("bm25", kb, Settings(), k=5).search(text)


def test_a_stage_called_with_something_else_than_a_batch_says_what_to_do():
    with pytest.raises(TypeError, match=r"takes a Batch, not list; use \.search\(text\) for one query"):
        Stage()(["not a batch"])


def test_ties_are_ranked_by_iri():
    hits = ranking("q", [("b", 1.0), ("c", 2.0), ("a", 1.0)])
    assert hits == [Hit("q", "c", 2.0, 1), Hit("q", "a", 1.0, 2), Hit("q", "b", 1.0, 3)]


@pytest.mark.parametrize("method", ["bm25", "dense"])
def test_identical_products_tie_and_keep_a_stable_order(kb, ids, method):
    stage = pipeline(method, kb, Settings(), k=2)
    first = stage.search("snap-on lens cap")
    assert ids(first) == ["B008", "B009"]
    assert first[0].score == pytest.approx(first[1].score)
    assert stage.search("snap-on lens cap") == first


def test_dense_search_on_a_kb_without_embeddings_says_how_to_embed(tmp_path, jsonl, products_text):
    build_kb(JsonlImporter([jsonl(products_text)]), tmp_path / "kb")
    kb = KnowledgeBase.open(tmp_path / "kb")
    assert BM25(kb, k=1).search("tripod")  # BM25 needs no embeddings
    with pytest.raises(KqeError, match="no dense embeddings .*run `kqe-rdf kb embed"):
        pipeline("dense", kb, Settings(), k=5).search("tripod")


def test_result_names_are_read_without_reading_every_document(kb, iri):
    from kqe_rdf.kb.knowledge_base import KnowledgeBase as Open

    fresh = Open.open(kb.path)
    stage = BM25(fresh, 10)
    for _ in range(120):  # more lookups than KnowledgeBase.document() serves before it reads every document
        hits = stage.search("camera lens tripod")
    assert hits and all(h.name == kb.document(h.iri).name for h in hits)
    assert "_documents_by_iri" not in fresh.__dict__
    assert fresh.name(iri("B007")) == kb.document(iri("B007")).name  # never a hit here: from the stored fields


def test_bm25_scores_among_some_nodes_are_those_of_the_full_search(kb, iri):
    index = kb.text_index
    text = "camera lens for Nikon"
    full = index.search(text, 4)
    some = [iri(i) for i in ("B001", "B002", "B006", "B007")]
    among, best = index.scores_among(text, some, 4)
    assert best == full[0][1]
    assert among and among == {i: s for i, s in full if i in some}
    assert index.scores_among(text, [], 4) == ({}, best)
    assert index.scores_among("", some, 4) == ({}, 0.0)


def test_bm25_scores_of_some_nodes_are_what_the_full_search_gives_them(kb, iri):
    index = kb.text_index
    text = "camera lens for Nikon"
    full = dict(index.search(text, len(index)))
    some = [iri(i) for i in ("B001", "B005", "B007")]
    assert index.scores_of(text, some) == {i: full[i] for i in some if i in full}
    assert index.scores_of(text, []) == {} and index.scores_of("", some) == {}


FLAT_TEXTS = ["camera lens for Nikon", "Cameras camera cameras lens", "travel_tripod ball head", "nikon nikon Nikon",
              "mirrorless " + "x" * 45 + " camera", "32.5 MP 4K f/1.8", "Ünïcode straße lens", "the of and", "_ a __"]


def _parsed(index, text):
    """What Tantivy's own parser makes of the words: the nested query the flat one stands for."""
    query, _errors = index.index.parse_query_lenient(plain_query(text), ["name", "body"])
    return query


@pytest.mark.parametrize("text", FLAT_TEXTS)
def test_bm25_query_is_flat_and_scores_like_the_parsers_query(kb, text):
    index = kb.text_index
    flat = index.parse(text)
    assert "BooleanQuery" not in repr(flat).removeprefix("Query(BooleanQuery")  # no boolean inside: WAND applies
    mine = index.searcher.search(flat, limit=20, count=False).hits
    if not any(index._analyzer.analyze(w) for w in plain_query(text).split()):
        # given only words it cannot index (stop words, "_"), the parser matches every node alike; the flat none
        assert mine == []
        return
    theirs = index.searcher.search(_parsed(index, text), limit=20, count=False).hits
    assert {index._iri(a): s for s, a in mine} == pytest.approx({index._iri(a): s for s, a in theirs}, rel=1e-6)


def test_words_without_a_token_find_nothing(kb):
    """Where the parser, given two or more words it cannot index ("only excluding terms given"), matches every
    node with score 0 (in index order), the flat query finds none, as it does for one such word."""
    assert kb.text_index.search("_ __", 5) == kb.text_index.search("_", 5) == []
    assert kb.text_index.search("the of and", 5) == []  # stop words (issue 38)
    assert kb.text_index.search("x" * 41 + " " + "y" * 41, 5) == []


def test_a_word_of_several_tokens_is_the_parsers_phrase(kb):
    assert "PhraseQuery" in repr(kb.text_index.parse("travel_tripod"))
    index = kb.text_index
    hits = index.search("travel_tripod", 5)
    assert hits[0][0].endswith("/B007")
    assert len(hits) < len(index.search("travel tripod", 5))  # the phrase, not either word


def test_operator_words_keep_the_parsers_meaning(kb):
    index = kb.text_index
    both = index.search("Nikon AND mirrorless", 20)
    parsed = index.searcher.search(_parsed(index, "Nikon AND mirrorless"), limit=20, count=False).hits
    assert both == [(index._iri(a), s) for s, a in parsed]
    assert len(both) < len(index.search("Nikon and mirrorless", 20))  # AND requires both; "and" is a word


def _two_indexes(tmp_path):
    """The same documents indexed once, opened with the node table and as an index built before it (no table)."""
    import random
    import shutil

    from kqe_rdf.kb.documents import NodeDocument
    from kqe_rdf.kb.text_index import NODES, TextIndex, build_text_index

    rng = random.Random(3)
    words = ["lens", "camera", "tripod", "nikon", "canon", "bag", "strap", "flash"]
    docs = [NodeDocument(f"http://x/n{i}", f"n{i}", f"Node {i}", ("http://x#Rare",) if i % 9 == 0 else
                         ("http://x#Common", "http://x#Thing") if i % 2 else ("http://x#Common",),
                         ("flash " * 4 if i % 9 == 0 else "") + " ".join(rng.choice(words) for _ in range(rng.randint(1, 6))))
            for i in range(600)]  # the rare nodes lead any search for "flash": a common type's needs a second fetch
    build_text_index(tmp_path / "new", docs)
    shutil.copytree(tmp_path / "new", tmp_path / "old")
    (tmp_path / "old" / NODES).unlink()
    return TextIndex(tmp_path / "new"), TextIndex(tmp_path / "old")


@pytest.mark.parametrize("types", [None, ["http://x#Common"], ["http://x#Rare"], ["http://x#Thing", "http://x#Rare"]])
@pytest.mark.parametrize("k", [1, 10, 300, 1000])
def test_bm25_with_the_node_table_finds_what_the_stored_documents_say(tmp_path, types, k):
    """A type most nodes have is filtered after Tantivy's flat disjunction (fetching more while too few are left);
    the hits, their order (ties by address) and scores are those of the filter inside the index."""
    new, old = _two_indexes(tmp_path)
    assert new.nodes is not None and old.nodes is None
    for text in ["camera lens", "flash", "nikon nikon flash", "bag", "strap tripod canon lens camera"]:
        found = new.search(text, k, types)
        assert [i for i, _s in found] == [i for i, _s in old.search(text, k, types)]
        assert [s for _i, s in found] == pytest.approx([s for _i, s in old.search(text, k, types)], rel=1e-6)
        some = [i for i, _s in old.search(text, 50)][::3] + ["http://x/none"]
        among, best = new.scores_among(text, some, k, types)
        expected, expected_best = old.scores_among(text, some, k, types)
        assert among == pytest.approx(expected, rel=1e-6) and best == pytest.approx(expected_best, rel=1e-6)
        assert new.names[found[0][0]] == old.names[found[0][0]] == f"Node {found[0][0].rsplit('n', 1)[1]}"


@pytest.mark.parametrize("types", [None, ["http://x#Common"], ["http://x#Rare"]])
def test_bm25_scores_among_nodes_known_later_are_scores_among(tmp_path, types):
    """Hierarchy matching starts its BM25 search before it knows its nodes (a worker thread searches meanwhile)."""
    new, old = _two_indexes(tmp_path)
    for index in (new, old):
        for text in ["camera lens", "flash", "strap tripod canon lens camera", "", "!!"]:
            among_later = index.scores_among_later(text, 40, types)
            some = [i for i, _s in index.search(text, 60)][::2] + ["http://x/none"]
            assert among_later(some) == index.scores_among(text, some, 40, types)
            assert among_later([]) == index.scores_among(text, [], 40, types)


def test_two_builds_of_the_same_documents_rank_alike_ties_by_node_number(tmp_path):
    """Issue 38: one indexing thread, documents numbered in their order; equal scores rank by node number."""
    from kqe_rdf.kb.documents import NodeDocument
    from kqe_rdf.kb.text_index import TextIndex, build_text_index

    docs = [NodeDocument(f"http://x/n{i:04d}", f"n{i}", f"Node {i}", ("http://x#T",), f"lens cap {['nikon', 'canon'][i % 2]}")
            for i in range(2000)]  # a thousand identical documents per brand: all ties
    build_text_index(tmp_path / "one", docs)
    build_text_index(tmp_path / "two", docs)
    one, two = TextIndex(tmp_path / "one"), TextIndex(tmp_path / "two")
    for text in ["lens cap", "nikon", "canon lens"]:
        first = one.search(text, 50)
        assert first == two.search(text, 50)
        assert [i for i, _s in first] == sorted(i for i, _s in first)  # the tie order: the node's number
    assert one.describe()["segments"] == 1


def test_the_analyzer_leaves_out_stop_words_and_a_request_of_stop_words_finds_nothing(tmp_path):
    """Issue 38: Lucene's English analyzer (stop words, stemming) for documents and requests alike; an index built
    before it keeps its own analyzer."""
    import json

    from kqe_rdf.kb.documents import NodeDocument
    from kqe_rdf.kb.text_index import ANALYZER_FILE, TextIndex, build_text_index

    docs = [NodeDocument("http://x/a", "a", "The Lord of the Rings", ("http://x#T",), "name: The Lord of the Rings"),
            NodeDocument("http://x/b", "b", "Rings", ("http://x#T",), "name: Rings\ntype: film")]
    build_text_index(tmp_path / "new", docs)
    index = TextIndex(tmp_path / "new")
    assert index.describe()["analyzer"] == "english"
    assert index.search("the of", 5) == [] and index.only_stop_words("the of")
    assert [i for i, _s in index.search("lord of the rings", 5)] == ["http://x/a", "http://x/b"]
    # The document is indexed as written, field labels too: a request's relation words match them ("film").
    assert [i for i, _s in index.search("film", 5)] == ["http://x/b"]
    (tmp_path / "new" / ANALYZER_FILE).unlink()  # as an index built before the stop words
    build_text_index(tmp_path / "old", docs)
    (tmp_path / "old" / ANALYZER_FILE).write_text(json.dumps({"analyzer": "en_stem"}))
    assert TextIndex(tmp_path / "old").describe()["analyzer"] == "en_stem"
