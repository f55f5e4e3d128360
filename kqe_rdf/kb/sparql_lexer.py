"""A SPARQL lexer: enough of the grammar to find search calls, prefixes and comments in query text.

:mod:`kqe_rdf.service.sparql_search` uses it to find ``SERVICE <urn:kqe:search>`` blocks, :mod:`.sparql_guard` to blank
comments before the real parser verifies the query.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import NamedTuple


class Token(NamedTuple):
    kind: str
    text: str
    start: int
    end: int


#: The letters a SPARQL name may start with (the grammar's PN_CHARS_BASE), as a regex character class body.
PN_CHARS_BASE = r"A-Za-z\u00C0-\u00D6\u00D8-\u00F6\u00F8-\u02FF\u0370-\u037D\u037F-\u1FFF\u200C-\u200D\u2070-\u218F" \
        r"\u2C00-\u2FEF\u3001-\uD7FF\uF900-\uFDCF\uFDF0-\uFFFD"
_LEXER = re.compile(rf"""
  (?P<ws>\s+)
| (?P<comment>\#[^\n\r]*)
| (?P<string>\"\"\"(?:[^"\\]|\\.|"(?!""))*\"\"\"|'''(?:[^'\\]|\\.|'(?!''))*'''|"(?:[^"\\\n\r]|\\.)*"|'(?:[^'\\\n\r]|\\.)*')
| (?P<iri><[^<>"{{}}|^`\\\x00-\x20]*>)
| (?P<var>[?$][{PN_CHARS_BASE}0-9_\u00B7\u0300-\u036F\u203F-\u2040]+)
| (?P<pname>(?:[{PN_CHARS_BASE}](?:[{PN_CHARS_BASE}0-9_.\-\u00B7]*[{PN_CHARS_BASE}0-9_\-\u00B7])?)?:
            (?:[{PN_CHARS_BASE}0-9_\-:%\u00B7]|\\[^\s]|\.(?=[{PN_CHARS_BASE}0-9_\-:%\\]))*)
| (?P<word>[A-Za-z_][A-Za-z0-9_]*)
| (?P<number>[+-]?(?:\d+\.\d*[eE][+-]?\d+|\.?\d+[eE][+-]?\d+|\d*\.\d+|\d+))
| (?P<punct>\^\^|&&|\|\||!=|<=|>=|.)
""", re.X | re.S)
_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "b": "\b", "f": "\f", '"': '"', "'": "'", "\\": "\\"}


def tokenize(text: str) -> list[Token]:
    """SPARQL tokens without whitespace and comments.

    >>> [t.text for t in tokenize('SELECT * { ?s ?p "SERVICE # not a comment" } # SERVICE')]
    ['SELECT', '*', '{', '?s', '?p', '"SERVICE # not a comment"', '}']
    """
    out = []
    for m in _LEXER.finditer(text):
        kind = m.lastgroup
        if kind not in ("ws", "comment"):
            out.append(Token(kind, m.group(), m.start(), m.end()))
    return out


def tokenize_all(text: str) -> list[Token]:
    """Every token, whitespace and comments included."""
    return [Token(m.lastgroup, m.group(), m.start(), m.end()) for m in _LEXER.finditer(text)]


def unquote(token: str) -> str:
    """The value of a SPARQL string token (quotes removed, escapes applied)."""
    body = token[3:-3] if token[:3] in ('"""', "'''") else token[1:-1]

    def escape(m: re.Match) -> str:
        e = m.group(1)
        if e[0] in "uU":
            return chr(int(e[1:], 16))
        return _ESCAPES.get(e, e)

    return re.sub(r"\\(u[0-9A-Fa-f]{4}|U[0-9A-Fa-f]{8}|.)", escape, body, flags=re.S)


def declared_prefixes(tokens: Iterable[Token]) -> dict[str, str]:
    """``PREFIX p: <iri>`` declarations of a query."""
    tokens = list(tokens)
    out = {}
    for i, t in enumerate(tokens[:-2]):
        if t.kind == "word" and t.text.upper() == "PREFIX" and tokens[i + 1].kind == "pname" \
                and tokens[i + 2].kind == "iri":
            out[tokens[i + 1].text[:-1]] = tokens[i + 2].text[1:-1]
    return out


def resolve(token: Token, prefixes: dict[str, str]) -> str | None:
    """The IRI an IRI or prefixed-name token stands for (None for anything else or an unknown prefix)."""
    if token.kind == "iri":
        return token.text[1:-1]
    if token.kind == "pname":
        prefix, _, local = token.text.partition(":")
        if prefix in prefixes:
            return prefixes[prefix] + re.sub(r"\\(.)", r"\1", local)
    return None
