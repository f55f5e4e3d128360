"""The SPARQL endpoint's two guards, through the real HTTP server (issue 15, items 1 and 2).

1. SERVICE / LOAD: no form of a call to an endpoint outside the allow-list
   reaches the network. A canary listener on a free loopback port (IPv4 and,
   where the machine has it, IPv6) counts connections; every form below must be
   refused (403, or 400 for a syntax error) with the canary seeing nothing.
2. Size limits: pyoxigraph overflows its native stack (the process dies) on a
   few KB of nesting or long operator chains; a query just over each limit gets
   400 naming the limit, the server keeps answering, and a big but sane query
   still runs.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import socket
import subprocess
import sys
import threading

import httpx
import pytest

from support.fixtures_kb import bio_kb  # noqa: F401 - fixture
from kqe_rdf.core.config import Settings
from kqe_rdf.kb.knowledge_base import KnowledgeBase
from kqe_rdf.service.app import create_app
from kqe_rdf.kb.sparql_guard import check_limits, measure, verify_federation
from support.canary import ALLOWED, QUERY_FORMS, UPDATE_FORMS, Canary, aimed_at, canary, clean_env  # noqa: F401
from support.live_servers import free_port, serving

pytestmark = pytest.mark.slow  # servers, subprocesses or big inputs: not in `make test-quick`

TOKEN = "t0ken"
UPDATE = {"Content-Type": "application/sparql-update", "Authorization": "Bearer " + TOKEN}
DISEASES = "SELECT ?d ?name WHERE { ?d a bio:Disease ; rdfs:label ?name } ORDER BY ?name"


@pytest.fixture(scope="module")
def writable_kb(bio_kb, tmp_path_factory):  # noqa: F811
    folder = tmp_path_factory.mktemp("security") / "kb"
    shutil.copytree(bio_kb.path, folder)
    return KnowledgeBase.open(folder)


@pytest.fixture(scope="module")
def server(writable_kb):
    settings = Settings(server_service_allow=ALLOWED, server_update_token=TOKEN)
    with serving(create_app(writable_kb, settings)) as url:
        yield url


# ---------------------------------------------------------------- item 1: SERVICE and LOAD

@pytest.mark.parametrize("name", list(QUERY_FORMS))
def test_every_form_of_a_service_call_off_the_allow_list_is_refused_before_any_connection(server, canary, name):
    before = canary.connections
    query = aimed_at(QUERY_FORMS[name], canary)
    for response in (httpx.get(server + "/sparql", params={"query": query}, timeout=30),
                     httpx.post(server + "/query", content=query.encode(), timeout=30,
                                headers={"Content-Type": "application/sparql-query"})):
        assert response.status_code in (400, 403), (name, response.status_code, response.text)
        assert "Traceback" not in response.text
    assert canary.connections == before, f"{name}: the forbidden endpoint was contacted"


@pytest.mark.parametrize("name", list(UPDATE_FORMS))
def test_every_form_of_load_or_service_in_an_update_is_refused_before_any_connection(server, canary, name):
    """Refused, or (an update of LOAD SILENT alone) a load that failed silently: never a connection."""
    before = canary.connections
    response = httpx.post(server + "/update", content=aimed_at(UPDATE_FORMS[name], canary).encode(), headers=UPDATE,
                          timeout=30)
    expected = (204,) if name == "LOAD SILENT INTO GRAPH" else (400, 403)
    assert response.status_code in expected, (name, response.status_code, response.text)
    assert canary.connections == before, f"{name}: the forbidden URL was fetched"


@pytest.mark.parametrize("name", ["SILENT glued to a name", "lower-case silent glued", "SERVICE glued to a name"])
def test_oxigraph_itself_splits_a_glued_keyword_and_calls_the_other_endpoint(canary, name):
    """Why the glued forms matter: unguarded, pyoxigraph calls the endpoint behind ``x:``, not the allowed one."""
    import pyoxigraph
    before = canary.connections
    list(pyoxigraph.Store().query(aimed_at(QUERY_FORMS[name], canary)))
    assert canary.connections == before + 1


def test_a_glued_keyword_is_refused_naming_the_token(server, canary):
    response = httpx.get(server + "/sparql", params={"query": aimed_at(QUERY_FORMS["SILENT glued to a name"], canary)})
    assert response.status_code == 403 and "'SILENTx:' begins with the keyword SILENT" in response.text
    # The same prefix names are fine where nothing can be called.
    query = "PREFIX SILENTx: <urn:x:> SELECT * { ?s SILENTx:p ?o } LIMIT 1"
    assert httpx.get(server + "/sparql", params={"query": query}).status_code == 200


def test_a_refusal_says_why(server, canary):
    response = httpx.get(server + "/sparql", params={"query": aimed_at(QUERY_FORMS["prefixed name glued to SERVICE"],
                                                                    canary)})
    assert response.status_code == 403 and "allow-list" in response.text
    response = httpx.get(server + "/sparql", params={"query": aimed_at(QUERY_FORMS["variable endpoint"], canary)})
    assert response.status_code == 403 and "variable" in response.text
    response = httpx.get(server + "/sparql", params={"query": aimed_at(QUERY_FORMS["comment ended by a bare CR"],
                                                                    canary)})
    assert response.status_code == 403 and "not on this server's allow-list" in response.text  # seen as Oxigraph sees it


def test_the_canary_does_see_a_call_to_an_allowed_endpoint(writable_kb, canary):
    """The positive control: the guard lets an allow-listed endpoint through, and the canary notices it."""
    endpoint = f"http://127.0.0.1:{canary.port}/sparql"
    before = canary.connections
    with serving(create_app(writable_kb, Settings(server_service_allow=endpoint))) as url:
        response = httpx.get(url + "/sparql", params={"query": f"SELECT * {{ SERVICE <{endpoint}> {{ ?s ?p ?o }} }}"},
                             timeout=30)
    assert response.status_code == 200, response.text
    assert canary.connections == before + 1


def test_words_service_and_load_in_strings_iris_and_names_are_not_calls(server):
    query = """PREFIX ex: <http://example.org/service/>
        SELECT ?x ?load WHERE { BIND("call the SERVICE <http://127.0.0.1:1/>, then LOAD it" AS ?x)
                                OPTIONAL { ?load ex:download ?payload } }"""
    response = httpx.get(server + "/sparql", params={"query": query}, timeout=30)
    assert response.status_code == 200, response.text
    assert response.json()["results"]["bindings"][0]["x"]["value"].startswith("call the SERVICE")


def test_search_blocks_still_work_beside_the_guard(server):
    query = """SELECT ?d ?score WHERE { SERVICE <urn:kqe:search> { ?d kqe:query "forehead" ; kqe:score ?score } }"""
    response = httpx.get(server + "/sparql", params={"query": query}, timeout=60)
    assert response.status_code == 200, response.text
    assert response.json()["results"]["bindings"]


def test_the_guard_reads_what_the_parser_reads():
    allowed, prefixes = [ALLOWED], {"rdfs": "http://www.w3.org/2000/01/rdf-schema#"}
    # Nothing that could call out: the text goes through unchanged, without parsing.
    text = "SELECT * { ?s rdfs:label ?o }  # a comment"
    assert verify_federation(text, allowed, prefixes).text == text
    # Otherwise the verified text is what runs: escapes decoded, comments blanked (same length).
    verified = verify_federation(f"SELECT * {{ SERVICE <{ALLOWED}> {{ ?s ?p \"caf\\u00e9\" }} }} # SERVICE <x>",
                                 allowed, prefixes)
    assert verified.services == [ALLOWED] and "café" in verified.text and "#" not in verified.text


def test_kqe_rdf_sparql_applies_the_same_rule(bio_kb, canary):  # noqa: F811
    query = aimed_at(QUERY_FORMS["prefixed name glued to SERVICE"], canary)
    before = canary.connections
    done = subprocess.run([sys.executable, "-m", "kqe_rdf", "sparql", query, "--kb", str(bio_kb.path)],
                          capture_output=True, text=True, timeout=120, env=clean_env())
    assert done.returncode > 0, done
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:") and "allow-list" in lines[0], done.stderr
    assert canary.connections == before


# ---------------------------------------------------------------- item 2: size limits

LIMITS = Settings().server
P = "<http://example.org/p>"


def _just_over(name: str) -> tuple[str, str]:
    """A query just over one limit, and the setting its refusal must name."""
    d = LIMITS.max_query_depth + 1
    shapes = {
        "nested braces": ("ASK " + "{" * d + "}" * d, "server_max_query_depth"),
        "nested parentheses": ("ASK { FILTER(" + "(" * d + "true" + ")" * d + ") }", "server_max_query_depth"),
        "nested subqueries": ("SELECT * {" + " { SELECT * {" * (d // 2) + " }}" * (d // 2) + " }",
                              "server_max_query_depth"),
        "nested FILTER EXISTS": ("ASK {" + " FILTER EXISTS {" * d + " }" * d + " }", "server_max_query_depth"),
        "nested blank nodes": ("ASK { ?s " + (P + " [ ") * d + P + " ?o" + " ]" * d + " }", "server_max_query_depth"),
        "run of !": ("ASK { FILTER(" + "!" * (LIMITS.max_query_negations + 1) + "true) }",
                     "server_max_query_negations"),
        "chain of ||": ("ASK { FILTER(" + " || ".join(["false"] * (LIMITS.max_query_logical_operators + 2))
                        + ") }", "server_max_query_logical_operators"),
        "chain of &&": ("ASK { FILTER(" + " && ".join(["true"] * (LIMITS.max_query_logical_operators + 2))
                        + ") }", "server_max_query_logical_operators"),
        "path alternatives |": ("ASK { ?s " + "|".join([P] * (LIMITS.max_query_logical_operators + 2)) + " ?o }",
                                "server_max_query_logical_operators"),
        "chain of +": ("ASK { FILTER(" + " + ".join(["1"] * (LIMITS.max_query_arithmetic_operators + 2))
                       + " > 0) }", "server_max_query_arithmetic_operators"),
        "chain of -": ("ASK { FILTER(" + "-".join(["1"] * (LIMITS.max_query_arithmetic_operators + 2))
                       + " > 0) }", "server_max_query_arithmetic_operators"),
        "path sequence /": ("ASK { ?s " + "/".join([P] * (LIMITS.max_query_arithmetic_operators + 2)) + " ?o }",
                            "server_max_query_arithmetic_operators"),
        "chain of UNION": ("ASK { " + " UNION ".join(["{}"] * (LIMITS.max_query_patterns + 2)) + " }",
                           "server_max_query_patterns"),
        "chain of OPTIONAL": ("ASK { " + " ".join(["OPTIONAL {}"] * (LIMITS.max_query_patterns + 1)) + " }",
                              "server_max_query_patterns"),
        "chain of MINUS": ("ASK { ?s ?p ?o " + " ".join(["MINUS { ?s ?p ?o }"] * (LIMITS.max_query_patterns + 1))
                           + " }", "server_max_query_patterns"),
        "the 5 KB crash from the issue": ("ASK " + "{" * 2500 + "}" * 2500, "server_max_query_depth"),
    }
    return shapes[name]


SHAPES = ["nested braces", "nested parentheses", "nested subqueries", "nested FILTER EXISTS", "nested blank nodes",
          "run of !", "chain of ||", "chain of &&", "path alternatives |", "chain of +", "chain of -",
          "path sequence /", "chain of UNION", "chain of OPTIONAL", "chain of MINUS", "the 5 KB crash from the issue"]


@pytest.mark.parametrize("name", SHAPES)
def test_a_query_just_over_a_limit_is_400_naming_it_and_the_server_keeps_answering(server, name):
    query, setting = _just_over(name)
    response = httpx.post(server + "/sparql", content=query.encode(), timeout=30,
                          headers={"Content-Type": "application/sparql-query"})
    assert response.status_code == 400, (name, response.status_code, response.text[:300])
    assert setting in response.text and "exceeds the limit" in response.text
    assert httpx.get(server + "/sparql", params={"query": DISEASES}, timeout=30).status_code == 200


def test_an_or_counts_as_one_operator_as_an_and_does():
    """Issue 49: `||` counted two against server_max_query_logical_operators. 2,000 of them stay at least 4×
    below a crash: a chain of 8,000 ran and one of 16,000 crashed on an 8 MiB stack (jobs run on 64 MiB)."""
    for operator in ("||", "&&"):
        query = "ASK { FILTER(" + f" {operator} ".join(["false"] * LIMITS.max_query_logical_operators) + ") }"
        assert measure(query).logical == LIMITS.max_query_logical_operators - 1, operator
    assert measure("ASK { ?s <urn:a>|<urn:b>|<urn:c> ?o }").logical == 2


def test_each_shape_is_measured_just_over_its_limit_only():
    for name in SHAPES:
        query, setting = _just_over(name)
        field = {"server_max_query_depth": "depth", "server_max_query_negations": "negations",
                 "server_max_query_logical_operators": "logical",
                 "server_max_query_arithmetic_operators": "arithmetic", "server_max_query_patterns": "patterns"}[setting]
        assert getattr(measure(query), field) > getattr(LIMITS, setting.removeprefix("server_")), name


def test_an_update_over_a_limit_is_400_before_oxigraph_sees_it(server):
    update = "INSERT { <urn:a> <urn:b> 1 } WHERE " + "{" * 2500 + "}" * 2500
    response = httpx.post(server + "/update", content=update.encode(), headers=UPDATE, timeout=30)
    assert response.status_code == 400 and "server_max_query_depth" in response.text
    update = "DELETE { ?s ?p ?o } WHERE { ?s ?p ?o FILTER(" + " || ".join(["false"] * 20000) + ") }"
    response = httpx.post(server + "/update", content=update.encode(), headers=UPDATE, timeout=30)
    assert response.status_code == 400 and "server_max_query_logical_operators" in response.text
    assert httpx.get(server + "/sparql", params={"query": DISEASES}, timeout=30).status_code == 200


def test_over_long_text_is_refused_by_its_own_limit(writable_kb):
    settings = dataclasses.replace(Settings(), server_max_query_chars=2000)
    with serving(create_app(writable_kb, settings)) as url:
        response = httpx.post(url + "/sparql", content=(DISEASES + " " * 3000).encode(), timeout=30,
                              headers={"Content-Type": "application/sparql-query"})
    assert response.status_code == 400 and "server_max_query_chars" in response.text


def test_a_big_but_sane_query_is_still_accepted(server):
    diseases = [b["d"]["value"] for b in httpx.get(server + "/sparql", params={"query": DISEASES}).json()["results"]
                ["bindings"]]
    rows = " ".join([f"<http://example.org/node-{i}/item-{i}>" for i in range(2000 - len(diseases))]
                    + [f"<{d}>" for d in diseases])
    # 300 triple patterns in the template (Oxigraph's optimizer is slow, not unsafe, on hundreds in one WHERE).
    template = " ".join(f"?d <http://example.org/out-{i}> ?name ." for i in range(300))
    where = " ".join("?d a bio:Disease ; rdfs:label ?name ." for _ in range(10))
    optional = " ".join(f"OPTIONAL {{ ?d <http://example.org/rel-{i}> ?v{i} }}" for i in range(20))
    query = f"""CONSTRUCT {{ {template} }} WHERE {{
        VALUES ?d {{ {rows} }}
        {where}
        {optional}
        FILTER((STRLEN(?name) > 0 || !BOUND(?v1)) && !CONTAINS(LCASE(?name), "e-mail") && ?name != "x-y-z")
    }}"""
    assert len(query) > 50_000
    response = httpx.post(server + "/sparql", content=query.encode(), timeout=120,
                          headers={"Content-Type": "application/sparql-query", "Accept": "application/n-triples"})
    assert response.status_code == 200, response.text[:500]
    assert len(response.text.strip().splitlines()) == 300 * len(diseases) == 900


def test_kqe_rdf_sparql_refuses_an_oversized_query_without_crashing(bio_kb):  # noqa: F811
    query = "ASK " + "{" * 2500 + "}" * 2500
    done = subprocess.run([sys.executable, "-m", "kqe_rdf", "sparql", query, "--kb", str(bio_kb.path)],
                          capture_output=True, text=True, timeout=120, env=clean_env())
    assert done.returncode in (1, 2), (done.returncode, done.stderr[-500:])  # not -11: no SIGSEGV
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "server_max_query_depth" in lines[0], done.stderr


def test_flat_queries_with_operator_characters_in_their_data_pass_the_limits():
    """Strings, comments and IRIs holding one name carry no structure: only the grammar's tokens are counted."""
    uuids = " ".join(f"<urn:uuid:{i:08d}-0000-4000-8000-000000000000>" for i in 400 * [0])
    dates = " ".join(f'"2024-01-{d:02d}"^^xsd:date' for d in list(range(1, 29)) * 28)
    comments = "\n".join("# " + "-" * 70 for _ in range(20))
    words = " ".join('"optional union minus ((( ||| !!!"' for _ in range(600))
    for query in (f"SELECT * {{ VALUES ?u {{ {uuids} }} }}", f"SELECT * {{ VALUES ?d {{ {dates} }} }}",
                  f"{comments}\nASK {{}}", f"SELECT * {{ VALUES ?w {{ {words} }} }}"):
        check_limits(query, Settings())


def test_brackets_inside_an_iri_that_oxigraph_may_read_as_a_comparison_still_count():
    query = "ASK { FILTER(?a<" + "(" * 200 + "?b>1" + ")" * 200 + ") }"
    assert measure(query).depth > LIMITS.max_query_depth
