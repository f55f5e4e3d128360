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
#: The question-answering "method" (``kqe-rdf ask``): its answers, then its other candidates, are its ranking,
#: and its answer sets and confidences are scored too (:func:`answer_set_scores`, :meth:`Evaluation.reliability`).
ASK = "ask"
#: Confidence buckets of the reliability table: [0, 0.2), [0.2, 0.4), ..., [0.9, 1].
BUCKETS = (0.0, 0.2, 0.4, 0.6, 0.8, 0.9, 1.0)


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
    #: ``ask`` only: per query, its answers (node IRIs, best first), confidence, stage, and answer-set scores.
    answered: dict[str, dict] = field(repr=False, default_factory=dict)


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

    def columns(self) -> list[str]:
        """The columns of :meth:`table` over all its rows (some methods alone have answer-set or LLM numbers),
        the speed last."""
        columns = list(dict.fromkeys(c for row in self.table() for c in row))
        return [c for c in columns if c != "queries/s"] + (["queries/s"] if "queries/s" in columns else [])

    def reliability(self) -> dict[str, list[dict[str, object]]]:
        """Per ``ask`` run, its questions by confidence bucket: how many, their mean confidence, how often the
        first answer is right (Hit@1) and the mean answer-set F1 — whether the confidence separates right
        answers from wrong ones."""
        out = {}
        for r in self.results:
            if not r.answered:
                continue
            rows = []
            for low, high in zip(BUCKETS, BUCKETS[1:]):
                inside = [a for a in r.answered.values()
                          if low <= a["confidence"] < high or (high == BUCKETS[-1] and a["confidence"] == high)]
                if inside:
                    n = len(inside)
                    rows.append({"confidence": f"[{low:.1f}, {high:.1f}{']' if high == BUCKETS[-1] else ')'}",
                                 "questions": n,
                                 "mean confidence": round(sum(a["confidence"] for a in inside) / n, 4),
                                 "Hit@1": round(sum(a["hit"] for a in inside) / n, 4),
                                 "answer F1": round(sum(a["F1"] for a in inside) / n, 4)})
            out[r.method] = rows
        return out

    def table(self) -> list[dict[str, object]]:
        """One row per method: its metrics and speed (and, for some, answer-set and LLM numbers)."""
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
                row.update(reading_counts(r.explain))
            rows.append(row)
        return rows


#: What became of 4step's LLM reading per query (``explain["llm_reading"]["outcome"]``), as the table counts it.
READING_OUTCOMES = ("not asked", "used", "merged", "lost", "rejected", "failed")


def reading_counts(explain: dict[str, dict]) -> dict[str, int]:
    """How often the LLM's reading was used, merged, lost, rejected, failed (or not asked), repaired and re-asked
    over a run's queries; {} for a method without LLM readings."""
    records = [e["llm_reading"] for e in explain.values() if isinstance(e, dict) and e.get("llm_reading")]
    if not records:
        return {}
    out = {f"llm reading {o}": sum(r["outcome"] == o for r in records) for o in READING_OUTCOMES}
    out["llm reading repaired"] = sum(bool(r.get("repairs")) for r in records)
    out["llm reading re-asked"] = sum(bool(r.get("reasked")) for r in records)
    return out


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


def counting_absent(qrels: dict[str, dict[str, int]], rel: int) -> dict[str, dict[str, int]]:
    """``qrels`` where a query whose gold is absent from the KB still counts: it gets an unmatchable gold id."""
    return {qid: (judged or {f"urn:kqe:absent:{qid}": max(rel, 1)}) for qid, judged in qrels.items()}


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
    scored_qrels = counting_absent(qrels, rel)
    answerable = sum(1 for judged in qrels.values() if any(r >= rel for r in judged.values()))
    queries = [Query(q.qid, q.text) for q in queryset]
    results = []
    for method in methods:
        if method == ASK:
            results.append(_evaluate_ask(kb, queryset, queries, settings, depth, scored_qrels, qrels, resolved, rel,
                                         trec_measures, progress, run_dir))
            continue
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
        metrics, per_query = measure_run(run, scored_qrels, rel, trec_measures)
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


