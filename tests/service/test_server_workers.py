"""The endpoint survives hostile and careless clients (issue 15, items 3, 5, 8 and 10), through a real socket.

3. A query past its deadline is stopped for real: its worker process is killed
   within a second of the deadline (CPU and memory freed), a query that needs too
   much memory ends its own worker, never the server, and one client cannot take
   every worker: another client's cheap queries are answered at once meanwhile.
5. A server that takes updates notices when the KB was rebuilt under it and
   writes to the new store, not into the replaced one.
8. Malformed parameters get 400 naming the parameter, never 500.
10. Half-open and slow connections are closed; a body that does not arrive gets 408.

The KB is the tiny HPO KB of tests/support/fixtures_kb.py; the expensive queries get their
cost from their own VALUES, whatever the KB holds.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from support.fixtures_kb import bio_kb  # noqa: F401 - fixture
from kqe_rdf.kb.build import build_kb
from kqe_rdf.core.config import Settings
from kqe_rdf.kb.importers.jsonl import JsonlImporter
from kqe_rdf.kb.knowledge_base import KnowledgeBase
from kqe_rdf.service.app import OneWritePerStep, create_app
from kqe_rdf.service.protocol import Rendered, ResultCache
from support.live_servers import STARTUP_SECONDS, serving
from support.workers import DISEASES, ENDLESS, GREEDY, busy_worker, in_background, values

pytestmark = pytest.mark.slow  # servers, subprocesses or big inputs: not in `make test-quick`

def alive(pid: int) -> bool:
    """Whether a process exists and is not a zombie (a killed worker is reaped in the background)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def wait_for(condition, what: str, seconds: float = STARTUP_SECONDS) -> None:
    """Wait until ``condition()`` holds: what the server does in the background (start a worker, see one die)
    takes longer under load than idle, and a fixed sleep guessed how long."""
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {seconds} s: {what}")
        time.sleep(0.02)


def ask(url: str, query: str, client: httpx.Client | None = None, **params) -> httpx.Response:
    http = client or httpx
    return http.get(url + "/sparql", params={"query": query, **params}, timeout=60)


# ---------------------------------------------------------------- 3. cancel for real


def test_a_query_past_its_deadline_is_killed_within_a_second_and_the_next_one_is_answered(bio_kb):  # noqa: F811
    app = create_app(bio_kb, Settings(server_query_timeout=1.0, server_query_slots=1))
    with serving(app) as url:
        started = time.monotonic()
        slow = in_background(lambda: ask(url, ENDLESS))
        pid = busy_worker(app)
        response = slow.result()
        answered = time.monotonic()
        assert response.status_code == 503 and "server_query_timeout" in response.text
        assert response.headers["retry-after"] and answered - started < 1.0 + 1.5
        while alive(pid) and time.monotonic() < answered + 1.0:
            time.sleep(0.02)
        assert not alive(pid), "the worker still runs the abandoned query"
        # The one worker was replaced: the next query is answered in full. (It waits for the new worker to be
        # ready first: starting one took longer than this server's 1 s deadline when other suites loaded the CPU.)
        wait_for(lambda: len(app.state.workers.pids(busy=False)) == 1, "a new worker in place of the killed one")
        after = ask(url, DISEASES)
        assert after.status_code == 200 and len(after.json()["results"]["bindings"]) == 3
        assert app.state.workers.killed == 1


def test_a_query_that_needs_too_much_memory_ends_its_worker_not_the_server(bio_kb):  # noqa: F811
    app = create_app(bio_kb, Settings(server_query_timeout=60, server_query_slots=1, server_worker_memory_mb=400))
    with serving(app) as url:
        started = time.monotonic()
        response = ask(url, GREEDY)
        assert response.status_code == 503 and "server_worker_memory_mb" in response.text
        assert response.headers["retry-after"]
        assert time.monotonic() - started < 30  # stopped by its memory, long before its deadline
        assert ask(url, DISEASES).status_code == 200


