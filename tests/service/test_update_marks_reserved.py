"""Issue 68: the graph the server marks each update in (<urn:kqe:update-commits>) is the server's own. No query or
update may name it (400, one line); an update's own operations cannot reach its mark (the mark is written after
them, into a graph emptied first); after a stopped update the "did it commit?" check gets the store before any
waiting request; a killed server's mark is gone when the next one starts.
"""

from __future__ import annotations

import os
import shutil
import threading
import time

import httpx
import pytest
from pyoxigraph import NamedNode, Store

from support.fixtures_kb import bio_kb  # noqa: F401 - fixture
from kqe_rdf.core.config import Settings
from kqe_rdf.kb.knowledge_base import KnowledgeBase
from kqe_rdf.kb.queries import load, with_values
from kqe_rdf.service.app import create_app
from kqe_rdf.service.jobs import _marked
from support.live_servers import serving
from test_update_commits import HEADERS, TOKEN, big_update, count

pytestmark = pytest.mark.slow  # servers, subprocesses or big inputs: not in `make test-quick`

MARKS = "urn:kqe:update-commits"
QUERY = {"Content-Type": "application/sparql-query", "Accept": "application/sparql-results+json"}
ANY_MARK = "ASK { GRAPH ?g { ?s <https://w3id.org/kqe/core#committed> ?o } }"
MARK_GRAPH_SEEN = f"ASK {{ GRAPH ?g {{ ?s ?p ?o }} FILTER(?g = IRI('{MARKS}')) }}"


@pytest.fixture()
def writable_kb(bio_kb, tmp_path):  # noqa: F811
    folder = tmp_path / "kb"
    shutil.copytree(bio_kb.path, folder)
    return KnowledgeBase.open(folder)


def ask(url: str, text: str) -> bool:
    response = httpx.post(url + "/sparql", content=text.encode(), headers=QUERY, timeout=60)
    assert response.status_code == 200, response.text
    return response.json()["boolean"]


# ---------------------------------------------------------------- item 1: every form that names it is refused

NAMING_QUERIES = [
    f"SELECT * WHERE {{ GRAPH <{MARKS}> {{ ?s ?p ?o }} }}",
    f"SELECT * FROM <{MARKS}> WHERE {{ ?s ?p ?o }}",
    f"SELECT * FROM NAMED <{MARKS}> WHERE {{ GRAPH ?g {{ ?s ?p ?o }} }}",
    f"CONSTRUCT {{ ?s ?p ?o }} WHERE {{ GRAPH <{MARKS}> {{ ?s ?p ?o }} }}",
    "PREFIX k: <urn:kqe:> ASK { GRAPH k:update-commits { ?s ?p ?o } }",
    "PREFIX k: <urn:kqe:> ASK { GRAPH k:update\\-commits { ?s ?p ?o } }",
    "ASK { GRAPH <urn:kqe:update\\u002Dcommits> { ?s ?p ?o } }",
    f"BASE <{MARKS}> ASK {{ GRAPH <> {{ ?s ?p ?o }} }}",
]
NAMING_UPDATES = [
    f"INSERT DATA {{ GRAPH <{MARKS}> {{ <urn:a> <urn:b> <urn:c> }} }}",
    f"DELETE WHERE {{ GRAPH <{MARKS}> {{ ?s ?p ?o }} }}",
    f"INSERT {{ <urn:a> <urn:b> ?o }} USING <{MARKS}> WHERE {{ ?s ?p ?o }}",
    f"INSERT {{ GRAPH <urn:x> {{ ?s ?p ?o }} }} USING NAMED <{MARKS}> WHERE {{ GRAPH ?g {{ ?s ?p ?o }} }}",
    f"WITH <{MARKS}> DELETE {{ ?s ?p ?o }} WHERE {{ ?s ?p ?o }}",
    f"DROP GRAPH <{MARKS}>",
    f"DROP SILENT GRAPH <{MARKS}>",
    f"CLEAR GRAPH <{MARKS}>",
    f"CREATE GRAPH <{MARKS}>",
    f"MOVE <{MARKS}> TO DEFAULT",
    f"COPY DEFAULT TO <{MARKS}>",
    f"ADD <urn:x> TO <{MARKS}>",
    f"LOAD SILENT <http://127.0.0.1:9/x.ttl> INTO GRAPH <{MARKS}>",
    "PREFIX k: <urn:kqe:> CLEAR GRAPH k:update-commits",
]


