"""Retrieval stages with one protocol, composable into pipelines.

Every stage has one method, ``transform(batch) -> batch``: a batch holds the
queries and, after the first stage, a ranked list of hits per query. Stages
compose like PyTerrier's: ``a >> b`` runs b on a's output, ``a + b`` fuses
both rankings by reciprocal rank fusion, ``a % 20`` keeps the top 20. Ranks
count from 1, as ``kqe-rdf search`` shows them; ``stage.search(text)`` gives
one query's hits with their nodes' names, ``stage.run(text)`` the whole
:class:`Batch` (``.to_dataframe()`` with pandas installed). ``stage.later(batch)``
starts what can run beside the caller's own work (a BM25 search, in the text
index's worker thread) and returns the call that finishes the batch.

>>> Cutoff(1).transform(Batch([Query("q1", "x")], {"q1": [Hit("q1", "a", 2.0, 1), Hit("q1", "b", 1.0, 2)]})).hits["q1"]
[Hit(qid='q1', iri='a', score=2.0, rank=1, name='')]
"""

from __future__ import annotations

import copy
import re
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from ..core.errors import KqeError
from ..kb.documents import template_labels, without_template
from ..kb.linking import normalise_name
from ..kb.ontology import local_name
from ..kb.words import STOPWORDS, terms  # noqa: F401 - STOPWORDS re-exported


class Query(NamedTuple):
    """One request of a batch: its id (the key of its hits) and its text."""

    qid: str
    text: str


class Hit(NamedTuple):
    """One ranked node for one query; ``rank`` counts from 1, ``name`` is filled by ``search``/``run``."""

    qid: str
    iri: str
    score: float
    rank: int
    name: str = ""


#: The columns of :meth:`Batch.to_dataframe`, PyTerrier's result shape with the node's IRI and name.
COLUMNS = ("qid", "query", "iri", "name", "score", "rank")


@dataclass
class Batch:
    """What stages pass on: the queries and, per query id, its ranked hits.

    ``stage.transform(Batch([Query("q1", "seizures"), Query("q2", "long fingers")]))`` ranks several at once."""

    queries: list[Query]
    hits: dict[str, list[Hit]] = field(default_factory=dict)
    #: Per query, how a stage reached its results (triplets, SPARQL, bindings), for ``--explain``.
    explain: dict[str, dict] = field(default_factory=dict)

    def ranked(self, qid: str) -> list[Hit]:
        return self.hits.get(qid, [])

    def to_dataframe(self):
        """One row per hit with the :data:`COLUMNS`, as a pandas DataFrame (pandas is optional: install it, or
        ``pip install 'kqe-rdf[dataframe]'``)."""
        try:
            import pandas
        except ImportError:
            raise KqeError("to_dataframe() needs pandas, which is not installed: pip install pandas "
                           "(or pip install 'kqe-rdf[dataframe]')") from None
        rows = [(q.qid, q.text, h.iri, h.name, h.score, h.rank) for q in self.queries for h in self.ranked(q.qid)]
        return pandas.DataFrame(rows, columns=list(COLUMNS))


def ranking(qid: str, scored: Sequence[tuple[str, float]]) -> list[Hit]:
    """Hits ranked by score (desc), ties by IRI, so equal scores never reorder between runs; ranks from 1."""
    ordered = sorted(scored, key=lambda p: (-p[1], p[0]))
    return [Hit(qid, iri, float(score), rank) for rank, (iri, score) in enumerate(ordered, start=1)]


def reciprocal_rank(rankings: Sequence[Sequence[Hit]], constant: int = 60) -> Counter:
    """Reciprocal rank fusion (Cormack et al. 2009): Σ 1/(constant + rank) per node over ``rankings``."""
    fused: Counter = Counter()
    for hits in rankings:
        for hit in hits:
            fused[hit.iri] += 1.0 / (constant + hit.rank)
    return fused


