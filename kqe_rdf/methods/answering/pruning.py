"""From thousands of evidence sentences to the few an answer is read from (QUASAR's re-ranking and filtering).

1. BM25 over the evidence pool (an in-memory Tantivy index with English stemming)
   keeps the top ``qa_pool_size`` (1,000); pieces no query word matches follow,
   nearest hops first, until the pool is full.
2. Each round of ``qa_prune_stages`` (100, then 30) scores the pieces left by a
   weighted sum of three features, each scaled to [0, 1] within the round —
   BM25, dense similarity (MiniLM, the KB's encoder; only once at most
   ``qa_dense_depth`` pieces remain, since encoding 1,000 sentences costs about
   4 s on two cores) and entity overlap (1 for a piece naming a question entity,
   0.5 for one naming a node that two or more pieces kept by the previous round
   share: the bridge entities of multi-hop questions), plus answer-type match
   (1 for a piece naming a candidate of the intent's answer type: without it the
   facts next to the question entity crowd out the last hop of a multi-hop
   question) — and keeps the best k.
3. An extra scorer (an LLM, a cross-encoder: anything with
   ``score(question, evidence) -> list[float]``) can be plugged in as one more
   round over the final pieces; if it fails, the order stays and a note says so.

>>> pool = TextPool(["Kismet directed by William Dieterle", "Kismet release year 1944", "Alien has genre Horror"])
>>> [i for i, _ in pool.search("when was Kismet released", 10)]
[1, 0]
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from ...core.errors import KqeError
from ...kb.text_index import TextPool  # noqa: F401 - re-exported (a pool is built here and in evidence)
from .evidence import Evidence


class EvidenceScorer(Protocol):
    """A pluggable extra round: higher is better, one score per piece, in order."""

    name: str

    def score(self, question: str, evidence: Sequence[Evidence]) -> list[float]: ...


@dataclass
class Ranked:
    evidence: Evidence
    score: float
    features: dict[str, float] = field(default_factory=dict)

    def as_dict(self) -> dict:
        return {**self.evidence.as_dict(), "score": round(self.score, 4),
                "features": {k: round(v, 4) for k, v in self.features.items()}}


@dataclass
class Pruning:
    """Each stage's ranked pieces (``("pool", ...)``, ``("bm25", ...)``, ``("fusion@100", ...)`` …), best first."""

    stages: list[tuple[str, list[Ranked]]]
    notes: list[str] = field(default_factory=list)

    @property
    def final(self) -> list[Ranked]:
        return self.stages[-1][1] if self.stages else []

    def sizes(self) -> dict[str, int]:
        return {name: len(ranked) for name, ranked in self.stages}


def _scaled(values: Sequence[float]) -> list[float]:
    """Min-max to [0, 1]; all-equal values become 0 (they cannot tell pieces apart)."""
    if not values:
        return []
    low, high = min(values), max(values)
    return [0.0] * len(values) if high - low < 1e-12 else [(v - low) / (high - low) for v in values]