def test_one_client_cannot_take_every_worker_and_cheap_queries_are_answered_meanwhile(bio_kb):  # noqa: F811
    settings = Settings(server_query_timeout=3.0, server_query_slots=2)  # one worker per client at most
    app = create_app(bio_kb, settings)
    attacker = httpx.Client(transport=httpx.HTTPTransport(local_address="127.0.0.2"), timeout=60)
    with serving(app) as url, attacker:
        while len(app.state.workers.pids(busy=False)) < 2:  # both workers started
            time.sleep(0.05)
        attacks = [in_background(lambda: ask(url, ENDLESS, attacker)) for _ in range(2)]
        busy_worker(app)
        latencies = []
        for _ in range(5):  # another client, while the attack runs
            t0 = time.monotonic()
            response = ask(url, DISEASES)
            latencies.append(time.monotonic() - t0)
            assert response.status_code == 200
        assert max(latencies) < 1.0, latencies
        answers = [a.result().text for a in attacks]
        # One attack was stopped at its deadline; the other never got a second worker.
        assert sorted("server_query_timeout" in a for a in answers) == [False, True], answers
        assert sorted("server_client_workers" in a for a in answers) == [False, True], answers


def test_a_forged_forwarded_for_header_does_not_make_one_client_many(bio_kb):  # noqa: F811
    settings = Settings(server_query_timeout=2.0, server_query_slots=2)
    app = create_app(bio_kb, settings)
    with serving(app, settings) as url:
        attacks = [in_background(lambda n=n: httpx.get(url + "/sparql", params={"query": ENDLESS}, timeout=60,
                                                       headers={"X-Forwarded-For": f"10.0.0.{n}"}))
                   for n in range(2)]
        answers = [a.result().text for a in attacks]
        assert sorted("server_client_workers" in a for a in answers) == [False, True], answers


def test_a_worker_that_dies_is_replaced_and_its_request_is_answered(bio_kb):  # noqa: F811
    app = create_app(bio_kb, Settings(server_query_timeout=30, server_query_slots=1))
    with serving(app) as url:
        slow = in_background(lambda: ask(url, ENDLESS))
        os.kill(busy_worker(app), signal.SIGKILL)  # as a crash in pyoxigraph would
        response = slow.result()
        assert response.status_code == 503 and "stopped unexpectedly (signal 9)" in response.text
        after = ask(url, DISEASES)
        assert after.status_code == 200, after.text


def test_a_worker_killed_while_idle_is_replaced_before_a_request_meets_it(bio_kb):  # noqa: F811
    """Issue 49: each worker killed between jobs turned the next request into a 500."""
    app = create_app(bio_kb, Settings(server_query_slots=2))
    with serving(app) as url:
        pool = app.state.workers
        while len(pool.pids(busy=False)) < 2:
            time.sleep(0.05)
        idle = pool.pids(busy=False)
        for pid in idle:
            os.kill(pid, signal.SIGKILL)
        wait_for(lambda: pool.killed == 2, "the server sees both sockets close")
        answers = [ask(url, DISEASES) for _ in range(4)]
        assert [a.status_code for a in answers] == [200] * 4, [a.text for a in answers]
        assert pool.killed == 2 and not set(idle) & set(pool.pids())


def test_stopping_the_server_stops_a_query_still_running(bio_kb):  # noqa: F811
    app = create_app(bio_kb, Settings(server_query_timeout=120, server_query_slots=1))
    with serving(app) as url:
        slow = in_background(lambda: httpx.get(url + "/sparql", params={"query": ENDLESS}, timeout=120))
        pid = busy_worker(app)
    stopped = time.monotonic()
    while alive(pid) and time.monotonic() < stopped + 2:
        time.sleep(0.02)
    assert not alive(pid)
    try:
        assert slow.result().status_code != 200  # cut off, whichever way uvicorn ends it
    except httpx.HTTPError:
        pass


@pytest.mark.parametrize("setting, value", [("server_client_workers", -1),
                                            ("server_worker_memory_mb", 100), ("server_header_timeout", 0),
                                            ("server_body_timeout", -1), ("server_result_cache_mb", -1)])
def test_impossible_worker_settings_are_refused(bio_kb, setting, value):  # noqa: F811
    from kqe_rdf.core.errors import KqeError

    with pytest.raises(KqeError, match=setting):
        create_app(bio_kb, Settings(**{setting: value}))


