"""SPARQL lives in ``queries/*.rq``; this module loads it and fills in ``VALUES``.

User text never reaches a query by concatenation: terms are serialised by
pyoxigraph (which escapes them) and placed in ``VALUES`` blocks, or bound with
pyoxigraph's ``substitutions``.

>>> from pyoxigraph import NamedNode
>>> q = with_values("SELECT ?s WHERE { #VALUES ?s\\n ?s ?p ?o }", s=[NamedNode("http://ex.org/a")])
>>> "VALUES ?s { <http://ex.org/a> }" in q
True
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Sequence

from pyoxigraph import BlankNode, Literal, NamedNode

from ..core.resources import resource_dir

#: The prefixes every KB knows, in SPARQL and wherever a command takes a CURIE (``--text-property foaf:name``, a
#: node's ``foaf:Person``): ours and the common vocabularies'. A KB adds its domain's and those its source files
#: declare (:attr:`~kqe_rdf.kb.knowledge_base.KnowledgeBase.prefixes`).
PREFIXES = {
    "kqe": "https://w3id.org/kqe/core#",
    "rdf": "http://www.w3.org/1999/02/22-rdf-syntax-ns#",
    "rdfs": "http://www.w3.org/2000/01/rdf-schema#",
    "owl": "http://www.w3.org/2002/07/owl#",
    "skos": "http://www.w3.org/2004/02/skos/core#",
    "xsd": "http://www.w3.org/2001/XMLSchema#",
    "prov": "http://www.w3.org/ns/prov#",
    "schema": "http://schema.org/",
    "dcterms": "http://purl.org/dc/terms/",
    "dc": "http://purl.org/dc/elements/1.1/",
    "foaf": "http://xmlns.com/foaf/0.1/",
    "wd": "http://www.wikidata.org/entity/",
    "wdt": "http://www.wikidata.org/prop/direct/",
}
#: The search functions a SPARQL query may call (kqe_rdf/service/sparql_search.py evaluates them; a remote
#: store refuses them, kqe_rdf/kb/store.py).
BM25_FUNCTION = PREFIXES["kqe"] + "bm25"
SIMILARITY_FUNCTION = PREFIXES["kqe"] + "similarity"

Term = NamedNode | Literal | BlankNode


def _read(name: str, suffix: str) -> str:
    path = resource_dir("queries") / f"{name}{suffix}"
    if not path.is_file():
        raise FileNotFoundError(f"no SPARQL file queries/{name}{suffix}")
    return path.read_text(encoding="utf-8")


@functools.cache
def load(name: str) -> str:
    """The text of ``queries/<name>.rq``."""
    return _read(name, ".rq")


def strip_comments(text: str) -> str:
    """A query without its ``#`` comment lines (what a query template is filled in from).

    >>> strip_comments("# what it returns\\nSELECT ?s WHERE { ?s ?p ?o }\\n")
    'SELECT ?s WHERE { ?s ?p ?o }'
    """
    return "\n".join(line for line in text.splitlines() if not line.startswith("#")).strip()


@functools.cache
def load_update(name: str) -> str:
    """The text of ``queries/<name>.ru`` (SPARQL Update)."""
    return _read(name, ".ru")


def with_values(query: str, **values: Sequence[Term] | Iterable[Term]) -> str:
    """Replace each ``#VALUES ?var`` marker line with a ``VALUES ?var { ... }`` block."""
    for var, terms in values.items():
        marker = f"#VALUES ?{var}"
        if marker not in query:
            raise ValueError(f"query has no {marker} marker")
        block = "VALUES ?%s { %s }" % (var, " ".join(str(t) for t in terms))
        query = query.replace(marker, block, 1)
    return query


def values_block(variables: Sequence[str], rows: Iterable[Iterable[Term | None]]) -> str:
    """``VALUES (?a ?b) { (t1 t2) ... }`` from pyoxigraph terms (serialised, hence escaped, by pyoxigraph).

    >>> values_block(["s"], [[NamedNode("http://ex.org/a")]])
    'VALUES (?s) { (<http://ex.org/a>) }'
    """
    body = " ".join("(" + " ".join("UNDEF" if t is None else str(t) for t in row) + ")" for row in rows)
    return "VALUES (" + " ".join("?" + v for v in variables) + ") { " + body + " }"


def with_rows(query: str, variables: Sequence[str], rows: Iterable[Iterable[Term | None]]) -> str:
    """Replace the ``#VALUES (?a ?b)`` marker with rows of pyoxigraph terms (``None`` → UNDEF).

    >>> with_rows("#VALUES (?a ?b)", ["a", "b"], [[Literal('x"y'), None]])
    'VALUES (?a ?b) { ("x\\\\"y" UNDEF) }'
    """
    marker = "#VALUES (" + " ".join(f"?{v}" for v in variables) + ")"
    if marker not in query:
        raise ValueError(f"query has no {marker} marker")
    return query.replace(marker, values_block(variables, rows), 1)


def expand_curie(curie: str) -> str:
    """``rdfs:label`` → full IRI; full IRIs (with or without <>) pass through."""
    text = curie.strip()
    if text.startswith("<") and text.endswith(">"):
        return text[1:-1]
    if "://" in text or text.startswith("urn:"):
        return text
    prefix, sep, local = text.partition(":")
    if sep and prefix in PREFIXES:
        return PREFIXES[prefix] + local
    raise ValueError(f"unknown prefix in {curie!r}; known prefixes: {', '.join(sorted(PREFIXES))}")