def test_every_form_that_names_the_mark_graph_is_refused_with_one_line(writable_kb):
    settings = Settings(server_update_token=TOKEN)
    refused = []
    with serving(create_app(writable_kb, settings)) as url:
        for text in NAMING_QUERIES:
            refused.append(httpx.post(url + "/sparql", content=text.encode(), headers=QUERY, timeout=60))
        for name in ("default-graph-uri", "named-graph-uri"):
            refused.append(httpx.get(url + "/sparql", params={"query": "ASK { ?s ?p ?o }", name: MARKS},
                                     headers={"Accept": QUERY["Accept"]}, timeout=60))
        for text in NAMING_UPDATES:
            refused.append(httpx.post(url + "/update", content=text.encode(), headers=HEADERS, timeout=60))
        # The same texts with another graph run: the refusal is about the name, not the form.
        allowed = httpx.post(url + "/update", content=NAMING_UPDATES[0].replace(MARKS, "urn:other").encode(),
                             headers=HEADERS, timeout=60)
        assert allowed.status_code == 204, allowed.text
        assert ask(url, "ASK { GRAPH <urn:other> { <urn:a> <urn:b> <urn:c> } }")
        assert not ask(url, MARK_GRAPH_SEEN)
    for response in refused:
        assert response.status_code == 400, (response.request.content, response.text)
        assert "is the server's own" in response.text and "\n" not in response.text.strip(), response.text


@pytest.mark.parametrize("operation", [
    "DROP ALL", "CLEAR ALL", "DROP NAMED", "CLEAR NAMED", "CLEAR DEFAULT", "DROP DEFAULT",
    "DELETE WHERE { GRAPH ?g { ?s ?p ?o } }",
    "DELETE { GRAPH ?g { ?s ?p ?o } } WHERE { GRAPH ?g { ?s ?p ?o } }",
    # a graph name computed at run time is not refused, and finds nothing to take
    "DELETE { GRAPH ?g { ?s ?p ?o } } WHERE { BIND(IRI(CONCAT('urn:kqe:', 'update-commits')) AS ?g) "
    "GRAPH ?g { ?s ?p ?o } }",
])
def test_an_update_that_names_no_graph_cannot_reach_its_own_mark(operation):
    """The mark is the update's last operation: whatever came before (every graph dropped, cleared, deleted) it is
    there once the transaction commits, as the commit check reads it."""
    store, marker = Store(), "urn:uuid:00000000-0000-4000-8000-000000000001"
    store.update("INSERT DATA { <urn:a> <urn:b> <urn:c> . GRAPH <urn:g> { <urn:a> <urn:b> <urn:d> } }")
    store.update(_marked(operation, marker))
    seen = load("update_commit_seen")
    assert bool(store.query(with_values(seen, update=[NamedNode(marker)])))
    assert not bool(store.query(with_values(seen, update=[NamedNode(marker.replace("01", "02"))])))


def test_what_an_update_writes_into_the_mark_graph_by_a_computed_name_is_dropped_in_its_transaction(writable_kb):
    """A forged mark (or any triple) put there by a computed graph name never shows: the server's operations,
    which come after the client's in the same transaction, empty the graph before marking."""
    forged = ("INSERT { GRAPH ?g { <urn:uuid:forged> <https://w3id.org/kqe/core#committed> true . "
              "<urn:a> <urn:b> <urn:c> } } WHERE { BIND(IRI(CONCAT('urn:kqe:', 'update-commits')) AS ?g) }")
    with serving(create_app(writable_kb, Settings(server_update_token=TOKEN))) as url:
        response = httpx.post(url + "/update", content=forged.encode(), headers=HEADERS, timeout=60)
        assert response.status_code == 204, response.text
        assert not ask(url, MARK_GRAPH_SEEN)
        assert not ask(url, ANY_MARK)


def test_under_the_union_default_graph_clear_default_and_a_dump_show_no_mark(writable_kb):
    settings = Settings(server_update_token=TOKEN, server_union_default_graph=True)
    with serving(create_app(writable_kb, settings)) as url:
        for text in ("INSERT DATA { GRAPH <urn:test:big> { <urn:a> <urn:b> 1 } }", "CLEAR DEFAULT",
                     "INSERT DATA { <urn:a> <urn:b> 2 }"):
            response = httpx.post(url + "/update", content=text.encode(), headers=HEADERS, timeout=60)
            assert response.status_code == 204, response.text
        dump = httpx.post(url + "/sparql", content=b"CONSTRUCT WHERE { ?s ?p ?o }", timeout=60,
                          headers={"Content-Type": "application/sparql-query", "Accept": "application/n-triples"})
        assert dump.status_code == 200 and b"<urn:a>" in dump.content
        assert b"committed" not in dump.content and MARKS.encode() not in dump.content
        graphs = httpx.post(url + "/sparql", content=b"SELECT DISTINCT ?g WHERE { GRAPH ?g { ?s ?p ?o } }",
                            headers=QUERY, timeout=60)
        assert MARKS not in graphs.text and "urn:test:big" in graphs.text
        assert not ask(url, ANY_MARK)


# ---------------------------------------------------------------- item 3: a killed server's mark is gone at start-up


