"""Importer records → RDF triples, checked against the ontology.

Every importer goes through here, so the same checks hold for every domain:
types, fields and relations must be defined by the ontology; node ids are
unique, and so are node IRIs (an explicit IRI may not name another node);
edges must point at known nodes (skipped and counted, or an error, by
policy); nodes with no text at all are reported, not indexed as blanks; ids
and texts fit what Oxigraph's loader holds. Every error names the record's
``file:line``.

The writer writes N-Triples text itself (a build streams it into Oxigraph's bulk loader): making
a pyoxigraph term per subject, predicate and object and serialising them took twice as long.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterable, Iterator
from typing import NamedTuple, Protocol

from pyoxigraph import Literal, NamedNode, RdfFormat, Triple, parse

from ..core.errors import InputError, SchemaError
from .ontology import CORE, RDFS_LABEL, Schema, as_named_node, node_iri
from .records import Edge, ImportReport, Node

RDF = "http://www.w3.org/1999/02/22-rdf-syntax-ns#"
RDF_TYPE = NamedNode(RDF + "type")
RDF_STATEMENT = NamedNode(RDF + "Statement")
RDF_SUBJECT = NamedNode(RDF + "subject")
RDF_PREDICATE = NamedNode(RDF + "predicate")
RDF_OBJECT = NamedNode(RDF + "object")
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
#: What N-Triples escapes inside a string literal (everything else may stand as UTF-8).
_ESCAPES = str.maketrans({"\\": "\\\\", '"': '\\"', "\n": "\\n", "\r": "\\r"})


_XSD = "http://www.w3.org/2001/XMLSchema#"


def _lexical(value: bool | int | float) -> str:
    return ("true" if value else "false") if isinstance(value, bool) else repr(value)


def _typed(value: bool | int | float) -> str:
    """A JSON number or boolean as a typed literal, so value conditions compare it ("area over 100000").

    >>> _typed(True), _typed(7), _typed(2.5)
    ('"true"^^<http://www.w3.org/2001/XMLSchema#boolean>', '"7"^^<http://www.w3.org/2001/XMLSchema#integer>', '"2.5"^^<http://www.w3.org/2001/XMLSchema#decimal>')
    """
    kind = "boolean" if isinstance(value, bool) else "integer" if isinstance(value, int) else "decimal"
    return f'"{_lexical(value)}"^^<{_XSD}{kind}>'


def nt_literal(text: str, what: str = "a text", where: str = "") -> str:
    """``text`` as an N-Triples literal, or an error naming ``where`` when it is over MAX_LITERAL_BYTES.

    >>> nt_literal('say "hi"')
    '"say \\\\"hi\\\\""'
    >>> nt_literal("x" * (9 << 20), "field 'description'", "kb.jsonl:3")
    Traceback (most recent call last):
    kqe_rdf.core.errors.InputError: kb.jsonl:3: field 'description' is 9,437,186 bytes long as N-Triples; a text may hold at most 8 MiB
    """
    if "\\" in text or '"' in text or "\n" in text or "\r" in text:  # rare: four scans beat one translate
        text = text.translate(_ESCAPES)
    form = '"' + text + '"'
    if len(text) > MAX_LITERAL_BYTES // 6:  # the escaped form is at most 6 bytes a character
        size = len(form.encode("utf-8", "surrogatepass"))
        if size > MAX_LITERAL_BYTES:
            raise InputError(f"{what} is {size:,} bytes long as N-Triples; a text may hold at most "
                             f"{MAX_LITERAL_BYTES >> 20} MiB", where)
    return form


def checked_literal(text: str, what: str, where: str) -> Literal:
    """``Literal(text)``, checked as :func:`nt_literal` checks it (for importers that make terms themselves)."""
    nt_literal(text, what, where)
    return Literal(text)


class _Seen(NamedTuple):
    iri: str
    type: str
    where: str
    #: The IRI as N-Triples writes it, and the node's handle in the writer's sink.
    term: str = ""
    handle: int = -1


def clean_text(text: str) -> str:
    """Collapse whitespace and drop control characters that break tokenizers and N-Triples readers."""
    if not text.isprintable():
        text = "".join(ch if ch.isprintable() or ch in "\t\n" else " " for ch in text)
    return " ".join(text.split())


class RecordSink(Protocol):
    """What the writer tells, besides the triples, about the nodes and edges it writes
    (:class:`kqe_rdf.kb.documents.GraphTables` collects it for the documents and the relation statistics)."""

    def node(self, iri: str, type_iri: str, identifier: str) -> int: ...

    def literal(self, handle: int, prop: str, value: str) -> None: ...

    def add_edges(self, heads: list[int], relations: list[str], tails: list[int]) -> None: ...

    def link(self, relation: str) -> None: ...


class RecordWriter:
    """Turns a stream of :class:`Node`/:class:`Edge` records into N-Triples (or triples).

    Importers may yield records in any order: an edge whose nodes have not been
    seen yet waits until every node has been (only those wait: holding every edge
    took gigabytes at millions of edges). A ``sink`` is told each node, literal and edge as it
    is written, so a build reads what documents need from this one pass.
    """

    def __init__(
        self,
        schema: Schema,
        domain: str,
        report: ImportReport,
        on_unknown_edge: str = "skip",
        dataset_iri: str | None = None,
        sink: RecordSink | None = None,
    ) -> None:
        if on_unknown_edge not in ("skip", "fail"):
            raise ValueError("on_unknown_edge must be 'skip' or 'fail'")
        self.schema = schema
        self.domain = domain
        self.report = report
        self.on_unknown_edge = on_unknown_edge
        self.dataset = NamedNode(dataset_iri) if dataset_iri else None
        self.sink = sink
        self.nodes: dict[str, _Seen] = {}
        #: Node IRI → the id it was given to, so two ids never share one IRI.
        self.subjects: dict[str, str] = {}
        self._edges: list[Edge] = []
        #: Whether the records have all been read (an edge still waiting for a node then points at none).
        self._late = False
        #: Edges written and not yet told to the sink: (head handles, relation IRIs, tail handles).
        self._sink_edges: tuple[list[int], list[str], list[int]] = ([], [], [])
        #: Blank nodes of edge statements: a label prefix no other file of the build uses.
        self._blank = f"_:e{secrets.token_hex(4)}x"
        self._statements = 0
        #: Ontology terms by the names records give them, looked up once per name.
        self._classes: dict[str, str] = {}
        self._relations: dict[str, str] = {}
        self._qualifiers: dict[str, str] = {}
        self._fields: dict[str, tuple[str, str]] = {}
        #: What every node's first statements say besides its subject, as N-Triples text.
        self._a_node = f" <{RDF_TYPE.value}> <{NODE.value}> .\n"
        self._imported = f" <{IMPORTED_FROM.value}> <{self.dataset.value}> .\n" if self.dataset is not None else ""
        as_named_node(node_iri(domain, ""))  # generated node IRIs: checked once (the rest is percent-encoded)

    def statements(self, records: Iterable[Node | Edge]) -> Iterator[str]:
        """N-Triples text, a record at a time (the edges that came before their nodes at the end)."""
        return self.chunks(records, 0)

    def chunks(self, records: Iterable[Node | Edge], size: int) -> Iterator[str]:
        """N-Triples text in pieces of at least ``size`` characters (the last may be shorter), each ending
        between records: a statement about an edge, with its blank node, never straddles two pieces."""
        nodes, relations, report = self.nodes, self._relations, self.report
        heads, rels, tails = self._sink_edges
        out: list[str] = []
        length = 0
        for record in self._in_order(records):
            if type(record) is Edge and not record.qualifiers:
                # Most records of a big KB: a plain edge between nodes seen, by a relation met before.
                head, tail, relation = nodes.get(record.head), nodes.get(record.tail), relations.get(record.relation)
                if head is not None and tail is not None and relation is not None:
                    report.edges += 1
                    heads.append(head.handle)
                    rels.append(relation)
                    tails.append(tail.handle)
                    text = f"{head.term} <{relation}> {tail.term} .\n"
                else:
                    text = self._record(record)
            else:
                text = self._record(record)
            if text:
                out.append(text)
                length += len(text)
                if length >= size:
                    self._flush_edges()
                    yield "".join(out)
                    out.clear()
                    length = 0
        self._flush_edges()
        if out:
            yield "".join(out)

    def _in_order(self, records: Iterable[Node | Edge]) -> Iterator[Node | Edge]:
        """The records, then the edges that came before their nodes (by then every node has been seen)."""
        self._late = False
        yield from records
        self._late = True
        yield from self._edges
        self._edges.clear()

    def _flush_edges(self) -> None:
        """The edges written since the last piece, to the sink (in lists: a call per edge took a fifth of
        the import)."""
        heads, rels, tails = self._sink_edges
        if heads and self.sink is not None:
            self.sink.add_edges(heads, rels, tails)
        heads.clear()
        rels.clear()
        tails.clear()

    def _record(self, record: Node | Edge) -> str:
        if isinstance(record, Node):
            return self._node(record)
        if isinstance(record, Edge):
            if self._late or (record.head in self.nodes and record.tail in self.nodes):
                return self._edge(record)
            self._edges.append(record)  # until every node has been seen (an edge may come before its nodes)
            return ""
        raise TypeError(f"importers yield Node or Edge records, not {type(record).__name__}")

    def triples(self, records: Iterable[Node | Edge], batch: int = 20000) -> Iterator[Triple]:
        """The same statements as pyoxigraph triples."""
        pending: list[str] = []
        for text in self.statements(records):
            pending.append(text)
            if len(pending) >= batch:
                yield from parse("".join(pending).encode(), RdfFormat.N_TRIPLES)
                pending.clear()
        if pending:
            yield from parse("".join(pending).encode(), RdfFormat.N_TRIPLES)

    def _term(self, lookup, name: str, where: str):
        """An ontology term by name; an unknown name is an error naming the record's place."""
        try:
            return lookup(name)
        except SchemaError as exc:
            raise SchemaError(f"{where}: {exc}" if where else str(exc)) from None

    def _iri(self, cache: dict[str, str], lookup, name: str, where: str) -> str:
        """The IRI of an ontology term by name, looked up once per name (edges name a few relations millions
        of times)."""
        iri = cache.get(name)
        if iri is None:
            iri = cache[name] = self._term(lookup, name, where).iri
        return iri

    def _field(self, name: str, where: str) -> tuple[str, str]:
        """A document field's IRI and how an error names it, looked up once per name (every node has fields)."""
        found = self._fields.get(name)
        if found is None:
            term = self._term(self.schema.field, name, where)
            found = self._fields[name] = (term.iri, f"field {term.name!r}")
        return found

    def _node(self, node: Node) -> str:
        node_id = node.id.strip()
        where = node.where
        if not node_id:
            raise InputError("node without an id", where)
        if len(node_id) > MAX_ID_CHARS:
            raise InputError(f"node id {node_id[:40]!r}… is {len(node_id):,} characters long; at most "
                             f"{MAX_ID_CHARS:,}", where)
        cls_iri = self._iri(self._classes, self.schema.node_class, node.type, where)
        name = clean_text(node.name)
        fields = ()
        if node.fields:
            fields = [(self._field(f, where), clean_text(v) if isinstance(v, str) else v) for f, v in node.fields]
            fields = [(iri, v, nt_literal(v, what, where)) if isinstance(v, str) else (iri, _lexical(v), _typed(v))
                      for (iri, what), v in fields if v != ""]
        if not name and not fields:
            self.report.empty_nodes += 1
            self.report.warn(f"{node.where or node_id}: node {node_id!r} has no name and no text; skipped")
            return ""
        sink = self.sink
        label = name or node_id
        label_line = f" <{RDFS_LABEL}> {nt_literal(label, 'the name', where)} .\n"
        seen = self.nodes.get(node_id)
        if seen is not None:
            if seen.type != cls_iri:
                raise InputError(
                    f"duplicate node id {node_id!r}: first seen as {seen.type} at {seen.where or '?'}, "
                    f"again as {cls_iri}",
                    node.where,
                )
            self.report.duplicate_nodes += 1
            self.report.warn(f"{node.where or node_id}: node {node_id!r} seen again; its text is merged")
            subject, handle = seen.term, seen.handle
            out = [subject + label_line]
        else:
            if node.iri_hint:
                try:
                    iri = as_named_node(node.iri_hint).value
                except SchemaError as exc:
                    raise InputError(str(exc), where) from None
            else:
                iri = node_iri(self.domain, node_id)
            other = self.subjects.setdefault(iri, node_id)
            if other != node_id:
                raise InputError(f"node {node_id!r} has the IRI <{iri}> of node {other!r} (first seen at "
                                 f"{self.nodes[other].where or '?'}); give each node its own 'iri'", where)
            subject = f"<{iri}>"
            handle = sink.node(iri, cls_iri, node_id) if sink is not None else -1
            self.nodes[node_id] = _Seen(iri, cls_iri, where, subject, handle)
            self.report.nodes += 1
            first = (f"{subject}{self._a_node}{subject} <{RDF_TYPE.value}> <{cls_iri}> .\n"
                     f"{subject} <{IDENTIFIER.value}> {nt_literal(node_id)} .\n")
            if self._imported:
                first += subject + self._imported
            out = [first + subject + label_line]
        if sink is not None:
            sink.literal(handle, RDFS_LABEL, label)
        for alias in node.aliases:
            alias = clean_text(alias)
            if alias and alias != name:
                out.append(f"{subject} <{ALIAS.value}> {nt_literal(alias, 'an alias', where)} .\n")
                if sink is not None:
                    sink.literal(handle, ALIAS.value, alias)
        for prop, value, form in fields:
            out.append(f"{subject} <{prop}> {form} .\n")
            if sink is not None:
                sink.literal(handle, prop, value)
        for xref in node.xrefs:
            xref = xref.strip()
            if xref:
                out.append(f"{subject} <{XREF.value}> {nt_literal(xref, 'a cross-reference', where)} .\n")
                if sink is not None:
                    sink.literal(handle, XREF.value, xref)
        return "".join(out)

    def _edge(self, edge: Edge) -> str:
        relation = self._iri(self._relations, self.schema.relation, edge.relation, edge.where)
        head, tail = self.nodes.get(edge.head), self.nodes.get(edge.tail)
        if head is None or tail is None:
            missing = edge.head if head is None else edge.tail
            message = f"edge {edge.head!r} -{edge.relation}-> {edge.tail!r} points at unknown node {missing!r}"
            if self.on_unknown_edge == "fail":
                raise InputError(message + " (use --on-unknown-edge skip to skip such edges)", edge.where)
            self.report.skipped_edges += 1
            self.report.warn(f"{edge.where or 'edge'}: {message}; skipped")
            return ""
        self.report.edges += 1
        heads, rels, tails = self._sink_edges
        heads.append(head.handle)
        rels.append(relation)
        tails.append(tail.handle)
        line = f"{head.term} <{relation}> {tail.term} .\n"
        if not edge.qualifiers:
            return line
        qualifiers = [(self._iri(self._qualifiers, self.schema.qualifier, name, edge.where),
                       nt_literal(clean_text(value), f"qualifier {name!r}", edge.where))
                      for name, value in edge.qualifiers]
        self._statements += 1
        statement = f"{self._blank}{self._statements}"
        out = [line,
               f"{statement} <{RDF_TYPE.value}> <{RDF_STATEMENT.value}> .\n",
               f"{statement} <{RDF_SUBJECT.value}> {head.term} .\n",
               f"{statement} <{RDF_PREDICATE.value}> <{relation}> .\n",
               f"{statement} <{RDF_OBJECT.value}> {tail.term} .\n"]
        out += [f"{statement} <{prop}> {form} .\n" for prop, form in qualifiers]
        if self.sink is not None:
            self.sink.link(RDF_SUBJECT.value)
            self.sink.link(RDF_OBJECT.value)
        return "".join(out)
