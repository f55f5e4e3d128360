"""The weights `hybrid` gives each side per request (no fitted weight) over the queries of a bench/fusion.py run.

Read-only: the KB's fitted weight is ignored, not removed. For each query of ``RUN/SET.request.jsonl`` it runs the
per-request score fusion once and counts what ``--explain`` would show: BM25's share, the dense side's confidence
and its best cosine's z against chance (docs/results-log.md, "Phenopackets (template) and MetaQA 1-hop"):

    python bench/fusion_weights.py $KBS/metaqa $RUN/metaqa-1-hop.request.jsonl
    python bench/fusion_weights.py $KBS/bio $RUN/phenopackets-template.request.jsonl --type Disease
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

from kqe_rdf.kb.knowledge_base import KnowledgeBase
from kqe_rdf.methods.retrieval import BM25, Batch, Dense, FusionWeight, Query, ScoreFusion


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("kb", type=Path)
    parser.add_argument("records", type=Path, help="a --per-query file of bench/fusion.py (its bm25 queries)")
    parser.add_argument("--type", action="append", help="as the set is evaluated (phenopackets: Disease)")
    args = parser.parse_args()
    kb = KnowledgeBase.open(args.kb)
    queries = {}
    for line in args.records.open():
        r = json.loads(line)
        queries.setdefault(r["qid"], r["query"])
    fusion = ScoreFusion([BM25(kb, 100, args.type), Dense(kb, 100, args.type, confidence=True)], FusionWeight(None), 100)
    out = fusion(Batch([Query(q, text) for q, text in queries.items()]))
    shown = [out.explain[q]["fusion"] for q in queries]
    bm25 = [f["weights"]["BM25"] for f in shown]
    z = [f["margins"]["Dense"]["z"] for f in shown if "Dense" in f.get("margins", {})]
    print(json.dumps({
        "queries": len(shown), "bm25_share_median": round(statistics.median(bm25), 3),
        "bm25_share_below_0.5": sum(w < 0.5 for w in bm25), "bm25_share_0.9_or_more": sum(w >= 0.9 for w in bm25),
        "dense_confidence_0": sum(f["confidence"]["Dense"] == 0 for f in shown),
        "dense_z_median": statistics.median(z), "chance": shown[0]["margins"]["Dense"]["chance"]}, indent=1))


if __name__ == "__main__":
    main()
