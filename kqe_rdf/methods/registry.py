"""Every retrieval and expansion method, registered by name in one place.

A method is a factory ``(kb, settings, k, types) -> Stage`` named here by dotted path (as rdflib registers
its plugins), so reading the names costs no import: ``kqe-rdf --help``, the server's parameter check and
its OpenAPI description list :data:`METHODS` without loading numpy or a model. A new retrieval method is a
factory anywhere under :mod:`kqe_rdf.methods` and one line in :data:`RETRIEVAL`; a new expansion method is
one line in :data:`EXPANSION` (and its class in :func:`kqe_rdf.methods.expansion.expander`).

>>> "4step-offline" in METHODS and "kar-offline" in METHODS
True
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence

from ..core.errors import KqeError

#: Retrieval method name → its factory ``(kb, settings, k, types) -> Stage``, as ``module:function``.
RETRIEVAL: dict[str, str] = {
    "bm25": "kqe_rdf.methods.retrieval:bm25",
    "dense": "kqe_rdf.methods.retrieval:dense",
    "hybrid": "kqe_rdf.methods.retrieval:hybrid",
    "hybrid-rrf": "kqe_rdf.methods.retrieval:hybrid_rrf",
    "prf": "kqe_rdf.methods.retrieval:prf",
    "4step": "kqe_rdf.methods.fourstep.factory:fourstep",
    "4step-offline": "kqe_rdf.methods.fourstep.factory:fourstep_offline",
}

#: Expansion method name → (family, KAR variant or None, always offline). Each is also a retrieval method:
#: the expansion, then the final retriever (:func:`kqe_rdf.methods.expansion.expansion_pipeline`).
EXPANSION: dict[str, tuple[str, str | None, bool]] = {
    "kar": ("kar", "kg", False), "kar-offline": ("kar", "kg", True),
    "kar-nokg": ("kar", "nokg", False), "kar-nokg-offline": ("kar", "nokg", True),
    "kar-namefilter": ("kar", "namefilter", False), "kar-namefilter-offline": ("kar", "namefilter", True),
    "prf-docs": ("prf-docs", None, True),
    "hyde": ("hyde", None, False), "q2d": ("q2d", None, False), "rar": ("rar", None, False),
    "agr": ("agr", None, False),
    "lkqe": ("lkqe", None, False), "lkqe-offline": ("lkqe", None, True),
}
_EXPANSION_PIPELINE = "kqe_rdf.methods.expansion:expansion_pipeline"

#: Every name ``search``, ``eval``, ``/search`` and SPARQL search accept: the retrieval methods, then the
#: expansion methods.
METHODS: tuple[str, ...] = (*RETRIEVAL, *EXPANSION)


def load(path: str) -> Callable:
    """The object a ``module:name`` path names."""
    module, _, name = path.partition(":")
    return getattr(importlib.import_module(module), name)


def pipeline(method: str, kb, settings, k: int, types: Sequence[str] | None = None):
    """The retrieval stage of ``method`` (a :class:`~kqe_rdf.methods.retrieval.Stage`), inside the rules every
    method's results obey (:class:`~kqe_rdf.methods.retrieval.ResultRules`: the request's namesake first, no
    hierarchy root, every hit named); ``.inner`` is the method's own stage."""
    if method in RETRIEVAL:
        stage = load(RETRIEVAL[method])(kb, settings, k, types)
    elif method in EXPANSION:
        stage = load(_EXPANSION_PIPELINE)(method, kb, settings, k, types)
    else:
        raise KqeError(f"no retrieval method {method!r}; available: {', '.join(METHODS)}")
    from .retrieval import ResultRules

    return ResultRules(stage, kb, k, types)


def method_help() -> str:
    """The method list ``search --help`` and ``eval --help`` show."""
    return f"{', '.join(RETRIEVAL)}; expansion: {', '.join(EXPANSION)}"
