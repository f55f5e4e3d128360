"""The W3C SPARQL 1.1 test suites (w3c/rdf-tests, ``sparql/sparql11``) run over the SPARQL 1.1 Protocol.

:func:`run_suite` sends every test of the chosen groups to an endpoint — ``kqe-rdf serve`` or
``oxigraph serve`` alike — and compares the answer with the test's expected result:

* query evaluation: the store is emptied (``DROP ALL``) and loaded (``INSERT DATA``, the named graphs
  under their files' IRIs), the query is sent with ``BASE`` its file's IRI, and the solutions (blank
  nodes aside), the boolean or the graph (up to blank-node isomorphism) must equal the expected ones;
* syntax: a positive test must be answered 2xx, a negative one 400;
* update evaluation: loaded as above, the update sent to the update URL, then the default graph and
  every named graph read back and compared with the expected ones.

The ``service`` tests (group ``federation``) name endpoints with data of their own (``qt:serviceData``):
:class:`ServiceEndpoints` serves each on loopback, and the test's text and data name the loopback URL instead
(the answers are read back with the original IRIs). Any other test that mentions SERVICE or LOAD outside
strings and comments is counted as ``federation``: its endpoints are off this machine, so it is sent only to
an endpoint that refuses it (``federation_safe``) and never to ``oxigraph serve``, which would call them.

The suite is not in this repository (its files come from w3c/rdf-tests, under its W3C licence): it is
read from ``KQE_W3C_SPARQL11`` or ``../shared/data/w3c-rdf-tests/sparql/sparql11``.
"""

from __future__ import annotations

import collections
import decimal
import os
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import httpx
from pyoxigraph import (BlankNode, Literal, NamedNode, QueryBoolean, QueryResultsFormat, RdfFormat, Store, parse,
                        parse_query_results)

from kqe_rdf.kb.sparql_guard import mentions_federation
from support.paths import SHARED_DATA

# Resolved, as the manifests' file IRIs are: ../shared may be a symlink (or a copy).
SUITE = Path(os.environ.get("KQE_W3C_SPARQL11") or
             SHARED_DATA / "w3c-rdf-tests" / "sparql" / "sparql11").resolve()
BASE = "http://www.w3.org/2009/sparql/docs/tests/data-sparql11/"
MF = "http://www.w3.org/2001/sw/DataAccess/tests/test-manifest#"
QT = "http://www.w3.org/2001/sw/DataAccess/tests/test-query#"
UT = "http://www.w3.org/2009/sparql/tests/test-update#"
DAWGT = "http://www.w3.org/2001/sw/DataAccess/tests/test-dawg#"
RDF = "http://www.w3.org/1999/02/22-rdf-syntax-ns#"
RS = "http://www.w3.org/2001/sw/DataAccess/tests/result-set#"
LABEL = NamedNode("http://www.w3.org/2000/01/rdf-schema#label")

#: The groups of the issue's table and the folders their tests are in.
GROUPS = {
    "query evaluation": ["aggregates", "bind", "bindings", "cast", "construct", "exists", "functions", "grouping",
                         "negation", "project-expression", "property-path", "subquery"],
    "query syntax": ["syntax-query", "syntax-fed"],
    "update syntax": ["syntax-update-1", "syntax-update-2"],
    "update evaluation": ["add", "basic-update", "clear", "copy", "delete-data", "delete-insert", "delete-where",
                          "delete", "drop", "move", "update-silent"],
    "federation": ["service"],
}
KINDS = {MF + "QueryEvaluationTest": "query", MF + "PositiveSyntaxTest11": "syntax+",
         MF + "NegativeSyntaxTest11": "syntax-", MF + "PositiveUpdateSyntaxTest11": "update-syntax+",
         MF + "NegativeUpdateSyntaxTest11": "update-syntax-", MF + "UpdateEvaluationTest": "update"}
