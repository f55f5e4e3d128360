"""Real servers on loopback for the service tests: our app under uvicorn, and `oxigraph serve`.

``serving(app)`` runs an ASGI app in uvicorn on a free port (through a real
socket) and yields its base URL. ``oxigraph_endpoint`` is a session fixture: a
second, independent SPARQL server (the ``oxigraph`` CLI) loaded with a small
Wikidata-shaped sample (labels, altLabels, P31 types) written here.
"""

from __future__ import annotations

import contextlib
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

from kqe_rdf.config import Settings
from kqe_rdf.server import uvicorn_config

WD = "http://www.wikidata.org/entity/"
DISEASE, FILM, SYMPTOM = WD + "Q12136", WD + "Q11424", WD + "Q169872"

# Items named like the nodes of the tiny HPO KB (tests/fixtures_kb.py): an exact label, one that differs
# only in case, a film named like a disease (wrong type), a symptom with an alternative label, and a
# second "Seizure" (a film), which makes that name ambiguous.
WIKIDATA_SAMPLE = f"""\
@prefix wd: <{WD}> .
@prefix wdt: <http://www.wikidata.org/prop/direct/> .
@prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> .
@prefix skos: <http://www.w3.org/2004/02/skos/core#> .

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
    deadline = time.monotonic() + 30
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
    process = subprocess.Popen(command + (["--union-default-graph"] if union else []),
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    url = f"http://127.0.0.1:{port}/query"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                if httpx.get(url, params={"query": "ASK {}"}, timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"oxigraph serve did not start: {process.stderr.read().decode()[:500]}")
            time.sleep(0.1)
        yield url
    finally:
        process.terminate()
        process.wait(10)


@pytest.fixture(scope="session")
def oxigraph_endpoint(tmp_path_factory) -> Iterator[str]:
    """A second real SPARQL server holding the Wikidata-shaped sample."""
    with oxigraph_server(tmp_path_factory.mktemp("oxigraph")) as url:
        yield url