class Stage:
    """Base of every retrieval stage."""

    def transform(self, batch: Batch) -> Batch:
        raise NotImplementedError

    def __call__(self, batch: Batch) -> Batch:
        if not isinstance(batch, Batch):
            raise TypeError(f"transform() takes a Batch, not {type(batch).__name__}; use .search(text) for one query")
        return self.transform(batch)

    def later(self, batch: Batch) -> Callable[[], Batch]:
        """``transform(batch)`` as a call to make later, having started what can run meanwhile beside the
        caller's own work (a BM25 search, in the text index's worker thread). Most stages start nothing."""
        return lambda: self(batch)

    def search(self, text: str, qid: str = "q", names: bool = True) -> list[Hit]:
        """One query's hits, best first, with their nodes' names (``names=False``: without, for stages built on
        this one, which need only the ranking)."""
        return self.run(text, qid, names).ranked(qid)

    def run(self, text: str, qid: str = "q", names: bool = True) -> Batch:
        """One query through the stage, keeping the explanation; hits carry their nodes' names unless ``names``
        is False."""
        if not text or not text.strip():
            raise KqeError("the query is empty: give some words to search for")
        batch = self(Batch([Query(qid, text)]))
        return self.named(batch) if names else batch

    def named(self, batch: Batch) -> Batch:
        """``batch`` with each hit's node name, read from the KB the stage searches (ranking needs no names, so
        stages leave them out and results for people get them here)."""
        kb = knowledge_base(self)
        if kb is None:
            return batch
        hits = {qid: [h._replace(name=h.name or kb.name(h.iri)) for h in ranked]
                for qid, ranked in batch.hits.items()}
        return Batch(batch.queries, hits, batch.explain)

    def __rshift__(self, other: Stage) -> Stage:
        return Pipeline([self, other])

    def __add__(self, other: Stage) -> Stage:
        return RRFusion([self, other])

    def __mod__(self, k: int) -> Stage:
        return Pipeline([self.with_depth(k) or self, Cutoff(k)])

    def with_depth(self, k: int) -> Stage | None:
        """A copy that ranks only ``k`` results itself, for stages that can (retrievers absorb cut-offs)."""
        if not hasattr(self, "k"):
            return None
        clone = copy.copy(self)
        clone.k = min(self.k, k)
        return clone


def knowledge_base(stage: Stage):
    """The KB a stage searches: its own, or that of the first of its parts that has one (None for neither)."""
    if getattr(stage, "kb", None) is not None:
        return stage.kb
    for part in getattr(stage, "stages", ()):
        if (kb := knowledge_base(part)) is not None:
            return kb
    return None


