"""What a SPARQL query or update must pass before Oxigraph sees it: size limits and the federation guard.

Both guard the process that runs pyoxigraph against text from the network.

**Limits.** pyoxigraph parses and evaluates recursively on the native stack,
and a few kilobytes of nesting overflow it: the process dies (SIGSEGV), taking
the server with it. :func:`check_limits` measures the text's code — strings and
comments blanked by the lexer (they hold no structure, so 400 ``urn:uuid:`` IRIs
or ISO dates in a VALUES block count nothing), IRIs kept unless they hold one
name (an IRI read as code is a comparison, so its brackets count) — and
refuses a query whose nesting
of ``( { [``, run of unary ``!``, or count of operators and keywords that build
long left-deep chains is over the limits in :class:`~kqe_rdf.core.config.Settings`.

**Federation.** pyoxigraph evaluates ``SERVICE <url>`` (and an update's
``LOAD <url>``) itself, over HTTP, to any URL: server-side request forgery
when the query comes from the network. It has no hook to veto a call and no
API that shows how it parsed a query. Two regimes (issue 37):

* **No allow-list** (the default): SPARQL is evaluated on a thread in a network
  namespace of its own (:mod:`kqe_rdf.service.isolation`), where no connection can be opened.
  The check below still refuses, with a reason, a text that visibly mentions
  SERVICE or LOAD, but nothing depends on it: what it misses fails to connect.
* **The verified path** (an allow-list, or no isolation on this machine):
  :func:`verify_federation` with ``strict`` parses *every* text, whatever it
  mentions, and what runs is the text it read: the query written anew from its
  tokens in a plain form (:mod:`.sparql_canonical`: escapes decoded, one quote
  kind, no comments, prefixed names as full IRIs), so that no disagreement
  between the verifier's reading and Oxigraph's can reach the network.

The checks on a text (both regimes; without ``strict`` only for a text that
mentions SERVICE or LOAD, rules 1 and 2 then standing in for the plain form):

1. ``\\uXXXX`` / ``\\UXXXXXXXX`` escapes are decoded over the whole text
   (repeatedly, in case an escape spells another escape). If the result does
   not contain ``service`` or ``load`` anywhere (any case, even in a string or
   comment), nothing can be fetched, and the text goes to Oxigraph unchanged.
2. Otherwise the text that will run is the *decoded* text with comments
   blanked out, and it may hold no escape any more: rdflib and Oxigraph then
   read the very same characters (Oxigraph decodes escapes only inside
   tokens, rdflib everywhere; rdflib ends a comment at a line feed only,
   Oxigraph at a carriage return too: blanked by the lexer, which ends it as
   Oxigraph does, no comment is left for them to disagree on).
3. rdflib must parse it (query or update grammar), and every SERVICE pattern
   and LOAD anywhere in the algebra — EXISTS, subqueries, OPTIONAL, MINUS,
   UNION, an update's WHERE — must name a constant IRI that is exactly on the
   allow-list (no variables, no BASE).
4. Cross-check: every ``service`` / ``load`` in the text must be accounted for
   by a SERVICE pattern or LOAD rdflib found, or by a string, IRI, name or
   variable it read; one left over means the parsers might disagree, so the
   query is refused.
5. No name may begin with a keyword that leads to a call (``SERVICE``,
   ``SILENT``, ``LOAD``, ``INTO``, ``GRAPH``). Oxigraph's keywords need no word
   boundary: it reads ``SILENTx:sparql`` as ``SILENT`` + ``x:sparql`` where
   rdflib reads one prefixed name, so the two would call different endpoints.

Anything that cannot be verified is refused: a text rdflib cannot parse with
:class:`UnparsableFederation` (HTTP 400, a syntax error to the client), a
RecursionError with :class:`ServiceNotAllowed` (HTTP 403). A ``LOAD SILENT``
from a source off the allow-list is a load that failed silently: an update of
only such loads runs as the empty update.
"""

from __future__ import annotations

import contextlib
import re
import sys
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from ..core.errors import SparqlError
from .sparql_lexer import tokenize, tokenize_all


class ServiceNotAllowed(SparqlError):
    """A SERVICE call or LOAD that is not on the allow-list, or that could not be verified not to be."""


class UnparsableFederation(SparqlError):
    """A query or update mentioning SERVICE/LOAD that the verifying parser cannot read: refused as a syntax error."""


class QueryTooComplex(SparqlError):
    """A query over the size limits that keep pyoxigraph from overflowing its stack."""


# ---------------------------------------------------------------- escapes

