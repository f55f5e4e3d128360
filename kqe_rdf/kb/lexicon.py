"""Words related to each relation's words, from WordNet: how a request can name a relation it does not spell.

An ontology names a relation with a label ("directed by", "has parent") and perhaps a few
``skos:altLabel`` words. Users say "who headed X", "X's dad", "what killed X": words that mean the
relation without being its label. This module reads a general lexical resource, WordNet 3.0 (Princeton;
Debian's ``wordnet-base`` installs its database under ``/usr/share/wordnet``, read by :class:`WordNet`), and
lists for each relation the words related to its own words, each with how it is related and a weight:

- ``synonym`` (0.8): a lemma of a sense of the word ("director" → "manager"; "direct" → "head", "lead");
- ``derived`` (0.8): a derivationally related form of one of those ("director" → "direct"), and the nouns an
  adjective so derived pertains to, the word's family (a relation named by a noun in "-ality" is named by
  the noun of its adjective too: "-al" → the noun it pertains to, "national" → "nation");
- ``pertainym`` (0.8): an adjective that pertains to a noun sense ("country" → "national");
- ``narrower`` (0.7): a lemma up to two levels below one of the word's three commonest senses ("parent" → "father", "dad");
- ``broader`` (0.7): a lemma one level above a noun sense ("child" → "offspring", "genre" → "kind");
- ``attribute`` (0.7): an adjective that is a value of a noun sense ("age" → "old", "gender" → "male");
- ``kind`` (0.5): a word for what the word, or the doer of a verb, is a kind of at any level ("director" is a
  person: "which person directed X");
- ``wh`` (0.6): the wh-word that asks for what the word is a kind of ("country" is a location: "where";
  "year" a time period: "when"; "player" a person: "who").

The reader computes the table once per process for the KB's ontology (about half a second). Nothing here names a dataset's relation or word: the table follows from the
ontology's words and WordNet alone. Without WordNet the table is empty and the reader uses the labels only.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from functools import lru_cache
from pathlib import Path

from .words import LIGHT_WORDS

#: Where Debian's ``wordnet-base`` puts the WordNet 3.0 database (``$KQE_WORDNET`` overrides it).
WORDNET_DIRS = ("/usr/share/wordnet",)
#: Changes with the rules of :func:`build_lexicon` and :func:`related_words`: a table cached by an older version is
#: made again.
LEXICON_VERSION = 2
WEIGHTS = {"synonym": 0.8, "derived": 0.8, "pertainym": 0.8, "narrower": 0.7, "attribute": 0.7, "broader": 0.7, "wh": 0.6, "kind": 0.5}
#: Words above and below a word are read from its commonest senses only ("retirement" is a kind of the fifth
#: sense of "position", status, not of a place or a post).
BROAD_SENSES = 3
#: A sense with more words below it than this is a category of names, not of ways to say the word.
MAX_NARROWER = 40
#: The wh-words and the WordNet senses whose kinds they ask for (general English, not a dataset's words).
WH_SENSES = {"where": ("location.n.01", "region.n.03", "geographical_area.n.01"),
             "when": ("time_period.n.01", "time_unit.n.01", "date.n.01", "calendar_year.n.01"),
             "who": ("person.n.01",),
             "whom": ("person.n.01",),
             "why": ("cause.n.01", "reason.n.01", "motivation.n.01")}
_WORD = re.compile(r"[a-z]+")


def wordnet_dir() -> Path | None:
    for candidate in ([os.environ["KQE_WORDNET"]] if os.environ.get("KQE_WORDNET") else []) + list(WORDNET_DIRS):
        if (Path(candidate) / "data.noun").is_file():
            return Path(candidate)
    return None


class SortedLines:
    """A WordNet index file, read by binary search on its lines (sorted by their first word, the lemma):
    ``get(lemma)`` gives the lemma's line, ``lemma in lines`` whether it has one.

    >>> lines = SortedLines(b"  licence\\nbar n 1\\nfoo n 2\\n")
    >>> lines.get("foo"), "bar" in lines, "baz" in lines
    ('foo n 2', True, False)
    """

    def __init__(self, data: bytes) -> None:
        self.data = data
        start = 0
        while data.startswith(b" ", start):  # the licence header: lines that start with a space
            start = data.index(b"\n", start) + 1
        self.start = start

    @lru_cache(maxsize=65536)  # noqa: B019 - one per WordNet, for the process
    def get(self, lemma: str) -> str | None:
        data, key = self.data, lemma.encode("latin-1", "replace") + b" "
        lo, hi = self.start, len(data)
        while lo < hi:
            mid = (lo + hi) // 2
            newline = data.rfind(b"\n", self.start, mid)
            line = newline + 1 if newline >= 0 else self.start
            end = data.find(b"\n", line)
            end = len(data) if end < 0 else end
            text = data[line:end] + b"\n"
            if text.startswith(key):
                return data[line:end].decode("latin-1")
            if text < key:
                lo = end + 1
            else:
                hi = line
        return None

    def __contains__(self, lemma: str) -> bool:
        return self.get(lemma) is not None


class WordNet:
    """The parts of the WordNet 3.0 database files the lexicon reads: senses of a lemma (commonest first),
    a sense's lemmas and pointers, and the base form of an inflected word (WordNet's ``morphy``: its
    exception lists, then its detachment rules). The format is WordNet's ``wndb(5)``."""

    POINTERS = {"@": "hypernym", "@i": "hypernym", "~": "hyponym", "~i": "hyponym", "+": "derived", "=": "attribute",
                "!": "antonym"}
    POS = {"n": "noun", "v": "verb", "a": "adj", "s": "adj"}
    _RULES = {"n": (("s", ""), ("ses", "s"), ("xes", "x"), ("zes", "z"), ("ches", "ch"), ("shes", "sh"),
                    ("men", "man"), ("ies", "y")),
              "v": (("s", ""), ("ies", "y"), ("es", "e"), ("es", ""), ("ed", "e"), ("ed", ""), ("ing", "e"),
                    ("ing", ""))}

    def __init__(self, folder: Path) -> None:
        self.data: dict[str, bytes] = {}
        self.data["a"] = self.data["s"] = (folder / "data.adj").read_bytes()  # adjectives: only their lemmas
        #: Each part of speech's index file, looked up by binary search (its lines are sorted by lemma): reading
        #: it into a dictionary took a third of a second in every process.
        self.index: dict[str, SortedLines] = {}
        self.exceptions: dict[str, dict[str, list[str]]] = {}
        for pos, name in (("n", "noun"), ("v", "verb")):
            self.data[pos] = (folder / f"data.{name}").read_bytes()
            self.index[pos] = SortedLines((folder / f"index.{name}").read_bytes())
            exceptions: dict[str, list[str]] = {}
            for line in (folder / f"{name}.exc").read_text(encoding="latin-1").splitlines():
                form, *bases = line.split()
                exceptions[form] = bases
            self.exceptions[pos] = exceptions
        #: Words WordNet knows as adjectives ("primary", "main"), for telling a modifier from a name.
        self.adjectives = SortedLines((folder / "index.adj").read_bytes())
        self.index["a"] = self.adjectives

    def morphy(self, word: str, pos: str) -> str | None:
        """The lemma of ``word`` as a ``pos`` (``n`` or ``v``), or None when WordNet has none."""
        index = self.index[pos]
        for base in self.exceptions[pos].get(word, ()):
            if base in index:
                return base
        if word in index:
            return word
        for suffix, ending in self._RULES[pos]:
            if word.endswith(suffix) and (base := word[: len(word) - len(suffix)] + ending) in index:
                return base
        return None

    def senses(self, lemma: str, pos: str) -> list[tuple[str, int]]:
        line = self.index[pos].get(lemma)
        if line is None:
            return []
        parts = line.split()
        pointers, senses = int(parts[3]), int(parts[2])
        return [(pos, int(o)) for o in parts[6 + pointers: 6 + pointers + senses]]

    @lru_cache(maxsize=200_000)
    def sense(self, pos: str, offset: int) -> tuple[tuple[str, ...], tuple[tuple[str, str, int, int, int], ...]]:
        """A sense's lemmas and pointers ``(kind, pos, offset, source word, target word)``."""
        data = self.data[pos]
        line = data[offset: data.index(b"\n", offset)].decode("latin-1").split(" | ", 1)[0].split()
        count = int(line[3], 16)
        lemmas = tuple(line[4 + 2 * i].lower() for i in range(count))
        at = 4 + 2 * count
        pointers = []
        for i in range(int(line[at])):
            symbol, target, target_pos, words = line[at + 1 + 4 * i: at + 5 + 4 * i]
            if symbol in self.POINTERS and target_pos in self.POS:
                pointers.append((self.POINTERS[symbol], target_pos, int(target), int(words[:2], 16),
                                 int(words[2:], 16)))
        return lemmas, tuple(pointers)

    def gloss(self, pos: str, offset: int) -> str:
        """A sense's definition, without its examples ("a male parent")."""
        data = self.data[pos]
        line = data[offset: data.index(b"\n", offset)].decode("latin-1")
        return re.split(r'[;"]', line.split(" | ", 1)[1] if " | " in line else "")[0].strip()

    def related(self, pos: str, offset: int, kind: str) -> list[tuple[str, int]]:
        return [(p, o) for k, p, o, _s, _t in self.sense(pos, offset)[1] if k == kind]

    @lru_cache(maxsize=1)
    def pertainyms(self) -> dict[tuple[str, int], set[str]]:
        """Noun sense → the adjectives that pertain to it ("national" to "nation"); WordNet records the pointer
        on the adjective only, so the adjectives are read once."""
        out: dict[tuple[str, int], set[str]] = {}
        for line in self.data["a"].decode("latin-1").splitlines():
            if line.startswith(" ") or " \\ " not in line:
                continue
            fields = line.split(" | ", 1)[0].split()
            count = int(fields[3], 16)
            lemmas = [fields[4 + 2 * i].lower().split("(")[0] for i in range(count)]
            at = 4 + 2 * count
            for i in range(int(fields[at])):
                symbol, target, target_pos, _words = fields[at + 1 + 4 * i: at + 5 + 4 * i]
                if symbol == "\\" and target_pos == "n":
                    out.setdefault(("n", int(target)), set()).update(w for w in lemmas if "_" not in w)
        return out

    @lru_cache(maxsize=1)
    def pertained(self) -> dict[str, set[str]]:
        """Adjective → the nouns it pertains to ("national" → "nation"): :meth:`pertainyms` read
        the other way."""
        out: dict[str, set[str]] = {}
        for sense, adjectives in self.pertainyms().items():
            for adjective in adjectives:
                out.setdefault(adjective, set()).update(_lemmas(self, sense))
        return out

    def hypernym_closure(self, pos: str, offset: int) -> set[tuple[str, int]]:
        seen, todo = set(), [(pos, offset)]
        while todo:
            here = todo.pop()
            for up in self.related(*here, "hypernym"):
                if up not in seen:
                    seen.add(up)
                    todo.append(up)
        return seen


