"""Worker processes that evaluate the service's jobs, so a job past its deadline can really be stopped.

pyoxigraph cannot cancel a running query, and a thread cannot be killed: a
query that outlives its 503 keeps burning CPU and memory (one grew the server
by 6 GB in 30 s). So every SPARQL query, update and REST call runs in a worker
*process*, one job at a time, and a job past ``server_query_timeout`` is ended
by killing its worker (SIGKILL: CPU and memory are back within milliseconds);
a fresh worker takes its place. Each worker:

* opens the KB once, its store read-only (RocksDB lets many processes read one
  store), or read-write when the server takes updates — then there is exactly one
  worker, since only one process may write a store;
* limits its own memory (``RLIMIT_DATA`` = ``server_worker_memory_mb``): an
  allocation past it aborts the worker, never the server;
* notices when the KB was rebuilt under it (its ``store`` folder is another one
  now) before each job, and hands the job back and quits: a fresh worker opens
  the new KB and runs it, so updates never go to a replaced store;
* runs its jobs on a thread with a 64 MiB stack, so deep recursion in pyoxigraph
  has room, and a crash kills only this worker;
* with no SERVICE allow-list, moves that job thread into a network namespace of
  its own before it opens anything (:mod:`~kqe_rdf.service.isolation`), so that
  whatever a SPARQL query or update names, pyoxigraph cannot connect anywhere;
  what needs the network (an LLM: the REST jobs, the searches of
  ``SERVICE <urn:kqe:search>``) runs on a second thread, started before, that
  keeps it. The worker says at start-up whether the isolation holds; where it
  does not, its queries take the verified path.

The pool (:class:`WorkerPool`, in the server's event loop) shares the workers
between clients (a client is its credentials, else its address:
:func:`~kqe_rdf.service.requests.client_of`). A worker that frees up goes to the
waiting request of the client that holds the fewest workers (then of the address
that holds the fewest, then the one that has waited longest), not to the next in
line: a client that sends a hundred expensive queries waits behind its own, and
another client's query takes the next free worker. And no client holds more than
``server_client_workers`` (all but one by default) at once, so while one client
keeps every worker it may have busy, another finds one free.

Jobs and replies cross a private socket pair as length-prefixed pickles.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import dataclasses
import functools
import itertools
import logging
import os
import pickle
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from ..core.errors import KqeError
from .protocol import HTTPError, QueryTimeout
from .requests import Client

log = logging.getLogger("kqe_rdf.service.workers")
_FRAME = struct.Struct("!Q")
#: Native stack of the thread a worker runs jobs on (address space, touched only when used): pyoxigraph
#: recurses on it; the size limits in Settings keep queries far below what overflows even 8 MiB.
JOB_THREAD_STACK = 64 * 1024 * 1024
#: Prepared query texts a worker remembers.
PREPARED_CACHE = 512
#: Retrieval pipelines (method, k, types, settings) a worker keeps built.
PIPELINES = 32
ERROR = "internal server error (the server log has the details)"


# ---------------------------------------------------------------- the worker process


def _send(sock: socket.socket, obj: object) -> None:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    sock.sendall(_FRAME.pack(len(data)) + data)


def _recv_exactly(sock: socket.socket, size: int) -> bytes:
    chunks, left = [], size
    while left:
        chunk = sock.recv(min(left, 1 << 20))
        if not chunk:
            raise EOFError
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def _recv(sock: socket.socket) -> object:
    first = sock.recv(1 << 16)  # a job usually arrives whole: one system call (one frame in flight at a time)
    if len(first) < _FRAME.size:
        first += _recv_exactly(sock, _FRAME.size - len(first)) if first else b""
        if not first:
            raise EOFError
    (size,) = _FRAME.unpack(first[:_FRAME.size])
    body = first[_FRAME.size:]
    if len(body) < size:
        body += _recv_exactly(sock, size - len(body))
    return pickle.loads(body)


def _die_with_parent() -> None:
    """Linux: be killed when the server process dies, even mid-job (a socket close is only seen between jobs)."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
    if os.getppid() == 1:  # the server died before this line
        sys.exit(0)


