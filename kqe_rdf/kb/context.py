"""What a request says about each of its terms: present, absent, in the family, or uncertain, read with its scope.

This is the ConText algorithm (Chapman et al. 2001 NegEx; Harkema et al. 2009 ConText; medspaCy's ``context``
component): a table of trigger phrases, each with the state it gives and the direction its scope runs, and
terminators that end a scope. A forward trigger ("no", "denies", "family history of", "possible") covers the terms
after it up to the next terminator ("but", "however", ";", a sentence end, a clause that affirms: "has", "presents
with") or the next trigger of another kind; a backward trigger ("... was not observed", "... is absent", "... was
ruled out") covers the terms before it back to the previous one. A pseudo-trigger ("no change", "not only",
"cannot be ruled out" read as uncertain) stops a shorter trigger inside it from firing. A term covered by several
scopes takes the nearest trigger's.

medspaCy implements the same algorithm over spaCy documents; importing spaCy alone costs more than the reader's
whole cold-start budget (measured in docs/benchmarks.md), so the rules run here over the request's characters,
where the reader's mentions already are.

>>> [(c.state, c.trigger) for c in read("seizures and microcephaly; no hypotonia",
...                                       [(0, 8), (13, 25), (30, 39)])]
[('present', ''), ('present', ''), ('absent', 'no')]
>>> [c.state for c in read("seizures; family history of hypotonia", [(0, 8), (28, 37)])]
['present', 'family']
>>> [c.state for c in read("A boy presents with seizures. Hypotonia was not observed.", [(20, 28), (30, 39)])]
['present', 'absent']
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterable, Sequence

PRESENT, ABSENT, FAMILY, UNCERTAIN = "present", "absent", "family", "uncertain"
#: Directions: a scope after the trigger, before it, both; a terminator ends scopes; a pseudo-trigger does nothing.
FORWARD, BACKWARD, BOTH, TERMINATE, PSEUDO = "forward", "backward", "both", "terminate", "pseudo"


@dataclass(frozen=True)
class Rule:
    """One trigger: its phrase (words, ``/`` and spaces), the state it gives, its direction, and an example."""

    phrase: str
    state: str
    direction: str
    example: str


_RELATIVES = ("mother", "father", "sister", "brother", "sibling", "siblings", "aunt", "uncle", "cousin",
              "grandmother", "grandfather", "grandparent", "grandparents", "parent", "parents", "mom", "dad",
              "relative", "relatives")
_AFFECTED = ("has", "had", "have", "with", "also has", "also had", "suffers from", "suffered from", "was diagnosed with",
             "is affected by", "is affected with", "has a history of", "had a history of")

#: The triggers, from NegEx's and ConText's published lexicons (the clinical NLP field's, not one dataset's words),
#: longest phrase first where two overlap. The patient's own child words ("my son has ...") are no family trigger:
#: a parent writes them about the patient.
RULES: tuple[Rule, ...] = (
    # absent, before the term
    Rule("no", ABSENT, FORWARD, "seizures; no hypotonia"),
    Rule("not", ABSENT, FORWARD, "albums not produced by X"),
    # a copula's "not" negates its subject or what follows it
    Rule("was not", ABSENT, BOTH, "hypotonia was not wanted; what was not caused by hypotonia"),
    Rule("were not", ABSENT, BOTH, "hypotonia and ataxia were not wanted"),
    Rule("is not", ABSENT, BOTH, "hypotonia is not a feature; who is not a member of X"),
    Rule("are not", ABSENT, BOTH, "hypotonia and ataxia are not features"),
    Rule("nor", ABSENT, FORWARD, "neither seizures nor hypotonia"),
    Rule("neither", ABSENT, FORWARD, "neither seizures nor hypotonia"),
    Rule("never", ABSENT, FORWARD, "never had seizures"),
    Rule("without", ABSENT, FORWARD, "seizures without hypotonia"),
    Rule("denies", ABSENT, FORWARD, "seizures; denies hypotonia"),
    Rule("denied", ABSENT, FORWARD, "denied hypotonia"),
    Rule("deny", ABSENT, FORWARD, "parents deny hypotonia"),
    Rule("denying", ABSENT, FORWARD, "denying hypotonia"),
    Rule("negative for", ABSENT, FORWARD, "seizures, negative for hypotonia"),
    Rule("absence of", ABSENT, FORWARD, "absence of hypotonia"),
    Rule("no evidence of", ABSENT, FORWARD, "no evidence of hypotonia"),
    Rule("no signs of", ABSENT, FORWARD, "no signs of hypotonia"),
    Rule("no sign of", ABSENT, FORWARD, "no sign of hypotonia"),
    Rule("no history of", ABSENT, FORWARD, "no history of seizures"),
    Rule("free of", ABSENT, FORWARD, "free of seizures"),
    Rule("lack of", ABSENT, FORWARD, "lack of hypotonia"),
    Rule("lacks", ABSENT, FORWARD, "lacks hypotonia"),
    Rule("ruled out", ABSENT, BOTH, "ruled out hypotonia; hypotonia was ruled out"),
    Rule("rules out", ABSENT, FORWARD, "the exam rules out hypotonia"),
    Rule("excluded", ABSENT, BOTH, "excluded: hypotonia; hypotonia was excluded"),
    Rule("unremarkable for", ABSENT, FORWARD, "unremarkable for hypotonia"),
    Rule("does not have", ABSENT, FORWARD, "does not have hypotonia"),
    Rule("did not have", ABSENT, FORWARD, "did not have hypotonia"),
    Rule("not have", ABSENT, FORWARD, "does not have hypotonia"),
    Rule("doesn't have", ABSENT, FORWARD, "doesn't have hypotonia"),
    Rule("didn't have", ABSENT, FORWARD, "didn't have hypotonia"),
    # absent, after the term
    Rule("not observed", ABSENT, BACKWARD, "hypotonia was not observed"),
    Rule("was not observed", ABSENT, BACKWARD, "hypotonia was not observed"),
    Rule("were not observed", ABSENT, BACKWARD, "hypotonia and ataxia were not observed"),
    Rule("not seen", ABSENT, BACKWARD, "hypotonia was not seen"),
    Rule("not present", ABSENT, BACKWARD, "hypotonia is not present"),
    Rule("not found", ABSENT, BACKWARD, "hypotonia was not found"),
    Rule("not noted", ABSENT, BACKWARD, "hypotonia was not noted"),
    Rule("not detected", ABSENT, BACKWARD, "hypotonia was not detected"),
    Rule("is absent", ABSENT, BACKWARD, "hypotonia is absent"),
    Rule("are absent", ABSENT, BACKWARD, "hypotonia and ataxia are absent"),
    Rule("was absent", ABSENT, BACKWARD, "hypotonia was absent"),
    Rule("were absent", ABSENT, BACKWARD, "hypotonia and ataxia were absent"),
    Rule("absent", ABSENT, BACKWARD, "hypotonia absent"),
    Rule("is negative", ABSENT, BACKWARD, "hypotonia is negative"),
    Rule("was negative", ABSENT, BACKWARD, "the screen for hypotonia was negative"),
    Rule("negative", ABSENT, BACKWARD, "hypotonia: negative"),
    Rule("resolved", ABSENT, BACKWARD, "the hypotonia resolved"),
    # pseudo-triggers: phrases holding a trigger that negate nothing
    Rule("no change", PRESENT, PSEUDO, "no change in the seizures"),
    Rule("no increase", PRESENT, PSEUDO, "no increase in seizures"),
    Rule("no further", PRESENT, PSEUDO, "no further seizures were seen after"),
    Rule("not only", PRESENT, PSEUDO, "not only seizures but also hypotonia"),
    Rule("not necessarily", PRESENT, PSEUDO, "not necessarily hypotonia"),
    Rule("without difficulty", PRESENT, PSEUDO, "walks without difficulty"),
    Rule("gram negative", PRESENT, PSEUDO, "gram negative sepsis"),
    Rule("not certain whether", UNCERTAIN, FORWARD, "not certain whether hypotonia"),
    Rule("not ruled out", UNCERTAIN, BACKWARD, "hypotonia not ruled out"),
    Rule("cannot be ruled out", UNCERTAIN, BACKWARD, "hypotonia cannot be ruled out"),
    Rule("can not be ruled out", UNCERTAIN, BACKWARD, "hypotonia can not be ruled out"),
    Rule("cannot be excluded", UNCERTAIN, BACKWARD, "hypotonia cannot be excluded"),
    Rule("not excluded", UNCERTAIN, BACKWARD, "hypotonia not excluded"),
    # uncertain or hypothetical: a weaker constraint
    Rule("possible", UNCERTAIN, FORWARD, "possible hypotonia"),
    Rule("possibly", UNCERTAIN, FORWARD, "possibly hypotonia"),
    Rule("probable", UNCERTAIN, FORWARD, "probable hypotonia"),
    Rule("probably", UNCERTAIN, FORWARD, "probably hypotonia"),
    Rule("suspected", UNCERTAIN, FORWARD, "suspected hypotonia"),
    Rule("suspicion of", UNCERTAIN, FORWARD, "suspicion of hypotonia"),
    Rule("suspicious for", UNCERTAIN, FORWARD, "suspicious for hypotonia"),
    Rule("concern for", UNCERTAIN, FORWARD, "concern for hypotonia"),
    Rule("concerning for", UNCERTAIN, FORWARD, "concerning for hypotonia"),
    Rule("questionable", UNCERTAIN, FORWARD, "questionable hypotonia"),
    Rule("question of", UNCERTAIN, FORWARD, "question of hypotonia"),
    Rule("rule out", UNCERTAIN, FORWARD, "rule out hypotonia"),
    Rule("r/o", UNCERTAIN, FORWARD, "r/o hypotonia"),
    Rule("cannot rule out", UNCERTAIN, FORWARD, "cannot rule out hypotonia"),
    Rule("cannot exclude", UNCERTAIN, FORWARD, "cannot exclude hypotonia"),
    Rule("may have", UNCERTAIN, FORWARD, "may have hypotonia"),
    Rule("might have", UNCERTAIN, FORWARD, "might have hypotonia"),
    Rule("maybe", UNCERTAIN, FORWARD, "maybe hypotonia"),
    Rule("perhaps", UNCERTAIN, FORWARD, "perhaps hypotonia"),
    Rule("equivocal", UNCERTAIN, BOTH, "equivocal hypotonia"),
    Rule("is suspected", UNCERTAIN, BACKWARD, "hypotonia is suspected"),
    Rule("was suspected", UNCERTAIN, BACKWARD, "hypotonia was suspected"),
    Rule("is possible", UNCERTAIN, BACKWARD, "hypotonia is possible"),
    # family: the term is a relative's, not the patient's
    Rule("family history of", FAMILY, FORWARD, "seizures; family history of hypotonia"),
    Rule("family history", FAMILY, FORWARD, "family history: hypotonia"),
    Rule("family hx of", FAMILY, FORWARD, "family hx of hypotonia"),
    Rule("family hx", FAMILY, FORWARD, "family hx: hypotonia"),
    Rule("fhx", FAMILY, FORWARD, "fhx hypotonia"),
    Rule("runs in the family", FAMILY, BACKWARD, "hypotonia runs in the family"),
    Rule("in the family", FAMILY, BACKWARD, "hypotonia in the family"),
    *(Rule(f"{who} {verb}", FAMILY, FORWARD, f"seizures; {who} {verb} hypotonia")
      for who in _RELATIVES for verb in _AFFECTED),
    *(Rule(f"in {whose} {who}", FAMILY, BACKWARD, f"hypotonia in {whose} {who}")
      for whose in ("his", "her", "their", "the", "a") for who in _RELATIVES),
    # terminators: a scope ends here
    *(Rule(w, PRESENT, TERMINATE, f"no fever {w} seizures") for w in (
        "but", "however", "although", "though", "yet", "except", "except for", "apart from", "aside from",
        "other than", "whereas", "while", "which", "nevertheless", "still", "instead", "rather",
        "has", "had", "have", "shows", "showed", "showing", "exhibits", "exhibited", "reports", "reported",
        "presents with", "presenting with", "presented with", "complains of", "c/o", "now", "also", "plus",
        "positive for")),
)

#: Where a scope ends whatever the words: a semicolon, and the sentence ends the sentence splitter draws.
_SEMICOLON = re.compile(r";")


def _pattern(rules: Iterable[Rule]) -> re.Pattern:
    """One regular expression for every phrase, as a trie of words (a flat alternation of 400 phrases is tried
    phrase by phrase at every position): the longest phrase matches first."""
    trie: dict = {}
    for rule in rules:
        node = trie
        for word in rule.phrase.lower().split():
            node = node.setdefault(word, {})
        node[""] = {}

    def emit(node: dict) -> str:
        ends = "" in node
        branches = [re.escape(w) + (rf"(?:\s+{emit(child)})" + ("?" if "" in child else "") if set(child) - {""}
                                    else "") for w, child in sorted(node.items(), key=lambda kv: (-len(kv[0]), kv[0]))
                    if w]
        del ends
        return "(?:" + "|".join(branches) + ")"

    return re.compile(rf"(?<![\w/]){emit(trie)}(?![\w/])", re.I)


_BY_PHRASE = {" ".join(r.phrase.split()): r for r in RULES}
_TRIGGERS = _pattern(RULES)


@dataclass(frozen=True)
class Context:
    """A term's state and the trigger phrase that set it ('' for present)."""

    state: str = PRESENT
    trigger: str = ""


