"""The one way kqe-rdf talks to language models: any OpenAI-compatible chat server.

OpenAI, vLLM, llama.cpp's server and Ollama all speak the same chat-completions
protocol, so one client (the ``openai`` package) serves them all; the server, the
model, the key and the timeouts come from :class:`~kqe_rdf.core.config.Settings`
(``OPENAI_BASE_URL``, ``OPENAI_API_KEY``, ``KQE_LLM_MODEL``, ``kqe-rdf.toml``).
With no LLM configured :meth:`LLM.from_settings` returns ``None`` and callers run
their offline variants — and say so with :func:`describe_llm`.

Around each call: a persistent SQLite cache (re-runs are reproducible and free),
retries with exponential backoff on transient failures only, a per-query
:class:`Budget` of calls and tokens checked *before* a call is made, and
:class:`Usage` accounting. :meth:`LLM.json` asks for JSON (a JSON schema where the
server takes one, plain JSON mode or an instruction where it does not), repairs the
usual breakage, validates, re-asks once, and returns a :class:`StructuredResult`
rather than raising when the answer stays unusable (the reading and checking of
answers is :mod:`kqe_rdf.llm.structured`)::

    llm = LLM.from_settings(Settings.load())
    if llm is None:
        ...  # the offline variant
    with llm.budget(calls=4) as per_query:
        result = llm.json("Which diseases ...? Answer as {\\"diseases\\": [...]}", schema=SCHEMA)
    if result.ok:
        use(result.value)
    print(per_query.usage, llm.usage)

>>> describe_llm(Settings())
'offline (no LLM configured)'
>>> describe_llm(Settings(llm_model="qwen2.5-7b-instruct", llm_base_url="http://localhost:8000/v1"))
'model qwen2.5-7b-instruct at http://localhost:8000/v1'
"""

from __future__ import annotations

import contextvars
import hashlib
import json
import logging
import random
import re
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ..core.config import CPU_SERVER_OUTPUT_TOKENS, CPU_SERVER_TIMEOUT, Settings
from ..core.errors import KqeError
from .structured import StructuredResult, extract_json, interpret, validate_json  # noqa: F401 - re-exported

log = logging.getLogger(__name__)

#: Where the OpenAI client goes when only a model is configured.
OPENAI_URL = "https://api.openai.com/v1"
#: Placeholder key for servers that need none (the client refuses to start without one).
_NO_KEY = "no-key"
#: Longest wait between retries, and the longest Retry-After a server may ask for.
_MAX_BACKOFF = 30.0
#: Characters of an answer that a result keeps in ``raw``.
_MAX_RAW_CHARS = 100_000
#: Characters of a bad answer quoted back to the model when re-asking.
_MAX_REASK_CHARS = 4_000


class LLMError(KqeError):
    """A call to the LLM failed: the server is unreachable, refused the request, or answered garbage.

    ``status`` is the HTTP status when there was one.
    """

    def __init__(self, message: str, status: int | None = None, detail: str = "") -> None:
        super().__init__(message)
        self.status = status
        #: The server's own error message, when it sent one.
        self.detail = detail


class BudgetExceeded(LLMError):
    """A call would go over the per-query budget of calls or tokens; raised before the call is made."""


# Usage and budgets.

@dataclass
class Usage:
    """What LLM calls cost: requests answered, cache hits, tokens, retries and failed calls.

    >>> Usage(calls=1, prompt_tokens=10, completion_tokens=5) + Usage(cache_hits=2, cached_tokens=30)
    Usage(calls=1, cache_hits=2, prompt_tokens=10, completion_tokens=5, cached_tokens=30, retries=0, failures=0)
    """

    #: Requests the server answered (cache hits not included).
    calls: int = 0
    cache_hits: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    #: Tokens the cached answers cost when they were first asked: what a method spends without the cache.
    cached_tokens: int = 0
    #: Attempts repeated after a transient failure.
    retries: int = 0
    #: Calls that ended in an LLMError.
    failures: int = 0

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def __add__(self, other: Usage) -> Usage:
        return Usage(**{k: v + getattr(other, k) for k, v in asdict(self).items()})

    def as_dict(self) -> dict[str, int]:
        """The counts and ``total_tokens``, e.g. for a per-query JSON report."""
        return {**asdict(self), "total_tokens": self.total_tokens}


