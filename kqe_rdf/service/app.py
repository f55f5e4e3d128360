"""The knowledge service: a SPARQL 1.1 endpoint with search inside SPARQL, a REST API and a web page.

``create_app(kb, settings)`` builds the ASGI app (starlette); ``kqe-rdf serve``
runs it with uvicorn. Routes:

* ``/sparql`` (also ``/query``): the SPARQL 1.1 Protocol — GET, POST urlencoded
  and POST ``application/sparql-query``; ``default-graph-uri`` /
  ``named-graph-uri`` (else the query's ``FROM``); relative IRIs resolve against
  the request's URL (or ``server_base_iri``); results as SPARQL JSON, XML, CSV
  or TSV, graphs as Turtle, N-Triples, N-Quads, TriG, N3, JSON-LD or RDF/XML
  (``Accept``, or ``format=``/``output=``); a result cut at the cap says so in its
  body; GET without a query returns the service description. ``kqe:bm25``,
  ``kqe:similarity`` and ``SERVICE <urn:kqe:search>`` work in every query
  (:mod:`kqe_rdf.service.sparql_search`); other SERVICE calls (and LOAD) only to allow-listed endpoints, verified
  by a real SPARQL parser, and queries over the size limits get 400 (:mod:`kqe_rdf.kb.sparql_guard`).
* ``/update``: SPARQL Update, off unless the server has an update token and the
  request sends it (``Authorization: Bearer TOKEN``).
* ``/complete``: names of nodes, relations and classes completed as they are typed (:mod:`.complete`).
* ``/search``, ``/triplets``, ``/expand``, ``/answer``: JSON with provenance;
  ``/openapi.json`` describes them. ``/`` is the web page (``kqe_rdf/service/web``).

Every query, update and REST call runs in a worker process (:mod:`kqe_rdf.service.workers`,
``server_query_slots`` of them): a job past ``server_query_timeout`` gets 503 and its
worker is killed, so it stops using CPU and memory at once; a worker has a memory
limit. The workers are shared fairly: one client (its credentials, else its address) holds at most
``server_client_workers`` of them, and a freed worker goes to the waiting client holding the fewest.
A request that finds no worker for a whole timeout also gets 503: no request hangs
and nothing runs on after its answer. Headers must arrive within
``server_header_timeout`` and a body within ``server_body_timeout``. Clients never
see a stack trace.
"""

from __future__ import annotations

import contextlib
import hmac
import json
import logging
from pathlib import Path

from pyoxigraph import BlankNode, Literal, NamedNode, Triple, serialize

from ..core.errors import KqeError
from ..methods.registry import EXPANSION, METHODS
from .protocol import GRAPH_TYPES, HTTPError, Rendered, ResultCache, accept_of, negotiate
from .requests import base_iri, check_graphs, client_of, error, protocol_params, rest_params
from .sparql_search import allowed_endpoints

log = logging.getLogger("kqe_rdf.service.app")
WEB = Path(__file__).parent / "web"
#: The web page's Content-Security-Policy: scripts only from this server's files (no inline script, no
#: ``javascript:`` URL, no eval), requests only to this server, no plugins, frames or foreign forms. A hostile
#: IRI in the KB's data that the page or YASGUI's table shows as a link then cannot run (issue 49). Styles may be
#: inline: YASGUI and CodeMirror set them.
CONTENT_SECURITY_POLICY = ("default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
                           "img-src 'self' data:; font-src 'self' data:; connect-src 'self'; object-src 'none'; "
                           "base-uri 'none'; form-action 'self'; frame-ancestors 'none'")
PAGE_HEADERS = {"Content-Security-Policy": CONTENT_SECURITY_POLICY, "X-Content-Type-Options": "nosniff"}
# ---------------------------------------------------------------- the app