@lru_cache(maxsize=1)
def wordnet() -> WordNet | None:
    """The installed WordNet database, or None when there is none."""
    folder = wordnet_dir()
    return WordNet(folder) if folder is not None else None


def _same_root(a: str, b: str, length: int = 5) -> bool:
    """Whether two words share their first ``length`` letters: one word family ("nation", "national"), not a
    synonym of another root ("country")."""
    return len(a) >= length and len(b) >= length and a[:length] == b[:length]


def _lemmas(wn: WordNet, sense: tuple[str, int]) -> set[str]:
    return {name for name in wn.sense(*sense)[0] if "_" not in name}


def related_words(word: str, wn: WordNet | None = None, parts: tuple[str, ...] = ("n", "v")
                  ) -> dict[str, tuple[str, float]]:
    """Words related to ``word`` with how and how strongly (the strongest relation where there are several).

    >>> found = related_words("director")
    >>> found and found["manager"]
    ('synonym', 0.8)
    """
    wn = wn or wordnet()
    if wn is None or word in LIGHT_WORDS:
        return {}
    out: dict[str, tuple[str, float]] = {}

    def add(words: Iterable[str], how: str) -> None:
        for w in words:
            if w != word and w not in LIGHT_WORDS and len(w) > 2 and WEIGHTS[how] > out.get(w, ("", 0.0))[1]:
                out[w] = (how, WEIGHTS[how])

    for pos in parts:
        base = wn.morphy(word, pos)
        if base is None:
            continue
        for rank, sense in enumerate(wn.senses(base, pos)):
            add(_lemmas(wn, sense), "synonym")
            for kind, p, o, source, target in wn.sense(*sense)[1]:
                if kind == "derived":
                    lemmas = wn.sense(p, o)[0]
                    if target and target <= len(lemmas):
                        add([lemmas[target - 1]], "derived")
                        if p in "as":  # the word family through its adjective: "national" → "nation"
                            adjective = lemmas[target - 1]
                            add((n for n in wn.pertained().get(adjective, ()) if _same_root(n, adjective)), "derived")
            if rank >= BROAD_SENSES:
                continue
            # Below a sense: one level, and a second while the words stay few ("parent" → "father" → "dad";
            # "country" has every country below it: names, not ways to say the word).
            below = wn.related(*sense, "hyponym")
            first = {w for s in below for w in _lemmas(wn, s)}
            second = first | {w for s in below for t in wn.related(*s, "hyponym") for w in _lemmas(wn, t)}
            add(second if len(second) <= MAX_NARROWER else first if len(first) <= MAX_NARROWER else (), "narrower")
            if pos == "n":
                add(wn.pertainyms().get(sense, ()), "pertainym")  # "nation" → "national"
                above = wn.related(*sense, "hypernym")
                add((w for s in above for w in _lemmas(wn, s)), "broader")
                # the head noun of a compound above it ("ball club" is a kind of "baseball_team": "team")
                add((name.rsplit("_", 1)[1] for s in above for name in wn.sense(*s)[0] if "_" in name), "broader")
                add((w for s in wn.related(*sense, "attribute") for w in _lemmas(wn, s)), "attribute")
    return out