def _limit_memory(megabytes: int) -> None:
    import resource

    limit = megabytes * 1024 * 1024
    try:
        resource.setrlimit(resource.RLIMIT_DATA, (limit, limit))
    except (ValueError, OSError) as exc:  # a lower hard limit already: keep it
        log.warning("cannot limit worker memory to %d MiB: %s", megabytes, exc)


def _store_identity(store: str) -> tuple[int, int] | None:
    try:
        st = os.stat(store)
    except OSError:
        return None
    return st.st_dev, st.st_ino


class _Context:
    """What one worker keeps open: the KB (its store, indexes, documents), the search functions, the retrieval
    pipelines its requests asked for."""

    def __init__(self, kb_path: Path, kb_settings, settings, writable: bool, protection=None,
                 networked=None) -> None:
        from ..kb.knowledge_base import KnowledgeBase
        from .isolation import OfflineThread, Protection
        from .sparql_search import SearchFunctions

        #: What keeps the SPARQL this thread evaluates from calling out; while it is a namespace, queries need not
        #: take the verified path.
        self.protection = protection or Protection("not isolated")
        #: Where what needs the network runs (REST jobs, searches): this thread, unless it is isolated.
        self.networked = networked or OfflineThread("it keeps the network", name="kqe-networked")

        self.identity = _store_identity(os.path.join(kb_path, "store"))
        self.kb = KnowledgeBase.open(kb_path, kb_settings)
        self.kb.read_only = True  # a served KB is never written (SPARQL Update aside, into its store)
        if writable:
            from pyoxigraph import Store

            try:
                self.kb.store = Store(str(kb_path / "store"))
            except OSError as exc:
                raise KqeError(f"cannot open {kb_path / 'store'} for updates ({exc}); is another writer running?") \
                    from None
        self.kb.store, self.kb.prefixes  # noqa: B018 - opened now, not in the first job's time
        # LKQE's graphs would go into the KB
        self.settings = dataclasses.replace(settings, lkqe=dataclasses.replace(settings.lkqe, store=False))
        self.functions = SearchFunctions(self.kb)
        self._prepared: collections.OrderedDict[str, object] = collections.OrderedDict()
        self.pipelines: collections.OrderedDict[tuple, object] = collections.OrderedDict()

    def pipeline(self, method: str, k: int, types: Sequence[str] | None = None, settings=None):
        """The retrieval stage of ``method`` on this worker's KB (:func:`~kqe_rdf.methods.registry.pipeline`),
        built by the first request that asks for it and kept for the next: building a 4step pipeline reads
        the ontology's words and phrases and sets up its reader, linker and fallback, work that does not depend
        on the request. A rebuilt KB never meets them (the worker quits, and a fresh one builds its own); an
        update forgets them (:meth:`updated`)."""
        from ..methods.registry import pipeline

        settings = settings or self.settings
        key = (method, k, tuple(types or ()), settings)
        stage = self.pipelines.get(key)
        if stage is None:
            stage = self.pipelines[key] = pipeline(method, self.kb, settings, k, list(types) if types else None)
            if len(self.pipelines) > PIPELINES:
                self.pipelines.popitem(last=False)
        else:
            self.pipelines.move_to_end(key)
        return stage

    def updated(self) -> None:
        """The store changed (a SPARQL Update): what the pipelines read of it when built may be stale."""
        self.pipelines.clear()

    def prepare(self, query: str):
        """:func:`~kqe_rdf.service.sparql_search.prepare` a query, remembered by its text when it runs no search (then
        checking it again would give the same answer: half of a simple query's cost here)."""
        from .sparql_search import prepare, run_search

        prepared = self._prepared.get(query)
        if prepared is not None:
            self._prepared.move_to_end(query)
            return prepared
        search = functools.partial(self.networked.run, functools.partial(run_search, self.kb, self.settings,
                                                                          build=self.pipeline))
        prepared = prepare(self.kb, query, self.settings, search=search, strict=not self.protection.active)
        if not prepared.searches:
            self._prepared[query] = prepared
            if len(self._prepared) > PREPARED_CACHE:
                self._prepared.popitem(last=False)
        return prepared


