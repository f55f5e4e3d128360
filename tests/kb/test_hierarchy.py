"""Class hierarchies: closures and information content built with the KB, and IC-weighted matching.

The second domain here is a shop whose categories form their own hierarchy (an
``owl:TransitiveProperty`` in its ontology), so nothing below is about phenotypes.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from support.chat_server import chat_server  # noqa: F401 - fixture
from support.fixtures_kb import bio_kb, names, node  # noqa: F401 - fixture
from kqe_rdf.kb.build import build_kb
from kqe_rdf.methods.fourstep.pipeline import FourStep
from kqe_rdf.kb.hierarchy import CLOSURE_GRAPH, SUBSUMED_BY, closure, ic
from kqe_rdf.kb.importers.jsonl import JsonlImporter
from kqe_rdf.kb.knowledge_base import KnowledgeBase

SHOP = "https://example.org/shop#"
ONTOLOGY = """
@prefix kqe: <https://w3id.org/kqe/core#> . @prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> .
@prefix owl: <http://www.w3.org/2002/07/owl#> . @prefix skos: <http://www.w3.org/2004/02/skos/core#> .
@prefix shop: <https://example.org/shop#> .
shop:Product rdfs:subClassOf kqe:Node ; rdfs:label "product" ; skos:altLabel "products", "item" .
shop:Category rdfs:subClassOf kqe:Node ; rdfs:label "category" ; skos:altLabel "categories" .
shop:subCategoryOf a owl:ObjectProperty, owl:TransitiveProperty ; rdfs:subPropertyOf kqe:relation ;
    rdfs:label "subcategory of" ; rdfs:domain shop:Category ; rdfs:range shop:Category .
shop:inCategory a owl:ObjectProperty ; rdfs:subPropertyOf kqe:relation ;
    rdfs:label "in category" ; rdfs:domain shop:Product ; rdfs:range shop:Category .
shop:hasProduct a owl:ObjectProperty ; rdfs:subPropertyOf kqe:relation ; owl:inverseOf shop:inCategory ;
    rdfs:label "has product" ; rdfs:domain shop:Category ; rdfs:range shop:Product .
