"""Evaluation metrics: STaRK's (Hit@k, Recall@k, MRR) and TREC's (through ir_measures).

Runs and qrels cross module boundaries as lists of :class:`ScoredHit` /
:class:`Qrel` or as ``{qid: {doc_id: score_or_relevance}}`` dicts; both are
normalised by :func:`normalise_run` / :func:`normalise_qrels`.

Ordering within a query differs on purpose between the two families:

* STaRK metrics rank by score descending, ties broken by the given rank, then
  doc_id. Scores may be zero or negative; no hit is ever dropped. So only the
  order matters, never the sign or scale of the scores.
* TREC metrics go through ``ir_measures`` (pytrec_eval), which behaves like
  ``trec_eval``: it ignores the rank column and sorts by score descending,
  ties by doc_id *descending* (string order). That is needed to reproduce
  published TREC numbers; pass ``use_given_order=True`` to rank the STaRK way
  instead. Queries judged in the qrels but absent from the run score 0 (like
  ``trec_eval -c``); run queries without judgments are ignored.

>>> run = "q1 Q0 d2 1 -0.5 me\\nq1 Q0 d1 2 -0.9 me\\n"
>>> stark_metrics(read_trec_run(run), {"q1": {"d1": 1}})["MRR"]
0.5
"""

from __future__ import annotations

import gzip
import math
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import NamedTuple, Union

import ir_measures

from ..core.errors import InputError


class ScoredHit(NamedTuple):
    """One retrieved document for one query; ``rank`` counts from 0."""

    qid: str
    doc_id: str
    score: float
    rank: int


class Qrel(NamedTuple):
    """One relevance judgment; ``relevance`` > 0 means relevant at the default threshold."""

    qid: str
    doc_id: str
    relevance: int


RunLike = Union[Iterable[ScoredHit], Mapping[str, Mapping[str, float]]]
QrelsLike = Union[Iterable[Qrel], Mapping[str, Mapping[str, int]]]


# ---------------------------------------------------------------- reading files


def source_lines(source: str | Path) -> tuple[str, list[str]]:
    """(name for error messages, lines) of a file path or of inline text.

    A ``Path`` is always a file; a ``str`` containing a newline is inline text,
    any other ``str`` is a file path. ``.gz`` files are decompressed.
    """
    if isinstance(source, str) and "\n" in source:
        return "<text>", _split(source)
    path = Path(source)
    if not path.is_file():
        raise InputError("no such file (inline text must contain a newline)", str(path))
    try:
        data = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise InputError("not UTF-8 text; re-encode the file as UTF-8", f"{path}:{line}") from None
    except (OSError, EOFError) as exc:
        raise InputError(f"cannot read file ({exc})", str(path)) from None
    return str(path), _split(text)


def _split(text: str) -> list[str]:
    """Lines split at "\\n" only, so line numbers match what editors show."""
    lines = [line.rstrip("\r") for line in text.split("\n")]
    return lines[:-1] if lines and not lines[-1] else lines


def read_trec_run(source: str | Path) -> list[ScoredHit]:
    """Hits of a TREC run (``qid Q0 doc_id rank score tag``); file ranks are 1-based."""
    name, lines = source_lines(source)
    hits: list[ScoredHit] = []
    seen: set[tuple[str, str]] = set()
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        where = f"{name}:{number}"
        parts = line.split()
        if len(parts) != 6:
            raise InputError(f"expected 6 columns 'qid Q0 doc_id rank score tag', found {len(parts)}", where)
        qid, _, doc_id, rank, score, _tag = parts
        try:
            rank_value, score_value = int(rank), float(score)
        except ValueError:
            raise InputError(f"rank {rank!r} must be an integer and score {score!r} a number", where) from None
        if not math.isfinite(score_value):
            raise InputError(f"score {score!r} is not a finite number", where)
        if (qid, doc_id) in seen:
            raise InputError(f"document {doc_id!r} listed twice for query {qid!r}", where)
        seen.add((qid, doc_id))
        hits.append(ScoredHit(qid, doc_id, score_value, rank_value - 1))
    return hits


