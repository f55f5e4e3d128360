"""Reading a request: its body within the size and time limits, the SPARQL Protocol's and the REST API's
parameters, and turning any failure into an answer that says what was wrong (never a traceback).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import math
import os
import re
from typing import NamedTuple
from urllib.parse import parse_qsl

from pyoxigraph import NamedNode

from ..core.errors import KqeError
from .protocol import HTTPError, status_of

log = logging.getLogger("kqe_rdf.service.app")


def error(exc: Exception, as_json: bool = True):
    """The response to a failure: its status and message, or a bare 500 for a bug (logged with its traceback)."""
    from starlette.responses import JSONResponse, PlainTextResponse

    if isinstance(exc, KqeError):
        status, message, headers = status_of(exc), str(exc), getattr(exc, "headers", {})
    else:  # a bug: logged with its traceback, reported without one
        log.exception("internal error")
        status, message, headers = 500, "internal server error (the server log has the details)", {}
    message = message.encode("utf-8", "backslashreplace").decode("utf-8")  # a lone surrogate the client sent
    if as_json:
        return JSONResponse({"error": message, "status": status}, status, headers=headers)
    return PlainTextResponse(message + "\n", status, headers=headers)


class Client(NamedTuple):
    """Who a request is from, for sharing the query workers (:class:`~kqe_rdf.service.workers.WorkerPool`).

    ``key`` names the client: ``credentials <hash>`` when the request sends an
    ``Authorization`` header (a bearer token, the update token), so clients behind
    one address (a NAT, a proxy) each get their own share, else ``address <ip>``.
    ``address`` is the peer's IP address, or the client that X-Forwarded-For names
    when the peer is one of ``server_trusted_proxies``.
    """

    key: str
    address: str


#: A secret of this process: a client's key hashes its credentials with it, so the key (which a test or a
#: debugger may see; no message or log line shows it) cannot be matched to a guessed token.
_KEY_SECRET = os.urandom(16)


def client_of(request) -> Client:
    """The :class:`Client` a request is from; its credentials are never kept, only their keyed hash."""
    address = request.client.host if request.client else "unknown"
    credentials = request.headers.get("authorization", "").strip()
    if not credentials:
        return Client("address " + address, address)
    digest = hashlib.blake2b(credentials.encode("latin-1"), key=_KEY_SECRET, digest_size=12).hexdigest()
    return Client("credentials " + digest, address)


async def body_of(request, settings) -> bytes:
    """The request body, refused past ``server_max_request_bytes`` or ``server_body_timeout``."""
    limit = settings.server.max_request_bytes
    declared = request.headers.get("content-length")
    if declared and declared.isdigit() and int(declared) > limit:
        raise HTTPError(413, f"request body of {int(declared):,} bytes is over the limit of {limit:,} "
                             "(server_max_request_bytes)")
    chunks, size = [], 0
    try:
        async with asyncio.timeout(settings.server.body_timeout):
            async for chunk in request.stream():
                size += len(chunk)
                if size > limit:
                    raise HTTPError(413, f"request body is over the limit of {limit:,} bytes "
                                         "(server_max_request_bytes)")
                chunks.append(chunk)
    except TimeoutError:
        raise HTTPError(408, f"the request body did not arrive within {settings.server.body_timeout:g} s "
                             "(server_body_timeout)", {"Connection": "close"}) from None
    return b"".join(chunks)


def check_graphs(name: str, values: list[str]) -> list[str]:
    from .sparql_search import COMMIT_MARKS, RESERVED  # noqa: PLC0415

    for value in values:
        try:
            NamedNode(value)
        except (ValueError, TypeError):
            raise HTTPError(400, f"parameter '{name}' must be an absolute IRI, got {value[:200]!r}") from None
        if value == COMMIT_MARKS:
            raise HTTPError(400, f"parameter '{name}': {RESERVED}")
    return values


_HOST = re.compile(r"[A-Za-z0-9.\-]+(?::\d+)?|\[[0-9A-Fa-f:.]+\](?::\d+)?")


def base_iri(request) -> str:
    """The request's URL without its query string: the base relative IRIs in a query resolve against (SPARQL 1.1
    Protocol), read from the ASGI scope; a Host header that is no host name is replaced by the server's address."""
    scope = request.scope
    host = request.headers.get("host", "")
    if not _HOST.fullmatch(host):
        server = scope.get("server") or ("localhost", None)
        host = server[0] if server[1] is None else f"{server[0]}:{server[1]}"
    return f"{scope.get('scheme', 'http')}://{host}{scope.get('root_path', '')}{scope['path']}"


def query_string(request) -> str:
    """The URL's query string, read from the ASGI scope (building starlette's URL object costs more)."""
    return request.scope["query_string"].decode("latin-1")


def check_url(request, settings) -> None:
    limit = settings.server.max_request_bytes
    if len(request.scope["query_string"]) > limit:
        raise HTTPError(413, f"query string is over the limit of {limit:,} bytes; POST the query instead")


async def protocol_params(request, field: str, body_type: str, settings) -> dict[str, list[str]]:
    """The SPARQL Protocol parameters of a GET or POST request."""
    check_url(request, settings)
    params: dict[str, list[str]] = {}
    for key, value in parse_qsl(query_string(request), keep_blank_values=True):
        params.setdefault(key, []).append(value)
    if request.method == "POST":
        kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
        raw = await body_of(request, settings)
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


async def rest_params(request, settings) -> dict:
    """Parameters of a REST call: the URL's, then a JSON or form body's."""
    check_url(request, settings)
    params: dict = {}
    for key, value in parse_qsl(query_string(request), keep_blank_values=True):
        params.setdefault(key, []).append(value)
    if request.method == "POST":
        kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
        raw = await body_of(request, settings)
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
