"""A generated corpus of malformed requests to the knowledge service (issue 15's standing fuzz suite, server part).

``corpus(n, seed)`` yields ``Case``s, the same ones for the same seed: SPARQL
queries mutated from valid ones (cut, spliced, wrong tokens, bad escapes, odd
Unicode, nesting near the limits, SERVICE/LOAD forms), SPARQL Protocol misuse
(graph parameters, formats, content types, repeated parameters), and REST
parameters of every route with wrong types and values (huge and non-finite
numbers, lone surrogates, deep JSON, lists and objects where strings belong).
Every case says which parameters it sent, so a test can check that an error
names one of them.
"""

from __future__ import annotations

import json
import random
from urllib.parse import urlencode
from collections.abc import Iterator
from dataclasses import dataclass, field

SEED_QUERIES = [
    "SELECT ?d ?name WHERE { ?d a bio:Disease ; rdfs:label ?name } ORDER BY ?name",
    "PREFIX ex: <http://example.org/> SELECT * WHERE { ?s ?p ?o FILTER(?o = ex:x) } LIMIT 5",
    "ASK { ?d rdfs:label 'Focal epilepsy type 1' }",
    "CONSTRUCT { ?d rdfs:label ?n } WHERE { ?d a bio:Disease ; rdfs:label ?n }",
    "DESCRIBE <https://omim.org/entry/100001>",
    "SELECT (COUNT(*) AS ?n) WHERE { ?s ?p ?o } GROUP BY ?p HAVING (COUNT(*) > 1)",
    "SELECT ?x WHERE { VALUES ?x { 1 2 3 } FILTER(?x > 1 && ?x != 3 || !BOUND(?x)) }",
    "SELECT ?s WHERE { ?s rdfs:label ?l . FILTER(REGEX(?l, '^F', 'i')) OPTIONAL { ?s rdfs:comment ?c } }",
    "SELECT ?d WHERE { SERVICE <urn:kqe:search> { ?d kqe:query \"forehead\" ; kqe:type bio:Disease } }",
    "SELECT ?d ?s WHERE { ?d a bio:Disease . BIND(kqe:bm25(?d, \"epilepsy\") AS ?s) }",
    "SELECT * WHERE { { SELECT ?s WHERE { ?s ?p ?o } LIMIT 3 } UNION { ?s a bio:Disease } }",
    "SELECT ?s WHERE { ?s bio:isA+ ?t . FILTER NOT EXISTS { ?t bio:isA ?u } MINUS { ?s a bio:Gene } }",
]

FRAGMENTS = ["{", "}", "(", ")", "[", "]", "\"", "'", "<", ">", "?", "$", "#", ";", ".", ",", "|", "||", "&&", "!",
             "^^", "@en", "\\u0041", "\\U0001F600", "\\u00", "\\", "\u0000", "\ufeff", "\u202e", "é", "𝔘",
             "SERVICE", "SERVICE <http://127.0.0.1:9/x> { ?s ?p ?o }", "LOAD <http://127.0.0.1:9/x>", "SILENT",
             "BASE <http://127.0.0.1:9/>", "PREFIX : <http://127.0.0.1:9/>", "GRAPH", "FILTER", "BIND(", "AS",
             "SELECT", "WHERE", "LIMIT -1", "OFFSET 99999999999999999999", "LIMIT 1e9", "ORDER BY", "GROUP BY",
             "INSERT DATA { <a> <b> <c> }", "DELETE WHERE { ?s ?p ?o }", "kqe:bm25(", "kqe:similarity(?d, 1)",
             "<urn:a b>", "<>", "_:b", "\"\"\"", "1e400", "-0", "NaN", "9" * 400, "\r", "\n", "\t"]

GRAPH_VALUES = ["not an iri", "", "<urn:x>", "urn:x y", "http://[::1", "\ud800x", "http://example.org/g",
                "https://w3id.org/kqe/graph/ontology", "\x00", "a" * 3000]

FORMATS = ["json", "xml", "csv", "tsv", "turtle", "nt", "jsonld", "rdfxml", "png", "", "JSON", "\u00e9"]
ACCEPTS = ["", "*/*", "application/sparql-results+json", "text/csv;q=0.5, image/png", "image/png",
           "application/ld+json", "text/turtle;q=abc", ",,,", "application/*;q=-1", "x" * 500]
CONTENT_TYPES = ["application/sparql-query", "application/x-www-form-urlencoded", "text/plain", "",
                 "application/sparql-query; charset=latin-1", "multipart/form-data", "application/json"]

REST_ROUTES = {"/search": ["q", "method", "k", "type"], "/triplets": ["q", "strict"],
               "/expand": ["q", "method", "type"], "/answer": ["q", "source"]}
REST_VALUES = ["seizure", "", "   ", "x" * 5000, "\ud800", "seiz\udfffure", "🧬 seizures", "\u0000",
               "bm25", "hybrid", "4step-offline", "kar-offline", "prf", "magic", "kg", "text", "tables", "web",
               "Disease", "NoSuchType", "https://w3id.org/kqe/bio#Disease", "true", "false", "maybe",
               "10", "0", "-5", "1001", "ten", "2.5", "1e3", "99999999999999999999999999"]
JSON_VALUES = [None, True, False, 0, -1, 1001, 2.5, 10 ** 30, [], [[]], {}, {"a": 1}, ["seizure", 3],
               [None], float("inf"), float("nan")]