@dataclass(frozen=True)
class _Found:
    rule: Rule
    start: int
    end: int


def triggers(text: str) -> list[_Found]:
    """The triggers and terminators in ``text``, left to right, longest match first (a pseudo-trigger included)."""
    out = []
    for m in _TRIGGERS.finditer(text):
        out.append(_Found(_BY_PHRASE[" ".join(m.group().lower().split())], m.start(), m.end()))
    return out


def scopes(text: str, found: Sequence[_Found] | None = None) -> list[tuple[int, int, _Found]]:
    """Each trigger's scope in ``text`` as (start, end, trigger): to the next sentence end, semicolon, terminator or
    trigger of another state in its direction."""
    from .sentences import sentence_spans

    found = triggers(text) if found is None else found
    edges = sorted({0, len(text)} | {b for _a, b in sentence_spans(text, typed=True)}
                   | {m.start() for m in _SEMICOLON.finditer(text)})

    def stops(f: _Found, g: _Found) -> bool:
        return g.rule.direction == TERMINATE or (g.rule.direction != PSEUDO and g.rule.state != f.rule.state)

    out = []
    for f in found:
        if f.rule.direction in (TERMINATE, PSEUDO):
            continue
        if f.rule.direction in (FORWARD, BOTH):
            end = next((e for e in edges if e >= f.end), len(text))
            end = min([g.start for g in found if f.end <= g.start < end and stops(f, g)] + [end])
            out.append((f.end, end, f))
        if f.rule.direction in (BACKWARD, BOTH):
            start = max((e for e in edges if e <= f.start), default=0)
            start = max([g.end for g in found if start < g.end <= f.start and stops(f, g)] + [start])
            out.append((start, f.start, f))
    return out


