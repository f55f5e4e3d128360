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

from fixtures_kb import bio_kb  # noqa: F401 - fixture
from kqe_rdf.core.config import Settings
from kqe_rdf.kb.knowledge_base import KnowledgeBase
from kqe_rdf.service.app import create_app
from kqe_rdf.kb.sparql_guard import check_limits, measure, verify_federation
from live_servers import free_port, serving

ALLOWED = "http://allowed.example/sparql"
TOKEN = "t0ken"
UPDATE = {"Content-Type": "application/sparql-update", "Authorization": "Bearer " + TOKEN}
DISEASES = "SELECT ?d ?name WHERE { ?d a bio:Disease ; rdfs:label ?name } ORDER BY ?name"
EMPTY_RESULTS = b'{"head":{"vars":[]},"results":{"bindings":[{}]}}'


class Canary:
    """A listener on 127.0.0.1:PORT (and [::1]:PORT if possible) that counts connections and answers SPARQL JSON."""

    def __init__(self) -> None:
        self.port = free_port()
        self.connections = 0
        self.sockets = []
        for family, host in ((socket.AF_INET, "127.0.0.1"), (socket.AF_INET6, "::1")):
            try:
                s = socket.socket(family)
                s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                s.bind((host, self.port))
                s.listen(16)
                s.settimeout(0.2)
            except OSError:
                if family == socket.AF_INET:
                    raise
                continue
            self.sockets.append(s)
        self.stop = threading.Event()
        self.threads = [threading.Thread(target=self._serve, args=(s,), daemon=True) for s in self.sockets]
        for t in self.threads:
            t.start()

    @property
    def ipv6(self) -> bool:
        return len(self.sockets) == 2

    def _serve(self, listener: socket.socket) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = listener.accept()
            except (TimeoutError, OSError):
                continue
            self.connections += 1
            with conn:
                conn.settimeout(2)
                try:
                    conn.recv(65536)
                    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/sparql-results+json\r\n"
                                 b"Content-Length: %d\r\nConnection: close\r\n\r\n" % len(EMPTY_RESULTS) + EMPTY_RESULTS)
                except OSError:
                    pass

    def close(self) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(5)
        for s in self.sockets:
            s.close()


@pytest.fixture(scope="module")
def canary():
    c = Canary()
    yield c
    c.close()


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