def test_a_kb_that_cannot_be_opened_stops_the_server_at_startup(tmp_path, bio_kb):  # noqa: F811
    import shutil

    from kqe_rdf.core.errors import KqeError

    shutil.copytree(bio_kb.path, tmp_path / "kb")
    kb = KnowledgeBase.open(tmp_path / "kb")
    shutil.rmtree(tmp_path / "kb" / "store")
    (tmp_path / "kb" / "store").write_text("not a store")
    app = create_app(kb, Settings())
    from starlette.testclient import TestClient

    with pytest.raises(KqeError, match="could not start"), TestClient(app):
        pass


# ---------------------------------------------------------------- 5. updates after a rebuild


def test_updates_after_a_rebuild_go_to_the_new_store(tmp_path, products_file):
    path = tmp_path / "kb"
    build_kb(JsonlImporter([products_file]), path)
    token = {"Content-Type": "application/sparql-update", "Authorization": "Bearer s3cret"}
    app = create_app(KnowledgeBase.open(path), Settings(server_update_token="s3cret"))
    with serving(app) as url:
        first = httpx.post(url + "/update", content='INSERT DATA { <urn:kqe:first> rdfs:label "before" }',
                           headers=token, timeout=60)
        assert first.status_code == 204
        build_kb(JsonlImporter([products_file]), path)  # an atomic rebuild swaps the KB folder under the server
        second = httpx.post(url + "/update", content='INSERT DATA { <urn:kqe:second> rdfs:label "after" }',
                            headers=token, timeout=60)
        assert second.status_code == 204
        assert ask(url, "ASK { <urn:kqe:second> ?p ?o }").json()["boolean"] is True
        assert ask(url, "ASK { <urn:kqe:first> ?p ?o }").json()["boolean"] is False  # the rebuild replaced it
    on_disk = KnowledgeBase.open(path)
    assert on_disk.query("ASK { <urn:kqe:second> rdfs:label 'after' }")  # written into the KB that is there now


# ---------------------------------------------------------------- 8. bad input is 400, naming the parameter


@pytest.fixture(scope="module")
def server(bio_kb):  # noqa: F811
    with serving(create_app(bio_kb, Settings(server_query_slots=2))) as url:
        yield url


@pytest.mark.parametrize("route, request_args, parameter", [
    ("/sparql", {"params": {"query": DISEASES, "default-graph-uri": "not an iri"}}, "default-graph-uri"),
    ("/sparql", {"params": {"query": DISEASES, "named-graph-uri": "<urn:x>"}}, "named-graph-uri"),
    ("/search", {"content": b'{"q": "seiz\\ud800ure"}'}, "q"),
    ("/search", {"content": b'{"q": "seizure", "k": 1e400}'}, "k"),
    ("/search", {"content": b'{"q": "seizure", "k": -Infinity}'}, "k"),
    ("/search", {"content": b'{"q": "seizure", "k": NaN}'}, "k"),
    ("/search", {"content": b'{"q": "seizure", "k": ' + b"9" * 5000 + b"}"}, "k"),
    ("/search", {"content": b'{"q": "seizure", "k": 2.5}'}, "k"),
    ("/search", {"content": b'{"q": {"nested": "object"}}'}, "q"),
    ("/search", {"content": b'{"q": null}'}, "q"),
    ("/answer", {"content": b'{"q": "x", "source": [["kg"]]}'}, "source"),
    ("/expand", {"content": b'{"q": "\\udfff"}'}, "q"),
    ("/search", {"content": b'{"q": ' + b"[" * 20000 + b"]" * 20000 + b"}"}, "body"),
])
def test_malformed_parameters_are_400_naming_the_parameter(server, route, request_args, parameter):
    if "content" in request_args:
        response = httpx.post(server + route, headers={"Content-Type": "application/json"}, timeout=60,
                              **request_args)
    else:
        response = httpx.get(server + route, timeout=60, **request_args)
    assert response.status_code == 400, response.text
    assert parameter in response.text and "Traceback" not in response.text


# ---------------------------------------------------------------- 10. slow and half-open connections