def create_app(kb, settings, writable: bool | None = None):
    """The ASGI app over ``kb``. The store is read-only unless an update token is configured.

    ``writable`` (default: whether ``settings.server.update_token`` is set) has
    one worker open the store read-write so /update can change it (one process
    may write a store, so there is one worker then); BM25 and embeddings are not
    updated by SPARQL Update (rebuild the KB for that).
    """
    from starlette.applications import Starlette
    from starlette.middleware import Middleware
    from starlette.middleware.cors import CORSMiddleware
    from starlette.routing import Mount, Route
    from starlette.staticfiles import StaticFiles

    from .workers import WorkerPool

    writable = bool(settings.server.update_token) if writable is None else writable
    if writable and settings.store.endpoint:
        raise KqeError("the KB's triples are in a remote SPARQL store (store_endpoint): send updates to its own "
                       "update endpoint rather than to `kqe-rdf serve --update-token`")
    pool = WorkerPool(kb, settings, writable)
    cache = ResultCache(settings.server.result_cache_mb * 2**20, kb.path) \
        if settings.server.result_cache_mb > 0 and not writable and not settings.store.endpoint else None

    @contextlib.asynccontextmanager
    async def lifespan(_app):
        await pool.start()  # a KB that cannot be opened stops the server at startup
        logging.getLogger("uvicorn.error").info("SERVICE and LOAD: %s", pool.protection)
        yield
        pool.close()

    methods = ["GET", "POST"]
    sparql = _sparql_endpoint(kb, settings, pool, cache)
    page, openapi, health, not_found, internal = _plain_endpoints(kb, settings, pool)
    routes = [
        Route("/", page, methods=["GET"]),
        Route("/sparql", sparql, methods=methods), Route("/query", sparql, methods=methods),
        Route("/update", _update_endpoint(settings, pool), methods=methods),
        *(Route(f"/{kind}", _rest_endpoint(kind, settings, pool), methods=methods)
          for kind in ("search", "triplets", "expand", "answer")),
        Route("/node", _node_endpoint(kb, settings, pool), methods=["GET"]),
        Route("/complete", _rest_endpoint("complete", settings, pool), methods=["GET"]),
        Route("/openapi.json", openapi, methods=["GET"]),
        Route("/health", health, methods=["GET"]),
        Mount("/static", _with_headers(StaticFiles(directory=WEB), PAGE_HEADERS), name="static"),
    ]
    middleware = []
    origins = allowed_endpoints(settings.server.cors_origins)
    if origins:
        middleware.append(Middleware(CORSMiddleware, allow_origins=sorted(origins), allow_methods=methods,
                                     allow_headers=["Accept", "Authorization", "Content-Type"]))
    app = Starlette(routes=routes, middleware=middleware, lifespan=lifespan,
                    exception_handlers={404: not_found, 405: not_found, Exception: internal})
    app.state.workers, app.state.cache = pool, cache
    return app if middleware else DirectRoutes(app, {"/sparql": sparql, "/query": sparql}, error)


def _with_headers(app, headers: dict[str, str]):
    """An ASGI app whose responses carry ``headers`` too (the page's files: /static/index.html is the page)."""
    extra = [(k.lower().encode(), v.encode()) for k, v in headers.items()]

    async def wrapped(scope, receive, send):
        async def sending(message):
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []), *extra]}
            await send(message)

        await app(scope, receive, sending)

    return wrapped


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


# ---------------------------------------------------------------- the routes, by concern


def _sparql_endpoint(kb, settings, pool, cache):
    """``/sparql``: the SPARQL 1.1 Protocol (a query, answered from the result cache or a worker), or the
    service description when there is no query."""
    from starlette.responses import Response

    cap = settings.server.result_cap

    async def sparql(request):
        try:
            params = await protocol_params(request, "query", "application/sparql-query", settings)
            if "query" not in params:
                if request.method == "POST":
                    raise HTTPError(400, "no 'query' parameter in the request")
                return service_description(request, params, kb, settings)
            query = params["query"][0]
            accept = accept_of(params, request.headers.get("accept", ""))
            defaults, named = params.get("default-graph-uri", []), params.get("named-graph-uri", [])
            base = settings.server.base_iri or base_iri(request)
            payload = {"query": query, "accept": accept, "defaults": check_graphs("default-graph-uri", defaults),
                       "named": check_graphs("named-graph-uri", named), "base": base}
            key = (query, accept, tuple(defaults), tuple(named), base)
            rendered = cache.get(key) if cache is not None else None
            if rendered is None:
                began = cache.identity if cache is not None else None  # the KB the answer will be computed on
                rendered = Rendered(**await pool.run(client_of(request), "sparql", payload))
                if cache is not None:
                    cache.put(key, rendered, began)
        except Exception as exc:  # noqa: BLE001 - every failure becomes a readable answer
            return error(exc, as_json=False)
        headers = {"Vary": "Accept"}
        if rendered.truncated:
            headers["X-KQE-Truncated"] = f"results cut at server_result_cap={cap}"
        if rendered.searches:
            headers["X-KQE-Searches"] = json.dumps(rendered.searches)[:4000]
        media = rendered.media + ("; charset=utf-8" if rendered.media.startswith("text/") else "")
        return Response(rendered.body, media_type=media, headers=headers)

    return sparql