_ESCAPE = re.compile(r"\\u([0-9A-Fa-f]{4})|\\U([0-9A-Fa-f]{8})")
_ANY_ESCAPE = re.compile(r"\\[uU][0-9A-Fa-f]{4}")


def decode_escapes(text: str) -> str:
    """SPARQL codepoint escapes decoded once over the whole text (SPARQL 1.1 §19.2); invalid ones kept.

    >>> decode_escapes(r"SERVIC\\u0045 <x\\U0000003e")
    'SERVICE <x>'
    """
    def one(m: re.Match) -> str:
        code = int(m.group(1) or m.group(2), 16)
        if code > 0x10FFFF or 0xD800 <= code <= 0xDFFF:
            return m.group(0)
        return chr(code)

    return _ESCAPE.sub(one, text)


def _all_decodings(text: str, rounds: int = 8) -> Iterable[str]:
    yield text
    for _ in range(rounds):
        decoded = decode_escapes(text)
        if decoded == text:
            return
        yield decoded
        text = decoded
    yield "service load"  # still changing after `rounds` decodings: treat as suspicious


_FEDERATION_WORD = re.compile(r"service|load", re.I)
_DATA_TOKENS = ("string", "comment", "ws")


def mentions_federation(text: str) -> bool:
    """Whether ``service`` or ``load`` appears outside strings and comments, in the text or in any decoding of its
    escapes (a word in a string, "download", calls nothing; each decoding is lexed on its own, so an escape that
    would end a string early only makes more text count as code)."""
    return any(_FEDERATION_WORD.search(token.text) for t in _all_decodings(text)
               if _FEDERATION_WORD.search(t) for token in tokenize_all(t) if token.kind not in _DATA_TOKENS)


# ---------------------------------------------------------------- limits


@dataclass
class Shape:
    """Raw-text measures of a query that bound how deep pyoxigraph recurses on it."""

    depth: int = 0          # deepest nesting of ( { [ together
    negations: int = 0      # longest run of ! (whitespace between allowed)
    logical: int = 0        # || and && (and every | for property-path alternatives)
    arithmetic: int = 0     # + * everywhere, - and / outside absolute IRIs
    patterns: int = 0       # UNION, OPTIONAL, MINUS keywords (and those words anywhere)


# An IRI written <scheme://...> is opaque: read as code, "scheme:" would be followed by "//", which is never
# valid, so Oxigraph can only read it as an IRI (or fail). Only then are its / and - not counted.
_OPAQUE_IRI = re.compile(r"<[A-Za-z][A-Za-z0-9+.\-]*://[^<>\"{}|^`\\\x00-\x20]*>")
_NEGATIONS = re.compile(r"!(?:\s*!)*")
_LOGICAL = re.compile(r"\|\||&&|\|")
_PATTERN_WORDS = re.compile(r"union|optional|minus", re.I)


# What an IRI token holds when Oxigraph could read it as code (``?a<x:y>1``, a comparison) and it would still
# be one name: then none of its characters is an operator or a bracket.
_ONE_NAME = re.compile(r"[A-Za-z_][\w.\-]*(?::[\w.\-:%]*)?")


def code_of(text: str) -> str:
    """The text with strings, comments and IRIs that hold one name blanked (same length): what the size limits
    measure. Other IRIs stay, as they may be read as code (``?a<((?b>1))`` is a comparison to Oxigraph)."""
    out = list(text)
    for token in tokenize_all(text):
        if token.kind in ("string", "comment") or (token.kind == "iri" and _ONE_NAME.fullmatch(token.text[1:-1])):
            out[token.start:token.end] = " " * (token.end - token.start)
    return "".join(out)


def measure(text: str) -> Shape:
    """The shape of the text's code: brackets, operators and pattern keywords outside strings and comments."""
    text = code_of(text)
    shape = Shape()
    depth = 0
    for ch in text:
        if ch in "({[":
            depth += 1
            if depth > shape.depth:
                shape.depth = depth
        elif ch in ")}]" and depth:
            depth -= 1
    shape.negations = max((m.group().count("!") for m in _NEGATIONS.finditer(text)), default=0)
    shape.logical = len(_LOGICAL.findall(text))  # `||` is one operator, as `&&` is, and a path's `|` one too
    outside = _OPAQUE_IRI.sub(" ", text)
    shape.arithmetic = text.count("+") + text.count("*") + outside.count("-") + outside.count("/")
    shape.patterns = len(_PATTERN_WORDS.findall(text))
    return shape


