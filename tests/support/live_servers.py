"""Real servers on loopback for the service tests: our app under uvicorn, `oxigraph serve` and Virtuoso.

``serving(app)`` runs an ASGI app in uvicorn on a free port (through a real
socket) and yields its base URL. ``oxigraph_endpoint`` is a session fixture: a
second, independent SPARQL server (the ``oxigraph`` CLI) loaded with a small
Wikidata-shaped sample (labels, altLabels, P31 types) written here.
``virtuoso_server(folder, data)`` starts OpenLink Virtuoso (Debian's
``virtuoso-opensource``) on free loopback ports with a database in ``folder``
and loads ``data`` through its bulk loader. ``milvus_server`` and ``milvus_standalone`` serve the Milvus
protocol: `milvus-lite server`, and the real Milvus server (vectors only).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import uvicorn

from kqe_rdf.core.config import Settings
from kqe_rdf.service.app import uvicorn_config

#: How long a server the tests start may take to answer, in seconds: a readiness bound, not a speed test. Under the
#: load of other suites on the shared 2-core machine start-up takes many times longer than idle (a fresh clone's
#: `make test` took 43 min there against 8 idle).
STARTUP_SECONDS = 180

WD = "http://www.wikidata.org/entity/"
DISEASE, FILM, SYMPTOM = WD + "Q12136", WD + "Q11424", WD + "Q169872"

# Items named like the nodes of the tiny HPO KB (tests/support/fixtures_kb.py): an exact label, one that differs
# only in case, a film named like a disease (wrong type), a symptom with an alternative label, and a
# second "Seizure" (a film), which makes that name ambiguous.
#: The prefixes of Wikidata-shaped Turtle: items (wd:), direct properties (wdt:), labels and alt labels.
WIKIDATA_PREFIXES = f"""\
@prefix wd: <{WD}> .
@prefix wdt: <http://www.wikidata.org/prop/direct/> .
@prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> .
@prefix skos: <http://www.w3.org/2004/02/skos/core#> .
"""
WIKIDATA_SAMPLE = WIKIDATA_PREFIXES + """
wd:Q900001 rdfs:label "Focal epilepsy type 1"@en ; wdt:P31 wd:Q12136 .
wd:Q900002 rdfs:label "frontal bossing syndrome"@en ; rdfs:label "syndrome de la bosse frontale"@fr ;
    wdt:P31 wd:Q12136 .