def _named_senses(wn: WordNet, names: Iterable[str]) -> set[tuple[str, int]]:
    """``location.n.01`` → the sense it names (NLTK's notation: lemma, part of speech, sense number)."""
    out = set()
    for name in names:
        lemma, pos, number = name.rsplit(".", 2)
        senses = wn.senses(lemma, pos)
        if int(number) <= len(senses):
            out.add(senses[int(number) - 1])
    return out


#: Kinds so general that every word is one ("entity", "object", "whole"): never read as naming a relation.
_TOO_GENERAL = 4


def kinds(word: str, wn: WordNet | None = None) -> set[str]:
    """Single-word lemmas above a noun's two commonest senses, except the most general levels ("director" →
    "person", "supervisor", "leader"...)."""
    wn = wn or wordnet()
    base = wn.morphy(word, "n") if wn is not None else None
    if base is None:
        return set()
    out = set()
    for sense in wn.senses(base, "n")[:2]:
        for path in _hypernym_paths(wn, sense):
            out |= {w for s in path[_TOO_GENERAL:] for w in _lemmas(wn, s)}
    return out - {word}


def _hypernym_paths(wn: WordNet, sense: tuple[str, int]) -> list[list[tuple[str, int]]]:
    """Paths from the root down to ``sense`` (WordNet's ``hypernym_paths``)."""
    ups = wn.related(*sense, "hypernym")
    if not ups:
        return [[sense]]
    return [path + [sense] for up in ups for path in _hypernym_paths(wn, up)]