_LIMITS = (("depth", "nesting depth of ( { [", "server_max_query_depth"),
           ("negations", "run of '!' operators", "server_max_query_negations"),
           ("logical", "count of '||', '&&' and '|' operators", "server_max_query_logical_operators"),
           ("arithmetic", "count of '+', '-', '*' and '/' operators", "server_max_query_arithmetic_operators"),
           ("patterns", "count of UNION, OPTIONAL and MINUS", "server_max_query_patterns"))


def check_limits(text: str, settings, what: str = "query") -> Shape:
    """Raise :class:`QueryTooComplex` (naming the setting) when the text is over a limit."""
    if len(text) > settings.server.max_query_chars:
        raise QueryTooComplex(f"{what} length {len(text):,} characters exceeds the limit of "
                              f"{settings.server.max_query_chars:,} (server_max_query_chars)")
    shape = measure(text)
    for name, label, setting in _LIMITS:
        value, limit = getattr(shape, name), getattr(settings.server, setting.removeprefix("server_"))
        if value > limit:
            raise QueryTooComplex(f"{what} {label} {value:,} exceeds the limit of {limit:,} ({setting}); "
                                  "pyoxigraph would overflow its stack on much more — simplify the query")
    return shape


# ---------------------------------------------------------------- federation


@dataclass
class Verified:
    """The text to run and the endpoints it calls (SERVICE) or fetches (LOAD)."""

    text: str
    services: list[str] = field(default_factory=list)
    loads: list[str] = field(default_factory=list)


def _blank_comments(text: str) -> str:
    """Comments replaced by spaces (same length, so error positions stay right).

    The tokenizer only chooses *which* text is verified and run — the same text is
    both — so a mistake here can change a query's meaning, never let a call through.
    """
    out = list(text)
    for token in tokenize_all(text):
        if token.kind == "comment":
            out[token.start:token.end] = " " * (token.end - token.start)
    return "".join(out)


def _walk(node, visit, key=None) -> None:
    """Visit every node of an rdflib parse tree or algebra (CompValues, lists, ParseResults)."""
    stack = [(node, key)]
    seen: set[int] = set()
    while stack:
        item, key = stack.pop()
        if isinstance(item, str):
            visit(item, key)
            continue
        if id(item) in seen:
            continue
        seen.add(id(item))
        name = getattr(item, "name", None)
        if isinstance(name, str) and isinstance(item, Mapping) and type(item).__name__ != "ParseResults":
            visit(item, "#node")
        if type(item).__name__ == "ParseResults":  # registered as a Mapping, but its items are its list
            stack.extend((v, key) for v in list(item))
        elif isinstance(item, Mapping):
            stack.extend((v, k) for k, v in item.items())
        elif isinstance(item, (list, tuple, set, frozenset)):
            stack.extend((v, key) for v in item)
        elif hasattr(item, "algebra"):  # rdflib's Query / Update objects
            stack.append((item.algebra, None))


# Leaves of rdflib's parse tree that repeat other text (not counted when checking every word is accounted for).
_COPIES = {"service_string"}


def _accounted(parsed) -> dict[str, int]:
    """How many ``service`` / ``load`` the parse tree accounts for: patterns, LOADs, and words in its leaves."""
    counts = {"service": 0, "load": 0}

    def visit(item, key):
        if key == "#node":
            if item.name == "ServiceGraphPattern":
                counts["service"] += 1
            elif item.name == "Load":
                counts["load"] += 1
            return
        if key in _COPIES:
            return
        for word in counts:
            counts[word] += item.lower().count(word)

    _walk(parsed, visit)
    return counts


def _calls(trees) -> tuple[list, list, bool]:
    """SERVICE endpoints and LOAD sources anywhere in the trees, and whether a BASE is declared."""
    services, loads, base = [], [], [False]

    def visit(item, key):
        if key != "#node":
            return
        if item.name == "ServiceGraphPattern":
            services.append(item.get("term"))
        elif item.name == "Load":
            loads.append(item.get("iri"))
        elif item.name == "Base":
            base[0] = True

    for tree in trees:
        _walk(tree, visit)
    return services, loads, base[0]


# Keywords after which an endpoint or a graph name follows; Oxigraph splits them off a name glued to them.
_CALL_KEYWORDS = ("SERVICE", "SILENT", "LOAD", "INTO", "GRAPH")


