"""Search inside SPARQL, and the guard on what a query may call out to.

Oxigraph has no full-text or vector search in SPARQL (its issue #48); Jena
text, GraphDB connectors and Stardog's ``textMatch`` do. Here a query can

* *score* nodes it already has with two functions, usable in ``BIND``,
  ``FILTER`` and ``ORDER BY``::

      kqe:bm25(?node, "text")        # BM25 of the node's document (Tantivy or Milvus) (0.0 when it does not match)
      kqe:similarity(?node, "text")  # cosine of the node's embedding and the text's (unbound if not embedded)

* *generate* candidates with any retrieval method and join them with graph
  patterns, by a ``SERVICE <urn:kqe:search>`` block that is evaluated here and
  replaced by ``VALUES`` before Oxigraph sees the query::

      SELECT ?disease ?name ?score WHERE {
        SERVICE <urn:kqe:search> {
          ?disease kqe:query "progressive muscle weakness in childhood" ;
                   kqe:method "hybrid" ; kqe:type bio:Disease ; kqe:k 50 ;
                   kqe:score ?score ; kqe:rank ?rank .
        }
        ?disease bio:hasPhenotype/rdfs:label "Seizure" ; rdfs:label ?name .
      } ORDER BY DESC(?score)

  ``kqe:query`` (required) is a string; ``kqe:method`` one of the retrieval
  methods (default ``bm25``); ``kqe:type`` a class (repeatable, by IRI or
  local name); ``kqe:k`` the candidates wanted (default 100); ``kqe:score`` and
  ``kqe:rank`` (1-based) bind variables. The parameters are constants: the
  search runs once, before the query.

Every other ``SERVICE`` must name an endpoint on the allow-list: pyoxigraph
itself would fetch any URL a query names, which is server-side request forgery
when the query comes from the network (an update's ``LOAD <url>`` is held to
the same list). That check is :func:`kqe_rdf.kb.sparql_guard.verify_federation`,
which reads the text that is finally executed with a real SPARQL parser and
fails closed; the tokenizer here only finds the search blocks to replace.
Size limits (:func:`kqe_rdf.kb.sparql_guard.check_limits`) are applied first, so
no over-deep query reaches Oxigraph's recursive parser.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field

from pyoxigraph import Literal, NamedNode

from ..core.errors import KqeError, SparqlError
from ..kb.queries import BM25_FUNCTION, PREFIXES, SIMILARITY_FUNCTION, values_block  # noqa: F401 - re-exported
from ..kb.sparql import explain_syntax_error
from ..kb.sparql_lexer import Token, declared_prefixes, resolve, tokenize, unquote  # noqa: F401 - tokenize re-exported
from ..kb.sparql_guard import (QueryTooComplex, ServiceNotAllowed, allowed_endpoints, check_limits,  # noqa: F401
                               decode_escapes, verify_federation)  # (re-exported)

KQE = PREFIXES["kqe"]
SEARCH_SERVICE = "urn:kqe:search"
XSD_DOUBLE = NamedNode(PREFIXES["xsd"] + "double")
XSD_INTEGER = NamedNode(PREFIXES["xsd"] + "integer")
MAX_SEARCH_K = 10000
#: The graph the server marks each update in (queries/update_commit_mark.ru): the server's own, named by no client.
COMMIT_MARKS = "urn:kqe:update-commits"
RESERVED = (f"the graph <{COMMIT_MARKS}> is the server's own (it marks committed updates): no query or update may "
            "name it")


def refuse_reserved(text: str, prefixes: dict[str, str]) -> None:
    """A 400 for a text that names the mark graph, however it is spelled (an IRI, a prefixed name, escapes, a BASE
    that ``<>`` stands for). One computed at run time (``IRI("…")``) is not refused: it finds the graph empty, and
    what it writes there is dropped in its own transaction (:func:`~.jobs.update_job`)."""
    for reading in {text, decode_escapes(text)}:
        tokens = tokenize(reading)
        known = {**prefixes, **declared_prefixes(tokens)}
        for i, t in enumerate(tokens):
            iri = resolve(t, known)
            if iri == COMMIT_MARKS or (iri is not None and i and tokens[i - 1].text.upper() == "BASE"
                                       and iri.partition("#")[0] == COMMIT_MARKS):
                raise SparqlError(RESERVED)


def closing_brace(tokens: list[Token], open_at: int) -> int:
    """The index of the ``}`` that closes the group opened at or after ``open_at``."""
    depth = 0
    for j in range(open_at, len(tokens)):
        if tokens[j].text == "{":
            depth += 1
        elif tokens[j].text == "}":
            depth -= 1
            if depth == 0:
                return j
    raise SparqlError("a SERVICE block is not closed: check for a missing '}'")


@dataclass
class SearchCall:
    """One ``SERVICE <urn:kqe:search>`` block: what to search for, and which variables it binds."""

    node: str
    text: str = ""
    method: str = "bm25"
    types: list[str] = field(default_factory=list)
    k: int = 100
    score: str | None = None
    rank: str | None = None

    def as_dict(self) -> dict:
        return {"node": self.node, "query": self.text, "method": self.method, "types": self.types, "k": self.k}


def _search_call(body: list[Token], prefixes: dict[str, str]) -> SearchCall:
    """Read ``?node kqe:query "..." ; kqe:method "..." ; ...`` (constants only)."""
    where = "SERVICE <urn:kqe:search>"
    if not body or body[0].kind != "var":
        raise SparqlError(f"{where} must start with the variable to bind, e.g. ?node kqe:query \"text\"")
    call = SearchCall(node=body[0].text[1:])
    i = 1
    while i < len(body):
        predicate = resolve(body[i], prefixes)
        if predicate is None or not predicate.startswith(KQE):
            raise SparqlError(f"{where}: expected kqe:query, kqe:method, kqe:type, kqe:k, kqe:score or kqe:rank, "
                              f"found {body[i].text!r}")
        name = predicate[len(KQE):]
        i += 1
        while True:
            if i >= len(body):
                raise SparqlError(f"{where}: kqe:{name} has no value")
            value = body[i]
            i += 1
            if i + 1 < len(body) and body[i].text == "@":  # a language tag on the text: ignored
                i += 2
            _set(call, name, value, prefixes)
            if i < len(body) and body[i].text == ",":
                i += 1
                continue
            break
        if i < len(body) and body[i].text in (";", "."):
            i += 1
    if not call.text.strip():
        raise SparqlError(f"{where} needs a non-empty kqe:query \"text\"")
    return call


def _set(call: SearchCall, name: str, value: Token, prefixes: dict[str, str]) -> None:
    where = f"SERVICE <urn:kqe:search>: kqe:{name}"
    if name in ("score", "rank"):
        if value.kind != "var":
            raise SparqlError(f"{where} takes a variable, e.g. kqe:{name} ?{name}")
        setattr(call, name, value.text[1:])
    elif name in ("query", "method"):
        if value.kind != "string":
            raise SparqlError(f"{where} takes a string constant (variables are not supported here)")
        setattr(call, "text" if name == "query" else "method", unquote(value.text))
    elif name == "type":
        iri = resolve(value, prefixes) or (unquote(value.text) if value.kind == "string" else None)
        if iri is None:
            raise SparqlError(f"{where} takes a class IRI or a class name, found {value.text!r}")
        call.types.append(iri)
    elif name == "k":
        if value.kind != "number" or not value.text.lstrip("+").isdigit():
            raise SparqlError(f"{where} takes a whole number, found {value.text!r}")
        call.k = int(value.text)
        if not 1 <= call.k <= MAX_SEARCH_K:
            raise SparqlError(f"{where} must be between 1 and {MAX_SEARCH_K}")
    else:
        raise SparqlError(f"SERVICE <urn:kqe:search> has no parameter kqe:{name}; "
                          "use kqe:query, kqe:method, kqe:type, kqe:k, kqe:score, kqe:rank")


def _values_block(call: SearchCall, hits) -> str:
    """The ``VALUES`` block that replaces a search call."""
    variables = [call.node] + [v for v in (call.score, call.rank) if v]
    rows = []
    for hit in hits:
        terms = [NamedNode(hit.iri)]
        if call.score:
            terms.append(Literal(repr(float(hit.score)), datatype=XSD_DOUBLE))
        if call.rank:
            terms.append(Literal(str(hit.rank), datatype=XSD_INTEGER))
        rows.append(terms)
    return values_block(variables, rows)


@dataclass
class Prepared:
    """A query ready for Oxigraph: search calls replaced, SERVICE calls checked."""

    text: str
    searches: list[dict] = field(default_factory=list)
    services: list[str] = field(default_factory=list)  # SERVICE endpoints and LOAD sources it calls
    loads: list[str] = field(default_factory=list)  # of which LOAD sources
    uses_similarity: bool = False
    dataset: bool = False  # the query names its dataset (FROM / FROM NAMED)
    strict: bool = True  # on the verified path (the text is the verifier's plain form: sparql_canonical)


def prepare(kb, query: str, settings, search: Callable | None = None, update: bool = False,
            strict: bool = True) -> Prepared:
    """Run ``SERVICE <urn:kqe:search>`` blocks, then check the text that will run: size limits and federation.

    ``search(call) -> hits`` runs one call (default: the KB's retrieval pipeline).
    Raises :class:`QueryTooComplex` for a query over the size limits and
    :class:`ServiceNotAllowed` for a SERVICE or LOAD that is not verified to be
    on the allow-list (``update``: the text is a SPARQL Update). ``strict``: the verified path, for SPARQL
    evaluated where connections can be opened (:func:`~kqe_rdf.kb.sparql_guard.verify_federation`); pass False only when
    it is evaluated on an :class:`~kqe_rdf.service.isolation.OfflineThread` whose isolation is active.
    """
    if not query.strip():
        raise SparqlError("empty SPARQL query")
    what = "update" if update else "query"
    check_limits(query, settings, what)
    refuse_reserved(query, kb.prefixes)
    tokens = tokenize(query)
    prefixes = {**kb.prefixes, **declared_prefixes(tokens)}
    search = search or functools.partial(run_search, kb, settings)
    out = Prepared(query, strict=strict)
    edits: list[tuple[int, int, str]] = []
    i = 0
    while i < len(tokens):
        t = tokens[i]
        if t.kind in ("pname", "iri") and resolve(t, prefixes) == SIMILARITY_FUNCTION:
            out.uses_similarity = True
        elif t.kind == "word" and t.text.upper() == "FROM":
            out.dataset = True
        if not (t.kind == "word" and t.text.upper() == "SERVICE"):
            i += 1
            continue
        j = i + 1
        if j < len(tokens) and tokens[j].kind == "word" and tokens[j].text.upper() == "SILENT":
            j += 1
        if j >= len(tokens) or resolve(tokens[j], prefixes) != SEARCH_SERVICE:
            i += 1  # any other SERVICE is for verify_federation below, on the text that will run
            continue
        if j + 1 >= len(tokens) or tokens[j + 1].text != "{":
            raise SparqlError("SERVICE <urn:kqe:search> must be followed by a { ... } block")
        close = closing_brace(tokens, j + 1)
        call = _search_call(tokens[j + 2:close], prefixes)
        hits = search(call)
        out.searches.append({**call.as_dict(), "results": len(hits)})
        edits.append((t.start, tokens[close].end, _values_block(call, hits)))
        i = close + 1
    text = measured = query
    for start, end, replacement in reversed(edits):
        text = text[:start] + replacement + text[end:]
        # The generated VALUES blocks are flat; the rest of the text is measured again, as it now runs.
        measured = measured[:start] + "VALUES ?_ {}" + measured[end:]
    if edits:
        check_limits(measured, settings, what)
    verified = verify_federation(text, allowed_endpoints(settings.server.service_allow), kb.prefixes, update, strict)
    out.text, out.services, out.loads = verified.text, verified.services + verified.loads, verified.loads
    if out.uses_similarity and not kb.has_embeddings:
        raise SparqlError("kqe:similarity needs node embeddings, and this KB has none: run `kqe-rdf kb embed`")
    return out


def run_search(kb, settings, call: SearchCall, build: Callable | None = None):
    """The hits of one search call, through the same pipelines as ``kqe-rdf search``; ``build(method, k, types)``
    gives the pipeline (a server worker's keeps them built), else it is built for the call."""
    from ..methods.registry import pipeline

    try:
        stage = (build(call.method, call.k, call.types or None) if build
                 else pipeline(call.method, kb, settings, call.k, call.types or None))
        return stage.search(call.text)
    except KqeError as exc:
        raise SparqlError(f"SERVICE <urn:kqe:search>: {exc}") from None


class SearchFunctions:
    """``kqe:bm25`` and ``kqe:similarity`` for one KB, as pyoxigraph custom functions.

    Scores are cached per (node, text): a function in ``ORDER BY`` is called
    once per solution, often with the same text thousands of times. BM25 is
    exact: the top of a per-text search answers most calls, and a search
    restricted to the node answers the rest.
    """

    def __init__(self, kb, top: int = 1000) -> None:
        self.kb = kb
        self.top = top

    @functools.cached_property
    def functions(self) -> dict[NamedNode, Callable]:
        return {NamedNode(BM25_FUNCTION): self.bm25, NamedNode(SIMILARITY_FUNCTION): self.similarity}

    @functools.lru_cache(maxsize=256)
    def _top_bm25(self, text: str) -> tuple[dict[str, float], bool]:
        hits = self.kb.text_index.search(text, self.top)
        return dict(hits), len(hits) < self.top

    @functools.lru_cache(maxsize=65536)
    def bm25_score(self, iri: str, text: str) -> float:
        top, complete = self._top_bm25(text)
        if iri in top or complete:
            return top.get(iri, 0.0)
        return self.kb.text_index.scores_of(text, [iri]).get(iri, 0.0)  # a search restricted to the node

    def bm25(self, node, text):
        if not isinstance(node, NamedNode) or not isinstance(text, Literal):
            return None
        return Literal(repr(self.bm25_score(node.value, text.value)), datatype=XSD_DOUBLE)

    def similarity(self, node, text):
        if not isinstance(node, NamedNode) or not isinstance(text, Literal) or not text.value.strip():
            return None
        vector = self.kb.dense.vector(node.value)
        if vector is None:
            return None
        return Literal(repr(float(vector @ self.kb.embed_query(text.value))), datatype=XSD_DOUBLE)


def execute(kb, prepared: Prepared, functions: SearchFunctions, default_graphs: list[str] | None = None,
            named_graphs: list[str] | None = None, base_iri: str | None = None, union: bool = True):
    """Run a prepared query on the KB's store with the search functions; readable errors.

    The dataset is the protocol's graphs if given, else the query's ``FROM`` / ``FROM NAMED``, else every graph
    as the default graph (``union``; else the store's default graph). Relative IRIs resolve against ``base_iri``.
    Results are read lazily: a query that calls SERVICE endpoints is read through
    :func:`kqe_rdf.service.federation.consume`, which reports their failures.
    """
    try:
        return evaluate(kb, prepared, functions, default_graphs, named_graphs, base_iri, union)
    except (OSError, ValueError, RuntimeError) as exc:
        raise SparqlError(f"SPARQL evaluation failed: {exc}") from None


def evaluate(kb, prepared: Prepared, functions: SearchFunctions, default_graphs: list[str] | None = None,
             named_graphs: list[str] | None = None, base_iri: str | None = None, union: bool = True):
    """:func:`execute` without its reading of evaluation errors (pyoxigraph's own exceptions pass)."""
    options: dict = {"prefixes": kb.prefixes, "custom_functions": functions.functions, "base_iri": base_iri}
    if default_graphs or named_graphs:
        options["default_graph"] = [NamedNode(g) for g in default_graphs or []] or None
        options["named_graphs"] = [NamedNode(g) for g in named_graphs or []] or None
    elif union and not prepared.dataset:
        options["use_default_graph_as_union"] = True
    try:
        return kb.store.query(prepared.text, **options)
    except SyntaxError as exc:
        raise SparqlError(explain_syntax_error(prepared.text, str(exc))) from None