wd:Q900003 rdfs:label "Generalized epilepsy with forehead anomaly"@en ; wdt:P31 wd:Q11424 .
wd:Q900004 rdfs:label "seizure"@en ; skos:altLabel "epileptic seizure"@en ; wdt:P31 wd:Q169872 .
wd:Q900005 rdfs:label "Seizure"@en ; wdt:P31 wd:Q11424 .
wd:Q900006 rdfs:label "High forehead"@en ; skos:altLabel "tall forehead"@en .
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def serving(app, settings: Settings | None = None) -> Iterator[str]:
    """The app under uvicorn, configured as `kqe-rdf serve` runs it, on a free loopback port.

    Yields ``http://127.0.0.1:PORT``; ``settings`` are the server's (header timeout)."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = uvicorn_config(app, settings or Settings(), log_level="warning", timeout_graceful_shutdown=5)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + STARTUP_SECONDS
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(15)
        sock.close()


@contextlib.contextmanager
def oxigraph_server(folder, data: str | bytes = WIKIDATA_SAMPLE, name: str = "sample.ttl",
                    union: bool = False) -> Iterator[str]:
    """`oxigraph serve` over ``data`` (format by ``name``'s extension); yields its query URL (``.../query``)."""
    binary = Path(sys.executable).with_name("oxigraph")
    if not binary.exists():
        pytest.fail(f"the `oxigraph` server is missing beside {sys.executable}: pip install -e '.[test]' installs it")
    (folder / name).write_bytes(data.encode("utf-8") if isinstance(data, str) else data)
    subprocess.run([binary, "load", "--location", str(folder / "store"), "--file", str(folder / name)],
                   check=True, capture_output=True)
    port = free_port()
    command = [binary, "serve", "--location", str(folder / "store"), "--bind", f"127.0.0.1:{port}"]
    with sparql_process(command + (["--union-default-graph"] if union else []), f"http://127.0.0.1:{port}/query",
                        "oxigraph serve", STARTUP_SECONDS) as url:
        yield url


def stop(process: subprocess.Popen) -> None:
    """End a server the tests started: politely, then by force after 30 s."""
    process.terminate()
    try:
        process.wait(30)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(10)


@contextlib.contextmanager
def sparql_process(command: list, url: str, name: str, seconds: float, log: Path | None = None) -> Iterator[str]:
    """Run a SPARQL server's ``command`` until it answers ``ASK {}`` at ``url``; yield the URL, then stop it.

    When it does not start within ``seconds`` the error quotes its stderr (or the tail of its ``log`` file)."""
    process = subprocess.Popen(command, cwd=log.parent if log else None, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL if log else subprocess.PIPE)
    try:
        deadline = time.monotonic() + seconds
        while True:
            try:
                if httpx.get(url, params={"query": "ASK {}"}, timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if process.poll() is not None or time.monotonic() > deadline:
                if log:
                    said = log.read_text()[-800:] if log.exists() else "no log"
                else:
                    said = process.stderr.read().decode()[:500]
                raise RuntimeError(f"{name} did not start: {said}")
            time.sleep(0.1)
        yield url
    finally:
        stop(process)


@pytest.fixture(scope="session")
def oxigraph_endpoint(tmp_path_factory) -> Iterator[str]:
    """A second real SPARQL server holding the Wikidata-shaped sample."""
    with oxigraph_server(tmp_path_factory.mktemp("oxigraph")) as url:
        yield url


#: Debian's Virtuoso server and its isql client (`make test` installs them when it can).
VIRTUOSO = shutil.which("virtuoso-t") or next((p for p in ("/usr/bin/virtuoso-t",) if Path(p).exists()), None)
ISQL = shutil.which("isql-vt") or next((p for p in ("/usr/bin/isql-vt",) if Path(p).exists()), None)

VIRTUOSO_INI = """\
[Database]
DatabaseFile = {db}/virtuoso.db
ErrorLogFile = {db}/virtuoso.log
LockFile = {db}/virtuoso.lck
TransactionFile = {db}/virtuoso.trx
xa_persistent_file = {db}/virtuoso.pxa
ErrorLogLevel = 7
FileExtend = 200
Striping = 0
TempStorage = TempDatabase

[TempDatabase]
DatabaseFile = {db}/virtuoso-temp.db
TransactionFile = {db}/virtuoso-temp.trx

[Parameters]
ServerPort = 127.0.0.1:{sql_port}
DisableUnixSocket = 1
CaseMode = 2
DirsAllowed = ., {db}
NumberOfBuffers = 10000
MaxDirtyBuffers = 6000
ThreadsPerQuery = 2

[HTTPServer]
ServerPort = 127.0.0.1:{http_port}
ServerRoot = {db}
ServerThreads = 4
MaxClientConnections = 4

[SPARQL]
ResultSetMaxRows = 1000000
MaxQueryExecutionTime = 60
"""


def virtuoso_or_skip() -> tuple[str, str]:
    """Virtuoso's server and isql, or a skip on a developer's machine without them; under CI a missing one fails."""
    if VIRTUOSO is None or ISQL is None:
        message = ("Debian's virtuoso-opensource is not installed (`make test` installs it when it can: "
                   "apt-get install virtuoso-opensource)")
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return VIRTUOSO, ISQL


@contextlib.contextmanager
def virtuoso_server(folder: Path, data: bytes, name: str = "kb.nq") -> Iterator[str]:
    """Virtuoso on free loopback ports with its database in ``folder``, ``data`` loaded through the bulk loader
    (``ld_dir`` + ``rdf_loader_run`` via isql; quads keep their graphs, triples go to ``urn:kqe:default``).

    Yields the SPARQL query URL (``http://127.0.0.1:PORT/sparql``). Virtuoso's default dataset is the union of
    all graphs, which is what the KB expects of a remote store."""
    server, isql = virtuoso_or_skip()
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_bytes(data)
    sql_port, http_port = free_port(), free_port()
    (folder / "virtuoso.ini").write_text(VIRTUOSO_INI.format(db=folder, sql_port=sql_port, http_port=http_port))
    command = [server, "-c", str(folder / "virtuoso.ini"), "+foreground"]
    url = f"http://127.0.0.1:{http_port}/sparql"
    with sparql_process(command, url, "Virtuoso", STARTUP_SECONDS, folder / "virtuoso.log"):
        load = (f"ld_dir('{folder}', '{name}', 'urn:kqe:default'); rdf_loader_run(); checkpoint; "
                "select ll_file, ll_error from DB.DBA.LOAD_LIST where ll_error is not null;")
        out = subprocess.run([isql, f"127.0.0.1:{sql_port}", "dba", "dba", f"exec={load}"], capture_output=True,
                             text=True, timeout=300, check=False)
        if out.returncode or "0 Rows." not in out.stdout:
            raise RuntimeError(f"Virtuoso's bulk loader failed on {name}: {(out.stdout + out.stderr)[-800:]}")
        yield url


@contextlib.contextmanager
def milvus_server(folder: Path, seconds: float = STARTUP_SECONDS) -> Iterator[str]:
    """`milvus-lite server` (the [scale] extra's milvus-lite, serving the Milvus gRPC protocol) on a free loopback
    port with its data in ``folder``; yields ``milvus://127.0.0.1:PORT``, to which a collection name is added."""
    binary = Path(sys.executable).with_name("milvus-lite")
    if not binary.exists():
        pytest.fail(f"`milvus-lite` is missing beside {sys.executable}: pip install -e '.[test,scale]' installs it")
    port = free_port()
    process = subprocess.Popen([binary, "server", "--data-dir", str(folder / "milvus"), "--host", "127.0.0.1",
                                "--port", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + seconds
        while True:
            with socket.socket() as probe:
                if probe.connect_ex(("127.0.0.1", port)) == 0:
                    break
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"milvus-lite server did not start: {process.stderr.read().decode()[-500:]}")
            time.sleep(0.1)
        yield f"milvus://127.0.0.1:{port}"
    finally:
        stop(process)


def _answers(url: str) -> bool:
    try:
        return "OK" in httpx.get(url, timeout=2).text
    except httpx.HTTPError:
        return False


@contextlib.contextmanager
def milvus_standalone(folder: Path, seconds: float = 120) -> Iterator[str]:
    """The real Milvus server, standalone (PyPI ``milvus`` 2.3.5 of the [scale] extra: vectors only, no BM25), its
    data and logs in ``folder``; yields ``milvus://127.0.0.1:PORT``. Skips the test, with the reason, where it
    does not start within ``seconds``. Its etcd listens on loopback; its gRPC ports listen on every interface
    (Milvus 2.3 has no setting for their address: ``*.ip`` is only the address it advertises)."""
    try:
        from milvus import MilvusServer, MilvusServerConfig
    except ImportError:
        pytest.skip("the real Milvus server is not installed (PyPI milvus 2.3.5: pip install -e '.[test,scale]')")
    server = MilvusServer(MilvusServerConfig(data_dir=str(folder)), wait_for_started=False)
    for part in ("proxy", "rootCoord", "queryCoord", "queryNode", "indexCoord", "indexNode", "dataCoord", "dataNode"):
        server.config.extra_configs[f"{part}.ip"] = "127.0.0.1"

    def gone(why: str):
        log = folder / "logs" / "milvus-stderr.log"
        server.stop()
        first = next((line for line in (log.read_text(errors="replace").splitlines() if log.exists() else [])
                      if line.startswith(("panic", "fatal", "Error"))), "")
        pytest.skip(f"the real Milvus server did not start: {why} {first}".strip())

    try:
        server.start()
    except Exception as exc:  # noqa: BLE001 - what the wrapper raises (RuntimeError, OSError) is the reason
        gone(repr(exc))
    deadline = time.monotonic() + seconds
    while not _answers(f"http://127.0.0.1:{server.webservice_port}/healthz"):
        if server.server_proc.poll() is not None:  # e.g. a second server on the machine: it panics at start
            gone(f"it exited with {server.server_proc.returncode}")
        if time.monotonic() > deadline:
            gone(f"no answer within {seconds:.0f} s")
        time.sleep(0.2)
    time.sleep(1)  # as the wrapper's own wait does: its services register a moment after the health check
    try:
        yield f"milvus://127.0.0.1:{server.listen_port}"
    finally:
        server.stop()  # SIGTERM, then SIGKILL after 1 s: its graceful shutdown takes longer than a test needs
        shutil.rmtree(folder / "bin", ignore_errors=True)  # the 330 MB it unpacked to run