_current_budget: contextvars.ContextVar[Budget | None] = contextvars.ContextVar("kqe_llm_budget", default=None)


class Budget:
    """A limit on the calls and tokens one query may spend; ``None`` means unlimited.

    Pass it along (``llm.json(..., budget=b)``) or enter it (``with llm.budget(calls=3) as b:``),
    which makes it apply to every call in the block, including in nested budgets. A call that
    would go over raises :class:`BudgetExceeded` before anything is sent. Cache hits are free.

    >>> b = Budget(calls=1)
    >>> b.check()
    >>> b.charge(Usage(calls=1, prompt_tokens=7))
    >>> b.check()
    Traceback (most recent call last):
    ...
    kqe_rdf.llm.client.BudgetExceeded: LLM budget exceeded: 1 of 1 calls used (llm_max_calls_per_query)
    """

    def __init__(self, calls: int | None = None, tokens: int | None = None) -> None:
        for name, value in (("calls", calls), ("tokens", tokens)):
            if value is not None and value < 0:
                raise ValueError(f"Budget({name}=...) must not be negative, got {value!r}")
        self.calls = calls
        self.tokens = tokens
        #: What was spent under this budget.
        self.usage = Usage()
        self.parent: Budget | None = None
        self._lock = threading.Lock()
        self._tokens: list[contextvars.Token] = []

    def check(self, prompt_tokens: int = 0) -> None:
        """Raise BudgetExceeded if one more call (of about ``prompt_tokens`` prompt tokens) would go over."""
        for budget in self._chain():
            with budget._lock:
                used = budget.usage
                if budget.calls is not None and used.calls >= budget.calls:
                    raise BudgetExceeded(f"LLM budget exceeded: {used.calls} of {budget.calls} calls used "
                                         f"(llm_max_calls_per_query)")
                if budget.tokens is not None and used.total_tokens + prompt_tokens > budget.tokens:
                    raise BudgetExceeded(
                        f"LLM budget exceeded: {used.total_tokens} of {budget.tokens} tokens used and the next "
                        f"prompt is about {prompt_tokens} more (llm_max_tokens_per_query)")

    def charge(self, usage: Usage) -> None:
        """Add what a call cost to this budget and to the budgets it is nested in."""
        for budget in self._chain():
            with budget._lock:
                budget.usage = budget.usage + usage

    def _chain(self) -> Iterator[Budget]:
        budget: Budget | None = self
        while budget is not None:
            yield budget
            budget = budget.parent

    def __enter__(self) -> Budget:
        if self._tokens:
            raise RuntimeError("this Budget is already entered; make a new one for a nested block")
        outer = _current_budget.get()
        self.parent = outer if outer is not self else None
        self._tokens.append(_current_budget.set(self))
        return self

    def __exit__(self, *exc: object) -> None:
        _current_budget.reset(self._tokens.pop())

    def __repr__(self) -> str:
        return f"Budget(calls={self.calls!r}, tokens={self.tokens!r}, usage={self.usage!r})"


# Results.

@dataclass(frozen=True)
class Completion:
    """One chat completion: the content (``None`` when the server sent none) and what it cost."""

    content: str | None
    finish_reason: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    model: str = ""
    cached: bool = False


# The response cache.

