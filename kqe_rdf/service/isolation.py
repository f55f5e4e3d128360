"""SPARQL evaluated where no connection can be opened: a thread in a network namespace of its own.

pyoxigraph calls any ``SERVICE`` endpoint and fetches any ``LOAD`` source that a
query or update names, and offers no hook to veto a call. Reading the text first
to find those calls (:mod:`kqe_rdf.kb.sparql_guard`) is a second parser beside Oxigraph's,
and three rounds of bypasses came from the two disagreeing. So when nothing may
be called (no ``server_service_allow``), the queries are evaluated where the
kernel refuses every connection: the thread that evaluates them (a server
worker's job thread, :func:`isolate_this_thread`; ``kqe-rdf sparql``'s
:class:`OfflineThread`) enters a network namespace of its own
(``unshare(CLONE_NEWNET)``), which holds only a loopback device that is down,
before it evaluates anything. Namespaces belong to a thread, so a thread started
before — where a worker runs the LLM client of ``/expand`` and the searches of
``SERVICE <urn:kqe:search>`` — keeps the machine's network, and the files of the
KB are read as before (a network namespace does not touch the file system).

A host name is looked up before any connection, and glibc asks resolver daemons (nscd, avahi, systemd-resolved)
over Unix sockets, which a network namespace leaves in reach: a fake nscd received the name of a SERVICE
endpoint from a worker (issue 49). So the thread also gets a mount namespace of its own in which the folders of
those sockets are empty and ``/etc/hosts`` is empty (:func:`hide_resolvers`): no name resolves there, and
every lookup fails alike.

The thread checks that it worked before it is used: its namespace differs from
the process's, and a connection to a listener opened just before on the
machine's loopback fails. As root ``unshare`` needs nothing more; otherwise the
process first enters a user namespace of its own (:func:`enter_user_namespace`,
possible only while it has one thread), where it may make the network one. Where
neither is allowed (another system, a container that forbids namespaces),
:attr:`OfflineThread.active` is false with the reason, and every query takes the
strict path: parsed by the verifier, which writes the text that runs
(:func:`~kqe_rdf.kb.sparql_guard.verify_federation` with ``strict``).

>>> thread = OfflineThread()
>>> thread.run(lambda a, b: a + b, 2, 3), thread.active == (thread.reason is None)
(5, True)
>>> thread.close()
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import queue
import socket
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

T = TypeVar("T")
CLONE_NEWNS = 0x00020000
CLONE_NEWUSER = 0x10000000
CLONE_NEWNET = 0x40000000
MS_REC, MS_PRIVATE, MS_BIND = 0x4000, 0x40000, 0x1000
#: Where the resolver daemons a host-name lookup may ask listen (nscd, avahi's mDNS, systemd-resolved, D-Bus,
#: sssd): Unix sockets, which a network namespace does not hide. The offline thread sees these folders empty.
RESOLVER_FOLDERS = ("/run", "/var/run", "/var/lib/sss/pipes")
#: Sockets that must be gone once the folders are hidden (checked before the thread is used).
RESOLVER_SOCKETS = ("/run/nscd/socket", "/var/run/nscd/socket", "/run/avahi-daemon/socket",
                    "/var/run/avahi-daemon/socket", "/run/systemd/resolve/io.systemd.Resolve",
                    "/run/dbus/system_bus_socket", "/var/lib/sss/pipes/nss")
#: Native stack of the offline thread: pyoxigraph recurses on it (as on a server worker's job thread).
STACK = 64 * 1024 * 1024


def _libc():
    return ctypes.CDLL(None, use_errno=True)


def _unshare(flags: int) -> str | None:
    """``unshare(flags)`` for the calling thread; None when done, else why not."""
    if sys.platform != "linux":
        return f"network namespaces are a Linux feature (this is {sys.platform})"
    try:
        unshare = _libc().unshare
    except (OSError, AttributeError) as exc:
        return f"no unshare() in the C library ({exc})"
    if unshare(flags) != 0:
        code = ctypes.get_errno()
        return f"unshare() was refused: {os.strerror(code)} ({errno.errorcode.get(code, code)})"
    return None


def enter_user_namespace() -> str | None:
    """Not root: enter a user namespace of one's own (mapped to one's own user and group), in which a thread may
    then make a network namespace. Only a process with a single thread may; call it first. None when done (or
    not needed: root), else why not."""
    if sys.platform != "linux" or os.geteuid() == 0:
        return None
    uid, gid = os.geteuid(), os.getegid()
    reason = _unshare(CLONE_NEWUSER)
    if reason is not None:
        return f"cannot enter a user namespace ({reason})"
    try:
        for name, text in (("uid_map", f"{uid} {uid} 1"), ("setgroups", "deny"), ("gid_map", f"{gid} {gid} 1")):
            with open(f"/proc/self/{name}", "w", encoding="ascii") as file:
                file.write(text)
    except OSError as exc:
        return f"cannot map this user into its user namespace ({exc})"
    return None


def _mount(source: str, target: str, kind: str | None, flags: int, data: str | None = None) -> str | None:
    libc = _libc()
    if libc.mount(source.encode(), target.encode(), kind.encode() if kind else None, flags,
                  data.encode() if data else None) != 0:
        code = ctypes.get_errno()
        return f"mount on {target} was refused: {os.strerror(code)} ({errno.errorcode.get(code, code)})"
    return None


def hide_resolvers() -> str | None:
    """Give the calling thread a mount namespace of its own in which no resolver daemon can be asked for a name.

    A host-name lookup (glibc's ``getaddrinfo``, which pyoxigraph's HTTP client calls before it connects) asks
    nscd, avahi or systemd-resolved over Unix sockets *before* any connection, and a network namespace does
    not hide those: a fake nscd received the name of a SERVICE endpoint, a channel out (issue 49). Here every
    folder of :data:`RESOLVER_FOLDERS` is covered by an empty tmpfs and ``/etc/hosts`` by an empty file, in this
    thread's view only (mounts made private first, so nothing reaches the machine's); DNS itself needs the
    network, which the thread has not. Every lookup then fails alike, whether the name exists or not. None when
    done, else why not."""
    reason = _unshare(CLONE_NEWNS)
    if reason is not None:
        return f"no mount namespace of its own ({reason})"
    reason = _mount("none", "/", None, MS_REC | MS_PRIVATE)
    if reason is not None:
        return reason
    for folder in RESOLVER_FOLDERS:
        if os.path.isdir(folder) and not os.path.islink(folder):
            reason = _mount("tmpfs", folder, "tmpfs", 0, "size=16k,mode=755")
            if reason is not None:
                return reason
    if os.path.isfile("/etc/hosts"):
        reason = _mount("/dev/null", "/etc/hosts", None, MS_BIND)
        if reason is not None:
            return reason
    left = [path for path in RESOLVER_SOCKETS if os.path.exists(path)]
    if left:
        return f"resolver sockets still visible: {', '.join(left)}"
    return None


def enter_own_network() -> str | None:
    """Move the calling thread into a network namespace of its own, and a mount namespace where no resolver
    daemon is reachable (:func:`hide_resolvers`), and check that nothing can be reached from it;
    None when it worked, else why not (the thread is then where it was, or in a namespace that is not trusted)."""
    try:
        probe = socket.socket()
        probe.bind(("127.0.0.1", 0))
        probe.listen(1)
    except OSError as exc:
        return f"cannot open a loopback listener to test the namespace with ({exc})"
    with probe:
        try:
            before = os.readlink("/proc/thread-self/ns/net")
        except OSError as exc:
            return f"cannot read this thread's network namespace ({exc})"
        reason = _unshare(CLONE_NEWNET)
        if reason is not None:
            return reason
        if os.readlink("/proc/thread-self/ns/net") == before:
            return "unshare() returned, but the thread is still in the machine's network namespace"
        test = socket.socket()
        test.settimeout(2)
        try:
            test.connect(probe.getsockname())
        except OSError:
            return hide_resolvers()  # Network is unreachable: what the queries will meet; then names too
        finally:
            test.close()
        return "a connection to the machine's loopback still went through from the new namespace"


@dataclass(frozen=True)
class Protection:
    """What keeps the SPARQL evaluated on one thread from calling out: a network namespace of its own
    (``reason`` None), or, where there is none (``reason`` says why), the verified path."""

    reason: str | None

    @property
    def active(self) -> bool:
        return self.reason is None

    @property
    def how(self) -> str:
        """For the server's start-up line and ``/health``."""
        if self.active:
            return ("SPARQL is evaluated in a network namespace of its own, with no resolver daemon in sight: no "
                    "outbound connection can be opened and no host name looked up")
        return f"no network isolation ({self.reason}): every query and update takes the verified path"