def service_description(request, params, kb, settings):
    """The SPARQL 1.1 Service Description of this endpoint, in the negotiated RDF format."""
    from starlette.responses import Response

    from ..kb.queries import PREFIXES

    endpoint = str(request.url.replace(query=""))
    sd, fmt = "http://www.w3.org/ns/sparql-service-description#", "http://www.w3.org/ns/formats/"
    rdf_type = NamedNode(PREFIXES["rdf"] + "type")
    me, dataset, graph = NamedNode(endpoint), BlankNode(), BlankNode()
    triples = [Triple(me, rdf_type, NamedNode(sd + "Service")), Triple(me, NamedNode(sd + "endpoint"), me),
               Triple(me, NamedNode(sd + "supportedLanguage"), NamedNode(sd + "SPARQL11Query")),
               Triple(me, NamedNode(sd + "defaultDataset"), dataset),
               Triple(dataset, rdf_type, NamedNode(sd + "Dataset")),
               Triple(dataset, NamedNode(sd + "defaultGraph"), graph),
               Triple(graph, rdf_type, NamedNode(sd + "Graph")),
               Triple(me, NamedNode(PREFIXES["dcterms"] + "description"),
                      Literal("kqe-rdf knowledge service over " + kb.path.name + "; SERVICE <urn:kqe:search> "
                              "generates candidates by text or vector search"))]
    if settings.server.union_default_graph:
        triples.append(Triple(me, NamedNode(sd + "feature"), NamedNode(sd + "UnionDefaultGraph")))
    if settings.server.update_token:
        triples.append(Triple(me, NamedNode(sd + "supportedLanguage"), NamedNode(sd + "SPARQL11Update")))
    if allowed_endpoints(settings.server.service_allow):
        triples.append(Triple(me, NamedNode(sd + "feature"), NamedNode(sd + "BasicFederatedQuery")))
    for name in ("SPARQL_Results_JSON", "SPARQL_Results_XML", "SPARQL_Results_CSV", "SPARQL_Results_TSV",
                 "Turtle", "N-Triples", "N-Quads", "TriG", "N3", "JSON-LD", "RDF_XML"):
        triples.append(Triple(me, NamedNode(sd + "resultFormat"), NamedNode(fmt + name)))
    for function in ("bm25", "similarity"):
        triples.append(Triple(me, NamedNode(sd + "extensionFunction"), NamedNode(PREFIXES["kqe"] + function)))
    media = negotiate(accept_of(params, request.headers.get("accept", "")), list(GRAPH_TYPES)) or "text/turtle"
    body = serialize(triples, format=GRAPH_TYPES[media]) or b""
    return Response(body, media_type=media, headers={"Vary": "Accept"})


def _update_endpoint(settings, pool):
    """``/update``: SPARQL Update, only with the server's token."""
    from starlette.responses import Response

    async def update(request):
        try:
            if not settings.server.update_token:
                raise HTTPError(403, "SPARQL Update is off on this server (start it with an update token: "
                                     "`kqe-rdf serve --update-token TOKEN` or KQE_SERVER_UPDATE_TOKEN)")
            if request.method != "POST":
                raise HTTPError(405, "SPARQL Update takes POST", {"Allow": "POST"})
            sent = request.headers.get("authorization", "")
            expected = "Bearer " + settings.server.update_token
            if not hmac.compare_digest(sent.encode(), expected.encode()):
                raise HTTPError(401, "this update needs the server's token: send Authorization: Bearer TOKEN",
                                {"WWW-Authenticate": 'Bearer realm="kqe-rdf update"'})
            params = await protocol_params(request, "update", "application/sparql-update", settings)
            if "update" not in params:
                raise HTTPError(400, "no 'update' parameter in the request")
            text = params["update"][0]

            await pool.run(client_of(request), "update",
                           {"update": text, "base": settings.server.base_iri or base_iri(request)})
        except Exception as exc:  # noqa: BLE001
            return error(exc, as_json=False)
        return Response(status_code=204)

    return update