def test_a_restarted_server_shows_no_mark(writable_kb):
    """A server killed between an update's commit and its answer leaves that update's mark in the store (the
    same quad update_commit_mark.ru writes): the next server's first worker removes it before it serves."""
    store = Store(str(writable_kb.path / "store"))
    store.update(_marked("INSERT DATA { GRAPH <urn:test:big> { <urn:a> <urn:b> 1 } }",
                         "urn:uuid:00000000-0000-4000-8000-0000000000aa"))
    assert bool(store.query(ANY_MARK))  # what a killed server leaves
    del store
    with serving(create_app(KnowledgeBase.open(writable_kb.path), Settings(server_update_token=TOKEN))) as url:
        assert not ask(url, ANY_MARK)
        assert not ask(url, MARK_GRAPH_SEEN)
        assert count(url) == 1  # the update itself stays


# ---------------------------------------------------------------- item 2: the commit check before any other writer

RUNS = int(os.environ.get("KQE_TWO_WRITER_RUNS", "20"))
SECOND_WRITERS = [  # each waits while the first update is stopped; each would take the mark first
    "DROP ALL",
    f"CLEAR GRAPH <{MARKS}>",  # refused now; it used to clear the mark
    "DELETE WHERE { GRAPH ?g { ?s ?p ?o } }",
]


def _post(into: dict, key: str, url: str, text: str, headers: dict) -> None:
    into[key] = httpx.post(url, content=text.encode(), headers=headers, timeout=300)


def test_a_stopped_update_is_answered_by_the_store_while_other_writers_wait(writable_kb):
    """The issue's two-writer race, RUNS times (the second writer cycles through SECOND_WRITERS). While the first
    update runs past its deadline, a count and then the second writer arrive and wait; the count runs after the
    commit check and before the second writer (arrival order), so it shows what the first update left. Its answer
    must agree: 204 with all of it there, 503 "not written" with none of it. (Before the fix the waiting requests
    got the fresh worker before the check, and a committed update could be answered "not written".)"""
    # 74³ triples committed after 4-8 s and returned after 20-25 s when measured (issue 49); 14 s falls between
    # on a busy two-core machine too, where 8 s stopped all 20 runs before their commit
    # (and at 0.6 of it, a count that arrived waited past its own deadline once a committed update's log replayed).
    side = int(os.environ.get("KQE_TWO_WRITER_SIDE", "74"))
    timeout = float(os.environ.get("KQE_TWO_WRITER_TIMEOUT", "14"))
    size = side ** 3
    outcomes = []
    with serving(create_app(writable_kb, Settings(server_update_token=TOKEN, server_query_timeout=timeout))) as url:
        attempts = 0
        while len(outcomes) < RUNS:
            run, attempts = len(outcomes), attempts + 1
            assert attempts <= 2 * RUNS, f"the count was answered 'busy' in {attempts - 1 - run} of {attempts - 1} runs"
            second = SECOND_WRITERS[run % len(SECOND_WRITERS)]
            replies: dict = {}
            first = threading.Thread(target=_post, args=(replies, "first", url + "/update",
                                                         big_update(side, f"r{run}"), HEADERS))
            first.start()
            time.sleep(timeout * 0.9)  # late: a waiting request's own deadline must outlast the fresh worker's
            # start, its replay of the committed update's log (seconds for 405,224 triples) and the check
            counting = threading.Thread(target=_post, args=(replies, "count", url + "/sparql",
                                                            "SELECT (COUNT(*) AS ?n) WHERE { GRAPH <urn:test:big> "
                                                            "{ ?s ?p ?o } }", QUERY))
            counting.start()
            time.sleep(0.3)
            _post(replies, "second", url + "/update", second, HEADERS)
            first.join()
            counting.join()
            answer, seen = replies["first"], replies["count"]
            # On a loaded machine the fresh worker's start and log replay can outlast the count's own wait: the
            # server then says so (503 "busy"), which is right, but shows nothing about the first update; run again.
            inconclusive = seen.status_code == 503 and "is busy" in seen.text
            assert inconclusive or seen.status_code == 200, (run, seen.text)
            assert answer.status_code in (204, 503), answer.text
            if not inconclusive:
                held = int(seen.json()["results"]["bindings"][0]["n"]["value"])
                outcomes.append((answer.status_code, held))
                assert held in (0, size), (run, held)
                assert (answer.status_code == 204) == (held == size), (run, second, answer.text, held)
            if answer.status_code == 503:
                assert "not written" in answer.text, answer.text
            assert replies["second"].status_code == (400 if MARKS in second else 204), replies["second"].text
            assert not ask(url, ANY_MARK)
            reset = httpx.post(url + "/update", content=b"DROP SILENT GRAPH <urn:test:big>", headers=HEADERS,
                               timeout=300)
            assert reset.status_code == 204, reset.text
    print("two writers: (answer, triples held) per run:", outcomes)
