"""The query workers are shared between clients (issue 24: "all clients behind one address share one quota"),
through a real socket to real workers.

A client is its credentials (a bearer token) when it sends some, else its address;
X-Forwarded-For names it only when the peer is a configured proxy. The KB is the
tiny HPO KB of tests/support/fixtures_kb.py; the slow queries get their cost from their own
VALUES, whatever the KB holds.
"""

from __future__ import annotations

import os
import signal
import time

import httpx
import pytest

from support.fixtures_kb import bio_kb  # noqa: F401 - fixture
from kqe_rdf.core.config import Settings
from kqe_rdf.service.app import create_app
from kqe_rdf.service.requests import client_of
from support.live_servers import serving
from support.workers import DISEASES, ENDLESS, busy_worker, in_background, values

pytestmark = pytest.mark.slow  # servers, subprocesses or big inputs: not in `make test-quick`


def ask(url: str, query: str, headers: dict | None = None) -> httpx.Response:
    return httpx.get(url + "/sparql", params={"query": query}, headers=headers or {}, timeout=60)


def timed(fn):
    """Run ``fn()`` on a thread; ``.result()`` gives its response and when it came."""
    return in_background(lambda: (fn(), time.monotonic()))


def bearer(token: str) -> dict:
    return {"Authorization": f"Bearer {token}"}


def started(app, workers: int) -> None:
    """Wait until the pool's workers have all opened the KB (they start in the background)."""
    deadline = time.monotonic() + 60
    while len(app.state.workers.pids(busy=False)) < workers:
        assert time.monotonic() < deadline, "the workers did not start"
        time.sleep(0.05)


def waiting(app, count: int) -> None:
    """Wait until ``count`` requests wait for a worker."""
    deadline = time.monotonic() + 30
    while app.state.workers.waiting < count:
        assert time.monotonic() < deadline, f"{app.state.workers.waiting} requests wait, not {count}"
        time.sleep(0.02)


def busy_counts(pool, samples: int = 0) -> list[int]:
    """How many workers are busy, every 20 ms: ``samples`` times, or (0) for as long as requests wait."""
    counts = []
    while len(counts) < samples if samples else pool.waiting:
        counts.append(len(pool.pids(busy=True)))
        time.sleep(0.02)
    return counts


def latency(fn) -> tuple[httpx.Response, float]:
    began = time.monotonic()
    response = fn()
    return response, time.monotonic() - began


# ---------------------------------------------------------------- who a client is


def test_a_client_is_its_credentials_else_its_address_and_its_key_never_shows_them():
    from starlette.requests import Request

    def request(address: str, authorization: str | None = None) -> Request:
        headers = [(b"authorization", authorization.encode())] if authorization else []
        return Request({"type": "http", "headers": headers, "client": (address, 40000)})

    by_address = client_of(request("192.0.2.1"))
    alpha = client_of(request("192.0.2.1", "Bearer alpha-secret"))
    assert by_address == ("address 192.0.2.1", "192.0.2.1")
    assert alpha.key != by_address.key and alpha.address == "192.0.2.1"
    assert client_of(request("192.0.2.7", "Bearer alpha-secret")).key == alpha.key  # one token, wherever it is
    assert client_of(request("192.0.2.1", "Bearer beta")).key != alpha.key
    assert "alpha" not in alpha.key and "secret" not in alpha.key


def test_clients_behind_one_address_are_told_apart_by_their_tokens(bio_kb):  # noqa: F811
    """Both clients connect from 127.0.0.1. alpha holds its one worker (of two) with a query that runs to its
    deadline and has a second one waiting; beta's queries take the other worker at once, while alpha's second
    waits out the timeout and is told that its own share was full, without its token in the answer."""
    settings = Settings(server_query_timeout=2.5, server_query_slots=2)  # at most one worker per client
    app = create_app(bio_kb, settings)
    with serving(app, settings) as url:
        started(app, 2)
        stuck = timed(lambda: ask(url, ENDLESS, bearer("alpha-secret")))
        busy_worker(app)
        sent = time.monotonic()
        second = timed(lambda: ask(url, ENDLESS, bearer("alpha-secret")))
        waiting(app, 1)
        answers = [latency(lambda: ask(url, DISEASES, bearer("beta"))) for _ in range(3)]
        assert [r.status_code for r, _ in answers] == [200] * 3, [r.text for r, _ in answers]
        assert max(seconds for _, seconds in answers) < 1.0, answers
        (first, _), (refused, refused_at) = stuck.result(), second.result()
    assert first.status_code == 503 and "server_query_timeout" in first.text
    assert refused.status_code == 503 and "your share" in refused.text, refused.text
    assert "server_client_workers: 1 of 2" in refused.text
    assert refused.headers["retry-after"]
    assert refused_at - sent >= 2.0  # it waited for its share, it was not refused at once
    assert not any("alpha" in r.text or "alpha" in str(r.headers) for r in (first, refused))


# ---------------------------------------------------------------- who gets a freed worker


#: About 0.7 s of one CPU (8 million rows counted): long enough to queue behind, short enough to wait for.
SLOW = f"SELECT (COUNT(*) AS ?n) WHERE {{ {values(200)} }}"


