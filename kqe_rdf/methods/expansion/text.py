"""Text pieces expansions are built from: token estimates, clipped snippets, salient sentences.

Token counts are estimates (about four characters a token, as the LLM layer's
budget check counts them): budgets are kept by construction, never by asking
a tokenizer.

>>> estimate_tokens("abcdefgh")
2
>>> clip("one two three four five six", 3)
'one two …'
>>> salient("name: X\\ntype: Movie\\nA film about boxing. It won prizes.", "boxing film")
'A film about boxing.'
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from ...kb.documents import NodeDocument
from ...kb.sentences import split_sentences
from ..retrieval import terms

_HEADER = re.compile(r"^(name|type|aliases): ", re.I)


def estimate_tokens(text: str) -> int:
    return (len(text) + 3) // 4


def clip(text: str, tokens: int) -> str:
    """``text`` cut at a word boundary to at most ``tokens`` estimated tokens (an ellipsis marks the cut)."""
    text = " ".join(text.split())
    if estimate_tokens(text) <= tokens:
        return text
    limit = max(tokens * 4 - 2, 0)
    cut = text[:limit].rsplit(" ", 1)[0] if " " in text[:limit] else text[:limit]
    return (cut + " …") if cut else ""


def share(tokens: int, parts: int, overhead: int = 1) -> int:
    """Each of ``parts`` pieces' share of ``tokens``, less ``overhead`` for what joins them; at least 8.

    >>> share(600, 3), share(600, 0), share(10, 5)
    (199, 599, 8)
    """
    return max(tokens // max(parts, 1) - overhead, 8)


def within(lines: Iterable[str], tokens: int) -> list[str]:
    """The leading ``lines`` that fit in ``tokens`` together, a line break costing one more each.

    >>> within(["abcd", "efgh", "ijkl"], 4)
    ['abcd', 'efgh']
    """
    out, used = [], 0
    for line in lines:
        cost = estimate_tokens(line) + 1
        if used + cost > tokens:
            break
        out.append(line)
        used += cost
    return out


def body(doc: NodeDocument) -> str:
    """A node document without its name and type lines, lines joined by "; " (the name is shown apart)."""
    lines = [line for line in doc.text.splitlines() if line.strip() and not _HEADER.match(line)]
    return "; ".join(lines)


def snippet(doc: NodeDocument, tokens: int) -> str:
    """``name: body`` within ``tokens``."""
    text = f"{doc.name}: {body(doc)}" if body(doc) else doc.name
    return clip(text, tokens)


def body_sentences(text: str, labels: Iterable[str] = ()) -> list[str]:
    """The sentences of a node document, without its name, type and aliases lines and ``labels`` prefixes.

    >>> body_sentences("name: p1\\ntext: One. Two.", ["text"])
    ['One.', 'Two.']
    """
    prefixes = tuple(f"{label}: " for label in labels)
    out = []
    for s in split_sentences(text):
        if _HEADER.match(s):
            continue
        for prefix in prefixes:
            if s.startswith(prefix):
                s = s[len(prefix):]
        out.append(s)
    return out


#: Where a sentence divides into clauses: after a comma, semicolon or colon, before a spaced dash.
_CLAUSE = re.compile(r"(?<=[,;:])\s+|\s+(?=[-\u2013\u2014]\s)")


def in_clauses(sentences: Iterable[str], words: int) -> str:
    """``sentences``, best first, within ``words`` words, in whole clauses: the first sentence that does not fit
    gives the leading clauses of it that do, and ends the text (no clause is cut, and none is taken out of order
    from further down, which would trade the nearest sentences for the shortest).

    >>> in_clauses(["Aspirin blocks platelets.", "In one trial, aspirin lowered clotting; it lasted days."], 8)
    'Aspirin blocks platelets. In one trial,'
    """
    out: list[str] = []
    for sentence in sentences:
        for clause in _CLAUSE.split(sentence):
            n = len(clause.split())
            if n > words:
                return " ".join(out)
            out.append(clause)
            words -= n
    return " ".join(out)


def salient(text: str, query: str, n: int = 1, avoid: str = "") -> str:
    """The ``n`` sentences of ``text`` that share most words with ``query`` (header lines skipped), in text order.

    Sentences naming ``avoid`` (what the caller already says) are used only when nothing else is left.
    """
    query_terms = set(terms(query))
    candidates = body_sentences(text)
    if avoid:
        candidates = [s for s in candidates if avoid.lower() not in s.lower()] or candidates
    if not candidates:
        return ""
    scored = sorted(range(len(candidates)), key=lambda i: (-len(query_terms & set(terms(candidates[i]))), i))
    return " ".join(candidates[i] for i in sorted(scored[:n]))


def clean_generation(text: str | None, tokens: int) -> str:
    """An LLM's free text made safe to append to a query: whitespace folded, prompt echoes cut, clipped."""
    if not text:
        return ""
    text = re.sub(r"^\s*(passage|answer|expansion)\s*:\s*", "", text.strip(), flags=re.I)
    return clip(text, tokens)
