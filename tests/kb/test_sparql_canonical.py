"""The verified path's plain text (kqe_rdf/kb/sparql_canonical.py): one reading, whatever the escapes,
comments, quotes and names of the text it was written from; what cannot be written plainly is refused."""

from __future__ import annotations

import pytest
from pyoxigraph import Store

from kqe_rdf.kb.sparql_canonical import NotCanonical, canonical_text
from kqe_rdf.kb.sparql_guard import ServiceNotAllowed, verify_federation

KB = {"bio": "https://w3id.org/kqe/bio#", "rdfs": "http://www.w3.org/2000/01/rdf-schema#"}


def test_the_repro_of_issue_37_reads_as_oxigraph_reads_it():
    text = ('SELECT * { BIND("p\\u0022q" AS ?z) VALUES ?v { <urn:x\\u0041#> } '
            'SERVICE <http://127.0.0.1:9/sparql> { ?x ?p ?o } } #"')
    plain = canonical_text(text, {})
    assert plain == ('SELECT * { BIND("p\\"q" AS ?z) VALUES ?v { <urn:xA#> } '
                     'SERVICE <http://127.0.0.1:9/sparql> { ?x ?p ?o } }')
    with pytest.raises(ServiceNotAllowed, match="not on this server's allow-list"):
        verify_federation(text, [], {}, strict=True)


@pytest.mark.parametrize("text, plain", [
    ("select * { ?s rdfs:label 'it''s' }", None),  # a bad string: two strings side by side, left for the parser
    ("SELECT * { ?s rdfs:label '''a 'b' c''' }", 'SELECT * { ?s <http://www.w3.org/2000/01/rdf-schema#label> "a \'b\' c" }'),
    ('SELECT * { ?s ?p """x\ny""" }', 'SELECT * { ?s ?p "x\\ny" }'),
    ("SELECT * { ?s ?p 'a\\tb' } # c\rLIMIT 1", 'SELECT * { ?s ?p "a\tb" } LIMIT 1'),
    ("PREFIX ex: <http://e/> SELECT * { ?s ex:a\\.b ?o }", "SELECT * { ?s <http://e/a.b> ?o }"),
    ("SELECT * { ?s ?p \"x\"@en-GB, \"1\"^^xsd:int }", None),
    ("SELECT * { _:b ?p ?o FILTER(?o<=1&&?o>=-2) }", "SELECT * { _:b ?p ?o FILTER(?o<=1&&?o>=-2) }"),
])
def test_plain_texts(text, plain):
    xsd = {"xsd": "http://www.w3.org/2001/XMLSchema#"}
    if plain is None:  # only: the same answers from Oxigraph as the text itself
        try:
            expected = sorted(map(str, Store().query(text, prefixes={**KB, **xsd})))
        except SyntaxError:
            return
        assert sorted(map(str, Store().query(canonical_text(text, {**KB, **xsd})))) == expected
        return
    assert canonical_text(text, {**KB, **xsd}) == plain


def test_a_keyword_glued_to_a_name_becomes_the_name_s_iri():
    """``SILENTx:sparql`` is one prefixed name here; written as its IRI, no reader can split it into SILENT x:."""
    text = "PREFIX SILENTx: <http://allowed/> PREFIX x: <http://evil/> SELECT * { SERVICE SILENTx:sparql { } }"
    assert canonical_text(text, {}) == "SELECT * { SERVICE <http://allowed/sparql> { } }"


@pytest.mark.parametrize("text, words", [
    ("SELECT * { ?s ?p \"a\\qb\" }", "bad escape"),
    ("SELECT * { ?s ?p \"\\uD800\" }", "not a Unicode character"),
    ("SELECT * { <urn:a\\u003E> ?p ?o }", "IRIs may not hold"),
    ("SELECT * { ?s ?p \"\\\\u0041\" }", "backslash followed by"),
    ("\\u0053ELECT * {}", "unexpected character"),
    ("SELECT * { ?s foo:bar ?o }", "unknown prefix 'foo:'"),
    ("SELECT * { ?s ?p ?o }\u00a0", "unexpected character"),
])
def test_what_cannot_be_written_plainly_is_refused_naming_why(text, words):
    with pytest.raises(NotCanonical, match=words):
        canonical_text(text, KB)
