"""Fitting a KB's hybrid weight on a query set with gold answers (``kqe-rdf kb tune-fusion``).

A hybrid should never rank worse than the better of BM25 and dense, and which is better depends on the KB and
its requests (on SciFact both are close; on a phenopacket list the encoder is far behind). So BM25 and dense
each rank the set once, and every weight of a grid (BM25's share 0, 0.05, ..., 1) and both normalisations fuse
those lists exactly as ``hybrid`` does (:func:`~kqe_rdf.methods.retrieval.convex`); the one with the best mean
of the chosen measure is kept in the KB's manifest, where ``hybrid`` finds it. The grid's ends are BM25 alone
and dense alone, so on the fitting queries the fitted hybrid is at least the better side.

Of equally good weights the middle one is kept (the median of those that tie, min-max before z-score): a
plateau of weights that all rank the fitting queries alike is most often the mark of one side that decides,
and its middle keeps a margin on both of its edges.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from ..core.errors import KqeError
from ..core.progress import Progress
from ..methods.retrieval import BM25, NORMALISATIONS, Batch, Dense, Hit, Query, convex, ranking
from .metrics import ScoredHit
from .querysets import QuerySet
from .runner import STARK, counting_absent, gold_qrels, measure_run

#: BM25's shares tried: 0 (dense alone) to 1 (BM25 alone) by 0.05.
GRID = tuple(round(i / 20, 2) for i in range(21))
#: The measures a weight can be fitted for: STaRK's and nDCG@10.
MEASURES = (*STARK, "nDCG@10")


def fit_fusion(kb, queryset: QuerySet, settings, measure: str = "nDCG@10", types: Sequence[str] | None = None,
               rel: int = 1, depth: int = 100, progress: Progress | None = None) -> dict:
    """The weight and normalisation with the best mean ``measure`` on ``queryset``, and the whole grid, as the
    manifest keeps it (``fusion``)."""
    if measure not in MEASURES:
        raise KqeError(f"cannot fit for {measure!r}: choose one of {', '.join(MEASURES)}")
    if not kb.has_embeddings:
        raise KqeError(f"{kb.path} has no dense index to fuse with BM25; run `kqe-rdf kb embed --kb {kb.path}` first")
    progress = progress or Progress.quiet()
    qrels, _missing = gold_qrels(kb, queryset)
    scored_qrels = counting_absent(qrels, rel)
    queries = [Query(q.qid, q.text) for q in queryset]
    side = max(settings.hybrid.depth, depth)
    sides = [BM25(kb, side, types), Dense(kb, side, types)]
    lists: dict[str, list[list[Hit]]] = {q.qid: [] for q in queries}
    started = time.perf_counter()
    for stage, name in zip(sides, ("bm25", "dense")):
        with progress.task(f"{name} on {queryset.name}", total=len(queries), unit="queries") as tick:
            for start in range(0, len(queries), 32):
                out = stage(Batch(queries[start : start + 32]))
                for q in out.queries:
                    lists[q.qid].append(out.ranked(q.qid))
                tick(len(out.queries))
    grid: dict[str, dict[str, float]] = {}
    trec = ("nDCG@10",) if measure == "nDCG@10" else ()
    for how in NORMALISATIONS:
        grid[how] = {}
        for w in GRID:
            run = []
            for q in queries:
                fused = ranking(q.qid, list(convex(lists[q.qid], [w, 1.0 - w], how).items()))[:depth]
                run += [ScoredHit(h.qid, h.iri, h.score, h.rank - 1) for h in fused]
            metrics, _ = measure_run(run, scored_qrels, rel, trec)
            grid[how][f"{w:.2f}"] = round(metrics[measure], 6)
    best_how, best_w = best_of(grid)
    return {
        "bm25_weight": best_w, "normalisation": best_how, "measure": measure, "queryset": queryset.name,
        "queries": len(queries), "rel": rel, "depth": depth, "types": sorted(types) if types else None,
        "fitted": grid[best_how][f"{best_w:.2f}"], "bm25": grid["minmax"]["1.00"], "dense": grid["minmax"]["0.00"],
        "grid": grid, "seconds": round(time.perf_counter() - started, 2),
        "documents_sha256": kb.manifest.get("documents_sha256"),
        "model_id": (kb.manifest.get("embeddings") or {}).get("model_id"),
    }


def best_of(grid: dict[str, dict[str, float]]) -> tuple[str, float]:
    """The normalisation and weight with the best value; of ties, the middle weight.

    >>> best_of({"minmax": {"0.00": 0.2, "0.50": 0.5, "0.75": 0.5, "1.00": 0.5}, "zscore": {"0.00": 0.2}})
    ('minmax', 0.75)
    """
    top = max(v for values in grid.values() for v in values.values())
    for how in sorted(grid, key=lambda h: h != "minmax"):
        tied = sorted(float(w) for w, v in grid[how].items() if v >= top - 1e-9)
        if tied:
            return how, tied[len(tied) // 2]
    raise KqeError("an empty grid")