def without_paths(message: str, kb_path: Path) -> str:
    """A message for a client: the server's folder of the KB is named by the KB's name alone.

    >>> without_paths("no dense embeddings in /srv/bio; run `kqe-rdf kb embed --kb /srv/bio`", Path("/srv/bio"))
    'no dense embeddings in bio; run `kqe-rdf kb embed --kb bio`'
    """
    for path in sorted({str(kb_path.resolve()), str(kb_path), str(kb_path.absolute())}, key=len, reverse=True):
        message = message.replace(path, kb_path.name)
    return message


def _serve(sock: socket.socket, init: dict) -> None:
    from .jobs import run_job  # noqa: PLC0415
    from .protocol import status_of  # noqa: PLC0415

    from .isolation import OfflineThread, isolate_this_thread, not_wanted  # noqa: PLC0415

    kb_path, writable = Path(init["kb"]), init["writable"]
    store = os.path.join(kb_path, "store")
    networked = OfflineThread("it keeps the network", name="kqe-networked")  # started here: outside the namespace
    protection = isolate_this_thread(not_wanted(init["settings"]) or init.get("no_user_namespace"))
    context = _Context(kb_path, init["kb_settings"], init["settings"], writable, protection, networked)
    if writable and init.get("sweep"):
        from .jobs import sweep_marks  # noqa: PLC0415

        sweep_marks(context.kb)
    _send(sock, ("ready", os.getpid(), protection.active, protection.how))
    while True:
        try:
            kind, payload, timeout = _recv(sock)
        except EOFError:
            return
        deadline = time.monotonic() + timeout
        if _store_identity(store) != context.identity:
            # Rebuilt (the folder was swapped): this process's store is the replaced one. It quits, and a
            # fresh worker opens the new KB and runs the job; an update never goes to the old store.
            log.warning("the KB at %s was rebuilt since this worker opened it: a new worker takes over", kb_path)
            _send(sock, ("rebuilt",))
            return
        try:
            reply = ("ok", run_job(context, kind, payload, deadline))
        except KqeError as exc:
            reply = ("error", status_of(exc), without_paths(str(exc), kb_path), getattr(exc, "headers", {}))
        except MemoryError:  # its heap may be in any state: it quits, and a fresh worker takes over
            _send(sock, ("failed", f"the job needed more than the {init['memory_mb']:,} MiB a worker may use "
                                   "(server_worker_memory_mb); narrow it down"))
            return
        except Exception:  # noqa: BLE001 - a bug: logged here with its traceback, answered without one
            log.exception("internal error in a %s job", kind)
            reply = ("error", 500, ERROR, {})
        try:
            _send(sock, reply)
        except OSError:  # the server is gone or killed this job
            return


def main(argv: list[str] | None = None) -> None:
    """``python -m kqe_rdf.service.workers FD``: serve jobs on the inherited socket FD until it closes."""
    argv = sys.argv[1:] if argv is None else argv
    logging.basicConfig(level=logging.INFO, format="kqe-rdf worker %(process)d: %(levelname)s %(message)s")
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C stops the server, which then closes our socket
    _die_with_parent()
    sock = socket.socket(fileno=int(argv[0]))
    init = _recv(sock)
    from .isolation import enter_user_namespace, not_wanted  # noqa: PLC0415

    if not_wanted(init["settings"]) is None:  # not root: a user namespace first, while this is the only thread
        init["no_user_namespace"] = enter_user_namespace()
    _limit_memory(init["memory_mb"])
    failure: list[BaseException] = []

    def run() -> None:
        try:
            _serve(sock, init)
        except BaseException as exc:  # noqa: BLE001 - reported below, after the thread ends
            failure.append(exc)

    threading.stack_size(JOB_THREAD_STACK)
    thread = threading.Thread(target=run, name="kqe-worker")
    thread.start()
    thread.join()
    if failure:
        exc = failure[0]
        message = str(exc) if isinstance(exc, KqeError) else f"{type(exc).__name__}: {exc}"
        message = without_paths(message, Path(init["kb"]))
        try:
            _send(sock, ("failed", message))
        except OSError:
            pass
        log.error("worker stopped: %s", message)
        sys.exit(1)


