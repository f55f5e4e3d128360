"""The knowledge service: a SPARQL 1.1 endpoint with search inside SPARQL, a REST API and a web page.

``create_app(kb, settings)`` builds the ASGI app (starlette); ``kqe-rdf serve``
runs it with uvicorn. Routes:

* ``/sparql`` (also ``/query``): the SPARQL 1.1 Protocol — GET, POST urlencoded
  and POST ``application/sparql-query``; ``default-graph-uri`` /
  ``named-graph-uri``; results as SPARQL JSON, XML, CSV or TSV, graphs as
  Turtle, N-Triples, JSON-LD or RDF/XML (``Accept``, or ``format=``); GET
  without a query returns the service description. ``kqe:bm25``,
  ``kqe:similarity`` and ``SERVICE <urn:kqe:search>`` work in every query
  (:mod:`kqe_rdf.sparql_search`); other SERVICE calls (and LOAD) only to allow-listed endpoints, verified
  by a real SPARQL parser, and queries over the size limits get 400 (:mod:`kqe_rdf.sparql_guard`).
* ``/update``: SPARQL Update, off unless the server has an update token and the
  request sends it (``Authorization: Bearer TOKEN``).
* ``/search``, ``/triplets``, ``/expand``, ``/answer``: JSON with provenance;
  ``/openapi.json`` describes them. ``/`` is the web page (``kqe_rdf/web``).

Every query, update and REST call runs in a worker process (:mod:`kqe_rdf.workers`,
``server_query_slots`` of them): a job past ``server_query_timeout`` gets 503 and its
worker is killed, so it stops using CPU and memory at once; a worker has a memory
limit; one client (IP address) holds at most ``server_client_share`` of the workers.
A request that finds no worker for a whole timeout also gets 503: no request hangs
and nothing runs on after its answer. Headers must arrive within
``server_header_timeout`` and a body within ``server_body_timeout``. Clients never
see a stack trace.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import csv
import dataclasses
import hmac
import io
import json
import logging
import math
import os
import re
import time
from json.encoder import encode_basestring as _quote  # the C encoder json.dumps uses
from pathlib import Path
from urllib.parse import parse_qsl
from xml.sax.saxutils import escape, quoteattr

from pyoxigraph import (BlankNode, Literal, NamedNode, QueryBoolean, QueryResultsFormat, QuerySolutions, RdfFormat,
                        Triple, serialize)

from .errors import KqeError, SparqlError
from .sparql_search import ServiceNotAllowed, allowed_endpoints, execute, prepare

log = logging.getLogger("kqe_rdf.server")
WEB = Path(__file__).parent / "web"
XSD_STRING = "http://www.w3.org/2001/XMLSchema#string"
RDF_LANG_STRING = "http://www.w3.org/1999/02/22-rdf-syntax-ns#langString"

#: Media types for SELECT/ASK results and for graphs, the first of each the default.
RESULT_TYPES = {"application/sparql-results+json": "json", "application/sparql-results+xml": "xml",
                "text/csv": "csv", "text/tab-separated-values": "tsv", "application/json": "json",
                "application/xml": "xml"}
GRAPH_TYPES = {"text/turtle": RdfFormat.TURTLE, "application/n-triples": RdfFormat.N_TRIPLES,
               "application/ld+json": RdfFormat.JSON_LD, "application/rdf+xml": RdfFormat.RDF_XML,
               "text/plain": RdfFormat.N_TRIPLES}
#: ``format=`` short names, for links and browsers that cannot set Accept.
FORMAT_NAMES = {"json": "application/sparql-results+json", "xml": "application/sparql-results+xml",
                "csv": "text/csv", "tsv": "text/tab-separated-values", "turtle": "text/turtle",
                "ttl": "text/turtle", "ntriples": "application/n-triples", "nt": "application/n-triples",
                "jsonld": "application/ld+json", "rdfxml": "application/rdf+xml"}


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
    for position, item in enumerate(accept.split(",")):
        media, *params = [p.strip() for p in item.split(";")]
        q = 1.0
        for p in params:
            key, _, value = p.partition("=")
            if key.strip() == "q":
                try:
                    q = float(value)
                except ValueError:
                    q = 0.0
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


def write_solutions(fmt: str, variables: list[str], rows: list) -> bytes:
    """SELECT results in a SPARQL results format (json, xml, csv, tsv)."""
    if fmt == "json":
        names = [(v, _quote(v) + ":") for v in variables]
        bindings = []
        for row in rows:
            terms = [(name, row[v]) for v, name in names]
            bindings.append("{" + ",".join(name + _json_term(t) for name, t in terms if t is not None) + "}")
        head = '{"head":{"vars":[' + ",".join(_quote(v) for v in variables) + ']},"results":{"bindings":['
        return (head + ",".join(bindings) + "]}}").encode()
    if fmt == "xml":
        out = ['<?xml version="1.0"?>\n<sparql xmlns="http://www.w3.org/2005/sparql-results#"><head>']
        out += [f"<variable name={quoteattr(v)}/>" for v in variables]
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


def write_boolean(fmt: str, value: bool) -> bytes:
    if fmt == "xml":
        return (f'<?xml version="1.0"?>\n<sparql xmlns="http://www.w3.org/2005/sparql-results#"><head/>'
                f"<boolean>{str(value).lower()}</boolean></sparql>\n").encode()
    if fmt in ("csv", "tsv"):
        return f"{'_askResult' if fmt == 'csv' else '?_askResult'}\n{str(value).lower()}\n".encode()
    return json.dumps({"head": {}, "boolean": value}).encode()


class Rendered:
    """A finished response body with its media type, whether the result cap cut it, and whether the same query
    always gives the same body (then the server may answer it again from :class:`ResultCache`)."""

    def __init__(self, body: bytes, media: str, truncated: bool = False, searches: list | None = None,
                 repeatable: bool = False) -> None:
        self.body, self.media, self.truncated, self.searches = body, media, truncated, searches or []
        self.repeatable = repeatable


#: Functions whose value changes from one evaluation to the next: a query using one is never answered from cache.
_VOLATILE = re.compile(r"\b(RAND|NOW|UUID|STRUUID|BNODE)\s*\(", re.IGNORECASE)


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

    def put(self, key: tuple, rendered: Rendered) -> None:
        cost = len(rendered.body) + sum(map(len, key[:2])) + 200
        if not rendered.repeatable or cost > self.budget // 16:
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
        if isinstance(result, QueryBoolean):
            return Rendered(write_boolean(fmt, bool(result)), media)
        if fmt == "json" and again is not None:
            target = _Bounded(MIN_JSON_SOLUTION * cap, deadline)
            try:
                result.serialize(target, format=QueryResultsFormat.JSON)
                return Rendered(b"".join(target.parts), media)
            except _TooLong:
                result = again()
        variables = [v.value for v in result.variables]
        rows, truncated = _take(result, cap, deadline)
        return Rendered(write_solutions(fmt, variables, rows), media, truncated)
    media = negotiate(accept, list(GRAPH_TYPES))
    if media is None:
        raise HTTPError(406, "no acceptable format for a graph: ask for text/turtle, application/n-triples, "
                             "application/ld+json or application/rdf+xml")
    triples, truncated = _take(result, cap, deadline)
    return Rendered(serialize(triples, format=GRAPH_TYPES[media]) or b"", media, truncated)


# ---------------------------------------------------------------- jobs (run in the worker processes)


class QueryTimeout(HTTPError):
    def __init__(self, message: str) -> None:
        super().__init__(503, message, {"Retry-After": "5"})


def one(params: dict, name: str, default=None, kind=str):
    """The first value of a REST parameter, as ``kind``; 400 naming the parameter when missing or malformed."""
    values = params.get(name)
    if not values:
        if default is None:
            raise HTTPError(400, f"missing parameter '{name}'")
        return default
    value = values[0]
    if kind is int:
        try:
            if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
                raise TypeError(value)
            return int(value)
        except (TypeError, ValueError, OverflowError):
            raise HTTPError(400, f"parameter '{name}' must be a whole number, got {value!r}") from None
    if kind is bool:
        return str(value).lower() in ("1", "true", "yes", "on")
    return str(value)


def _text(params: dict) -> str:
    """The request text ``q``: present and not blank."""
    text = one(params, "q")
    if not text.strip():
        raise HTTPError(400, "parameter 'q' is empty: give some words")
    return text


def _types(kb, params: dict) -> list[str]:
    """The ``type`` filters, each a class of the KB's ontology."""
    types = [str(t) for t in params.get("type", []) if str(t).strip()]
    try:
        kb.resolve_types(types)
    except KqeError as exc:
        raise HTTPError(400, f"parameter 'type': {exc}") from None
    return types


