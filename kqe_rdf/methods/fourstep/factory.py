"""The 4StepFocus retrieval methods ``4step`` and ``4step-offline`` (registered in
:mod:`kqe_rdf.methods.registry`): the reader, linker, reranker and fallback put together."""

from __future__ import annotations

from ...kb.linking import Linker
from ...llm.client import LLM
from ..retrieval import BM25, hybrid
from .pipeline import FourStep, LLMReranker, LLMTriplets, OfflineTriplets


def fourstep(kb, settings, k, types, offline: bool = False):
    """4StepFocus: with the configured LLM if there is one (else, and for ``4step-offline``, offline)."""
    fallback = hybrid(kb, settings, k, types) if kb.has_embeddings else BM25(kb, k, types)
    llm = None if offline else LLM.from_settings(settings)
    # One linker, so the name index (seconds to read on a large KB) is read once, not by the reader and again here.
    linker = Linker(kb)
    offline_reader = OfflineTriplets(kb, linker, answer_types=kb.resolve_types(types) if types else None)
    generator = LLMTriplets(kb, llm, offline_reader, settings.fourstep.llm_reading) if llm else offline_reader
    reranker = LLMReranker(kb, llm, settings.fourstep.rerank_depth) if llm and settings.fourstep.rerank else None
    stage = FourStep(kb, generator, mode=settings.fourstep.mode, k=k, types=types, fallback=fallback,
                     reranker=reranker, linker=linker)
    stage.llm = llm
    return stage


def fourstep_offline(kb, settings, k, types):
    return fourstep(kb, settings, k, types, offline=True)