def read(text: str, spans: Sequence[tuple[int, int]]) -> list[Context]:
    """Each term's context, for terms at character ``spans`` of ``text``: the text with the terms blanked is
    searched for triggers (a term's own words, "absent speech", negate nothing), then each trigger's scope runs
    to the nearest boundary in its direction. A term in several scopes takes the nearest trigger."""
    masked = list(text)
    for a, b in spans:
        masked[a:b] = " " * (b - a)
    found = scopes("".join(masked))
    out = []
    for a, b in spans:
        covering = [(min(abs(a - f.end), abs(f.start - b)), f) for lo, hi, f in found if lo <= a and b <= hi]
        if not covering:
            out.append(Context())
            continue
        _d, f = min(covering, key=lambda c: c[0])
        out.append(Context(f.rule.state, " ".join(text[f.start:f.end].split())))
    return out


def affirmed_text(text: str) -> str:
    """``text`` without what is not the patient's present finding (absent and family scopes, with their triggers):
    what a request says is there.

    >>> affirmed_text("seizures and microcephaly; no hypotonia or ataxia")
    'seizures and microcephaly;'
    >>> affirmed_text("Seizures. Hypotonia was not observed.")
    'Seizures. .'
    """
    cut = [False] * len(text)
    for lo, hi, f in scopes(text):
        if f.rule.state in (ABSENT, FAMILY):
            for i in range(min(lo, f.start), max(hi, f.end)):
                cut[i] = True
    return " ".join("".join(" " if gone else c for c, gone in zip(text, cut)).split())


