"""The records every importer yields: one shape for every domain.

Importers read a source (files, packages) and yield :class:`Node` and
:class:`Edge` records; :mod:`kqe_rdf.kb.rdfize` turns them into RDF against the
domain ontology, so no importer writes triples or SPARQL itself. Records are named tuples: a big
import makes millions, and a frozen dataclass took three times as long to make.

>>> Node(id="OMIM:147791", type="Disease", name="Jacobsen syndrome").iri_hint is None
True
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple


class Node(NamedTuple):
    """A node of the semi-structured KB.

    ``id`` is the source's own identifier (unique within one KB); gold answers
    of evaluation sets are written in these ids. ``type`` and the names in
    ``fields`` are local names in the domain ontology (e.g. ``Disease``,
    ``definition``). ``where`` says where the record came from ("file:line"),
    for error messages.
    """

    id: str
    type: str
    name: str
    aliases: tuple[str, ...] = ()
    fields: tuple[tuple[str, str], ...] = ()
    xrefs: tuple[str, ...] = ()
    iri_hint: str | None = None
    where: str = ""


class Edge(NamedTuple):
    """A typed edge ``head --relation--> tail`` between node ids.

    ``qualifiers`` are (ontology property local name, literal) pairs about the
    edge itself, e.g. ``(("frequency", "HP:0040281"),)``; they are stored as
    RDF reification so any SPARQL 1.1 store can hold them.
    """

    head: str
    relation: str
    tail: str
    qualifiers: tuple[tuple[str, str], ...] = ()
    where: str = ""


@dataclass
class ImportReport:
    """What an import skipped or repaired, so nothing is dropped silently."""

    nodes: int = 0
    edges: int = 0
    skipped_edges: int = 0
    empty_nodes: int = 0
    duplicate_nodes: int = 0
    warnings: list[str] = field(default_factory=list)

    def warn(self, message: str, limit: int = 50) -> None:
        if len(self.warnings) < limit:
            self.warnings.append(message)
