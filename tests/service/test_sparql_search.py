"""Search inside SPARQL: kqe:bm25 / kqe:similarity functions, SERVICE <urn:kqe:search>, and the SERVICE guard.

Queries run on the tiny HPO KB (tests/support/fixtures_kb.py): Seizure has two kinds
(Focal-onset and Bilateral tonic-clonic); Focal epilepsy type 1 and Generalized
epilepsy with forehead anomaly each have one of them; Frontal bossing syndrome
has High forehead and explicitly lacks Seizure.
"""

from __future__ import annotations

import pytest

from support.fixtures_kb import bio_kb, names, node  # noqa: F401 - fixtures
from kqe_rdf.kb.build import build_kb
from kqe_rdf.core.config import Settings
from kqe_rdf.core.errors import SparqlError
from kqe_rdf.kb.importers.jsonl import JsonlImporter
from kqe_rdf.kb.knowledge_base import KnowledgeBase
from kqe_rdf.service.sparql_search import SearchFunctions, ServiceNotAllowed, execute, prepare, tokenize

SETTINGS = Settings()


def select(kb, query: str, settings: Settings = SETTINGS) -> list[dict[str, str]]:
    prepared = prepare(kb, query, settings)
    result = execute(kb, prepared, SearchFunctions(kb))
    variables = [v.value for v in result.variables]
    return [{v: row[v].value for v in variables if row[v] is not None} for row in result]


def test_diseases_with_a_kind_of_seizure_ranked_by_similarity_to_a_description(bio_kb):  # noqa: F811
    rows = select(bio_kb, """
        SELECT ?disease ?name ?similarity WHERE {
          ?disease bio:hasPhenotype/bio:isA* ?seizure . ?seizure rdfs:label "Seizure" .
          ?disease rdfs:label ?name .
          BIND(kqe:similarity(?disease, "generalized seizures and a prominent forehead") AS ?similarity)
        } ORDER BY DESC(?similarity)""")
    assert [r["name"] for r in rows] == ["Generalized epilepsy with forehead anomaly", "Focal epilepsy type 1"]
    disease = node(bio_kb, "OMIM:100003")
    expected = float(bio_kb.dense.vector(disease) @ bio_kb.embed_query("generalized seizures and a prominent forehead"))
    assert float(rows[0]["similarity"]) == pytest.approx(expected, rel=1e-6)


def test_bm25_function_scores_like_the_text_index_and_filters(bio_kb):  # noqa: F811
    rows = select(bio_kb, """
        SELECT ?d ?score WHERE { ?d a bio:Disease . BIND(kqe:bm25(?d, "forehead") AS ?score) FILTER(?score > 0) }
        ORDER BY DESC(?score)""")
    index = dict(bio_kb.text_index.search("forehead", 50))
    assert {r["d"] for r in rows} == {node(bio_kb, "OMIM:100002"), node(bio_kb, "OMIM:100003")}
    for r in rows:
        assert float(r["score"]) == pytest.approx(index[r["d"]], rel=1e-6)


def test_bm25_scores_nodes_outside_the_cached_top_exactly(bio_kb):  # noqa: F811
    functions = SearchFunctions(bio_kb, top=1)  # only the best hit is cached; the others take the exact path
    for iri, score in bio_kb.text_index.search("epilepsy forehead", 10):
        assert functions.bm25_score(iri, "epilepsy forehead") == pytest.approx(score, rel=1e-6)
    assert len(bio_kb.text_index.search("forehead", 10)) > 1
    assert functions.bm25_score(node(bio_kb, "HP:0001249"), "forehead") == 0.0  # Intellectual disability


def test_similarity_is_unbound_for_something_that_is_not_an_embedded_node(bio_kb):  # noqa: F811
    rows = select(bio_kb, 'SELECT ?s WHERE { BIND(kqe:similarity(<urn:not-a-node>, "x") AS ?s) }')
    assert rows == [{}]


