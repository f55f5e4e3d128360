"""Hit@1 of a retrieval method on MetaQA by question type, and seconds per query.

A question's *type* is its text with the ``[topic entity]`` replaced by ``E``. The sample is drawn exactly
as ``kqe-rdf eval metaqa FILE --sample N --seed S`` draws it, so the overall Hit@1 here is the eval's.

    python bench/metaqa_types.py /work/shared/data/metaqa/2-hop/dev.txt.gz --kb data/kb/metaqa2 \\
        --sample 300 --seed 1 [--method 4step-offline] [--worst 15] [--show-failures 5]
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from collections import defaultdict
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("questions", type=Path)
    ap.add_argument("--kb", type=Path, default=Path("data/kb/metaqa2"))
    ap.add_argument("--method", default="4step-offline")
    ap.add_argument("--sample", type=int, default=300)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--worst", type=int, default=15, help="question types shown, worst first")
    ap.add_argument("--show-failures", type=int, default=0, help="failed questions shown with their reading")
    args = ap.parse_args()

    from kqe_rdf.core.config import Settings
    from kqe_rdf.kb.knowledge_base import KnowledgeBase
    from kqe_rdf.evaluation.querysets import _TOPIC, load_metaqa, source_lines
    from kqe_rdf.methods.retrieval import Batch, Query
    from kqe_rdf.methods.registry import pipeline

    qs = load_metaqa(args.questions)
    raw = {}
    _name, lines = source_lines(args.questions)
    for number, line in enumerate(lines, start=1):
        if line.strip():
            raw[number] = _TOPIC.sub("E", line.partition("\t")[0])
    picked = sorted(random.Random(args.seed).sample(range(len(qs.queries)), args.sample))
    queries = [qs.queries[i] for i in picked]
    kb = KnowledgeBase.open(args.kb)
    stage = pipeline(args.method, kb, Settings(), 10)
    gold = kb.resolve_identifiers({a for q in queries for a in q.answers})
    by_type: dict[str, list[int]] = defaultdict(list)
    seconds, failures = [], []
    for q in queries:
        started = time.perf_counter()
        batch = stage(Batch([Query(q.qid, q.text)]))
        seconds.append(time.perf_counter() - started)
        hits = batch.ranked(q.qid)
        golds = {i for a in q.answers for i in gold.get(a, [])}
        ok = int(bool(hits) and hits[0].iri in golds)
        kind = raw[int(q.qid.rsplit("-", 1)[-1])]
        by_type[kind].append(ok)
        if not ok:
            explain = batch.explain.get(q.qid, {})
            failures.append((q.text, explain.get("triplets", {}).get("notes"), explain.get("candidates"),
                             kb.document(hits[0].iri).name if hits else None))
    total = [x for xs in by_type.values() for x in xs]
    print(f"{args.questions}: Hit@1 {100 * sum(total) / len(total):.1f} on {len(total)} questions "
          f"({len(by_type)} types); seconds/query median {statistics.median(seconds):.3f}, "
          f"p95 {sorted(seconds)[int(0.95 * (len(seconds) - 1))]:.3f}")
    print("| Hit@1 | n | question type |\n|---:|---:|---|")
    for kind, xs in sorted(by_type.items(), key=lambda kv: (sum(kv[1]) / len(kv[1]), -len(kv[1])))[: args.worst]:
        print(f"| {100 * sum(xs) / len(xs):.0f} | {len(xs)} | {kind} |")
    for text, notes, candidates, top in failures[: args.show_failures]:
        print(f"- {text} → {top!r} ({candidates} candidates); {notes}")


if __name__ == "__main__":
    main()
