"""Growth: build time, memory, disk size and query latency of generated KBs of a realistic shape.

A generated product graph in the `amazon` ontology (seeded, so every run builds the same KB):

* products with a title and a 20-40 word description drawn from a 20,000-word vocabulary with
  Zipf-distributed word frequencies, one brand each, one or two categories;
* a category tree (``subcategoryOf``, declared transitive: a hierarchy whose closure and IC the
  build computes, with ``hasCategory`` as its annotation relation);
* product → product edges (``alsoBought``, ``alsoViewed``, 7 a product on average) whose targets
  follow a Zipf law over the products, so in-degrees are skewed as in real co-purchase graphs.

For each size, in the same run and each in a fresh child process (peak RSS from ``wait4``):
``build_kb`` end to end (its importer generating the records, as a real importer parses them),
and ``Store.bulk_load`` of the same triples (exported by the same ``RecordWriter``); then the KB's
size on disk, and the latency of bm25, 4step-offline and kar-offline requests (top 10).

``--keep DIR`` keeps each built KB (with its vectors) as ``DIR/kb-<edges>``; ``--reuse DIR`` then times the
requests on those KBs without building anything (no build, bulk-load or vector tables: the latency tables
only). ``--stages`` adds, per KB, where a request's time goes: each stage of bm25, 4step-offline and
kar-offline (reading, linking, SPARQL, hierarchy matching, dense similarity, top-up, result rendering; the
time inside a stage's own calls, so the parts add up to less than the whole), beside the floor of the engine
call it makes, timed in the same process on the same requests: Tantivy's ``searcher.search`` for the same
query and k without stored fields, the compiled SPARQL alone in pyoxigraph, the ONNX encoder alone.
``--rankings DIR`` writes each request's top 10 (``DIR/<edges>.json``), to check that a change keeps them.
``--milvus`` also loads each KB's documents and vectors into a milvus-lite file and times the same BM25 and dense
requests there, beside Tantivy and usearch in the same child process (with ``--doc``, only that section is written).

    python bench/scale.py                     # about 0.1M, 1M and 8M edges (about an hour)
    python bench/scale.py --sizes 100000 1000000
    python bench/scale.py --quick             # about 20,000 edges
    python bench/scale.py --sizes 1000000 8000000 --keep /tmp/kbs        # build once, keep the KBs
    python bench/scale.py --sizes 1000000 8000000 --reuse /tmp/kbs --stages
    python bench/scale.py --sizes 1000000 --milvus --doc                 # BM25 and dense on Milvus at 1M edges
"""

from __future__ import annotations

import itertools
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import harness
from harness import ms, rate, ratio, table

EDGES_PER_PRODUCT = 10  # brand 1, categories 1.5, alsoBought/alsoViewed 7.5 on average
VOCABULARY = 20_000