class ResultRules(Stage):
    """What the results of every registered method obey, whatever ranked them (:func:`~kqe_rdf.methods.registry
    .pipeline` puts this around each method's stage):

    - a node whose name or alias is the request, folded as names are (case, accents, punctuation, a plural), is
      the first result: "long slender fingers" is Arachnodactyly's alias, so Arachnodactyly comes first whether the
      method ranked it fifth or not at all (of the requested types, when the search has some);
    - the root of one of the KB's class hierarchies (HPO's "All") is never a result: it is above every term of its
      hierarchy, so it fits every request about it and answers none;
    - every hit carries its node's name, through ``transform`` as through ``search`` and ``run``.

    The explanation says when the first two changed a list (``result rules``). Any other attribute is the
    method's own stage's (``pipeline("4step", ...).reading(text)``, ``.llm``)."""

    def __init__(self, stage: Stage, kb, k: int, types: Sequence[str] | None = None) -> None:
        self.inner = stage
        self.stages = [stage]
        self.kb = kb
        self.k = k
        self.types = kb.resolve_types(types) if types else None

    def __getattr__(self, name: str):
        if name.startswith("__") or "inner" not in self.__dict__:
            raise AttributeError(name)
        return getattr(self.inner, name)

    def __repr__(self) -> str:
        return repr(self.inner)

    def with_depth(self, k: int) -> Stage | None:
        clone = copy.copy(self)
        clone.inner = self.inner.with_depth(k) or self.inner
        clone.stages = [clone.inner]
        clone.k = min(self.k, k)
        return clone

    def transform(self, batch: Batch) -> Batch:
        out = self.inner(batch)
        hits, explain = {}, dict(out.explain)
        for query in out.queries:
            ranked, changed = self.apply(query, out.ranked(query.qid))
            hits[query.qid] = [h._replace(name=h.name or self._name(h.iri)) for h in ranked]
            if changed:
                explain[query.qid] = {**explain.get(query.qid, {}), "result rules": changed}
        return Batch(out.queries, hits, explain)

    def apply(self, query: Query, ranked: list[Hit]) -> tuple[list[Hit], dict]:
        """``ranked`` with the request's namesakes first and without hierarchy roots, ranks from 1; what changed."""
        named = self.namesakes(query.text)
        roots = self.kb.hierarchies.roots() if ranked or named else frozenset()
        named = [i for i in named if i not in roots]
        dropped = [h.iri for h in ranked if h.iri in roots]
        if not named and not dropped:
            return ranked, {}
        first = set(named)
        kept = [h for h in ranked if h.iri not in roots and h.iri not in first]
        top = max((h.score for h in ranked), default=0.0)
        order = {h.iri: n for n, h in enumerate(ranked)}
        named.sort(key=lambda i: (order.get(i, len(order)), i))  # in the method's order; unranked ones after
        promoted = [Hit(query.qid, iri, top + len(named) - n, 0) for n, iri in enumerate(named)]
        out = [h._replace(rank=rank) for rank, h in enumerate([*promoted, *kept][: self.k], start=1)]
        changed = {}
        if named:
            changed["named by the request"] = named
        if dropped:
            changed["hierarchy roots left out"] = dropped
        return out, changed

    def namesakes(self, text: str) -> list[str]:
        """Nodes (of the search's types) whose name or alias is ``text``, folded as names are."""
        key = normalise_name(text)
        if not key or key.count(" ") >= NAME_WORDS:
            return []
        return self.kb.names.nodes(key, self.types)

    def _name(self, iri: str) -> str:
        try:
            return self.kb.name(iri)
        except KqeError:
            return ""


#: Requests of this many words or more are never looked up as a node's name (no name is that long).
NAME_WORDS = 24


class Pipeline(Stage):
    def __init__(self, stages: Sequence[Stage]) -> None:
        self.stages: list[Stage] = []
        for s in stages:
            self.stages += s.stages if isinstance(s, Pipeline) else [s]

    def transform(self, batch: Batch) -> Batch:
        for stage in self.stages:
            batch = stage(batch)
        return batch

    def later(self, batch: Batch) -> Callable[[], Batch]:
        first = self.stages[0].later(batch)
        return lambda: Pipeline(self.stages[1:])(first())

    def __repr__(self) -> str:
        # A cut-off reads as PyTerrier writes it: "(BM25 + Dense) % 10", not "... >> % 10".
        out = ""
        for stage in self.stages:
            out += f" {stage!r}" if isinstance(stage, Cutoff) else (" >> " if out else "") + repr(stage)
        return out


class Cutoff(Stage):
    def __init__(self, k: int) -> None:
        self.k = k

    def transform(self, batch: Batch) -> Batch:
        return Batch(batch.queries, {q: hits[: self.k] for q, hits in batch.hits.items()}, batch.explain)

    def __repr__(self) -> str:
        return f"% {self.k}"


