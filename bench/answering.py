"""Answer accuracy of ``kqe_rdf.methods.answering`` on a dev query set: Hits@1, evidence recall per pruning stage,
latency and LLM tokens per question. Prints one JSON object (and a Markdown row) per source combination.

A question is answered right (Hits@1) when the answer's KG node has a gold id, or — for
answers that are plain table values — when its normalised text is a gold name. Evidence
recall at a stage: some piece kept at that stage names a gold answer.

    python bench/answering.py metaqa ../shared/data/metaqa/1-hop/dev.txt.gz --kb data/kb/metaqa2 \\
        --sample 300 --seed 1 --sources kg --sources kg,text --offline
    # only questions whose gold answers or topic are of some classes in a reference KB (heterogeneity check):
    python bench/answering.py metaqa ... --kb /tmp/qa6/kb --about Year,Language --reference-kb data/kb/metaqa2
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from pathlib import Path

from kqe_rdf.methods.answering import QuestionAnswering, check_sources
from kqe_rdf.core.config import Settings
from kqe_rdf.kb.knowledge_base import KnowledgeBase
from kqe_rdf.kb.linking import NameIndex, normalise_name
from kqe_rdf.llm.client import LLM
from kqe_rdf.evaluation.querysets import load


def about(queries, reference: KnowledgeBase, classes: list[str]):
    """Questions whose topic entity or a gold answer is a node of one of ``classes`` in ``reference``."""
    wanted = reference.resolve_types(classes)
    index = NameIndex(reference)

    def typed(name: str) -> bool:
        return any(wanted & index.types.get(i, frozenset()) for i in index.nodes(normalise_name(name)))

    return [q for q in queries if (q.topic and typed(q.topic)) or any(typed(a) for a in q.answers)]


def hit(kb: KnowledgeBase, gold: set[str], gold_names: set[str], nodes, text: str | None) -> bool:
    for iri in nodes:
        try:
            if kb.document(iri).identifier in gold:
                return True
        except Exception:
            pass
    return text is not None and normalise_name(text) in gold_names


def covered(kb: KnowledgeBase, pieces, gold: set[str], gold_names: set[str]) -> bool:
    for r in pieces:
        for iri in r.evidence.nodes:
            try:
                if kb.document(iri).identifier in gold:
                    return True
            except Exception:
                pass
        if any(r.evidence.mentions(g) for g in gold_names):
            return True
    return False


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("queryset")
    ap.add_argument("paths", nargs="+")
    ap.add_argument("--kb", required=True)
    ap.add_argument("--sources", action="append", default=None, help="Source combination (repeatable).")
    ap.add_argument("--sample", type=int, default=None)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--offline", action="store_true", help="Ignore a configured LLM.")
    ap.add_argument("--about", default=None, help="Comma-separated classes (with --reference-kb).")
    ap.add_argument("--reference-kb", default=None)
    ap.add_argument("--per-query", default=None, help="Write per-question results as JSON Lines here.")
    args = ap.parse_args(argv)

    settings = Settings.load(kb=args.kb)
    kb = KnowledgeBase.open(args.kb, settings)
    qs = load(args.queryset, *map(Path, args.paths))
    queries = list(qs.queries)
    described = qs.name
    if args.about:
        queries = about(queries, KnowledgeBase.open(args.reference_kb, settings), args.about.split(","))
        described += f", only questions about {args.about} ({len(queries)})"
    if args.sample is not None and args.sample < len(queries):
        picked = sorted(random.Random(args.seed).sample(range(len(queries)), args.sample))
        queries = [queries[i] for i in picked]
        described += f", random sample of {args.sample} (seed {args.seed})"
    llm = None if args.offline else LLM.from_settings(settings)
    qa = QuestionAnswering(kb, settings, llm)
    per_query = open(args.per_query, "w", encoding="utf-8") if args.per_query else None
    for combination in args.sources or ["kg,text,tables"]:
        sources = check_sources(combination)
        hits = 0
        recall: dict[str, int] = {}
        seconds, tokens, llm_used = [], [], 0
        started = time.perf_counter()
        for q in queries:
            gold = set(q.answers)
            gold_names = {normalise_name(g) for g in gold}
            result = qa(q.text, sources)
            ok = hit(kb, gold, gold_names, result.nodes, result.answer)
            hits += ok
            for name, pieces in result.pruning.stages:
                recall[name] = recall.get(name, 0) + covered(kb, pieces, gold, gold_names)
            seconds.append(result.seconds["total"])
            tokens.append(result.usage.get("total_tokens", 0))
            llm_used += result.method.startswith("llm")
            if per_query:
                per_query.write(json.dumps({"qid": q.qid, "sources": combination, "question": q.text,
                                            "answer": result.answer, "hit": ok, "method": result.method,
                                            "gold": sorted(gold)[:10], "flags": result.flags,
                                            "notes": result.pruning.notes}) + "\n")
        n = len(queries) or 1
        summary = {"queryset": described, "kb": args.kb, "sources": combination, "questions": len(queries),
                   "hits@1": round(100 * hits / n, 2),
                   "evidence_recall": {k: round(100 * v / n, 2) for k, v in recall.items()},
                   "median_seconds": round(statistics.median(seconds), 3) if seconds else None,
                   "mean_llm_tokens": round(sum(tokens) / n, 1), "llm_answers": llm_used,
                   "reader": "offline" if llm is None else llm.describe(),
                   "wall_seconds": round(time.perf_counter() - started, 1)}
        print(json.dumps(summary), flush=True)
        stages = " / ".join(f"{v}" for v in summary["evidence_recall"].values())
        print(f"| {described} | {combination} | {summary['hits@1']} | {stages} | {summary['median_seconds']} | "
              f"{summary['mean_llm_tokens']} |", file=sys.stderr, flush=True)
    if per_query:
        per_query.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
