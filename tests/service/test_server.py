"""The knowledge service over HTTP: SPARQL 1.1 Protocol, REST, limits, updates, federation, failures.

Protocol tests use starlette's TestClient (the ASGI app in-process); the
concurrency, timeout, federation and allow-list tests go through a real socket
to uvicorn (tests/support/live_servers.py). The KB is the tiny HPO KB of tests/support/fixtures_kb.py.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import socket
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from pyoxigraph import QueryResultsFormat, RdfFormat, parse, parse_query_results
from starlette.testclient import TestClient

from support.fixtures_kb import bio_kb, movie_kb, node  # noqa: F401 - fixtures
from kqe_rdf.core.config import Settings
from kqe_rdf.core.errors import KqeError
from kqe_rdf.kb.knowledge_base import KnowledgeBase
from kqe_rdf.service.app import create_app
from support.live_servers import WD, oxigraph_endpoint, serving  # noqa: F401 - fixture

pytestmark = pytest.mark.slow  # servers, subprocesses or big inputs: not in `make test-quick`

DISEASES = "SELECT ?d ?name WHERE { ?d a bio:Disease ; rdfs:label ?name } ORDER BY ?name"
JSON = "application/sparql-results+json"


@pytest.fixture(scope="module")
def client(bio_kb):  # noqa: F811
    with TestClient(create_app(bio_kb, Settings()), raise_server_exceptions=False) as c:
        yield c


def names_of(response) -> list[str]:
    return [b["name"]["value"] for b in response.json()["results"]["bindings"]]


# ---------------------------------------------------------------- the SPARQL 1.1 Protocol


def test_get_post_form_and_post_body_give_the_same_answer(client):
    by_get = client.get("/sparql", params={"query": DISEASES})
    by_form = client.post("/sparql", data={"query": DISEASES})
    by_body = client.post("/query", content=DISEASES, headers={"Content-Type": "application/sparql-query"})
    assert by_get.status_code == by_form.status_code == by_body.status_code == 200
    assert by_get.headers["content-type"] == JSON
    assert names_of(by_get) == names_of(by_form) == names_of(by_body) == [
        "Focal epilepsy type 1", "Frontal bossing syndrome", "Generalized epilepsy with forehead anomaly"]


@pytest.mark.parametrize("accept, fmt", [
    (JSON, QueryResultsFormat.JSON), ("application/sparql-results+xml", QueryResultsFormat.XML),
    ("text/tab-separated-values", QueryResultsFormat.TSV), ("text/csv", QueryResultsFormat.CSV),
])
def test_select_results_in_every_format_parse_back_to_the_same_rows(client, accept, fmt):
    response = client.get("/sparql", params={"query": DISEASES}, headers={"Accept": accept})
    assert response.status_code == 200 and response.headers["content-type"].startswith(accept)
    if fmt == QueryResultsFormat.CSV:  # CSV loses term types; pyoxigraph reads it back as plain strings
        lines = response.text.split("\r\n")
        assert lines[0] == "d,name" and lines[1].endswith(",Focal epilepsy type 1") and len(lines) == 5
        return
    rows = list(parse_query_results(response.content, format=fmt))
    assert [r["name"].value for r in rows] == ["Focal epilepsy type 1", "Frontal bossing syndrome",
                                               "Generalized epilepsy with forehead anomaly"]


def test_literals_keep_language_datatype_and_awkward_characters(client):
    query = 'SELECT ?a ?b ?c WHERE { BIND("tab\\there, \\"quoted\\"\\nnew line"@en AS ?a) BIND(42 AS ?b) BIND(<urn:x> AS ?c) }'
    for fmt, media in ((QueryResultsFormat.JSON, JSON), (QueryResultsFormat.XML, "application/sparql-results+xml"),
                       (QueryResultsFormat.TSV, "text/tab-separated-values")):
        response = client.get("/sparql", params={"query": query}, headers={"Accept": media})
        [row] = list(parse_query_results(response.content, format=fmt))
        assert (row["a"].value, row["a"].language) == ('tab\there, "quoted"\nnew line', "en")
        assert (row["b"].value, row["b"].datatype.value) == ("42", "http://www.w3.org/2001/XMLSchema#integer")
        assert row["c"].value == "urn:x"


@pytest.mark.parametrize("cap", [
    10000,  # a short answer: pyoxigraph writes the JSON itself
    3,  # as many rows as the cap: too long to be sure it fits, so evaluated again and written row by row
])
def test_json_results_within_the_result_cap_are_whole(bio_kb, cap):  # noqa: F811
    with TestClient(create_app(bio_kb, Settings(server_result_cap=cap))) as capped:
        response = capped.get("/sparql", params={"query": DISEASES}, headers={"Accept": JSON})
    assert response.status_code == 200 and response.headers["content-type"] == JSON
    assert "X-KQE-Truncated" not in response.headers
    assert response.json()["head"]["vars"] == ["d", "name"]
    assert names_of(response) == ["Focal epilepsy type 1", "Frontal bossing syndrome",
                                  "Generalized epilepsy with forehead anomaly"]
    assert {b["d"]["type"] for b in response.json()["results"]["bindings"]} == {"uri"}


def test_ask_in_json_and_xml(client):
    ask = "ASK { ?d rdfs:label 'Focal epilepsy type 1' }"
    assert client.get("/sparql", params={"query": ask}).json() == {"head": {}, "boolean": True}
    xml = client.get("/sparql", params={"query": ask}, headers={"Accept": "application/sparql-results+xml"})
    assert bool(parse_query_results(xml.content, format=QueryResultsFormat.XML)) is True


@pytest.mark.parametrize("accept, fmt", [("text/turtle", RdfFormat.TURTLE), ("application/n-triples", RdfFormat.N_TRIPLES),
                                         ("application/ld+json", RdfFormat.JSON_LD)])
def test_construct_and_describe_negotiate_graph_formats(client, bio_kb, accept, fmt):  # noqa: F811
    construct = "CONSTRUCT { ?d rdfs:label ?n } WHERE { ?d a bio:Disease ; rdfs:label ?n }"
    response = client.get("/sparql", params={"query": construct}, headers={"Accept": accept})
    assert response.status_code == 200 and response.headers["content-type"].startswith(accept)
    assert len(list(parse(response.content, format=fmt))) == 3
    describe = client.get("/sparql", params={"query": f"DESCRIBE <{node(bio_kb, 'OMIM:100001')}>"},
                          headers={"Accept": accept})
    assert len(list(parse(describe.content, format=fmt))) > 3


def test_accept_q_values_and_the_format_parameter_choose_the_format(client):
    response = client.get("/sparql", params={"query": DISEASES},
                          headers={"Accept": "text/csv;q=0.4, application/sparql-results+xml;q=0.9, */*;q=0.1"})
    assert response.headers["content-type"].startswith("application/sparql-results+xml")
    assert client.get("/sparql", params={"query": DISEASES, "format": "tsv"}).text.startswith("?d\t?name\n")


def test_an_unacceptable_format_is_406(client):
    response = client.get("/sparql", params={"query": DISEASES}, headers={"Accept": "image/png"})
    assert response.status_code == 406 and "application/sparql-results+json" in response.text


def test_default_and_named_graph_parameters_choose_the_dataset(client):
    ontology = "https://w3id.org/kqe/graph/ontology"
    count = "SELECT (COUNT(*) AS ?n) WHERE { ?s ?p ?o }"
    every = int(client.get("/sparql", params={"query": count}).json()["results"]["bindings"][0]["n"]["value"])
    only = client.get("/sparql", params={"query": count, "default-graph-uri": ontology})
    in_ontology = int(only.json()["results"]["bindings"][0]["n"]["value"])
    assert 0 < in_ontology < every
    graphs = client.post("/sparql?named-graph-uri=" + ontology, content="SELECT DISTINCT ?g WHERE { GRAPH ?g { ?s ?p ?o } }",
                         headers={"Content-Type": "application/sparql-query"})
    assert [b["g"]["value"] for b in graphs.json()["results"]["bindings"]] == [ontology]


def test_service_description_without_a_query(client):
    response = client.get("/sparql", headers={"Accept": "text/turtle"})
    triples = list(parse(response.content, format=RdfFormat.TURTLE))
    sd = "http://www.w3.org/ns/sparql-service-description#"
    objects = {(t.predicate.value, t.object.value) for t in triples}
    assert (sd + "supportedLanguage", sd + "SPARQL11Query") in objects
    assert (sd + "extensionFunction", "https://w3id.org/kqe/core#bm25") in objects
    assert (sd + "supportedLanguage", sd + "SPARQL11Update") not in objects  # no update token


def test_search_inside_sparql_through_the_endpoint(client):
    query = """SELECT ?d ?score WHERE {
        SERVICE <urn:kqe:search> { ?d kqe:query "forehead" ; kqe:type bio:Disease ; kqe:score ?score }
        FILTER(kqe:bm25(?d, "epilepsy") > 0) }"""
    response = client.get("/sparql", params={"query": query})
    assert response.status_code == 200
    assert len(response.json()["results"]["bindings"]) == 1
    assert json.loads(response.headers["x-kqe-searches"])[0]["query"] == "forehead"


# ---------------------------------------------------------------- errors and limits


@pytest.mark.parametrize("query, status, words", [
    ("SELEC ?x WHERE { ?x ?p ?o }", 400, "did you mean SELECT"),
    ("SELECT ?x WHERE { ?x foo:p ?o }", 400, "unknown prefix 'foo:'"),
    ("SELECT ?x WHERE { SERVICE <http://evil.example/> { ?x ?p ?o } }", 403, "allow-list"),
    ("", 400, "empty SPARQL query"),
])
def test_bad_queries_get_a_readable_message_and_no_traceback(client, query, status, words):
    response = client.get("/sparql", params={"query": query})
    assert response.status_code == status and words in response.text
    assert "Traceback" not in response.text and "File \"" not in response.text


def test_protocol_misuse_is_explained(client):
    wrong_type = client.post("/sparql", content=DISEASES, headers={"Content-Type": "text/plain"})
    assert wrong_type.status_code == 415 and "application/sparql-query" in wrong_type.text
    twice = client.get("/sparql?query=ASK%7B%7D&query=ASK%7B%7D")
    assert twice.status_code == 400 and "exactly one" in twice.text
    both = client.post("/sparql?query=ASK%7B%7D", content="ASK {}", headers={"Content-Type": "application/sparql-query"})
    assert both.status_code == 400
    not_utf8 = client.post("/sparql", content=b"ASK { \xff }", headers={"Content-Type": "application/sparql-query"})
    assert not_utf8.status_code == 400 and "UTF-8" in not_utf8.text
    assert client.delete("/sparql").status_code == 405


def test_oversized_requests_are_413(bio_kb):  # noqa: F811
    app = create_app(bio_kb, Settings(server_max_request_bytes=2048))
    with TestClient(app) as small:
        body = "SELECT * WHERE { ?s ?p ?o } #" + "x" * 4000
        assert small.post("/sparql", content=body, headers={"Content-Type": "application/sparql-query"}).status_code == 413
        assert small.get("/sparql", params={"query": body}).status_code == 413
        assert small.post("/search", json={"q": "x" * 4000}).status_code == 413


def test_results_over_the_cap_are_cut_and_say_so(bio_kb):  # noqa: F811
    with TestClient(create_app(bio_kb, Settings(server_result_cap=2))) as capped:
        response = capped.get("/sparql", params={"query": DISEASES})
        assert len(response.json()["results"]["bindings"]) == 2
        assert "server_result_cap=2" in response.headers["x-kqe-truncated"]
        graph = capped.get("/sparql", params={"query": "CONSTRUCT WHERE { ?s ?p ?o }", "format": "nt"})
        assert len(list(parse(graph.content, format=RdfFormat.N_TRIPLES))) == 2


def test_a_cut_result_says_so_in_its_body(bio_kb):  # noqa: F811
    """A client that reads no headers still sees the cut: a head link (and "truncated") in JSON, a link in XML,
    a comment first in Turtle; a whole result has neither."""
    with TestClient(create_app(bio_kb, Settings(server_result_cap=2))) as capped:
        cut = capped.get("/sparql", params={"query": DISEASES}).json()
        assert cut["truncated"] is True and cut["head"]["link"] == ["urn:kqe:truncated?server_result_cap=2"]
        xml = capped.get("/sparql", params={"query": DISEASES, "format": "xml"}).text
        assert '<link href="urn:kqe:truncated?server_result_cap=2"/>' in xml
        assert len(list(parse_query_results(xml.encode(), format=QueryResultsFormat.XML))) == 2
        turtle = capped.get("/sparql", params={"query": "CONSTRUCT WHERE { ?s ?p ?o }", "format": "turtle"}).text
        assert turtle.startswith("# results cut at server_result_cap=2\n")
        whole = capped.get("/sparql", params={"query": DISEASES + " LIMIT 2"}).json()
        assert "truncated" not in whole and "link" not in whole["head"]


@pytest.mark.parametrize("params, accept, fmt", [
    ({"format": "xml"}, "application/rdf+xml", RdfFormat.RDF_XML),   # SPARQLWrapper's default for a graph
    ({"format": "json"}, "application/ld+json", RdfFormat.JSON_LD),
    ({"output": "turtle"}, "text/turtle", RdfFormat.TURTLE),
    ({"format": "application/n-triples"}, "application/n-triples", RdfFormat.N_TRIPLES),
    ({}, "application/n-quads", RdfFormat.N_QUADS), ({}, "application/trig", RdfFormat.TRIG),
    ({}, "application/json", RdfFormat.JSON_LD), ({}, "application/xml", RdfFormat.RDF_XML),
])
def test_graph_results_in_the_formats_oxigraph_serve_offers(client, params, accept, fmt):
    construct = "CONSTRUCT { ?d rdfs:label ?n } WHERE { ?d a bio:Disease ; rdfs:label ?n }"
    response = client.get("/sparql", params={"query": construct, **params},
                          headers={} if params else {"Accept": accept})
    assert response.status_code == 200 and response.headers["content-type"].startswith(accept)
    assert len(list(parse(response.content, format=fmt))) == 3


def test_select_as_text_plain_and_ask_as_csv_are_written_as_oxigraph_writes_them(client):
    response = client.get("/sparql", params={"query": DISEASES}, headers={"Accept": "text/plain"})
    assert response.status_code == 200 and response.text.startswith("d,name\r\n")
    ask = "ASK { ?d rdfs:label 'Focal epilepsy type 1' }"
    assert client.get("/sparql", params={"query": ask, "format": "csv"}).text == "true"
    assert client.get("/sparql", params={"query": ask, "format": "tsv"}).text == "true"
    for selected in ("xml", "json"):  # format= picks the results format for solutions
        response = client.get("/sparql", params={"query": DISEASES, "format": selected})
        assert response.headers["content-type"].startswith(f"application/sparql-results+{selected}")


def test_relative_iris_resolve_against_the_endpoint_url_or_the_configured_base(client, bio_kb):  # noqa: F811
    query = "SELECT ?x WHERE { BIND(<thing> AS ?x) }"
    response = client.get("/sparql", params={"query": query})
    assert response.json()["results"]["bindings"][0]["x"]["value"] == "http://testserver/thing"
    with TestClient(create_app(bio_kb, Settings(server_base_iri="http://example.org/kb/"))) as based:
        response = based.get("/sparql", params={"query": query})
        assert response.json()["results"]["bindings"][0]["x"]["value"] == "http://example.org/kb/thing"
    with pytest.raises(KqeError, match="server_base_iri must be an absolute IRI"):
        create_app(bio_kb, Settings(server_base_iri="not an iri"))


def test_the_default_graph_is_every_graph_unless_the_union_is_off(client, bio_kb):  # noqa: F811
    count = "SELECT (COUNT(*) AS ?n) WHERE { ?s ?p ?o }"

    def n(c) -> int:
        return int(c.get("/sparql", params={"query": count}).json()["results"]["bindings"][0]["n"]["value"])

    with TestClient(create_app(bio_kb, Settings(server_union_default_graph=False))) as alone:
        assert n(alone) < n(client)  # the KB's named graphs are not in the store's default graph
        description = alone.get("/sparql", headers={"Accept": "application/n-triples"}).text
        assert "UnionDefaultGraph" not in description
    assert "UnionDefaultGraph" in client.get("/sparql", headers={"Accept": "application/n-triples"}).text


def test_the_query_dataset_clause_is_honoured(client):
    assert client.get("/sparql", params={"query": "ASK FROM <urn:nothing> { ?s ?p ?o }"}).json()["boolean"] is False
    ontology = "https://w3id.org/kqe/graph/ontology"
    count = "SELECT (COUNT(*) AS ?n) {FROM} WHERE {{ ?s ?p ?o }}"
    every = client.get("/sparql", params={"query": count.format(FROM="")}).json()
    only = client.get("/sparql", params={"query": count.format(FROM=f"FROM <{ontology}>")}).json()
    assert 0 < int(only["results"]["bindings"][0]["n"]["value"]) < int(every["results"]["bindings"][0]["n"]["value"])


def test_a_bug_is_500_without_details(client, monkeypatch):
    import kqe_rdf.service.app

    def broken(settings):
        raise ValueError("secret internal detail")

    monkeypatch.setattr(kqe_rdf.service.app, "openapi_description", broken)
    response = client.get("/openapi.json")
    assert response.status_code == 500 and "secret" not in response.text and "server log" in response.json()["error"]


# ---------------------------------------------------------------- REST


def test_search_returns_results_with_provenance(client, bio_kb):  # noqa: F811
    response = client.get("/search", params={"q": "forehead", "method": "bm25", "type": "Disease", "k": 5})
    data = response.json()
    assert [r["id"] for r in data["results"]] == [bio_kb.document(i).identifier for i, _ in
                                                  bio_kb.text_index.search("forehead", 5,
                                                                           sorted(bio_kb.resolve_types(["Disease"])))]
    assert data["provenance"]["pipeline"] == "BM25(k=5)" and data["results"][0]["score"] > 0


def test_hybrid_and_4step_search_by_json_post(client):
    hybrid = client.post("/search", json={"q": "seizures", "method": "hybrid", "k": 3}).json()
    assert len(hybrid["results"]) == 3 and "BM25" in hybrid["provenance"]["pipeline"]
    fourstep = client.post("/search", json={"q": "Which disease has Seizure?", "method": "4step-offline"}).json()
    explain = fourstep["provenance"]["explain"]
    assert explain["sparql"].lstrip().startswith(("SELECT", "PREFIX")) and explain["triplets"]["triplets"]
    assert fourstep["results"][0]["name"] in ("Focal epilepsy type 1", "Generalized epilepsy with forehead anomaly")


@pytest.mark.parametrize("params, words", [
    ({}, "missing parameter 'q'"), ({"q": "x", "method": "magic"}, "no retrieval method 'magic'"),
    ({"q": "x", "k": "ten"}, "whole number"), ({"q": "x", "k": "0"}, "between 1 and 1000"),
    ({"q": "   "}, "empty"),
])
def test_search_input_errors_are_400_json(client, params, words):
    response = client.get("/search", params=params)
    assert response.status_code == 400 and words in response.json()["error"]


def test_bad_json_body_is_400(client):
    response = client.post("/search", content=b"{not json", headers={"Content-Type": "application/json"})
    assert response.status_code == 400 and "JSON" in response.json()["error"]


def test_triplets_shows_the_reading_and_its_sparql(client):
    data = client.get("/triplets", params={"q": "Which disease has Seizure?", "strict": "true"}).json()
    assert data["triplets"]["triplets"] and data["linked"] and "SELECT" in data["sparql"]


def test_expand_returns_the_expansion_and_the_knowledge_it_came_from(client, bio_kb):  # noqa: F811
    data = client.get("/expand", params={"q": "Which disease has Seizure?", "method": "kar-offline"}).json()
    assert data["method"] == "kar-offline" and data["expanded_query"].startswith("Which disease has Seizure?")
    assert len(data["expanded_query"]) > len(data["query"])
    assert node(bio_kb, "HP:0001250") in json.dumps(data["entities"])  # Seizure, found in the query
    assert data["neighbours"] and all("relation" in n and "score" in n for n in data["neighbours"])


def test_expand_without_an_llm_says_which_methods_run_offline(client):
    response = client.get("/expand", params={"q": "seizures", "method": "hyde"})
    assert response.status_code == 400 and "needs an LLM" in response.json()["error"]
    assert "kar-offline" in response.json()["error"]


DISEASE_NAMES = {"Focal epilepsy type 1", "Frontal bossing syndrome", "Generalized epilepsy with forehead anomaly"}


def test_answer_returns_the_answer_with_the_evidence_it_cites(client):
    data = client.post("/answer", json={"q": "Which disease has Seizure?", "source": ["kg"]}).json()
    assert data["method"] == "4step-offline (grounded reading)" and data["sources"] == ["kg"] and data["intent"]
    assert data["answer"] in DISEASE_NAMES
    assert data["evidence"] and all(e["text"] for e in data["evidence"])
    assert all(data["answer"] in e["text"] for e in data["evidence"])
    assert data["path"]["relations"] == ["has phenotype"] and data["path"]["facts"]


def test_answer_follows_the_phenotype_hierarchy_and_negation(client, bio_kb):  # noqa: F811
    """The grounded reading follows "is a" below Seizure; the fact that names Seizure directly (Frontal bossing
    syndrome *lacks* it), which the evidence reader used to pick, answers nothing."""
    data = client.get("/answer", params={"q": "Which disease has Seizure?"}).json()
    assert data["answer"] in ("Focal epilepsy type 1", "Generalized epilepsy with forehead anomaly")
    assert data["evidence"][0]["origin"]["term"] == node(bio_kb, "HP:0001250")  # Seizure, matched by a subclass


def test_answer_input_errors_are_400(client):
    assert "unknown evidence source" in client.get("/answer", params={"q": "x", "source": "web"}).json()["error"]
    assert client.get("/answer", params={"q": "  "}).status_code == 400


def test_openapi_describes_the_rest_routes(client):
    spec = client.get("/openapi.json").json()
    assert spec["openapi"].startswith("3.") and {"/search", "/triplets", "/expand", "/answer"} <= set(spec["paths"])
    methods = {p["name"]: p["schema"].get("enum") for p in spec["paths"]["/search"]["get"]["parameters"]}["method"]
    assert {"bm25", "hybrid", "4step-offline", "kar-offline"} <= set(methods)  # the registry's names


def test_web_page_and_static_files_are_served(client):
    page = client.get("/")
    assert page.status_code == 200 and 'id="search-form"' in page.text
    assert client.get("/static/app.js").status_code == 200


def test_cors_is_off_by_default_and_on_when_configured(client, bio_kb):  # noqa: F811
    origin = {"Origin": "https://other.example"}
    assert "access-control-allow-origin" not in client.get("/health", headers=origin).headers
    with TestClient(create_app(bio_kb, Settings(server_cors_origins="https://other.example"))) as open_client:
        allowed = open_client.get("/health", headers=origin)
        assert allowed.headers["access-control-allow-origin"] == "https://other.example"


# ---------------------------------------------------------------- updates


def test_updates_are_off_without_a_token(client):
    response = client.post("/update", content="INSERT DATA { <urn:a> <urn:b> <urn:c> }",
                           headers={"Content-Type": "application/sparql-update"})
    assert response.status_code == 403 and "update token" in response.text


def test_updates_need_the_token_and_then_change_the_store(bio_kb, tmp_path):  # noqa: F811
    shutil.copytree(bio_kb.path, tmp_path / "kb")
    kb = KnowledgeBase.open(tmp_path / "kb")
    update = {"Content-Type": "application/sparql-update"}
    insert = 'INSERT DATA { <urn:kqe:test> rdfs:label "added" }'
    with TestClient(create_app(kb, Settings(server_update_token="s3cret"))) as writer:
        assert writer.post("/update", content=insert, headers=update).status_code == 401
        wrong = {**update, "Authorization": "Bearer nope"}
        assert writer.post("/update", content=insert, headers=wrong).status_code == 401
        good = {**update, "Authorization": "Bearer s3cret"}
        assert writer.post("/update", content=insert, headers=good).status_code == 204
        ask = writer.get("/sparql", params={"query": 'ASK { <urn:kqe:test> rdfs:label "added" }'})
        assert ask.json()["boolean"] is True
        relative = writer.post("/update", content="INSERT DATA { <s> <p> 'o1', 'o2' }", headers=good)
        assert relative.status_code == 204  # resolved against the endpoint's URL
        ask = writer.get("/sparql", params={"query": "ASK { <http://testserver/s> <http://testserver/p> 'o2' }"})
        assert ask.json()["boolean"] is True
        bad = writer.post("/update", content="INSERT DATA { broken", headers=good)
        assert bad.status_code == 400 and "syntax" in bad.text
        ssrf = writer.post("/update", headers=good,
                           content="INSERT { ?s ?p ?o } WHERE { SERVICE <http://evil.example/> { ?s ?p ?o } }")
        assert ssrf.status_code == 403


# ---------------------------------------------------------------- real sockets: concurrency, timeouts, federation


def test_concurrent_clients_get_consistent_answers_and_the_store_is_intact(bio_kb):  # noqa: F811
    count = "SELECT (COUNT(*) AS ?n) WHERE { ?s ?p ?o }"
    with serving(create_app(bio_kb, Settings())) as url:
        before = httpx.get(url + "/sparql", params={"query": count}).json()

        def work(i: int) -> tuple[int, list[str]]:
            with httpx.Client(base_url=url, timeout=60) as http:
                if i % 3 == 0:
                    r = http.get("/search", params={"q": "seizure", "k": 3})
                    return r.status_code, [x["id"] for x in r.json()["results"]]
                if i % 3 == 1:
                    r = http.get("/sparql", params={"query": "SELEC broken"})
                    return r.status_code, []
                r = http.post("/sparql", data={"query": DISEASES})
                return r.status_code, names_of(r)

        with ThreadPoolExecutor(8) as pool:
            outcomes = list(pool.map(work, range(48)))
        assert {status for i, (status, _) in enumerate(outcomes) if i % 3 != 1} == {200}
        assert {status for i, (status, _) in enumerate(outcomes) if i % 3 == 1} == {400}
        assert len({tuple(rows) for i, (_, rows) in enumerate(outcomes) if i % 3 == 2}) == 1
        assert httpx.get(url + "/sparql", params={"query": count}).json() == before


def slow_query(values: int = 300, aggregate: bool = True) -> str:
    """A query whose cost is set by its own VALUES (values³ rows), whatever the KB holds."""
    numbers = " ".join(map(str, range(values)))
    head = "SELECT (COUNT(*) AS ?n)" if aggregate else "SELECT ?a ?b ?c"
    return f"{head} WHERE {{ VALUES ?a {{ {numbers} }} VALUES ?b {{ {numbers} }} VALUES ?c {{ {numbers} }} }}"


def test_a_query_past_the_timeout_gets_503_and_the_server_keeps_answering(bio_kb):  # noqa: F811
    settings = Settings(server_query_timeout=0.5, server_query_slots=1, server_result_cap=10**8)
    with serving(create_app(bio_kb, settings)) as url:
        slow = httpx.get(url + "/sparql", params={"query": slow_query(aggregate=False)}, timeout=30)
        assert slow.status_code == 503 and "time" in slow.text and slow.headers["retry-after"]
        # Rows are streamed with a deadline check, so the one worker is free again for the next client.
        assert httpx.get(url + "/sparql", params={"query": DISEASES}, timeout=30).status_code == 200
        timed_out = httpx.get(url + "/sparql", params={"query": slow_query(300)}, timeout=30)  # ~2.5 s of work
        assert timed_out.status_code == 503


def test_federated_service_to_an_allowed_endpoint_joins_remote_data(bio_kb, oxigraph_endpoint):  # noqa: F811
    query = f"""SELECT ?name ?item WHERE {{
        ?d a bio:Disease ; rdfs:label ?name .
        SERVICE <{oxigraph_endpoint}> {{ ?item rdfs:label ?label }}
        FILTER(STR(?label) = ?name) }}"""
    settings = Settings(server_service_allow=oxigraph_endpoint)
    with serving(create_app(bio_kb, settings)) as url:
        response = httpx.get(url + "/sparql", params={"query": query}, timeout=60)
        assert response.status_code == 200, response.text
        found = {(b["name"]["value"], b["item"]["value"]) for b in response.json()["results"]["bindings"]}
        assert found == {("Focal epilepsy type 1", WD + "Q900001"),
                         ("Generalized epilepsy with forehead anomaly", WD + "Q900003")}


def test_service_to_a_host_not_allowed_is_refused_before_any_connection(bio_kb, oxigraph_endpoint):  # noqa: F811
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    listener.settimeout(0.5)
    target = f"http://127.0.0.1:{listener.getsockname()[1]}/sparql"
    settings = Settings(server_service_allow=oxigraph_endpoint)
    try:
        with serving(create_app(bio_kb, settings)) as url:
            response = httpx.get(url + "/sparql", params={"query": f"SELECT * {{ SERVICE <{target}> {{ ?s ?p ?o }} }}"})
            assert response.status_code == 403 and "allow-list" in response.text
        with pytest.raises(TimeoutError):
            listener.accept()  # nobody called the forbidden host
    finally:
        listener.close()


def test_invalid_server_settings_are_refused(bio_kb):  # noqa: F811
    from kqe_rdf.core.errors import KqeError

    with pytest.raises(KqeError, match="server_query_timeout"):
        create_app(bio_kb, dataclasses.replace(Settings(), server_query_timeout=0))


def test_kqe_rdf_serve_answers_and_shuts_down_gracefully_on_sigterm(bio_kb):  # noqa: F811
    import signal
    import subprocess
    import sys
    import time

    from support.live_servers import free_port

    port = free_port()
    process = subprocess.Popen([sys.executable, "-m", "kqe_rdf", "serve", "--kb", str(bio_kb.path), "--port", str(port)],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                response = httpx.get(f"http://127.0.0.1:{port}/sparql", params={"query": DISEASES})
                break
            except httpx.HTTPError:
                assert process.poll() is None and time.monotonic() < deadline, process.stdout.read().decode()
                time.sleep(0.2)
        assert response.status_code == 200 and len(names_of(response)) == 3
        process.send_signal(signal.SIGTERM)
        # uvicorn finishes open requests and the lifespan, then re-raises the signal it caught (status -15).
        assert process.wait(30) in (0, -signal.SIGTERM)
        log = process.stdout.read().decode()
        assert "Waiting for application shutdown" in log and "Finished server process" in log
    finally:
        if process.poll() is None:
            process.kill()


def test_the_page_forbids_inline_script_and_javascript_urls(client):
    """Issue 49: a Content-Security-Policy on the page (at / and as /static/index.html): scripts from this server's
    files only, so a ``javascript:`` IRI shown as a link, or injected markup, runs nothing."""
    for path in ("/", "/static/index.html"):
        policy = client.get(path).headers["content-security-policy"]
        directives = dict(d.strip().split(" ", 1) for d in policy.split(";"))
        assert directives["script-src"] == "'self'", policy  # no 'unsafe-inline', so no javascript: URL either
        assert directives["object-src"] == "'none'" and directives["base-uri"] == "'none'"
    assert "href = row.iri" not in client.get("/static/app.js").text  # the search results link http(s) IRIs only


def test_search_marks_the_hits_a_structural_method_topped_up(client):
    params = {"q": "Which disease has Seizure?", "method": "4step-offline", "type": "Disease", "k": 10}
    body = client.get("/search", params=params).json()
    topped = body["provenance"]["explain"]["topped_up"]
    shown = len(body["results"])
    assert topped > 0 and [r["filler"] for r in body["results"]] == [False] * (shown - topped) + [True] * topped
    plain = client.get("/search", params={**params, "method": "bm25"}).json()
    assert all("filler" not in r for r in plain["results"])


def test_health_offers_examples_made_from_the_kb(movie_kb):  # noqa: F811
    with TestClient(create_app(movie_kb, Settings()), raise_server_exceptions=False) as other:
        examples = other.get("/health").json()["examples"]
    assert examples["type"] in ("Movie", "Person") and examples["node"]  # the movie KB's, not the bio KB's
    found = [d for d in movie_kb.documents() if d.name == examples["node"]]
    assert found and any(t.endswith("#" + examples["type"]) for t in found[0].types)
