"""The offline reading of a request as relation paths (4StepFocus without an LLM), in one package.

Start at :mod:`.offline` (:class:`OfflineTriplets`): it reads top-down through :mod:`.request` (the request
and its mentions), :mod:`.words` (which words name which relation), :mod:`.paths` (grounded relation paths),
:mod:`.ranking` (the rules that rank them) and :mod:`.chains` (the chain a request's syntax spells), and writes
:mod:`.triplets`; ``bench/walk.py`` measures how often a request's reading moves between them.
"""

from .offline import OfflineTriplets
from .paths import Path, PathReader, property_path, walk
from .ranking import Scored
from .request import Request
from .words import RelationWords, phrase_stems, stem

__all__ = ["OfflineTriplets", "Path", "PathReader", "RelationWords", "Request", "Scored",
           "phrase_stems", "property_path", "stem", "walk"]