def from_address(address: str) -> httpx.Client:
    return httpx.Client(transport=httpx.HTTPTransport(local_address=address), timeout=60)


@pytest.mark.parametrize("tokens", [False, True], ids=["one client", "a new token per request"])
def test_a_freed_worker_goes_to_the_client_holding_fewest_not_to_the_longest_queue(bio_kb, tokens):  # noqa: F811
    """A (127.0.0.2) sends six slow queries to two workers, with no cap in the way: two run, four wait. B's quick
    query, sent after them, takes the first worker that frees up, not the fifth. With a new token per request
    each of A's queries is a client of its own that holds nothing, but their address holds both workers: B,
    from another address, still goes first."""
    settings = Settings(server_query_timeout=60, server_query_slots=2, server_client_workers=2)
    app = create_app(bio_kb, settings)
    with serving(app, settings) as url, from_address("127.0.0.2") as a:
        started(app, 2)
        flood = [timed(lambda n=n: a.get(url + "/sparql", params={"query": SLOW},
                                          headers=bearer(f"a{n}") if tokens else {})) for n in range(6)]
        waiting(app, 4)
        b, b_at = timed(lambda: ask(url, DISEASES)).result()
        answers = [f.result() for f in flood]
    assert b.status_code == 200, b.text
    assert [r.status_code for r, _ in answers] == [200] * 6
    before_b = sum(at < b_at for _, at in answers)
    assert before_b <= 2, f"{before_b} of A's queries were answered before B's (first come, first served: 5)"


def test_one_client_holds_all_workers_but_one_and_gets_them_back_when_the_other_is_idle(bio_kb):  # noqa: F811
    """Three workers, the default share: A's flood runs two at a time, never three; B's query takes the third at
    once; once B is idle, A runs two at a time again."""
    settings = Settings(server_query_timeout=60, server_query_slots=3)
    app = create_app(bio_kb, settings)
    pool = app.state.workers
    with serving(app, settings) as url, from_address("127.0.0.2") as a:
        started(app, 3)
        flood = [timed(lambda: a.get(url + "/sparql", params={"query": SLOW})) for _ in range(6)]
        waiting(app, 4)
        alone = busy_counts(pool, samples=20)
        b, seconds = latency(lambda: ask(url, DISEASES))
        after = busy_counts(pool)
        answers = [f.result()[0] for f in flood]
    assert max(alone) == 2 and alone.count(2) > len(alone) / 2, alone
    assert b.status_code == 200 and seconds < 1.0, (b.text, seconds)
    assert max(after) == 2 and after.count(2) > len(after) / 2, after
    assert [r.status_code for r in answers] == [200] * 6


def test_a_client_whose_job_was_killed_takes_an_idle_worker_at_once(bio_kb):  # noqa: F811
    """A's job crashes its worker while A's next query waits (A is at its share, the other worker idle): the next
    query runs on the idle worker at once, not on the replacement once that has started."""
    settings = Settings(server_query_timeout=30, server_query_slots=2)
    app = create_app(bio_kb, settings)
    with serving(app, settings) as url:
        started(app, 2)
        crashed = timed(lambda: ask(url, ENDLESS))
        pid = busy_worker(app)
        following = timed(lambda: ask(url, DISEASES))
        waiting(app, 1)
        killed_at = time.monotonic()
        os.kill(pid, signal.SIGKILL)
        (first, _), (second, second_at) = crashed.result(), following.result()
    assert first.status_code == 503 and second.status_code == 200, (first.text, second.text)
    assert second_at - killed_at < 0.15, second_at - killed_at  # a new worker took 0.28 s to start here


# ---------------------------------------------------------------- X-Forwarded-For


@pytest.mark.parametrize("proxies, apart", [("10.9.9.9", False), ("127.0.0.1", True)])
def test_x_forwarded_for_names_the_client_only_when_the_peer_is_a_configured_proxy(bio_kb, proxies, apart):  # noqa: F811
    settings = Settings(server_query_timeout=2.0, server_query_slots=2, server_trusted_proxies=proxies)
    app = create_app(bio_kb, settings)
    with serving(app, settings) as url:
        started(app, 2)
        stuck = timed(lambda: ask(url, ENDLESS, {"X-Forwarded-For": "203.0.113.1"}))
        busy_worker(app)
        other, seconds = latency(lambda: ask(url, DISEASES, {"X-Forwarded-For": "203.0.113.2"}))
        stuck.result()
    if apart:  # the proxy on 127.0.0.1 forwards two clients: the second finds the other worker free
        assert other.status_code == 200 and seconds < 1.0, (other.text, seconds)
    else:  # the header of a peer that is no configured proxy is ignored: one client, whose share is full
        assert other.status_code == 503 and "your share" in other.text, other.text


def test_a_proxy_is_named_by_its_address(bio_kb):  # noqa: F811
    from kqe_rdf.core.errors import KqeError

    for proxies in ("proxy.example", "*", "127.0.0.1, 10.0.0.0/40"):
        with pytest.raises(KqeError, match="server_trusted_proxies"):
            create_app(bio_kb, Settings(server_trusted_proxies=proxies))
