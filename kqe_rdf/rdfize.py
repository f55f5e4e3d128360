"""Importer records → RDF triples, checked against the ontology.

Every importer goes through here, so the same checks hold for every domain:
types, fields and relations must be defined by the ontology; node ids are
unique, and so are node IRIs (an explicit IRI may not name another node);
edges must point at known nodes (skipped and counted, or an error, by
policy); nodes with no text at all are reported, not indexed as blanks; ids
and texts fit what Oxigraph's loader holds. Every error names the record's
``file:line``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from pyoxigraph import BlankNode, Literal, NamedNode, Triple

from .errors import InputError, SchemaError
from .ontology import CORE, RDFS_LABEL, Schema, as_named_node, node_iri
from .records import Edge, ImportReport, Node

RDF_TYPE = NamedNode("http://www.w3.org/1999/02/22-rdf-syntax-ns#type")
RDF_STATEMENT = NamedNode("http://www.w3.org/1999/02/22-rdf-syntax-ns#Statement")
RDF_SUBJECT = NamedNode("http://www.w3.org/1999/02/22-rdf-syntax-ns#subject")
RDF_PREDICATE = NamedNode("http://www.w3.org/1999/02/22-rdf-syntax-ns#predicate")
RDF_OBJECT = NamedNode("http://www.w3.org/1999/02/22-rdf-syntax-ns#object")
LABEL = NamedNode(RDFS_LABEL)
NODE = NamedNode(CORE + "Node")
IDENTIFIER = NamedNode(CORE + "identifier")
ALIAS = NamedNode(CORE + "alias")
XREF = NamedNode(CORE + "xref")
IMPORTED_FROM = NamedNode(CORE + "importedFrom")


#: Oxigraph's N-Triples loader holds one statement in at most 16 MiB; a literal may take half of that.
MAX_LITERAL_BYTES = 8 << 20
#: Longest node id (it is also part of the node's IRI).
MAX_ID_CHARS = 4096


def checked_literal(text: str, what: str, where: str) -> Literal:
    """``Literal(text)``, or an error naming ``where`` when its N-Triples form is over MAX_LITERAL_BYTES.

    >>> checked_literal("x" * (9 << 20), "field 'description'", "kb.jsonl:3")
    Traceback (most recent call last):
    kqe_rdf.errors.InputError: kb.jsonl:3: field 'description' is 9,437,186 bytes long as N-Triples; a text may hold at most 8 MiB
    """
    literal = Literal(text)
    if len(text) > MAX_LITERAL_BYTES // 6:  # the escaped form is at most 6 bytes a character
        size = len(str(literal).encode("utf-8"))
        if size > MAX_LITERAL_BYTES:
            raise InputError(f"{what} is {size:,} bytes long as N-Triples; a text may hold at most "
                             f"{MAX_LITERAL_BYTES >> 20} MiB", where)
    return literal


@dataclass(frozen=True)
class _Seen:
    iri: NamedNode
    type: str
    where: str


def clean_text(text: str) -> str:
    """Collapse whitespace and drop control characters that break tokenizers and N-Triples readers."""
    return " ".join("".join(ch if ch.isprintable() or ch in "\t\n" else " " for ch in text).split())


class RecordWriter:
    """Turns a stream of :class:`Node`/:class:`Edge` records into triples.

    Edges are buffered until every node has been seen, so importers may yield
    records in any order.
    """

    def __init__(
        self,
        schema: Schema,
        domain: str,
        report: ImportReport,
        on_unknown_edge: str = "skip",
        dataset_iri: str | None = None,
    ) -> None:
        if on_unknown_edge not in ("skip", "fail"):
            raise ValueError("on_unknown_edge must be 'skip' or 'fail'")
        self.schema = schema
        self.domain = domain
        self.report = report
        self.on_unknown_edge = on_unknown_edge
        self.dataset = NamedNode(dataset_iri) if dataset_iri else None
        self.nodes: dict[str, _Seen] = {}
        #: Node IRI → the id it was given to, so two ids never share one IRI.
        self.subjects: dict[str, str] = {}
        self._edges: list[Edge] = []

    def triples(self, records: Iterable[Node | Edge]) -> Iterator[Triple]:
        for record in records:
            if isinstance(record, Node):
                yield from self._node(record)
            elif isinstance(record, Edge):
                self._edges.append(record)
            else:
                raise TypeError(f"importers yield Node or Edge records, not {type(record).__name__}")
        for edge in self._edges:
            yield from self._edge(edge)
        self._edges.clear()

    def _term(self, lookup, name: str, where: str):
        """An ontology term by name; an unknown name is an error naming the record's place."""
        try:
            return lookup(name)
        except SchemaError as exc:
            raise SchemaError(f"{where}: {exc}" if where else str(exc)) from None

    def _node(self, node: Node) -> Iterator[Triple]:
        node_id = node.id.strip()
        where = node.where
        if not node_id:
            raise InputError("node without an id", where)
        if len(node_id) > MAX_ID_CHARS:
            raise InputError(f"node id {node_id[:40]!r}… is {len(node_id):,} characters long; at most "
                             f"{MAX_ID_CHARS:,}", where)
        cls = self._term(self.schema.node_class, node.type, where)
        name = clean_text(node.name)
        fields = [(self._term(self.schema.field, f, where), clean_text(v)) for f, v in node.fields]
        fields = [(f, checked_literal(v, f"field {f.name!r}", where)) for f, v in fields if v]
        if not name and not fields:
            self.report.empty_nodes += 1
            self.report.warn(f"{node.where or node_id}: node {node_id!r} has no name and no text; skipped")
            return
        seen = self.nodes.get(node_id)
        if seen is not None:
            if seen.type != cls.iri:
                raise InputError(
                    f"duplicate node id {node_id!r}: first seen as {seen.type} at {seen.where or '?'}, "
                    f"again as {cls.iri}",
                    node.where,
                )
            self.report.duplicate_nodes += 1
            self.report.warn(f"{node.where or node_id}: node {node_id!r} seen again; its text is merged")
            subject = seen.iri
        else:
            try:
                subject = as_named_node(node.iri_hint or node_iri(self.domain, node_id))
            except SchemaError as exc:
                raise InputError(str(exc), where) from None
            other = self.subjects.setdefault(subject.value, node_id)
            if other != node_id:
                raise InputError(f"node {node_id!r} has the IRI <{subject.value}> of node {other!r} (first seen at "
                                 f"{self.nodes[other].where or '?'}); give each node its own 'iri'", where)
            self.nodes[node_id] = _Seen(subject, cls.iri, node.where)
            self.report.nodes += 1
            yield Triple(subject, RDF_TYPE, NODE)
            yield Triple(subject, RDF_TYPE, NamedNode(cls.iri))
            yield Triple(subject, IDENTIFIER, Literal(node_id))
            if self.dataset is not None:
                yield Triple(subject, IMPORTED_FROM, self.dataset)
        yield Triple(subject, LABEL, checked_literal(name or node_id, "the name", where))
        for alias in node.aliases:
            alias = clean_text(alias)
            if alias and alias != name:
                yield Triple(subject, ALIAS, checked_literal(alias, "an alias", where))
        for prop, value in fields:
            yield Triple(subject, NamedNode(prop.iri), value)
        for xref in node.xrefs:
            if xref.strip():
                yield Triple(subject, XREF, checked_literal(xref.strip(), "a cross-reference", where))

    def _edge(self, edge: Edge) -> Iterator[Triple]:
        relation = NamedNode(self._term(self.schema.relation, edge.relation, edge.where).iri)
        head, tail = self.nodes.get(edge.head), self.nodes.get(edge.tail)
        if head is None or tail is None:
            missing = edge.head if head is None else edge.tail
            message = f"edge {edge.head!r} -{edge.relation}-> {edge.tail!r} points at unknown node {missing!r}"
            if self.on_unknown_edge == "fail":
                raise InputError(message + " (use --on-unknown-edge skip to skip such edges)", edge.where)
            self.report.skipped_edges += 1
            self.report.warn(f"{edge.where or 'edge'}: {message}; skipped")
            return
        self.report.edges += 1
        yield Triple(head.iri, relation, tail.iri)
        if edge.qualifiers:
            statement = BlankNode()
            yield Triple(statement, RDF_TYPE, RDF_STATEMENT)
            yield Triple(statement, RDF_SUBJECT, head.iri)
            yield Triple(statement, RDF_PREDICATE, relation)
            yield Triple(statement, RDF_OBJECT, tail.iri)
            for name, value in edge.qualifiers:
                prop = self._term(self.schema.qualifier, name, edge.where)
                yield Triple(statement, NamedNode(prop.iri), checked_literal(clean_text(value), f"qualifier {name!r}",
                                                                            edge.where))
