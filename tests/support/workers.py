"""Queries that keep a server's worker busy, and waiting for one: what the tests of the server's workers and
of their sharing between clients have in common."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

DISEASES = "SELECT ?d ?name WHERE { ?d a bio:Disease ; rdfs:label ?name } ORDER BY ?name"


def values(n: int) -> str:
    numbers = " ".join(map(str, range(n)))
    return f"VALUES ?a {{ {numbers} }} VALUES ?b {{ {numbers} }} VALUES ?c {{ {numbers} }}"


#: A billion rows counted: minutes of CPU, and nothing streamed that a deadline check could stop early.
ENDLESS = f"SELECT (COUNT(*) AS ?n) WHERE {{ {values(1000)} }}"
#: 27 million rows sorted at random: gigabytes, fast (the issue's ORDER BY RAND() grew a server by 6 GB).
GREEDY = f"SELECT * WHERE {{ {values(300)} }} ORDER BY RAND() LIMIT 1"


def busy_worker(app, timeout: float = 30) -> int:
    """The pid of the one worker that is running a job, once there is one."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        pids = app.state.workers.pids(busy=True)
        if pids:
            return pids[0]
        time.sleep(0.02)
    raise AssertionError("no worker took the job")


def in_background(fn):
    """Run ``fn()`` on a thread; ``.result()`` joins it."""
    pool = ThreadPoolExecutor(1)
    future = pool.submit(fn)
    pool.shutdown(wait=False)
    return future
