"""A remote SPARQL 1.1 store in place of the embedded Oxigraph one, with the indexes kept local.

For KBs larger than one machine's disk, the triples can live in any SPARQL 1.1
server (Oxigraph server, Fuseki, QLever, Virtuoso, GraphDB, Neptune) while BM25,
embeddings and documents stay in the KB directory. Set ``store_endpoint`` (or
``KQE_STORE_ENDPOINT``) to the server's query URL and load the same data into
it (``oxigraph dump``/``load`` of the KB's ``store``, or the source files);
``KnowledgeBase.store`` then returns a :class:`RemoteStore`.

It answers the part of pyoxigraph's ``Store`` the code uses — ``query()`` —
with real pyoxigraph result objects, so callers cannot tell the difference:
prefixes are declared in the text, ``substitutions`` become a trailing
``VALUES`` clause, default/named graphs become the protocol's parameters. The
union default graph is the remote server's setting (``oxigraph serve
--union-default-graph``, Fuseki's ``tdb2:unionDefaultGraph``). ``kqe:bm25`` and
``kqe:similarity`` need the embedded store; ``SERVICE <urn:kqe:search>`` works
with both (it is evaluated before the query is sent). The remote store is
read-only here: updates go to the server's own update endpoint.

Engines differ in content negotiation: Virtuoso answers a CONSTRUCT with
SPARQL JSON results when that is the first acceptable type (and a SELECT with
an RDF graph when a graph type is), so the ``Accept`` header names only the
formats of the query's own form.
"""

from __future__ import annotations

import re

from pyoxigraph import QueryResultsFormat, RdfFormat, parse, parse_query_results

from ..core.errors import KqeError
from .queries import BM25_FUNCTION, SIMILARITY_FUNCTION, values_block

_SEARCH_FUNCTIONS = re.compile(r"\bkqe:(bm25|similarity)\s*\(|<(%s|%s)>" % (re.escape(BM25_FUNCTION),
                                                                          re.escape(SIMILARITY_FUNCTION)))

#: IRIs, strings and comments, removed before looking for the query form (they may hold any word).
_NOT_KEYWORDS = re.compile(r'<[^<>"{}|^`\\\s]*>|"""[\s\S]*?"""|' r"'''[\s\S]*?'''|"
                           r'"(?:[^"\\\n]|\\.)*"|' r"'(?:[^'\\\n]|\\.)*'|#[^\n]*")
_FORM = re.compile(r"\b(SELECT|ASK|CONSTRUCT|DESCRIBE)\b", re.IGNORECASE)
_RESULTS_ACCEPT = "application/sparql-results+json, application/sparql-results+xml;q=0.9"
_GRAPH_ACCEPT = "application/n-triples, text/turtle;q=0.9"

_GRAPH_TYPES = {"application/n-triples": RdfFormat.N_TRIPLES, "text/turtle": RdfFormat.TURTLE,
                "text/plain": RdfFormat.N_TRIPLES}


class RemoteStoreError(KqeError, OSError):
    """The remote store failed: an OSError for code written against pyoxigraph, a KqeError for users."""


class RemoteStore:
    """``query()`` against a SPARQL 1.1 endpoint, returning pyoxigraph results."""

    def __init__(self, url: str, timeout: float = 60.0) -> None:
        import httpx

        if not url.startswith(("http://", "https://")):
            raise KqeError(f"store_endpoint must be the http(s) query URL of a SPARQL 1.1 server, got {url!r}")
        self.url = url
        self.client = httpx.Client(timeout=timeout, headers={"User-Agent": "kqe-rdf/0.1"})

    def __repr__(self) -> str:
        return f"RemoteStore({self.url!r})"

    def query(self, query: str, prefixes: dict[str, str] | None = None, substitutions=None, default_graph=None,
              named_graphs=None, custom_functions=None, use_default_graph_as_union: bool = False, **_options):
        import httpx

        if custom_functions and _SEARCH_FUNCTIONS.search(query):
            raise SyntaxError("kqe:bm25 and kqe:similarity run in the embedded store only; with a remote store "
                              "use SERVICE <urn:kqe:search> { ... } to rank candidates")
        text = "".join(f"PREFIX {p}: <{iri}>\n" for p, iri in (prefixes or {}).items()) + query
        if substitutions:
            variables = sorted(substitutions, key=lambda v: v.value)
            text += "\n" + values_block([v.value for v in variables], [[substitutions[v] for v in variables]])
        data = {"query": text}
        params = []
        graphs = default_graph if isinstance(default_graph, list) else [default_graph] if default_graph else []
        params += [("default-graph-uri", g.value) for g in graphs if hasattr(g, "value")]
        params += [("named-graph-uri", g.value) for g in named_graphs or []]
        try:
            response = self.client.post(self.url, params=params, data=data, headers={"Accept": _accept(query)})
        except httpx.HTTPError as exc:
            raise RemoteStoreError(f"the SPARQL store at {self.url} could not be reached ({exc})") from None
        if response.status_code == 400:
            raise SyntaxError(f"the SPARQL store at {self.url} rejected the query: {response.text[:500]}")
        if response.status_code != 200:
            raise RemoteStoreError(f"the SPARQL store at {self.url} answered {response.status_code}: {response.text[:300]}")
        kind = response.headers.get("content-type", "").split(";")[0].strip()
        if kind in _GRAPH_TYPES:
            return iter(list(parse(response.content, format=_GRAPH_TYPES[kind])))
        if kind in ("application/sparql-results+json", "application/json"):
            return parse_query_results(response.content, format=QueryResultsFormat.JSON)
        if kind == "application/sparql-results+xml":
            return parse_query_results(response.content, format=QueryResultsFormat.XML)
        raise RemoteStoreError(f"the SPARQL store at {self.url} answered with {kind or 'no content type'}, not SPARQL results")

    def update(self, *_args, **_kwargs):
        raise KqeError(f"the KB's store is the remote SPARQL store {self.url}: send updates to its update endpoint")


def _accept(query: str) -> str:
    """The Accept header for ``query``'s form: RDF graph types for CONSTRUCT and DESCRIBE, results otherwise.

    >>> _accept("PREFIX ex: <http://ex.org/select#> # ASK\\nCONSTRUCT WHERE { ?s ex:p 'SELECT' }")
    'application/n-triples, text/turtle;q=0.9'
    """
    form = _FORM.search(_NOT_KEYWORDS.sub(" ", query))
    return _GRAPH_ACCEPT if form and form.group(1).upper() in ("CONSTRUCT", "DESCRIBE") else _RESULTS_ACCEPT