def wh_words(word: str, wn: WordNet | None = None) -> set[str]:
    """The wh-words that ask for a kind ``word`` names ("country" → where, "year" → when).

    >>> sorted(wh_words("country"))
    ['where']
    """
    wn = wn or wordnet()
    if wn is None:
        return set()
    base = wn.morphy(word, "n")
    if base is None:
        return set()
    above = set()
    for sense in wn.senses(base, "n")[:2]:  # the commonest senses: "bank" is money before it is a river's side
        above |= wn.hypernym_closure(*sense) | {sense}
    return {wh for wh, kinds in WH_SENSES.items() if above & _named_senses(wn, kinds)}


_AGENT = ("er", "or", "ist", "ant", "ent")


def agent_nouns(word: str, wn: WordNet | None = None) -> list[str]:
    """Nouns WordNet derives from a verb that name its doer ("direct" → "director", "play" → "player").

    >>> "director" in agent_nouns("directed")
    True
    """
    wn = wn or wordnet()
    base = wn.morphy(word, "v") if wn is not None else None
    if base is None:
        return []
    out = set()
    for sense in wn.senses(base, "v")[:BROAD_SENSES]:
        for kind, p, o, _source, target in wn.sense(*sense)[1]:
            if kind == "derived" and p == "n":
                lemmas = wn.sense(p, o)[0]
                if target and target <= len(lemmas) and lemmas[target - 1].endswith(_AGENT):
                    out.add(lemmas[target - 1])
    return sorted(out)