def negates(text: str) -> bool:
    """Whether ``text`` says anything is absent ("no ...", "... was not observed"): a request that may ask about an
    absence, so relations that state one ("lacks phenotype") stay readable.

    >>> negates("seizures; no hypotonia"), negates("no change in seizures"), negates("seizures and hypotonia")
    (True, False, False)
    """
    return any(f.rule.state == ABSENT and f.rule.direction not in (TERMINATE, PSEUDO) for f in triggers(text))


def affirmed_sentences(text: str, typed: bool = True) -> list[str]:
    """The sentences of :func:`affirmed_text`, those left with a word ("Seizures. Ataxia was not observed." →
    ["Seizures."])."""
    from .sentences import split_sentences

    return [s for s in split_sentences(affirmed_text(text), typed=typed) if re.search(r"[^\W_]", s)]


def trimmed(text: str, start: int, end: int) -> tuple[int, int]:
    """A span of ``text`` without the triggers at its edges: a list item linked approximately may have taken in the
    words around its term ("short stature were not observed"), which say what the request says of it.

    >>> t = "seizures; short stature were not observed"
    >>> a, b = trimmed(t, 10, len(t)); t[a:b]
    'short stature'
    """
    while True:
        inside = [f for f in triggers(text[start:end]) if f.rule.direction != PSEUDO]
        piece = text[start:end]
        if inside and inside[0].start == len(piece) - len(piece.lstrip()):
            start += inside[0].end
        elif inside and inside[-1].end == len(piece.rstrip(" .,;:!?")):
            end = start + inside[-1].start
        else:
            break
        start += len(text[start:end]) - len(text[start:end].lstrip())
        end -= len(text[start:end]) - len(text[start:end].rstrip())
        if end <= start:
            return start, max(start, end)
    return start, end