QUERY_FORMS = {
    "prefixed name glued to SERVICE": "PREFIX : <{t}/> ASK {{ SERVICE:x {{ ?s ?p ?o }} }}",
    "glued keyword and IRI": "SELECT * {{ SERVICE<{t}/y>{{ ?s ?p ?o }} }}",
    "SILENT declared as a prefix": "PREFIX SILENT: <http://allowed.example/> PREFIX : <{t}/> "
                                   "ASK {{ SERVICE SILENT:sparql {{ ?s ?p ?o }} }}",
    "\\u escape hiding an IRI's end": "SELECT * {{ BIND(<urn:a\\u0062#> AS ?z) SERVICE <{t}/y> {{ ?s ?p ?o }} }}",
    "\\u escapes inside the endpoint": "SELECT * {{ SERVICE <http\\u003A\\u002F\\u002F127.0.0.1:{port}/> {{ ?s ?p ?o }} }}",
    "\\u escape in the keyword": "SELECT * {{ \\u0053ERVICE <{t}/> {{ ?s ?p ?o }} }}",
    "escape spelling an escape": "SELECT * {{ SERVICE <{t}/\\u005Cu0078> {{ ?s ?p ?o }} }}",
    "BASE and a relative IRI": "BASE <{t}/> SELECT * {{ SERVICE <x> {{ ?s ?p ?o }} }}",
    "BASE resolving onto an allowed-looking path": "BASE <{t}/> SELECT * {{ SERVICE <sparql> {{ ?s ?p ?o }} }}",
    "userinfo before the host": "SELECT * {{ SERVICE <http://allowed.example@127.0.0.1:{port}/sparql> {{ ?s ?p ?o }} }}",
    "lower-case keyword": "select * {{ service <{t}/> {{ ?s ?p ?o }} }}",
    "mixed-case keyword": "SeLeCt * {{ SeRvIcE <{t}/> {{ ?s ?p ?o }} }}",
    "IPv6 loopback": "SELECT * {{ SERVICE <http://[::1]:{port}/> {{ ?s ?p ?o }} }}",
    "decimal IPv4": "SELECT * {{ SERVICE <http://2130706433:{port}/> {{ ?s ?p ?o }} }}",
    "variable endpoint": "SELECT * {{ VALUES ?e {{ <{t}/> }} SERVICE ?e {{ ?s ?p ?o }} }}",
    "inside FILTER EXISTS": "SELECT * {{ ?s ?p ?o FILTER EXISTS {{ SERVICE <{t}/> {{ ?s ?p ?o }} }} }}",
    "inside FILTER NOT EXISTS": "ASK {{ FILTER NOT EXISTS {{ SERVICE <{t}/> {{ ?s ?p ?o }} }} }}",
    "inside a subquery": "SELECT * {{ {{ SELECT * {{ SERVICE <{t}/> {{ ?s ?p ?o }} }} }} }}",
    "inside OPTIONAL": "SELECT * {{ ?s ?p ?o OPTIONAL {{ SERVICE <{t}/> {{ ?s ?p ?o }} }} }}",
    "inside MINUS": "SELECT * {{ ?s ?p ?o MINUS {{ SERVICE <{t}/> {{ ?s ?p ?o }} }} }}",
    "inside UNION": "SELECT * {{ {{ ?s ?p ?o }} UNION {{ SERVICE <{t}/> {{ ?s ?p ?o }} }} }}",
    "SERVICE SILENT": "SELECT * {{ SERVICE SILENT <{t}/> {{ ?s ?p ?o }} }}",
    "CONSTRUCT": "CONSTRUCT {{ ?s ?p ?o }} WHERE {{ SERVICE <{t}/> {{ ?s ?p ?o }} }}",
    "DESCRIBE": "DESCRIBE ?s WHERE {{ SERVICE <{t}/> {{ ?s ?p ?o }} }}",
    "ASK": "ASK {{ SERVICE <{t}/> {{ ?s ?p ?o }} }}",
    "comment ended by a bare CR": "ASK {{ # nothing here\r SERVICE <{t}/> {{ ?s ?p ?o }}\n }}",
    "allowed one first, then another": f"SELECT * {{{{ SERVICE <{ALLOWED}> {{{{ ?s ?p ?o }}}} SERVICE <{{t}}/> {{{{ ?s ?p ?o }}}} }}}}",
    "next to a search block": "SELECT * {{ SERVICE <urn:kqe:search> {{ ?d kqe:query \"forehead\" }} SERVICE <{t}/> {{ ?d ?p ?o }} }}",
}

# A keyword glued to a prefixed name that expands to an allowed IRI: rdflib reads one name, Oxigraph the
# keyword and then ``x:...``, which the canary stands behind (issue 24).
ALLOWED_PREFIX = ALLOWED.rsplit("/", 1)[0] + "/"
GLUED_QUERY_FORMS = {
    "SILENT glued to a name": "PREFIX SILENTx: <%s> PREFIX x: <{t}/> SELECT * {{ SERVICE SILENTx:sparql {{ ?s ?p ?o }} }}",
    "SERVICE glued to a name": "PREFIX SERVICEx: <%s> PREFIX x: <{t}/> SELECT * {{ SERVICEx:sparql {{ ?s ?p ?o }} }}",
    "GRAPH glued to a name": "PREFIX GRAPHx: <%s> PREFIX x: <{t}/> SELECT * {{ GRAPHx:g {{ SERVICE x:sparql {{ ?s ?p ?o }} }} }}",
    "lower-case silent glued": "PREFIX silentx: <%s> PREFIX x: <{t}/> select * {{ service silentx:sparql {{ ?s ?p ?o }} }}",
}
GLUED_UPDATE_FORMS = {
    "LOAD SILENT glued to a name": "PREFIX SILENTx: <%s> PREFIX x: <{t}/> LOAD SILENTx:data.ttl",
    "LOAD glued to a name": "PREFIX LOADx: <%s> PREFIX x: <{t}/> LOADx:data.ttl",
    "INTO glued to a name": "PREFIX INTOx: <%s> PREFIX x: <{t}/> LOAD SILENT <{t}/data.ttl> INTOx:g",
    "GRAPH glued after INTO": "PREFIX GRAPHx: <%s> PREFIX x: <{t}/> LOAD <{t}/data.ttl> INTO GRAPHx:g",
    "SERVICE SILENT glued in INSERT ... WHERE": "PREFIX SILENTx: <%s> PREFIX x: <{t}/> "
                                                "INSERT {{ ?s ?p ?o }} WHERE {{ SERVICE SILENTx:sparql {{ ?s ?p ?o }} }}",
}
QUERY_FORMS.update({k: v % ALLOWED_PREFIX for k, v in GLUED_QUERY_FORMS.items()})

