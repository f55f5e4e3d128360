"""A real OpenAI-compatible chat server on 127.0.0.1 that gives scripted answers, for tests.

It speaks the wire protocol the ``openai`` client speaks (``POST /v1/chat/completions``,
``GET /v1/models``), so code under test talks to it exactly as it talks to vLLM, llama.cpp
or OpenAI. Each chat request takes the next scripted answer from a queue:

- a ``str``: the assistant's content (``finish_reason`` "stop");
- ``Reply(...)``: anything else — ``content=None``, ``finish_reason="length"``, token counts,
  an HTTP status with an OpenAI-style error body, a delay before answering (client timeouts),
  a raw body (HTML pages, broken JSON) or extra headers (``Retry-After``);
- a ``dict``: the whole response body, sent as JSON as it is (wrong types, missing fields);
- a callable ``(request_json) -> any of the above``, to answer from the prompt.

Helpers build the common ones: ``error(500)``, ``delay(2.0, "late")``, ``malformed("<html>")``.
Every chat request's JSON body is kept in ``server.requests``. With the queue empty the server
answers 400 "no scripted answer left", which the client reports instead of hanging.

Use the ``chat_server`` fixture (one fresh server per test)::

    def test_it(chat_server):
        chat_server.script("hello", error(503), '{"a": 1}')
        llm = LLM(model="scripted", base_url=chat_server.url)
        ...
        assert chat_server.requests[0]["messages"][-1]["content"] == "..."
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from kqe_rdf.core.config import Settings

_STATUS_TYPES = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
                 404: "not_found_error", 422: "invalid_request_error", 429: "rate_limit_error"}


@dataclass
class Reply:
    """One scripted response. The defaults make a normal successful completion."""

    content: str | None = ""
    status: int = 200
    #: Error message for a non-200 status (sent in an OpenAI-style ``{"error": {...}}`` body).
    message: str = ""
    finish_reason: str | None = "stop"
    #: ``(prompt_tokens, completion_tokens)``; by default, whitespace-separated words of prompt and answer.
    usage: tuple[int, int] | None = None
    #: Seconds to wait before answering (the connection stays open: a client with a shorter timeout gives up).
    delay: float = 0.0
    #: A raw body sent instead of the JSON one (bytes or text), with ``content_type``.
    body: bytes | str | None = None
    content_type: str = "application/json"
    headers: Mapping[str, str] = field(default_factory=dict)
    model: str | None = None


def error(status: int, message: str = "", **headers: str) -> Reply:
    """An HTTP error with an OpenAI-style body, e.g. ``error(429, retry_after="0")``."""
    return Reply(status=status, message=message or f"scripted error {status}",
                 headers={k.replace("_", "-"): v for k, v in headers.items()})


def delay(seconds: float, then: str | Reply = "") -> Reply:
    """Answer ``then`` only after ``seconds`` (longer than the client's timeout: the client times out)."""
    reply = then if isinstance(then, Reply) else Reply(content=then)
    reply.delay = seconds
    return reply


def malformed(body: bytes | str, status: int = 200, content_type: str = "text/html") -> Reply:
    """A body that is not a chat completion: an HTML error page, truncated JSON, nothing at all."""
    return Reply(status=status, body=body, content_type=content_type)


def _words(value: Any) -> int:
    if isinstance(value, str):
        return len(value.split())
    if isinstance(value, list):
        return sum(_words(part.get("text") if isinstance(part, dict) else part) for part in value)
    return 0


class ChatServer:
    """The server, started in a daemon thread on a free port; a context manager that stops it."""

    def __init__(self, models: tuple[str, ...] = ("scripted-model",)) -> None:
        self.models = list(models)
        #: JSON bodies of the chat-completion requests received, in order.
        self.requests: list[dict[str, Any]] = []
        #: HTTP headers of the chat-completion requests (lower-case names), in order.
        self.headers: list[dict[str, str]] = []
        #: Paths of every request received (chat, models, unknown), in order.
        self.paths: list[str] = []
        self._queue: deque[Any] = deque()
        self._lock = threading.Lock()
        self._closing = threading.Event()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, args=(0.02,), name="chat-server",
                                        daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        """The base URL clients are given (``http://127.0.0.1:PORT/v1``)."""
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}/v1"

    def script(self, *replies: Any) -> ChatServer:
        """Queue answers for the next requests, in order."""
        with self._lock:
            self._queue.extend(replies)
        return self

    @property
    def pending(self) -> int:
        """Scripted answers not yet used."""
        with self._lock:
            return len(self._queue)

    def prompt(self, index: int = -1) -> str:
        """The text of all messages of one request, joined (for asserting on what the model was asked)."""
        return "\n".join(str(m.get("content")) for m in self.requests[index]["messages"])

    def close(self) -> None:
        self._closing.set()
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> ChatServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # The handler's side.

    def _next(self, request: dict[str, Any], headers: dict[str, str]) -> Any:
        with self._lock:
            self.requests.append(request)
            self.headers.append(headers)
            if not self._queue:
                return error(400, f"chat_server: no scripted answer left (request {len(self.requests)})")
            reply = self._queue.popleft()
        while callable(reply) and not isinstance(reply, Reply):
            reply = reply(request)
        return reply

    def _completion(self, reply: Reply, request: dict[str, Any]) -> dict[str, Any]:
        prompt_tokens, completion_tokens = reply.usage or (
            sum(_words(m.get("content")) for m in request.get("messages") or [] if isinstance(m, dict)),
            _words(reply.content))
        return {
            "id": f"chatcmpl-{len(self.requests)}", "object": "chat.completion", "created": int(time.time()),
            "model": reply.model or request.get("model") or self.models[0],
            "choices": [{"index": 0, "message": {"role": "assistant", "content": reply.content},
                         "finish_reason": reply.finish_reason}],
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                      "total_tokens": prompt_tokens + completion_tokens},
        }


