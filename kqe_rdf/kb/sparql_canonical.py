"""The text that runs on the verified path: a query or update written anew from its tokens, in one plain form.

On the verified path (a SERVICE allow-list, or no network isolation: :mod:`kqe_rdf.service.isolation`) the
verifier decides what may be called, so Oxigraph must run a text that reads one way only: the text the
verifier read. Reading the user's text twice, once by each parser, let escapes, comments, quotes and glued
keywords make them disagree (issues 15, 24, 37). So :func:`canonical_text` lexes the text strictly — every character must belong to a
token of the SPARQL grammar, or the text is refused — and writes each token anew:

* escapes are decoded inside the token that holds them (``\\u``/``\\U`` in IRIs, strings and prefixed names,
  as Oxigraph decodes them; ``\\t`` and the like in strings), and a backslash anywhere else is refused;
* every string is written in one quote kind, ``"..."``, escaping only ``\\``, ``"``, line feed and carriage
  return; the result holds no ``\\u`` escape at all (rdflib decodes those over the whole text, Oxigraph only
  inside tokens);
* every prefixed name is written as the full IRI it stands for (the text's ``PREFIX`` declarations, in order,
  over the KB's prefixes), and the declarations are left out: no name is left to be read as a keyword glued
  to another name (``SILENTx:sparql``);
* every IRI is checked to hold only IRI characters once decoded;
* comments are dropped and whitespace is one space; tokens that touched still touch.

The verifier (:func:`~.sparql_guard.verify_federation`) then parses this text, and this text is what runs.

>>> canonical_text('PREFIX ex: <http://e/> SELECT * { ?s ex:p "caf\\\\u00e9" } # SERVICE', {})
'SELECT * { ?s <http://e/p> "café" }'
>>> canonical_text("ASK { <urn:a> <urn:b> '''two\\nlines''' }", {})
'ASK { <urn:a> <urn:b> "two\\\\nlines" }'
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from ..core.errors import SparqlError
from .sparql_lexer import PN_CHARS_BASE


class NotCanonical(SparqlError):
    """A text that cannot be written in the plain form: a character outside every token, a bad escape or IRI."""


_UCHAR = r"\\u[0-9A-Fa-f]{4}|\\U[0-9A-Fa-f]{8}"
_CHARS_U = PN_CHARS_BASE + "_"
_CHARS = _CHARS_U + r"\-0-9\u00B7\u0300-\u036F\u203F-\u2040"
_PLX = r"%[0-9A-Fa-f]{2}|\\[_~.\-!$&'()*+,;=/?#@%]"
_LOCAL_FIRST = rf"[{_CHARS_U}:0-9]|{_PLX}|{_UCHAR}"
_LOCAL_MID = rf"[{_CHARS}.:]|{_PLX}|{_UCHAR}"
_LOCAL_LAST = rf"[{_CHARS}:]|{_PLX}|{_UCHAR}"
_PREFIX = rf"[{PN_CHARS_BASE}](?:[{_CHARS}.]*[{_CHARS}])?"
_TOKENS = re.compile(rf"""
  (?P<ws>[\x20\t\r\n]+)
