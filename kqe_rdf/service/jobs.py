"""What a worker process runs (:mod:`.workers`): the REST jobs (search, triplets, expand, answer) and the
SPARQL query and update jobs, each on the worker's own KB; errors name the parameter they are about.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import time

from pyoxigraph import NamedNode

from ..core.errors import KqeError, SparqlError
from ..kb.queries import load, load_update, with_values
from .protocol import VOLATILE, HTTPError, Rendered, render
from .federation import ServiceFailed, consume, cut_off, service_failure
from ..kb.sparql_lexer import tokenize
from .sparql_search import prepare

log = logging.getLogger(__name__)


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


def search_job(context, params: dict) -> dict:
    from ..methods.registry import METHODS
    from ..methods.retrieval import result_rows

    kb, settings = context.kb, context.settings
    text = _text(params)
    method = one(params, "method", "bm25")
    if method not in METHODS:
        raise HTTPError(400, f"parameter 'method': no retrieval method {method!r}; available: {', '.join(METHODS)}")
    k = one(params, "k", settings.k, int)
    if not 1 <= k <= 1000:
        raise HTTPError(400, "parameter 'k' must be between 1 and 1000")
    types = _types(kb, params)
    stage = context.pipeline(method, k, types)
    batch = stage.run(text, names=False)  # (result_rows reads the names)
    return {"query": text, "method": method, "k": k, "types": types,
            "results": result_rows(kb, batch.ranked("q"), batch.explain.get("q")),
            "provenance": {"pipeline": repr(stage), "explain": batch.explain.get("q")}}


def triplets_job(context, params: dict) -> dict:
    settings = context.settings
    text = _text(params)
    mode = "strict" if one(params, "strict", False, bool) else "soft"
    reading = dataclasses.replace(settings, fourstep=dataclasses.replace(settings.fourstep, mode=mode))
    stage = context.pipeline("4step", settings.k, settings=reading)
    return {"query": text, **stage.reading(text)}


def expand_job(context, params: dict) -> dict:
    from ..methods.expansion import expand as expansion

    kb, settings = context.kb, context.settings
    text, types = _text(params), _types(kb, params)
    method = one(params, "method", "kar")
    try:
        return expansion(kb, settings, text, method, types or None).as_dict()
    except HTTPError:
        raise
    except KqeError as exc:
        raise HTTPError(400, f"parameter 'method' ({method!r}): {exc}") from None


def answer_job(context, params: dict) -> dict:
    from ..methods.answering import answer as answering, check_sources

    kb, settings = context.kb, context.settings
    sources = [str(v) for v in params.get("source", []) + params.get("sources", [])]
    try:
        checked = check_sources(sources) if sources else None
    except KqeError as exc:
        raise HTTPError(400, f"parameter 'source': {exc}") from None
    return answering(kb, settings, _text(params), checked).as_dict()


def node_job(context, params: dict) -> dict:
    """A node's page as data (:func:`.node.describe`); 404 when the KB holds no fact about the IRI."""
    from .node import PAGE, describe, node_iri

    kb = context.kb
    try:
        iri = node_iri(one(params, "iri"), kb.prefixes)
        page = describe(kb, iri, params.get("relation", [None])[0], one(params, "direction", "out"),
                        one(params, "offset", 0, int), one(params, "limit", PAGE, int))
    except HTTPError:
        raise
    except KqeError as exc:
        raise HTTPError(400, str(exc)) from None
    return page


def complete_job(context, params: dict) -> dict:
    """Names completed (:func:`.complete.complete`): the search box's and the SPARQL editor's suggestions."""
    from .complete import LIMIT, complete

    return complete(context.kb, one(params, "q", ""), params.get("class", [None])[0],
                    params.get("relations_of", [None])[0], one(params, "limit", LIMIT, int),
                    [str(k) for k in params.get("kind", [])] or None)


REST_JOBS = {"search": search_job, "triplets": triplets_job, "expand": expand_job, "answer": answer_job,
             "node": node_job, "complete": complete_job}


@contextlib.contextmanager
def naming(parameter: str):
    """Errors about the request's text name its parameter: "parameter 'query': SPARQL syntax error ..."."""
    try:
        yield
    except KqeError as exc:
        if not isinstance(exc, (HTTPError, ServiceFailed)) and "parameter '" not in str(exc):
            exc.args = (f"parameter '{parameter}': {exc}", *exc.args[1:])
        raise


