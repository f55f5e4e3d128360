"""BM25: Tantivy (kqe-rdf's text index) vs rank_bm25's BM25Okapi on the same documents and queries.

Documents are the node documents of a built KB (``--kb PATH``); without one, a
scratch KB is built from the SciFact corpus in a temporary folder. Queries are
SciFact claims. Measured in one process:

* indexing: ``kqe_rdf.kb.text_index.build_text_index`` (Tantivy, en_stem tokenizer,
  2 threads) vs tokenising + ``BM25Okapi(corpus)``;
* per-query latency, top 10: ``TextIndex.search`` (query clean-up, parse, search,
  fetch of the stored IRI) vs tokenising + ``get_scores`` + top-10 selection;
* top-10 overlap between the two, as a sanity check that both rank alike.

rank_bm25 is given the simple tokenizer below (lowercased ``\\w+`` words, no
stemming, no stop words); Tantivy uses its own ``en_stem`` analyser, so the two
rankings are not expected to be identical.

    python bench/bm25.py            # SciFact (5,183 docs), 200 claims, 5 runs
    python bench/bm25.py --quick    # 1,000 docs, 50 claims, 2 runs
    python bench/bm25.py --kb data/kb/metaqa
"""

from __future__ import annotations

import gc
import re
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

import harness
from harness import Timing, median_time, ms, percentile, rate, table

_WORD = re.compile(r"\w+", re.UNICODE)


def tokenize(text: str) -> list[str]:
    """The tokenizer rank_bm25 gets: lowercased runs of word characters."""
    return _WORD.findall(text.lower())


