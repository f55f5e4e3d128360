"""kqe-rdf: semi-structured retrieval over RDF knowledge graphs.

The Python API (docs/usage.md, "Python API"): its names are imported on first use, so that importing the
package, and ``kqe-rdf --help``, stays instant.

>>> import kqe_rdf
>>> kqe_rdf.Query("q1", "long slender fingers")
Query(qid='q1', text='long slender fingers')
"""

from __future__ import annotations

import importlib

__version__ = "0.1.0"

#: Name → the module that defines it.
_API = {
    "KnowledgeBase": "kqe_rdf.kb.knowledge_base",
    "Batch": "kqe_rdf.methods.retrieval", "Query": "kqe_rdf.methods.retrieval", "Hit": "kqe_rdf.methods.retrieval",
    "BM25": "kqe_rdf.methods.retrieval", "Dense": "kqe_rdf.methods.retrieval", "RM3": "kqe_rdf.methods.retrieval",
    "RRFusion": "kqe_rdf.methods.retrieval", "ScoreFusion": "kqe_rdf.methods.retrieval",
    "FusionWeight": "kqe_rdf.methods.retrieval",
    "pipeline": "kqe_rdf.methods.registry",
    "link": "kqe_rdf.service.links",
}
__all__ = [*_API, "expand"]


def __getattr__(name: str):
    if name in _API:
        return getattr(importlib.import_module(_API[name]), name)
    raise AttributeError(f"module 'kqe_rdf' has no attribute {name!r}")


def expand(kb, text: str, method: str = "kar", types=None):
    """``text`` expanded by ``method`` on ``kb``, as ``kqe-rdf expand`` does: ``.expanded`` is the query to
    search, ``.expansions`` what was added, ``.as_dict()`` everything with the knowledge it came from."""
    from .methods.expansion import expand as expand_with

    return expand_with(kb, kb.settings, text, method, types)