class Pruner:
    def __init__(self, kb, pool_size: int = 1000, stages: Sequence[int] = (100, 30), bm25_weight: float = 1.0,
                 dense_weight: float = 1.0, entity_weight: float = 1.0, dense_depth: int = 100,
                 extra: EvidenceScorer | None = None, extra_weight: float = 1.0, type_weight: float = 1.0,
                 prior_weight: float = 1.0) -> None:
        if any(b >= a for a, b in zip([pool_size, *stages], stages)):
            raise KqeError(f"pruning stages must shrink: pool {pool_size}, then {', '.join(map(str, stages))}")
        self.kb = kb
        self.pool_size = pool_size
        self.stages = list(stages)
        self.weights = {"bm25": bm25_weight, "dense": dense_weight, "entity": entity_weight, "type": type_weight,
                        "prior": prior_weight}
        self.dense_depth = dense_depth
        self.extra = extra
        self.extra_weight = extra_weight
        self._vectors: dict[str, np.ndarray] = {}

    def dense(self, question: str, texts: Sequence[str]) -> list[float]:
        missing = [t for t in dict.fromkeys(texts) if t not in self._vectors]
        if missing:
            if len(self._vectors) > 50_000:
                self._vectors.clear()
            for text, vector in zip(missing, self.kb.encoder.encode(missing)):
                self._vectors[text] = vector
        q = self.kb.embed_query(question)
        return [float(self._vectors[t] @ q) for t in texts]

    def run(self, question: str, seeds: Sequence[str], evidence: Sequence[Evidence],
            answer_like: Callable[[Evidence], bool] | None = None) -> Pruning:
        """``answer_like(piece)``: whether a piece names a candidate of the answer type (a fourth feature)."""
        pool = [Ranked(e, 0.0) for e in evidence]
        stages: list[tuple[str, list[Ranked]]] = [("pool", pool)]
        if not pool:
            return Pruning(stages)
        bm25 = TextPool([e.text for e in evidence]).scores(question)
        for r, s in zip(pool, bm25):
            r.features["bm25"] = s
        order = sorted(range(len(pool)), key=lambda i: (-bm25[i], pool[i].evidence.hop))
        current = [Ranked(pool[i].evidence, bm25[i], {"bm25": bm25[i]}) for i in order[: self.pool_size]]
        stages.append(("bm25", current))
        focus = {s: 1.0 for s in seeds}
        for k in self.stages:
            current = self._round(question, current, focus, answer_like)[:k]
            stages.append((f"fusion@{k}", current))
            shared = Counter(n for r in current for n in r.evidence.nodes)
            focus = {**{n: 0.5 for n, c in shared.items() if c >= 2}, **{s: 1.0 for s in seeds}}
        pruning = Pruning(stages)
        if self.extra is not None and current:
            self._extra_round(question, pruning)
        return pruning

    def _round(self, question: str, ranked: list[Ranked], focus: dict[str, float],
               answer_like: Callable[[Evidence], bool] | None) -> list[Ranked]:
        features = {"bm25": _scaled([r.features["bm25"] for r in ranked]),
                    "entity": [max((focus.get(n, 0.0) for n in r.evidence.nodes), default=0.0) for r in ranked]}
        if answer_like is not None and self.weights["type"]:
            features["type"] = [1.0 if answer_like(r.evidence) else 0.0 for r in ranked]
        if self.weights["prior"] and any(r.evidence.prior for r in ranked):
            features["prior"] = _scaled([r.evidence.prior or 0.0 for r in ranked])
        if len(ranked) <= self.dense_depth and self.weights["dense"]:
            features["dense"] = _scaled(self.dense(question, [r.evidence.text for r in ranked]))
        out = []
        for i, r in enumerate(ranked):
            values = {name: column[i] for name, column in features.items()}
            fused = sum(self.weights[name] * v for name, v in values.items())
            out.append(Ranked(r.evidence, fused, {**r.features, **{f"{n}_scaled": v for n, v in values.items()
                                                                    if n != "bm25"}, "bm25_scaled": values["bm25"]}))
        return sorted(out, key=lambda r: -r.score)

    def _extra_round(self, question: str, pruning: Pruning) -> None:
        final = pruning.final
        name = getattr(self.extra, "name", type(self.extra).__name__)
        try:
            scores = [float(s) for s in self.extra.score(question, [r.evidence for r in final])]
            if len(scores) != len(final):
                raise KqeError(f"gave {len(scores)} scores for {len(final)} pieces")
        except (KqeError, TypeError, ValueError) as exc:
            pruning.notes.append(f"extra scorer {name} failed ({exc}); order kept")
            return
        scaled = _scaled(scores)
        rescored = [Ranked(r.evidence, r.score + self.extra_weight * s, {**r.features, name: s})
                    for r, s in zip(final, scaled)]
        pruning.stages.append((f"{name}@{len(final)}", sorted(rescored, key=lambda r: -r.score)))
