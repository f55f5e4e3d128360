"""Real SPARQL clients against a live `kqe-rdf serve` app: SPARQLWrapper with its defaults and each return
format, and rdflib's SPARQLStore / SPARQLUpdateStore (the tiny HPO KB of tests/support/fixtures_kb.py)."""

from __future__ import annotations

import shutil

import pytest
import rdflib
from rdflib.plugins.stores.sparqlstore import SPARQLStore, SPARQLUpdateStore
from SPARQLWrapper import CSV, JSON, JSONLD, N3, TSV, TURTLE, XML, SPARQLWrapper

from support.fixtures_kb import bio_kb, node  # noqa: F401 - fixtures
from kqe_rdf.core.config import Settings
from kqe_rdf.kb.knowledge_base import KnowledgeBase
from kqe_rdf.service.app import create_app
from support.live_servers import oxigraph_endpoint, serving  # noqa: F401 - fixture

pytestmark = pytest.mark.slow  # servers, subprocesses or big inputs: not in `make test-quick`

PREFIXES = "PREFIX rdfs: <http://www.w3.org/2000/01/rdf-schema#> "  # bio: is one of the KB's own prefixes
DISEASES = PREFIXES + "SELECT ?name WHERE { ?d a bio:Disease ; rdfs:label ?name } ORDER BY ?name"
NAMES = ["Focal epilepsy type 1", "Frontal bossing syndrome", "Generalized epilepsy with forehead anomaly"]
CONSTRUCT = PREFIXES + "CONSTRUCT { ?d rdfs:label ?n } WHERE { ?d a bio:Disease ; rdfs:label ?n }"
TOKEN = "s3cret"


@pytest.fixture(scope="module")
def endpoint(bio_kb):  # noqa: F811
    with serving(create_app(bio_kb, Settings())) as url:
        yield url + "/sparql"


def wrapper(endpoint: str, query: str, fmt: str | None = None) -> SPARQLWrapper:
    sparql = SPARQLWrapper(endpoint)
    sparql.setQuery(query)
    if fmt is not None:
        sparql.setReturnFormat(fmt)
    return sparql


def test_sparqlwrapper_select_with_its_defaults_reads_xml(endpoint):
    document = wrapper(endpoint, DISEASES).queryAndConvert()  # XML, as a DOM
    assert [n.firstChild.data for n in document.getElementsByTagName("literal")] == NAMES


@pytest.mark.parametrize("fmt", [JSON, XML, CSV, TSV])
def test_sparqlwrapper_select_in_each_results_format(endpoint, fmt):
    result = wrapper(endpoint, DISEASES, fmt).queryAndConvert()
    if fmt == JSON:
        assert [b["name"]["value"] for b in result["results"]["bindings"]] == NAMES
    elif fmt == XML:
        assert len(result.getElementsByTagName("result")) == 3
    else:
        text = result.decode()
        assert all(name in text for name in NAMES) and text.splitlines()[0] in ("name", "?name")


@pytest.mark.parametrize("fmt", [JSON, XML, CSV, TSV])
def test_sparqlwrapper_ask_in_each_format(endpoint, fmt):
    result = wrapper(endpoint, PREFIXES + "ASK { ?d rdfs:label 'Focal epilepsy type 1' }", fmt).queryAndConvert()
    if fmt == JSON:
        assert result["boolean"] is True
    elif fmt == XML:
        assert result.getElementsByTagName("boolean")[0].firstChild.data == "true"
    else:
        assert result.decode().strip() == "true"


@pytest.mark.parametrize("fmt", [None, XML, JSONLD, TURTLE, N3, JSON])
def test_sparqlwrapper_construct_and_describe_with_each_format(endpoint, bio_kb, fmt):  # noqa: F811
    """The default (format=xml, Accept RDF/XML) and JSON ask for a graph: RDF/XML and JSON-LD come back."""
    for query, at_least in ((CONSTRUCT, 3), (f"DESCRIBE <{node(bio_kb, 'OMIM:100001')}>", 4)):
        result = wrapper(endpoint, query, fmt).queryAndConvert()
        if isinstance(result, bytes):
            graph = rdflib.Graph().parse(data=result, format="turtle" if fmt in (TURTLE, N3) else "json-ld")
        else:
            graph = result
        assert len(graph) >= at_least, (fmt, query)


