"""Query expansion: KAR, its baselines (PRF: RM3 and prf-docs, HyDE, Query2doc, RAR, AGR) and LKQE, by name.

``expand(kb, settings, text, method)`` returns an :class:`Expansion` — the
expanded query and the knowledge it came from (``.as_dict()`` for JSON) — and
``expansion_pipeline(method, kb, settings, k, types)`` is the retrieval stage
that searches with it (registered in :mod:`kqe_rdf.methods.registry`)::

    exp = expand(kb, settings, "who directed Kismet", "kar-offline")
    exp.expanded, exp.neighbours[0]["relation"]

Methods ending in ``-offline`` never call an LLM. ``kar`` and ``lkqe`` use the
configured LLM and run their offline variant when none is configured; ``hyde``,
``q2d``, ``rar`` and ``agr`` need an LLM and say so.
"""

from __future__ import annotations

from collections.abc import Sequence

from ...core.errors import KqeError
from ..registry import EXPANSION
from .base import Expander, ExpandedSearch, Expansion, final_retriever

__all__ = ["METHODS", "Expander", "ExpandedSearch", "Expansion", "expand", "expander", "expansion_pipeline"]

#: Method name → (family, KAR variant or None, always offline), from the one registry of methods.
METHODS = EXPANSION
#: ``kqe-rdf expand --method prf`` shows the words RM3 adds, as ``search --method prf`` (RM3 on BM25) uses them.
PRF = "prf"
NEEDS_LLM = ("hyde", "q2d", "rar", "agr")


def expander(method: str, kb, settings, types: Sequence[str] | None = None, llm=None) -> Expander:
    """The expander of a method, with the configured LLM unless the method is an offline one."""
    if method == PRF:
        from .baselines import RM3Terms

        return RM3Terms(kb, settings, None, types)
    try:
        family, variant, offline = METHODS[method]
    except KeyError:
        raise KqeError(f"no expansion method {method!r}; available: {', '.join(METHODS)}, prf (RM3)") from None
    if not offline and llm is None:
        from ...llm.client import LLM

        llm = LLM.from_settings(settings)
    if offline:
        llm = None
    if llm is None and family in NEEDS_LLM:
        offline_methods = ", ".join(name for name, (_family, _variant, alone) in METHODS.items() if alone)
        raise KqeError(f"{method} needs an LLM: set OPENAI_BASE_URL (llm_base_url) and KQE_LLM_MODEL (llm_model), "
                       f"or use a method that runs offline: {offline_methods}")
    if family == "kar":
        from .kar import KAR

        return KAR(kb, settings, llm, variant, types)
    if family == "lkqe":
        from .lkqe import LKQE

        return LKQE(kb, settings, llm, types)
    from .baselines import AGR, RAR, HyDE, PRFDocs, Query2Doc

    cls = {"prf-docs": PRFDocs, "hyde": HyDE, "q2d": Query2Doc, "rar": RAR, "agr": AGR}[family]
    return cls(kb, settings, llm, types)


def expand(kb, settings, text: str, method: str = "kar", types: Sequence[str] | None = None) -> Expansion:
    """One query's expansion by ``method`` (what the CLI's ``expand`` and the REST server call)."""
    if not text or not text.strip():
        raise KqeError("the query is empty: give some words to expand")
    if len(text) > (most := settings.expansion.request_max_chars):
        raise KqeError(f"the query is {len(text):,} characters long; at most {most:,} are expanded (setting "
                       "expand_max_chars)")
    stage = expander(method, kb, settings, types)
    exp = stage.expand(text)
    if _ran_offline(method, stage):
        exp.ran_offline = True
        exp.notes.insert(0, _offline_note(method))
    return exp


def _ran_offline(method: str, stage: Expander) -> bool:
    """Whether a method that asks an LLM had none configured, and so ran its offline variant."""
    return method != PRF and not METHODS[method][2] and getattr(stage, "llm", None) is None


def _offline_note(method: str) -> str:
    return f"no LLM is configured (llm_base_url, llm_model): {method} ran offline, as {method}-offline does"


def expansion_pipeline(method: str, kb, settings, k: int, types: Sequence[str] | None = None) -> ExpandedSearch:
    """Expansion then the final retriever (BM25 for LKQE, as in its paper; ``kar_final`` for the rest)."""
    exp = expander(method, kb, settings, types)
    kind = "bm25" if METHODS[method][0] == "lkqe" else settings.kar.final
    notes = [_offline_note(method)] if _ran_offline(method, exp) else []
    if kind != "bm25" and not kb.has_embeddings:
        notes.append(f"the KB has no vectors (`kqe-rdf kb embed`): the expanded query was searched with BM25, not "
                     f"{kind} (kar_final)")
    return ExpandedSearch(exp, final_retriever(kb, settings, k, types, kind), k, notes)