class Fusion(Stage):
    """What every fusion of rankings shares: its parts run on the same batch (a BM25 part in the text index's
    worker thread, the others meanwhile in the caller), then :meth:`fuse` makes one ranking per query of
    their lists, each cut at ``depth``."""

    def __init__(self, stages: Sequence[Stage], depth: int | None = None) -> None:
        self.stages = list(stages)
        self.depth = depth

    def transform(self, batch: Batch) -> Batch:
        return self.later(batch)()

    def later(self, batch: Batch) -> Callable[[], Batch]:
        # BM25 searches in the text index's worker thread while the other stages run in the caller (a hybrid's
        # encoder and dense search): each stage sees only the batch, so the lists are those of one after another.
        started = [s.later(Batch(batch.queries, dict(batch.hits))) if isinstance(s, BM25) else None
                   for s in self.stages]

        def fused() -> Batch:
            here = [s(Batch(batch.queries, dict(batch.hits))) if f is None else None
                    for s, f in zip(self.stages, started)]
            outs = [out if f is None else f() for out, f in zip(here, started)]
            hits, explain = {}, {}
            for q in batch.queries:
                lists = [out.ranked(q.qid)[: self.depth] for out in outs]
                scores, how = self.fuse(q, lists, [out.explain.get(q.qid, {}) for out in outs])
                hits[q.qid] = ranking(q.qid, list(scores.items()))
                if how:
                    explain[q.qid] = how
            return Batch(batch.queries, hits, explain)
        return fused

    def fuse(self, query: Query, lists: list[list[Hit]], explained: list[dict]) -> tuple[dict[str, float], dict]:
        """One query's fused scores by node, and what to show of the fusion under ``--explain`` ({}: nothing)."""
        raise NotImplementedError


class RRFusion(Fusion):
    """Reciprocal rank fusion (Cormack et al. 2009): score = Σ 1/(k + rank), ranks from 1."""

    def __init__(self, stages: Sequence[Stage], k: int = 60, depth: int | None = None) -> None:
        super().__init__(stages, depth)
        self.constant = k  # the RRF constant, not a result count

    def fuse(self, query, lists, explained):
        return reciprocal_rank(lists, self.constant), {}

    def __repr__(self) -> str:
        return "(" + " + ".join(map(repr, self.stages)) + ")"


#: How :class:`ScoreFusion` puts each side's scores on one scale before weighing them.
NORMALISATIONS = ("minmax", "zscore")


def normalised(hits: Sequence[Hit], how: str) -> dict[str, float]:
    """A list's scores on a common scale: ``minmax`` maps its best to 1 and its last to 0; ``zscore`` subtracts
    the list's mean and divides by its deviation. A node absent from the list gets the list's floor (0, or the
    lowest z) from :func:`floor_of`, as if ranked just below it.

    >>> normalised([Hit("q", "a", 8.0, 1), Hit("q", "b", 6.0, 2), Hit("q", "c", 4.0, 3)], "minmax")
    {'a': 1.0, 'b': 0.5, 'c': 0.0}
    """
    if not hits:
        return {}
    scores = np.array([h.score for h in hits], dtype=np.float64)
    if how == "zscore":
        spread = scores.std()
        scaled = (scores - scores.mean()) / spread if spread > 0 else np.zeros_like(scores)
    else:
        spread = scores.max() - scores.min()
        scaled = (scores - scores.min()) / spread if spread > 0 else np.ones_like(scores)
    return {h.iri: float(v) for h, v in zip(hits, scaled)}


def floor_of(scaled: dict[str, float]) -> float:
    """The normalised score a node missing from a list gets: the list's lowest (0 for an empty list)."""
    return min(scaled.values(), default=0.0)


def convex(lists: Sequence[Sequence[Hit]], weights: Sequence[float], how: str) -> dict[str, float]:
    """Σ weight · normalised score over the lists, for every node in any of them (:func:`normalised`).

    >>> a, b = [Hit("q", "x", 3.0, 1), Hit("q", "y", 1.0, 2)], [Hit("q", "y", 0.9, 1), Hit("q", "z", 0.1, 2)]
    >>> convex([a, b], [0.75, 0.25], "minmax")
    {'x': 0.75, 'y': 0.25, 'z': 0.0}
    """
    scaled = [normalised(hits, how) for hits in lists]
    nodes = dict.fromkeys(h.iri for hits in lists for h in hits)
    fused = dict.fromkeys(nodes, 0.0)
    for w, side in zip(weights, scaled):
        floor = floor_of(side)
        for iri in nodes:
            fused[iri] += w * side.get(iri, floor)
    return fused