"""

#: Electronics > Cameras > {Mirrorless cameras, DSLR cameras}; Electronics > Audio > Headphones.
CATEGORIES = {"electronics": ("Electronics", None), "cameras": ("Cameras", "electronics"),
              "mirrorless": ("Mirrorless cameras", "cameras"), "dslr": ("DSLR cameras", "cameras"),
              "audio": ("Audio", "electronics"), "headphones": ("Headphones", "audio")}
#: Five annotated products: at or below Cameras 3 (p1, p2, p5), Mirrorless 1, DSLR 1, Audio 3, Headphones 2.
PRODUCTS = {"p1": ("Lumix G9 body", ["mirrorless"]), "p2": ("Canon EOS 90D body", ["dslr"]),
            "p3": ("Sony WH-1000XM5", ["headphones"]), "p4": ("Sonos Era 100 speaker", ["audio"]),
            "p5": ("Vlogging kit with camera and headset", ["cameras", "headphones"])}


def shop_lines(products=PRODUCTS) -> str:
    lines = []
    for cid, (name, parent) in CATEGORIES.items():
        lines.append({"kind": "node", "id": cid, "type": "Category", "name": name})
        if parent:
            lines.append({"kind": "edge", "head": cid, "relation": "subCategoryOf", "tail": parent})
    for pid, (name, categories) in products.items():
        lines.append({"kind": "node", "id": pid, "type": "Product", "name": name,
                      "fields": {"description": f"{name}, sold in our shop."}})
        lines += [{"kind": "edge", "head": pid, "relation": "inCategory", "tail": c} for c in categories]
    return "\n".join(json.dumps(x) for x in lines)


@pytest.fixture(scope="module")
def shop(tmp_path_factory) -> KnowledgeBase:
    folder = tmp_path_factory.mktemp("shop")
    (folder / "shop.ttl").write_text(ONTOLOGY)
    (folder / "shop.jsonl").write_text(shop_lines())
    build_kb(JsonlImporter([folder / "shop.jsonl"], ontology=folder / "shop.ttl"), folder / "kb")
    return KnowledgeBase.open(folder / "kb")


# ------------------------------------------------------------ closures and IC


def test_the_closure_holds_each_term_and_all_its_ancestors():
    terms = ["root", "animal", "dog", "cat", "puppy"]
    edges = [("animal", "root"), ("dog", "animal"), ("cat", "animal"), ("puppy", "dog")]
    ancestors = closure(terms, edges)
    assert [sorted(terms[a] for a in row) for row in ancestors] == [
        ["root"], ["animal", "root"], ["animal", "dog", "root"], ["animal", "cat", "root"],
        ["animal", "dog", "puppy", "root"]]


def test_a_cycle_in_a_hierarchy_ends_the_walk_instead_of_looping():
    ancestors = closure(["a", "b", "c"], [("a", "b"), ("b", "c"), ("c", "a")])
    assert sorted(ancestors[0]) == [0, 1, 2]


def test_information_content_is_minus_log_of_the_share_of_annotated_nodes():
    # 5 annotated nodes; a term used by all of them says nothing, one used by one node says ln 5;
    # a term nobody uses counts as used once.
    assert ic([5, 3, 1, 0], 5).tolist() == pytest.approx([0.0, math.log(5 / 3), math.log(5), math.log(5)])


def test_the_build_stores_closures_and_ic_and_the_manifest_records_them(shop):
    summary = shop.manifest["hierarchies"]["hierarchies"][SHOP + "subCategoryOf"]
    assert summary["class"] == SHOP + "Category" and summary["terms"] == 6
    assert summary["closure_pairs"] == 6 + 5 + 3  # itself; a parent for all but the root; a grandparent for 3
    assert [(a["relation"], a["nodes"], a["annotations"]) for a in summary["annotations"]] == [
        (SHOP + "inCategory", 5, 6)]
    assert shop.store.query(f"ASK {{ GRAPH <{CLOSURE_GRAPH}> {{ <{node(shop, 'mirrorless')}> <{SUBSUMED_BY}> "
                            f"<{node(shop, 'electronics')}> }} }}")
    # The closure is not a relation of the KB: documents do not show it.
    assert "subsumed" not in shop.document(node(shop, "mirrorless")).text


def test_a_general_category_finds_products_annotated_with_a_specific_one_with_hand_computed_ic(shop):
    matcher = shop.hierarchies.matcher(SHOP + "inCategory", power=1.0)
    scores = dict(zip(matcher.nodes, matcher.score([node(shop, "cameras")])))
    expected = {"p1": math.log(5 / 3), "p2": math.log(5 / 3), "p5": math.log(5 / 3), "p3": 0.0, "p4": 0.0}
    assert {pid: scores[node(shop, pid)] for pid in expected} == pytest.approx(expected)


def test_a_specific_request_gives_partial_credit_by_the_most_informative_common_ancestor(shop):
    matcher = shop.hierarchies.matcher(SHOP + "inCategory", power=1.0)
    request = [node(shop, "mirrorless"), node(shop, "headphones")]
    scores = dict(zip(matcher.nodes, matcher.score(request)))
    cameras, headphones, audio, mirrorless = math.log(5 / 3), math.log(5 / 2), math.log(5 / 3), math.log(5)
    expected = {"p1": (mirrorless + 0) / 2,        # mirrorless exactly; headphones only share Electronics (IC 0)
                "p5": (cameras + headphones) / 2,  # mirrorless through Cameras; headphones exactly
                "p3": (0 + headphones) / 2, "p2": (cameras + 0) / 2, "p4": (0 + audio) / 2}
    assert {pid: scores[node(shop, pid)] for pid in expected} == pytest.approx(expected)
    [explained] = matcher.explain([node(shop, "p5")], request).values()
    assert [(m.ancestor, round(m.ic, 3)) for m in explained] == [
        (node(shop, "cameras"), round(cameras, 3)), (node(shop, "headphones"), round(headphones, 3))]


def test_several_nodes_are_explained_as_each_alone_and_in_the_order_asked(shop):
    matcher = shop.hierarchies.matcher(SHOP + "inCategory", power=1.0)
    request = [node(shop, "mirrorless"), node(shop, "headphones"), SHOP + "not-a-category"]
    nodes = [node(shop, p) for p in ("p5", "p3", "p1", "p4", "p2")] + [SHOP + "not-a-product", node(shop, "p3")]
    together = matcher.explain(nodes, request)
    assert list(together) == list(dict.fromkeys(nodes))
    assert together == {n: matcher.explain([n], request)[n] for n in nodes}
    assert together[node(shop, "p5")][1].annotations == [node(shop, "headphones")]  # the edge that carries it
    assert [m.ancestor for m in together[SHOP + "not-a-product"]] == [None, None, None]


def test_a_higher_power_favours_the_node_that_explains_the_specific_term(shop):
    request = [node(shop, "mirrorless"), node(shop, "headphones")]
    for power, first in ((1.0, "p1"), (3.0, "p1")):
        matcher = shop.hierarchies.matcher(SHOP + "inCategory", power=power)
        scores = matcher.score(request)
        assert matcher.nodes[int(scores.argmax())] == node(shop, first)


def test_a_rebuild_keeps_the_hierarchy_in_step_with_the_data(tmp_path):
    (tmp_path / "shop.ttl").write_text(ONTOLOGY)
    source = tmp_path / "shop.jsonl"
    source.write_text(shop_lines())
    build_kb(JsonlImporter([source], ontology=tmp_path / "shop.ttl"), tmp_path / "kb")
    moved = dict(PRODUCTS, p1=("Lumix G9 body", ["dslr"]))
    source.write_text(shop_lines(moved))
    build_kb(JsonlImporter([source], ontology=tmp_path / "shop.ttl"), tmp_path / "kb")
    kb = KnowledgeBase.open(tmp_path / "kb")
    matcher = kb.hierarchies.matcher(SHOP + "inCategory", power=1.0)
    scores = dict(zip(matcher.nodes, matcher.score([node(kb, "dslr")])))
    assert scores[node(kb, "p1")] == pytest.approx(math.log(5 / 2))  # DSLR now has two products


def test_the_relations_below_a_term_are_read_from_the_arrays_as_the_walk_finds_them(shop):
    from kqe_rdf.methods.reading import PathReader

    reader = PathReader(shop)
    walk = "^" + f"<{SHOP}subCategoryOf>" + "*"
    for terms in (["cameras"], ["headphones"], ["mirrorless", "audio"], ["electronics"]):
        iris = [node(shop, t) for t in terms]
        stored, covered = shop.hierarchies.hops_below(SHOP + "Category", iris)
        assert stored == reader._hops(iris, walk, SHOP + "Category") and covered == set(iris), terms
    assert shop.hierarchies.hops_below(SHOP + "Category", [node(shop, "headphones"), node(shop, "p1")]) == (
        [(SHOP + "inCategory", False, SHOP + "Product"), (SHOP + "subCategoryOf", True, SHOP + "Category")],
        {node(shop, "headphones")})
    assert shop.hierarchies.hops_below(SHOP + "Product", [node(shop, "p1")]) is None  # no hierarchy on products


# ------------------------------------------------------------ 4StepFocus's soft mode


def test_4stepfocus_ranks_by_hierarchy_and_the_exact_mode_stays_selectable(shop):
    request = "Which product is in the category Mirrorless cameras?"
    hierarchy = FourStep(shop, k=5, matcher="hierarchy")
    hits = hierarchy.search(request)
    assert names(shop, hits)[0] == "p1"  # the mirrorless camera
    # Partial credit: the other camera products follow, through their common ancestor Cameras.
    assert set(names(shop, hits)[1:3]) == {"p2", "p5"}
    explain = hierarchy.transform(hierarchy_batch(request)).explain["q"]
    assert "sparql" in explain and f"<{SUBSUMED_BY}>" in explain["sparql"]  # no hierarchy walk at query time
    # Why p2 is there: the request's Mirrorless cameras meets p2's DSLR cameras at Cameras (IC ln 5/3), and
    # SPARQL over the stored closure names the annotation that carries it.
    assert explain["support"][node(shop, "p2")][0] == {
        "term": node(shop, "mirrorless"), "ancestor": node(shop, "cameras"), "ic": round(math.log(5 / 3), 3),
        "annotations": [node(shop, "dslr")]}
    # The SPARQL shown beside it, run on the store, finds that annotation through the stored closure.
    rows = {(r["node"].value, r["ancestor"].value, r["annotation"].value)
            for r in shop.store.query(explain["provenance_sparql"])}
    assert (node(shop, "p2"), node(shop, "cameras"), node(shop, "dslr")) in rows

    exact = FourStep(shop, k=5, matcher="exact")
    assert exact.search(request)[0].iri == node(shop, "p1")
    assert exact.transform(hierarchy_batch(request)).explain["q"]["candidates"] == 1


@pytest.mark.parametrize("which", ["shop", "bio"])
def test_one_term_is_ranked_from_its_ancestors_as_the_scores_of_every_node_rank_it(shop, bio_kb, which):  # noqa: F811
    # A request of one term (a category, a phenotype) takes its best nodes from the node lists of its ancestors,
    # level by level, not from a score per node: the same nodes, order, scores and count as scoring every node.
    from kqe_rdf.kb.hierarchy import _best_rooted

    kb = {"shop": shop, "bio": bio_kb}[which]
    for info in kb.hierarchies.summary.values():
        for annotation in info["annotations"]:
            matcher = kb.hierarchies.matcher(annotation["relation"], kb.settings.fourstep.ic_power)
            for term in matcher.terms:
                every = matcher.score([term])
                nonzero = np.flatnonzero(every)
                ranked = nonzero[np.lexsort((nonzero, -every[nonzero]))]
                for top in (1, 2, 5, 500):
                    order, scores, matched = _best_rooted(matcher, [term], top)
                    assert order.tolist() == ranked[:top].tolist() and matched == len(nonzero), (term, top)
                    assert scores.tolist() == every[ranked[:top]].tolist()


def test_bm25_searched_while_the_request_is_read_gives_the_same_fusion(shop, monkeypatch):
    # 4StepFocus starts BM25's top for hierarchy matching before reading the request (Tantivy searches meanwhile
    # in a worker thread); what it fuses is what the search after the reading gives.
    index = shop.text_index
    every = [index.nodes.iri(n) for n in range(len(index))]
    for request in ("Which product is in the category Mirrorless cameras?", "cameras and headphones for vlogging"):
        # (no class; one most nodes have, filtered after the search; one fewer have, filtered inside the index)
        for types, depth in ((None, 500), (None, 3), ([SHOP + "Category"], 500), ([SHOP + "Category"], 2),
                             ([SHOP + "Product"], 500)):
            index.search_ahead(request, depth, None)
            assert index._ahead is not None  # (searched ahead: the classes are not known yet)
            ahead = index.scores_among_later(request, depth, types)(every)
            assert index._ahead is None  # (taken)
            assert ahead == index.scores_among(request, every, depth, types), (request, types, depth)
    # A class few nodes have (5 products of 11 nodes) is filtered inside the index: nothing is searched ahead.
    index.search_ahead("cameras", 500, [SHOP + "Product"])
    assert index._ahead is None
    # The whole request: the same hits and scores with the search ahead as without it.
    request = "Which product is in the category Mirrorless cameras?"
    with_ahead = FourStep(shop, k=5, matcher="hierarchy").search(request)
    monkeypatch.setattr(type(index), "search_ahead", lambda *_args, **_kwargs: None)
    assert FourStep(shop, k=5, matcher="hierarchy").search(request) == with_ahead


def hierarchy_batch(text: str):
    from kqe_rdf.methods.retrieval import Batch, Query

    return Batch([Query("q", text)], {}, {})


def test_phenotype_lists_are_ranked_by_ic_over_the_hpo_hierarchy(bio_kb):  # noqa: F811
    stage = FourStep(bio_kb, k=3, types=["Disease"])
    batch = stage.transform(hierarchy_batch("A patient presents with Focal seizure. Which disease explains this?"))
    hits, explain = batch.hits["q"], batch.explain["q"]
    assert hits and explain["candidates"] >= 1
    assert "subsumedBy" in explain["sparql"]


def test_the_llm_variant_ranks_its_phenotype_reading_with_the_same_hierarchy_matcher(bio_kb, chat_server):  # noqa: F811
    from kqe_rdf.core.config import Settings
    from kqe_rdf.methods.registry import pipeline

    request = "A patient presents with Focal-onset seizure and High forehead. Which disease explains this?"
    chat_server.script(json.dumps({"answer": "?x", "triplets": [
        {"head": "?x", "relation": "hasPhenotype", "tail": "Focal-onset seizure"},
        {"head": "?x", "relation": "hasPhenotype", "tail": "High forehead"}]}))
    settings = Settings(llm_base_url=chat_server.url, llm_model="scripted", llm_cache="off", llm_timeout=2.0,
                        fourstep_llm_reading="always")
    llm = pipeline("4step", bio_kb, settings, 3, ["Disease"]).run(request)
    offline = pipeline("4step-offline", bio_kb, Settings(), 3, ["Disease"]).run(request)
    explain = llm.explain["q"]
    assert explain["matcher"] == "hierarchy" and explain["readings"]["llm"]["triplets"]["source"].startswith("llm")
    # Both readings are the same two paths, so the same matcher ranks the same diseases.
    assert names(bio_kb, llm.hits["q"]) == names(bio_kb, offline.hits["q"])


@pytest.mark.parametrize("mode, first", [("context", "p5"), ("cost", "p1")])
def test_negated_terms_count_as_context_by_default_or_as_a_cost(shop, mode, first):
    from kqe_rdf.core.config import Settings

    # Three camera products match "Cameras" equally (IC ln 5/3); only p5 also has Headphones, ruled out here.
    request = "Which product is in the category Cameras? Headphones were not wanted."
    kb = KnowledgeBase.open(shop.path, Settings(fourstep_negated=mode, fourstep_text_weight=0.0))
    stage = FourStep(kb, k=5, matcher="hierarchy")
    ranked = names(kb, stage.search(request))
    assert ranked[0] == first
    assert set(ranked[:3]) == {"p1", "p2", "p5"}
    # As context the ruled-out term lifts p5 by 0.05 x IC(Headphones) = 0.05 ln 5/2; as a cost it sinks it last.
    scores = {names(kb, [h])[0]: h.score for h in stage.search(request)}
    gap = scores["p5"] - scores["p1"]
    assert gap == pytest.approx(0.05 * math.log(5 / 2) * (1 if mode == "context" else -1), abs=1e-6)
    # The explanation says how the negated term counted.
    assert stage.transform(hierarchy_batch(request)).explain["q"]["negated"] == {"as": mode, "terms": 1}
    assert Settings().fourstep.negated == "context"


def test_a_terms_scores_are_kept_for_the_next_request_and_cannot_be_changed(shop):
    matcher = shop.hierarchies.matcher(SHOP + "inCategory")
    cameras = matcher.term_index[node(shop, "cameras")]
    first = matcher.term_scores(cameras)
    assert matcher.term_scores(cameras) is first and not first.flags.writeable
    before = matcher.score([node(shop, "cameras")]).copy()
    matcher.score([node(shop, "cameras"), node(shop, "audio")])
    assert np.array_equal(matcher.score([node(shop, "cameras")]), before)


def test_the_kept_term_scores_stay_within_their_memory_budget(shop, monkeypatch):
    """On a large KB each term's scores are one float per annotated node: the cache holds as many as its bytes allow."""
    matcher = shop.hierarchies.matcher(SHOP + "inCategory")
    matcher.cache_clear()
    one = matcher.term_scores(0).nbytes
    monkeypatch.setattr(type(matcher), "CACHED_BYTES", 2 * one)
    for term in range(len(matcher.terms)):
        matcher.term_scores(term)
    assert len(matcher._powered) == 2 and list(matcher._powered) == [len(matcher.terms) - 2, len(matcher.terms) - 1]
    matcher.cache_clear()