def test_search_service_generates_candidates_joined_with_graph_patterns(bio_kb):  # noqa: F811
    query = """
        SELECT ?disease ?score ?rank WHERE {
          SERVICE <urn:kqe:search> {
            ?disease kqe:query "epilepsy" ; kqe:type bio:Disease ; kqe:k 10 ; kqe:score ?score ; kqe:rank ?rank .
          }
          ?disease bio:hasPhenotype ?p . ?p rdfs:label "High forehead" .
        }"""
    rows = select(bio_kb, query)
    assert names(bio_kb, [r["disease"] for r in rows]) == ["OMIM:100003"]
    bm25 = bio_kb.text_index.search("epilepsy", 10, sorted(bio_kb.resolve_types(["Disease"])))
    rank = [iri for iri, _ in bm25].index(rows[0]["disease"]) + 1
    assert (int(rows[0]["rank"]), float(rows[0]["score"])) == (rank, pytest.approx(dict(bm25)[rows[0]["disease"]]))


def test_search_service_takes_any_retrieval_method_and_reports_what_it_ran(bio_kb):  # noqa: F811
    prepared = prepare(bio_kb, """
        SELECT ?d WHERE { SERVICE <urn:kqe:search> { ?d kqe:query "fits"@en ; kqe:method "dense" ; kqe:k 2 ;
                                                       kqe:type "Disease", "Phenotype" } }""", SETTINGS)
    assert prepared.searches == [{"node": "d", "query": "fits", "method": "dense",
                                  "types": ["Disease", "Phenotype"], "k": 2, "results": 2}]
    assert "SERVICE" not in prepared.text and prepared.text.count("<http") == 2


def test_a_search_that_finds_nothing_joins_to_no_rows(bio_kb):  # noqa: F811
    assert select(bio_kb, 'SELECT ?d WHERE { SERVICE <urn:kqe:search> { ?d kqe:query "zzzqqq" } }') == []


@pytest.mark.parametrize("body, message", [
    ('?d kqe:method "bm25"', "non-empty kqe:query"),
    ('?d kqe:query ?text', "string constant"),
    ('?d kqe:query "x" ; kqe:colour "red"', "no parameter kqe:colour"),
    ('?d kqe:query "x" ; kqe:k 0', "between 1 and"),
    ('?d kqe:query "x" ; kqe:k "ten"', "whole number"),
    ('?d kqe:query "x" ; kqe:method "telepathy"', "no retrieval method 'telepathy'"),
    ('"x" kqe:query "x"', "must start with the variable"),
])
def test_search_service_mistakes_are_explained(bio_kb, body, message):  # noqa: F811
    with pytest.raises(SparqlError, match=message):
        prepare(bio_kb, f"SELECT * WHERE {{ SERVICE <urn:kqe:search> {{ {body} }} }}", SETTINGS)


def test_an_unclosed_search_block_is_reported(bio_kb):  # noqa: F811
    with pytest.raises(SparqlError, match="not closed"):
        prepare(bio_kb, 'SELECT * WHERE { SERVICE <urn:kqe:search> { ?d kqe:query "x" ', SETTINGS)


@pytest.mark.parametrize("query", [
    "SELECT * WHERE { SERVICE <http://169.254.169.254/latest/meta-data/> { ?s ?p ?o } }",
    "SELECT * WHERE { SERVICE SILENT <http://evil.example/sparql> { ?s ?p ?o } }",
    "PREFIX ev: <http://evil.example/> SELECT * WHERE { SERVICE ev:sparql { ?s ?p ?o } }",
    "SELECT * WHERE { VALUES ?e { <http://evil.example/> } SERVICE ?e { ?s ?p ?o } }",
    "select * where { service <http://evil.example/sparql> { ?s ?p ?o } }",
    "INSERT { ?s ?p ?o } WHERE { SERVICE <http://evil.example/sparql> { ?s ?p ?o } }",
    "LOAD <http://169.254.169.254/latest/meta-data/> INTO GRAPH <urn:g>",
    "LOAD SILENT <http://169.254.169.254/latest/meta-data/> ; INSERT DATA { <urn:a> <urn:b> <urn:c> }",
])
def test_service_to_a_host_not_on_the_allow_list_is_refused(bio_kb, query):  # noqa: F811
    settings = Settings(server_service_allow="https://query.wikidata.org/sparql")
    with pytest.raises(ServiceNotAllowed, match="refused"):
        prepare(bio_kb, query, settings, update=not query.startswith(("SELECT", "select", "PREFIX")))


def test_load_silent_off_the_allow_list_fails_silently(bio_kb):  # noqa: F811
    """SILENT means a failed load is no error: a refused one runs as the empty update, calling nothing."""
    settings = Settings(server_service_allow="https://query.wikidata.org/sparql")
    prepared = prepare(bio_kb, "LOAD SILENT <http://169.254.169.254/x> INTO GRAPH <urn:g>", settings, update=True)
    assert prepared.text == "" and prepared.services == []