UPDATE_FORMS = {
    "LOAD": "LOAD <{t}/data.ttl>",
    "LOAD with a prefixed name": "PREFIX : <{t}/> LOAD:x",
    "LOAD SILENT INTO GRAPH": "LOAD SILENT <{t}/data.ttl> INTO GRAPH <urn:g>",
    "lower-case load": "load <{t}/data.ttl>",
    "LOAD after another operation": "INSERT DATA {{ <urn:a> <urn:b> <urn:c> }} ; LOAD <{t}/data.ttl>",
    "SERVICE in INSERT ... WHERE": "INSERT {{ ?s ?p ?o }} WHERE {{ SERVICE <{t}/> {{ ?s ?p ?o }} }}",
    "SERVICE in DELETE ... WHERE": "DELETE {{ ?s ?p ?o }} WHERE {{ SERVICE SILENT <{t}/> {{ ?s ?p ?o }} }}",
}
UPDATE_FORMS.update({k: v % ALLOWED_PREFIX for k, v in GLUED_UPDATE_FORMS.items()})


def _form(template: str, canary: Canary) -> str:
    return template.format(t=f"http://127.0.0.1:{canary.port}", port=canary.port)


@pytest.mark.parametrize("name", list(QUERY_FORMS))
def test_every_form_of_a_service_call_off_the_allow_list_is_refused_before_any_connection(server, canary, name):
    before = canary.connections
    query = _form(QUERY_FORMS[name], canary)
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
    response = httpx.post(server + "/update", content=_form(UPDATE_FORMS[name], canary).encode(), headers=UPDATE,
                          timeout=30)
    expected = (204,) if name == "LOAD SILENT INTO GRAPH" else (400, 403)
    assert response.status_code in expected, (name, response.status_code, response.text)
    assert canary.connections == before, f"{name}: the forbidden URL was fetched"


@pytest.mark.parametrize("name", ["SILENT glued to a name", "lower-case silent glued", "SERVICE glued to a name"])
def test_oxigraph_itself_splits_a_glued_keyword_and_calls_the_other_endpoint(canary, name):
    """Why the glued forms matter: unguarded, pyoxigraph calls the endpoint behind ``x:``, not the allowed one."""
    import pyoxigraph
    before = canary.connections
    list(pyoxigraph.Store().query(_form(QUERY_FORMS[name], canary)))
    assert canary.connections == before + 1


def test_a_glued_keyword_is_refused_naming_the_token(server, canary):
    response = httpx.get(server + "/sparql", params={"query": _form(QUERY_FORMS["SILENT glued to a name"], canary)})
    assert response.status_code == 403 and "'SILENTx:' begins with the keyword SILENT" in response.text
    # The same prefix names are fine where nothing can be called.
    query = "PREFIX SILENTx: <urn:x:> SELECT * { ?s SILENTx:p ?o } LIMIT 1"
    assert httpx.get(server + "/sparql", params={"query": query}).status_code == 200


def test_a_refusal_says_why(server, canary):
    response = httpx.get(server + "/sparql", params={"query": _form(QUERY_FORMS["prefixed name glued to SERVICE"],
                                                                    canary)})
    assert response.status_code == 403 and "allow-list" in response.text
    response = httpx.get(server + "/sparql", params={"query": _form(QUERY_FORMS["variable endpoint"], canary)})
    assert response.status_code == 403 and "variable" in response.text
    response = httpx.get(server + "/sparql", params={"query": _form(QUERY_FORMS["comment ended by a bare CR"],
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
    query = _form(QUERY_FORMS["prefixed name glued to SERVICE"], canary)
    before = canary.connections
    done = subprocess.run([sys.executable, "-m", "kqe_rdf", "sparql", query, "--kb", str(bio_kb.path)],
                          capture_output=True, text=True, timeout=120, env=_clean_env())
    assert done.returncode > 0, done
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:") and "allow-list" in lines[0], done.stderr
    assert canary.connections == before


def _clean_env() -> dict:
    return {k: v for k, v in os.environ.items() if not k.startswith(("KQE_", "OPENAI_"))}


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
                          capture_output=True, text=True, timeout=120, env=_clean_env())
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
