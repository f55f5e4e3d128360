"""Any RDF file Oxigraph can parse, as a knowledge base.

Every IRI subject with a literal in one of the text properties becomes a
node (its IRI is its identifier); the classes of those nodes become node
classes and the properties between them relations, so documents, type
filters and SPARQL work as for the built-in domains. Named graphs are merged
into the default graph (counted in the build report).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from pyoxigraph import Literal, NamedNode, Quad, RdfFormat, Store, Triple, parse

from .. import queries
from ..errors import InputError
from ..ontology import CORE
from ..records import ImportReport
from ..resources import ontology_path
from . import Importer

DEFAULT_TEXT_PROPERTIES = ("rdfs:label", "rdfs:comment", "skos:prefLabel", "skos:altLabel", "skos:definition",
                           "schema:description")
RDF_TYPE = NamedNode("http://www.w3.org/1999/02/22-rdf-syntax-ns#type")


def rdf_format(path: Path) -> RdfFormat:
    name = path.name[:-3] if path.name.endswith(".gz") else path.name
    fmt = RdfFormat.from_extension(name.rsplit(".", 1)[-1]) if "." in name else None
    if fmt is None:
        raise InputError("unknown RDF format; use .ttl, .nt, .nq, .trig, .rdf/.owl (RDF/XML) or .jsonld", str(path))
    return fmt


class RdfImporter(Importer):
    name = "rdf"
    domain = "rdf"
    summary = "any RDF file Oxigraph parses (Turtle, N-Triples, N-Quads, TriG, RDF/XML); text properties by --text-property"

    def __init__(self, sources=(), limit=None, **options) -> None:
        super().__init__(sources, limit, **options)
        props = options.get("text_properties") or DEFAULT_TEXT_PROPERTIES
        if isinstance(props, str):
            props = [p for p in props.split(",") if p.strip()]
        try:
            self.text_properties = tuple(queries.expand_curie(p) for p in props)
        except ValueError as exc:
            raise InputError(str(exc)) from None
        label = queries.PREFIXES["rdfs"] + "label"
        self.extra_text_properties = tuple(p for p in self.text_properties if p != label)

    def ontology_files(self) -> list[Path]:
        return [ontology_path("kqe")]

    def dataset_info(self) -> dict[str, str]:
        return {"name": "rdf", "sources": ", ".join(str(s) for s in self.sources),
                "text_properties": " ".join(self.text_properties)}

    def _quads(self, path: Path) -> Iterator[Quad]:
        from .reading import open_binary

        fmt = rdf_format(path)
        try:
            with open_binary(path) as handle:
                yield from parse(handle, format=fmt, base_iri=path.resolve().as_uri())
        except SyntaxError as exc:
            line = getattr(exc, "lineno", None)
            raise InputError(f"malformed {fmt.name} ({str(exc).split(' (')[0]})", f"{path}:{line}" if line else str(path)) from None
        except OSError as exc:
            raise InputError(f"cannot read ({exc})", str(path)) from None

    def triples(self, report: ImportReport, writer_factory) -> Iterator[Triple]:
        text_props = {NamedNode(p) for p in self.text_properties}
        node_type, identifier = NamedNode(CORE + "Node"), NamedNode(CORE + "identifier")
        nodes: set = set()
        named_graph_quads = 0
        for path in self.require_sources(1, "one or more RDF files"):
            for quad in self._quads(path):
                if not quad.graph_name.__class__.__name__ == "DefaultGraph":
                    named_graph_quads += 1
                subject = quad.subject
                if (quad.predicate in text_props and isinstance(quad.object, Literal)
                        and isinstance(subject, NamedNode) and subject not in nodes):
                    if self.limit is not None and len(nodes) >= self.limit:
                        continue
                    nodes.add(subject)
                    yield Triple(subject, RDF_TYPE, node_type)
                    yield Triple(subject, identifier, Literal(subject.value))
                yield Triple(subject, quad.predicate, quad.object)
        report.nodes = len(nodes)
        if named_graph_quads:
            report.warn(f"{named_graph_quads} quads from named graphs were merged into the default graph")
        if not nodes:
            raise InputError("no subject has a literal in any text property ("
                             + ", ".join(self.text_properties) + "); name them with --text-property")

    def after_load(self, store: Store) -> None:
        store.update(queries.load_update("rdf_declare_nodes"))
