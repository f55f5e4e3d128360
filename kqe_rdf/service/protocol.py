"""The SPARQL 1.1 Protocol's side of an answer: content negotiation, the result formats (JSON, XML, CSV,
TSV; graphs as Turtle, N-Triples, JSON-LD, RDF/XML), errors with their HTTP status, and the cache of
rendered results.
"""

from __future__ import annotations

import collections
import csv
import io
import logging
import os
import re
import time
from json.encoder import encode_basestring as _quote  # the C encoder json.dumps uses
from pathlib import Path
from xml.sax.saxutils import escape, quoteattr

from pyoxigraph import (BlankNode, NamedNode, QueryBoolean, QueryResultsFormat, QuerySolutions, RdfFormat, Triple,
                       serialize)

from ..core.errors import KqeError
from ..kb.sparql_guard import ServiceNotAllowed

log = logging.getLogger(__name__)
XSD_STRING = "http://www.w3.org/2001/XMLSchema#string"
RDF_LANG_STRING = "http://www.w3.org/1999/02/22-rdf-syntax-ns#langString"

#: Media types for SELECT/ASK results and for graphs, the first of each the default (as ``oxigraph serve`` reads
#: them: text/plain is CSV for solutions and N-Triples for a graph; application/json and application/xml are
#: SPARQL results for solutions and JSON-LD and RDF/XML for a graph).
RESULT_TYPES = {"application/sparql-results+json": "json", "application/sparql-results+xml": "xml",
                "text/csv": "csv", "text/tab-separated-values": "tsv", "application/json": "json",
                "application/xml": "xml", "text/plain": "csv"}
GRAPH_TYPES = {"text/turtle": RdfFormat.TURTLE, "application/n-triples": RdfFormat.N_TRIPLES,
               "application/ld+json": RdfFormat.JSON_LD, "application/rdf+xml": RdfFormat.RDF_XML,
               "application/n-quads": RdfFormat.N_QUADS, "application/trig": RdfFormat.TRIG,
               "text/n3": RdfFormat.N3, "text/plain": RdfFormat.N_TRIPLES, "application/json": RdfFormat.JSON_LD,
               "application/xml": RdfFormat.RDF_XML}
#: Graph formats that take comments: a cut graph says so in its first line.
COMMENTED = {RdfFormat.TURTLE, RdfFormat.N_TRIPLES, RdfFormat.N_QUADS, RdfFormat.TRIG, RdfFormat.N3}
#: ``format=`` (also ``output=``, ``results=``) short names, for links, browsers that cannot set Accept and
#: clients such as SPARQLWrapper; each names a results type and a graph type, and the query's kind picks one
#: (SPARQLWrapper sends ``format=xml`` for a CONSTRUCT: RDF/XML).
FORMAT_NAMES = {"json": "application/sparql-results+json, application/ld+json",
                "xml": "application/sparql-results+xml, application/rdf+xml",
                "csv": "text/csv", "tsv": "text/tab-separated-values", "turtle": "text/turtle",
                "ttl": "text/turtle", "n3": "text/n3", "ntriples": "application/n-triples",
                "nt": "application/n-triples", "nquads": "application/n-quads", "trig": "application/trig",
                "jsonld": "application/ld+json", "json-ld": "application/ld+json", "rdfxml": "application/rdf+xml",
                "rdf": "application/rdf+xml", "rdf+xml": "application/rdf+xml"}
_FORMAT_PARAMS = ("format", "output", "results")


def accept_of(params: dict[str, list[str]], header: str) -> str:
    """What the client accepts: a ``format=`` parameter (short name or media type) over the Accept header.

    A format that does not fit the query's form (SPARQLWrapper sends ``format=turtle`` with a SELECT, ``format=csv``
    with a CONSTRUCT, and ``Accept: */*``) falls back to the header, and an empty header to the default format, as
    ``oxigraph serve`` answers (it reads the header alone): the header's types follow the parameter's at a lower
    quality.

    >>> accept_of({"format": ["csv"]}, "")
    'text/csv, */*;q=0.001'
    >>> negotiate(accept_of({"format": ["turtle"]}, "*/*"), list(RESULT_TYPES))
    'application/sparql-results+json'
    """
    for name in _FORMAT_PARAMS:
        values = params.get(name)
        if values and values[0]:
            value = values[0].strip().lower()
            chosen = FORMAT_NAMES.get(value, value if "/" in value else None)
            if chosen is None:
                return header
            return f"{chosen}, {_below(header or '*/*')}"
    return header


