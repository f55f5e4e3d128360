"""SPARQL over a KB: predeclared prefixes, bound values instead of string pasting, and readable errors."""

from __future__ import annotations

import pytest
from pyoxigraph import Literal, Variable

from kqe_rdf.core.errors import SparqlError


def test_common_and_domain_prefixes_are_predeclared(kb):
    rows = kb.query("""
        SELECT ?name WHERE {
          ?product a skb:Product ; skb:hasBrand ?brand ; rdfs:label ?name .
          ?brand kqe:identifier "nikon" .
        } ORDER BY ?name
    """)
    assert [row["name"].value for row in rows] == [
        "Nikon AF-S 200-500mm f/5.6E Telephoto Zoom Lens",
        "Nikon D500 DSLR Camera Body",
        "Nikon Z fc Mirrorless Camera",
    ]


def test_user_text_is_bound_not_pasted(kb):
    query = "SELECT ?id ?name WHERE { ?node kqe:identifier ?id ; rdfs:label ?name }"
    rows = kb.query(query, substitutions={Variable("id"): Literal("B003")})
    assert [row["name"].value for row in rows] == ["Sony Alpha 7 IV Mirrorless Camera"]
    assert list(kb.query(query, substitutions={Variable("id"): Literal('" } ; DROP ALL #')})) == []


def test_a_substitution_of_an_unselected_variable_is_a_sparql_error(kb):
    with pytest.raises(SparqlError, match=r"SPARQL evaluation failed: .*variable \?id"):
        kb.query("SELECT ?name WHERE { ?node kqe:identifier ?id ; rdfs:label ?name }",
                 substitutions={Variable("id"): Literal("B003")})


def test_ask_and_aggregates(kb):
    assert bool(kb.query('ASK { ?p skb:compatibleWith ?camera . ?camera kqe:identifier "B001" }'))
    rows = list(kb.query("SELECT (COUNT(?p) AS ?n) WHERE { ?p a skb:Product }"))
    assert int(rows[0]["n"].value) == 9


def sparql_error(kb, query: str) -> str:
    with pytest.raises(SparqlError) as failure:
        kb.query(query)
    return str(failure.value)


def test_an_unknown_prefix_is_named(kb):
    message = sparql_error(kb, "SELECT ?p WHERE {\n  ?p a foo:Product .\n}")
    assert message.startswith("SPARQL syntax error at line 2, column")
    assert "unknown prefix 'foo:' — declare it with PREFIX foo: <...>" in message
    assert "\n    ?p a foo:Product .\n" in message  # the offending line, then a caret under it
    assert message.rstrip().endswith("^")


def test_a_misspelt_select_gets_a_suggestion(kb):
    message = sparql_error(kb, "PREFIX ex: <http://example.org/>\nSELEC ?p WHERE { ?p a skb:Product }")
    assert "not 'SELEC' (did you mean SELECT?)" in message


def test_a_missing_brace_is_explained(kb):
    message = sparql_error(kb, "SELECT ?p WHERE { ?p a skb:Product ")
    assert "the query ends before it is complete: check for a missing '}'" in message


def test_an_ungrouped_variable_is_explained(kb):
    query = "SELECT ?brand ?name WHERE { ?p skb:hasBrand ?brand ; rdfs:label ?name }\nGROUP BY ?brand"
    message = sparql_error(kb, query)
    assert "a selected variable is not bound: with GROUP BY, select only grouped variables or aggregates" in message
    assert "ends before it is complete" not in message


def test_other_syntax_errors_say_what_was_expected_and_found(kb):
    message = sparql_error(kb, "SELECT ?p WHERE { ?p a skb:Product } LIMIT ten")
    assert "expected " in message and "but found 'ten'" in message


@pytest.mark.parametrize("query", ["", "  \n\t"])
def test_an_empty_query_is_an_error(kb, query):
    assert sparql_error(kb, query) == "empty SPARQL query"