def build_lexicon(relation_phrases: dict[str, Iterable[str]], stem, stop: Iterable[str] = ()) -> dict:
    """``{relation: {stem: [how, weight, word]}}`` for each relation's phrases (its label, alt labels and its
    inverse's), keeping only what the phrases do not already spell; ``stem`` is the reader's stemmer."""
    wn = wordnet()
    if wn is None:
        return {}
    stop = set(stop)
    light = {stem(w) for w in LIGHT_WORDS}  # "maker" would stem like "makes", a light verb
    out: dict[str, dict[str, list]] = {}
    for relation, phrases in relation_phrases.items():
        words = {w for p in phrases for w in _WORD.findall(p.lower()) if w not in stop and len(w) > 2}
        own = {stem(w) for w in words}
        table: dict[str, list] = {}
        for word in sorted(words):
            # by part of speech, for the irregular forms below: "lead" is a synonym of the noun "star" and of the
            # verb "direct", and only the verb's "led" is past tense
            by_pos = {pos: related_words(word, wn, (pos,)) for pos in ("n", "v")}
            found = {**by_pos["n"]}
            for w, hw in by_pos["v"].items():
                if hw[1] > found.get(w, ("", 0.0))[1]:
                    found[w] = hw
            # what the word is a kind of, or, for an inflected verb, what its doer is ("directed" → "director",
            # a person: "who")
            agents = [word] + (agent_nouns(word, wn) if wn.morphy(word, "v") not in (None, word) else [])
            for kind in (k for agent in agents for k in kinds(agent, wn)):
                if kind not in found:
                    found[kind] = ("kind", WEIGHTS["kind"])
            found.update({wh: ("wh", WEIGHTS["wh"]) for agent in agents for wh in wh_words(agent, wn)})
            for w, (how, weight) in found.items():
                s = stem(w)
                if s not in own and s not in light and weight > (table.get(s) or [None, 0.0])[1]:
                    table[s] = [how, weight, f"{w} ({how} of {word})"]
            # irregular forms of the relation's own words and of their related words ("led" for "lead")
            for pos, base, (how, weight) in [(pos, word, ("form", 1.0)) for pos in ("n", "v")] + \
                    [(pos, w, hw) for pos, related in by_pos.items() for w, hw in related.items()]:
                for form in _irregular_forms(pos).get(base, ()):
                    s = stem(form)
                    if s not in own and s not in light and weight > (table.get(s) or [None, 0.0])[1]:
                        table[s] = [how, weight, f"{form} ({how} of {word})"]
        out[relation] = table
    return out


@lru_cache(maxsize=2)
def _irregular_forms(pos: str) -> dict[str, list[str]]:
    """A lemma's irregular inflections as a ``pos`` (verb ``lead`` → ``led``) from WordNet's exception lists."""
    out: dict[str, list[str]] = {}
    for form, bases in wordnet().exceptions[pos].items():
        for base in bases:
            if "_" not in form and "_" not in base:
                out.setdefault(base, []).append(form)
    return out


# ---------------------------------------------------------------- role words

#: "the father of your father or mother", "a child of your son or daughter": a role of a role.
_OF_YOUR = re.compile(r"^(?:a|an|the)\s+([a-z]+)\s+of\s+(?:your|a person's|someone's|one's)\s+"
                      r"([a-z]+(?:\s+or\s+[a-z]+)?)$")
#: "informal terms for a mother": another word for a role.
_TERM_FOR = re.compile(r"^(?:an?\s+)?(?:informal\s+|familiar\s+)?terms?\s+for\s+(?:a|an|the)\s+([a-z]+)$")
#: "a female person who has the same parents as another person", "a male with the same parents as someone else":
#: a role that shares a role's holder (a sibling: a child of one's parents).
_SAME_AS = re.compile(r"^(?:a|an)\s+([a-z]+)(?:\s+person)?\s+(?:who\s+has|with)\s+the\s+same\s+([a-z]+)\s+as\s+"
                      r"(?:another(?:\s+person)?|someone\s+else)$")
#: "a male parent", "a female human offspring", "a married man": a kind of a role (or of a person).
_KIND_OF = re.compile(r"^(?:a|an|the)\s+((?:[a-z]+\s+){0,2})([a-z]+)$")
#: How many levels of definitions a role word is read through ("grandson": a male grandchild, a child of a son
#: or daughter, a male offspring), and how many of its senses.
ROLE_DEPTH = 3
ROLE_SENSES = 2


def _weight(names, word: str) -> float:
    return max(names(word).values(), default=0.0)