def search_job(kb, settings, params: dict) -> dict:
    from .cli import _result_rows
    from .retrieval import METHODS, pipeline

    text = _text(params)
    method = one(params, "method", "bm25")
    if method not in METHODS:
        raise HTTPError(400, f"parameter 'method': no retrieval method {method!r}; available: {', '.join(METHODS)}")
    k = one(params, "k", settings.k, int)
    if not 1 <= k <= 1000:
        raise HTTPError(400, "parameter 'k' must be between 1 and 1000")
    types = _types(kb, params)
    stage = pipeline(method, kb, settings, k, types or None)
    batch = stage.run(text)
    return {"query": text, "method": method, "k": k, "types": types,
            "results": _result_rows(kb, batch.ranked("q")),
            "provenance": {"pipeline": repr(stage), "explain": batch.explain.get("q")}}


def triplets_job(kb, settings, params: dict) -> dict:
    from .retrieval import pipeline

    text = _text(params)
    mode = "strict" if one(params, "strict", False, bool) else "soft"
    stage = pipeline("4step", kb, dataclasses.replace(settings, fourstep_mode=mode), settings.k)
    return {"query": text, **stage.reading(text)}


def expand_job(kb, settings, params: dict) -> dict:
    from .expansion import expand as expansion

    text, types = _text(params), _types(kb, params)
    method = one(params, "method", "kar")
    try:
        return expansion(kb, settings, text, method, types or None).as_dict()
    except HTTPError:
        raise
    except KqeError as exc:
        raise HTTPError(400, f"parameter 'method' ({method!r}): {exc}") from None