def glued_keyword(text: str) -> str | None:
    """The first prefixed name or bare word that starts with a call keyword and goes on, if any.

    Such a token is read as one name by rdflib and as the keyword plus a name by Oxigraph.

    >>> glued_keyword("PREFIX SILENTx: <a:> SELECT * { SERVICE SILENTx:sparql { ?s ?p ?o } }")
    'SILENTx:'
    >>> glued_keyword('SELECT * { SERVICE SILENT <a:b> { ?graphx ?p "LOADx:y" } }') is None
    True
    """
    for token in tokenize(text):
        if token.kind in ("pname", "word"):
            upper = token.text.upper()
            if any(upper.startswith(k) and len(upper) > len(k) for k in _CALL_KEYWORDS):
                return token.text
    return None


def _only_silent_loads(parsed) -> bool:
    """Whether every operation of a parsed update is a ``LOAD SILENT``."""
    operations = list(parsed.request)
    return bool(operations) and all(op.name == "Load" and "silent" in op for op in operations)  # get() makes one up


@contextlib.contextmanager
def _service_patterns_from_their_own_text():
    """rdflib copies each SERVICE pattern's text by searching the whole query for a SERVICE pattern again: on a
    SERVICE nested in another that recurses without end, and a ``#`` inside an IRI before it reads as a comment.
    The copy is only for rdflib's own evaluation, which the verifier never runs: it is left out while parsing.
    The recursion limit is raised meanwhile: 30 nested parentheses went past Python's default."""
    from rdflib.plugins.sparql import parser
    from rdflib.plugins.sparql.parserutils import CompValue, ParamValue

    comp = parser.ServiceGraphPattern

    def post_parse(_instring, _loc, tokens):
        out = CompValue(comp.name)
        for t in tokens:
            if isinstance(t, ParamValue):
                if t.isList:
                    out.setdefault(t.name, []).append(t.tokenList)
                else:
                    out[t.name] = t.tokenList
        return out

    with _PATCH_LOCK:
        comp.postParse = post_parse
        limit = sys.getrecursionlimit()
        sys.setrecursionlimit(max(limit, VERIFIER_RECURSION))
        try:
            yield
        finally:
            sys.setrecursionlimit(limit)
            del comp.postParse


_PATCH_LOCK = threading.Lock()
#: Python frames rdflib's parser may use while verifying: about 35 a level of nesting, and the size limits allow
#: 128 levels (Python-to-Python calls take no native stack, so this is safe on an 8 MiB main thread too).
VERIFIER_RECURSION = 12_000


def _unverified(reason: str) -> ServiceNotAllowed:
    return ServiceNotAllowed(f"the query mentions SERVICE/LOAD and could not be verified to call only "
                             f"allow-listed endpoints ({reason}); refused")


def verify_federation(text: str, allowed: Iterable[str], prefixes: Mapping[str, str] | None = None,
                      update: bool = False, strict: bool = False) -> Verified:
    """The text to execute, once every SERVICE and LOAD in it is verified to be on ``allowed``.

    ``strict`` (the verified path: a SERVICE allow-list, or no network isolation): every text is parsed, and
    what runs is the text the verifier read, written anew from its tokens
    (:func:`~.sparql_canonical.canonical_text`), whatever it mentions. Otherwise (SPARQL evaluated where no
    connection can be opened, :mod:`kqe_rdf.service.isolation`) only a text that mentions SERVICE or LOAD is
    read, so that such calls are refused with a reason rather than failing to connect: the text as Oxigraph reads it (the
    plain form) when it can be written so — then that is verified and runs, as on the verified path — and
    the raw text with its escapes decoded too. Raises :class:`ServiceNotAllowed`
    (see the module docstring for the rules).
    """
    from .sparql_canonical import NotCanonical, canonical_text

    allowed = frozenset(allowed)
    if not strict and not _may_call(text):
        return Verified(text)  # rule 1: no keyword to call with, however the text is read (a regex, no lexing)
    try:
        plain = canonical_text(text, prefixes or {})
    except NotCanonical:
        if strict:
            _refuse_glued(text)  # "SERVICE:x" is an undeclared prefix here: say what it looks like
            raise
        plain = None
    if strict or (plain is not None and mentions_federation(plain)):
        # Oxigraph's reading (escapes decoded inside their tokens, as the plain form has them) calls out: that
        # reading is verified and run, however the raw text reads (issue 49: `BIND("p\u0022q" ...) ... #"`).
        verified = _verified(plain, allowed, prefixes, update)
        if verified.services or verified.loads:
            _refuse_glued(text)  # the plain text holds no prefixed name; this only says why a call looks wrong
        return verified
    if not mentions_federation(text):
        return Verified(text)
    decoded = decode_escapes(text)
    if _ANY_ESCAPE.search(decoded):
        raise _unverified("a \\u escape spells another escape")
    decoded = _blank_comments(decoded)
    _refuse_glued(decoded)
    return _verified(decoded, allowed, prefixes, update)