def _handler_for(server: ChatServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:  # quiet: pytest shows failures, not traffic
            pass

        def _send(self, status: int, body: bytes, content_type: str = "application/json",
                  headers: Mapping[str, str] = {}) -> None:
            try:
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                for name, value in headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(body)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (timeout); nothing to tell it

        def _json(self, status: int, value: Any, headers: Mapping[str, str] = {}) -> None:
            self._send(status, json.dumps(value).encode(), headers=headers)

        def do_GET(self) -> None:
            server.paths.append(self.path)
            if self.path.rstrip("/").endswith("/models"):
                self._json(200, {"object": "list", "data": [
                    {"id": m, "object": "model", "created": 0, "owned_by": "chat_server"} for m in server.models]})
            else:
                self._json(404, {"error": {"message": f"no route {self.path}", "type": "not_found_error"}})

        def do_POST(self) -> None:
            server.paths.append(self.path)
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            if not self.path.rstrip("/").endswith("/chat/completions"):
                self._json(404, {"error": {"message": f"no route {self.path}", "type": "not_found_error"}})
                return
            try:
                request = json.loads(raw)
            except ValueError:
                self._json(400, {"error": {"message": "request body is not JSON", "type": "invalid_request_error"}})
                return
            reply = server._next(request, {k.lower(): v for k, v in self.headers.items()})
            if isinstance(reply, str):
                reply = Reply(content=reply)
            if isinstance(reply, Reply) and reply.delay and server._closing.wait(reply.delay):
                return
            if isinstance(reply, dict):
                self._json(200, reply)
            elif reply.body is not None:
                body = reply.body.encode() if isinstance(reply.body, str) else reply.body
                self._send(reply.status, body, reply.content_type, reply.headers)
            elif reply.status != 200:
                self._json(reply.status, {"error": {
                    "message": reply.message, "type": _STATUS_TYPES.get(reply.status, "server_error"),
                    "param": None, "code": None}}, reply.headers)
            else:
                self._json(200, server._completion(reply, request), reply.headers)

    return Handler


@pytest.fixture
def chat_server():
    """A fresh scripted chat server for one test (see the module docstring)."""
    with ChatServer() as server:
        yield server


@pytest.fixture
def settings(chat_server):
    """``settings(**overrides)``: the LLM on the test's server, no cache, test-sized timeouts."""

    def make(**overrides) -> Settings:
        options = {"llm_base_url": chat_server.url, "llm_model": "scripted", "llm_cache": "off",
                   "llm_timeout": 0.5, "llm_max_retries": 1, "llm_backoff": 0.01, **overrides}
        return Settings(**options)

    return make