class _FlooredSums:
    """Sums whose "root" is their floor: different sums with one root, as a root's rounding can give (summed as
    for several terms: no term of its own, so not read from one term's ancestors)."""

    term_index: dict = {}

    def __init__(self, total) -> None:
        self.total = np.asarray(total, dtype=np.float64)

    def summed(self, terms):
        return self.total.copy(), 1

    def rooted(self, sums, known):
        return np.floor(sums)

    def scored(self, terms):
        scores, nonzero = self.total.copy(), np.flatnonzero(self.total)
        scores[nonzero] = self.rooted(scores[nonzero], 1)
        return scores, nonzero


@pytest.mark.parametrize("total, top, expected", [
    ([2.5, 2.1, 3.0, 0.0, 2.9, 1.0], 2, ([2, 0], [3.0, 2.0])),  # by sum 3.0 then 2.9; by score 3 then the first 2
    ([2.5, 2.1, 3.5, 0.0, 2.9, 1.0], 1, ([2], [3.0])),          # no other sum has the top one's root
    ([0.0, 0.0, 1.5], 3, ([2], [1.0])),                          # fewer nodes above 0 than asked for
    ([1.2, 1.7, 1.1], 0, ([], [])),
])
def test_the_best_scores_are_chosen_by_their_sums_and_rooted_where_roots_may_tie(total, top, expected):
    from kqe_rdf.kb.hierarchy import _best_rooted

    order, values, matched = _best_rooted(_FlooredSums(total), ["t"], top)
    assert (order.tolist(), values.tolist()) == expected
    assert matched == sum(1 for t in total if t > 0)


@pytest.mark.parametrize("top", [0, 1, 3, 7, 50, 400, 1000])
def test_the_best_nodes_come_in_the_order_a_full_stable_sort_gives(top):
    from kqe_rdf.kb.hierarchy import best_first

    values = np.random.default_rng(top).integers(0, 6, 500) / 4.0  # many ties, at the cut too
    assert best_first(values, top).tolist() == np.argsort(-values, kind="stable")[:top].tolist()


@pytest.mark.parametrize("levels", [[0.0], [0.0, 1.5], [0.0, 0.5, 2.0, 3.25], None])
@pytest.mark.parametrize("top", [1, 10, 500])
def test_the_best_of_a_large_array_of_few_levels_are_those_a_full_stable_sort_gives(levels, top):
    """A large KB's hierarchy scores: a few levels shared by most of 200,000 nodes (where a plain partition is slow),
    or all different (None)."""
    from kqe_rdf.kb.hierarchy import best_first

    rng = np.random.default_rng(top)
    values = rng.random(200_000) if levels is None else rng.choice(levels, 200_000)
    assert best_first(values, top).tolist() == np.argsort(-values, kind="stable")[:top].tolist()
