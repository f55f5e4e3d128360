"""What every expansion method shares: the result, the LLM call that never fails a query, the final retriever.

An :class:`Expander` turns a query into an :class:`Expansion` — the expanded
query plus the knowledge it came from — and :class:`ExpandedSearch` is the
retrieval stage that runs the final retriever on the expanded query. LLM
trouble (errors, budgets, unusable answers) is caught per step and written to
``notes``; an expansion whose generation failed is the unexpanded query, so a
query never ends with fewer results because a model misbehaved.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..retrieval import BM25, Batch, Dense, Stage, hybrid, hybrid_rrf
from .text import estimate_tokens


@dataclass
class Expansion:
    """One query's expansion and its provenance (what ``kqe-rdf expand --show-context`` prints)."""

    query: str
    method: str
    #: The text the final retriever searches with (the query itself when nothing was added).
    expanded: str = ""
    #: What was added to the query, piece by piece (generated passages, appended documents, sentences).
    expansions: list[str] = field(default_factory=list)
    #: Entities read from the query and the node(s) each resolved to.
    entities: list[dict] = field(default_factory=list)
    #: Neighbours kept by relation filtering: node, relation, direction, hop, score.
    neighbours: list[dict] = field(default_factory=list)
    #: Document triples (or other knowledge) as shown to the LLM or used offline, and its estimated tokens.
    context: list[str] = field(default_factory=list)
    context_tokens: int = 0
    #: Passages read (PRF, RAR, AGR, LKQE): node IRIs, best first.
    passages: list[str] = field(default_factory=list)
    #: Extracted/completed triples (LKQE) and the named graph they were stored in.
    triples: list[dict] = field(default_factory=list)
    graph: str | None = None
    #: "offline" or the model that was asked; its calls and tokens for this query.
    llm: str = "offline"
    llm_usage: dict | None = None
    notes: list[str] = field(default_factory=list)
    #: The method asked for uses an LLM, but none is configured: it ran its offline variant (notes say so).
    ran_offline: bool = False

    def finish(self, repeat: int = 1) -> Expansion:
        """Set ``expanded``: the query (``repeat`` times) followed by the expansions; the query alone if none."""
        added = [e for e in self.expansions if e.strip()]
        self.expansions = added
        self.expanded = " ".join([self.query] * (repeat if added else 1) + added)
        return self

    def as_dict(self) -> dict[str, Any]:
        return {"query": self.query, "method": self.method, "expanded_query": self.expanded,
                "expansions": self.expansions, "entities": self.entities, "neighbours": self.neighbours,
                "context": self.context, "context_tokens": self.context_tokens, "passages": self.passages,
                "triples": self.triples, "graph": self.graph, "llm": self.llm, "llm_usage": self.llm_usage,
                "ran_offline": self.ran_offline, "notes": self.notes}


class Expander:
    """Base of the expansion methods: ``expand(text) -> Expansion``."""

    #: The method's name as users type it (``kar``, ``hyde``, ``lkqe-offline`` …).
    name = "expansion"

    def __init__(self, kb, settings, llm=None) -> None:
        self.kb = kb
        self.settings = settings
        self.llm = llm

    @property
    def source(self) -> str:
        return f"llm:{self.llm.model}" if self.llm is not None else "offline"

    def expand(self, text: str) -> Expansion:
        exp = Expansion(text, self.name, llm=self.source)
        if self.llm is None:
            self.build(exp)
        else:
            with self.llm.budget() as budget:
                self.build(exp)
            exp.llm_usage = budget.usage.as_dict()
        return exp.finish(self.repeat)

    #: Times the query is repeated in front of the expansions (LKQE weighs the query ×3 for BM25).
    repeat = 1

    def build(self, exp: Expansion) -> None:
        raise NotImplementedError

    # LLM calls that note failures instead of raising.

    def ask_json(self, exp: Expansion, step: str, messages, schema, validate: Callable | None = None):
        """The JSON value of a structured call, or None (the failure noted in ``exp.notes``)."""
        from ...llm.client import LLMError

        try:
            result = self.llm.json(messages, schema, validate, name=step.replace(" ", "_"),
                                   max_tokens=self.settings.expansion_max_tokens)
        except LLMError as exc:
            exp.notes.append(f"{step}: LLM failed ({exc})")
            return None
        if not result.ok:
            exp.notes.append(f"{step}: LLM answer unusable ({result.error})")
            return None
        return result.value

    def ask_text(self, exp: Expansion, step: str, messages, tokens: int | None = None) -> str:
        """The cleaned free text of a call, or "" (the failure, or an empty answer, noted)."""
        from ...llm.client import LLMError
        from .text import clean_generation

        try:
            raw = self.llm.text(messages, max_tokens=self.settings.expansion_max_tokens)
        except LLMError as exc:
            exp.notes.append(f"{step}: LLM failed ({exc})")
            return ""
        text = clean_generation(raw, tokens or self.settings.expansion_max_tokens)
        if not text:
            exp.notes.append(f"{step}: the LLM wrote nothing usable")
        return text

    def set_context(self, exp: Expansion, pieces: Sequence[str]) -> str:
        exp.context = list(pieces)
        text = "\n".join(pieces)
        exp.context_tokens = estimate_tokens(text)
        return text


def final_retriever(kb, settings, k: int, types: Sequence[str] | None = None, kind: str | None = None) -> Stage:
    """The retriever an expanded query is run with (``kar_final``); BM25 when the KB has no embeddings."""
    kind = kind or settings.kar_final
    if kind != "bm25" and not kb.has_embeddings:
        kind = "bm25"
    if kind == "bm25":
        return BM25(kb, k, types)
    if kind == "dense":
        return Dense(kb, k, types)
    return hybrid(kb, settings, k, types) if kind == "hybrid" else hybrid_rrf(kb, settings, k, types)


class ExpandedSearch(Stage):
    """Expand each query, then retrieve with the expanded text; the expansion is kept in ``explain``.

    Should the expanded query find nothing (BM25 over words no document has), the
    unexpanded query's results are returned: expansion never empties a result list.
    """

    def __init__(self, expander: Expander, final: Stage, k: int, notes: Sequence[str] = ()) -> None:
        self.expander = expander
        self.final = final
        self.k = k
        self.llm = expander.llm
        #: What every query's expansion notes about the search (the final retriever the KB allowed).
        self.notes = list(notes)

    def with_depth(self, k: int) -> Stage:
        return ExpandedSearch(self.expander, self.final.with_depth(k) or self.final, min(self.k, k), self.notes)

    def transform(self, batch: Batch) -> Batch:
        out = Batch(batch.queries, {}, dict(batch.explain))
        for q in batch.queries:
            exp = self.expander.expand(q.text)
            exp.notes += self.notes
            hits = self.final.search(exp.expanded, q.qid, names=False)
            if not hits and exp.expanded != q.text:
                exp.notes.append("the expanded query found nothing; results are the unexpanded query's")
                hits = self.final.search(q.text, q.qid, names=False)
            out.hits[q.qid] = hits[: self.k]
            out.explain[q.qid] = {"expansion": exp.as_dict()}
        return out

    def __repr__(self) -> str:
        return f"Expand({self.expander.name}, {self.expander.source}) >> {self.final!r}"
