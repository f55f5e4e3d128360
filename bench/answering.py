"""Answer accuracy of ``kqe_rdf.methods.answering`` on a dev query set: Hits@1, evidence recall per pruning stage,
latency and LLM tokens per question. Prints one JSON object (and a Markdown row) per source combination.

A question is answered right (Hits@1) when the answer's KG node is a gold node (gold ids resolved as
``kqe-rdf eval`` resolves them: by id, and for query sets whose answers are names, by exact name), or — for
answers that are plain table values — when its normalised text is a gold name. Evidence recall at a stage
(questions answered from evidence only): some piece kept at that stage names a gold answer. Answers are
counted by the stage that gave them (``Answer.method``: the grounded reading, text facts, the evidence reader).

``--compare 4step-offline`` (with ``--type`` as ``kqe-rdf eval`` takes it, ``--depth`` 100) runs that
retrieval method on the same questions and reports its Hit@1 beside ``ask``'s, and how often each is right
where the other is not.

    python bench/answering.py metaqa ../shared/data/metaqa/1-hop/dev.txt.gz --kb data/kb/metaqa2 \\
        --sample 300 --seed 1 --sources kg --sources kg,text --offline --compare 4step-offline
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
from kqe_rdf.methods.registry import pipeline
from kqe_rdf.methods.retrieval import Batch, Query


def about(queries, reference: KnowledgeBase, classes: list[str]):
    """Questions whose topic entity or a gold answer is a node of one of ``classes`` in ``reference``."""
    wanted = reference.resolve_types(classes)
    index = NameIndex(reference)

    def typed(name: str) -> bool:
        return any(wanted & index.types.get(i, frozenset()) for i in index.nodes(normalise_name(name)))

    return [q for q in queries if (q.topic and typed(q.topic)) or any(typed(a) for a in q.answers)]


def hit(gold: set[str], gold_names: set[str], nodes, text: str | None) -> bool:
    """``gold``: the gold answers' node IRIs; ``gold_names``: their names, normalised (for table values)."""
    return bool(gold.intersection(nodes)) or (text is not None and normalise_name(text) in gold_names)


def covered(pieces, gold: set[str], gold_names: set[str]) -> bool:
    return any(gold & r.evidence.nodes or any(r.evidence.mentions(g) for g in gold_names) for r in pieces)


def top_hit(stage, question: str) -> str | None:
    """The first result of a retrieval stage for one question."""
    batch = stage(Batch([Query("q", question)]))
    ranked = batch.ranked("q")
    return ranked[0].iri if ranked else None


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
    ap.add_argument("--compare", default=None, help="A retrieval method (e.g. 4step-offline) run on the same questions.")
    ap.add_argument("--type", action="append", default=None, help="With --compare: rank only nodes of this class.")
    ap.add_argument("--depth", type=int, default=100, help="With --compare: results ranked per question.")
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
    resolved = kb.resolve_identifiers({a for q in queries for a in q.answers}, qs.answers_are_names)
    compare = pipeline(args.compare, kb, settings, args.depth, args.type) if args.compare else None
    compared: dict[str, bool] = {}
    per_query = open(args.per_query, "w", encoding="utf-8") if args.per_query else None
    for combination in args.sources or ["kg,text,tables"]:
        sources = check_sources(combination)
        hits = 0
        recall: dict[str, int] = {}
        by_method: dict[str, list[int]] = {}
        both = {"ask only": 0, f"{args.compare} only": 0, "both": 0}
        seconds, tokens, llm_used = [], [], 0
        started = time.perf_counter()
        for q in queries:
            gold = {iri for a in q.answers for iri in resolved.get(a, ())}
            gold_names = {normalise_name(g) for g in q.answers}
            result = qa(q.text, sources)
            ok = hit(gold, gold_names, result.nodes, result.answer)
            hits += ok
            counts = by_method.setdefault(result.method, [0, 0])
            counts[0] += 1
            counts[1] += ok
            for name, pieces in result.pruning.stages if result.pruning else ():
                recall[name] = recall.get(name, 0) + covered(pieces, gold, gold_names)
            seconds.append(result.seconds["total"])
            tokens.append(result.usage.get("total_tokens", 0))
            llm_used += result.method.startswith("llm")
            if compare is not None:
                if q.qid not in compared:
                    compared[q.qid] = top_hit(compare, q.text) in gold
                other = compared[q.qid]
                key = "both" if ok and other else "ask only" if ok else f"{args.compare} only" if other else None
                if key:
                    both[key] += 1
            if per_query:
                per_query.write(json.dumps({"qid": q.qid, "sources": combination, "question": q.text,
                                            "answer": result.answer, "hit": ok, "method": result.method,
                                            "compared_hit": compared.get(q.qid), "gold": sorted(q.answers)[:10],
                                            "flags": result.flags, "seconds": result.seconds["total"],
                                            "notes": result.pruning.notes if result.pruning else []}) + "\n")
        n = len(queries) or 1
        evidence_answered = sum(c for m, (c, _h) in by_method.items() if not m.startswith(("4step", "text facts")))
        summary = {"queryset": described, "kb": args.kb, "sources": combination, "questions": len(queries),
                   "hits@1": round(100 * hits / n, 2),
                   "answered_by": {m: {"questions": c, "hits@1": round(100 * h / c, 2)} for m, (c, h) in by_method.items()},
                   "evidence_recall (questions answered from evidence)":
                       {k: round(100 * v / max(evidence_answered, 1), 2) for k, v in recall.items()},
                   "median_seconds": round(statistics.median(seconds), 3) if seconds else None,
                   "p90_seconds": round(statistics.quantiles(seconds, n=10)[-1], 3) if len(seconds) > 1 else None,
                   "mean_llm_tokens": round(sum(tokens) / n, 1), "llm_answers": llm_used,
                   "reader": "offline" if llm is None else llm.describe(),
                   "wall_seconds": round(time.perf_counter() - started, 1)}
        if compare is not None:
            summary[f"{args.compare} hit@1"] = round(100 * (both["both"] + both[f"{args.compare} only"]) / n, 2)
            summary["right where the other is not"] = both
        print(json.dumps(summary), flush=True)
        stages = " / ".join(f"{v}" for v in summary["evidence_recall (questions answered from evidence)"].values())
        print(f"| {described} | {combination} | {summary['hits@1']} | {stages} | {summary['median_seconds']} | "
              f"{summary['mean_llm_tokens']} |", file=sys.stderr, flush=True)
    if per_query:
        per_query.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