def _rest_endpoint(kind: str, settings, pool):
    """``/search``, ``/triplets``, ``/expand``, ``/answer``: the job of that name (:mod:`.jobs`) in a worker."""
    from starlette.responses import Response

    async def endpoint(request):
        try:
            params = await rest_params(request, settings)
            body = await pool.run(client_of(request), kind, params)
        except Exception as exc:  # noqa: BLE001
            return error(exc)
        return Response(body, media_type="application/json")

    return endpoint


def _node_endpoint(kb, settings, pool):
    """``/node?iri=…``: a node's page (:mod:`.node`), HTML for a browser, JSON for ``Accept: application/json`` or
    ``format=json``. An IRI the KB holds no fact about is sent on to itself when it is a web address (an outside
    IRI keeps its link), else 404."""
    from starlette.responses import HTMLResponse, RedirectResponse, Response

    from .node import render_html

    async def node(request):
        try:
            params = await rest_params(request, settings)
            body = await pool.run(client_of(request), "node", params)
        except Exception as exc:  # noqa: BLE001
            return error(exc)
        wanted = params.get("format", [""])[0] or negotiate(request.headers.get("accept", ""),
                                                             ["text/html", "application/json"])
        if wanted in ("json", "application/json"):
            return Response(body, media_type="application/json", headers={"Vary": "Accept"})
        page = json.loads(body)
        if not page["found"] and page["iri"].lower().startswith(("http://", "https://")):
            return RedirectResponse(page["iri"], 303)
        return HTMLResponse(render_html(page, kb.path.name), 200 if page["found"] else 404,
                            headers={"Vary": "Accept", "Cache-Control": "no-cache", **PAGE_HEADERS})

    return node


def examples(kb) -> dict:
    """What the web page offers as examples, made from this KB (the page's own are the bio KB's): its most
    populous class (a VoID header's Dataset aside) and the name of one node of it.

    The type is the name ``--type`` takes (``dbo:Country`` where two classes share a local name)."""
    counted = [(name, n) for name, n in kb.info()["types"] if name != "Dataset"] or [("", 0)]
    name = max(counted, key=lambda c: c[1])[0]
    iri = next((i for i, shown in kb.class_names.items() if shown == name), None)
    node = next((d.name for d in kb.documents() if d.name and (iri is None or iri in d.types)), "")
    return {"type": name, "node": node}


