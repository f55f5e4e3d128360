"""What a query does when one of its ``SERVICE`` endpoints fails.

Oxigraph calls the endpoints of a federated query itself, while the results are
read, and reports a failure as whatever its HTTP client or results parser said
("Connection reset by peer", "Parser error at line 1 column 94"). Results are
therefore read here, through :func:`consume`, so that:

- a failure is one :class:`ServiceFailed` error naming the endpoint and what
  went wrong in plain words (the CLI prints it on one line; the server answers
  502, the status of a gateway whose upstream failed);
- ``SERVICE SILENT`` is honoured as SPARQL 1.1 Federated Query (§4) says: "the
  failed SERVICE clause is treated as if it had a result of a single solution
  with no bindings". Oxigraph does that when the endpoint cannot be reached or
  does not answer SPARQL results, but not when the answer breaks off or turns
  invalid part-way; then the query is evaluated again with the failed endpoint's
  ``SERVICE SILENT`` blocks replaced by ``{}`` (that single empty solution), the
  new text verified against the allow-list as before.
"""

from __future__ import annotations

import dataclasses
import errno
from collections.abc import Callable
from typing import TypeVar

from ..core.errors import SparqlError
from ..kb.sparql_guard import ServiceNotAllowed, verify_federation
from ..kb.sparql_lexer import declared_prefixes, resolve, tokenize
from .sparql_search import Prepared, allowed_endpoints, closing_brace, evaluate

T = TypeVar("T")


class ServiceFailed(SparqlError):
    """A SERVICE endpoint (or an update's LOAD source) that could not be reached or did not answer as asked."""

    status = 502


def consume(kb, prepared: Prepared, functions, settings, use: Callable[[object, Callable[[], object]], T],
            **options) -> T:
    """``use(result, again)`` on the query's result (``again()`` evaluates it anew), with SERVICE failures
    handled as the module docstring says; ``options`` are :func:`~.sparql_search.execute`'s."""
    query = prepared
    while True:
        failure = None
        try:
            result = evaluate(kb, query, functions, **options)
            value = use(result, lambda: evaluate(kb, query, functions, **options))
            # A callee's cyclic garbage (a verifier's parse on an earlier attempt) keeps this frame alive through
            # its f_back until a collection, maybe on another thread: the result must not be in it then.
            result = None
            return value
        except (OSError, RuntimeError, ValueError) as exc:  # what pyoxigraph raises while it evaluates
            failure = (cut_off(exc, not query.strict) or service_failure(query, exc)
                       or SparqlError(f"SPARQL evaluation failed: {exc}"))
        # Raised here, outside the except block, so that no traceback keeps the result alive (pyoxigraph results
        # may only be freed on the thread that made them).
        result = None
        endpoint = getattr(failure, "endpoint", None)
        repaired = without_silent_calls(query, endpoint, kb.prefixes, settings) if endpoint else None
        if repaired is None:
            raise failure
        query = repaired


#: What pyoxigraph says when a host name could not be looked up (then it never connected).
_LOOKUP_FAILED = "failed to lookup address information"


def cut_off(exc: BaseException, isolated: bool = True) -> ServiceNotAllowed | None:
    """The error for a call that the network namespace stopped (:mod:`.isolation`): a SERVICE or LOAD the
    guard's reading did not see, which pyoxigraph tried. None for any other failure.

    ``isolated`` (evaluated offline): a host name that could not be looked up is the same answer, word for word,
    as an address that could not be reached, so that the answer does not tell whether a name exists (issue 49).
    """
    said = str(exc)
    if isinstance(exc, OSError) and (exc.errno == errno.ENETUNREACH or "Network is unreachable" in said
                                     or (isolated and _LOOKUP_FAILED in said)):
        return ServiceNotAllowed("the query called out (SERVICE or LOAD) and nothing may be called here: there is "
                                 "no allow-list (server_service_allow), and SPARQL is evaluated without network")
    return None


def service_failure(prepared: Prepared, exc: BaseException) -> ServiceFailed | None:
    """The error to report for ``exc`` when the query calls SERVICE endpoints (None when it calls none)."""
    services = list(dict.fromkeys(prepared.services))
    if not services:
        return None
    said = " ".join(str(exc).split()) or type(exc).__name__
    named = [url for url in services if f"<{url}>" in said]
    loads = set(getattr(prepared, "loads", ()))
    if named or len(services) == 1:
        endpoint = (named or services)[0]
        if endpoint in loads:  # an update's LOAD <source>: a fetch, not a SERVICE call (no SILENT repair for it)
            return ServiceFailed(f"LOAD <{endpoint}> failed: {_plain(exc, said)}")
        error = ServiceFailed(f"the SERVICE endpoint <{endpoint}> failed: {_plain(exc, said)}")
        error.endpoint = endpoint
        return error
    kinds = " or ".join(k for k, there in (("SERVICE endpoints", set(services) - loads), ("LOAD sources", loads))
                        if there)
    return ServiceFailed(f"one of the {kinds} {', '.join(f'<{u}>' for u in services)} failed: {_plain(exc, said)}")


def _plain(exc: BaseException, said: str) -> str:
    """What went wrong, in words, with what the HTTP client or parser said."""
    if isinstance(exc, ConnectionRefusedError):
        what = "the connection was refused (is a SPARQL server running there?)"
    elif isinstance(exc, (ConnectionResetError, ConnectionAbortedError, BrokenPipeError)) or "closed" in said:
        what = "it closed the connection without a complete answer"
    elif isinstance(exc, TimeoutError) or "timed out" in said.lower():
        what = "it did not answer in time"
    elif "Content-Type" in said:
        what = "it did not answer with SPARQL results"
    elif "Parser error" in said or "expected" in said or "Unexpected" in said:
        what = "its answer is not valid SPARQL results"
    else:
        what = "the request failed"
    return f"{what} ({said[:300]})"


def without_silent_calls(prepared: Prepared, endpoint: str, prefixes: dict[str, str], settings) -> Prepared | None:
    """The query with every ``SERVICE SILENT <endpoint> { … }`` replaced by ``{}``; None when it has none."""
    text = prepared.text
    tokens = tokenize(text)
    known = {**prefixes, **declared_prefixes(tokens)}
    edits: list[tuple[int, int]] = []
    i = 0
    while i < len(tokens) - 3:
        first, silent, name, brace = tokens[i:i + 4]
        if (first.kind == "word" and first.text.upper() == "SERVICE" and silent.kind == "word"
                and silent.text.upper() == "SILENT" and resolve(name, known) == endpoint and brace.text == "{"):
            close = closing_brace(tokens, i + 3)
            edits.append((first.start, tokens[close].end))
            i = close + 1
        else:
            i += 1
    if not edits:
        return None
    for start, end in reversed(edits):
        text = text[:start] + "{}" + text[end:]
    verified = verify_federation(text, allowed_endpoints(settings.server.service_allow), prefixes,
                                 strict=prepared.strict)
    return dataclasses.replace(prepared, text=verified.text, services=verified.services + verified.loads)