def role(word: str, names, wn: WordNet | None = None, depth: int = ROLE_DEPTH, climb: bool = True
         ) -> tuple[tuple[str, ...], frozenset[str]] | None:
    """A role word as the chain of relation words it is made of, nearest the person first, and the qualities its
    holder has, read from WordNet's definitions and compounds. ``names(word)`` maps the relations of the KB a word
    names to how surely: 1 by a relation's own words (such a word is never taken apart), less by a related word
    ("father" for parents: taken apart where WordNet defines it by surer words, "a male parent"). Only the word
    itself is also read through its hypernyms ("husband" is a spouse), and every word of a definition must name
    a relation itself or be defined by one. None when no chain of such words makes the word.

    >>> def names(w):
    ...     return {"parent": {"p": 1.0}, "child": {"c": 1.0}, "son": {"c": 0.7}, "daughter": {"c": 0.7}}.get(w, {})
    >>> role("grandfather", names)
    (('parent', 'parent'), frozenset({'male'}))
    >>> role("mom", names)
    (('parent',), frozenset({'female'}))
    >>> role("grandson", names)
    (('son', 'child'), frozenset({'male'}))
    """
    wn = wn or wordnet()
    weight = _weight(names, word)
    if weight >= 1.0:
        return (word,), frozenset()
    said: frozenset[str] = frozenset()
    if wn is not None and depth > 0 and (base := wn.morphy(word, "n")) is not None:
        for rank, sense in enumerate(wn.senses(base, "n")[:ROLE_SENSES]):
            found, qualities_said = _sense_role(wn, sense, names, depth, climb)
            said = said | qualities_said if rank == 0 else said
            if found is None:
                continue
            # Taken apart into a longer chain or surer words ("father" is a male parent); a word that names its
            # relation as surely as its parts keeps its place and takes their qualities ("son": male).
            if len(found[0]) > 1 or min(_weight(names, w) for w in found[0]) > weight:
                return found
            said = said | found[1] if rank == 0 else said
    return ((word,), said) if weight > 0 else None


def _defined_role(wn: WordNet, word: str, names, depth: int):
    """A word's role by its commonest sense's definition as a role of a role ("a child of your son or daughter")."""
    base = wn.morphy(word, "n")
    senses = wn.senses(base, "n") if base and depth > 0 else []
    gloss = re.split(r"[(]", wn.gloss(*senses[0]))[0].strip().lower() if senses else ""
    if match := _OF_YOUR.match(gloss):
        inner = [role(w, names, wn, depth - 1, False) for w in match.group(2).split(" or ")]
        outer = role(match.group(1), names, wn, depth - 1, False)
        if outer and all(inner) and _same_relations([chain for chain, _q in inner], names):
            return inner[0][0] + outer[0], outer[1]  # "father or mother": a parent, of either sex
    return None


def _same_relations(chains: list[tuple[str, ...]], names) -> bool:
    """Whether chains name the same relations hop by hop ("son or daughter": children, either way)."""
    return len({len(c) for c in chains}) == 1 and all(
        set.intersection(*(set(names(c[i])) for c in chains)) for i in range(len(chains[0])))