@dataclass(frozen=True)
class FusionWeight:
    """BM25's share of a two-sided fusion and where it came from: ``fitted`` (a KB's weight, fitted on a query set
    by ``kqe-rdf kb tune-fusion`` and kept in its manifest), ``setting`` (``hybrid_weight``), or None: weighed
    per request from how far each side's best scores stand out (:meth:`ScoreFusion.request_weight`)."""

    bm25: float | None = None
    source: str = "request"
    normalisation: str = "minmax"
    note: str = ""


class ScoreFusion(Fusion):
    """Convex combination of two normalised rankings: ``w · norm(first) + (1 − w) · norm(second)``.

    A fusion should never be below the better of its sides, which reciprocal rank fusion cannot promise: it
    weighs a weak side as much as a strong one. Here ``w`` is a KB's fitted weight when it has one, the
    ``hybrid_weight`` setting when set, and otherwise weighed per request: a side counts by its confidence, the
    ``confidence`` its stage reports in its explanation (a dense side: how far its best cosine stands above
    chance, :meth:`Dense.confidence`), 1 for a side that found something and reports none, 0 for a side that
    found nothing. ``--explain`` shows the weights and why."""

    def __init__(self, stages: Sequence[Stage], weight: FusionWeight, depth: int | None = None) -> None:
        if len(stages) != 2:
            raise KqeError(f"a score fusion weighs two rankings, not {len(stages)}; fuse more with RRFusion (a + b)")
        super().__init__(stages, depth)
        self.weight = weight

    def fuse(self, query, lists, explained):
        w = self.weight.bm25
        confidences = None
        if w is None:
            w, confidences = self.request_weight(lists, explained)
        scores = convex(lists, [w, 1.0 - w], self.weight.normalisation)
        names = [repr(s).split("(")[0] for s in self.stages]
        top = [{h.iri for h in hits[:10]} for hits in lists]
        how = {"weights": {names[0]: round(w, 4), names[1]: round(1.0 - w, 4)},
               "normalisation": self.weight.normalisation, "weighed by": self.weight.source,
               "agreement": round(len(top[0] & top[1]) / 10, 2)}
        if self.weight.note:
            how["note"] = self.weight.note
        if confidences is not None:
            how["confidence"] = {n: round(c, 4) for n, c in zip(names, confidences)}
            how["margins"] = {n: e["margin"] for n, e in zip(names, explained) if "margin" in e}
        return scores, {"fusion": how}

    @staticmethod
    def request_weight(lists: list[list[Hit]], explained: list[dict]) -> tuple[float, list[float]]:
        """The first side's share when no weight was fitted or set: the sides' confidences, normalised to sum 1
        (an even split when neither has any)."""
        confidences = [float(e.get("confidence", 1.0)) if hits else 0.0 for hits, e in zip(lists, explained)]
        total = sum(confidences)
        return (confidences[0] / total if total > 0 else 0.5), confidences

    def __repr__(self) -> str:
        return f"ScoreFusion({', '.join(map(repr, self.stages))})"


class BM25(Stage):
    """Tantivy BM25 over node documents; ``types`` restricts to nodes of those classes."""

    def __init__(self, kb, k: int = 100, types: Sequence[str] | None = None) -> None:
        self.kb = kb
        self.k = k
        self.types = sorted(kb.resolve_types(types)) if types else None

    def transform(self, batch: Batch) -> Batch:
        index = self.kb.text_index
        return Batch(batch.queries, {q.qid: ranking(q.qid, index.search(q.text, self.k, self.types)) for q in batch.queries})

    def later(self, batch: Batch) -> Callable[[], Batch]:
        """:meth:`transform` started in the text index's worker thread; calling the result waits for the batch."""
        index = self.kb.text_index
        started = [(q.qid, index.search_later(q.text, self.k, self.types)) for q in batch.queries]
        return lambda: Batch(batch.queries, {qid: ranking(qid, f.result()) for qid, f in started})

    def weighted(self, weights: Mapping[str, float], qid: str = "q") -> list[Hit]:
        """The hits of a bag of words that counts (``TextIndex.search_weighted``): an expansion's query."""
        return ranking(qid, self.kb.text_index.search_weighted(weights, self.k, self.types))

    def __repr__(self) -> str:
        return f"BM25(k={self.k})"


