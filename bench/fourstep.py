"""Latency of the offline 4StepFocus path per query on the bio KB, split into its steps, BM25 as the baseline.

Each query runs through ``pipeline("4step-offline", kb, Settings(), k=10, ["Disease"])``, exactly as
``kqe-rdf search --method 4step-offline --type Disease`` runs it. The stage records the seconds each of its
steps took in the query's explanation (``explain["seconds"]``), so the split below is the stage's own
accounting of the very calls being timed, not a re-implementation of them:

- *triplets*: reading the query — mention finding (n-grams of the query against node names and aliases)
  and the choice of relation paths by embedding similarity to the ontology's relation labels;
- *linking*: linking each constant to scored nodes (exact, fuzzy, BM25 over names, embeddings) and
  compiling the SPARQL;
- *sparql*: scoring the candidates — for a phenotype list, IC-weighted hierarchy matching over the matrices
  stored with the KB, BM25 fusion and the provenance query over the stored closure; otherwise running the
  compiled query in Oxigraph and scoring the candidates from the bindings;
- *ranking*: dense similarity over the candidates, ordering, and the top-up from the fallback retriever.

Queries are the first phenopacket dev case templates (``--queries``, default 50). After a warm-up, each
query runs ``--repeats`` times (per-query median kept); p50/p95 are over queries. BM25 on the same
queries is timed in the same rounds as the baseline.

    python bench/fourstep.py             # 50 queries, 3 runs each; writes docs/benchmarks.md
    python bench/fourstep.py --quick     # 10 queries, 1 run
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path

import harness
from harness import ms, percentile, table

STEPS = ("triplets", "linking", "sparql", "ranking")


def measure(kb_path: Path, queries: int, repeats: int) -> dict:
    from kqe_rdf import querysets
    from kqe_rdf.config import Settings
    from kqe_rdf.kb import KnowledgeBase
    from kqe_rdf.retrieval import pipeline

    settings = Settings()
    kb = KnowledgeBase.open(kb_path, settings)
    cases = querysets.load("phenopackets", harness.shared("phenopackets", "dev.jsonl.gz"), limit=queries)
    texts = [q.text for q in cases]
    types = ["Disease"]
    fourstep = pipeline("4step-offline", kb, settings, 10, types)
    bm25 = pipeline("bm25", kb, settings, 10, types)
    embedded = len(kb.dense) if kb.has_embeddings else 0
    print(f"KB {kb_path}: {kb.manifest['counts']['nodes']:,} nodes, {embedded:,} embedded; "
          f"{len(texts)} phenopacket dev cases", flush=True)

    for text in texts[:3]:  # warm-up: opens the store, indexes, encoder, name index
        fourstep.run(text)
        bm25.search(text)
    totals: list[list[float]] = [[] for _ in texts]
    steps: dict[str, list[list[float]]] = {s: [[] for _ in texts] for s in STEPS}
    base: list[list[float]] = [[] for _ in texts]
    candidates: list[int] = [0 for _ in texts]
    for round_ in range(repeats):
        print(f"round {round_ + 1}/{repeats}", flush=True)
        for i, text in enumerate(texts):
            kb.embed_query.cache_clear()
            t0 = time.perf_counter()
            batch = fourstep.run(text)
            totals[i].append(time.perf_counter() - t0)
            explain = batch.explain["q"]
            for s in STEPS:
                steps[s][i].append(explain["seconds"].get(s, 0.0))
            candidates[i] = explain.get("candidates", 0)
        for i, text in enumerate(texts):
            t0 = time.perf_counter()
            bm25.search(text)
            base[i].append(time.perf_counter() - t0)

    def stats(rows: list[list[float]]) -> tuple[float, float, float]:
        per_query = [statistics.median(r) for r in rows]
        return percentile(per_query, 50), percentile(per_query, 95), statistics.mean(per_query)

    return {"total": stats(totals), "steps": {s: stats(v) for s, v in steps.items()}, "bm25": stats(base),
            "queries": len(texts), "candidates": statistics.median(candidates),
            "nodes": kb.manifest["counts"]["nodes"], "embedded": embedded}


def main() -> None:
    def extra(parser):
        parser.add_argument("--kb", type=Path, default=harness.ROOT / "data" / "kb" / "bio",
                            help="the bio KB with Disease embeddings (default data/kb/bio)")
        parser.add_argument("--queries", type=int, default=None, help="queries (default 50; --quick 10)")

    args = harness.arguments(__doc__.split("\n")[0], extra, repeats=3)
    env = harness.Environment(["pyoxigraph", "tantivy", "onnxruntime"])
    found = measure(args.kb, args.queries or (10 if args.quick else 50), 1 if args.quick else args.repeats)
    env.finish()
    b50, b95, _ = found["bm25"]
    rows = [["**4step-offline (whole query)**", *(ms(x) for x in found["total"]),
             f"{found['total'][0] / b50:.0f}×", f"{found['total'][1] / b95:.0f}×"]]
    for s in STEPS:
        p50, p95, mean = found["steps"][s]
        rows.append([f"  {s}", ms(p50), ms(p95), ms(mean), f"{p50 / b50:.1f}×", f"{p95 / b95:.1f}×"])
    rows.append(["bm25 (baseline)", *(ms(x) for x in found["bm25"]), "1.00×", "1.00×"])
    result = table(["path", "p50 ms", "p95 ms", "mean ms", "p50 vs bm25", "p95 vs bm25"], rows)
    print()
    print(result)
    if args.doc:
        body = f"""{env.markdown(harness.command_line())}
- KB: `{args.kb}` ({found['nodes']:,} nodes, {found['embedded']:,} documents embedded; closures and IC of
  the HPO hierarchy stored with it).
- Queries: the first {found['queries']} phenopacket dev case templates, `--type Disease`, k = 10; median
  {found['candidates']:.0f} SPARQL candidates per query. Warm-up 3 queries; {args.repeats} rounds; per-query
  median kept, p50/p95 over the queries; query-vector cache cleared before each timed call.
- The step rows are the stage's own per-step clock (`explain["seconds"]`) for the same calls; p50s of steps
  need not add up to the p50 of the whole.

{result}

*triplets* = mention finding and relation-path choice; *linking* = constant linking and SPARQL compilation;
*sparql* = hierarchy matching (IC over stored closures), BM25 fusion and the provenance query; *ranking* = dense
similarity over the candidates, ordering and the fallback top-up.
"""
        harness.update_doc("fourstep", "4StepFocus (offline) latency by step (`bench/fourstep.py`)", body)
        print(f"\nwrote the fourstep section of {harness.DOC}")


if __name__ == "__main__":
    main()