# ---------------------------------------------------------------- the pool (in the server)

#: Seconds past a job's deadline before its worker is killed: the worker's own deadline check (while it
#: streams rows) gets this long to answer cleanly first.
GRACE = 0.5


class _Channel(asyncio.Protocol):
    """The server's end of a worker's socket: frames out, replies in, one at a time.

    A bare protocol rather than asyncio streams: a job's reply usually arrives in
    one read and goes from there to the waiting request (no stream buffer, no
    second read call per reply).
    """

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.transport: asyncio.Transport | None = None
        self.buffer = bytearray()
        self.waiter: asyncio.Future | None = None
        self.lost = False
        self.on_lost: Callable[[], None] | None = None  # called when the socket closes while no job waits

    def connection_made(self, transport) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        if len(self.buffer) < _FRAME.size or self.waiter is None or self.waiter.done():
            return  # more to come, or nobody asks yet (a worker sends only what it was asked for)
        (size,) = _FRAME.unpack_from(self.buffer)
        end = _FRAME.size + size
        if len(self.buffer) >= end:
            frame = bytes(self.buffer[_FRAME.size:end])
            del self.buffer[:end]
            self.waiter.set_result(frame)

    def connection_lost(self, exc: BaseException | None) -> None:
        self.lost = True
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_exception(ConnectionResetError("the worker closed its socket"))
        elif self.on_lost is not None:
            self.on_lost()

    def send(self, obj: object) -> None:
        data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
        self.transport.write(_FRAME.pack(len(data)) + data)

    async def receive(self) -> object:
        """The next reply (:class:`ConnectionError` when the worker is gone)."""
        if self.lost:
            raise ConnectionResetError("the worker closed its socket")
        self.waiter = self.loop.create_future()
        self.data_received(b"")  # a reply that arrived before anyone waited
        try:
            return pickle.loads(await self.waiter)
        finally:
            self.waiter = None

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()


def client_workers(setting: int, size: int) -> int:
    """How many of ``size`` workers one client may hold at once: ``server_client_workers``, or by default (0) all
    but one (at least one), so one client never takes every worker while another waits.

    >>> client_workers(0, 4), client_workers(0, 1), client_workers(2, 4), client_workers(9, 4)
    (3, 1, 2, 4)
    """
    return min(size, setting or max(1, size - 1))


@dataclass(eq=False)
class _Worker:
    process: subprocess.Popen
    channel: _Channel
    client: Client | None = None  # whose job it runs


@dataclass(eq=False)
class _Waiter:
    client: Client
    future: asyncio.Future
    arrival: int  # ties go to the request that has waited longest