def test_half_open_and_trickling_connections_are_closed_after_the_header_timeout(bio_kb):  # noqa: F811
    settings = Settings(server_header_timeout=1.0)
    with serving(create_app(bio_kb, settings), settings) as url:
        port = int(url.rsplit(":", 1)[1])
        silent = [socket.create_connection(("127.0.0.1", port)) for _ in range(100)]
        partial = [socket.create_connection(("127.0.0.1", port)) for _ in range(100)]
        for s in partial:
            s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n")  # never the blank line that ends the headers
        trickle = socket.create_connection(("127.0.0.1", port))
        started = time.monotonic()
        trickle.sendall(b"GET /health HTTP/1.1\r\n")
        for _ in range(8):  # a byte every 0.25 s: uvicorn's own keep-alive timer never fires on this
            time.sleep(0.25)
            try:
                trickle.sendall(b"X")
            except OSError:
                break
        assert ask(url, "ASK {}").status_code == 200  # real clients are still served meanwhile
        for s in [*silent, *partial, trickle]:
            s.settimeout(5)
            try:
                assert s.recv(100) == b""  # closed by the server
            except ConnectionResetError:
                pass
            s.close()
        assert time.monotonic() - started < 5


def test_a_body_that_does_not_arrive_gets_408(bio_kb):  # noqa: F811
    settings = Settings(server_body_timeout=1.0)
    with serving(create_app(bio_kb, settings), settings) as url:
        port = int(url.rsplit(":", 1)[1])
        with socket.create_connection(("127.0.0.1", port)) as s:
            s.sendall(b"POST /sparql HTTP/1.1\r\nHost: x\r\nContent-Type: application/sparql-query\r\n"
                      b"Content-Length: 100\r\n\r\nASK {")
            s.settimeout(10)
            head = s.recv(4096)
        assert head.startswith(b"HTTP/1.1 408") and b"server_body_timeout" in head


