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
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from ..core.errors import KqeError
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


class RRFusion(Stage):
    """Reciprocal rank fusion (Cormack et al. 2009): score = Σ 1/(k + rank), ranks from 1."""

    def __init__(self, stages: Sequence[Stage], k: int = 60, depth: int | None = None) -> None:
        self.stages = list(stages)
        self.constant = k  # the RRF constant, not a result count
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
            scores = {q.qid: reciprocal_rank([out.ranked(q.qid)[: self.depth] for out in outs], self.constant)
                      for q in batch.queries}
            return Batch(batch.queries, {qid: ranking(qid, list(c.items())) for qid, c in scores.items()})
        return fused

    def __repr__(self) -> str:
        return "(" + " + ".join(map(repr, self.stages)) + ")"


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

    def __repr__(self) -> str:
        return f"BM25(k={self.k})"


class Dense(Stage):
    """Cosine top-k over the KB's node embeddings: exact, or through the HNSW index from ``dense_ann_threshold``
    embedded nodes on (kqe_rdf/kb/ann.py)."""

    def __init__(self, kb, k: int = 100, types: Sequence[str] | None = None) -> None:
        self.kb = kb
        self.k = k
        self.mask = kb.dense.type_mask(kb.resolve_types(types)) if types else None

    def transform(self, batch: Batch) -> Batch:
        if len(batch.queries) == 1:  # single queries share the KB's cache with other stages
            vectors = self.kb.embed_query(batch.queries[0].text)[None, :]
        else:
            vectors = self.kb.encoder.encode([q.text for q in batch.queries])
        results = self.kb.dense.search(vectors, self.k, self.mask)
        return Batch(batch.queries, {q.qid: ranking(q.qid, r) for q, r in zip(batch.queries, results)})

    def __repr__(self) -> str:
        return f"Dense(k={self.k})"


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
            words = Counter(terms(str(doc["text"]) if doc else ""))
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
    for hit in hits:
        doc = kb.document(hit.iri)
        rows.append({"rank": hit.rank, "iri": hit.iri, "id": doc.identifier, "name": doc.name,
                     "types": [kb.class_names.get(t, local_name(t)) for t in doc.types], "score": round(hit.score, 4),
                     "snippet": doc.text[:200]})
        if topped is not None:
            rows[-1]["filler"] = hit.iri in topped
    return rows


def bm25(kb, settings, k, types):
    return BM25(kb, k, types)


def dense(kb, settings, k, types):
    return Dense(kb, k, types)


def hybrid(kb, settings, k, types):
    depth = max(settings.hybrid_depth, k)
    return RRFusion([BM25(kb, depth, types), Dense(kb, depth, types)], settings.rrf_k, depth) % k


def prf(kb, settings, k, types):
    return RM3(kb, k, types, settings.prf_docs, settings.prf_terms, settings.prf_original_weight)