def write_trec_run(hits: RunLike, path: str | Path, tag: str) -> None:
    """Write a run in TREC format, each query in the order :func:`ranked` gives.

    trec_eval re-sorts by score (ties by doc_id descending), so a run with tied
    scores may be scored in a different order than the ranks written here.
    """
    if not tag or any(c.isspace() for c in tag):
        raise InputError(f"run tag {tag!r} must be one word")
    with open(path, "w", encoding="utf-8") as out:
        for qid, ranking in normalise_run(hits).items():
            for position, hit in enumerate(ranking, start=1):
                out.write(f"{qid} Q0 {hit.doc_id} {position} {hit.score!r} {tag}\n")


def read_trec_qrels(source: str | Path) -> list[Qrel]:
    """Judgments of a TREC qrels file (``qid iteration doc_id relevance``)."""
    name, lines = source_lines(source)
    qrels: list[Qrel] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        where = f"{name}:{number}"
        parts = line.split()
        if len(parts) != 4:
            raise InputError(f"expected 4 columns 'qid iteration doc_id relevance', found {len(parts)}", where)
        try:
            relevance = int(parts[3])
        except ValueError:
            raise InputError(f"relevance {parts[3]!r} must be an integer", where) from None
        qrels.append(Qrel(parts[0], parts[2], relevance))
    return qrels


# ---------------------------------------------------------------- normalising


def _sort_key(hit: ScoredHit) -> tuple[float, int, str]:
    return (-hit.score, hit.rank, hit.doc_id)


def ranked(hits: Iterable[ScoredHit]) -> list[ScoredHit]:
    """Hits of one query best first: score descending, then given rank, then doc_id."""
    return sorted(hits, key=_sort_key)


def normalise_run(run: RunLike) -> dict[str, list[ScoredHit]]:
    """``{qid: hits best first}`` from hits or ``{qid: {doc_id: score}}``.

    In the dict form a query's insertion order stands in for the rank, so equal
    scores keep the order they were given in.
    """
    grouped: dict[str, list[ScoredHit]] = {}
    if isinstance(run, Mapping):
        for qid, docs in run.items():
            grouped[str(qid)] = [ScoredHit(str(qid), str(d), float(s), i) for i, (d, s) in enumerate(docs.items())]
    else:
        for hit in run:
            qid = str(hit.qid)
            grouped.setdefault(qid, []).append(ScoredHit(qid, str(hit.doc_id), float(hit.score), int(hit.rank)))
    for qid, hits in grouped.items():
        seen: set[str] = set()
        for hit in hits:
            if hit.doc_id in seen:
                raise InputError(f"document {hit.doc_id!r} listed twice for query {qid!r}")
            if not math.isfinite(hit.score):
                raise InputError(f"score {hit.score!r} of document {hit.doc_id!r} for query {qid!r} is not finite")
            seen.add(hit.doc_id)
        grouped[qid] = ranked(hits)
    return grouped


def normalise_qrels(qrels: QrelsLike) -> dict[str, dict[str, int]]:
    """``{qid: {doc_id: relevance}}`` from judgments or an equivalent dict."""
    if isinstance(qrels, Mapping):
        return {str(q): {str(d): int(r) for d, r in docs.items()} for q, docs in qrels.items()}
    result: dict[str, dict[str, int]] = {}
    for judgment in qrels:
        result.setdefault(judgment.qid, {})[judgment.doc_id] = int(judgment.relevance)
    return result


# ---------------------------------------------------------------- STaRK metrics


def per_query_stark(
    run: RunLike,
    qrels: QrelsLike,
    hit_ks: Sequence[int] = (1, 5),
    recall_ks: Sequence[int] = (20,),
    rel: int = 1,
) -> dict[str, dict[str, float]]:
    """STaRK metrics of every query with at least one document of relevance >= ``rel``.

    Same definitions as snap-stanford/stark ``stark_qa/evaluator.py``: Hit@k is 1
    if any gold document is in the top k, Recall@k = |gold ∩ top k| / |gold|,
    MRR = 1 / (1-based rank of the first gold document), 0 if none is ranked.
    Queries missing from the run score 0 everywhere.
    """
    rankings = normalise_run(run)
    results: dict[str, dict[str, float]] = {}
    for qid, judged in normalise_qrels(qrels).items():
        gold = {doc for doc, relevance in judged.items() if relevance >= rel}
        if not gold:
            continue
        docs = [hit.doc_id for hit in rankings.get(qid, [])]
        scores: dict[str, float] = {}
        for k in hit_ks:
            scores[f"Hit@{k}"] = 1.0 if gold.intersection(docs[:k]) else 0.0
        for k in recall_ks:
            scores[f"Recall@{k}"] = len(gold.intersection(docs[:k])) / len(gold)
        first = next((i for i, doc in enumerate(docs) if doc in gold), None)
        scores["MRR"] = 0.0 if first is None else 1.0 / (first + 1)
        results[qid] = scores
    return results


