"""A listener that counts the connections a server makes, and the forms of a SERVICE or LOAD call to it that
an endpoint must refuse (issue 15): the guard's tests, the federation tests and bench/federation_fuzz.py use
them."""

from __future__ import annotations

import os
import socket
import threading

import pytest

from support.live_servers import free_port

ALLOWED = "http://allowed.example/sparql"
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


def aimed_at(template: str, canary: Canary) -> str:
    """A form of the call with the canary as its endpoint."""
    return template.format(t=f"http://127.0.0.1:{canary.port}", port=canary.port)


def clean_env() -> dict:
    return {k: v for k, v in os.environ.items() if not k.startswith(("KQE_", "OPENAI_"))}