| (?P<comment>\#[^\r\n]*)
| (?P<string>\"\"\"(?:(?:"|"")?(?:[^"\\]|\\.))*\"\"\"|'''(?:(?:'|'')?(?:[^'\\]|\\.))*'''
            |"(?:[^"\\\n\r]|\\.)*"|'(?:[^'\\\n\r]|\\.)*')
| (?P<iri><(?:[^<>"{{}}|^`\\\x00-\x20]|{_UCHAR})*>)
| (?P<var>[?$][{_CHARS_U}0-9][{_CHARS_U}0-9\u00B7\u0300-\u036F\u203F-\u2040]*)
| (?P<bnode>_:[{_CHARS_U}0-9](?:[{_CHARS}.]*[{_CHARS}])?)
| (?P<pname>(?:{_PREFIX})?:(?:(?:{_LOCAL_FIRST})(?:(?:{_LOCAL_MID})*(?:{_LOCAL_LAST}))?)?)
| (?P<lang>@[a-zA-Z]+(?:-[a-zA-Z0-9]+)*)
| (?P<word>[A-Za-z][A-Za-z0-9_]*)
| (?P<number>\d+\.\d*[eE][+-]?\d+|\.\d+[eE][+-]?\d+|\d+[eE][+-]?\d+|\d*\.\d+|\d+)
| (?P<punct>\^\^|&&|\|\||!=|<=|>=|[{{}}()\[\];,.=<>!+\-*/^|?])
""", re.X | re.S)
_ECHAR = {"t": "\t", "b": "\b", "n": "\n", "r": "\r", "f": "\f", '"': '"', "'": "'", "\\": "\\"}
_NOT_IRI = re.compile(r'[<>"{}|^`\\\x00-\x20]')
_ESCAPE_LEFT = re.compile(r"\\[uU][0-9A-Fa-f]{4}")


def _code_point(hex_digits: str, where: str) -> str:
    code = int(hex_digits, 16)
    if code > 0x10FFFF or 0xD800 <= code <= 0xDFFF:
        raise NotCanonical(f"\\u{hex_digits} in {where} is not a Unicode character")
    return chr(code)


def _string_value(token: str) -> str:
    body = token[3:-3] if token[:3] in ('"""', "'''") else token[1:-1]

    def escape(m: re.Match) -> str:
        e = m.group(1)
        if e[0] in "uU":
            if not re.fullmatch(r"u[0-9A-Fa-f]{4}|U[0-9A-Fa-f]{8}", e):
                raise NotCanonical(f"bad escape \\{e[:9]} in the string {token[:40]!r}")
            return _code_point(e[1:], "a string")
        if e not in _ECHAR:
            raise NotCanonical(f"bad escape \\{e} in the string {token[:40]!r}: SPARQL strings know \\t \\b \\n "
                               "\\r \\f \\\" \\' \\\\ and \\u")
        return _ECHAR[e]

    return re.sub(r"\\(u[0-9A-Fa-f]{0,4}|U[0-9A-Fa-f]{0,8}|.)", escape, body, flags=re.S)


def _string(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\r", "\\r") + '"'


def _decode_uchars(text: str, where: str) -> str:
    return re.sub(_UCHAR, lambda m: _code_point(m.group()[2:], where), text)


def _iri(value: str, written: str) -> str:
    bad = _NOT_IRI.search(value)
    if bad:
        raise NotCanonical(f"{written[:80]} stands for an IRI holding {bad.group()!r}, which IRIs may not hold")
    return f"<{value}>"


def _local(local: str) -> str:
    """A prefixed name's local part as IRI characters: \\-escapes dropped, \\u decoded, %XX kept."""
    local = _decode_uchars(local, "a prefixed name")
    return re.sub(r"\\(.)", r"\1", local)


def canonical_text(text: str, prefixes: Mapping[str, str]) -> str:
    """``text`` written anew in the plain form (module docstring); :class:`NotCanonical` when it cannot be."""
    known = dict(prefixes)
    out: list[str] = []
    gap = False
    tokens = [(m.lastgroup, m.group(), m.start()) for m in _TOKENS.finditer(text)]
    covered = sum(len(t) for _, t, _ in tokens)
    if covered != len(text):
        at = 0
        for _, token, start in tokens:
            if start != at:
                break
            at += len(token)
        raise NotCanonical(f"unexpected character {text[at]!r} at position {at}: it is part of no SPARQL token")
    i = 0
    while i < len(tokens):
        kind, token, _ = tokens[i]
        if kind in ("ws", "comment"):
            gap = True
            i += 1
            continue
        if kind == "word" and token.upper() == "PREFIX" and i + 1 < len(tokens):
            rest = [t for t in tokens[i + 1:i + 6] if t[0] not in ("ws", "comment")][:2]
            if len(rest) == 2 and rest[0][0] == "pname" and rest[0][1].find(":") == len(rest[0][1]) - 1 \
                    and rest[1][0] == "iri":  # PREFIX p: <iri>, p: a name and one colon (else written as read)
                known[rest[0][1][:-1]] = _decode_uchars(rest[1][1][1:-1], "an IRI")
                _iri(known[rest[0][1][:-1]], rest[1][1])
                last = tokens.index(rest[1], i)
                i, gap = last + 1, True
                continue
        if kind == "iri":
            written = _iri(_decode_uchars(token[1:-1], "an IRI"), token)
        elif kind == "pname":
            prefix, _, local = token.partition(":")
            if prefix not in known:
                raise NotCanonical(f"unknown prefix '{prefix}:' in {token} — declare it with PREFIX {prefix}: <...>")
            written = _iri(known[prefix] + _local(local), token)
        elif kind == "string":
            written = _string(_string_value(token))
        else:
            written = token
        if gap and out:
            out.append(" ")
        out.append(written)
        gap = False
        i += 1
    canonical = "".join(out)
    left = _ESCAPE_LEFT.search(canonical)
    if left:
        raise NotCanonical(f"a string holds a backslash followed by {left.group()[1:]!r}, which the verifying "
                           "parser would read as an escape; write the backslash another way (e.g. with CONCAT)")
    return canonical
