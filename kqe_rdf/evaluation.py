"""Running named retrieval methods over a query set and scoring them.

Gold answers arrive as source ids and are mapped to node IRIs through the
KB (``kqe:identifier`` or ``kqe:xref``). Queries whose gold answers are not in
the KB stay in the denominator (they score 0) and are counted, so a metric
never improves by dropping what the KB cannot answer.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from .metrics import ScoredHit, per_query_stark, per_query_trec, stark_metrics, trec_metrics, write_trec_run
from .progress import Progress
from .querysets import QuerySet
from .retrieval import Batch, Query, pipeline

STARK = ("Hit@1", "Hit@5", "Recall@20", "MRR")
TREC = ("nDCG@10", "AP", "R@100")


@dataclass
class MethodResult:
    method: str
    metrics: dict[str, float]
    per_query: dict[str, dict[str, float]]
    seconds: float
    run: list[ScoredHit] = field(repr=False, default_factory=list)
    #: LLM calls and tokens of this method's run (None for methods that use no LLM).
    llm_usage: dict | None = None
    described: str = ""


@dataclass
class Evaluation:
    queryset: str
    queries: int
    answerable: int
    unresolved_answers: int
    skipped: dict[str, int]
    results: list[MethodResult]

    def table(self) -> list[dict[str, object]]:
        rows = []
        for r in self.results:
            row = {"method": r.method, **{k: round(v, 4) for k, v in r.metrics.items()},
                   "queries/s": round(self.queries / r.seconds, 2) if r.seconds else None}
            if r.llm_usage is not None:
                n = max(self.queries, 1)
                # What the method spends per query, whether this run asked the server or read the cache.
                u = r.llm_usage
                row["llm calls/query"] = round((u["calls"] + u.get("cache_hits", 0)) / n, 2)
                row["llm tokens/query"] = round((u["prompt_tokens"] + u["completion_tokens"]
                                                 + u.get("cached_tokens", 0)) / n, 1)
                row["llm cache hits/query"] = round(u.get("cache_hits", 0) / n, 2)
            rows.append(row)
        return rows


def gold_qrels(kb, queryset: QuerySet) -> tuple[dict[str, dict[str, int]], int]:
    """``{qid: {node IRI: relevance}}`` and the number of gold ids the KB does not have."""
    ids = {doc for q in queryset for doc in q.answers}
    resolved = kb.resolve_identifiers(ids)
    qrels: dict[str, dict[str, int]] = {}
    missing = 0
    for q in queryset:
        judged: dict[str, int] = {}
        for doc, relevance in q.answers.items():
            iris = resolved.get(doc)
            if not iris:
                missing += 1
                continue
            for iri in iris:
                judged[iri] = max(judged.get(iri, relevance), relevance)
        qrels[q.qid] = judged
    return qrels, missing


def evaluate(
    kb,
    queryset: QuerySet,
    methods: Sequence[str],
    settings,
    depth: int = 100,
    types: Sequence[str] | None = None,
    rel: int = 1,
    trec_measures: Sequence[str] = TREC,
    batch_size: int = 32,
    progress: Progress | None = None,
    run_dir: Path | None = None,
) -> Evaluation:
    progress = progress or Progress.quiet()
    qrels, unresolved = gold_qrels(kb, queryset)
    # A query whose gold is absent from the KB still counts: give it an unmatchable gold id.
    scored_qrels = {qid: (judged or {f"urn:kqe:absent:{qid}": max(rel, 1)}) for qid, judged in qrels.items()}
    answerable = sum(1 for judged in qrels.values() if any(r >= rel for r in judged.values()))
    queries = [Query(q.qid, q.text) for q in queryset]
    results = []
    for method in methods:
        stage = pipeline(method, kb, settings, depth, types)
        llm = getattr(stage, "llm", None)
        before = llm.usage.as_dict() if llm is not None else None
        run: list[ScoredHit] = []
        started = time.perf_counter()
        with progress.task(f"{method} on {queryset.name}", total=len(queries), unit="queries") as tick:
            for start in range(0, len(queries), batch_size):
                batch = stage(Batch(queries[start : start + batch_size]))
                for q in batch.queries:
                    run += [ScoredHit(h.qid, h.iri, h.score, h.rank) for h in batch.ranked(q.qid)]
                tick(len(batch.queries))
        seconds = time.perf_counter() - started
        metrics = stark_metrics(run, scored_qrels, rel=rel)
        per_query = per_query_stark(run, scored_qrels, rel=rel)
        if trec_measures:
            metrics.update(trec_metrics(run, scored_qrels, trec_measures, rel=rel, use_given_order=True))
            for qid, values in per_query_trec(run, scored_qrels, trec_measures, rel=rel, use_given_order=True).items():
                per_query.setdefault(qid, {}).update(values)
        if run_dir is not None:
            run_dir.mkdir(parents=True, exist_ok=True)
            write_trec_run(run, run_dir / f"{queryset.name}.{method}.run", tag=f"kqe-{method}")
        usage = None
        if llm is not None:
            after = llm.usage.as_dict()
            usage = {key: after[key] - before.get(key, 0) for key in after if isinstance(after[key], (int, float))}
        results.append(MethodResult(method, metrics, per_query, seconds, run, usage, repr(stage)))
    return Evaluation(queryset.name, len(queries), answerable, unresolved, dict(queryset.skipped), results)