def allowed_endpoints(setting: str | Iterable[str]) -> frozenset[str]:
    """The allow-list setting (space- or comma-separated URLs, or URLs) as a set.

    >>> sorted(allowed_endpoints("http://a.example/sparql, http://b.example/sparql"))
    ['http://a.example/sparql', 'http://b.example/sparql']
    """
    urls = re.split(r"[\s,]+", setting.strip()) if isinstance(setting, str) else setting
    return frozenset(u for u in urls if u)


def _may_call(text: str) -> bool:
    """Whether ``service`` or ``load`` appears anywhere (strings and comments too) in the text or in any
    decoding of its escapes: without either word no reading of it can call out (rule 1)."""
    return any(_FEDERATION_WORD.search(t) for t in _all_decodings(text))


def guarded(text: str, allowed: Iterable[str], prefixes: Mapping[str, str] | None = None,
            update: bool = False) -> str:
    """The text to run in a process that has its network (the Python API): unchanged when no reading of it holds
    ``service`` or ``load`` anywhere (nothing can be fetched then, rule 1), else the verified plain form, every
    SERVICE and LOAD in it on ``allowed`` (:func:`verify_federation` with ``strict``)."""
    if not _may_call(text):
        return text
    return verify_federation(text, allowed, prefixes, update, strict=True).text


def _refuse_glued(text: str) -> None:
    glued = glued_keyword(text)
    if glued is not None:
        keyword = next(k for k in _CALL_KEYWORDS if glued.upper().startswith(k))
        raise _unverified(f"{glued!r} begins with the keyword {keyword}, which SPARQL engines may read as "
                          f"{keyword} followed by a name; rename it or put a space after {keyword}")


def _verified(decoded: str, allowed: frozenset[str], prefixes: Mapping[str, str] | None, update: bool) -> Verified:
    """``decoded`` parsed by the verifier, its SERVICE and LOAD targets checked against ``allowed``."""
    from rdflib.plugins.sparql.algebra import translateQuery, translateUpdate
    from rdflib.plugins.sparql.parser import parseQuery, parseUpdate

    from pyparsing import ParseBaseException

    try:
        with _service_patterns_from_their_own_text():
            parsed = parseUpdate(decoded) if update else parseQuery(decoded)
        accounted = _accounted(parsed)
        translated = (translateUpdate(parsed, initNs=dict(prefixes or {})) if update
                      else translateQuery(parsed, initNs=dict(prefixes or {})))
        services, loads, base = _calls([parsed, translated])
    except RecursionError:
        raise _unverified("it is nested too deeply for the verifying parser") from None
    except ParseBaseException as exc:
        detail = " ".join(str(exc).split())[:200]
        raise UnparsableFederation(f"SPARQL syntax error (in {'an update' if update else 'a query'}, read by the "
                                   f"parser that verifies SERVICE and LOAD): {detail}") from None
    except Exception as exc:  # noqa: BLE001 - any failure of the verifier refuses the query
        detail = " ".join(str(exc).split())[:200]
        raise _unverified(f"the verifying SPARQL parser rejected it: {type(exc).__name__}: {detail}") from None
    for word, found in accounted.items():
        if len(re.findall(word, decoded, re.I)) > found:
            raise _unverified(f"the word {word.upper()!r} appears where the parser saw no {word.upper()}; "
                              "remove it from comments")
    if base and (services or loads):
        raise ServiceNotAllowed("BASE is not allowed in a query that uses SERVICE or LOAD: write the endpoint "
                                "as an absolute IRI")
    if update and loads and not services and all(type(t).__name__ == "URIRef" and str(t) not in allowed
                                                 for t in loads) and _only_silent_loads(parsed):
        return Verified("")  # every operation is a LOAD SILENT that may not run: they fail, silently
    ok_services, ok_loads = [], []
    for kind, terms, out in (("SERVICE", services, ok_services), ("LOAD", loads, ok_loads)):
        for term in terms:
            if type(term).__name__ != "URIRef":
                raise ServiceNotAllowed(f"{kind} {getattr(term, 'n3', lambda: term)()} is refused: the endpoint "
                                        "must be a constant IRI on the allow-list, not a variable")
            if str(term) not in allowed:
                # The list itself is not shown: it names the server's partners to whoever asks (issue 49).
                raise ServiceNotAllowed(f"{kind} <{term}> is refused: it is not on this server's allow-list "
                                        "(server_service_allow)")
            if str(term) not in out:
                out.append(str(term))
    return Verified(decoded, ok_services, ok_loads)