def answer_job(kb, settings, params: dict) -> dict:
    from .answering import answer as answering, check_sources

    sources = [str(v) for v in params.get("source", []) + params.get("sources", [])]
    try:
        checked = check_sources(sources) if sources else None
    except KqeError as exc:
        raise HTTPError(400, f"parameter 'source': {exc}") from None
    return answering(kb, settings, _text(params), checked).as_dict()


REST_JOBS = {"search": search_job, "triplets": triplets_job, "expand": expand_job, "answer": answer_job}


@contextlib.contextmanager
def naming(parameter: str):
    """Errors about the request's text name its parameter: "parameter 'query': SPARQL syntax error ..."."""
    try:
        yield
    except KqeError as exc:
        if not isinstance(exc, HTTPError) and "parameter '" not in str(exc):
            exc.args = (f"parameter '{parameter}': {exc}", *exc.args[1:])
        raise


def sparql_job(context, payload: dict, deadline: float) -> Rendered:
    """A SPARQL query evaluated and rendered in the negotiated format."""
    kb, settings = context.kb, context.settings
    with naming("query"):
        prepared = context.prepare(payload["query"])
        result = execute(kb, prepared, context.functions, payload["defaults"], payload["named"])
    failure = None
    try:
        rendered = render(result, payload["accept"], settings.server_result_cap, deadline,
                          again=lambda: execute(kb, prepared, context.functions, payload["defaults"], payload["named"]))
    except Exception as exc:  # noqa: BLE001
        if not isinstance(exc, KqeError):
            log.exception("internal error while rendering results")
        failure = exc.with_traceback(None)
    # pyoxigraph results may only be freed on the thread that made them: drop every reference here
    # (the traceback's frames hold one) before the answer leaves this function.
    del result
    if failure is not None:
        raise failure
    rendered.searches = prepared.searches
    rendered.repeatable = (rendered.media in RESULT_TYPES and not prepared.services
                           and not _VOLATILE.search(prepared.text))
    return rendered


def update_job(context, payload: dict) -> None:
    kb, settings = context.kb, context.settings
    with naming("update"):
        prepared = prepare(kb, payload["update"], settings, update=True)
        try:
            kb.store.update(prepared.text, prefixes=kb.prefixes, custom_functions=context.functions.functions)
        except SyntaxError as exc:
            raise SparqlError(f"SPARQL Update syntax error: {exc}") from None
        except (OSError, ValueError, RuntimeError) as exc:
            raise SparqlError(f"SPARQL Update failed: {exc}") from None