def _sense_role(wn: WordNet, sense: tuple[str, int], names, depth: int, climb: bool):
    """One sense's role (or None), and the qualities its definition and compounds say of its holder."""
    lemmas, pointers = wn.sense(*sense)
    for lemma in lemmas:  # "kid" is a lemma of the sense whose lemma "child" names a relation
        if "_" not in lemma and _weight(names, lemma) >= 1.0:
            return ((lemma,), frozenset()), frozenset()
    gloss = re.split(r"[(]", wn.gloss(*sense))[0].strip().lower()
    if match := _OF_YOUR.match(gloss):
        inner = [role(w, names, wn, depth - 1, False) for w in match.group(2).split(" or ")]
        outer = role(match.group(1), names, wn, depth - 1, False)
        if outer and all(inner) and _same_relations([chain for chain, _q in inner], names):
            return (inner[0][0] + outer[0], outer[1]), frozenset()  # "father or mother": a parent, of either sex
    if match := _SAME_AS.match(gloss):
        shared, back = role(match.group(2), names, wn, depth - 1, False), role("child", names, wn, depth - 1, False)
        if shared and back and len(shared[0]) == 1:
            return (shared[0] + back[0], frozenset({match.group(1)}) | qualities(match.group(1), wn)), frozenset()
    if match := _TERM_FOR.match(gloss):
        if found := role(match.group(1), names, wn, depth - 1, False):
            return found, frozenset()
    said: set[str] = set()
    heads: list[tuple[list[str], str]] = []  # (words before, head noun): "a male parent", "female_parent"
    if match := _KIND_OF.match(gloss):
        heads.append((match.group(1).split(), match.group(2)))
    hypernyms = [lemma for kind, p, o, _s, _t in pointers if kind == "hypernym" for lemma in wn.sense(p, o)[0]]
    heads += [(lemma.split("_")[:-1], lemma.split("_")[-1]) for lemma in [*lemmas, *hypernyms] if "_" in lemma]
    for before, head in heads:
        said |= set(before)
        # A head that names no relation is read only by a definition of a role of roles ("a male grandchild").
        if found := role(head, names, wn, depth - 1, False) if _weight(names, head) > 0 else \
                _defined_role(wn, head, names, depth - 1):
            return (found[0], found[1] | said), frozenset(said)
        said |= {head} | qualities(head, wn)  # "a married man": a man, so male
    for lemma in hypernyms if climb else ():  # "husband" is a spouse; "mom" a mother
        if "_" not in lemma and _weight(names, lemma) > 0 and (found := role(lemma, names, wn, depth - 1, False)):
            return (found[0], found[1] | said), frozenset(said)
    return None, frozenset(said)


def qualities(noun: str, wn: WordNet | None = None) -> set[str]:
    """What a noun's holder is, by the words of its commonest sense's hypernyms ("man" → adult, male).

    >>> "male" in qualities("man")
    True
    """
    wn = wn or wordnet()
    base = wn.morphy(noun, "n") if wn is not None else None
    if base is None or not (senses := wn.senses(base, "n")):
        return set()
    out = set()
    for p, o in wn.related(*senses[0], "hypernym"):
        for lemma in wn.sense(p, o)[0]:
            out.add(lemma.split("_")[0])
    return out


#: Prefixes of opposite sense ("hypertelorism" / "hypotelorism", "macrocephaly" / "microcephaly").
OPPOSITE_PREFIXES = (("hyper", "hypo"), ("macro", "micro"), ("over", "under"), ("increas", "decreas"))


@lru_cache(maxsize=20_000)
def opposites(word: str) -> frozenset[str]:
    """Words of the opposite sense: WordNet's antonyms of the word as an adjective, noun or verb ("increased" →
    "decreased", "tall" → "short"), and the word with an opposite prefix ("hypertelorism" → "hypotelorism"). Two
    phrases that differ so mean opposite things however near an encoder places them."""
    pairs = (*OPPOSITE_PREFIXES, *((b, a) for a, b in OPPOSITE_PREFIXES))
    out = {b + word[len(a):] for a, b in pairs if word.startswith(a)}
    wn = wordnet()
    if wn is not None:
        for pos in ("a", "n", "v"):
            base = word if pos == "a" else wn.morphy(word, pos)
            for sense in wn.senses(base, pos) if base else ():
                for kind, p, o, _source, target in wn.sense(*sense)[1]:
                    if kind == "antonym":
                        lemmas = wn.sense(p, o)[0]
                        out.add(lemmas[target - 1] if 0 < target <= len(lemmas) else lemmas[0])
    return frozenset(out)


@lru_cache(maxsize=65536)
def is_noun(word: str, unknown: bool = False) -> bool:
    """Whether WordNet knows the word as a noun (in any form: "seizures"); ``unknown`` is the answer without WordNet,
    which each caller chooses for itself (a relation's word is a noun unless known otherwise; a common word that
    may be a name is not)."""
    wn = wordnet()
    return unknown if wn is None else wn.morphy(word, "n") is not None


def is_adjective(word: str) -> bool:
    """Whether WordNet knows the word as an adjective (False without WordNet)."""
    wn = wordnet()
    return wn is not None and word in wn.adjectives


def is_inflected_verb(word: str) -> bool:
    """A verb's inflected form ("born", "directed", "stars"), which a noun may also spell (Max Born)."""
    wn = wordnet()
    return wn is not None and wn.morphy(word, "v") not in (None, word)


def base_forms(word: str) -> list[str]:
    """The word's lemmas as a noun and as a verb ("stars" → star, star), none without WordNet."""
    wn = wordnet()
    return [] if wn is None else [b for pos in ("n", "v") if (b := wn.morphy(word, pos))]