RESULT_FORMATS = {".srx": QueryResultsFormat.XML, ".srj": QueryResultsFormat.JSON,
                  ".tsv": QueryResultsFormat.TSV, ".csv": QueryResultsFormat.CSV}
ACCEPT = "application/sparql-results+json, application/n-triples;q=0.9"


@dataclass
class Case:
    """One test: what to load, what to send and what to expect."""

    group: str
    name: str
    kind: str
    text: Path
    data: list[Path] = field(default_factory=list)
    graphs: list[tuple[str, Path]] = field(default_factory=list)  # (graph IRI, file)
    result: Path | None = None
    result_graphs: list[tuple[str, Path]] = field(default_factory=list)
    services: list[tuple[str, Path]] = field(default_factory=list)  # (endpoint IRI, its data)

    @property
    def federation(self) -> bool:
        return mentions_federation(self.text.read_text(encoding="utf-8"))


@dataclass
class Endpoint:
    """Where to send queries and updates; ``federation_safe``: it refuses SERVICE/LOAD off its allow-list."""

    query: str
    update: str
    headers: dict = field(default_factory=dict)
    federation_safe: bool = False


def iri(path: Path) -> str:
    return BASE + path.resolve().relative_to(SUITE).as_posix()


# ---------------------------------------------------------------- manifests


class _Graph:
    def __init__(self, path: Path) -> None:
        self.store = Store()
        self.store.load(path=str(path), format=RdfFormat.TURTLE, base_iri=path.resolve().as_uri())

    def objects(self, subject, predicate: str) -> list:
        return [q.object for q in self.store.quads_for_pattern(subject, NamedNode(predicate), None)]

    def one(self, subject, predicate: str):
        found = self.objects(subject, predicate)
        return found[0] if found else None

    def items(self, head) -> list:
        out = []
        while head is not None and head != NamedNode(RDF + "nil"):
            out.append(self.one(head, RDF + "first"))
            head = self.one(head, RDF + "rest")
        return out


def _path(node) -> Path:
    return Path(node.value.removeprefix("file://"))


def cases(group: str) -> list[Case]:
    """The approved tests of one group, in manifest order."""
    out = []
    for folder in GROUPS[group]:
        manifest = _Graph(SUITE / folder / "manifest.ttl")
        [root] = [q.subject for q in manifest.store.quads_for_pattern(None, NamedNode(MF + "entries"), None)]
        for test in manifest.items(manifest.one(root, MF + "entries")):
            kind = KINDS.get(manifest.one(test, RDF + "type").value)
            approval = manifest.one(test, DAWGT + "approval")
            if kind is None or (approval is not None and approval.value.endswith(("Withdrawn", "Rejected"))):
                continue
            name = f"{folder}/{test.value.rsplit('#', 1)[-1]}"
            action, result = manifest.one(test, MF + "action"), manifest.one(test, MF + "result")
            if kind.startswith(("syntax", "update-syntax")):
                out.append(Case(group, name, kind, _path(action)))
            elif kind == "query":
                services = [(manifest.one(s, QT + "endpoint").value, _path(manifest.one(s, QT + "data")))
                            for s in manifest.objects(action, QT + "serviceData")]
                out.append(Case(group, name, kind, _path(manifest.one(action, QT + "query")),
                                [_path(d) for d in manifest.objects(action, QT + "data")],
                                [(iri(_path(g)), _path(g)) for g in manifest.objects(action, QT + "graphData")],
                                _path(result), services=services))
            else:
                def graphs(node):
                    return [(manifest.one(g, LABEL.value).value, _path(manifest.one(g, UT + "graph")))
                            for g in manifest.objects(node, UT + "graphData")]
                out.append(Case(group, name, kind, _path(manifest.one(action, UT + "request")),
                                [_path(d) for d in manifest.objects(action, UT + "data")], graphs(action),
                                next(iter(_path(d) for d in manifest.objects(result, UT + "data")), None),
                                graphs(result)))
    return out