class ResponseCache:
    """Answers by request hash in SQLite (WAL: concurrent readers, one transaction per write)."""

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(str(self.path), timeout=30.0, check_same_thread=False,
                                       isolation_level=None)
            self._db.execute("PRAGMA busy_timeout = 30000")
            try:
                self._db.execute("PRAGMA journal_mode = WAL")
            except sqlite3.OperationalError:  # e.g. a file system without shared memory: rollback journal
                pass
            self._db.execute("PRAGMA synchronous = NORMAL")
            self._db.execute("CREATE TABLE IF NOT EXISTS responses (key TEXT PRIMARY KEY, model TEXT NOT NULL, "
                             "created REAL NOT NULL, response TEXT NOT NULL)")
        except (OSError, sqlite3.Error) as exc:
            raise LLMError(f"cannot open the LLM response cache {self.path} ({exc}); "
                           f"point llm_cache (KQE_LLM_CACHE) elsewhere or set it to 'off'") from None

    @staticmethod
    def key(request: Mapping[str, Any]) -> str:
        """Hash of model, messages and every parameter sent."""
        canonical = json.dumps({"v": 1, **request}, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
        return hashlib.sha256(canonical.encode("utf-8")).hexdigest()

    def get(self, key: str) -> dict[str, Any] | None:
        try:
            with self._lock:
                row = self._db.execute("SELECT response FROM responses WHERE key = ?", (key,)).fetchone()
            value = json.loads(row[0]) if row else None
        except (sqlite3.Error, ValueError) as exc:
            log.warning("LLM cache %s unreadable (%s); asking the model", self.path, exc)
            return None
        return value if isinstance(value, dict) else None

    def put(self, key: str, model: str, response: Mapping[str, Any]) -> None:
        try:
            with self._lock:
                self._db.execute("INSERT OR REPLACE INTO responses (key, model, created, response) "
                                 "VALUES (?, ?, ?, ?)", (key, model, time.time(), json.dumps(response)))
        except sqlite3.Error as exc:
            log.warning("LLM cache %s not written (%s)", self.path, exc)

    def __len__(self) -> int:
        with self._lock:
            return self._db.execute("SELECT count(*) FROM responses").fetchone()[0]

    def close(self) -> None:
        with self._lock:
            self._db.close()


# The client.

Messages = str | Sequence[Mapping[str, Any]]


class LLM:
    """A chat model behind an OpenAI-compatible endpoint, with cache, retries, budgets and usage.

    Usually made by :meth:`from_settings`; thread-safe (one instance can serve parallel queries,
    each with its own :class:`Budget` passed along).
    """

    def __init__(self, model: str | None = None, base_url: str | None = None, api_key: str | None = None, *,
                 timeout: float = 60.0, max_retries: int = 4, backoff: float = 1.0,
                 cache: Path | str | None = None, temperature: float = 0.0, max_tokens: int | None = None,
                 max_calls_per_query: int | None = None, max_tokens_per_query: int | None = None) -> None:
        import openai  # deferred: a second of imports that offline runs never need

        if not model and not base_url:
            raise LLMError("no LLM configured: set KQE_LLM_MODEL (llm_model) and/or OPENAI_BASE_URL (llm_base_url)")
        self.base_url = (base_url or OPENAI_URL).rstrip("/")
        self._model = model or None
        self.timeout = timeout
        self.max_retries = max_retries
        self.backoff = backoff
        self.temperature = temperature
        self.max_tokens = max_tokens or None
        self.max_calls_per_query = max_calls_per_query or None
        self.max_tokens_per_query = max_tokens_per_query or None
        #: Everything this instance spent (per-query usage is on each Budget).
        self.usage = Usage()
        self.cache = ResponseCache(cache) if cache is not None else None
        self._openai = openai
        self._client = openai.OpenAI(api_key=api_key or _NO_KEY, base_url=self.base_url, timeout=timeout,
                                     max_retries=0)
        self._lock = threading.Lock()
        #: Structured-output modes this server rejected (kept for the life of the instance).
        self._unsupported: set[str] = set()

    @classmethod
    def from_settings(cls, settings: Settings) -> LLM | None:
        """The configured LLM, or ``None`` when neither a base URL nor a model is set.

        >>> LLM.from_settings(Settings()) is None
        True
        """
        if not settings.llm.base_url and not settings.llm.model:
            return None
        off = str(settings.llm.cache).strip().lower() in ("", ".", "off", "none", "false", "0")
        timeout, retries, cap = settings.llm.timeout, settings.llm.max_retries, settings.llm.max_output_tokens
        if settings.llm.profile == "cpu-server":
            timeout, retries, cap = max(timeout, CPU_SERVER_TIMEOUT), min(retries, 1), cap or CPU_SERVER_OUTPUT_TOKENS
        return cls(settings.llm.model or None, settings.llm.base_url or None, settings.llm.api_key or None,
                   timeout=timeout, max_retries=retries,
                   backoff=settings.llm.backoff, cache=None if off else settings.llm.cache,
                   temperature=settings.llm.temperature, max_tokens=cap or None,
                   max_calls_per_query=settings.llm.max_calls_per_query or None,
                   max_tokens_per_query=settings.llm.max_tokens_per_query or None)

    @property
    def model(self) -> str:
        """The model name; with none configured, the first one the server lists (asked once)."""
        if self._model is None:
            with self._lock:
                if self._model is None:
                    self._model = self._first_listed_model()
        return self._model

    def describe(self) -> str:
        return f"model {self._model or '(first listed by the server)'} at {self.base_url}"

    def budget(self, calls: int | None = None, tokens: int | None = None) -> Budget:
        """A per-query budget, by default ``llm_max_calls_per_query`` / ``llm_max_tokens_per_query``.

        Use it as ``with llm.budget() as b:`` (every call in the block counts) or pass it as ``budget=``.
        """
        return Budget(self.max_calls_per_query if calls is None else calls,
                      self.max_tokens_per_query if tokens is None else tokens)

    # The three ways to ask.

    def text(self, messages: Messages, *, temperature: float | None = None, max_tokens: int | None = None,
             budget: Budget | None = None) -> str:
        """The model's free-text answer ("" when it sent no content). Raises LLMError when the call fails."""
        return self.complete(messages, temperature=temperature, max_tokens=max_tokens, budget=budget).content or ""

    def complete(self, messages: Messages, *, response_format: Mapping[str, Any] | None = None,
                 temperature: float | None = None, max_tokens: int | None = None,
                 budget: Budget | None = None) -> Completion:
        """One chat completion, from the cache when this exact request was answered before."""
        request = self._request(_as_messages(messages), response_format, temperature, max_tokens)
        return self._lookup(request, budget) or self._call(request, budget)

    def json(self, messages: Messages, schema: Mapping[str, Any] | None = None,
             validate: Callable[[Any], object] | None = None, *, name: str = "answer",
             temperature: float | None = None, max_tokens: int | None = None,
             budget: Budget | None = None) -> StructuredResult:
        """A JSON answer, parsed, repaired, checked against ``schema`` and ``validate``, re-asked once if unusable.

        ``validate(value)`` may return None/True (fine), False or an error message, or raise. An answer
        that stays unusable gives ``StructuredResult(ok=False, error=..., raw=...)``: the caller picks the
        fallback. LLMError (the server is down, refuses the request) and BudgetExceeded before the first
        call are raised, since no answer exists to judge.
        """
        messages = _with_json_instruction(_as_messages(messages), schema)
        completion = self._structured(messages, schema, name, temperature, max_tokens, budget)
        value, repairs, problem = interpret(completion.content, completion.finish_reason, schema, validate)
        if problem is None:
            return StructuredResult(True, value, None, _clip(completion.content or "", _MAX_RAW_CHARS), repairs,
                                    1, completion.cached)
        first_raw = completion.content or ""
        reask = [*messages, {"role": "assistant", "content": _clip(first_raw, _MAX_REASK_CHARS)},
                 {"role": "user", "content": f"That answer could not be used: {problem}\n"
                                             f"Reply again with only the corrected JSON, nothing else."}]
        try:
            completion = self._structured(reask, schema, name, temperature, max_tokens, budget)
        except LLMError as exc:
            kind = "budget exhausted" if isinstance(exc, BudgetExceeded) else "the re-ask failed"
            return StructuredResult(False, None, f"{problem} (not re-asked: {kind}: {exc})",
                                    _clip(first_raw, _MAX_RAW_CHARS), attempts=1, cached=completion.cached)
        value, repairs, second = interpret(completion.content, completion.finish_reason, schema, validate)
        if second is None:
            return StructuredResult(True, value, None, _clip(completion.content or "", _MAX_RAW_CHARS), repairs,
                                    2, completion.cached)
        return StructuredResult(False, None, f"{second} (after one re-ask; the first answer: {problem})",
                                _clip(completion.content or "", _MAX_RAW_CHARS), repairs, 2, completion.cached)

    def close(self) -> None:
        if self.cache is not None:
            self.cache.close()
        self._client.close()

    def __enter__(self) -> LLM:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"LLM({self.describe()})"

    # Requests, cache and accounting.

    def _request(self, messages: list[dict[str, Any]], response_format: Mapping[str, Any] | None,
                 temperature: float | None, max_tokens: int | None) -> dict[str, Any]:
        request: dict[str, Any] = {"model": self.model, "messages": messages,
                                   "temperature": self.temperature if temperature is None else temperature}
        if max_tokens or self.max_tokens:
            request["max_tokens"] = max_tokens or self.max_tokens
        if response_format is not None:
            request["response_format"] = dict(response_format)
        return request

    def _structured(self, messages: list[dict[str, Any]], schema: Mapping[str, Any] | None, name: str,
                    temperature: float | None, max_tokens: int | None, budget: Budget | None) -> Completion:
        formats: list[tuple[str, dict[str, Any] | None]] = []
        if schema is not None and "json_schema" not in self._unsupported:
            formats.append(("json_schema", {"type": "json_schema", "json_schema": {
                "name": re.sub(r"[^A-Za-z0-9_-]", "_", name)[:64] or "answer", "schema": dict(schema)}}))
        if schema is not None and "json_object+schema" not in self._unsupported:
            # llama.cpp's servers constrain generation to a schema given beside json_object.
            formats.append(("json_object+schema", {"type": "json_object", "schema": dict(schema)}))
        if "json_object" not in self._unsupported:
            formats.append(("json_object", {"type": "json_object"}))
        formats.append(("text", None))
        requests = [(kind, self._request(messages, rf, temperature, max_tokens)) for kind, rf in formats]
        # Any mode's cached answer will do: a re-run costs nothing even where a mode was found unsupported.
        for _, request in requests:
            if (hit := self._lookup(request, budget)) is not None:
                return hit
        for kind, request in requests:
            try:
                return self._call(request, budget, count_failure=False)
            except LLMError as exc:
                if kind == "text" or exc.status not in (400, 415, 422, 500) or not _FORMAT_REJECTED.search(exc.detail):
                    self._account(Usage(failures=1), budget)
                    raise
                log.info("%s does not take response_format %s (%s); falling back", self.base_url, kind, exc)
                self._unsupported.add(kind)
        raise AssertionError("unreachable: the text mode either answers or raises")

    def _lookup(self, request: dict[str, Any], budget: Budget | None) -> Completion | None:
        if self.cache is None:
            return None
        hit = self.cache.get(ResponseCache.key(request))
        if hit is None:
            return None
        prompt, completion = _count(hit.get("prompt_tokens")), _count(hit.get("completion_tokens"))
        self._account(Usage(cache_hits=1, cached_tokens=prompt + completion), budget)
        content = hit.get("content")
        return Completion(content if isinstance(content, str) else None, _str_or_none(hit.get("finish_reason")),
                          prompt, completion, str(hit.get("model") or request["model"]), cached=True)

    def _call(self, request: dict[str, Any], budget: Budget | None, count_failure: bool = True) -> Completion:
        budgets = _budget_in_force(budget)
        if budgets is not None:
            budgets.check(_estimate_tokens(request["messages"]))
        try:
            body = self._send(request, budget)
        except LLMError:
            if count_failure:
                self._account(Usage(failures=1), budget)
            raise
        completion = _completion_from(body, request["model"])
        self._account(Usage(calls=1, prompt_tokens=completion.prompt_tokens,
                            completion_tokens=completion.completion_tokens), budget)
        # Empty answers are not kept: they are usually a server hiccup, and a re-run should ask again.
        if self.cache is not None and completion.content and completion.content.strip():
            self.cache.put(ResponseCache.key(request), request["model"], {
                "content": completion.content, "finish_reason": completion.finish_reason,
                "prompt_tokens": completion.prompt_tokens, "completion_tokens": completion.completion_tokens,
                "model": completion.model})
        return completion

    def _account(self, usage: Usage, budget: Budget | None) -> None:
        with self._lock:
            self.usage = self.usage + usage
        budgets = _budget_in_force(budget)
        if budgets is not None:
            budgets.charge(usage)

    def _send(self, request: dict[str, Any], budget: Budget | None) -> dict[str, Any]:
        """POST the request, retrying transient failures; the parsed body."""
        openai = self._openai
        attempts = self.max_retries + 1
        problem = ""
        for attempt in range(attempts):
            retry_after: float | None = None
            try:
                raw = self._client.chat.completions.with_raw_response.create(**request)
                text = raw.text
                try:
                    body = json.loads(text)
                except ValueError:
                    problem = f"the server answered 200 with a body that is not JSON: {_snippet(text)!r}"
                else:
                    if _looks_like_completion(body):
                        return body
                    problem = f"the server answered 200 with something that is not a chat completion: " \
                              f"{_snippet(text)!r}"
            except openai.APITimeoutError:
                problem = f"no answer within {self.timeout:g} s (llm_timeout)"
            except openai.APIConnectionError as exc:
                problem = f"cannot connect ({_cause(exc)})"
            except openai.APIStatusError as exc:
                status = exc.status_code
                message = _error_message(exc)
                # Some servers (llama-cpp-python) answer an unsupported response_format with a 500:
                # that is a refusal, not a transient fault, so it is not retried.
                format_refused = "response_format" in request and "response_format" in message \
                    and _FORMAT_REJECTED.search(message) is not None
                if format_refused or not (status in (408, 409, 425, 429) or status >= 500):
                    raise LLMError(self._explain(status, message), status, message) from None
                problem = f"HTTP {status}: {message}"
                retry_after = _retry_after(exc)
            if attempt + 1 < attempts:
                wait = min(_MAX_BACKOFF, self.backoff * 2 ** attempt * (0.5 + random.random() / 2))
                if retry_after is not None:
                    wait = max(wait, min(retry_after, _MAX_BACKOFF))
                log.warning("LLM request to %s failed (%s); retry %d of %d in %.1f s", self.base_url, problem,
                            attempt + 1, self.max_retries, wait)
                self._account(Usage(retries=1), budget)
                time.sleep(wait)
        raise LLMError(f"the LLM at {self.base_url} failed {attempts} time(s), last: {problem}; check that the "
                       f"server is up and not overloaded (llm_max_retries, llm_timeout)")

    def _explain(self, status: int, message: str) -> str:
        where = f"the LLM at {self.base_url} (model {self._model or '?'})"
        if status in (401, 403):
            hint = "check the API key (OPENAI_API_KEY or llm_api_key)"
        elif status == 404:
            hint = "check the base URL (OPENAI_BASE_URL or llm_base_url, usually ending in /v1) and the model " \
                   "name (KQE_LLM_MODEL or llm_model)"
        elif status == 413:
            hint = "the prompt is too large for this server"
        else:
            hint = "check the model name and the request parameters (llm_max_output_tokens, llm_temperature) " \
                   "and the prompt length against the model's context"
        return f"{where} refused the request with HTTP {status}: {message}; {hint}"

    def _first_listed_model(self) -> str:
        openai = self._openai
        try:
            models = [m.id for m in self._client.models.list() if isinstance(getattr(m, "id", None), str)]
        except openai.APIStatusError as exc:
            raise LLMError(f"no model configured and {self.base_url}/models answered HTTP {exc.status_code} "
                           f"({_error_message(exc)}); set KQE_LLM_MODEL (llm_model)", exc.status_code) from None
        except (openai.APIError, ValueError, TypeError) as exc:
            raise LLMError(f"no model configured and {self.base_url}/models could not be listed ({exc}); "
                           f"set KQE_LLM_MODEL (llm_model)") from None
        if not models:
            raise LLMError(f"no model configured and {self.base_url} lists none; set KQE_LLM_MODEL (llm_model)")
        return models[0]


def describe_llm(settings: Settings) -> str:
    """One line for logs and reports: which model, where — or that there is none."""
    if not settings.llm.base_url and not settings.llm.model:
        return "offline (no LLM configured)"
    return f"model {settings.llm.model or '(first listed by the server)'} at " \
           f"{(settings.llm.base_url or OPENAI_URL).rstrip('/')}"


# Helpers of the client.

_FORMAT_REJECTED = re.compile(r"response.?format|json.?schema|json.?object|structured.?output|guided|grammar",
                              re.IGNORECASE)


def _budget_in_force(explicit: Budget | None) -> Budget | None:
    return explicit if explicit is not None else _current_budget.get()


def _as_messages(messages: Messages) -> list[dict[str, Any]]:
    if isinstance(messages, str):
        return [{"role": "user", "content": messages}]
    out = []
    for message in messages:
        if not isinstance(message, Mapping) or "role" not in message:
            raise TypeError(f"messages must be a string or a list of {{'role': ..., 'content': ...}} dicts, "
                            f"got an item {message!r}")
        out.append(dict(message))
    if not out:
        raise TypeError("messages is empty; pass the prompt as a string or a list of chat messages")
    return out


def _with_json_instruction(messages: list[dict[str, Any]], schema: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    # Said in every mode: JSON mode on OpenAI wants the word "JSON" in the prompt, and a local server's
    # plain JSON mode does not otherwise know the shape.
    if schema is not None:
        instruction = ("Reply with only a JSON value that conforms to this JSON Schema, with no other text:\n"
                       + json.dumps(schema, ensure_ascii=False))
    else:
        instruction = "Reply with only a JSON object, with no other text."
    last = messages[-1]
    if last.get("role") == "user" and isinstance(last.get("content"), str):
        return [*messages[:-1], {**last, "content": f"{last['content']}\n\n{instruction}"}]
    return [*messages, {"role": "user", "content": instruction}]


def _estimate_tokens(messages: list[dict[str, Any]]) -> int:
    # About four characters a token; only used to refuse a call that would clearly go over a token budget.
    return len(json.dumps([m.get("content") for m in messages], ensure_ascii=False)) // 4


def _looks_like_completion(body: Any) -> bool:
    if not isinstance(body, dict):
        return False
    choices = body.get("choices")
    return isinstance(choices, list) and bool(choices) and isinstance(choices[0], dict)


def _completion_from(body: dict[str, Any], model: str) -> Completion:
    choice = body["choices"][0]
    message = choice.get("message")
    content = message.get("content") if isinstance(message, dict) else None
    if isinstance(content, list):  # content parts
        content = "".join(p.get("text", "") if isinstance(p, dict) and isinstance(p.get("text"), str) else ""
                          for p in content)
    elif isinstance(content, dict):
        content = json.dumps(content)
    elif content is not None and not isinstance(content, str):
        content = str(content)
    usage = body.get("usage") if isinstance(body.get("usage"), dict) else {}
    return Completion(content, _str_or_none(choice.get("finish_reason")), _count(usage.get("prompt_tokens")),
                      _count(usage.get("completion_tokens")),
                      body["model"] if isinstance(body.get("model"), str) else model)


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def _str_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _snippet(text: str, limit: int = 200) -> str:
    text = re.sub(r"<[^>]{0,200}>", " ", text[:20_000])
    text = re.sub(r"\s+", " ", text).strip()
    return text[:limit] + ("…" if len(text) > limit else "")


def _error_message(exc: Any) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        inner = body.get("error", body)
        message = inner.get("message") if isinstance(inner, dict) else inner
        if isinstance(message, str) and message.strip():
            return _snippet(message, 300)
    if isinstance(body, str) and body.strip():
        return _snippet(body, 300)
    response = getattr(exc, "response", None)
    try:
        text = response.text if response is not None else ""
    except Exception:  # a body that cannot be decoded says nothing more
        text = ""
    return _snippet(text, 300) if text.strip() else "(no message)"


def _retry_after(exc: Any) -> float | None:
    try:
        value = exc.response.headers.get("retry-after")
        return max(0.0, float(value)) if value is not None else None
    except (AttributeError, TypeError, ValueError):
        return None


def _cause(exc: BaseException) -> str:
    inner = exc.__cause__ or exc.__context__
    return f"{type(inner).__name__}: {inner}" if inner is not None else str(exc)


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else f"{text[:limit]}… [{len(text) - limit} more characters]"