@pytest.mark.parametrize("query", [
    "SELECT * { SERVICE <https://query.wikidata.org/sparql> { ?s ?p ?o SERVICE <https://query.wikidata.org/sparql> "
    "{ ?s ?p ?o } } }",
    "SELECT * { <http://x.example/a#b> ?p ?o SERVICE <https://query.wikidata.org/sparql> { ?s ?p ?o } }",
    "SELECT *\r{ ?s ?p ?o # a comment\r SERVICE <https://query.wikidata.org/sparql> { ?s ?p ?o } }",
    'SELECT * { SERVICE <https://query.wikidata.org/sparql> { ?s ?p ?o } } # ' + "(" * 30,
    'SELECT * { <http://x.example/download> ?p ?o FILTER(' + "(" * 100 + "true" + ")" * 100 + ") "
    "SERVICE <https://query.wikidata.org/sparql> { ?s ?p ?o } }",
])
def test_allowed_federation_in_every_valid_shape_passes(bio_kb, query):  # noqa: F811
    """Nested SERVICE, a '#' inside an IRI, CR-only line ends, 100 nested parentheses: rdflib's own quirks (and
    Python's default recursion limit) no longer refuse them."""
    settings = Settings(server_service_allow="https://query.wikidata.org/sparql")
    assert prepare(bio_kb, query, settings).services == ["https://query.wikidata.org/sparql"]


def test_federation_words_in_strings_do_not_send_a_query_to_the_verifier(bio_kb):  # noqa: F811
    query = 'SELECT ?x { BIND("download" AS ?x) FILTER(' + "(" * 30 + "true" + ")" * 30 + ") }"
    assert prepare(bio_kb, query, SETTINGS).text == query


@pytest.mark.parametrize("update", ["LOAD <http://x.example/a> INTO INTO", "LOAD", "INSERT DATA { } ; LOAD"])
def test_a_malformed_update_mentioning_load_is_a_syntax_error(bio_kb, update):  # noqa: F811
    with pytest.raises(SparqlError, match="SPARQL syntax error") as caught:
        prepare(bio_kb, update, SETTINGS, update=True)
    assert not isinstance(caught.value, ServiceNotAllowed)


def test_service_words_in_strings_and_comments_are_not_calls(bio_kb):  # noqa: F811
    query = 'SELECT ?x WHERE { BIND("SERVICE <http://evil.example/> { }" AS ?x) } # SERVICE <http://evil.example/>'
    assert select(bio_kb, query) == [{"x": "SERVICE <http://evil.example/> { }"}]


def test_an_allowed_service_passes_the_guard(bio_kb):  # noqa: F811
    settings = Settings(server_service_allow="http://a.example/sparql, https://query.wikidata.org/sparql")
    prepared = prepare(bio_kb, "SELECT * { SERVICE <https://query.wikidata.org/sparql> { ?s ?p ?o } }", settings)
    assert prepared.services == ["https://query.wikidata.org/sparql"]


def test_similarity_in_a_kb_without_embeddings_says_what_to_do(tmp_path, jsonl, products_text):
    build_kb(JsonlImporter([jsonl(products_text)]), tmp_path / "kb")
    kb = KnowledgeBase.open(tmp_path / "kb")
    with pytest.raises(SparqlError, match="kqe-rdf kb embed"):
        prepare(kb, 'SELECT * { ?n a kqe:Node BIND(kqe:similarity(?n, "x") AS ?s) }', SETTINGS)


def test_syntax_errors_keep_the_readable_explanation(bio_kb):  # noqa: F811
    with pytest.raises(SparqlError, match="unknown prefix 'foo:'"):
        select(bio_kb, "SELECT ?x WHERE { ?x foo:bar ?y }")


def test_tokenizer_reads_long_strings_escapes_and_iris():
    tokens = tokenize('SELECT * { ?s <urn:x> """a "quoted" } SERVICE""" , \'it\\\'s\' . FILTER(?a<?b) }')
    assert [t.kind for t in tokens] == ["word", "punct", "punct", "var", "iri", "string", "punct", "string",
                                        "punct", "word", "punct", "var", "punct", "var", "punct", "punct"]