@pytest.mark.parametrize("form", ["SELECT * WHERE { ?s ?p ?o } LIMIT 2", "ASK { ?s ?p ?o }",
                                  "CONSTRUCT WHERE { ?s ?p ?o } LIMIT 2", "DESCRIBE ?s WHERE { ?s ?p ?o } LIMIT 1"])
def test_every_sparqlwrapper_return_format_is_answered_as_oxigraph_serve_answers_it(endpoint, oxigraph_endpoint,
                                                                                    form):
    """The very request SPARQLWrapper makes (its Accept header and its format=/output= parameters) for each of its
    return formats: this endpoint answers it when `oxigraph serve` does, in the same kind of format (issue 37: a
    SELECT asked for Turtle, or a CONSTRUCT asked for CSV, got 406 here)."""
    import urllib.request

    import httpx
    import SPARQLWrapper as sw

    kinds = {"application/sparql-results": "results", "text/csv": "results", "text/tab-separated-values": "results"}
    answers = {}
    for fmt in (sw.JSON, sw.XML, sw.CSV, sw.TSV, sw.TURTLE, sw.N3, sw.JSONLD, sw.RDFXML, sw.RDF):
        for url in (endpoint, oxigraph_endpoint):
            request = wrapper(url, form, fmt)._createRequest()
            assert isinstance(request, urllib.request.Request)
            response = httpx.request(request.get_method(), request.full_url, content=request.data,
                                     headers=dict(request.header_items()), timeout=30)
            media = response.headers.get("content-type", "").split(";")[0]
            kind = next((k for prefix, k in kinds.items() if media.startswith(prefix)), "graph")
            answers.setdefault(fmt, []).append((response.status_code, kind if response.status_code == 200 else None))
    assert all(ours == theirs for ours, theirs in answers.values()), answers
    assert all(ours[0] == 200 for ours, _ in answers.values()), answers


def test_rdflib_sparqlstore_reads_the_endpoint(endpoint):
    graph = rdflib.Graph(SPARQLStore(endpoint))
    assert sorted(str(row.name) for row in graph.query(DISEASES)) == NAMES
    assert graph.query(PREFIXES + "ASK { ?d rdfs:label 'Focal epilepsy type 1' }").askAnswer is True
    assert len(graph.query(CONSTRUCT).graph) == 3
    label = rdflib.URIRef("http://www.w3.org/2000/01/rdf-schema#label")
    assert "Frontal bossing syndrome" in {str(o) for o in graph.objects(None, label)}


def test_rdflib_sparqlupdatestore_writes_with_the_token(bio_kb, tmp_path):  # noqa: F811
    shutil.copytree(bio_kb.path, tmp_path / "kb")
    kb = KnowledgeBase.open(tmp_path / "kb")
    with serving(create_app(kb, Settings(server_update_token=TOKEN))) as url:
        store = SPARQLUpdateStore(url + "/sparql", url + "/update", headers={"Authorization": f"Bearer {TOKEN}"})
        graph = rdflib.Graph(store, identifier=rdflib.URIRef("urn:kqe:graph:rdflib"))  # rdflib sends no blank node
        added = (rdflib.URIRef("urn:kqe:test"), rdflib.RDFS.label, rdflib.Literal("added by rdflib"))
        graph.add(added)
        assert added in graph
        graph.remove(added)
        assert added not in graph
        refused = SPARQLUpdateStore(url + "/sparql", url + "/update")
        with pytest.raises(Exception, match="401"):
            rdflib.Graph(refused, identifier=graph.identifier).add(added)
