"""Importers, selected by name: each reads one kind of source and yields records.

A new importer is a class with ``name``, ``domain`` (the ontology file in
``ontologies/``) and ``records()``; it is registered here by dotted path so
that ``kqe-rdf --help`` never imports it.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import ClassVar

from pyoxigraph import Triple

from ...core.errors import KqeError
from ..ontology import Schema
from ..records import Edge, ImportReport, Node
from ...core.resources import ontology_path

IMPORTERS: dict[str, str] = {
    "jsonl": "kqe_rdf.kb.importers.jsonl:JsonlImporter",
    "triples": "kqe_rdf.kb.importers.triples:TriplesImporter",
    "rdf": "kqe_rdf.kb.importers.rdf:RdfImporter",
    "bio": "kqe_rdf.kb.importers.bio:BioImporter",
    "metaqa": "kqe_rdf.kb.importers.metaqa:MetaQAImporter",
    "amazon": "kqe_rdf.kb.importers.amazon:AmazonImporter",
    "citeseer": "kqe_rdf.kb.importers.citeseer:CiteSeerImporter",
    "scifact": "kqe_rdf.kb.importers.scifact:SciFactImporter",
    "passages": "kqe_rdf.kb.importers.passages:PassagesImporter",
    "primekg": "kqe_rdf.kb.importers.primekg:PrimeKGImporter",
}

#: File endings (before a ``.gz``) and the importer that reads them, for the hint of a missing KB.
_BY_SUFFIX = {**dict.fromkeys(("ttl", "nt", "nq", "trig", "rdf", "owl", "xml", "n3", "jsonld"), "rdf"),
              "jsonl": "jsonl", **dict.fromkeys(("txt", "tsv", "tab"), "triples")}


def importer_for(path: Path) -> str | None:
    """The importer that reads a file named like ``path`` (``nobel.ttl.gz`` → rdf), or None.

    >>> importer_for(Path("nobel.ttl.gz")), importer_for(Path("family.txt")), importer_for(Path("data/kb/x"))
    ('rdf', 'triples', None)
    """
    suffixes = [s.lstrip(".").lower() for s in path.suffixes if s.lower() != ".gz"]
    return _BY_SUFFIX.get(suffixes[-1]) if suffixes else None


class Importer:
    """Base of every importer.

    Subclasses set ``name``/``domain``/``summary`` and implement
    :meth:`records`. ``sources`` are the files or folders named on the command
    line; ``limit`` caps the number of nodes (for quick trials and tests).
    """

    name: ClassVar[str] = ""
    domain: ClassVar[str] = ""
    summary: ClassVar[str] = ""
    #: Text properties beyond the ontology's kqe:field ones (the rdf importer sets these).
    extra_text_properties: tuple[str, ...] = ()

    def __init__(self, sources: Sequence[Path | str] = (), limit: int | None = None, **options: object) -> None:
        self.sources = [Path(s) for s in sources]
        self.limit = limit
        self.options = options

    def ontology_files(self) -> list[Path]:
        return [ontology_path("kqe"), ontology_path(self.domain)]

    def schema(self) -> Schema:
        return Schema.from_files(self.ontology_files())

    def dataset_info(self) -> dict[str, str]:
        """Name, version, licence and origin of the source, recorded as provenance."""
        return {"name": self.name, "sources": ", ".join(str(s) for s in self.sources)}

    def records(self, report: ImportReport) -> Iterator[Node | Edge]:
        raise NotImplementedError

    def triples(self, report: ImportReport, writer_factory) -> Iterator[Triple]:
        """Records through the shared writer; importers of raw RDF override this."""
        return writer_factory(self).triples(self.records(report))

    def after_load(self, store) -> None:
        """A hook run on the freshly loaded store, before documents are rendered."""

    def require_sources(self, count: int = 1, what: str = "a source file or folder") -> list[Path]:
        if len(self.sources) < count:
            raise KqeError(f"the {self.name} importer needs {what}: kqe-rdf kb build {self.name} PATH")
        for path in self.sources:
            if not path.exists():
                raise KqeError(f"{path}: no such file or folder")
        return self.sources


def get_importer(name: str) -> type[Importer]:
    try:
        target = IMPORTERS[name]
    except KeyError:
        raise KqeError(f"no importer named {name!r}; available: {', '.join(sorted(IMPORTERS))}") from None
    module_name, _, attr = target.partition(":")
    return getattr(importlib.import_module(module_name), attr)