def sparql_job(context, payload: dict, deadline: float) -> Rendered:
    """A SPARQL query evaluated and rendered in the negotiated format (a failing SERVICE endpoint: 502).

    Evaluated on the worker's job thread, in its network namespace when it has one (its searches run on the
    thread that keeps the network: :mod:`.workers`)."""
    kb, settings = context.kb, context.settings
    with naming("query"):
        prepared = context.prepare(payload["query"])
    options = {"default_graphs": payload["defaults"], "named_graphs": payload["named"], "base_iri": payload.get("base"),
               "union": settings.server.union_default_graph}
    failure = None
    try:
        with naming("query"):  # (a SyntaxError surfaces when the query is first evaluated)
            rendered = consume(kb, prepared, context.functions, settings,
                               lambda result, again: render(result, payload["accept"], settings.server.result_cap,
                                                            deadline, again=again), **options)
    except Exception as exc:  # noqa: BLE001
        if not isinstance(exc, KqeError):
            log.exception("internal error while rendering results")
        # pyoxigraph results may only be freed on the thread that made them: drop every reference here (the
        # traceback's frames hold one) before the answer leaves this function.
        failure = exc.with_traceback(None)
    if failure is not None:
        raise failure
    rendered.searches = prepared.searches
    rendered.repeatable = (not rendered.graph and not prepared.services
                           and not VOLATILE.search(prepared.text))
    return rendered


def _marked(text: str, marker: str | None) -> str:
    """The update with its commit mark as its last operation (:func:`update_job`)."""
    if marker is None:
        return text
    mark = with_values(load_update("update_commit_mark"), update=[NamedNode(marker)])
    if not text.strip():
        return mark
    tokens = tokenize(text)
    # A newline ends a trailing comment; an update that already ends with ";", or is a prologue alone ("BASE <…>",
    # an empty update the grammar allows), takes no separator before the mark.
    prologue = all(t.text.upper() in ("BASE", "PREFIX") or t.kind in ("iri", "pname") for t in tokens)
    return text + ("\n" if not tokens or prologue or tokens[-1].text == ";" else "\n;\n") + mark


def update_job(context, payload: dict) -> None:
    """A SPARQL Update, evaluated as a query is (in the job thread's network namespace when it has one).

    Oxigraph runs an update in one transaction, which commits well before ``update()`` returns (a 400,000-triple
    insert committed at 1.4 s and returned at 4.8 s), so a worker stopped at its deadline may have written it all.
    The ``marker`` (an id from the server) is inserted by the update's last operation, in the same transaction,
    into a graph that operation empties first (whatever the client's operations did to it): after a stop,
    :func:`committed_job` on a fresh worker says which happened, and the answer says so too."""
    kb, settings = context.kb, context.settings
    marker = payload.get("marker")
    with naming("update"):
        prepared = prepare(kb, payload["update"], settings, update=True, strict=not context.protection.active)
        try:
            kb.store.update(_marked(prepared.text, marker), prefixes=kb.prefixes,
                            custom_functions=context.functions.functions, base_iri=payload.get("base"))
            context.updated()
            if marker is not None:
                sweep_marks(kb)
        except SyntaxError as exc:
            raise SparqlError(f"SPARQL Update syntax error: {exc}") from None
        except (OSError, ValueError, RuntimeError) as exc:
            raise (cut_off(exc, not prepared.strict) or service_failure(prepared, exc)
                   or SparqlError(f"SPARQL Update failed: {exc}")) from None


def committed_job(context, payload: dict) -> bool:
    """Whether the update marked ``marker`` committed (its worker was stopped before it answered). The pool runs
    this before any other job gets the store (:meth:`~.workers.WorkerPool.run`), so no client can have touched the
    mark; the mark graph is emptied once read, whatever it held."""
    kb, marker = context.kb, payload["marker"]
    seen = bool(kb.store.query(with_values(load("update_commit_seen"), update=[NamedNode(marker)])))
    sweep_marks(kb)
    return seen


def sweep_marks(kb) -> None:
    """Every update mark removed (at start-up, after an answered update, after a commit check): no request waits
    on one then."""
    kb.store.update(load_update("update_commits_drop"))


def run_job(context, kind: str, payload: dict, deadline: float):
    """One job in a worker process (:mod:`kqe_rdf.service.workers`): a rendered query, nothing, or a JSON body."""
    if kind == "sparql":
        return vars(sparql_job(context, payload, deadline))  # plain data: no class to look up when unpickled
    if kind == "update":
        return update_job(context, payload)
    if kind == "committed":
        return committed_job(context, payload)
    started = time.perf_counter()
    out = context.networked.run(REST_JOBS[kind], context, payload)  # an LLM may be called: not in the namespace
    out["elapsed_ms"] = round((time.perf_counter() - started) * 1000, 1)
    return json.dumps(out, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode()