class Dense(Stage):
    """Cosine top-k over the KB's node embeddings: exact, or through the HNSW index from ``dense_ann_threshold``
    embedded nodes on (kqe_rdf/kb/ann.py). With ``confidence``, each query's explanation says how far its best
    cosine stands above chance (:meth:`confidence`), which a :class:`ScoreFusion` weighs it by."""

    def __init__(self, kb, k: int = 100, types: Sequence[str] | None = None, confidence: bool = False) -> None:
        self.kb = kb
        self.k = k
        self.mask = kb.dense.type_mask(kb.resolve_types(types)) if types else None
        self.report_confidence = confidence

    def transform(self, batch: Batch) -> Batch:
        if len(batch.queries) == 1:  # single queries share the KB's cache with other stages
            vectors = self.kb.embed_query(batch.queries[0].text)[None, :]
        else:
            vectors = self.kb.encoder.encode([q.text for q in batch.queries])
        results = self.kb.dense.search(vectors, self.k, self.mask)
        explain = {}
        if self.report_confidence:
            explain = {q.qid: self.confidence(v, r) for q, v, r in zip(batch.queries, vectors, results) if r}
        return Batch(batch.queries, {q.qid: ranking(q.qid, r) for q, r in zip(batch.queries, results)}, explain)

    def confidence(self, vector: np.ndarray, ranked: list[tuple[str, float]]) -> dict:
        """How far the best cosine stands above the query's cosines to a fixed sample of the searched nodes (512), in
        standard deviations (``z``), against the best that chance gives among that many nodes (``chance``,
        √(2 ln n), the expected maximum of n normal draws); ``confidence`` is the excess over chance, scaled to
        [0, 1] by :data:`CONFIDENT_EXCESS`. Vectors that say nothing of the query (random ones) stay at chance
        (confidence 0); a real encoder's best match stands several deviations above it."""
        mean, spread, searched = self.kb.dense.chance(vector, self.mask)
        z = (ranked[0][1] - mean) / spread if spread > 0 else 0.0
        chance = float(np.sqrt(2 * np.log(max(searched, 2))))
        excess = min(max((z - chance) / CONFIDENT_EXCESS, 0.0), 1.0)
        return {"confidence": excess, "margin": {"z": round(z, 2), "chance": round(chance, 2)}}

    def __repr__(self) -> str:
        return f"Dense(k={self.k})"


#: Standard deviations above chance at which a dense side's best match counts as fully confident
#: (:meth:`Dense.confidence`).
CONFIDENT_EXCESS = 2.0


