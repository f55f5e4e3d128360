"""One suite, three backends: the KB with its embedded Oxigraph store, and the same KB with its triples in a
remote SPARQL 1.1 server and its indexes local — `oxigraph serve` loaded with a dump of the store, and OpenLink
Virtuoso (Debian's virtuoso-opensource) loaded with the same dump through its bulk loader.

Every test runs on each and must give the same answers. Without Virtuoso installed its tests are skipped (and
fail under CI, which installs it).
"""

from __future__ import annotations

import contextlib
import dataclasses
import shutil

import pytest
from pyoxigraph import RdfFormat
from starlette.testclient import TestClient

from support.fixtures_kb import bio_kb, names  # noqa: F401 - fixtures
from kqe_rdf.core.config import Settings
from kqe_rdf.core.errors import KqeError
from kqe_rdf.kb.knowledge_base import KnowledgeBase
from kqe_rdf.methods.registry import pipeline
from kqe_rdf.service.app import create_app
from kqe_rdf.kb.store import RemoteStore
from support.live_servers import oxigraph_server, virtuoso_server

pytestmark = pytest.mark.slow  # servers, subprocesses or big inputs: not in `make test-quick`

ENGINES = {"oxigraph": lambda folder, dump: oxigraph_server(folder, dump, "kb.nq", union=True),
           "virtuoso": lambda folder, dump: virtuoso_server(folder, dump, "kb.nq")}


@pytest.fixture(scope="module")
def engines(bio_kb, tmp_path_factory):  # noqa: F811
    """``engines(name)``: the query URL of that engine, started on first use with a dump of the KB's store."""
    dump = bio_kb.store.dump(format=RdfFormat.N_QUADS)
    with contextlib.ExitStack() as running:
        urls: dict[str, str] = {}

        def url(name: str) -> str:
            if name not in urls:
                urls[name] = running.enter_context(ENGINES[name](tmp_path_factory.mktemp(f"remote-{name}"), dump))
            return urls[name]

        yield url


@pytest.fixture(scope="module", params=list(ENGINES))
def remote_url(request, engines):
    return engines(request.param)


@pytest.fixture(scope="module", params=["embedded", *ENGINES])
def backend(request, bio_kb):  # noqa: F811
    """The tiny HPO KB opened on each backend (a fresh KnowledgeBase object, so nothing is shared)."""
    if request.param == "embedded":
        return KnowledgeBase.open(bio_kb.path)
    kb = KnowledgeBase.open(bio_kb.path, Settings(store_endpoint=request.getfixturevalue("engines")(request.param)))
    assert isinstance(kb.store, RemoteStore)
    return kb


def test_schema_and_counts_come_from_the_store(backend, bio_kb):  # noqa: F811
    assert sorted(backend.schema.classes) == sorted(bio_kb.schema.classes)
    assert backend.info()["types"] == bio_kb.info()["types"]


def test_sparql_with_prefixes_and_identifiers(backend):
    rows = backend.query("SELECT ?name WHERE { ?d a bio:Disease ; rdfs:label ?name } ORDER BY ?name")
    assert [r["name"].value for r in rows] == ["Focal epilepsy type 1", "Frontal bossing syndrome",
                                               "Generalized epilepsy with forehead anomaly"]
    assert len(backend.resolve_identifiers(["OMIM:100001", "HP:0001250", "nope"])) == 2


@pytest.mark.parametrize("method", ["bm25", "4step-offline"])
def test_search_methods_give_the_same_ranking(backend, bio_kb, method):  # noqa: F811
    text = "Which disease has Seizure?"
    expected = names(bio_kb, pipeline(method, bio_kb, Settings(), 5, ["Disease"]).search(text))
    assert names(backend, pipeline(method, backend, backend.settings, 5, ["Disease"]).search(text)) == expected


def test_the_endpoint_serves_search_inside_sparql_from_either_backend(backend):
    query = """SELECT ?name WHERE {
        SERVICE <urn:kqe:search> { ?d kqe:query "epilepsy" ; kqe:type bio:Disease }
        ?d bio:hasPhenotype/rdfs:label "High forehead" ; rdfs:label ?name }"""
    with TestClient(create_app(backend, backend.settings)) as client:
        response = client.get("/sparql", params={"query": query})
        assert [b["name"]["value"] for b in response.json()["results"]["bindings"]] == [
            "Generalized epilepsy with forehead anomaly"]
        graph = client.get("/sparql", params={"query": "CONSTRUCT WHERE { ?d a bio:Disease }", "format": "nt"})
        assert graph.text.count("\n") == 3
        bad = client.get("/sparql", params={"query": "SELECT ?x WHERE { ?x ?y }"})
        assert bad.status_code == 400


def test_search_functions_need_the_embedded_store(remote_url, bio_kb):  # noqa: F811
    kb = KnowledgeBase.open(bio_kb.path, Settings(store_endpoint=remote_url))
    with TestClient(create_app(kb, kb.settings)) as client:
        response = client.get("/sparql", params={"query": 'SELECT * { ?d a bio:Disease BIND(kqe:bm25(?d, "x") AS ?s) }'})
        assert response.status_code == 400 and "SERVICE <urn:kqe:search>" in response.text


def test_a_remote_store_that_is_down_or_misnamed_is_a_clear_error(bio_kb):  # noqa: F811
    from support.live_servers import free_port

    kb = KnowledgeBase.open(bio_kb.path, Settings(store_endpoint=f"http://127.0.0.1:{free_port()}/query"))
    with pytest.raises(KqeError, match="could not be reached"):
        kb.query("ASK {}")
    with pytest.raises(KqeError, match="store_endpoint"):
        RemoteStore("ftp://example.org/sparql")
    with pytest.raises(KqeError, match="update endpoint"):
        create_app(kb, dataclasses.replace(kb.settings, server_update_token="t"))


def test_a_kb_with_its_store_only_on_the_engine_serves_from_its_local_indexes(remote_url, bio_kb, tmp_path):  # noqa: F811
    """The KB too big for one machine: its folder keeps the indexes, documents and manifest, not the store."""
    local = tmp_path / "kb"
    shutil.copytree(bio_kb.path, local, ignore=shutil.ignore_patterns("store"))
    kb = KnowledgeBase.open(local, Settings(store_endpoint=remote_url))
    text = "Which disease has Seizure?"
    assert names(kb, pipeline("4step-offline", kb, kb.settings, 3, ["Disease"]).search(text)) == \
        names(bio_kb, pipeline("4step-offline", bio_kb, Settings(), 3, ["Disease"]).search(text))
    with TestClient(create_app(kb, kb.settings)) as client:
        response = client.get("/sparql", params={"query": "SELECT (COUNT(*) AS ?n) WHERE { ?d a bio:Disease }"})
        assert response.json()["results"]["bindings"][0]["n"]["value"] == "3"