def stark_metrics(
    run: RunLike,
    qrels: QrelsLike,
    hit_ks: Sequence[int] = (1, 5),
    recall_ks: Sequence[int] = (20,),
    rel: int = 1,
) -> dict[str, float]:
    """Means of :func:`per_query_stark` as fractions (0..1), e.g. ``{"Hit@1": 0.39, ...}``."""
    per_query = per_query_stark(run, qrels, hit_ks, recall_ks, rel)
    if not per_query:
        raise InputError(f"the qrels contain no query with a document of relevance >= {rel}")
    names = next(iter(per_query.values())).keys()
    return {name: sum(q[name] for q in per_query.values()) / len(per_query) for name in names}


# ---------------------------------------------------------------- TREC metrics

DEFAULT_TREC_MEASURES = ("nDCG@10", "AP", "R@100", "R@1000")


def parse_measures(measures: Sequence[str], rel: int = 1) -> list[ir_measures.Measure]:
    """ir_measures measures from names; ``rel`` fills in the threshold where a measure takes one.

    A threshold written in the name (``AP(rel=2)``) wins. TREC DL passage
    evaluation uses ``rel=2`` for AP and recall; nDCG uses the graded gains.
    """
    parsed = []
    for name in measures:
        try:
            measure = ir_measures.parse_measure(name)
        except (ValueError, NameError, SyntaxError) as exc:
            raise InputError(f"unknown measure {name!r} ({exc}); e.g. nDCG@10, AP(rel=2), R@1000, RR") from None
        if "rel" in measure.SUPPORTED_PARAMS and "rel" not in measure.params and rel != 1:
            measure = measure(rel=rel)
        parsed.append(measure)
    return parsed


def _trec_inputs(
    run: RunLike, qrels: QrelsLike, use_given_order: bool
) -> tuple[dict[str, dict[str, int]], dict[str, dict[str, float]]]:
    rankings = normalise_run(run)
    if use_given_order:  # strictly decreasing scores make trec_eval keep our order
        scored = {q: {h.doc_id: float(len(hits) - i) for i, h in enumerate(hits)} for q, hits in rankings.items()}
    else:
        scored = {q: {h.doc_id: h.score for h in hits} for q, hits in rankings.items()}
    return normalise_qrels(qrels), scored


def trec_metrics(
    run: RunLike,
    qrels: QrelsLike,
    measures: Sequence[str] = DEFAULT_TREC_MEASURES,
    rel: int = 1,
    use_given_order: bool = False,
) -> dict[str, float]:
    """Aggregate TREC measures, keyed by the measure's full name (e.g. ``"AP(rel=2)"``).

    Ties follow trec_eval (score descending, doc_id descending) unless
    ``use_given_order``; see the module docstring.
    """
    parsed = parse_measures(measures, rel)
    judged, scored = _trec_inputs(run, qrels, use_given_order)
    values = ir_measures.calc_aggregate(parsed, judged, scored)
    return {str(m): float(values[m]) for m in parsed}


def per_query_trec(
    run: RunLike,
    qrels: QrelsLike,
    measures: Sequence[str] = DEFAULT_TREC_MEASURES,
    rel: int = 1,
    use_given_order: bool = False,
) -> dict[str, dict[str, float]]:
    """``{qid: {measure name: value}}`` for every judged query, as :func:`trec_metrics` averages them."""
    parsed = parse_measures(measures, rel)
    judged, scored = _trec_inputs(run, qrels, use_given_order)
    results: dict[str, dict[str, float]] = {}
    for metric in ir_measures.iter_calc(parsed, judged, scored):
        results.setdefault(metric.query_id, {})[str(metric.measure)] = float(metric.value)
    return results