class RM3(Stage):
    """RM3 pseudo-relevance feedback on BM25 (Abdul-Jaleel et al. 2004).

    The top ``fb_docs`` documents of a first BM25 pass give a relevance model
    P(w|R) ∝ Σ_d P(w|d)·P(d|q) (P(d|q) from softmax-normalised BM25 scores);
    its top ``fb_terms`` words are mixed with the query, ``original_weight`` on
    the query's own words, and the mixture is run as a weighted BM25 query.
    """

    def __init__(self, kb, k: int = 100, types: Sequence[str] | None = None, fb_docs: int = 10,
                 fb_terms: int = 10, original_weight: float = 0.5) -> None:
        self.first = BM25(kb, fb_docs, types)
        self.kb = kb
        self.k = k
        self.types = self.first.types
        self.fb_docs, self.fb_terms, self.original_weight = fb_docs, fb_terms, original_weight
        #: The documents' field labels, whose words feedback leaves out (every document of a class has them).
        self.template = template_labels(kb.schema, kb.manifest.get("text_properties", ()))

    def expansion(self, text: str) -> dict[str, float]:
        index = self.kb.text_index
        feedback = index.search(text, self.fb_docs, self.types)
        query_terms = Counter(terms(text))
        if not feedback or not query_terms:
            return {t: c / max(sum(query_terms.values()), 1) for t, c in query_terms.items()}
        top = max(s for _, s in feedback)
        weights = np.exp(np.array([s - top for _, s in feedback]))
        weights /= weights.sum()
        model: Counter = Counter()
        for (iri, _), w in zip(feedback, weights):
            doc = index.document(iri)
            words = Counter(terms(without_template(str(doc["text"]), self.template) if doc else ""))
            total = sum(words.values()) or 1
            for word, n in words.items():
                model[word] += w * n / total
        expansion = dict(model.most_common(self.fb_terms))
        norm = sum(expansion.values()) or 1.0
        qnorm = sum(query_terms.values())
        mixed: Counter = Counter()
        for t, c in query_terms.items():
            mixed[t] += self.original_weight * c / qnorm
        for t, v in expansion.items():
            mixed[t] += (1 - self.original_weight) * v / norm
        return dict(mixed)

    def transform(self, batch: Batch) -> Batch:
        index = self.kb.text_index
        out = {}
        for q in batch.queries:
            weighted = self.expansion(q.text)
            source = " ".join(f"{t}^{w:.4f}" for t, w in sorted(weighted.items(), key=lambda x: -x[1]) if w > 0)
            out[q.qid] = ranking(q.qid, index.search(source, self.k, self.types, raw=True)) if source else []
        return Batch(batch.queries, out)

    def __repr__(self) -> str:
        return f"RM3(fb_docs={self.fb_docs}, fb_terms={self.fb_terms})"


#: The fields of a node's document that describe it, in the order one is taken for a result's one sentence.
DESCRIBING = ("definition", "description", "abstract", "summary", "text", "comment")
_FIELD = re.compile(r"^([\w ]{1,40}): (.*)$")
_SENTENCE_END = re.compile(r"(?<=[a-z0-9)\]][.!?])\s+(?=[A-Z(])")


def first_sentence(text: str, longest: int = 240) -> str:
    """The first sentence of what a node's document says it is (its definition, description, ... ; else its first
    field past its name, type and aliases), cut at ``longest`` characters: a result's readable line.

    >>> first_sentence("name: Seizure\\ntype: phenotype\\ndefinition: A seizure is an abnormality. It is brief.")
    'A seizure is an abnormality.'
    >>> first_sentence("name: Tripod\\ntype: product\\nbrand: Manfrotto")
    'brand: Manfrotto'
    """
    fields, rest = {}, []
    for line in text.splitlines():
        found = _FIELD.match(line)
        if found and found.group(1).lower() not in fields:
            fields[found.group(1).lower()] = found.group(2)
        if not found or found.group(1).lower() not in ("name", "type", "aliases"):
            rest.append(line)
    chosen = next((fields[f] for f in DESCRIBING if fields.get(f)), None) or next(iter(rest), "")
    sentence = _SENTENCE_END.split(chosen.strip(), 1)[0]
    return sentence if len(sentence) <= longest else sentence[: longest - 1].rsplit(" ", 1)[0] + "…"


def fillers(explain: dict | None, hits) -> set[str] | None:
    """The hits a structural method topped up from its fallback search (``--explain``: "4 topped up"), not
    answers of its reading; None for a method that reads nothing (BM25, dense, ...).

    A structural method's explanation lists the support of its answers (the first 20); the fillers rank below
    them all, so when more than 20 answers leave room for fillers, the last ``topped_up`` hits are the fillers.
    """
    if not explain or "candidates" not in explain:
        return None
    count = explain.get("topped_up", 0)
    if not count:
        return set()
    support = explain.get("support", {})
    if len(support) < 20:
        return {hit.iri for hit in hits if hit.iri not in support}
    return {hit.iri for hit in sorted(hits, key=lambda h: h.rank)[-count:]}