# ---------------------------------------------------------------- running


def _triples(path: Path) -> list:
    fmt = RdfFormat.RDF_XML if path.suffix == ".rdf" else RdfFormat.TURTLE
    return list(parse(path=str(path), format=fmt, base_iri=iri(path)))


#: Every endpoint the ``service`` tests name; each is served on loopback while the suite runs.
SERVICE_IRIS = ("http://example.org/sparql", "http://example1.org/sparql", "http://example2.org/sparql",
                "http://example3.org/sparql", "http://invalid.endpoint.org/sparql")


class ServiceEndpoints:
    """A loopback SPARQL endpoint for each of :data:`SERVICE_IRIS` (``http://127.0.0.1:PORT/HOST/sparql``), over
    the data of the running test's ``qt:serviceData``; one the test gives no data answers 404, a failing endpoint.

    ``urls`` maps each IRI to its loopback URL (for an allow-list); :meth:`rewrite` puts the URLs into a
    test's text and data, :meth:`original` puts the IRIs back into an answer."""

    def __init__(self) -> None:
        self.stores: dict[str, Store] = {}
        stores = self.stores

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                pass

            def _answer(self, query: str | None) -> None:
                store = stores.get(urlsplit(self.path).path)
                if store is None or not query:
                    self.send_response(404)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                body = store.query(query).serialize(format=QueryResultsFormat.JSON)
                self.send_response(200)
                self.send_header("Content-Type", "application/sparql-results+json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self) -> None:  # noqa: N802
                self._answer(parse_qs(urlsplit(self.path).query).get("query", [None])[0])

            def do_POST(self) -> None:  # noqa: N802
                body = self.rfile.read(int(self.headers.get("Content-Length", 0))).decode("utf-8")
                if self.headers.get("Content-Type", "").startswith("application/x-www-form-urlencoded"):
                    body = parse_qs(body).get("query", [None])[0]
                self._answer(body)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        port = self.server.server_address[1]
        self.urls = {name: f"http://127.0.0.1:{port}/{urlsplit(name).netloc}/sparql" for name in SERVICE_IRIS}
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def load(self, case: Case) -> None:
        self.stores.clear()
        for name, path in case.services:
            store = self.stores.setdefault(urlsplit(self.urls[name]).path, Store())
            store.extend(_triples(path))

    def rewrite(self, text: str) -> str:
        for name, url in self.urls.items():
            text = text.replace(name, url)
        return text

    def original(self, text: str) -> str:
        for name, url in self.urls.items():
            text = text.replace(url, name)
        return text

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def _load(client: httpx.Client, endpoint: Endpoint, case: Case, rewrite=lambda text: text) -> None:
    blocks = [" ".join(str(t) + " ." for path in case.data for t in _triples(path))]
    blocks += [f"GRAPH <{name}> {{ " + " ".join(str(t) + " ." for t in _triples(path)) + " }"
               for name, path in case.graphs]
    for text in ["DROP ALL"] + ([rewrite(f"INSERT DATA {{ {' '.join(blocks)} }}")] if any(blocks) else []):
        response = client.post(endpoint.update, content=text.encode(), headers={
            **endpoint.headers, "Content-Type": "application/sparql-update"})
        if response.status_code >= 300:
            raise RuntimeError(f"{case.name}: loading its data failed: {response.status_code} {response.text[:200]}")


XSD = "http://www.w3.org/2001/XMLSchema#"
_NUMBERS = {XSD + t for t in ("integer", "decimal", "double", "float", "int", "long", "short", "byte",
                              "nonNegativeInteger", "positiveInteger", "negativeInteger", "nonPositiveInteger",
                              "unsignedInt", "unsignedLong", "unsignedShort", "unsignedByte")}


def _key(term) -> str:
    """A term as compared: blank nodes alike, numbers by value ("1.0" and "1" are one decimal)."""
    if isinstance(term, BlankNode):
        return "_:"
    if isinstance(term, Literal) and term.datatype.value == XSD + "boolean":
        return {"1": "true", "0": "false"}.get(term.value, term.value) + "^^boolean"
    if isinstance(term, Literal) and term.datatype.value in _NUMBERS:
        try:
            return f"{decimal.Decimal(term.value.strip()).normalize()}^^{term.datatype.value}"
        except decimal.InvalidOperation:
            return str(term)
    return str(term)


def _solutions(rows, variables) -> collections.Counter:
    return collections.Counter(frozenset((v, _key(row[v])) for v in variables if row[v] is not None) for row in rows)


def _result_set(path: Path):
    """Expected solutions or boolean from a result file (SPARQL XML/JSON/TSV/CSV, or an RDF result set)."""
    if path.suffix in RESULT_FORMATS:
        result = parse_query_results(path=str(path), format=RESULT_FORMATS[path.suffix])
        if isinstance(result, QueryBoolean):
            return bool(result)
        variables = [v.value for v in result.variables]
        return _solutions(list(result), variables)
    graph = Store()
    graph.extend(_triples(path))
    sets = [q.subject for q in graph.quads_for_pattern(None, NamedNode(RDF + "type"), NamedNode(RS + "ResultSet"))]
    if not sets:
        return _canonical(graph.quads_for_pattern(None, None, None))
    boolean = list(graph.quads_for_pattern(sets[0], NamedNode(RS + "boolean"), None))
    if boolean:
        return boolean[0].object.value == "true"
    rows = collections.Counter()
    for solution in graph.quads_for_pattern(sets[0], NamedNode(RS + "solution"), None):
        pairs = []
        for binding in graph.quads_for_pattern(solution.object, NamedNode(RS + "binding"), None):
            name = next(graph.quads_for_pattern(binding.object, NamedNode(RS + "variable"), None)).object.value
            value = next(graph.quads_for_pattern(binding.object, NamedNode(RS + "value"), None)).object
            pairs.append((name, _key(value)))
        rows[frozenset(pairs)] += 1
    return rows


def _canonical(quads) -> frozenset:
    """A graph up to blank-node renaming (rdflib's canonical form), for comparison."""
    import rdflib
    from rdflib.compare import to_canonical_graph

    graph = rdflib.Graph().parse(data="\n".join(str(q.triple) + " ." for q in quads), format="nt")
    return frozenset(to_canonical_graph(graph))


def _answer(response: httpx.Response, original=lambda text: text):
    media = response.headers.get("content-type", "").split(";")[0]
    if media == "application/sparql-results+json":
        result = parse_query_results(original(response.text).encode("utf-8"), format=QueryResultsFormat.JSON)
        if isinstance(result, QueryBoolean):
            return bool(result)
        return _solutions(list(result), [v.value for v in result.variables])
    return _canonical(parse(response.content, format=RdfFormat.N_TRIPLES))


def _graph(client: httpx.Client, endpoint: Endpoint, name: str | None) -> frozenset:
    where = f"GRAPH <{name}> {{ ?s ?p ?o }}" if name else "?s ?p ?o"
    response = client.post(endpoint.query, data={"query": f"CONSTRUCT {{ ?s ?p ?o }} WHERE {{ {where} }}"},
                           headers={"Accept": "application/n-triples"})
    response.raise_for_status()
    return _canonical(parse(response.content, format=RdfFormat.N_TRIPLES))


def _names(client: httpx.Client, endpoint: Endpoint) -> set[str]:
    response = client.post(endpoint.query, data={"query": "SELECT DISTINCT ?g WHERE { GRAPH ?g { ?s ?p ?o } }"},
                           headers={"Accept": "application/sparql-results+json"})
    response.raise_for_status()
    return {b["g"]["value"] for b in response.json()["results"]["bindings"]}


def run_case(client: httpx.Client, endpoint: Endpoint, case: Case, services: ServiceEndpoints | None = None) -> str:
    """``pass``, ``fail``, ``400``, ``403``, ``5xx`` (any other status) or ``federation`` (not sent). A test
    with service data is sent when ``services`` serve it (its endpoints then on loopback)."""
    text = case.text.read_text(encoding="utf-8")
    rewrite = original = lambda text: text  # noqa: E731
    if services is not None and (case.services or case.group == "federation"):
        services.load(case)
        rewrite, original = services.rewrite, services.original
        text = rewrite(text)
    elif case.federation and not endpoint.federation_safe:
        return "federation"
    update = case.kind.startswith("update")
    if case.kind in ("query", "update"):
        _load(client, endpoint, case, rewrite)
        if not case.federation:
            text = f"BASE <{iri(case.text)}>\n{text}"
    elif update:
        _load(client, endpoint, case)
    if update:
        response = client.post(endpoint.update, content=text.encode("utf-8"),
                               headers={**endpoint.headers, "Content-Type": "application/sparql-update"})
    else:
        response = client.post(endpoint.query, content=text.encode("utf-8"),
                               headers={"Content-Type": "application/sparql-query", "Accept": ACCEPT})
    status = response.status_code
    if case.kind.endswith("-"):
        return "pass" if status == 400 else ("fail" if status < 300 else _status(status))
    if status >= 300:
        return _status(status)
    if case.kind.endswith("+"):
        return "pass"
    if case.kind == "query":
        try:
            return "pass" if _answer(response, original) == _result_set(case.result) else "fail"
        except (SyntaxError, ValueError):  # an answer that breaks off (`oxigraph serve` on an unbound SERVICE ?x)
            return "fail"
    expected = {None: _result_set(case.result) if case.result else frozenset()}
    expected.update({name: _canonical(q for q in parse(path=str(path), format=RdfFormat.TURTLE, base_iri=iri(path)))
                     for name, path in case.result_graphs})
    actual = {name: _graph(client, endpoint, name) for name in _names(client, endpoint) | set(expected) - {None}}
    actual[None] = _graph(client, endpoint, None)
    actual = {k: v for k, v in actual.items() if v or k is None}
    expected = {k: v for k, v in expected.items() if v or k is None}
    return "pass" if actual == expected else "fail"


def _status(status: int) -> str:
    return {400: "400", 403: "403"}.get(status, "5xx" if status >= 500 else str(status))


def run_suite(endpoint: Endpoint, groups=tuple(GROUPS), restart=None,
              services: ServiceEndpoints | None = None) -> dict[str, dict[str, str]]:
    """Every test's outcome, by group and test name. ``restart()`` brings a crashed endpoint back (then the
    test that crashed it counts as ``5xx``); ``services`` serve the ``service`` tests' endpoints."""
    out: dict[str, dict[str, str]] = {}
    with httpx.Client(timeout=60) as client:
        for group in groups:
            out[group] = {}
            for case in cases(group):
                try:
                    out[group][case.name] = run_case(client, endpoint, case, services)
                except httpx.TransportError:
                    out[group][case.name] = "5xx"
                    if restart is None:
                        raise
                    restart()
    return out


OUTCOMES = ("pass", "fail", "400", "403", "5xx", "federation")


def table(results: dict[str, dict[str, dict[str, str]]]) -> str:
    """A Markdown table of outcome counts: one row per group, one column block per endpoint."""
    names = list(results)
    head = "| group | n | " + " | ".join(f"{name}: {' / '.join(OUTCOMES)}" for name in names) + " |"
    lines = [head, "|" + "---|" * (2 + len(names))]
    for group in GROUPS:
        n = len(results[names[0]][group])
        counts = [collections.Counter(results[name][group].values()) for name in names]
        cells = [" / ".join(str(c[o]) for o in OUTCOMES) for c in counts]
        lines.append(f"| {group} | {n} | " + " | ".join(cells) + " |")
    return "\n".join(lines)