def main() -> None:
    def extra(parser):
        parser.add_argument("--kb", type=Path, help="a built KB whose documents to index (default: scratch SciFact KB)")
        parser.add_argument("--queries", type=int, default=None, help="SciFact claims to run (default 200; --quick 50)")

    args = harness.arguments(__doc__.split("\n")[0], extra)
    env = harness.Environment(["tantivy", "rank-bm25"])
    from rank_bm25 import BM25Okapi

    from kqe_rdf.evaluation import querysets
    from kqe_rdf.kb.knowledge_base import KnowledgeBase
    from kqe_rdf.kb.text_index import TextIndex, build_text_index

    n_queries = args.queries or (50 if args.quick else 200)
    scratch = Path(tempfile.mkdtemp(prefix="kqe-bench-bm25-"))
    try:
        if args.kb:
            kb_path, kb_label = args.kb, f"`{args.kb}` ({KnowledgeBase.open(args.kb).manifest['importer']} importer)"
        else:
            from kqe_rdf.kb.build import build_kb
            from kqe_rdf.kb.importers.scifact import SciFactImporter

            kb_path = scratch / "scifact"
            limit = 1000 if args.quick else None
            t0 = time.perf_counter()
            build_kb(SciFactImporter([harness.shared("scifact", "corpus.csv.gz")], limit=limit), kb_path)
            print(f"built a scratch SciFact KB in {time.perf_counter() - t0:.1f} s")
            kb_label = ("scratch KB of the SciFact corpus (`SciFactImporter`, `../shared/data/scifact/corpus.csv.gz`"
                        + (", first 1,000 abstracts)" if limit else ")"))
        documents = list(KnowledgeBase.open(kb_path).documents())
        queries = [q.text for q in querysets.load(
            "scifact", harness.shared("scifact", "claims_train.csv"), harness.shared("scifact", "qrels_train.txt"),
            limit=n_queries)]
        words = [len(tokenize(d.text)) for d in documents]
        print(f"{len(documents):,} documents (median {statistics.median(words):.0f} words), {len(queries)} queries")

        # ---------------- indexing
        index_dir = scratch / "index"
        texts = [d.text for d in documents]
        built: dict[str, object] = {}

        def tantivy_index() -> None:
            build_text_index(index_dir, documents)

        def rank_bm25_index() -> None:
            built["bm25"] = BM25Okapi([tokenize(t) for t in texts])

        index_times: dict[str, list[float]] = {"tantivy": [], "rank_bm25": []}
        for _ in range(args.repeats):
            index_times["tantivy"] += median_time(tantivy_index, 1, gc.collect).seconds
            index_times["rank_bm25"] += median_time(rank_bm25_index, 1, gc.collect).seconds
        it = {k: Timing(tuple(v)) for k, v in index_times.items()}

        # ---------------- queries
        index = TextIndex(index_dir)
        okapi: BM25Okapi = built["bm25"]  # type: ignore[assignment]
        iris = [d.iri for d in documents]

        def okapi_search(text: str, k: int = 10) -> list[str]:
            scores = okapi.get_scores(tokenize(text))
            top = np.argpartition(-scores, k - 1)[:k]
            top = top[np.argsort(-scores[top], kind="stable")]
            return [iris[i] for i in top]

        def tantivy_search(text: str, k: int = 10) -> list[str]:
            return [iri for iri, _ in index.search(text, k)]

        for q in queries[:10]:  # warm-up: page cache, lazily built structures
            tantivy_search(q)
            okapi_search(q)
        per_query: dict[str, list[list[float]]] = {"tantivy": [[] for _ in queries], "rank_bm25": [[] for _ in queries]}
        for _ in range(args.repeats):
            for i, q in enumerate(queries):
                for name, fn in (("tantivy", tantivy_search), ("rank_bm25", okapi_search)):
                    t0 = time.perf_counter()
                    fn(q)
                    per_query[name][i].append(time.perf_counter() - t0)
        latency = {name: [statistics.median(r) for r in rows] for name, rows in per_query.items()}

        overlaps, same_top1 = [], 0
        for q in queries:
            a, b = tantivy_search(q), okapi_search(q)
            overlaps.append(len(set(a) & set(b)) / 10)
            same_top1 += bool(a and b and a[0] == b[0])
        del index
    finally:
        gc.collect()
        shutil.rmtree(scratch, ignore_errors=True)
    env.finish()

    n = len(documents)
    base_i = it["rank_bm25"].median
    index_table = table(
        ["indexer", "docs", "median s", "runs min/max vs median", "docs/s", "speed vs rank_bm25"],
        [["rank_bm25 `BM25Okapi` (incl. tokenising)", f"{n:,}", f"{base_i:.2f}", it["rank_bm25"].spread(),
          rate(n / base_i), "1.00×"],
         ["Tantivy `build_text_index` (en_stem, 2 threads, commit + merge)", f"{n:,}", f"{it['tantivy'].median:.2f}",
          it["tantivy"].spread(), rate(n / it["tantivy"].median), f"{base_i / it['tantivy'].median:.2f}×"]],
    )
    stats = {name: (percentile(v, 50), percentile(v, 95), statistics.mean(v)) for name, v in latency.items()}
    base_q = stats["rank_bm25"]
    query_table = table(
        ["searcher (top 10)", "p50 ms", "p95 ms", "mean ms", "queries/s (1/mean)", "speed vs rank_bm25 (p50)",
         "(p95)"],
        [[label, ms(p50), ms(p95), ms(mean), rate(1 / mean), f"{base_q[0] / p50:.1f}×", f"{base_q[1] / p95:.1f}×"]
         for label, (p50, p95, mean) in (("rank_bm25 `get_scores` + top 10", base_q),
                                         ("Tantivy `TextIndex.search`", stats["tantivy"]))],
    )
    overlap = (f"top-10 overlap, Tantivy vs rank_bm25: mean {statistics.mean(overlaps):.2f} "
               f"(median {statistics.median(overlaps):.1f}); same top-1 for {same_top1}/{len(queries)} queries")
    print()
    print(index_table)
    print()
    print(query_table)
    print()
    print(overlap)

    if args.doc:
        body = f"""{env.markdown(harness.command_line())}
- Documents: {n:,} node documents of a {kb_label}, median {statistics.median(words):.0f} words.
- Queries: the first {len(queries)} SciFact train claims (`../shared/data/scifact/claims_train.csv`), top 10 each.
- rank_bm25 0.2.2 `BM25Okapi` (k1 1.5, b 0.75) gets a plain tokenizer: lowercased `\\w+` words, no
  stemming or stop words, over the document text (which begins with the node's name). Tantivy indexes
  the name and text fields with its `en_stem` analyser (k1 1.2, b 0.75), so the rankings differ somewhat.
- Runs: indexing {args.repeats} times each, alternating; every query {args.repeats} times per searcher (after a
  10-query warm-up), the per-query median taken, then p50/p95 over the queries. Tantivy's time includes
  stripping query syntax, parsing and fetching each hit's stored IRI; rank_bm25's includes tokenising the
  query and the top-10 selection.

{index_table}

{query_table}

Sanity check: {overlap}.
"""
        harness.update_doc("bm25", "BM25: Tantivy vs rank_bm25 (`bench/bm25.py`)", body)
        print(f"\nwrote the bm25 section of {harness.DOC}")


if __name__ == "__main__":
    main()