def result_rows(kb, hits, explain: dict | None = None) -> list[dict]:
    """What a person or a program needs to know of each hit (``kqe-rdf search`` and ``/search`` show these); its
    classes by the names ``--type`` takes ("Disease"); for a structural method, whether the hit is an answer
    of its reading or a ``filler`` from its fallback search."""
    rows = []
    topped = fillers(explain, hits)
    values = (explain or {}).get("value", {}).get("values", {})
    for hit in hits:
        if hit.iri in values:  # a value the request asked for ("when was X born"): the literal, typed, and its node
            value = values[hit.iri]
            counted = explain["value"].get("counted")
            said = (f"{kb.name(value['of'])} {explain['value']['phrase']} {value['value']}" if counted is None else
                    f"{value['value']} answers: " + ", ".join(kb.name(n) for n in counted[:10]))
            rows.append({"rank": hit.rank, "iri": hit.iri, "id": hit.iri, "name": value["value"],
                         "value": value["value"], "datatype": value["datatype"], "of": value["of"], "types": [],
                         "score": round(hit.score, 4), "snippet": said,
                         "fact": {"of": value["of"], "of_name": kb.name(value["of"]),
                                  "relation": explain["value"]["phrase"]} if counted is None else None,
                         **({"counted": counted} if counted is not None else {})})
            continue
        doc = kb.document(hit.iri)
        rows.append({"rank": hit.rank, "iri": hit.iri, "id": doc.identifier, "name": doc.name,
                     "types": [kb.class_names.get(t, local_name(t)) for t in doc.types], "score": round(hit.score, 4),
                     "snippet": doc.text[:200], "description": first_sentence(doc.text)})
        if topped is not None:
            rows[-1]["filler"] = hit.iri in topped
    return rows


def bm25(kb, settings, k, types):
    return BM25(kb, k, types)


def dense(kb, settings, k, types):
    return Dense(kb, k, types)


def hybrid(kb, settings, k, types):
    """BM25 and dense, their normalised scores weighed by :func:`fusion_weight` (:class:`ScoreFusion`)."""
    depth = max(settings.hybrid.depth, k)
    weight = fusion_weight(kb, settings)
    return ScoreFusion([BM25(kb, depth, types), Dense(kb, depth, types, confidence=weight.bm25 is None)],
                       weight, depth) % k


def hybrid_rrf(kb, settings, k, types):
    """BM25 and dense fused by reciprocal rank (the hybrid before score fusion; constant ``rrf_k``)."""
    depth = max(settings.hybrid.depth, k)
    return RRFusion([BM25(kb, depth, types), Dense(kb, depth, types)], settings.hybrid.rrf_k, depth) % k


def fusion_weight(kb, settings) -> FusionWeight:
    """BM25's share in a hybrid: the ``hybrid_weight`` setting when it is a number; else the KB's fitted weight
    (``kqe-rdf kb tune-fusion``) when it was fitted on these documents and vectors; else None, weighed per
    request. The note says why a fitted weight was not used."""
    if settings.hybrid.weight != "auto":
        return FusionWeight(float(settings.hybrid.weight), "setting hybrid_weight", settings.hybrid.normalisation)
    fitted = kb.manifest.get("fusion")
    if not fitted:
        return FusionWeight(None, "request", settings.hybrid.normalisation)
    embedded = (kb.manifest.get("embeddings") or {}).get("model_id")
    stale = [what for what, now in (("documents_sha256", kb.manifest.get("documents_sha256")),
                                    ("model_id", embedded)) if fitted.get(what) != now]
    if stale:
        return FusionWeight(None, "request", settings.hybrid.normalisation,
                            f"the KB's fitted weight is not used: its {' and '.join(stale)} changed since "
                            "`kqe-rdf kb tune-fusion`; run it again")
    return FusionWeight(float(fitted["bm25_weight"]), f"fitted on {fitted['queryset']} ({fitted['measure']})",
                        fitted["normalisation"])


def prf(kb, settings, k, types):
    return RM3(kb, k, types, settings.prf.docs, settings.prf.terms, settings.prf.original_weight)