def _below(header: str) -> str:
    """An Accept header's types at a thousandth of their quality (each still ordered as the client ordered them)."""
    return ", ".join(f"{media};q={q / 1000:g}" for media, q in _accepted(header) if media)


def _accepted(header: str) -> list[tuple[str, float]]:
    """An Accept header's (media type, quality) items, in the client's order."""
    out = []
    for item in header.split(","):
        media, *params = [p.strip() for p in item.split(";")]
        q = 1.0
        for p in params:
            key, _, value = p.partition("=")
            if key.strip() == "q":
                try:
                    q = float(value)
                except ValueError:
                    q = 0.0
        out.append((media, q))
    return out


class HTTPError(KqeError):
    """An error with the HTTP status it is answered with."""

    def __init__(self, status: int, message: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.headers = headers or {}


def status_of(exc: KqeError) -> int:
    """The HTTP status a readable error is answered with (400 unless it says otherwise)."""
    if isinstance(exc, ServiceNotAllowed):
        return 403
    return getattr(exc, "status", 400)


# ---------------------------------------------------------------- content negotiation


def negotiate(accept: str, offered: list[str]) -> str | None:
    """The offered media type the Accept header prefers (q-values, wildcards); None if none fits.

    >>> negotiate("text/csv;q=0.5, application/sparql-results+json", ["text/csv", "application/sparql-results+json"])
    'application/sparql-results+json'
    >>> negotiate("image/png", ["text/csv"]) is None
    True
    """
    if not accept.strip():
        return offered[0]
    best, best_q = None, 0.0
    for position, (media, q) in enumerate(_accepted(accept)):
        media = media.lower()
        if media in ("*/*", "*"):
            match = offered[0]
        elif media.endswith("/*"):
            match = next((o for o in offered if o.startswith(media[:-1])), None)
        else:
            match = media if media in offered else None
        # Specific types beat wildcards at equal q; earlier beats later.
        rank = q - (0.0001 if "*" in media else 0.0) - position * 1e-6
        if match and q > 0 and rank > best_q:
            best, best_q = match, rank
    return best


# ---------------------------------------------------------------- result serialisers


def _json_term(term) -> str:
    """A term as SPARQL JSON text, written directly: the hot path of every JSON response."""
    kind = type(term)
    if kind is NamedNode:
        return '{"type":"uri","value":' + _quote(term.value) + "}"
    if kind is BlankNode:
        return '{"type":"bnode","value":' + _quote(term.value) + "}"
    if kind is Triple:
        return (f'{{"type":"triple","value":{{"subject":{_json_term(term.subject)},'
                f'"predicate":{_json_term(term.predicate)},"object":{_json_term(term.object)}}}}}')
    out = '{"type":"literal","value":' + _quote(term.value)
    if term.language:
        return out + ',"xml:lang":' + _quote(term.language) + "}"
    datatype = term.datatype.value
    if datatype != XSD_STRING:
        return out + ',"datatype":' + _quote(datatype) + "}"
    return out + "}"


def _xml_term(term) -> str:
    if isinstance(term, NamedNode):
        return f"<uri>{escape(term.value)}</uri>"
    if isinstance(term, BlankNode):
        return f"<bnode>{escape(term.value)}</bnode>"
    if isinstance(term, Triple):
        return (f"<triple><subject>{_xml_term(term.subject)}</subject><predicate>{_xml_term(term.predicate)}"
                f"</predicate><object>{_xml_term(term.object)}</object></triple>")
    if term.language:
        return f"<literal xml:lang={quoteattr(term.language)}>{escape(term.value)}</literal>"
    if term.datatype.value != XSD_STRING:
        return f"<literal datatype={quoteattr(term.datatype.value)}>{escape(term.value)}</literal>"
    return f"<literal>{escape(term.value)}</literal>"


def _csv_term(term) -> str:
    if term is None:
        return ""
    if isinstance(term, BlankNode):
        return "_:" + term.value
    if isinstance(term, Triple):
        return str(term)
    return term.value


def _tsv_term(term) -> str:
    return "" if term is None else str(term)  # N-Triples syntax: tabs and newlines in literals are escaped


def write_solutions(fmt: str, variables: list[str], rows: list, cut_at: int | None = None) -> bytes:
    """SELECT results in a SPARQL results format (json, xml, csv, tsv). Results cut at ``cut_at`` rows say so
    in the body: a ``link`` in the head (the format's place for metadata) and, in JSON, ``"truncated": true``."""
    link = f"urn:kqe:truncated?server_result_cap={cut_at}" if cut_at is not None else None
    if fmt == "json":
        names = [(v, _quote(v) + ":") for v in variables]
        bindings = []
        for row in rows:
            terms = [(name, row[v]) for v, name in names]
            bindings.append("{" + ",".join(name + _json_term(t) for name, t in terms if t is not None) + "}")
        head = '{"head":{"vars":[' + ",".join(_quote(v) for v in variables) + "]"
        head += (',"link":[' + _quote(link) + "]}") if link else "}"
        end = ',"truncated":true}' if link else "}"
        return (head + ',"results":{"bindings":[' + ",".join(bindings) + "]}" + end).encode()
    if fmt == "xml":
        out = ['<?xml version="1.0"?>\n<sparql xmlns="http://www.w3.org/2005/sparql-results#"><head>']
        out += [f"<variable name={quoteattr(v)}/>" for v in variables]
        out += [f"<link href={quoteattr(link)}/>"] if link else []
        out.append("</head><results>")
        for row in rows:
            out.append("<result>")
            out += [f"<binding name={quoteattr(v)}>{_xml_term(row[v])}</binding>" for v in variables
                    if row[v] is not None]
            out.append("</result>")
        out.append("</results></sparql>\n")
        return "".join(out).encode()
    if fmt == "csv":
        buffer = io.StringIO()
        writer = csv.writer(buffer, lineterminator="\r\n")
        writer.writerow(variables)
        writer.writerows([_csv_term(row[v]) for v in variables] for row in rows)
        return buffer.getvalue().encode()
    lines = ["\t".join("?" + v for v in variables)]
    lines += ["\t".join(_tsv_term(row[v]) for v in variables) for row in rows]
    return ("\n".join(lines) + "\n").encode()


_BOOLEAN_FORMATS = {"json": QueryResultsFormat.JSON, "xml": QueryResultsFormat.XML, "csv": QueryResultsFormat.CSV,
                    "tsv": QueryResultsFormat.TSV}


class Rendered:
    """A finished response body with its media type, whether the result cap cut it, and whether the same query
    always gives the same body (then the server may answer it again from :class:`ResultCache`)."""

    def __init__(self, body: bytes, media: str, truncated: bool = False, searches: list | None = None,
                 repeatable: bool = False, graph: bool = False) -> None:
        self.body, self.media, self.truncated, self.searches = body, media, truncated, searches or []
        self.repeatable, self.graph = repeatable, graph


#: Functions whose value changes from one evaluation to the next: a query using one is never answered from cache.
VOLATILE = re.compile(r"\b(RAND|NOW|UUID|STRUUID|BNODE)\s*\(", re.IGNORECASE)


class ResultCache:
    """Recent SELECT/ASK answers of a read-only server, by query, format and dataset, within a byte budget.

    A read-only store gives the same answer to the same deterministic query, so a
    repeated query (a dashboard, a page reloaded, a crawler) costs no worker. It is
    emptied when the KB is rebuilt (its ``store`` folder changes); queries with
    volatile functions, SERVICE calls or graph results are never kept.
    """

    def __init__(self, budget: int, kb_path: Path) -> None:
        self.budget, self.store = budget, Path(kb_path) / "store"
        self.entries: collections.OrderedDict[tuple, tuple[Rendered, int]] = collections.OrderedDict()
        self.size, self.identity = 0, self._identity()

    def _identity(self) -> tuple[int, int] | None:
        try:
            st = os.stat(self.store)
        except OSError:
            return None
        return st.st_dev, st.st_ino

    def get(self, key: tuple) -> Rendered | None:
        identity = self._identity()
        if identity != self.identity:
            self.entries.clear()
            self.size, self.identity = 0, identity
            return None
        found = self.entries.get(key)
        if found is None:
            return None
        self.entries.move_to_end(key)
        return found[0]

    def put(self, key: tuple, rendered: Rendered, identity: tuple[int, int] | None) -> None:
        """Keep an answer computed on the KB ``identity`` (the cache's when the request began): not if the KB was
        rebuilt since, or the answer of the old KB would be served for the new one."""
        cost = len(rendered.body) + sum(map(len, key[:2])) + 200
        if not rendered.repeatable or cost > self.budget // 16 or identity != self.identity \
                or identity != self._identity():
            return
        old = self.entries.pop(key, None)
        if old is not None:
            self.size -= old[1]
        self.entries[key] = (rendered, cost)
        self.size += cost
        while self.size > self.budget:
            _, (_, dropped) = self.entries.popitem(last=False)
            self.size -= dropped


def _take(iterator, cap: int, deadline: float) -> tuple[list, bool]:
    """At most ``cap`` items; stops with 503 once the deadline passes (checked every 64 rows)."""
    rows = []
    for n, item in enumerate(iterator):
        if n >= cap:
            return rows, True
        if n % 64 == 0 and time.monotonic() > deadline:
            raise QueryTimeout("the query ran out of time while its results were read")
        rows.append(item)
    return rows, False


class _TooLong(Exception):
    """Raised by :class:`_Bounded` to stop pyoxigraph's serializer."""


class _Bounded:
    """Where pyoxigraph writes a result: it gives up past ``limit`` bytes, and with 503 past the deadline."""

    def __init__(self, limit: int, deadline: float) -> None:
        self.limit, self.deadline, self.size, self.parts = limit, deadline, 0, []

    def write(self, data) -> int:
        self.size += len(data)
        if self.size > self.limit:
            raise _TooLong
        if time.monotonic() > self.deadline:
            raise QueryTimeout("the query ran out of time while its results were written")
        self.parts.append(bytes(data))
        return len(data)

    def flush(self) -> None:
        pass


#: Fewest bytes a solution takes in SPARQL JSON (``{}`` and a comma): a JSON body of at most 3 × cap bytes
#: holds at most ``cap`` solutions.
MIN_JSON_SOLUTION = 3


def render(result, accept: str, cap: int, deadline: float, again=None) -> Rendered:
    """Serialise a pyoxigraph query result in the negotiated format, cut at ``cap`` rows.

    SELECT results in JSON are written by pyoxigraph itself when they are small
    enough to be within the cap for sure (most answers; half the worker's time for a
    simple query went to writing them in Python); a longer one is evaluated again
    (``again()``: the same query's result) and cut at ``cap`` here.
    """
    if isinstance(result, (QuerySolutions, QueryBoolean)):
        media = negotiate(accept, list(RESULT_TYPES))
        if media is None:
            raise HTTPError(406, "no acceptable format for query results: ask for application/sparql-results+json, "
                                 "application/sparql-results+xml, text/csv or text/tab-separated-values")
        fmt = RESULT_TYPES[media]
        if isinstance(result, QueryBoolean):  # written as oxigraph serve writes it (CSV and TSV: a bare value)
            return Rendered(result.serialize(format=_BOOLEAN_FORMATS[fmt]), media)
        if fmt == "json" and again is not None:
            target = _Bounded(MIN_JSON_SOLUTION * cap, deadline)
            try:
                result.serialize(target, format=QueryResultsFormat.JSON)
                return Rendered(b"".join(target.parts), media)
            except _TooLong:
                result = again()
        variables = [v.value for v in result.variables]
        rows, truncated = _take(result, cap, deadline)
        return Rendered(write_solutions(fmt, variables, rows, cap if truncated else None), media, truncated)
    media = negotiate(accept, list(GRAPH_TYPES))
    if media is None:
        raise HTTPError(406, "no acceptable format for a graph: ask for text/turtle, application/n-triples, "
                             "application/n-quads, application/trig, application/ld+json or application/rdf+xml")
    triples, truncated = _take(result, cap, deadline)
    body = serialize(triples, format=GRAPH_TYPES[media]) or b""
    if truncated and GRAPH_TYPES[media] in COMMENTED:
        body = f"# results cut at server_result_cap={cap}\n".encode() + body
    return Rendered(body, media, truncated, graph=True)


# ---------------------------------------------------------------- jobs (run in the worker processes)


class QueryTimeout(HTTPError):
    def __init__(self, message: str) -> None:
        super().__init__(503, message, {"Retry-After": "5"})
