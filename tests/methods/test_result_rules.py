"""What the results of every registered method obey, whatever ranked them (issue 40).

Each method of :data:`kqe_rdf.methods.registry.METHODS` runs on the tiny movie KB of ``fixtures_kb`` (the ones
that ask an LLM ask the scripted chat server of ``chat_server.py``, which answers every prompt with a film's
name, whatever it asked): every hit names its node, through every way of running a method. On the tiny disease
KB, a request that is a node's alias puts that node first with every method, and the root of the phenotype
hierarchy ("All") is never a result.
"""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from starlette.testclient import TestClient

from support.chat_server import chat_server  # noqa: F401 - fixture
from support.fixtures_kb import bio_kb, movie_kb, node  # noqa: F401 - fixtures
from kqe_rdf.cli import cli
from kqe_rdf.core.config import Settings
from kqe_rdf.methods.registry import METHODS, pipeline
from kqe_rdf.methods.retrieval import Batch, Query
from kqe_rdf.service.app import create_app

QUERIES = [Query("q1", "films directed by William Dieterle"), Query("q2", "Ridley Scott science fiction")]


@pytest.fixture
def settings(chat_server):  # noqa: F811
    """The LLM on the test's scripted server, which answers every prompt "Kismet"."""
    chat_server.script(*(lambda request: "Kismet" for _ in range(200)))
    return Settings(llm_base_url=chat_server.url, llm_model="scripted", llm_cache="off", llm_timeout=2.0,
                    llm_max_retries=0, llm_backoff=0.01)


def named(hits) -> bool:
    return bool(hits) and all(h.name for h in hits)


@pytest.mark.parametrize("method", METHODS)
def test_every_method_names_every_hit_whichever_way_it_runs(movie_kb, settings, method):
    stage = pipeline(method, movie_kb, settings, 3)

    batch = stage.transform(Batch(list(QUERIES)))
    assert all(named(batch.ranked(q.qid)) for q in QUERIES)
    assert named(stage.run(QUERIES[0].text).ranked("q")) and named(stage.search(QUERIES[1].text))
    assert all(batch.to_dataframe()["name"])
    assert {h.name for h in batch.ranked("q1")} <= {movie_kb.name(h.iri) for h in batch.ranked("q1")}


@pytest.mark.parametrize("method", ["bm25", "4step-offline", "kar-offline", "prf-docs", "lkqe-offline"])
def test_the_command_and_the_rest_api_name_every_result(movie_kb, method):
    out = CliRunner().invoke(cli, ["search", QUERIES[0].text, "--kb", str(movie_kb.path), "-m", method, "--k", "3",
                                   "--json"])
    assert out.exit_code == 0, out.output
    assert all(row["name"] for row in json.loads(out.stdout)["results"])
    with TestClient(create_app(movie_kb, Settings()), raise_server_exceptions=False) as client:
        answer = client.get("/search", params={"q": QUERIES[0].text, "method": method, "k": 3})
    assert answer.status_code == 200 and all(row["name"] for row in answer.json()["results"])


@pytest.mark.parametrize("method", ["bm25", "hybrid", "4step-offline"])
def test_a_request_that_is_a_node_s_alias_puts_that_node_first(bio_kb, method):
    # "Tall forehead" is High forehead's layperson synonym in the fixture's hp.obo.
    top = pipeline(method, bio_kb, Settings(), 5, ["Phenotype"]).search("tall forehead")

    assert top[0].iri == node(bio_kb, "HP:0000348") and top[0].name == "High forehead"
    assert [h.rank for h in top] == list(range(1, len(top) + 1))
    assert top[0].score > top[1].score and all(a.score >= b.score for a, b in zip(top, top[1:]))


def test_the_namesake_rule_keeps_to_the_requested_types(bio_kb):
    # "Focal epilepsy type 1" is a disease: a search for phenotypes does not put it first.
    top = pipeline("bm25", bio_kb, Settings(), 5, ["Phenotype"]).search("Focal epilepsy type 1")
    assert all(h.iri != node(bio_kb, "OMIM:100001") for h in top)


@pytest.mark.parametrize("method", METHODS)
def test_no_method_returns_the_root_of_a_hierarchy(bio_kb, settings, method):
    root = node(bio_kb, "HP:0000001")  # "All", above every phenotype of the fixture
    assert root in bio_kb.hierarchies.roots() and node(bio_kb, "HP:0000118") not in bio_kb.hierarchies.roots()
    for text in ("all", "phenotypic abnormality seizure", "abnormality of all"):
        assert root not in [h.iri for h in pipeline(method, bio_kb, settings, 20).search(text)]