class WorkerPool:
    """``size`` worker processes over one KB; :meth:`run` gives a job to one of them, with a deadline."""

    def __init__(self, kb, settings, writable: bool = False) -> None:
        self.kb_path = Path(kb.path)
        self.kb_settings = kb.settings
        self.settings = settings
        self.writable = writable
        self.size = 1 if writable else settings.server.query_slots
        self.per_client = client_workers(settings.server.client_workers, self.size)
        self.timeout = settings.server.query_timeout
        self.idle: list[_Worker] = []
        self.busy: set[_Worker] = set()
        self.alive = 0  # workers starting, idle or busy
        self.held: collections.Counter[str] = collections.Counter()  # busy workers by client key ...
        self.held_by_address: collections.Counter[str] = collections.Counter()  # ... and by address
        self.waiters: dict[str, collections.deque[_Waiter]] = {}  # by client key, each in arrival order
        self._arrivals = itertools.count()
        self.closed = False
        self.killed = 0  # workers ended for a deadline, or found dead
        #: What keeps SPARQL from calling out, as the first worker reported it (None until one has started).
        self.protection: str | None = None
        self.isolated = False
        self.jobs = 0  # jobs handed to workers
        self._tasks: set[asyncio.Task] = set()
        self._swept = False  # a writer has removed the update marks left from an earlier server
        #: The next free workers, before any waiter: each for the commit check of an update whose worker stopped.
        self._reserved: collections.deque[asyncio.Future] = collections.deque()
        self._checks: dict[str, asyncio.Task] = {}  # those checks, by the update's marker

    # -- processes

    async def _spawn(self) -> _Worker:
        """A new worker process that has opened the KB (or :class:`KqeError` saying why it could not)."""
        parent, child = socket.socketpair()
        try:
            process = subprocess.Popen([sys.executable, "-m", "kqe_rdf.service.workers", str(child.fileno())],
                                       pass_fds=[child.fileno()], stdin=subprocess.DEVNULL)
        finally:
            child.close()
        try:
            loop = asyncio.get_running_loop()
            _, channel = await loop.create_unix_connection(lambda: _Channel(loop), sock=parent)
        except BaseException:
            parent.close()
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            raise
        worker = _Worker(process, channel)
        init = {"kb": str(self.kb_path), "kb_settings": self.kb_settings, "settings": self.settings,
                "writable": self.writable, "memory_mb": self.settings.server.worker_memory_mb,
                "sweep": self.writable and not self._swept}
        worker.channel.send(init)
        try:
            reply = await asyncio.wait_for(worker.channel.receive(), 120)
        except (TimeoutError, ConnectionError) as exc:
            reply = ("failed", f"it did not start ({type(exc).__name__})")
        except BaseException:
            self._end(worker)
            raise
        if reply[0] != "ready":
            self._end(worker)
            raise KqeError(f"a query worker could not start: {without_paths(reply[1], self.kb_path)}")
        _, _, isolated, how = reply
        self._swept = self._swept or self.writable
        worker.channel.on_lost = functools.partial(self._lost, worker)
        if self.protection is None:
            self.isolated, self.protection = isolated, how
        elif isolated != self.isolated:  # the kernel's answer changed: say so, each worker still protects itself
            log.warning("a new query worker: %s", how)
        return worker

    def _end(self, worker: _Worker) -> None:
        """Kill a worker now (SIGKILL: its CPU and memory are freed at once) and reap it in the background."""
        with contextlib.suppress(ProcessLookupError):
            worker.process.kill()
        worker.channel.close()
        asyncio.get_running_loop().run_in_executor(None, worker.process.wait)

    def _lost(self, worker: _Worker) -> None:
        """A worker's socket closed. An idle one died (killed, crashed) between jobs: it is replaced now, before
        a request is handed to it (issue 49: each dead idle worker turned the next request into an error)."""
        if worker in self.idle and not self.closed:
            self.idle.remove(worker)
            self.killed += 1
            self.alive -= 1
            self._end(worker)
            self._grow()

    def _grow(self) -> None:
        """Start one more worker in the background; it joins the pool (or serves a waiter) once ready."""
        self.alive += 1

        async def start() -> None:
            try:
                worker = await self._spawn()
            except Exception as exc:  # noqa: BLE001 - every waiter learns why
                self.alive -= 1
                log.error("%s", exc)
                failure = exc if isinstance(exc, KqeError) else KqeError(f"a query worker could not start: {exc}")
                self._refuse_waiters(HTTPError(503, str(failure)))
                return
            self._release(worker)

        task = asyncio.get_running_loop().create_task(start())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def start(self) -> None:
        """Start one worker and wait until it has opened the KB (a KB that cannot be opened fails here, at
        startup); the others start in the background."""
        self.alive += 1
        try:
            worker = await self._spawn()
        except BaseException:
            self.alive -= 1
            raise
        self._release(worker)
        while self.alive < self.size:
            self._grow()

    # -- scheduling

    def _may_take(self, key: str) -> bool:
        return self.held[key] < self.per_client

    async def _acquire(self, client: Client, deadline: float) -> _Worker:
        if self._may_take(client.key) and not self._claiming:
            if self.idle:  # a waiter leaves a worker idle only when its client has its share: this one has not
                return self._hand(self.idle.pop(), client)
            if self.alive < self.size and not self.closed:
                self._grow()
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        waiter = _Waiter(client, future, next(self._arrivals))
        self.waiters.setdefault(client.key, collections.deque()).append(waiter)
        # A timer rather than wait_for + shield: no extra task and futures for every request that waits.
        timer = loop.call_later(max(deadline - time.monotonic(), 0.001),
                                lambda: future.done() or future.set_exception(TimeoutError()))
        try:
            return await future
        except BaseException as exc:
            if future.done() and not future.cancelled() and future.exception() is None:
                self._release(future.result())  # handed over just as the wait ended: pass it on
            future.cancel()
            queue = self.waiters.get(client.key)
            if queue is not None:
                with contextlib.suppress(ValueError):
                    queue.remove(waiter)
                if not queue:
                    del self.waiters[client.key]
            if not isinstance(exc, TimeoutError):
                raise
        finally:
            timer.cancel()
        if not self._may_take(client.key):
            held = self.held[client.key]
            jobs = f"{held} job" + ("s" if held != 1 else "")
            raise QueryTimeout(f"your share of the query workers stayed full: you have {jobs} running, the most one "
                               f"client may have (server_client_workers: {self.per_client} of {self.size}; a client "
                               f"is its Authorization credentials, else its address), and none finished within "
                               f"{self.timeout:g} s; try again later")
        raise QueryTimeout(f"the server is busy: all {self.size} query workers stayed taken for {self.timeout:g} s; "
                           "try again later")

    def _hand(self, worker: _Worker, client: Client) -> _Worker:
        self.busy.add(worker)
        worker.client = client
        self.held[client.key] += 1
        self.held_by_address[client.address] += 1
        return worker

    def _release(self, worker: _Worker) -> None:
        """A worker is free: to the next waiter (:meth:`_next_waiter`), else to the idle list."""
        self._unhold(worker)
        if self.closed:
            self._retire(worker)
            return
        if self._claim(worker):
            return
        waiter = self._next_waiter()
        if waiter is None:
            self.idle.append(worker)
        else:
            waiter.future.set_result(self._hand(worker, waiter.client))

    def _hand_idle(self) -> None:
        """Idle workers to the waiters that may take one now: a client whose job ended without freeing its worker
        (killed at its deadline, crashed) is below its share again, and need not wait for the new worker."""
        while self.idle and self._claim(self.idle[-1]):
            self.idle.pop()
        while self.idle and not self._claiming and (waiter := self._next_waiter()) is not None:
            waiter.future.set_result(self._hand(self.idle.pop(), waiter.client))

    @property
    def _claiming(self) -> bool:
        """A commit check waits for the next free worker: no request may take one first."""
        return any(not claim.done() for claim in self._reserved)

    def _claim(self, worker: _Worker) -> bool:
        """Whether ``worker`` went to a commit check waiting for one (:meth:`_check_commit`)."""
        while self._reserved:
            claim = self._reserved.popleft()
            if not claim.done():
                self.busy.add(worker)
                claim.set_result(worker)
                return True
        return False

    def _next_waiter(self) -> _Waiter | None:
        """The longest-waiting request of the client that holds the fewest workers (below its share), taken out of
        the queue; on a tie, of the client whose address holds the fewest: a client that sends a new token with
        every request is a new client each time, but its requests do not go before other addresses' waiters."""
        best, rank = None, None
        for key, queue in list(self.waiters.items()):
            while queue and queue[0].future.done():  # timed out or cancelled meanwhile
                queue.popleft()
            if not queue:
                del self.waiters[key]
            elif self._may_take(key):
                first = queue[0]
                mine = (self.held[key], self.held_by_address[first.client.address], first.arrival)
                if rank is None or mine < rank:
                    best, rank = first, mine
        if best is not None:
            queue = self.waiters[best.client.key]
            queue.popleft()
            if not queue:
                del self.waiters[best.client.key]
        return best

    def _unhold(self, worker: _Worker) -> None:
        self.busy.discard(worker)
        client, worker.client = worker.client, None
        if client is not None:
            for counter, name in ((self.held, client.key), (self.held_by_address, client.address)):
                counter[name] -= 1
                if not counter[name]:
                    del counter[name]

    def _refuse_waiters(self, error: HTTPError) -> None:
        for queue in self.waiters.values():
            for waiter in queue:
                if not waiter.future.done():
                    waiter.future.set_exception(error)
        self.waiters.clear()
        while self._reserved:
            claim = self._reserved.popleft()
            if not claim.done():
                claim.set_exception(error)

    def _retire(self, worker: _Worker) -> None:
        self.alive -= 1
        worker.channel.close()  # the worker sees its socket close and exits
        asyncio.get_running_loop().run_in_executor(None, worker.process.wait)

    # -- jobs

    async def run(self, client: Client, kind: str, payload: dict):
        """The job's result for ``client``; :class:`HTTPError` with its status when it fails, waits or runs too
        long."""
        deadline = time.monotonic() + self.timeout
        if kind == "update":
            payload = {**payload, "marker": f"urn:uuid:{uuid.uuid4()}"}
        for _attempt in range(3):
            if self.closed:
                raise HTTPError(503, "the server is shutting down")
            worker = await self._acquire(client, deadline)
            if kind != "update":
                reply = await self._run_once(worker, kind, payload)
            else:
                try:
                    reply = await self._run_once(worker, kind, payload)
                except HTTPError as stopped:  # stopped, died or failed before it answered: did it commit?
                    if self._answer(stopped, await asyncio.shield(self._checks[payload["marker"]])):
                        return None
                    raise
            if reply[0] != "rebuilt":
                break
            # The KB was rebuilt: that worker quit, and the idle ones opened the old KB too: they are replaced,
            # so the next attempt waits for a worker that opens the new KB.
            self._renew_idle()
        if reply[0] == "error":
            _, status, message, headers = reply
            raise HTTPError(status, message, headers)
        if reply[0] != "ok":
            raise HTTPError(503, "the KB was rebuilt three times while this request waited; try again",
                            {"Retry-After": "5"})
        return reply[1]

    async def _run_once(self, worker: _Worker, kind: str, payload: dict) -> tuple:
        self.jobs += 1
        ok = rebuilt = False
        try:
            worker.channel.send((kind, payload, self.timeout))
            try:
                async with asyncio.timeout(self.timeout + GRACE):  # no extra task per job, unlike wait_for
                    reply = await worker.channel.receive()
            except TimeoutError:
                raise QueryTimeout(f"the job did not finish within {self.timeout:g} s (server_query_timeout) and "
                                   "was stopped; narrow it down or add a LIMIT") from None
            except (ConnectionError, OSError):
                raise self._died(worker) from None
            if reply[0] == "failed":
                raise HTTPError(503, f"a query worker stopped: {without_paths(reply[1], self.kb_path)}",
                                {"Retry-After": "5"})
            rebuilt = reply[0] == "rebuilt"
            ok = not rebuilt
            return reply
        finally:
            if ok:
                self._release(worker)
            else:  # a deadline, a crash, a rebuilt KB, or the request was cancelled: the job must not run on
                self.killed += 1
                self.alive -= 1
                self._unhold(worker)
                self._end(worker)
                if kind == "update" and not rebuilt:  # it may have committed: checked first, whoever waits
                    self._check_commit(payload["marker"])
                if not self.closed:
                    self._grow()
                    self._hand_idle()

    def _check_commit(self, marker: str) -> None:
        """Ask a fresh worker whether the update marked ``marker``, whose worker was just ended, committed: that
        worker is claimed now, before any waiting request (a writer's ``DROP ALL`` that got the store first
        would take the mark with it: issue 68), and the check runs even if the update's request is gone (it
        also removes the mark). The result (True, False, or None: nobody could tell) is in ``_checks``."""
        claim = asyncio.get_running_loop().create_future()
        if self.closed:
            claim.set_exception(HTTPError(503, "the server is shutting down"))
        else:
            self._reserved.append(claim)

        async def check() -> bool | None:
            try:
                async with asyncio.timeout(self.timeout + 120):
                    worker = await claim
            except (TimeoutError, HTTPError):
                if claim.done() and not claim.cancelled() and claim.exception() is None:
                    self._release(claim.result())
                claim.cancel()
                return None
            try:
                reply = await self._run_once(worker, "committed", {"marker": marker})
            except HTTPError:
                reply = None
            if reply is None or reply[0] != "ok":
                self._swept = False  # the mark may be left: the next worker removes it before it serves
                return None
            return bool(reply[1])

        task = asyncio.get_running_loop().create_task(check())
        self._checks[marker] = task
        task.add_done_callback(lambda _: self._checks.pop(marker, None))

    def _answer(self, stopped: HTTPError, committed: bool | None) -> bool:
        """Whether an update whose worker ``stopped`` before it answered committed, as its check found
        (:meth:`_check_commit`); when not, ``stopped`` says so, or that it is not known (503 either way, never a
        silent double write)."""
        if committed:
            log.warning("an update committed after its worker was stopped (%s): answered as committed", stopped)
            return True
        if committed is False:
            stopped.args = (f"{stopped} The update was not written (nothing of it committed): it may be sent "
                            "again.",)
        elif self.closed:
            stopped.args = (f"{stopped} It is not known whether the update was written (the server is shutting "
                            "down): check before you send it again.",)
        else:
            stopped.args = (f"{stopped} It is not known whether the update was written (no worker could tell): "
                            "check before you send it again.",)
        return False

    def _renew_idle(self) -> None:
        """End every idle worker and start as many new ones (after a rebuild: the idle ones serve the old KB)."""
        for worker in self.idle:
            self.alive -= 1
            self._end(worker)
        self.idle.clear()
        while self.alive < self.size and not self.closed:
            self._grow()

    def _died(self, worker: _Worker) -> HTTPError:
        code = worker.process.poll()
        if code is None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                code = worker.process.wait(0.5)
        if code == -signal.SIGABRT:
            return HTTPError(503, f"the job needed more than the {self.settings.server.worker_memory_mb:,} MiB a "
                                  "worker may use (server_worker_memory_mb) and was stopped; narrow it down",
                             {"Retry-After": "5"})
        reason = f"signal {-code}" if isinstance(code, int) and code < 0 else f"status {code}"
        log.error("a query worker died (%s) while running a job", reason)
        return HTTPError(503, f"the worker running this job stopped unexpectedly ({reason}); the server goes on, "
                              "simplify the request or try again")

    @property
    def waiting(self) -> int:
        """Requests waiting for a worker."""
        return sum(not waiter.future.done() for queue in list(self.waiters.values()) for waiter in list(queue))

    def pids(self, busy: bool | None = None) -> list[int]:
        """Process ids of the workers: all, or only the busy (``True``) or idle (``False``) ones."""
        workers = (list(self.busy) if busy is not False else []) + (self.idle if busy is not True else [])
        return [w.process.pid for w in workers]

    def close(self) -> None:
        """Stop every worker: idle ones exit, busy ones (jobs of requests that are gone by now) are killed."""
        self.closed = True
        self._refuse_waiters(HTTPError(503, "the server is shutting down"))
        while self.idle:
            self._retire(self.idle.pop())
        for worker in list(self.busy):
            self._end(worker)


if __name__ == "__main__":
    main()
