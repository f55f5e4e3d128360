"""Completion of names (issue 71): ``/complete`` on the tiny HPO KB through the real server and its workers."""

from __future__ import annotations

import pytest
from starlette.testclient import TestClient

from support.fixtures_kb import bio_kb, node  # noqa: F401 - fixtures
from kqe_rdf.core.config import Settings
from kqe_rdf.service.app import create_app

pytestmark = pytest.mark.slow  # a server and its workers: not in `make test-quick`


@pytest.fixture(scope="module")
def client(bio_kb):  # noqa: F811
    with TestClient(create_app(bio_kb, Settings()), raise_server_exceptions=False) as c:
        yield c


def completions(client, **params) -> list[tuple[str, str, str]]:
    response = client.get("/complete", params=params)
    assert response.status_code == 200, response.text
    return [(c["kind"], c["name"], c["how"]) for c in response.json()["completions"]]


def test_a_name_s_start_completes_to_the_nodes_it_starts_then_those_with_a_word_it_starts(client):
    assert completions(client, q="Seiz") == [
        ("node", "Seizure", "prefix"), ("node", "Focal-onset seizure", "word"),
        ("node", "Bilateral tonic-clonic seizure", "word")]
    assert completions(client, q="seizure")[0] == ("node", "Seizure", "exact")
    assert completions(client, q="Seiz", limit=1) == [("node", "Seizure", "prefix")]


def test_a_node_is_completed_by_its_alias_too_and_comes_once(client, bio_kb):  # noqa: F811
    response = client.get("/complete", params={"q": "epileptic s"}).json()["completions"]
    assert [(c["name"], c["matched"], c["iri"]) for c in response] == [
        ("Seizure", "epileptic seizure", node(bio_kb, "HP:0001250"))]


def test_text_inside_a_name_completes_after_the_names_it_starts(client):
    assert completions(client, q="ure") == [
        ("node", "Seizure", "contains"), ("node", "Focal-onset seizure", "contains"),
        ("node", "Bilateral tonic-clonic seizure", "contains")]


def test_relations_and_classes_complete_by_name_and_by_prefixed_name(client):
    assert completions(client, q="has")[:2] == [("relation", "has phenotype", "prefix"),
                                                ("relation", "has mode of inheritance", "prefix")]
    found = client.get("/complete", params={"q": "bio:hasPh"}).json()["completions"]
    assert [(c["prefixed"], c["how"]) for c in found] == [("bio:hasPhenotype", "iri")]
    assert completions(client, q="Dis")[0] == ("class", "disease", "prefix")


def test_a_class_keeps_the_nodes_of_that_class(client):
    assert completions(client, q="epi", **{"class": "Disease"}) == [
        ("node", "Focal epilepsy type 1", "word"), ("node", "Generalized epilepsy with forehead anomaly", "word")]
    assert completions(client, q="seiz", **{"class": "Disease"}) == []
    response = client.get("/complete", params={"q": "seiz", "class": "Spaceship"})
    assert response.status_code == 400 and "parameter 'class'" in response.json()["error"]


def test_the_relations_of_a_node_are_those_leaving_it_counted(client, bio_kb):  # noqa: F811
    disease = node(bio_kb, "OMIM:100003")
    every = client.get("/complete", params={"q": "", "relations_of": disease}).json()["completions"]
    assert {c["kind"] for c in every} == {"relation"}
    phenotypes = next(c for c in every if c["prefixed"] == "bio:hasPhenotype")
    assert phenotypes["count"] >= 2
    assert completions(client, q="phen", relations_of=disease) == [("relation", "has phenotype", "word")]
    seizure = node(bio_kb, "HP:0001250")
    assert completions(client, q="phen", relations_of=seizure) == []  # a phenotype has no phenotypes
    response = client.get("/complete", params={"q": "", "relations_of": "not an iri"})
    assert response.status_code == 400 and "relations_of" in response.json()["error"]


def test_an_iri_s_start_completes_to_the_nodes_it_starts_and_a_name_after_a_bracket_to_its_nodes(
        client, bio_kb):  # noqa: F811
    seizure = node(bio_kb, "HP:0001250")
    found = client.get("/complete", params={"q": "<" + seizure[:-2]}).json()["completions"]
    assert seizure in [c["iri"] for c in found] and all(c["iri"].startswith(seizure[:-2]) for c in found)
    named = client.get("/complete", params={"q": "<seiz"}).json()["completions"]
    assert named[0]["iri"] == seizure and named[0]["name"] == "Seizure"


@pytest.mark.parametrize("params, message", [
    ({"q": ""}, "parameter 'q' is empty"),
    ({"q": "   "}, "parameter 'q' is empty"),
    ({}, "parameter 'q' is empty"),
    ({"q": "s" * 301}, "at most 300"),
    ({"q": "seizure " * 6000}, "48,000 characters long"),
    ({"q": "seiz", "limit": "0"}, "parameter 'limit' must be between 1 and 100"),
    ({"q": "seiz", "limit": "1000"}, "parameter 'limit' must be between 1 and 100"),
    ({"q": "seiz", "limit": "ten"}, "parameter 'limit' must be a whole number"),
    ({"q": "seiz", "kind": "planet"}, "parameter 'kind'"),
])
def test_an_empty_or_huge_request_gets_a_clear_400(client, params, message):
    response = client.get("/complete", params=params)
    assert response.status_code == 400
    assert message in response.json()["error"]