def _plain_endpoints(kb, settings, pool):
    """The web page, ``/openapi.json``, ``/health``, and the answers to unknown routes and to bugs."""
    from starlette.responses import FileResponse, JSONResponse

    async def page(_request):
        return FileResponse(WEB / "index.html", headers={"Cache-Control": "no-cache", **PAGE_HEADERS})

    async def openapi(_request):
        return JSONResponse(openapi_description(settings))

    shown: dict = {}

    async def health(_request):
        if not (kb.path / "manifest.json").is_file() or not (kb.path / "store").is_dir():
            # The KB folder is gone (deleted or moved under the server): no worker can open it.
            return JSONResponse({"status": "unavailable", "kb": kb.path.name, "error": f"the KB {kb.path.name} is no "
                                 "longer where the server opened it (deleted or moved?); rebuild it or restart the "
                                 "server"}, 503, headers={"Retry-After": "5"})
        return JSONResponse({"status": "ok", "kb": kb.path.name, "nodes": kb.manifest.get("counts", {}).get("nodes"),
                             "embeddings": kb.has_embeddings, "updates": bool(settings.server.update_token),
                             "network_isolation": pool.isolated, "protection": pool.protection,
                             "prefixes": kb.prefixes,
                             "examples": shown.setdefault("examples", examples(kb))})

    async def not_found(request, exc):
        status = getattr(exc, "status_code", 404)
        return JSONResponse({"error": f"{request.method} {request.url.path}: {getattr(exc, 'detail', '')}",
                             "status": status}, status, headers=getattr(exc, "headers", None))

    async def internal(request, exc):
        return error(exc)

    return page, openapi, health, not_found, internal


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
        text, {"name": "method", "in": "query",
               "schema": {"type": "string", "default": "bm25", "enum": list(METHODS)}},
        {"name": "k", "in": "query", "schema": {"type": "integer", "default": settings.k, "maximum": 1000}},
        {"name": "type", "in": "query", "schema": {"type": "array", "items": {"type": "string"}}, "explode": True}],
        {"type": "object", "properties": {"results": {"type": "array", "items": result}, "provenance": provenance}})
    triplets = op("The triplets read from a question, their linked constants and the SPARQL they compile to",
                  [text, {"name": "strict", "in": "query", "schema": {"type": "boolean", "default": False}}],
                  {"type": "object", "properties": {"triplets": {"type": "object"}, "linked": {"type": "object"},
                                                    "sparql": {"type": ["string", "null"]}}})
    types = {"name": "type", "in": "query", "schema": {"type": "array", "items": {"type": "string"}}, "explode": True}
    expand = op("Expand a query (KAR, its baselines, LKQE) and show the knowledge the expansion came from",
                [text, {"name": "method", "in": "query",
                         "schema": {"type": "string", "default": "kar", "enum": [*EXPANSION, "prf"]}}, types],
                {"type": "object"})
    answer = op("Answer a question from KG facts, node text and registered tables, with the evidence it cites",
                [text, {"name": "source", "in": "query", "explode": True,
                        "schema": {"type": "array", "items": {"type": "string", "enum": ["kg", "text", "tables"]}}}],
                {"type": "object"})
    complete = op("Names of nodes, relations and classes completed as they are typed (best first)", [
        {"name": "q", "in": "query", "schema": {"type": "string", "maxLength": 300}},
        {"name": "class", "in": "query", "schema": {"type": "string"}},
        {"name": "relations_of", "in": "query", "schema": {"type": "string"}},
        {"name": "kind", "in": "query", "explode": True,
         "schema": {"type": "array", "items": {"type": "string", "enum": ["node", "relation", "class"]}}},
        {"name": "limit", "in": "query", "schema": {"type": "integer", "default": 10, "minimum": 1, "maximum": 100}}],
        {"type": "object", "properties": {"q": {"type": "string"}, "completions": {"type": "array", "items": {
            "type": "object", "properties": {"kind": {"type": "string"}, "iri": {"type": "string"},
                                             "prefixed": {"type": ["string", "null"]}, "name": {"type": "string"},
                                             "how": {"type": "string"}}}}}})
    sparql = {"summary": "SPARQL 1.1 Protocol query endpoint (kqe:bm25, kqe:similarity, SERVICE <urn:kqe:search>)",
              "parameters": [{"name": "query", "in": "query", "schema": {"type": "string"}},
                             {"name": "default-graph-uri", "in": "query", "schema": {"type": "string"}},
                             {"name": "named-graph-uri", "in": "query", "schema": {"type": "string"}}],
              "responses": {"200": {"description": "results (negotiated: SPARQL JSON/XML/CSV/TSV, Turtle, "
                                                    "N-Triples, JSON-LD)"}, **errors, "403": error, "406": error}}
    paths = {"/search": {"get": search, "post": search}, "/triplets": {"get": triplets, "post": triplets},
             "/expand": {"get": expand, "post": expand}, "/answer": {"get": answer, "post": answer},
             "/complete": {"get": complete},
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


def check_writable(kb_path: Path) -> None:
    """Refuse at once, in one line, a KB whose store another process writes (another ``serve --update-token``):
    found later, in the first worker, it would surface as uvicorn's startup traceback."""
    from pyoxigraph import Store

    try:
        store = Store(str(Path(kb_path) / "store"))
    except OSError as exc:
        raise KqeError(f"cannot open {Path(kb_path) / 'store'} for updates: another process writes it (is another "
                       f"`kqe-rdf serve --update-token` running on this KB?): {exc}") from None
    del store  # closed: the worker opens it for writing


def uvicorn_config(app, settings, **options):
    """How ``kqe-rdf serve`` runs the app: uvloop and httptools, header deadlines, graceful shutdown."""
    import uvicorn

    proxies = settings.server.proxies
    options = {"host": settings.server.host, "port": settings.server.port, "log_level": "info",
               "timeout_graceful_shutdown": 10, "server_header": False, "access_log": False,
               "proxy_headers": bool(proxies), "forwarded_allow_ips": proxies,
               "http": header_timeout_protocol(settings.server.header_timeout), **options}
    return uvicorn.Config(app, **options)


def serve(kb, settings) -> None:
    """Run the app with uvicorn until interrupted (SIGINT/SIGTERM finish open requests first)."""
    import uvicorn

    if settings.server.update_token and not settings.store.endpoint:
        check_writable(kb.path)

    uvicorn.Server(uvicorn_config(create_app(kb, settings), settings)).run()