RAW_BODIES = [b"{", b"[]", b"null", b"\"q\"", b"{\"q\": }", b"\xff\xfe", b"{\"q\": \"\\ud800\"}",
              b"{\"q\": \"x\", \"k\": 1e400}", b"{\"q\": \"x\", \"k\": -Infinity}", b"{\"k\": NaN}",
              b"{\"q\": \"x\", \"k\": " + b"7" * 5000 + b"}", b"{\"q\": " + b"[" * 5000 + b"]" * 5000 + b"}",
              b"{\"q\": \"x\"" + b", \"q\": \"y\"" * 50 + b"}", b"{\"q\": \"x\"}" * 2, b"\x00" * 10]


def form(pairs) -> str:
    """URL-encoded parameters; a lone surrogate goes as its (invalid) UTF-8 bytes, as a careless client sends it."""
    return urlencode(list(pairs.items()) if isinstance(pairs, dict) else pairs, errors="surrogatepass")


def get(route: str, pairs, headers: dict | None = None) -> dict:
    return {"method": "GET", "url": route + "?" + form(pairs), "headers": headers or {}}


def post_form(route: str, pairs, headers: dict | None = None, query=()) -> dict:
    return {"method": "POST", "url": route + ("?" + form(query) if query else ""), "content": form(pairs).encode(),
            "headers": {**(headers or {}), "Content-Type": "application/x-www-form-urlencoded"}}


@dataclass
class Case:
    """One request: ``httpx`` arguments, and the names of the parameters it sent."""

    name: str
    request: dict
    parameters: set[str] = field(default_factory=set)


def mutate(rng: random.Random, query: str) -> str:
    """A query changed by one to three random edits."""
    for _ in range(rng.randint(1, 3)):
        edit = rng.randrange(7)
        at = rng.randint(0, len(query))
        if edit == 0:
            query = query[:at]  # cut
        elif edit == 1:
            query = query[:at] + rng.choice(FRAGMENTS) + query[at:]  # insert
        elif edit == 2:
            end = min(len(query), at + rng.randint(1, 12))
            query = query[:at] + query[end:]  # delete
        elif edit == 3:
            other = rng.choice(SEED_QUERIES)
            cut = rng.randint(0, len(other))
            query = query[:at] + other[cut:]  # splice
        elif edit == 4:
            query = query[:at] + "{" * rng.choice([5, 60, 127, 129, 400]) + query[at:]  # nesting near the limit
        elif edit == 5:
            query = query[:at] + "".join(rng.choice(FRAGMENTS) for _ in range(rng.randint(2, 8))) + query[at:]
        else:
            query = query.replace(" ", rng.choice(["", "\t", "\u00a0", "\u2028", "  "]), rng.randint(1, 3))
    return query


def sparql_case(rng: random.Random, n: int) -> Case:
    query = mutate(rng, rng.choice(SEED_QUERIES))
    params: dict[str, object] = {"query": query}
    if rng.random() < 0.2:
        params[rng.choice(["default-graph-uri", "named-graph-uri"])] = rng.choice(GRAPH_VALUES)
    if rng.random() < 0.15:
        params["format"] = rng.choice(FORMATS)
    headers = {"Accept": rng.choice(ACCEPTS)} if rng.random() < 0.2 else {}
    how = rng.randrange(4)
    if how == 0:
        request = get("/sparql", params, headers)
    elif how == 1:
        request = post_form("/query", params, headers)
    elif how == 2:
        rest = {k: v for k, v in params.items() if k != "query"}
        kind = rng.choice(CONTENT_TYPES)
        body = query.encode("utf-8", "surrogatepass") if rng.random() < 0.9 else b"\xff" + query.encode()
        request = {"method": "POST", "url": "/sparql" + ("?" + form(rest) if rest else ""), "content": body,
                   "headers": {**headers, "Content-Type": kind}}
    else:  # a repeated or missing parameter
        pairs = [("query", query), ("query", rng.choice(SEED_QUERIES))] if rng.random() < 0.5 else \
            [("default-graph-uri", rng.choice(GRAPH_VALUES))]
        request = get("/sparql", pairs, headers) if rng.random() < 0.5 else post_form("/sparql", pairs, headers)
    return Case(f"sparql-{n}", request, set(params) | {"query"})


def rest_case(rng: random.Random, n: int) -> Case:
    route = rng.choice(list(REST_ROUTES))
    names = REST_ROUTES[route]
    chosen = rng.sample(names, rng.randint(0, len(names)))
    if rng.random() < 0.3:
        chosen.append(rng.choice(["sources", "k", "limit", "\ud800", ""]))
    how = rng.randrange(4)
    if how == 0:  # the URL
        request = get(route, [(p, rng.choice(REST_VALUES)) for p in chosen])
    elif how == 1:  # a JSON body of awkward values
        body = {p: (rng.choice(JSON_VALUES) if rng.random() < 0.5 else rng.choice(REST_VALUES)) for p in chosen}
        text = json.dumps(body, allow_nan=True, ensure_ascii=rng.random() < 0.5)
        request = {"method": "POST", "url": route, "content": text.encode("utf-8", "surrogatepass"),
                   "headers": {"Content-Type": "application/json"}}
    elif how == 2:  # a raw body that is not what it says
        request = {"method": "POST", "url": route, "content": rng.choice(RAW_BODIES),
                   "headers": {"Content-Type": rng.choice(["application/json", "application/x-www-form-urlencoded",
                                                           "text/plain"])}}
    else:  # a form
        request = post_form(route, [(p, rng.choice(REST_VALUES)) for p in chosen])
    return Case(f"rest-{n}", request, set(chosen) | set(names))


def corpus(count: int, seed: int = 15) -> Iterator[Case]:
    """``count`` cases, the same ones for the same seed: 60% SPARQL, 40% REST."""
    rng = random.Random(seed)
    for n in range(count):
        yield sparql_case(rng, n) if rng.random() < 0.6 else rest_case(rng, n)