def test_a_response_head_and_body_leave_in_one_write():
    """uvicorn writes a response's head and body apart; the server's transport sends what one step wrote at once
    (one packet, one wake-up of the client), and what is pending before it closes."""

    class Socket:  # the real transport's side: what reaches the socket, write by write
        def __init__(self) -> None:
            self.writes, self.closed = [], False

        def write(self, data) -> None:
            self.writes.append(bytes(data))

        def is_closing(self) -> bool:
            return self.closed

        def close(self) -> None:
            self.closed = True

    loop, sent = asyncio.new_event_loop(), Socket()
    try:
        transport = OneWritePerStep(sent, loop)
        transport.write(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n")
        transport.write(b"ok")
        assert sent.writes == []  # nothing yet: the step is not over
        loop.run_until_complete(asyncio.sleep(0))
        assert sent.writes == [b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok"]
        transport.write(b"HTTP/1.1 400 Bad Request\r\nconnection: close\r\n\r\n")
        transport.close()
        assert sent.writes[1:] == [b"HTTP/1.1 400 Bad Request\r\nconnection: close\r\n\r\n"] and sent.closed
        assert transport.is_closing()  # the rest is the real transport's
    finally:
        loop.close()


def test_json_and_urlencoded_bodies_still_work(server):
    by_json = httpx.post(server + "/search", json={"q": "seizure", "k": 2, "type": ["Disease"]}, timeout=60)
    by_form = httpx.post(server + "/search", data={"q": "seizure", "k": "2"}, timeout=60)
    assert by_json.status_code == by_form.status_code == 200
    assert len(by_json.json()["results"]) <= 2 and json.loads(by_form.text)["k"] == 2


# ---------------------------------------------------------------- 4. a served KB is never written


def snapshot(folder) -> dict:
    """Every file under a folder with its size and modification time."""
    return {str(p.relative_to(folder)): (p.stat().st_size, p.stat().st_mtime_ns)
            for p in sorted(folder.rglob("*")) if p.is_file()}


def test_answer_from_text_builds_what_it_needs_without_writing_into_the_served_kb(tmp_path, bio_kb):  # noqa: F811
    import shutil

    shutil.copytree(bio_kb.path, tmp_path / "kb", ignore=shutil.ignore_patterns("sentences"))
    before = snapshot(tmp_path / "kb")
    with serving(create_app(KnowledgeBase.open(tmp_path / "kb"), Settings(server_query_slots=1))) as url:
        response = httpx.post(url + "/answer", json={"q": "Which disease has Seizure?", "source": ["text"]},
                              timeout=60)
        assert response.status_code == 200, response.text
        assert any(e["source"] == "text" for e in response.json()["evidence"])
    assert snapshot(tmp_path / "kb") == before  # no sentences/, no lock file, nothing touched


# ---------------------------------------------------------------- repeated queries


def test_a_repeated_query_is_answered_from_the_cache_until_the_kb_is_rebuilt(tmp_path, jsonl, products_text):
    path = tmp_path / "kb"
    build_kb(JsonlImporter([jsonl(products_text)]), path)
    app = create_app(KnowledgeBase.open(path), Settings(server_query_slots=1))
    count = "SELECT (COUNT(?p) AS ?n) WHERE { ?p a kqe:Node }"
    with serving(app) as url:
        def nodes() -> int:
            return int(ask(url, count).json()["results"]["bindings"][0]["n"]["value"])

        pool = app.state.workers
        before = nodes()
        jobs = pool.jobs
        assert nodes() == before and pool.jobs == jobs  # the same query again: no worker asked
        assert ask(url, count, format="csv").status_code == 200 and pool.jobs == jobs + 1  # another format
        for volatile in ("SELECT (RAND() AS ?r) WHERE {}", "CONSTRUCT { ?p a kqe:Node } WHERE { ?p a kqe:Node }"):
            ask(url, volatile)
            ask(url, volatile)
        assert pool.jobs == jobs + 5  # random values and graphs are always evaluated
        extra = '{"kind": "node", "id": "B010", "type": "Product", "name": "Lens hood"}\n'
        build_kb(JsonlImporter([jsonl(products_text + extra, "more.jsonl")]), path)  # rebuilt while served
        assert nodes() == before + 1  # not the cached answer, nor the replaced store's


def test_a_worker_builds_each_pipeline_once_for_its_requests_and_an_update_forgets_them(tmp_path, products_file):
    from kqe_rdf.service.jobs import run_job
    from kqe_rdf.service.workers import _Context

    path = tmp_path / "kb"
    build_kb(JsonlImporter([products_file]), path)
    context = _Context(path, KnowledgeBase.open(path).settings, Settings(), writable=True)  # as a worker opens it

    def job(kind, **payload):
        return run_job(context, kind, payload, time.monotonic() + 60)

    first = json.loads(job("search", q=["Nikon camera for birds"], method=["4step-offline"], k=["3"]))
    [stage] = context.pipelines.values()
    second = json.loads(job("search", q=["a travel tripod"], method=["4step-offline"], k=["3"]))
    assert first["results"] and second["results"][0]["id"] == "B007"
    assert list(context.pipelines.values()) == [stage] and next(iter(context.pipelines.values())) is stage
    search = 'SELECT ?n { SERVICE <urn:kqe:search> { ?n kqe:query "travel tripod" ; kqe:method "4step-offline" ; kqe:k 3 } }'
    job("sparql", query=search, defaults=[], named=[], accept="text/csv")
    assert next(iter(context.pipelines.values())) is stage and len(context.pipelines) == 1  # SPARQL's search too
    job("update", update='INSERT DATA { <urn:kqe:x> rdfs:label "x" }')
    assert not context.pipelines  # the store changed: built again from it
    job("search", q=["a travel tripod"], method=["4step-offline"], k=["3"])
    assert next(iter(context.pipelines.values())) is not stage


def test_search_after_a_rebuild_runs_on_the_new_kb(tmp_path, jsonl, products_text):
    path = tmp_path / "kb"
    build_kb(JsonlImporter([jsonl(products_text)]), path)
    app = create_app(KnowledgeBase.open(path), Settings(server_query_slots=1))
    with serving(app) as url:
        def ids(method: str) -> list[str]:
            response = httpx.get(url + "/search", params={"q": "lens hood", "method": method, "k": 3}, timeout=60)
            assert response.status_code == 200, response.text
            return [r["id"] for r in response.json()["results"]]

        assert "B010" not in ids("bm25") + ids("4step-offline")  # pipelines built on the first KB
        extra = '{"kind": "node", "id": "B010", "type": "Product", "name": "Lens hood"}\n'
        build_kb(JsonlImporter([jsonl(products_text + extra, "more.jsonl")]), path)
        assert ids("bm25")[0] == "B010" and ids("4step-offline")[0] == "B010"


def test_an_answer_that_finishes_after_a_rebuild_is_not_cached_for_the_new_kb(tmp_path):
    """The issue's race, step by step on the cache the server keeps: a COUNT begins on the old KB, the KB is
    rebuilt (its store folder swapped), another request makes the cache notice, then the COUNT's old answer
    arrives: it must not be kept as the new KB's answer."""
    (tmp_path / "store").mkdir()
    cache = ResultCache(2**20, tmp_path)
    key = ("SELECT (COUNT(*) AS ?n) WHERE { ?s ?p ?o }", "", (), (), "http://testserver/sparql")
    began = cache.identity  # the COUNT begins
    os.rename(tmp_path / "store", tmp_path / "store.old")  # a rebuild ends by swapping the folder
    (tmp_path / "store").mkdir()
    assert cache.get(("ASK {}", "", (), (), "")) is None  # any other request: the cache sees the new KB
    cache.put(key, Rendered(b"17783089", "text/csv", repeatable=True), began)  # the old answer arrives
    assert cache.get(key) is None
    cache.put(key, Rendered(b"4900", "text/csv", repeatable=True), cache.identity)  # computed on the new KB
    assert cache.get(key).body == b"4900"


def test_the_first_request_after_a_rebuild_is_answered_and_no_answer_shows_a_server_path(tmp_path, jsonl,
                                                                                         products_text):
    path = tmp_path / "kb"
    build_kb(JsonlImporter([jsonl(products_text)]), path)  # no embeddings
    app = create_app(KnowledgeBase.open(path), Settings(server_query_slots=3))
    with serving(app) as url:
        while len(app.state.workers.pids(busy=False)) < 3:  # three idle workers, all on the KB before the rebuild
            time.sleep(0.05)
        build_kb(JsonlImporter([jsonl(products_text)]), path)
        response = ask(url, "SELECT (COUNT(*) AS ?n) WHERE { ?s ?p ?o }")
        assert response.status_code == 200, response.text
        dense = httpx.get(url + "/search", params={"q": "lens", "method": "dense"}, timeout=60)
        assert dense.status_code == 400 and "kqe-rdf kb embed" in dense.text
        assert str(tmp_path) not in dense.text and "kb embed --kb kb" in dense.text


def test_a_kb_folder_that_disappears_gives_503_without_its_path_and_health_says_so(tmp_path, jsonl, products_text):
    """Issue 37: the folder deleted under a running server. Every answer is 503 naming the KB by its name alone,
    and /health stops saying ok."""
    import shutil

    path = tmp_path / "served" / "kb"
    build_kb(JsonlImporter([jsonl(products_text)]), path)
    app = create_app(KnowledgeBase.open(path), Settings(server_query_slots=2, server_result_cache_mb=0))
    with serving(app) as url:
        assert httpx.get(url + "/health", timeout=10).json()["status"] == "ok"
        shutil.rmtree(path)
        answers = [ask(url, "SELECT (COUNT(*) AS ?n) WHERE { ?s ?p ?o }"),
                   httpx.get(url + "/search", params={"q": "lens"}, timeout=60),
                   ask(url, "ASK {}")]
        health = httpx.get(url + "/health", timeout=10)
    for response in answers:
        assert response.status_code == 503, (response.status_code, response.text)
        assert str(tmp_path) not in response.text and "/served/" not in response.text, response.text
    assert health.status_code == 503 and health.json()["status"] != "ok", health.text
    assert str(tmp_path) not in health.text


def test_a_second_writer_on_a_kb_is_refused_in_one_line_without_a_traceback(tmp_path, products_file):
    import subprocess
    import sys
    from pathlib import Path

    from support.live_servers import free_port

    path = tmp_path / "kb"
    build_kb(JsonlImporter([products_file]), path)
    with serving(create_app(KnowledgeBase.open(path), Settings(server_update_token="s3cret"))):
        second = subprocess.run([Path(sys.executable).with_name("kqe-rdf"), "serve", "--kb", str(path),
                                 "--update-token", "other", "--port", str(free_port())],
                                capture_output=True, text=True, timeout=60)
    assert second.returncode != 0
    assert "another process writes it" in second.stdout + second.stderr
    assert "Traceback" not in second.stdout + second.stderr