def run_job(context, kind: str, payload: dict, deadline: float):
    """One job in a worker process (:mod:`kqe_rdf.workers`): a rendered query, nothing, or a JSON body."""
    if kind == "sparql":
        return vars(sparql_job(context, payload, deadline))  # plain data: no class to look up when unpickled
    if kind == "update":
        return update_job(context, payload)
    started = time.perf_counter()
    out = REST_JOBS[kind](context.kb, context.settings, payload)
    out["elapsed_ms"] = round((time.perf_counter() - started) * 1000, 1)
    return json.dumps(out, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode()


# ---------------------------------------------------------------- REST parameters


class _LongInteger(str):
    """An integer literal of a JSON body too long to convert (Python refuses over 4,300 digits)."""


#: Digits of a JSON integer parameter at most; longer ones are refused, naming their parameter.
MAX_INTEGER_DIGITS = 100


def _integer(text: str):
    return int(text) if len(text.lstrip("-")) <= MAX_INTEGER_DIGITS else _LongInteger(text)


def json_params(raw: bytes) -> dict:
    """A JSON request body as parameters; 400 (naming the parameter where there is one) for what cannot be one."""
    try:
        data = json.loads(raw or b"{}", parse_int=_integer, parse_constant=float)
    except RecursionError:
        raise HTTPError(400, "the JSON request body is nested too deeply") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise HTTPError(400, f"the request body is not valid JSON ({exc})") from None
    if not isinstance(data, dict):
        raise HTTPError(400, "the JSON body must be an object of parameters")
    return data


def check_value(name: str, value) -> None:
    """A REST parameter value must be a string (valid Unicode), a finite number or a boolean."""
    if isinstance(value, _LongInteger):
        raise HTTPError(400, f"parameter '{name}': an integer of {len(value.lstrip('-')):,} digits is too long "
                             f"(at most {MAX_INTEGER_DIGITS})")
    if isinstance(value, float) and not math.isfinite(value):
        raise HTTPError(400, f"parameter '{name}' must be a finite number, got {value!r}")
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise HTTPError(400, f"parameter '{name}' is not valid Unicode (it holds a lone surrogate)") from None
        return
    if not isinstance(value, (int, float, bool)) or value is None:
        raise HTTPError(400, f"parameter '{name}' must be a string, number or boolean (or a list of them), "
                             f"not {type(value).__name__ if value is not None else 'null'}")


# ---------------------------------------------------------------- the app


def _check(settings) -> None:
    if settings.server_query_timeout <= 0 or settings.server_result_cap < 1 or settings.server_query_slots < 1 \
            or settings.server_max_request_bytes < 1024 or not 0 < settings.server_port < 65536 \
            or not 0 < settings.server_client_share <= 1 or settings.server_worker_memory_mb < 256 \
            or settings.server_header_timeout <= 0 or settings.server_body_timeout <= 0 \
            or settings.server_result_cache_mb < 0:
        raise KqeError("server settings: server_query_timeout, server_header_timeout and server_body_timeout must "
                       "be positive, server_result_cap and server_query_slots at least 1, server_max_request_bytes "
                       "at least 1024, server_client_share above 0 and at most 1, server_worker_memory_mb at least "
                       "256, server_result_cache_mb not negative, server_port between 1 and 65535")


def create_app(kb, settings, writable: bool | None = None):
    """The ASGI app over ``kb``. The store is read-only unless an update token is configured.

    ``writable`` (default: whether ``settings.server_update_token`` is set) has
    one worker open the store read-write so /update can change it (one process
    may write a store, so there is one worker then); BM25 and embeddings are not
    updated by SPARQL Update (rebuild the KB for that).
    """
    from starlette.applications import Starlette
    from starlette.middleware import Middleware
    from starlette.middleware.cors import CORSMiddleware
    from starlette.responses import FileResponse, JSONResponse, PlainTextResponse, Response
    from starlette.routing import Mount, Route
    from starlette.staticfiles import StaticFiles

    from .workers import WorkerPool

    _check(settings)
    writable = bool(settings.server_update_token) if writable is None else writable
    if writable and settings.store_endpoint:
        raise KqeError("the KB's triples are in a remote SPARQL store (store_endpoint): send updates to its own "
                       "update endpoint rather than to `kqe-rdf serve --update-token`")
    pool = WorkerPool(kb, settings, writable)
    cache = ResultCache(settings.server_result_cache_mb * 2**20, kb.path) \
        if settings.server_result_cache_mb > 0 and not writable and not settings.store_endpoint else None
    cap = settings.server_result_cap
    limit = settings.server_max_request_bytes

    def error(exc: Exception, as_json: bool = True) -> Response:
        if isinstance(exc, KqeError):
            status, message, headers = status_of(exc), str(exc), getattr(exc, "headers", {})
        else:  # a bug: logged with its traceback, reported without one
            log.exception("internal error")
            status, message, headers = 500, "internal server error (the server log has the details)", {}
        message = message.encode("utf-8", "backslashreplace").decode("utf-8")  # a lone surrogate the client sent
        if as_json:
            return JSONResponse({"error": message, "status": status}, status, headers=headers)
        return PlainTextResponse(message + "\n", status, headers=headers)

    def client_of(request) -> str:
        return request.client.host if request.client else "unknown"

    async def body_of(request) -> bytes:
        declared = request.headers.get("content-length")
        if declared and declared.isdigit() and int(declared) > limit:
            raise HTTPError(413, f"request body of {int(declared):,} bytes is over the limit of {limit:,} "
                                 "(server_max_request_bytes)")
        chunks, size = [], 0
        try:
            async with asyncio.timeout(settings.server_body_timeout):
                async for chunk in request.stream():
                    size += len(chunk)
                    if size > limit:
                        raise HTTPError(413, f"request body is over the limit of {limit:,} bytes "
                                             "(server_max_request_bytes)")
                    chunks.append(chunk)
        except TimeoutError:
            raise HTTPError(408, f"the request body did not arrive within {settings.server_body_timeout:g} s "
                                 "(server_body_timeout)", {"Connection": "close"}) from None
        return b"".join(chunks)

    def check_graphs(name: str, values: list[str]) -> list[str]:
        for value in values:
            try:
                NamedNode(value)
            except (ValueError, TypeError):
                raise HTTPError(400, f"parameter '{name}' must be an absolute IRI, got {value[:200]!r}") from None
        return values

    def query_string(request) -> str:
        """The URL's query string, read from the ASGI scope (building starlette's URL object costs more)."""
        return request.scope["query_string"].decode("latin-1")

    def check_url(request) -> None:
        if len(request.scope["query_string"]) > limit:
            raise HTTPError(413, f"query string is over the limit of {limit:,} bytes; POST the query instead")

    async def protocol_params(request, field: str, body_type: str) -> dict[str, list[str]]:
        """The SPARQL Protocol parameters of a GET or POST request."""
        check_url(request)
        params: dict[str, list[str]] = {}
        for key, value in parse_qsl(query_string(request), keep_blank_values=True):
            params.setdefault(key, []).append(value)
        if request.method == "POST":
            kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
            raw = await body_of(request)
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError:
                raise HTTPError(400, "the request body is not UTF-8") from None
            if kind == "application/x-www-form-urlencoded":
                for key, value in parse_qsl(text, keep_blank_values=True):
                    params.setdefault(key, []).append(value)
            elif kind == body_type:
                if field in params:
                    raise HTTPError(400, f"send the {field} either as the body or as a parameter, not both")
                params[field] = [text]
            else:
                raise HTTPError(415, f"POST {field}s as {body_type} or application/x-www-form-urlencoded, "
                                     f"not {kind or 'no content type'}")
        if len(params.get(field, [])) > 1:
            raise HTTPError(400, f"exactly one '{field}' parameter is allowed")
        return params

    async def sparql(request):
        try:
            params = await protocol_params(request, "query", "application/sparql-query")
            if "query" not in params:
                if request.method == "POST":
                    raise HTTPError(400, "no 'query' parameter in the request")
                return service_description(request, params)
            query = params["query"][0]
            accept = FORMAT_NAMES.get(params.get("format", [""])[0].lower(), request.headers.get("accept", ""))
            defaults, named = params.get("default-graph-uri", []), params.get("named-graph-uri", [])

            payload = {"query": query, "accept": accept, "defaults": check_graphs("default-graph-uri", defaults),
                       "named": check_graphs("named-graph-uri", named)}
            key = (query, accept, tuple(defaults), tuple(named))
            rendered = cache.get(key) if cache is not None else None
            if rendered is None:
                rendered = Rendered(**await pool.run(client_of(request), "sparql", payload))
                if cache is not None:
                    cache.put(key, rendered)
        except Exception as exc:  # noqa: BLE001 - every failure becomes a readable answer
            return error(exc, as_json=False)
        headers = {"Vary": "Accept"}
        if rendered.truncated:
            headers["X-KQE-Truncated"] = f"results cut at server_result_cap={cap}"
        if rendered.searches:
            headers["X-KQE-Searches"] = json.dumps(rendered.searches)[:4000]
        media = rendered.media + ("; charset=utf-8" if rendered.media.startswith("text/") else "")
        return Response(rendered.body, media_type=media, headers=headers)

    def service_description(request, params) -> Response:
        from .queries import PREFIXES

        endpoint = str(request.url.replace(query=""))
        sd, fmt = "http://www.w3.org/ns/sparql-service-description#", "http://www.w3.org/ns/formats/"
        rdf_type = NamedNode(PREFIXES["rdf"] + "type")
        me, dataset, graph = NamedNode(endpoint), BlankNode(), BlankNode()
        triples = [Triple(me, rdf_type, NamedNode(sd + "Service")), Triple(me, NamedNode(sd + "endpoint"), me),
                   Triple(me, NamedNode(sd + "supportedLanguage"), NamedNode(sd + "SPARQL11Query")),
                   Triple(me, NamedNode(sd + "feature"), NamedNode(sd + "UnionDefaultGraph")),
                   Triple(me, NamedNode(sd + "defaultDataset"), dataset),
                   Triple(dataset, rdf_type, NamedNode(sd + "Dataset")),
                   Triple(dataset, NamedNode(sd + "defaultGraph"), graph),
                   Triple(graph, rdf_type, NamedNode(sd + "Graph")),
                   Triple(me, NamedNode(PREFIXES["dcterms"] + "description"),
                          Literal("kqe-rdf knowledge service over " + kb.path.name + "; SERVICE <urn:kqe:search> "
                                  "generates candidates by text or vector search"))]
        if settings.server_update_token:
            triples.append(Triple(me, NamedNode(sd + "supportedLanguage"), NamedNode(sd + "SPARQL11Update")))
        if allowed_endpoints(settings.server_service_allow):
            triples.append(Triple(me, NamedNode(sd + "feature"), NamedNode(sd + "BasicFederatedQuery")))
        for name in ("SPARQL_Results_JSON", "SPARQL_Results_XML", "SPARQL_Results_CSV", "SPARQL_Results_TSV",
                     "Turtle", "N-Triples", "JSON-LD", "RDF_XML"):
            triples.append(Triple(me, NamedNode(sd + "resultFormat"), NamedNode(fmt + name)))
        for function in ("bm25", "similarity"):
            triples.append(Triple(me, NamedNode(sd + "extensionFunction"), NamedNode(PREFIXES["kqe"] + function)))
        accept = FORMAT_NAMES.get(params.get("format", [""])[0].lower(), request.headers.get("accept", ""))
        media = negotiate(accept, list(GRAPH_TYPES)) or "text/turtle"
        body = serialize(triples, format=GRAPH_TYPES[media]) or b""
        return Response(body, media_type=media, headers={"Vary": "Accept"})

    async def update(request):
        try:
            if not settings.server_update_token:
                raise HTTPError(403, "SPARQL Update is off on this server (start it with an update token: "
                                     "`kqe-rdf serve --update-token TOKEN` or KQE_SERVER_UPDATE_TOKEN)")
            if request.method != "POST":
                raise HTTPError(405, "SPARQL Update takes POST", {"Allow": "POST"})
            sent = request.headers.get("authorization", "")
            expected = "Bearer " + settings.server_update_token
            if not hmac.compare_digest(sent.encode(), expected.encode()):
                raise HTTPError(401, "this update needs the server's token: send Authorization: Bearer TOKEN",
                                {"WWW-Authenticate": 'Bearer realm="kqe-rdf update"'})
            params = await protocol_params(request, "update", "application/sparql-update")
            if "update" not in params:
                raise HTTPError(400, "no 'update' parameter in the request")
            text = params["update"][0]

            await pool.run(client_of(request), "update", {"update": text})
        except Exception as exc:  # noqa: BLE001
            return error(exc, as_json=False)
        return Response(status_code=204)

    async def rest_params(request) -> dict:
        """Parameters of a REST call: the URL's, then a JSON or form body's."""
        check_url(request)
        params: dict = {}
        for key, value in parse_qsl(query_string(request), keep_blank_values=True):
            params.setdefault(key, []).append(value)
        if request.method == "POST":
            kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
            raw = await body_of(request)
            if kind == "application/json":
                for key, value in json_params(raw).items():
                    params[key] = value if isinstance(value, list) else [value]
            elif kind == "application/x-www-form-urlencoded":
                for key, value in parse_qsl(raw.decode("utf-8", "replace"), keep_blank_values=True):
                    params.setdefault(key, []).append(value)
            elif raw:
                raise HTTPError(415, "POST parameters as application/json or application/x-www-form-urlencoded")
        for key, values in params.items():
            check_value("(a parameter name)", key)
            for value in values:
                check_value(key, value)
        return params

    def rest(kind: str):
        async def endpoint(request):
            try:
                params = await rest_params(request)
                body = await pool.run(client_of(request), kind, params)
            except Exception as exc:  # noqa: BLE001
                return error(exc)
            return Response(body, media_type="application/json")

        return endpoint

    async def openapi(_request):
        return JSONResponse(openapi_description(settings))

    async def health(_request):
        return JSONResponse({"status": "ok", "kb": kb.path.name, "nodes": kb.manifest.get("counts", {}).get("nodes"),
                             "embeddings": kb.has_embeddings, "updates": bool(settings.server_update_token)})

    async def page(_request):
        return FileResponse(WEB / "index.html", headers={"Cache-Control": "no-cache"})

    async def not_found(request, exc):
        status = getattr(exc, "status_code", 404)
        return JSONResponse({"error": f"{request.method} {request.url.path}: {getattr(exc, 'detail', '')}",
                             "status": status}, status, headers=getattr(exc, "headers", None))

    async def internal(request, exc):
        return error(exc)

    @contextlib.asynccontextmanager
    async def lifespan(_app):
        await pool.start()  # a KB that cannot be opened stops the server at startup
        yield
        pool.close()

    methods = ["GET", "POST"]
    routes = [
        Route("/", page, methods=["GET"]),
        Route("/sparql", sparql, methods=methods), Route("/query", sparql, methods=methods),
        Route("/update", update, methods=methods),
        Route("/search", rest("search"), methods=methods),
        Route("/triplets", rest("triplets"), methods=methods),
        Route("/expand", rest("expand"), methods=methods),
        Route("/answer", rest("answer"), methods=methods),
        Route("/openapi.json", openapi, methods=["GET"]),
        Route("/health", health, methods=["GET"]),
        Mount("/static", StaticFiles(directory=WEB), name="static"),
    ]
    middleware = []
    origins = allowed_endpoints(settings.server_cors_origins)
    if origins:
        middleware.append(Middleware(CORSMiddleware, allow_origins=sorted(origins), allow_methods=methods,
                                     allow_headers=["Accept", "Authorization", "Content-Type"]))
    app = Starlette(routes=routes, middleware=middleware, lifespan=lifespan,
                    exception_handlers={404: not_found, 405: not_found, Exception: internal})
    app.state.workers, app.state.cache = pool, cache
    return app if middleware else DirectRoutes(app, {"/sparql": sparql, "/query": sparql}, error)


class DirectRoutes:
    """The app, with a few routes called directly by path: starlette's middleware, routing and exception layers
    were about a fifth of the server's samples in a profile of cache-off SPARQL queries. Those handlers answer
    every failure themselves; anything else (other paths and methods, lifespan, ``state``) is the app's."""

    def __init__(self, app, routes: dict, error) -> None:
        from starlette.requests import Request

        self.app, self.routes, self.error, self.request = app, routes, error, Request

    async def __call__(self, scope, receive, send) -> None:
        handler = self.routes.get(scope["path"]) if scope["type"] == "http" else None
        if handler is None or scope["method"] not in ("GET", "POST"):
            return await self.app(scope, receive, send)
        try:
            response = await handler(self.request(scope, receive))
        except Exception as exc:  # noqa: BLE001 - a bug: logged, answered without details
            response = self.error(exc)
        await response(scope, receive, send)

    def __getattr__(self, name: str):
        return getattr(self.app, name)


def openapi_description(settings) -> dict:
    """The OpenAPI 3.1 description of the REST routes (and the SPARQL endpoint, briefly)."""
    text = {"name": "q", "in": "query", "required": True, "schema": {"type": "string"}}
    provenance = {"type": "object", "description": "how the results were reached: pipeline, triplets, SPARQL, "
                                                   "bindings and scores"}
    result = {"type": "object", "properties": {
        "rank": {"type": "integer"}, "iri": {"type": "string"}, "id": {"type": "string"},
        "name": {"type": "string"}, "types": {"type": "array", "items": {"type": "string"}},
        "score": {"type": "number"}, "snippet": {"type": "string"}}}
    error = {"description": "a readable error", "content": {"application/json": {"schema": {
        "type": "object", "properties": {"error": {"type": "string"}, "status": {"type": "integer"}}}}}}
    errors = {"400": error, "413": error, "503": error}

    def op(summary: str, params: list, schema: dict, extra: dict | None = None) -> dict:
        return {"summary": summary, "parameters": params,
                "responses": {"200": {"description": "OK", "content": {"application/json": {"schema": schema}}},
                              **errors, **(extra or {})}}

    search = op("Search the KB (BM25, dense, hybrid, RM3, 4StepFocus)", [
        text, {"name": "method", "in": "query", "schema": {"type": "string", "default": "bm25"}},
        {"name": "k", "in": "query", "schema": {"type": "integer", "default": settings.k, "maximum": 1000}},
        {"name": "type", "in": "query", "schema": {"type": "array", "items": {"type": "string"}}, "explode": True}],
        {"type": "object", "properties": {"results": {"type": "array", "items": result}, "provenance": provenance}})
    triplets = op("The triplets read from a question, their linked constants and the SPARQL they compile to",
                  [text, {"name": "strict", "in": "query", "schema": {"type": "boolean", "default": False}}],
                  {"type": "object", "properties": {"triplets": {"type": "object"}, "linked": {"type": "object"},
                                                    "sparql": {"type": ["string", "null"]}}})
    types = {"name": "type", "in": "query", "schema": {"type": "array", "items": {"type": "string"}}, "explode": True}
    expand = op("Expand a query (KAR, its baselines, LKQE) and show the knowledge the expansion came from",
                [text, {"name": "method", "in": "query", "schema": {"type": "string", "default": "kar"}}, types],
                {"type": "object"})
    answer = op("Answer a question from KG facts, node text and registered tables, with the evidence it cites",
                [text, {"name": "source", "in": "query", "explode": True,
                        "schema": {"type": "array", "items": {"type": "string", "enum": ["kg", "text", "tables"]}}}],
                {"type": "object"})
    sparql = {"summary": "SPARQL 1.1 Protocol query endpoint (kqe:bm25, kqe:similarity, SERVICE <urn:kqe:search>)",
              "parameters": [{"name": "query", "in": "query", "schema": {"type": "string"}},
                             {"name": "default-graph-uri", "in": "query", "schema": {"type": "string"}},
                             {"name": "named-graph-uri", "in": "query", "schema": {"type": "string"}}],
              "responses": {"200": {"description": "results (negotiated: SPARQL JSON/XML/CSV/TSV, Turtle, "
                                                    "N-Triples, JSON-LD)"}, **errors, "403": error, "406": error}}
    paths = {"/search": {"get": search, "post": search}, "/triplets": {"get": triplets, "post": triplets},
             "/expand": {"get": expand, "post": expand}, "/answer": {"get": answer, "post": answer},
             "/sparql": {"get": sparql, "post": sparql}}
    return {"openapi": "3.1.0", "info": {"title": "kqe-rdf knowledge service", "version": "0.1.0"}, "paths": paths}


class OneWritePerStep:
    """A transport whose writes of one event-loop step leave in one system call.

    uvicorn writes a response's head and body separately: with TCP_NODELAY that
    is two packets and two wake-ups of the client for every small answer (the
    head's write alone was a quarter of the server's samples in a profile of
    cache-off SPARQL requests). Here writes are joined and sent at the end of the
    step; closing sends what is pending first. Everything else is the real
    transport's.
    """

    def __init__(self, transport, loop) -> None:
        self._transport, self._loop, self._pending = transport, loop, []

    def write(self, data) -> None:
        if not data:
            return
        if not self._pending:
            self._loop.call_soon(self._flush)
        self._pending.append(data)

    def _flush(self) -> None:
        pending, self._pending = self._pending, []
        if pending and not self._transport.is_closing():
            self._transport.write(pending[0] if len(pending) == 1 else b"".join(pending))

    def close(self) -> None:
        self._flush()
        self._transport.close()

    def __getattr__(self, name: str):
        return getattr(self._transport, name)


def header_timeout_protocol(timeout: float):
    """uvicorn's HTTP protocol (httptools) with a deadline for every request's headers, one write per response.

    uvicorn has none: a client that connects and sends nothing, or a byte every
    few seconds, holds its connection forever (its keep-alive timer is reset by
    any data). Here each request's headers must be complete within ``timeout``
    seconds of the connection (or of the request's first byte), or the
    connection is closed. Its transport is :class:`OneWritePerStep`.
    """
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

    class HeaderTimeoutProtocol(HttpToolsProtocol):
        _head_timer = None

        def _arm(self) -> None:
            if self._head_timer is None:
                self._head_timer = self.loop.call_later(timeout, self._head_late)

        def _disarm(self) -> None:
            if self._head_timer is not None:
                self._head_timer.cancel()
                self._head_timer = None

        def _head_late(self) -> None:
            self._head_timer = None
            if not self.transport.is_closing():
                self.transport.close()

        def connection_made(self, transport) -> None:
            super().connection_made(OneWritePerStep(transport, self.loop))
            self._arm()

        def on_message_begin(self) -> None:
            super().on_message_begin()
            self._arm()

        def on_headers_complete(self) -> None:
            self._disarm()
            super().on_headers_complete()

        def connection_lost(self, exc) -> None:
            self._disarm()
            super().connection_lost(exc)

    return HeaderTimeoutProtocol


def uvicorn_config(app, settings, **options):
    """How ``kqe-rdf serve`` runs the app: uvloop and httptools, header deadlines, graceful shutdown."""
    import uvicorn

    options = {"host": settings.server_host, "port": settings.server_port, "log_level": "info",
               "timeout_graceful_shutdown": 10, "server_header": False, "access_log": False,
               "proxy_headers": settings.server_trust_proxy,
               "http": header_timeout_protocol(settings.server_header_timeout), **options}
    return uvicorn.Config(app, **options)


def serve(kb, settings) -> None:
    """Run the app with uvicorn until interrupted (SIGINT/SIGTERM finish open requests first)."""
    import uvicorn

    uvicorn.Server(uvicorn_config(create_app(kb, settings), settings)).run()