def isolate_this_thread(not_wanted: str | None = None) -> Protection:
    """Move the calling thread into a network namespace of its own, unless ``not_wanted`` says why not (then it
    keeps the network). Threads it starts afterwards are in that namespace too; ones started before are not."""
    return Protection(not_wanted if not_wanted is not None else enter_own_network())


class OfflineThread:
    """One thread, in a network namespace of its own when the kernel allows it, that runs functions handed to it.

    :attr:`protection` says whether its isolation is in force (``not_wanted`` given: a plain thread that keeps the
    network, as a server worker's for its REST jobs). Results and exceptions come back to the caller; what the
    function made (pyoxigraph results, which may only be freed on the thread that made them) stays on it.
    """

    def __init__(self, not_wanted: str | None = None, name: str = "kqe-offline") -> None:
        """``not_wanted``: why the thread keeps the network (:func:`not_wanted`), None to isolate it."""
        self._jobs: queue.SimpleQueue = queue.SimpleQueue()
        self._ready = threading.Event()
        self._not_wanted = not_wanted
        self.protection = Protection(not_wanted)
        previous = threading.stack_size()
        threading.stack_size(STACK)
        try:
            self._thread = threading.Thread(target=self._main, name=name, daemon=True)
            self._thread.start()
        finally:
            threading.stack_size(previous)
        self._ready.wait()

    @property
    def active(self) -> bool:
        return self.protection.active

    @property
    def reason(self) -> str | None:
        return self.protection.reason

    @property
    def how(self) -> str:
        return self.protection.how

    def _main(self) -> None:
        self.protection = isolate_this_thread(self._not_wanted)
        self._ready.set()
        while True:
            job = self._jobs.get()
            if job is None:
                return
            function, args, done, out = job
            try:
                out.append((True, function(*args)))
            except BaseException as exc:  # noqa: BLE001 - handed to the caller
                out.append((False, exc.with_traceback(None)))
            del function, args
            done.set()

    def run(self, function: Callable[..., T], *args) -> T:
        """``function(*args)`` on this thread; its result, or its exception raised here."""
        done, out = threading.Event(), []
        self._jobs.put((function, args, done, out))
        done.wait()
        ok, value = out[0]
        if not ok:
            raise value
        return value

    def close(self) -> None:
        self._jobs.put(None)
        with contextlib.suppress(RuntimeError):
            self._thread.join(5)


def not_wanted(settings) -> str | None:
    """Why SPARQL must keep the network under ``settings``, or None when it should be evaluated offline.

    >>> from kqe_rdf.core.config import Settings
    >>> not_wanted(Settings()) is None
    True
    >>> not_wanted(Settings(server_service_allow="https://query.wikidata.org/sparql"))
    'SERVICE calls to the allow-list (server_service_allow) need the network'
    """
    if not settings.server.network_isolation:
        return "server_network_isolation is off"
    if settings.server.service_allow.strip():
        return "SERVICE calls to the allow-list (server_service_allow) need the network"
    if settings.store.endpoint:
        return "the KB's triples are in a remote store (store_endpoint)"
    return None