def synthetic_importer(edges: int):
    """An importer of the generated graph with about ``edges`` edges."""
    import numpy as np

    from kqe_rdf.kb.importers import Importer
    from kqe_rdf.kb.records import Edge, Node

    class Synthetic(Importer):
        name = "synthetic"
        domain = "amazon"

        def records(self, report):
            rng = np.random.default_rng(7)
            products = max(edges // EDGES_PER_PRODUCT, 10)
            brands, categories = max(products // 200, 2), max(products // 100, 8)
            words = [f"w{i}" for i in range(VOCABULARY)]
            weights = 1.0 / np.arange(1, VOCABULARY + 1) ** 1.1
            weights /= weights.sum()
            for c in range(categories):
                yield Node(f"c{c}", "Category", f"Category {c} " + " ".join(words[(c * 31 + k) % 500] for k in range(2)))
                if c:
                    yield Edge(f"c{c}", "subcategoryOf", f"c{(c - 1) // 8}")  # a tree of branching 8
            for b in range(brands):
                yield Node(f"b{b}", "Brand", f"Maker{b}")  # not "Brand 7": a class word and a number name nothing
            chunk = 10_000
            popular = 1.0 / np.arange(1, products + 1) ** 0.9
            popular /= popular.sum()
            rank = rng.permutation(products)  # which product is how popular
            for start in range(0, products, chunk):
                n = min(chunk, products - start)
                lengths = rng.integers(20, 41, n)
                drawn = rng.choice(VOCABULARY, size=int(lengths.sum()), p=weights)
                offsets = np.concatenate([[0], np.cumsum(lengths)])
                related = rng.poisson(7.5, n)
                targets = rank[rng.choice(products, size=int(related.sum()), p=popular)]
                t_offsets = np.concatenate([[0], np.cumsum(related)])
                second_category = rng.random(n) < 0.5
                for i in range(n):
                    p = start + i
                    text = " ".join(words[w] for w in drawn[offsets[i]:offsets[i + 1]])
                    yield Node(f"p{p}", "Product", f"Product {p} {words[drawn[offsets[i]]]}",
                               fields=(("description", text),))
                    yield Edge(f"p{p}", "hasBrand", f"b{p % brands}")
                    yield Edge(f"p{p}", "hasCategory", f"c{categories - 1 - p % (categories * 7 // 8)}")
                    if second_category[i]:
                        yield Edge(f"p{p}", "hasCategory", f"c{(p * 13) % categories}")
                    for k, t in enumerate(targets[t_offsets[i]:t_offsets[i + 1]].tolist()):
                        if t != p:
                            yield Edge(f"p{p}", "alsoBought" if k % 2 else "alsoViewed", f"p{t}")

    return Synthetic()


# ---------------------------------------------------------------- child processes


def child(mode: str, size: str, target: str, extra: str = "") -> None:
    """What one child process measures; prints one JSON line."""
    edges = int(size)
    if mode == "build":
        from kqe_rdf.kb.build import build_kb

        started = time.perf_counter()
        manifest = build_kb(synthetic_importer(edges), Path(target))
        print(json.dumps({"seconds": time.perf_counter() - started, "counts": manifest["counts"],
                          "stages": manifest["seconds"]}))
    elif mode == "export":
        from build import export_ntriples

        print(json.dumps({"triples": export_ntriples(synthetic_importer(edges), Path(target))}))
    elif mode == "bulk":
        from pyoxigraph import RdfFormat, Store

        started = time.perf_counter()
        store = Store(target)
        store.bulk_load(path=extra, format=RdfFormat.N_TRIPLES)
        store.flush()
        del store
        print(json.dumps({"seconds": time.perf_counter() - started}))
    elif mode == "vectors":
        # Every document gets a generated vector (clustered like sentence embeddings, bench/ann.py), stored as
        # `kb embed` stores them: embedding 800k documents with the model takes about 11 hours on 2 cores, and
        # search time depends on how many vectors there are and how they cluster, not on what they mean.
        from ann import clustered

        from kqe_rdf.core.config import Settings
        from kqe_rdf.kb.embeddings import write_dense_index
        from kqe_rdf.kb.knowledge_base import KnowledgeBase

        kb = KnowledgeBase.open(target)
        documents = list(kb.documents())
        vectors, _centres = clustered(len(documents), seed=5)
        started = time.perf_counter()
        ann = write_dense_index(kb.path / "embeddings", [(d.iri, d.digest) for d in documents], vectors,
                                kb.encoder.model_id, [d.types for d in documents], None,
                                Settings().dense.threshold)
        print(json.dumps({"seconds": time.perf_counter() - started, "vectors": len(documents),
                          "ann": bool(ann)}))
    elif mode == "queries":
        options = json.loads(extra or "{}")
        print(json.dumps(query_latency(target, options.get("stages", False), options.get("rankings"))))
    elif mode == "milvus":
        print(json.dumps(milvus_latency(target, Path(extra))))


def milvus_latency(target: str, scratch: Path) -> dict:
    """BM25 and dense p50/p95 of the same requests with the indexes in this process (Tantivy, usearch) and in
    Milvus (a milvus-lite file in ``scratch``, loaded here from the KB's documents and vectors, as `kb build
    --text` and `kb embed --vectors` write them), in this one process, one after the other."""
    from kqe_rdf.core.caches import forget
    from kqe_rdf.core.config import Settings
    from kqe_rdf.kb import ann
    from kqe_rdf.kb.knowledge_base import KnowledgeBase
    from kqe_rdf.kb.milvus import Location, MilvusDenseIndex, MilvusTextIndex, build_text_collection, write_vectors
    from kqe_rdf.methods.registry import pipeline

    kb = KnowledgeBase.open(target)
    texts = requests(kb)
    settings = Settings()

    def timed(method: str) -> dict:
        stage = pipeline(method, kb, settings, 10, None)
        stage.run(texts[method][0])
        times, tops = [], []
        for text in texts[method]:
            forget(kb)
            t0 = time.perf_counter()
            tops.append([h.iri for h in stage.run(text).ranked("q")])
            times.append(time.perf_counter() - t0)
        return {"p50": statistics.median(times), "p95": percentile95(times), "queries": len(times), "top10": tops}

    out = {"in-process": {m: timed(m) for m in ("bm25", "dense")}}
    text_at, vectors_at = Location("text", file=str(scratch / "milvus.db")), Location("vectors", file=str(scratch / "milvus.db"))
    t0 = time.perf_counter()
    documents = build_text_collection(text_at, kb.path, kb.documents())
    loaded = {"documents": documents, "text s": time.perf_counter() - t0}
    t0 = time.perf_counter()
    held = write_vectors(vectors_at, kb.path, np.asarray(kb.dense.vectors), kb.dense.types, settings.dense.threshold,
                         ann.CONNECTIVITY, ann.EXPANSION_ADD)
    loaded.update({"vectors": held["count"], "index": held["index"], "vectors s": time.perf_counter() - t0})
    kb.__dict__["text_index"] = MilvusTextIndex(text_at, kb.path)
    kb.__dict__["dense"] = MilvusDenseIndex(kb.path / "embeddings", vectors_at, kb.path,
                                            ef_search=settings.dense.ef_search)
    out["milvus"] = {m: timed(m) for m in ("bm25", "dense")}
    for method in ("bm25", "dense"):  # how far Milvus's top 10 is from the in-process one, request by request
        pairs = zip(out["in-process"][method].pop("top10"), out["milvus"][method].pop("top10"))
        out["milvus"][method]["top10 overlap"] = statistics.mean(len(set(a) & set(b)) / max(len(a), 1) for a, b in pairs)
    out["loaded"] = loaded
    return out


def requests(kb) -> dict[str, list[str]]:
    """The timed requests of each method: description words, and structured requests that name a brand and a
    category of this KB (their names as the generator wrote them)."""
    import random

    rng = random.Random(11)
    words = [" ".join(f"w{int(rng.paretovariate(0.6)) % 2000}" for _ in range(rng.randint(2, 4)))
             for _ in range(200)]
    labels = kb.names.labels
    brands = sorted(i for i, t in kb.names.types.items() if any(x.endswith("#Brand") for x in t))
    categories = sorted(i for i, t in kb.names.types.items() if any(x.endswith("#Category") for x in t))
    structured = [f"Which product of {labels[rng.choice(brands)]} is in the category "
                  f"{labels[rng.choice(categories)]}? {w}" for w in words[:40]]
    return {"bm25": words, "dense": words[:100], "4step-offline": structured, "kar-offline": structured[:20]}


class StageClock:
    """Seconds spent inside named calls of the real classes, per request: each wrapped method charges its
    stage for its outermost call only (a stage that calls itself is counted once)."""

    def __init__(self) -> None:
        self.spent: dict[str, float] = {}
        self._inside: dict[str, int] = {}
        self._undo: list[tuple[object, str, object]] = []

    def wrap(self, owner, attribute: str, stage: str) -> None:
        original = owner.__dict__[attribute]

        def timed(*args, **kwargs):
            if self._inside.get(stage):
                return original(*args, **kwargs)
            self._inside[stage] = 1
            t0 = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                self.spent[stage] = self.spent.get(stage, 0.0) + time.perf_counter() - t0
                self._inside[stage] = 0

        self._undo.append((owner, attribute, original))
        setattr(owner, attribute, timed)

    def take(self) -> dict[str, float]:
        spent, self.spent = self.spent, {}
        return spent

    def unwrap(self) -> None:
        for owner, attribute, original in reversed(self._undo):
            setattr(owner, attribute, original)
        self._undo.clear()


def stage_clock() -> StageClock:
    """A clock on the stages a request of bm25, 4step-offline or kar-offline goes through (what each one is:
    the call wrapped)."""
    from kqe_rdf.kb import embeddings, linking, text_index
    from kqe_rdf.methods import retrieval
    from kqe_rdf.methods.answering import grounded
    from kqe_rdf.methods.expansion import kar
    from kqe_rdf.methods.fourstep import pipeline
    from kqe_rdf.methods.reading import offline, paths

    clock = StageClock()
    for owner, attribute, stage in (
            (offline.OfflineTriplets, "__call__", "reading (mentions, relation paths)"),
            (linking.Linker, "mentions", "mention finding (in reading)"),
            (paths.PathReader, "_list_hops", "hop listing (store queries, in reading)"),
            (pipeline.FourStep, "link", "constant linking"),
            (pipeline, "run", "SPARQL (run + rows)"),
            (pipeline, "hierarchical_scores", "hierarchy matching"),
            (pipeline.FourStep, "_admissible", "candidate filter"),
            (pipeline.FourStep, "similarity", "dense similarity"),
            (pipeline.FourStep, "_top_up", "top-up"),
            (grounded.GroundedReading, "__call__", "grounded reading (kar)"),
            (kar.NodeScorer, "scores", "neighbour scoring (kar)"),
            (retrieval.Dense, "transform", "dense search"),
            (text_index.TextIndex, "search", "BM25 search (engine + IRIs)"),
            (text_index.TextIndex, "_numbered_among", "BM25 fusion (in hierarchy matching, after the arrays)"),
            (embeddings.DenseIndex, "vectors_of", "stored vectors read"),
            (embeddings.OnnxEncoder, "encode", "ONNX encoder (inside the others)"),
            (retrieval.Stage, "named", "result rendering (names)")):
        clock.wrap(owner, attribute, stage)
    return clock


def reader_queries(kb, texts: list[str]) -> list[list[str]]:
    """The SPARQL each 4step-offline request asks of the store (its reading's hop listings), recorded by a fresh
    pipeline (nothing listed yet) through a store that writes down what it is asked, and how many solutions of
    each the reader read (it stops reading a walk once it has the nodes it lists)."""
    from pyoxigraph import QueryBoolean

    from kqe_rdf.core.config import Settings
    from kqe_rdf.methods.registry import pipeline

    asked: list[list[tuple[str, int]]] = [[]]  # (the first: what opening the pipeline asks)

    class Recording:
        def __init__(self, store) -> None:
            self.store = store

        def query(self, text, **options):
            answer = self.store.query(text, **options)
            asked[-1].append((text, 0))
            return answer if isinstance(answer, QueryBoolean) else self._counted(answer, len(asked[-1]) - 1)

        @staticmethod
        def _counted(solutions, at: int):
            for n, solution in enumerate(solutions, start=1):
                asked[-1][at] = (asked[-1][at][0], n)
                yield solution

        def __getattr__(self, name):
            return getattr(self.store, name)

    store = kb.store
    kb.__dict__["store"] = Recording(store)
    try:
        stage = pipeline("4step-offline", kb, Settings(), 10, None)
        for text in texts:
            asked.append([])
            stage.run(text)
    finally:
        kb.__dict__["store"] = store
    return asked[1:]


def floors(kb, texts: dict[str, list[str]], compiled: list[str]) -> dict[str, list[float]]:
    """The engine calls alone, per request: Tantivy's search for the bm25 requests (k 10, no stored field read)
    and for the 4step-offline requests (k 500, hierarchy matching's fusion depth), the compiled SPARQL of each
    4step-offline request (every solution iterated), the store queries each one's reading asks (as many solutions
    as the reader read, one after the other), the ONNX encoder on each structured request, and the sum of the last three
    engines' calls per 4step-offline request: what it costs without any of this package's own work."""
    from pyoxigraph import QueryBoolean

    index = kb.text_index
    out: dict[str, list[float]] = {"tantivy search (bm25 requests)": [], "tantivy search (4step requests, k 500)": [],
                                   "compiled SPARQL alone": [], "reading's store queries alone (4step requests)": [],
                                   "ONNX encoder alone": [], "engines alone per 4step request (sum)": [],
                                   "tantivy search (bm25 requests' word counts, words in < 5% of documents)": []}
    for text in texts["4step-offline"]:
        t0 = time.perf_counter()
        index.searcher.search(index.parse(text), limit=500, count=False)
        out["tantivy search (4step requests, k 500)"].append(time.perf_counter() - t0)
    for queries in reader_queries(kb, texts["4step-offline"]):
        t0 = time.perf_counter()
        for text, read in queries:
            answer = kb.store.query(text, use_default_graph_as_union=True)
            for _solution in () if isinstance(answer, QueryBoolean) else itertools.islice(answer, read):
                pass  # (the reader asks ASK too)
        out["reading's store queries alone (4step requests)"].append(time.perf_counter() - t0)
    for text in texts["bm25"]:
        t0 = time.perf_counter()
        index.searcher.search(index.parse(text), limit=10, count=False)
        out["tantivy search (bm25 requests)"].append(time.perf_counter() - t0)
    for sparql in compiled:
        t0 = time.perf_counter()
        for _solution in kb.store.query(sparql, use_default_graph_as_union=True):
            pass
        out["compiled SPARQL alone"].append(time.perf_counter() - t0)
    for text in texts["4step-offline"]:
        t0 = time.perf_counter()
        kb.encoder.encode([text])
        out["ONNX encoder alone"].append(time.perf_counter() - t0)
    for text in selective_requests(kb, texts["bm25"]):
        t0 = time.perf_counter()
        index.searcher.search(index.parse(text), limit=10, count=False)
        out["tantivy search (bm25 requests' word counts, words in < 5% of documents)"].append(time.perf_counter() - t0)
    out["engines alone per 4step request (sum)"] = [
        sum(parts) for parts in zip(out["tantivy search (4step requests, k 500)"],
                                    out["reading's store queries alone (4step requests)"], out["ONNX encoder alone"])]
    return out


def request_terms(kb, texts: list[str]) -> dict:
    """How much of the index the bm25 requests make Tantivy read: postings per request (name and body, each
    distinct word once, as the request's query has them) and the share of documents that hold a request's
    commonest word. Top-k pruning (block-max WAND) skips documents only where some words are rare."""
    index, searcher = kb.text_index, kb.text_index.searcher
    documents = searcher.num_docs
    postings, commonest = [], []
    for text in texts:
        tokens = [t for w in dict.fromkeys(text.split()) for t in index._analyzer.analyze(w)]
        counts = {field: [searcher.doc_freq(field, t) for t in tokens] for field in ("name", "body")}
        postings.append(sum(sum(c) for c in counts.values()))
        commonest.append(max(counts["body"], default=0) / max(documents, 1))
    return {"documents": documents, "postings": statistics.median(postings), "commonest": statistics.median(commonest)}


def selective_requests(kb, texts: list[str], share: float = 0.05) -> list[str]:
    """As many requests as ``texts``, each with as many words, drawn from the description words in fewer than
    ``share`` of the documents: what the engine takes where words are selective, as in a real query log."""
    import random

    searcher, documents = kb.text_index.searcher, kb.text_index.searcher.num_docs
    rare = [w for w in (f"w{i}" for i in range(2000)) if 0 < searcher.doc_freq("body", w) < share * documents]
    rng = random.Random(13)
    return [" ".join(rng.sample(rare, len(t.split()))) for t in texts] if rare else []


def query_latency(target: str, stages: bool = False, rankings: str | None = None) -> dict:
    """Latency of each method's requests on the KB at ``target`` (a fresh process, one warm-up request each);
    with ``stages``, where each method's time goes and the engine floors; with ``rankings``, each request's
    top 10 written to that file."""
    from kqe_rdf.core.caches import forget
    from kqe_rdf.core.config import Settings
    from kqe_rdf.kb.knowledge_base import KnowledgeBase
    from kqe_rdf.methods.registry import pipeline

    kb = KnowledgeBase.open(target)
    texts = requests(kb)
    out: dict = {"dense recall@100": dense_recall(kb)}
    clock = stage_clock() if stages else None
    tops: dict[str, list] = {}
    compiled: list[str] = []
    for method, batch in texts.items():
        stage = pipeline(method, kb, Settings(), 10, None)
        stage.run(batch[0])  # open the indexes, the encoder and the name index first
        times, split = [], []
        if clock:
            clock.take()
        for text in batch:
            forget(kb)
            t0 = time.perf_counter()
            result = stage.run(text)
            times.append(time.perf_counter() - t0)
            if clock:
                split.append(clock.take())
            tops.setdefault(method, []).append([h.iri for h in result.ranked("q")])
            if method == "4step-offline" and result.explain["q"].get("sparql"):
                compiled.append(result.explain["q"]["sparql"])
        out[method] = {"p50": statistics.median(times), "p95": percentile95(times), "queries": len(batch)}
        if clock:
            names = sorted({name for spent in split for name in spent})
            out[method]["stages"] = {name: {"p50": statistics.median(s.get(name, 0.0) for s in split),
                                            "mean": statistics.mean(s.get(name, 0.0) for s in split)}
                                     for name in names}
    if clock:
        clock.unwrap()
        stage, times = pipeline("bm25", kb, Settings(), 10, None), []
        for text in selective_requests(kb, texts["bm25"]):
            t0 = time.perf_counter()
            stage.run(text)
            times.append(time.perf_counter() - t0)
        if times:
            out["bm25 selective"] = {"p50": statistics.median(times), "p95": percentile95(times)}
        out["floors"] = {name: {"p50": statistics.median(v), "p95": percentile95(v)}
                         for name, v in floors(kb, texts, compiled).items() if v}
        out["bm25 terms"] = request_terms(kb, texts["bm25"])
    if rankings:
        Path(rankings).write_text(json.dumps({"requests": texts, "top10": tops}))
    return out


def percentile95(times: list[float]) -> float:
    ordered = sorted(times)
    return ordered[max(int(0.95 * len(ordered)) - 1, 0)]


def dense_recall(kb, queries: int = 100, k: int = 100) -> float:
    """Recall@100 of the KB's dense search (the approximate index above the threshold, candidates re-ranked by
    exact cosine) against an exact search over the same vectors, for queries drawn near stored vectors."""
    import numpy as np

    rng = np.random.default_rng(3)
    index = kb.dense
    vectors = np.asarray(index.vectors)
    picks = vectors[rng.choice(len(vectors), queries, replace=False)]
    picks = picks + rng.standard_normal(picks.shape, dtype=np.float32) * 0.05
    picks /= np.linalg.norm(picks, axis=1, keepdims=True)
    found = 0
    for query in picks:
        exact = {iri for iri, _ in index._exact(query[None, :], k, None)[0]}
        found += len(exact & {iri for iri, _ in index.search(query[None, :], k)[0]})
    return found / (queries * k)


def run_child(*args: str) -> tuple[dict, int]:
    """Run one child measurement; → (its JSON line, its peak RSS in bytes)."""
    process = subprocess.Popen([sys.executable, __file__, "--child", *args], stdout=subprocess.PIPE,
                               cwd=harness.ROOT)
    output = process.stdout.read()
    process.stdout.close()
    _pid, status, usage = os.wait4(process.pid, 0)
    if status != 0:
        raise SystemExit(f"child {args} failed (status {status})")
    return json.loads(output.decode().strip().splitlines()[-1]), usage.ru_maxrss * 1024


def disk_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def growth(sizes: list[float], values: list[float]) -> str:
    """The exponent k of value ∝ size^k between the smallest and the largest size, and the factor per doubling."""
    if len(sizes) < 2 or min(values) <= 0:
        return ""
    k = math.log(values[-1] / values[0]) / math.log(sizes[-1] / sizes[0])
    return f"∝ n^{k:.2f} (×{2 ** k:.2f} per doubling)"


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child(*sys.argv[2:])
        return

    def extra(parser) -> None:
        parser.add_argument("--sizes", type=int, nargs="+", default=None, help="edges of each generated KB")
        kept = parser.add_mutually_exclusive_group()
        kept.add_argument("--keep", type=Path, default=None, help="keep each built KB as DIR/kb-<edges>")
        kept.add_argument("--reuse", type=Path, default=None,
                          help="time the requests on the KBs --keep left in DIR, building nothing")
        parser.add_argument("--stages", action="store_true",
                            help="where each request's time goes, stage by stage, beside the engines' floors")
        parser.add_argument("--rankings", type=Path, default=None, help="write each request's top 10 to DIR")
        parser.add_argument("--milvus", action="store_true",
                            help="also time BM25 and dense with the indexes in Milvus (milvus-lite), beside Tantivy "
                                 "and usearch (needs the [scale] extra)")

    args = harness.arguments(__doc__.split("\n")[0], extra, repeats=1)
    sizes = args.sizes or ([20_000] if args.quick else [100_000, 1_000_000, 8_000_000])
    env = harness.Environment(["pyoxigraph", "tantivy"])
    if args.rankings:
        args.rankings.mkdir(parents=True, exist_ok=True)
    options = json.dumps({"stages": args.stages})

    def on_milvus(edges: int, kb: Path) -> dict:
        if not args.milvus:
            return {}
        with tempfile.TemporaryDirectory(prefix="kqe-bench-milvus-") as scratch:
            print(f"{edges:,} edges: BM25 and dense on Milvus …", flush=True)
            return {"milvus": run_child("milvus", str(edges), str(kb), scratch)[0]}

    def latency(edges: int, kb: Path) -> dict:
        wanted = json.loads(options) | ({"rankings": str(args.rankings / f"{edges}.json")} if args.rankings else {})
        return run_child("queries", str(edges), str(kb), json.dumps(wanted))[0]

    if args.reuse:
        rows = []
        for edges in sizes:
            kb = args.reuse / f"kb-{edges}"
            if not (kb / "manifest.json").is_file():
                raise SystemExit(f"no kept KB at {kb}: build it first with --keep {args.reuse}")
            print(f"{edges:,} edges: requests on {kb} …", flush=True)
            counts = json.loads((kb / "manifest.json").read_text())["counts"]
            rows.append({"edges": counts["edges"], "latency": latency(edges, kb), **on_milvus(edges, kb)})
        env.finish()
        report(rows, args, env, built=False)
        return
    scratch = Path(tempfile.mkdtemp(prefix="kqe-bench-scale-"))
    if args.keep:
        args.keep.mkdir(parents=True, exist_ok=True)
    rows = []
    try:
        for edges in sizes:
            nt = scratch / f"{edges}.nt"
            exported, _ = run_child("export", str(edges), str(nt))
            builds, bulks = [], []
            for run in range(args.repeats):
                print(f"{edges:,} edges, run {run + 1}/{args.repeats} …", flush=True)
                kb = (args.keep or scratch) / f"kb-{edges}"
                shutil.rmtree(kb, ignore_errors=True)
                builds.append(run_child("build", str(edges), str(kb)))
                store = scratch / f"store-{edges}"
                shutil.rmtree(store, ignore_errors=True)
                bulks.append(run_child("bulk", str(edges), str(store), str(nt)))
            (build, build_rss), (bulk, bulk_rss) = builds[-1], bulks[-1]
            build_s = statistics.median(b["seconds"] for b, _ in builds)
            bulk_s = statistics.median(b["seconds"] for b, _ in bulks)
            disk = disk_bytes(kb)
            vectors, _ = run_child("vectors", str(edges), str(kb))
            vectors["disk"] = disk_bytes(kb / "embeddings")
            counts = build["counts"]
            rows.append({"edges": counts["edges"], "nodes": counts["nodes"], "triples": counts["triples"],
                         "build_s": build_s, "bulk_s": bulk_s, "stages": build["stages"],
                         "build_rss": max(r for _, r in builds), "bulk_rss": max(r for _, r in bulks),
                         "disk": disk, "latency": latency(edges, kb), "vectors": vectors,
                         "exported": exported["triples"], **on_milvus(edges, kb)})
            shutil.rmtree(store, ignore_errors=True)
            nt.unlink()
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    env.finish()
    report(rows, args, env, built=True)


METHODS = ("bm25", "dense", "4step-offline", "kar-offline")


def latency_tables(rows: list[dict]) -> tuple[str, str]:
    """The latency table of every method at each size, and their growth from the smallest KB to the largest."""
    latency_table = table(
        ["edges", *(f"{m} p50 / p95 ms" for m in METHODS), "4step-offline p50 vs bm25"],
        [[f"{r['edges']:,}", *(f"{harness.ms(r['latency'][m]['p50'])} / {harness.ms(r['latency'][m]['p95'])}"
                               for m in METHODS),
          f"{r['latency']['4step-offline']['p50'] / r['latency']['bm25']['p50']:.0f}×"] for r in rows],
    )
    n = [r["edges"] for r in rows]
    growth_rows = [[f"{m} p50", growth(n, [r["latency"][m]["p50"] for r in rows])] for m in METHODS]
    return latency_table, table(["figure", "growth from the smallest to the largest KB"], growth_rows)


def stage_tables(rows: list[dict]) -> str:
    """Per KB: each method's stages (p50 and mean ms per request) and the engines' floors from the same run."""
    out = []
    for r in rows:
        latency = r["latency"]
        body = []
        for method in ("bm25", "4step-offline", "kar-offline"):
            body.append([f"**{method}** (whole request)", harness.ms(latency[method]["p50"]), "",
                         harness.ms(latency[method]["p95"])])
            for name, spent in sorted(latency[method].get("stages", {}).items(), key=lambda kv: -kv[1]["mean"]):
                body.append([f"  {name}", harness.ms(spent["p50"]), harness.ms(spent["mean"]), ""])
            if method == "bm25" and "bm25 selective" in latency:
                body.append(["**bm25**, as many words drawn from those in < 5% of documents (whole request)",
                             harness.ms(latency["bm25 selective"]["p50"]), "",
                             harness.ms(latency["bm25 selective"]["p95"])])
        for name, floor in latency.get("floors", {}).items():
            body.append([f"floor: {name}", harness.ms(floor["p50"]), "", harness.ms(floor["p95"])])
        terms = latency.get("bm25 terms")
        read = (f"\n\nThe bm25 requests make Tantivy score a median {terms['postings']:,.0f} postings (name and body) over "
                f"{terms['documents']:,} documents; a median request's commonest word is in "
                f"{100 * terms['commonest']:.0f}% of them.") if terms else ""
        out.append(f"{r['edges']:,} edges:\n\n" + table(["stage", "p50 ms", "mean ms", "p95 ms"], body) + read)
    return "\n\n".join(out)


def milvus_table(rows: list[dict]) -> str:
    """``--milvus``: BM25 and dense p50 / p95 with the indexes in this process and in Milvus, the ratio, and how
    much of each request's top 10 they share; what loading Milvus took."""
    lines = []
    for r in rows:
        m = r["milvus"]
        for method, engine in (("bm25", "Tantivy"), ("dense", "usearch" if r["milvus"]["loaded"]["index"] == "HNSW"
                                                      else "exact")):
            here, there = m["in-process"][method], m["milvus"][method]
            lines.append([f"{r['edges']:,}", method, f"{engine} {ms(here['p50'])} / {ms(here['p95'])}",
                          f"{ms(there['p50'])} / {ms(there['p95'])}", ratio(there["p50"], here["p50"]),
                          f"{there['top10 overlap']:.3f}"])
    loaded = [f"{r['edges']:,} edges: {r['milvus']['loaded']['documents']:,} documents in {r['milvus']['loaded']['text s']:.0f} s, "
              f"{r['milvus']['loaded']['vectors']:,} vectors ({r['milvus']['loaded']['index']}) in "
              f"{r['milvus']['loaded']['vectors s']:.0f} s" for r in rows]
    return table(["edges", "method", "in process p50 / p95 ms", "Milvus (milvus-lite) p50 / p95 ms",
                  "Milvus vs in process (p50)", "top-10 overlap"], lines) + "\n\nLoading milvus-lite: " + "; ".join(loaded)


def report(rows: list[dict], args, env, built: bool) -> None:
    """Print the tables (and write the doc's section): everything after a full run; the latency (and stage)
    tables after a --reuse run, into a section of their own."""
    if args.milvus:
        milvus = milvus_table(rows)
        print(milvus, "", sep="\n")
        if args.doc:  # a --milvus run writes its own section only (the other sections keep their full runs)
            harness.update_doc("scale-milvus", "BM25 and dense on Milvus beside Tantivy and usearch (`bench/scale.py "
                               "--milvus`)", f"""{env.markdown(harness.command_line())}
- The generated KB of the scale section (same generator, seeds and requests); its documents and generated vectors
  loaded into a milvus-lite file ({harness.versions(["pymilvus", "milvus-lite"])}), then the same 200 BM25
  and 100 dense requests timed in one child process with the indexes in this process, then in Milvus (whole
  requests through the `bm25` and `dense` pipelines, top 10, one warm-up request each).

{milvus}
""")
            print(f"\nwrote the scale-milvus section of {harness.DOC}")
            return
    latency_table, latency_growth = latency_tables(rows)
    stages = stage_tables(rows) if args.stages else ""
    requests_text = """Query latency on each KB, in a fresh process after one warm-up request (query-vector cache cleared before each
timed call): BM25 over 200 requests of 2-4 description words and dense over the first 100 of them; 4step-offline
over 40 and kar-offline over 20 structured requests ("Which product of <a brand> is in the category <a category>?
<words>", names drawn from the KB)."""
    stages_text = f"""

Where a request's time goes (`--stages`): the time inside each stage's own call, p50 and mean per request over
the same requests (the stages of one method overlap where one calls another, e.g. the ONNX encoder inside the
reading, so they add up to more or less than the whole), and the floor of each engine call timed alone in the
same process: Tantivy's `searcher.search` for each bm25 request with k 10 (and for as many requests of as many
words drawn from the description words in fewer than 5% of the documents: the engine where words are selective,
as in a real query log; the generated descriptions draw words from a Zipf law, so most bm25 requests hold a word
nearly every document has) and for each 4step-offline request with k 500 (hierarchy matching's fusion depth), no
stored field read; each 4step-offline request's compiled
SPARQL in pyoxigraph, and the store queries its reading asks (recorded by a fresh pipeline, then run alone one
after the other, reading as many solutions as the reader read: it stops reading a walk once it has the nodes it
lists); the ONNX encoder on each structured request; and, per 4step-offline
request, the sum of its Tantivy search, its reading's store queries and the encoder: the engines' own time for
that request, without any of this package's work. Hierarchy matching's Tantivy search runs in a worker thread
beside its arrays: "BM25 fusion" is what is left of it after them (waiting for the hits, naming them), and a
request can take less than the engines' sum.

{stages}""" if stages else ""
    if not built:
        print(latency_table, latency_growth, stages, sep="\n\n")
        if args.doc:
            body = f"""{env.markdown(harness.command_line())}
- KBs built by an earlier `--keep` run of this script (the same generated graphs and vectors).

{requests_text}

{latency_table}

{latency_growth}{stages_text}
"""
            harness.update_doc("scale-queries", "Query latency by the KB's size, kept KBs (`bench/scale.py --reuse`)",
                               body)
            print(f"\nwrote the scale-queries section of {harness.DOC}")
        return
    main_table = table(
        ["edges", "nodes", "triples", "build_kb s", "build triples/s", "bulk_load s", "bulk_load triples/s",
         "build vs bulk_load", "peak RSS build", "peak RSS bulk_load", "KB on disk (no vectors)"],
        [[f"{r['edges']:,}", f"{r['nodes']:,}", f"{r['triples']:,}", f"{r['build_s']:.1f}",
          rate(r["triples"] / r["build_s"]), f"{r['bulk_s']:.1f}", rate(r["exported"] / r["bulk_s"]),
          ratio(r["triples"] / r["build_s"], r["exported"] / r["bulk_s"]), f"{r['build_rss'] / 2**30:.2f} GiB",
          f"{r['bulk_rss'] / 2**30:.2f} GiB", f"{r['disk'] / 2**20:,.0f} MiB"] for r in rows],
    )
    vector_table = table(
        ["edges", "vectors", "dense search", "vectors + index on disk", "writing them s", "recall@100 vs exact"],
        [[f"{r['edges']:,}", f"{r['vectors']['vectors']:,}", "approximate (usearch)" if r["vectors"]["ann"] else "exact",
          f"{r['vectors']['disk'] / 2**20:,.0f} MiB", f"{r['vectors']['seconds']:.1f}",
          f"{r['latency']['dense recall@100']:.3f}"] for r in rows],
    )
    stage_names = ("import", "load", "load_wait", "documents", "bm25", "names", "hierarchies", "phrases")
    stage_table = table(["edges", *stage_names],
                        [[f"{r['edges']:,}", *(f"{r['stages'].get(s, 0):.1f}" for s in stage_names)] for r in rows])
    n = [r["edges"] for r in rows]
    growth_table = table(
        ["figure", "growth from the smallest to the largest KB"],
        [["build_kb seconds", growth(n, [r["build_s"] for r in rows])],
         ["bulk_load seconds", growth(n, [r["bulk_s"] for r in rows])],
         ["peak RSS of the build", growth(n, [r["build_rss"] for r in rows])],
         ["KB on disk", growth(n, [r["disk"] for r in rows])],
         *([f"{m} p50", growth(n, [r["latency"][m]["p50"] for r in rows])] for m in METHODS)],
    )
    print(main_table, latency_table, vector_table, stage_table, growth_table, stages, sep="\n\n")
    if args.doc:
        body = f"""{env.markdown(harness.command_line())}
- Data: generated product graphs in the `amazon` ontology (see the script's docstring: Zipf word
  frequencies in the descriptions, Zipf in-degrees of the product → product edges, a category tree of
  branching 8 that the build closes as a hierarchy). Each build and each bulk load runs in its own
  child process; peak RSS is that process's (`wait4`). {args.repeats} run(s) a size; medians.
- `bulk_load` loads the same triples, exported by the same `RecordWriter`, into a fresh store: the
  floor for the build's load. The build's own importer generates the records as it runs (about what
  parsing a file costs a real importer).

{main_table}

{requests_text} Dense search encodes each request with the model and searches **generated**
vectors, one per document, clustered like sentence embeddings (`bench/ann.py`'s generator) and stored as `kb embed`
stores them, with the approximate index from `dense_ann_threshold` (100,000) vectors on: embedding 800k documents
with the model would take about 11 hours on 2 cores, and search time depends on how many vectors there are and how
they cluster, not on what they mean. So dense latency here is real, dense rankings are not. kar-offline encodes
the neighbours it filters on the fly.

{latency_table}

The vectors: how dense search runs at each size, what the vectors and the approximate index take on disk, how long
writing them took (the index is built then), and the recall@100 of the KB's dense search (index candidates
re-ranked by exact cosine, as `DenseIndex.search` does) against an exact search, over 100 queries near stored
vectors:

{vector_table}

Stages of the last build of each size (`manifest["seconds"]`; the loader runs alongside the import,
documents and BM25, so `load` overlaps them and `load_wait` is what the build waited for it after):

{stage_table}

{growth_table}{stages_text}
"""
        harness.update_doc("scale", "Growth with the KB's size (`bench/scale.py`)", body)
        print(f"\nwrote the scale section of {harness.DOC}")




if __name__ == "__main__":
    main()
