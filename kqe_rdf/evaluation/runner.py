"""Running named retrieval methods over a query set and scoring them.

Gold answers arrive as source ids and are mapped to node IRIs through the
KB (``kqe:identifier`` or ``kqe:xref``). Queries whose gold answers are not in
the KB stay in the denominator (they score 0) and are counted, so a metric
never improves by dropping what the KB cannot answer.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ..core.errors import KqeError
from ..methods.fourstep.explanations import names_in, summary
from .metrics import ScoredHit, per_query_stark, per_query_trec, stark_metrics, trec_metrics, write_trec_run
from ..core.progress import Progress
from .querysets import EvalQuery, QuerySet
from ..methods.retrieval import Batch, Query
from ..methods.registry import pipeline

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
    #: Per query, how the method reached its ranking (``Batch.explain``), for per-query records and reports.
    explain: dict[str, dict] = field(repr=False, default_factory=dict)


@dataclass
class Evaluation:
    queryset: str
    queries: int
    answerable: int
    unresolved_answers: int
    skipped: dict[str, int]
    results: list[MethodResult]
    #: The queries evaluated, and per query each gold id with its relevance and the node IRIs it resolved to.
    evaluated: list[EvalQuery] = field(repr=False, default_factory=list)
    gold: dict[str, list[tuple[str, int, list[str]]]] = field(repr=False, default_factory=dict)
    rel: int = 1

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


def gold_qrels(kb, queryset: QuerySet, resolved: dict[str, list[str]] | None = None
               ) -> tuple[dict[str, dict[str, int]], int]:
    """``{qid: {node IRI: relevance}}`` and the number of gold ids the KB does not have."""
    if resolved is None:
        resolved = kb.resolve_identifiers({doc for q in queryset for doc in q.answers}, queryset.answers_are_names)
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
    resolved = kb.resolve_identifiers({doc for q in queryset for doc in q.answers}, queryset.answers_are_names)
    qrels, unresolved = gold_qrels(kb, queryset, resolved)
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
        explain: dict[str, dict] = {}
        started = time.perf_counter()
        with progress.task(f"{method} on {queryset.name}", total=len(queries), unit="queries") as tick:
            for start in range(0, len(queries), batch_size):
                batch = stage(Batch(queries[start : start + batch_size]))
                for q in batch.queries:
                    run += [ScoredHit(h.qid, h.iri, h.score, h.rank - 1) for h in batch.ranked(q.qid)]  # (ScoredHit counts from 0)
                    if q.qid in batch.explain:
                        explain[q.qid] = batch.explain[q.qid]
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
        results.append(MethodResult(method, metrics, per_query, seconds, run, usage, repr(stage), explain))
    gold = {q.qid: [(doc, grade, resolved.get(doc, [])) for doc, grade in q.answers.items()] for q in queryset}
    return Evaluation(queryset.name, len(queries), answerable, unresolved, dict(queryset.skipped), results,
                      list(queryset), gold, rel)


def query_records(evaluation: Evaluation, kb, top: int = 10) -> Iterator[dict]:
    """One record per method and query, enough to see why a method failed without a second program:
    the query's text and kinds, its metrics, the gold ids with names, the ``top`` ranked nodes with names,
    scores and whether they are gold, and the method's explanation summary (:mod:`kqe_rdf.methods.fourstep.explanations`)."""
    name = names_in(kb)

    def identifier(iri: str) -> str | None:
        try:
            return kb.document(iri).identifier
        except KqeError:
            return None

    for result in evaluation.results:
        ranked: dict[str, list[ScoredHit]] = {}
        for hit in result.run:
            ranked.setdefault(hit.qid, []).append(hit)
        for q in evaluation.evaluated:
            relevant = {iri for _doc, grade, iris in evaluation.gold.get(q.qid, ()) if grade >= evaluation.rel
                        for iri in iris}
            hits = sorted(ranked.get(q.qid, []), key=lambda h: h.rank)[:top]
            yield {
                "method": result.method, "qid": q.qid, "query": q.text, **result.per_query.get(q.qid, {}),
                "facets": q.facets or {},
                "gold": [{"id": doc, "relevance": grade, "iris": iris, "name": name(iris[0]) if iris else None}
                         for doc, grade, iris in evaluation.gold.get(q.qid, ())],
                "ranked": [{"rank": h.rank + 1, "iri": h.doc_id, "id": identifier(h.doc_id), "name": name(h.doc_id),
                            "score": round(h.score, 4), "gold": h.doc_id in relevant} for h in hits],
                "explanation": summary(result.explain.get(q.qid), name),
            }