def measure_run(run: list[ScoredHit], scored_qrels, rel: int, trec_measures) -> tuple[dict, dict]:
    """A run's STaRK (and TREC) metrics, overall and per query, ranked in the run's order."""
    metrics = stark_metrics(run, scored_qrels, rel=rel)
    per_query = per_query_stark(run, scored_qrels, rel=rel)
    if trec_measures:
        metrics.update(trec_metrics(run, scored_qrels, trec_measures, rel=rel, use_given_order=True))
        for qid, values in per_query_trec(run, scored_qrels, trec_measures, rel=rel, use_given_order=True).items():
            per_query.setdefault(qid, {}).update(values)
    return metrics, per_query


def _evaluate_ask(kb, queryset: QuerySet, queries: list[Query], settings, depth: int, scored_qrels, qrels, resolved,
                  rel: int, trec_measures, progress: Progress, run_dir: Path | None) -> MethodResult:
    """``ask`` on every question (its sources and reader as ``settings`` say): its answers then its other
    candidates as its ranking (scored as a method's), and each question's answer set against the gold set."""
    from ..methods.answering import answer

    gold_ids = {q.qid: [doc for doc, grade in q.answers.items() if grade >= rel] for q in queryset}
    run: list[ScoredHit] = []
    answered: dict[str, dict] = {}
    usage: dict[str, float] = {}
    started = time.perf_counter()
    with progress.task(f"{ASK} on {queryset.name}", total=len(queries), unit="questions") as tick:
        for q in queries:
            result = answer(kb, settings, q.text)
            ranked = list(dict.fromkeys(i for c in [*result.answers, *result.candidates] for i in c.iris))[:depth]
            run += [ScoredHit(q.qid, iri, float(len(ranked) - n), n) for n, iri in enumerate(ranked)]
            answers = [c.iris for c in result.answers]
            scores = answer_set_scores(answers, gold_ids[q.qid], resolved)
            relevant = {i for i, grade in qrels.get(q.qid, {}).items() if grade >= rel}
            answered[q.qid] = {"answers": [list(i) for i in answers], "confidence": result.confidence,
                               "stage": result.method, "hit": bool(answers and relevant & set(answers[0])),
                               **scores}
            for key, value in result.usage.items():
                usage[key] = usage.get(key, 0) + value
            tick(1)
    seconds = time.perf_counter() - started
    metrics, per_query = measure_run(run, scored_qrels, rel, trec_measures)
    n = max(len(answered), 1)
    for key in ("precision", "recall", "F1"):
        metrics[f"answer {key}"] = sum(a[key] for a in answered.values()) / n
        for qid, a in answered.items():
            per_query.setdefault(qid, {})[f"answer {key}"] = a[key]
    if run_dir is not None:
        run_dir.mkdir(parents=True, exist_ok=True)
        write_trec_run(run, run_dir / f"{queryset.name}.{ASK}.run", tag=f"kqe-{ASK}")
    described = f"ask (sources {settings.qa.sources})"
    return MethodResult(ASK, metrics, per_query, seconds, run, usage or None, described, {}, answered)


def answer_set_scores(answers: list[tuple[str, ...]], gold: list[str], resolved: dict[str, list[str]]
                      ) -> dict[str, float]:
    """Precision, recall and F1 of one question's answer set: an answer is right when one of its nodes is a gold
    answer's; a gold answer is found when one of its nodes is answered (a gold id not in the KB is never found).

    >>> answer_set_scores([("n:a",), ("n:x",)], ["A", "B"], {"A": ["n:a"], "B": ["n:b"]})
    {'precision': 0.5, 'recall': 0.5, 'F1': 0.5}
    """
    wanted = {i for doc in gold for i in resolved.get(doc, ())}
    given = {i for nodes in answers for i in nodes}
    right = sum(1 for nodes in answers if wanted.intersection(nodes))
    found = sum(1 for doc in gold if given.intersection(resolved.get(doc, ())))
    precision = right / len(answers) if answers else 0.0
    recall = found / len(gold) if gold else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {"precision": precision, "recall": recall, "F1": f1}


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
                **({"answered": result.answered[q.qid]} if q.qid in result.answered else {}),
            }
