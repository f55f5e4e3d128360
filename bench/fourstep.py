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
queries is timed in the same rounds as the baseline, and so is a stream of the same requests with the caches
kept between them (emptied at each round's start).

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


def requests(query_set: str, queries: int) -> tuple[list[str], list[str] | None]:
    """``queries`` requests spread evenly over the dev split (phenopackets: case reports, ``--type Disease``;
    metaqa: the same number from each of the 1-, 2- and 3-hop sets), and the type restriction."""
    from kqe_rdf.evaluation import querysets

    def spread(items: list, n: int) -> list:
        step = max(len(items) // max(n, 1), 1)
        return items[::step][:n]

    if query_set == "metaqa":
        texts = []
        for hop in ("1-hop", "2-hop", "3-hop"):
            found = list(querysets.load("metaqa", harness.shared("metaqa", hop, "dev.txt.gz")))
            texts += [q.text for q in spread(found, queries // 3)]
        return texts, None
    cases = list(querysets.load("phenopackets", harness.shared("phenopackets", "dev.jsonl.gz")))
    return [q.text for q in spread(cases, queries)], ["Disease"]


def measure(kb_path: Path, query_set: str, queries: int, repeats: int) -> dict:
    from kqe_rdf.core.caches import forget
    from kqe_rdf.core.config import Settings
    from kqe_rdf.kb.knowledge_base import KnowledgeBase
    from kqe_rdf.kb.ontology import local_name
    from kqe_rdf.methods.registry import pipeline

    settings = Settings()
    kb = KnowledgeBase.open(kb_path, settings)
    texts, types = requests(query_set, queries)
    fourstep = pipeline("4step-offline", kb, settings, 10, types)
    bm25 = pipeline("bm25", kb, settings, 10, types)
    embedded = len(kb.dense) if kb.has_embeddings else 0
    print(f"KB {kb_path}: {kb.manifest['counts']['nodes']:,} nodes, {embedded:,} embedded; "
          f"{len(texts)} {query_set} dev requests", flush=True)

    t0 = time.perf_counter()
    fourstep.run(texts[0])  # the first request opens the store, indexes, encoder and name index
    first = time.perf_counter() - t0
    for text in texts[1:3]:  # warm-up
        fourstep.run(text)
        bm25.search(text)
    totals: list[list[float]] = [[] for _ in texts]
    steps: dict[str, list[list[float]]] = {s: [[] for _ in texts] for s in STEPS}
    base: list[list[float]] = [[] for _ in texts]
    stream: list[list[float]] = [[] for _ in texts]
    candidates: list[int] = [0 for _ in texts]
    for round_ in range(repeats):
        print(f"round {round_ + 1}/{repeats}", flush=True)
        for i, text in enumerate(texts):
            forget(kb)
            kb.hierarchies.cache_clear()
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
        # A stream of distinct requests, as a server meets them: the caches emptied once, at the round's start, so
        # a request finds there only what the requests before it left (a shared wording, common phenotypes).
        forget(kb)
        kb.hierarchies.cache_clear()
        for i, text in enumerate(texts):
            t0 = time.perf_counter()
            fourstep.run(text)
            stream[i].append(time.perf_counter() - t0)

    def stats(rows: list[list[float]]) -> tuple[float, float, float]:
        per_query = [statistics.median(r) for r in rows]
        return percentile(per_query, 50), percentile(per_query, 95), statistics.mean(per_query)

    return {"total": stats(totals), "steps": {s: stats(v) for s, v in steps.items()}, "bm25": stats(base),
            "stream": stats(stream),
            "queries": len(texts), "candidates": statistics.median(candidates), "first": first,
            "hierarchies": ", ".join(local_name(h) for h in kb.hierarchies.summary),
            "nodes": kb.manifest["counts"]["nodes"], "embedded": embedded}


def main() -> None:
    def extra(parser):
        parser.add_argument("--kb", type=Path, default=harness.ROOT / "data" / "kb" / "bio",
                            help="the KB the requests are about (default data/kb/bio)")
        parser.add_argument("--set", dest="query_set", choices=("phenopackets", "metaqa"), default="phenopackets",
                            help="phenopacket case reports over the bio KB, or MetaQA questions over its KB")
        parser.add_argument("--queries", type=int, default=None, help="queries (default 50; --quick 10)")

    args = harness.arguments(__doc__.split("\n")[0], extra, repeats=3)
    env = harness.Environment(["pyoxigraph", "tantivy", "onnxruntime"])
    found = measure(args.kb, args.query_set, args.queries or (10 if args.quick else 50),
                    1 if args.quick else args.repeats)
    env.finish()
    b50, b95, _ = found["bm25"]
    rows = [["**4step-offline (whole query)**", *(ms(x) for x in found["total"]),
             f"{found['total'][0] / b50:.0f}×", f"{found['total'][1] / b95:.0f}×"]]
    for s in STEPS:
        p50, p95, mean = found["steps"][s]
        rows.append([f"  {s}", ms(p50), ms(p95), ms(mean), f"{p50 / b50:.1f}×", f"{p95 / b95:.1f}×"])
    rows.append(["4step-offline, in a stream (caches kept)", *(ms(x) for x in found["stream"]),
                 f"{found['stream'][0] / b50:.0f}×", f"{found['stream'][1] / b95:.0f}×"])
    rows.append(["bm25 (baseline)", *(ms(x) for x in found["bm25"]), "1.00×", "1.00×"])
    result = table(["path", "p50 ms", "p95 ms", "mean ms", "p50 vs bm25", "p95 vs bm25"], rows)
    print()
    print(result)
    if args.doc:
        types = ", `--type Disease`" if args.query_set == "phenopackets" else ""
        body = f"""{env.markdown(harness.command_line())}
- KB: `{args.kb}` ({found['nodes']:,} nodes, {found['embedded']:,} documents embedded; hierarchies stored
  with it: {found['hierarchies'] or 'none'}).
- Requests: {found['queries']} {args.query_set} dev requests spread evenly over the split{types}, k = 10;
  median {found['candidates']:.0f} candidates per request. The first request of the process (opening the store,
  indexes, encoder and name index) took **{found['first']:.2f} s**. Warm-up 2 more; {args.repeats} rounds;
  per-request median kept, p50/p95 over the requests; the query-vector cache and the hierarchy matcher's
  per-term cache cleared before each timed call. *In a stream*: the same requests again, one after another
  as a server meets them, the caches cleared once at each round's start, so a request finds in them only
  what the requests before it left (the vector of a wording they share, their common terms' arrays).
- The step rows are the stage's own per-step clock (`explain["seconds"]`) for the same calls; p50s of steps
  need not add up to the p50 of the whole.

{result}

*triplets* = mention finding and relation-path choice; *linking* = constant linking and SPARQL compilation;
*sparql* = candidate scoring: for a phenotype list, hierarchy matching over the arrays stored with the KB (IC of
the most informative common ancestor), BM25 fusion and each shown answer's matches; otherwise the compiled query
in Oxigraph; *ranking* = similarity tie-break over the candidates, ordering and the fallback top-up.
"""
        name = "fourstep" if args.query_set == "phenopackets" else f"fourstep-{args.query_set}"
        harness.update_doc(name, f"4StepFocus (offline) latency by step, {args.query_set} (`bench/fourstep.py`)", body)
        print(f"\nwrote the fourstep section of {harness.DOC}")


if __name__ == "__main__":
    main()
