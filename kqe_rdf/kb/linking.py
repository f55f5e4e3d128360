"""Entity linking: from a name as a user wrote it to nodes of the KB.

Constants are linked in four steps, each used only when the previous finds
nothing good: exact match on a normalised name or alias, fuzzy match
(rapidfuzz), BM25 over names, then embedding similarity over node documents —
always restricted to a type when one is known, and keeping a few scored
alternatives rather than only the best. The same name index powers the
offline mention finder: n-grams of the query matched against names.
"""

from __future__ import annotations

import bisect
import functools
import gzip
import itertools
import json
import re
import unicodedata
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace

import numpy as np

from . import context, queries
from ..core.resources import cyclic_gc_paused
from .documents import BROAD_ALIAS
from .lexicon import opposites
from .phrases import term_name_vectors
from .context import ABSENT, PRESENT
from .words import HONORIFICS, NAME_PARTICLES, STOPWORDS

# A possessive "'s" is a token of its own ("Ann's dad": "Ann", "'s", "dad"); names keep their apostrophes'
# place because names are matched on their folded form, where an apostrophe is a space ("ocean s eleven").
_TOKEN = re.compile(r"[\w-]+(?:['’](?!s\b)[\w-]+)*(?:['’](?!s\b))?|['’]s\b", re.UNICODE)
_WORD = re.compile(r"[a-z0-9]+")


def normalise_name(text: str) -> str:
    """Case, accents and punctuation folded: "Crohn's disease" → "crohn s disease"."""
    if not text.isascii():  # (ASCII is its own decomposition)
        text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode() or text
    return " ".join(_WORD.findall(text.lower()))


def singular(key: str) -> str:
    """English plural of the last word undone ("seizures" → "seizure", "allergies" → "allergy")."""
    if key.endswith("ies") and len(key) > 4:
        return key[:-3] + "y"
    if key.endswith("s") and not key.endswith("ss") and len(key) > 3:
        return key[:-1]
    return key


def _add_name(by_name: dict, inverted: dict, name: str, node) -> None:
    key = normalise_name(name)
    if key:
        by_name[key].add(node)
        if name.count(",") == 1:
            # Term lists write names inverted at a comma ("Intellectual disability, mild"); requests write
            # them straight ("mild intellectual disability").
            head, _comma, tail = name.partition(",")
            inverted[normalise_name(f"{tail} {head}")].add(node)


#: A parenthesis in a name ("Paris (France)"), which the short forms of a person's name leave out.
_PARENTHESIS = re.compile(r"\s*\([^)]*\)")


def sub_names(name: str) -> set[str]:
    """The shorter names people write for a person's full name: without an honorific ("Sir Alexander Fleming" →
    "Alexander Fleming"), a parenthesis or an appositive after a comma ("Marie Curie, née Sklodowska" → "Marie
    Curie"), and given name with family name ("Niels Henrik David Bohr" → "Niels Bohr"); only for names written
    as a person's (each word capitalised), never the name itself.

    >>> sorted(sub_names("Niels Henrik David Bohr"))
    ['Niels Bohr']
    >>> sorted(sub_names("Sir Alexander Fleming")), sorted(sub_names("Marie Curie, née Sklodowska"))
    (['Alexander Fleming'], ['Marie Curie'])
    >>> sub_names("Intellectual disability, mild"), sub_names("Blade Runner")
    (set(), set())

    A disambiguation is left out of any name, a qualifier after a comma out of a proper name:

    >>> sub_names("Rumours (album)"), sub_names("Calais, Pas-de-Calais"), sorted(sub_names("ABBA: The Album"))
    ({'Rumours'}, {'Calais'}, [])
    """
    out = set()
    base = _PARENTHESIS.sub("", name).strip() if "(" in name else name.strip()
    if base and base != name.strip():
        out.add(base)  # a disambiguation in parentheses, on any name: "Rumours (album)" is written "Rumours"
    if "," in base:
        head = base.split(",", 1)[0].strip()
        if head.split() and _titled(head.split()[0]) and _proper(head.split()):
            out.add(head)  # a proper name's qualifier after a comma: "Calais, Pas-de-Calais" is written "Calais"
        base = head
    words = base.split()
    while words and words[0].lower().rstrip(".") in HONORIFICS and len(words) > 2:
        words = words[1:]
    # First and last word first: most names (titles, terms, products) fail there, before every word is read.
    if 2 <= len(words) <= 6 and _titled(words[0]) and _titled(words[-1]) and _proper(words):
        out.add(" ".join(words))
        if len(words) >= 3:
            out.add(f"{words[0]} {words[-1]}")
    return {n for n in out if normalise_name(n) != normalise_name(name)}


def _proper(words: list[str]) -> bool:
    """Words written as a proper name's: each capitalised, or a particle ("van", "de")."""
    return all(_titled(w) or w.lower() in NAME_PARTICLES for w in words)


def _titled(word: str) -> bool:
    """A word written as a name's: a capital, then lower case ("Bohr", "O'Neil"; not "DNA" or "of")."""
    if word.isascii() and word.isalpha():  # most words: the same test by two string methods
        return len(word) >= 2 and word[0].isupper() and word[1:].islower()
    letters = [c for c in word if c.isalpha()]
    return len(letters) >= 2 and letters[0].isupper() and all(c.islower() for c in letters[1:]) \
        and not any(c.isdigit() for c in word)


def _name_shapes(by_name: dict, inverted: dict) -> tuple[set[str], dict[str, set[int]]]:
    """The last words of the names, and the word counts of the names that start with each first word."""
    last_words = {k.rpartition(" ")[2] for k in (*by_name, *inverted)}
    lengths: dict[str, set[int]] = {}
    for k in (*by_name, *inverted):
        lengths.setdefault(k.partition(" ")[0], set()).add(k.count(" ") + 1)
    return last_words, lengths


@dataclass(frozen=True)
class Candidate:
    iri: str
    name: str
    score: float
    how: str  # exact | short name | fuzzy | bm25 | dense


@dataclass(frozen=True)
class Mention:
    text: str
    start: int
    end: int
    candidates: tuple[Candidate, ...]
    negated: bool = False
    #: What the request says of the term (:mod:`.context`): present, absent, family or uncertain, and the trigger
    #: phrase that said it ("no", "family history of"; '' for present). ``negated`` is ``state == "absent"``.
    state: str = PRESENT
    trigger: str = ""


class NameIndex:
    """Normalised names and aliases → node IRIs, each node's types and display name.

    Built with the KB (``<kb>/names.json.gz``), so a first request reads one file instead of every name in
    the store; a KB built before it has its index read from the store on first use."""

    FILE = "names.json.gz"
    LONGEST = 24

    def __init__(self, kb) -> None:
        self.kb = kb
        # (tens of thousands of lists and sets: a new process read the bio KB's in 0.11 s, not 0.2)
        with cyclic_gc_paused():
            self._open(kb)

    def _open(self, kb) -> None:
        stored = kb.path / self.FILE
        if stored.is_file():
            data = self._load(stored)
        else:
            data = self._read(kb.store, {d.iri: d.name for d in kb.documents()})
        self.keys = list(self.by_name)
        #: Last words of names, and how many words the names that start with each word have (its keys: their
        #: first words): a span of a request is looked up only when some name starts with its first word, ends
        #: with its last and has as many words (most spans of a long request have none). Written with the
        #: index; made here for an index written before.
        if "last_words" in data and "lengths" in data:
            self.last_words = set(data["last_words"])
            self.lengths = {w: set(n) for w, n in data["lengths"].items()}
        else:
            self.last_words, self.lengths = _name_shapes(self.by_name, self.inverted)
        #: Words in the longest name (capped): how long a span of a request can name a node (a name written
        #: inverted at its comma has the words of the name).
        self.longest = min(max((n for counts in self.lengths.values() for n in counts), default=1), self.LONGEST)

    def could_start(self, word: str) -> bool:
        """Whether a folded word may start a name (as a plural too, when it is the name's only word)."""
        return word in self.lengths or singular(word) in self.lengths

    def could_name(self, first: str, words: int) -> bool:
        """Whether a folded span of ``words`` words starting with ``first`` may be a name (as a plural too)."""
        return words in self.lengths.get(first, ()) or words in self.lengths.get(singular(first), ())

    def could_end(self, word: str) -> bool:
        """Whether a folded word may end a name ("seizures" ends "Focal seizure")."""
        return word in self.last_words or singular(word) in self.last_words

    @classmethod
    def build(cls, documents: Iterable, tables, path) -> None:
        """Write the index of a KB being built (``documents``: its node documents, for the display names and
        types; ``tables``: its :class:`~kqe_rdf.kb.documents.GraphTables`, which hold every name, alias and
        edge, so the store is not scanned)."""
        documents = sorted(documents, key=lambda d: d.iri)
        iris = [d.iri for d in documents]
        handles = [tables.handles[iri] for iri in iris]
        types = sorted({t for d in documents for t in d.types})
        type_number = {t: i for i, t in enumerate(types)}
        by_name: dict[str, set[int]] = defaultdict(set)
        inverted: dict[str, set[int]] = defaultdict(set)
        short: dict[str, set[int]] = defaultdict(set)
        for number, handle in enumerate(handles):
            for name in tables.names_of(handle):
                _add_name(by_name, inverted, name, number)
                for sub in sub_names(name):
                    short[normalise_name(sub)].add(number)
        broad: dict[str, set[int]] = defaultdict(set)
        for number, handle in enumerate(handles):
            for name in tables.text.get(handle, {}).get(BROAD_ALIAS, ()):
                if key := normalise_name(name):
                    broad[key].add(number)
        kinds, leaving = tables.hop_table()
        data = {"iris": iris, "labels": [d.name for d in documents], "types": types,
                "node_types": [[type_number[t] for t in sorted(d.types)] for d in documents],  # (numbered in order)
                "names": {k: sorted(v) for k, v in by_name.items()},
                "inverted": {k: sorted(v) for k, v in inverted.items()},
                "short": {k: sorted(v) for k, v in short.items() if k not in by_name},
                "broad": {k: sorted(v) for k, v in broad.items() if k not in by_name and k not in inverted},
                "hop_kinds": [list(k) for k in kinds],
                "hops": [leaving.get(h, []) for h in handles]}
        last_words, lengths = _name_shapes(by_name, inverted)
        data |= {"last_words": sorted(last_words), "lengths": {w: sorted(n) for w, n in sorted(lengths.items())}}
        with gzip.open(path, "wt", encoding="utf-8", compresslevel=3) as out:
            out.write(json.dumps(data, separators=(",", ":")))  # the C encoder: json.dump runs the Python one

    def _read(self, store, labels: dict[str, str]) -> dict:
        """Names, aliases and types read from the store (a KB built before the index was)."""
        names = ((r["node"].value, r["name"].value)
                 for r in store.query(queries.load("node_names"), use_default_graph_as_union=True))
        types = ((r["node"].value, r["type"].value)
                 for r in store.query(queries.load("node_types"), use_default_graph_as_union=True))
        self.labels = labels
        self._kinds, self._hop_numbers = [], None  # the hop summary is built with the KB only
        numbers: dict[str, int] = {}
        by_name: dict[str, set[int]] = defaultdict(set)
        inverted: dict[str, set[int]] = defaultdict(set)
        for iri, name in names:
            _add_name(by_name, inverted, name, numbers.setdefault(iri, len(numbers)))
        self.iris = list(numbers)
        self.by_name = {k: sorted(v) for k, v in by_name.items()}
        self.inverted = {k: sorted(v) for k, v in inverted.items()}
        self.short, self.broad = {}, {}
        self.types: dict[str, frozenset[str]] = {}
        for iri, type_iri in types:
            self.types[iri] = self.types.get(iri, frozenset()) | {type_iri}
        return {}

    def _load(self, path) -> dict:
        """The index as written: names map to node numbers, turned into IRIs only for the names a request
        looks up (a first request in a new process reads one file and builds no set of every node)."""
        with gzip.open(path, "rt", encoding="utf-8") as f:
            data = json.load(f)
        self.iris, types = data["iris"], data["types"]
        self.labels = dict(zip(self.iris, data["labels"]))
        combinations: dict[tuple, frozenset[str]] = {}
        self.types = {iri: combinations.get(key) or combinations.setdefault(key, frozenset(types[t] for t in key))
                      for iri, key in zip(self.iris, map(tuple, data["node_types"]))}
        self.by_name, self.inverted = data["names"], data["inverted"]
        #: People's names as people write them short (:func:`sub_names`), for nodes whose full name no request
        #: writes ("Niels Bohr" for "Niels Henrik David Bohr"); an index written before has none.
        self.short = data.get("short", {})
        #: Broader names people use (``kqe:broadAlias``: "big head" for Macrocephaly) that are no node's name; an
        #: index written before has none.
        self.broad = data.get("broad", {})
        self._kinds = [tuple(k) for k in data.get("hop_kinds", ())]
        self._hop_numbers = data.get("hops") if self._kinds else None
        self._number = {iri: n for n, iri in enumerate(self.iris)}
        return data

    @property
    def has_hops(self) -> bool:
        """Whether the KB was built with the hop summary (else the reader asks the store)."""
        return self._hop_numbers is not None

    def hops(self, iris: Iterable[str]) -> set[tuple[str, bool, str]]:
        """The kinds of edges (relation, walked head → tail, class reached) that leave any of ``iris``."""
        numbers = (self._number.get(iri) for iri in iris)
        return {self._kinds[k] for n in numbers if n is not None for k in self._hop_numbers[n]}

    def short_nodes(self, key: str) -> list[str]:
        """The nodes a short form of a person's name names (:attr:`short`)."""
        return sorted(self.iris[n] for n in self.short.get(key, ()))

    def broad_nodes(self, key: str) -> list[str]:
        """The nodes a broader name names (:attr:`broad`), as a plural too ("big heads")."""
        numbers = self.broad.get(key) or self.broad.get(singular(key), ())
        return sorted(self.iris[n] for n in numbers)

    @functools.cached_property
    def sorted_keys(self) -> list[str]:
        """The folded names in order, for lookups by their start (made on the first completion: a KB's names
        sorted once, about 30 ms for the bio KB's)."""
        return sorted(self.by_name)

    def complete(self, typed: str, types: set[str] | None = None, limit: int = 10) -> list[tuple[str, str, str]]:
        """Nodes (``types``: of these classes only) named by what a person has typed so far, best first, as (IRI,
        matched name, how): the names it is (``exact``), then those it starts (``prefix``, shortest first), then
        those with a word it starts (``word``), then those it is inside (``contains``); a node comes once, by its
        best name (an alias too: "epileptic" completes to Seizure by its alias Epileptic seizure).

        >>> index = example_kb().names
        >>> [(index.labels[i], how) for i, _name, how in index.complete("gran t")]
        [('Gran Torino', 'prefix')]
        >>> [(index.labels[i], how) for i, _name, how in index.complete("torino")]
        [('Gran Torino', 'word')]
        """
        key = normalise_name(typed)
        if not key or limit < 1:
            return []
        out: list[tuple[str, str, str]] = []
        seen: set[int] = set()
        labels = self.label_keys

        def take(names: list[str], how) -> bool:
            """The nodes of ``names`` (shortest first) by their label before those by an alias; whether full."""
            aliased = []
            for name in sorted(names, key=lambda name: (len(name), name)):
                for number in self.by_name[name]:
                    iri = self.iris[number]
                    if number in seen or (types is not None and not self.types.get(iri, frozenset()) & types):
                        continue
                    seen.add(number)
                    if labels[number] == name:
                        out.append((iri, name, how(name)))
                        if len(out) >= limit:
                            return True
                    else:
                        aliased.append((iri, name, how(name)))
            out.extend(aliased[: limit - len(out)])
            return len(out) >= limit

        keys = self.sorted_keys
        prefixed = list(itertools.takewhile(lambda name: name.startswith(key),
                                            itertools.islice(keys, bisect.bisect_left(keys, key), None)))
        if key in self.by_name and take([key], lambda _name: "exact"):
            return out
        if take([n for n in prefixed if n != key], lambda _name: "prefix"):
            return out
        inside = [name for name in keys if key in name and not name.startswith(key)]
        word = " " + key
        if take([n for n in inside if word in n], lambda _name: "word"):
            return out
        take([n for n in inside if word not in n], lambda _name: "contains")
        return out

    @functools.cached_property
    def label_keys(self) -> list[str]:
        """Each node's display name folded (by node number): a completion by a node's own name comes before one
        by its alias."""
        return [normalise_name(self.labels.get(iri) or "") for iri in self.iris]

    @functools.cached_property
    def sorted_iris(self) -> list[str]:
        """The nodes' IRIs in order (an index written with the KB has them so already)."""
        return self.iris if all(a < b for a, b in zip(self.iris, self.iris[1:])) else sorted(self.iris)

    def iris_starting(self, start: str, types: set[str] | None = None, limit: int = 10) -> list[str]:
        """The nodes (of ``types``) whose IRI starts with ``start``, in order: what a SPARQL editor completes."""
        iris, out = self.sorted_iris, []
        for iri in itertools.islice(iris, bisect.bisect_left(iris, start), None):
            if not iri.startswith(start) or len(out) >= limit:
                break
            if types is None or self.types.get(iri, frozenset()) & types:
                out.append(iri)
        return out

    def nodes(self, key: str, types: set[str] | None = None) -> list[str]:
        numbers = self.by_name.get(key) or self.by_name.get(singular(key)) or self.inverted.get(key, ())
        if not numbers and (bare := without_articles(key)) != key:  # "blood in the urine": Blood in urine
            numbers = self.by_name.get(bare) or self.by_name.get(singular(bare), ())
        iris = (self.iris[n] for n in numbers)
        return sorted(i for i in iris if types is None or self.types.get(i, frozenset()) & types)


class Linker:
    #: The mention rules of :meth:`mentions`, in the order they run, each on the words the rules before it left, and
    #: whether it runs when those found names (the last two only when nothing else names a node).
    MENTION_RULES = (("_exact_names", True), ("_short_names", True), ("_broader_names", True),
                     ("_names_with_articles", True), ("_fuzzy_names", False), ("_common_word_titles", False))

    def __init__(self, kb, alternatives: int = 3, fuzzy_cutoff: float = 90.0) -> None:
        self.kb = kb
        self.alternatives = alternatives
        self.fuzzy_cutoff = fuzzy_cutoff
        #: Each class's nodes and the vectors of their names, for links by meaning (:meth:`meant`).
        self._terms: dict[str, tuple[list[str], np.ndarray | None]] = {}
        #: The nearest name of a class to a phrase, by the encoder: (node number, cosine, lead over the next).
        self._nearest: dict[tuple[str, str], tuple[int, float, float]] = {}
        #: The links :meth:`phrases` made of a request's words by their words or meaning: a constant read from those
        #: words is linked as they were (:meth:`link`), not searched again.
        self.made: dict[str, tuple[Candidate, ...]] = {}

    @property
    def index(self) -> NameIndex:
        return self.kb.names

    def _name(self, iri: str) -> str:
        return self.index.labels.get(iri) or self.kb.document(iri).name

    def link(self, text: str, types: Iterable[str] | None = None) -> list[Candidate]:
        """Scored candidate nodes for a name; empty when nothing plausible exists."""
        wanted = set(types) if types else None
        key = normalise_name(text)
        if not key:
            return []
        exact = self.index.nodes(key, wanted)
        if exact:
            return [Candidate(i, self._name(i), 1.0, "exact") for i in exact[: self.alternatives]]

        def of_type(iri: str) -> bool:
            return wanted is None or bool(self.index.types.get(iri, frozenset()) & wanted)

        short = [i for i in self.index.short_nodes(key) if of_type(i)]
        if short:  # a name written without its disambiguation or a person's middle names, as :meth:`mentions` links it
            return [Candidate(i, self._name(i), 0.9, "short name") for i in short[: self.alternatives]]

        made = [c for c in self.made.get(key, ()) if of_type(c.iri)]
        if made:
            return made
        broad = [i for i in self.index.broad_nodes(key) if of_type(i)]
        if broad:  # a broader name people use ("big head"): before names that are merely near in spelling
            return [Candidate(i, self._name(i), BROADER, "broader name") for i in broad[: self.alternatives]]
        from rapidfuzz import fuzz, process

        out: list[Candidate] = []
        for match, score, _ in process.extract(key, self.index.keys, scorer=fuzz.ratio, limit=self.alternatives * 3,
                                               score_cutoff=self.fuzzy_cutoff):
            for iri in self.index.nodes(match, wanted):
                out.append(Candidate(iri, self._name(iri), score / 100.0, "fuzzy"))
        if out:
            return sorted(out, key=lambda c: (-c.score, c.iri))[: self.alternatives]
        type_list = sorted(wanted) if wanted else None
        hits = self.kb.text_index.search_names(text, self.alternatives, type_list)
        if hits:
            top = hits[0][1] or 1.0
            return [Candidate(i, self._name(i), s / top * 0.8, "bm25") for i, s in hits]
        if self.kb.has_embeddings:
            mask = self.kb.dense.type_mask(wanted) if wanted else None
            found = self.kb.dense.search(self.kb.encoder.encode([text]), self.alternatives, mask)[0]
            return [Candidate(i, self._name(i), s * 0.7, "dense") for i, s in found if s > 0.5]
        return []

    def mentions(self, query: str, max_words: int | None = None, skip_words: Iterable[str] = ()) -> list[Mention]:
        """Longest non-overlapping n-grams of ``query`` that name nodes (exact, then fuzzy).

        An n-gram made only of stopwords or schema words ("movie", "disease",
        "directed") is a mention only when nothing else is, and then only when
        written as a name (capitalised inside a sentence, or a number: the film
        "Her", "360"). An n-gram that starts or ends with such a word in lower
        case ("in Time", "the American") yields to any overlapping name that
        does not ("Time Changer", "American Gangster"), but not to a lower-case
        name inside it ("absent foveal reflex", not "reflex"). Among nodes that share
        a folded name, those whose name is written exactly, punctuation and
        all, win ("Moulin Rouge!" over "Moulin Rouge"). Mentions after a
        negation cue in the same sentence ("... were not observed", "no ...")
        are marked negated.
        """
        scan = _Scan(self, query, max_words, skip_words)
        for rule, after_names in self.MENTION_RULES:
            if after_names or not scan.found:
                getattr(self, rule)(scan)
        return scan.mentions()

    def _exact_names(self, scan: _Scan) -> None:
        """Names and aliases as written (folded), longest first, names with no weak edge before the rest.
        >>> found = Linker(example_kb()).mentions('films by Clint Eastwood')
        >>> [(m.text, m.candidates[0].name, m.candidates[0].how) for m in found]
        [('Clint Eastwood', 'Clint Eastwood', 'exact')]
        """
        for i, n in self._exact_order(scan.exact, scan.tokens, scan.plain, scan.soft, scan.opening, scan.free):
            if (key := scan.free(i, n)) and (iris := self._as_written(scan.tokens, i, n, self.index.nodes(key))):
                scan.take(i, n, iris, "exact", 1.0)

    def _short_names(self, scan: _Scan) -> None:
        """A person's name written short ("Niels Bohr" for "Niels Henrik David Bohr"), as a name is written
        (capitalised words): below exact names, every node it names kept.
        >>> found = Linker(example_kb()).mentions('what did Niels Bohr study')
        >>> [(m.text, m.candidates[0].name, m.candidates[0].how) for m in found]
        [('Niels Bohr', 'Niels Henrik David Bohr', 'short name')]
        """
        if not self.index.short:
            return
        size = len(scan.tokens)
        for i, n in sorted(((i, n) for i in range(size) for n in (3, 2, 1) if i + n <= size),
                           key=lambda span: (-span[1], span[0])):
            if all(_titled(t[0]) for t in scan.tokens[i : i + n]) and (key := scan.free(i, n)) \
                    and (iris := self.index.short_nodes(key)):
                scan.take(i, n, iris, "short name", 0.9)

    def _broader_names(self, scan: _Scan) -> None:
        """A broader name people use ("my baby has a big head": Macrocephaly's BROAD synonym), longest first:
        below names, never a lone stopword.
        >>> found = Linker(example_kb()).mentions('my baby has a big head')
        >>> [(m.text, m.candidates[0].name, m.candidates[0].how) for m in found]
        [('big head', 'Macrocephaly', 'broader name')]
        """
        if not self.index.broad:
            return
        size = len(scan.tokens)
        for i, n in sorted(((i, n) for i in range(size) for n in range(1, min(PHRASE_WORDS, size - i) + 1)),
                           key=lambda span: (-span[1], span[0])):
            if not all(scan.plain[i : i + n]) and (key := scan.free(i, n)) and (iris := self.index.broad_nodes(key)):
                scan.take(i, n, iris, "broader name", BROADER)

    def _names_with_articles(self, scan: _Scan) -> None:
        """A name written with an article it lacks ("blood in the urine" for Blood in urine), as a name.
        >>> found = Linker(example_kb()).mentions('blood in the urine')
        >>> [(m.text, m.candidates[0].name, m.candidates[0].how) for m in found]
        [('blood in the urine', 'Blood in urine', 'exact')]
        """
        inner, size = [k in _ARTICLE_WORDS for k in scan.keys], len(scan.tokens)
        if not any(inner):
            return
        spans = [(i, n) for i in range(size) if scan.starts[i] for n in range(3, min(scan.longest, size - i) + 1)
                 if scan.ends[i + n - 1] and any(inner[i + 1 : i + n - 1])]
        for i, n in sorted(spans, key=lambda span: (-span[1], span[0])):
            if (key := scan.free(i, n)) and (iris := self.index.nodes(key)):
                scan.take(i, n, iris, "exact", 1.0)

    def _fuzzy_names(self, scan: _Scan) -> None:
        """Names misspelt a little (rapidfuzz, slow over a large index: only when nothing matched exactly).
        >>> found = Linker(example_kb()).mentions('who directed Gran Torinno')
        >>> [(m.text, m.candidates[0].name, m.candidates[0].how) for m in found]
        [('Gran Torinno', 'Gran Torino', 'fuzzy')]
        """
        from rapidfuzz import fuzz, process

        for i, n in scan.spans(exact=False, shortest=2):
            first, last = scan.tokens[i][0].lower(), scan.tokens[i + n - 1][0].lower()
            if all(scan.plain[i : i + n]) or first in STOPWORDS or last in STOPWORDS or len(key := scan.free(i, n)) < 8:
                continue
            if match := process.extractOne(key, self.index.keys, scorer=fuzz.ratio, score_cutoff=92):
                scan.take(i, n, self.index.nodes(match[0]), "fuzzy", match[1] / 100.0)

    def _common_word_titles(self, scan: _Scan) -> None:
        """Titles made of common words or a number ("who stars in Her", "who directed 360"), when nothing else is
        a name: written as a name is, never the pronoun inside a sentence.

        >>> linker = Linker(example_kb())
        >>> [(m.text, m.candidates[0].name) for m in linker.mentions("who directed Her")]
        [('Her', 'Her')]
        >>> linker.mentions("what did her brother direct")
        []
        """
        for i, n in scan.exact:
            words = [t[0] for t in scan.tokens[i : i + n]]
            initial = i == 0 or scan.query[: scan.tokens[i][1]].rstrip()[-1:] in ".?!"
            if (words[0][:1].isupper() and not initial) or all(w.isdigit() for w in words):
                if (key := scan.free(i, n)) and (iris := self.index.nodes(key)):
                    scan.take(i, n, iris, "exact", 1.0)

    def phrases(self, query: str, found: list[Mention]) -> list[Mention]:
        """``found`` with the items of a list of terms that no name matches whole ("calf pseudohypertrophy" where the
        KB says "Calf muscle pseudohypertrophy"; "progressive proximal weakness", of which only "weakness" is a
        name) linked approximately: BM25 over the names of the class the list's other items name (a class with a
        hierarchy: phenotypes, not films), kept where the best name is one word apart from the item at most (one word
        missing or one more) and holds more of its words than the names found inside it, which it then replaces.
        Marked ``approximate``, scored below exact names by the share of the item's words the name holds. An item
        of two words or more with no name inside it that no name is near in words is linked by meaning where the
        encoder is clear (:meth:`meant`: "tall man" → Tall stature; one word alone is too little to go by)."""
        types: dict[str, int] = {}
        for m in found:
            for t in self.index.types.get(m.candidates[0].iri, ()) if m.candidates else ():
                types[t] = types.get(t, 0) + 1
        if not types:
            return found
        cls = max(sorted(types), key=types.get)
        if self.kb.schema.hierarchy_relation(cls) is None or (types[cls] < 2 and len(item_spans(query)) < 2):
            return found  # terms of a vocabulary (a hierarchy), in a list; never a name of a thing
        out = list(found)
        for start, end in item_spans(query):
            inside = [m for m in found if m.start < end and start < m.end]
            if any(m.start < start or m.end > end for m in inside):
                continue  # a name across the item's edge
            text = query[start:end]
            words = [w for w in re.findall(r"[a-z]+", text.lower()) if w not in STOPWORDS and len(w) > 2]
            named = {w for m in inside for w in re.findall(r"[a-z]+", m.text.lower())}
            if not words or len(words) > PHRASE_WORDS or all(w in named for w in words):
                continue
            hits = self.kb.text_index.search_names(" ".join(words), 1, [cls])
            first = hits[0][0] if hits else None
            if first is not None and (near := self._near_in_words(words, named, first)) is not None:
                out = [m for m in out if m not in inside]
                out.append(Mention(text, start, end, (near,)))
            elif not inside and len(words) > 1 and (meant := self.meant(text, cls, first)):
                out.append(Mention(text, start, end, (meant,)))
        if len(self.made) > 10_000:  # (a long-running server: the links of recent requests only)
            self.made.clear()
        self.made.update((normalise_name(m.text), m.candidates) for m in out
                         if m.candidates and m.candidates[0].how in ("approximate", "meaning"))
        return in_context(query, sorted(out, key=lambda m: m.start))

    def _near_in_words(self, words: list[str], named: set[str], iri: str) -> Candidate | None:
        """``iri``, marked ``approximate``, where its name is one word apart from an item's ``words`` at most (one of
        the item's missing from the name or one more in it: "calf pseudohypertrophy" → Calf muscle
        pseudohypertrophy), holds two of them at least and more than the names ``named`` inside the item."""
        name = self._name(iri)
        own = [n for n in re.findall(r"[a-z]+", name.lower()) if n not in STOPWORDS and len(n) > 2]
        held = [w for w in words if any(_same_word(w, n) for n in own)]
        extra = [n for n in own if not any(_same_word(w, n) for w in words)]
        if len(held) < 2 or len(words) - len(held) + len(extra) > 1 or len(held) <= len(named & set(words)):
            return None
        return Candidate(iri, name, round(0.8 * len(held) / len(words), 3), "approximate")

    def meant(self, text: str, cls: str, first: str | None) -> Candidate | None:
        """The node of ``cls`` whose name the encoder places nearest a phrase no name matches ("tall man" → Tall
        stature), when it is near enough and clear of the next (:data:`MEANT`); ``first`` is BM25's first node over
        the class's names, whose agreement lets a less clear one through. Chosen on HPO's synonyms, each taken as a
        phrase to link to its term by the names alone (``bench/term_links.py``): the most links at 80% right."""
        if cls not in self._terms:
            iris = [iri for iri in self.index.iris if cls in self.index.types.get(iri, ())]
            vectors = term_name_vectors(self.kb, iris, [self._name(i) for i in iris], cls) if len(iris) > 1 else None
            self._terms[cls] = (iris, None if vectors is None else vectors.astype(np.float32))
        iris, vectors = self._terms[cls]
        if vectors is None:
            return None
        if (text, cls) not in self._nearest:  # (a request's frame, "which disease explains this", recurs)
            if len(self._nearest) > 10_000:
                self._nearest.clear()
            scores = vectors @ self.kb.encoder.encode([text])[0]
            top = np.argpartition(scores, -2)[-2:]
            second, best = top[np.argsort(scores[top])]
            self._nearest[(text, cls)] = (int(best), float(scores[best]), float(scores[best] - scores[second]))
        best, near, clear = self._nearest[(text, cls)]
        alone, agreeing = MEANT
        name = self._name(iris[best])
        if not ((near >= alone[0] and clear >= alone[1]) or (iris[best] == first and near >= agreeing[0]
                                                             and clear >= agreeing[1])):
            return None
        said, named = set(_WORD.findall(text.lower())), set(_WORD.findall(name.lower()))
        if any(opposites(w) & said for w in named - said):
            return None  # "decreased T cell count" is not near Increased T cell count, whatever the encoder says
        return Candidate(iris[best], name, round(0.7 * near, 3), "meaning")

    def _as_written(self, tokens: list, i: int, n: int, iris: list[str]) -> list[str]:
        """Of the nodes a span names, those it may mean as written: a common English word in lower case ("my son
        has seizures") does not name a node known only by a symbol ("SON", a gene), unless a word beside it names
        the node's class ("the son gene"); written as the symbol ("SON") it does."""
        word = tokens[i][0]
        if n != 1 or not iris or not word.islower() or not english_word(word):
            return iris
        symbols = {iri for iri in iris if _is_symbol(self.index.labels.get(iri, ""))}
        if not symbols:
            return iris
        beside = {tokens[j][0].lower() for j in (i - 1, i + 1) if 0 <= j < len(tokens)}
        cues = self.kb.schema.class_cues
        named = {iri for iri in symbols
                 if any(beside & {c, *(c + "s",)} for t in self.index.types.get(iri, ()) for c in cues.get(t, ()))}
        return [iri for iri in iris if iri not in symbols or iri in named]

    def _exact_order(self, exact: list[tuple[int, int]], tokens: list, plain: list[bool], soft: list[bool],
                     opening: list[bool], free: Callable[[int, int], str]) -> list[tuple[int, int]]:
        """The spans to look up as exact names, in order: those with no weak edge, then weak ones ("in Time",
        "The Apartment" before "Zero"), then names inside a weak one that names a node: lower-case ones
        ("absent foveal reflex" is one phenotype, not the GO term "reflex"; a capitalised name inside still
        goes first: "in Time" is the film "Time"), and any inside a name that opens the sentence."""
        named = [(i, n) for i, n in exact if not all(plain[i : i + n])]
        weak = {(i, n) for i, n in named if soft[i] or soft[i + n - 1] or opening[i]}
        named_weak = [(i, n, opening[i]) for i, n in weak if self.index.nodes(free(i, n))]
        inside = {(i, n) for i, n in named if (i, n) not in weak
                  and any(a <= i and i + n <= a + m and (opens or not tokens[i][0][:1].isupper())
                          for a, m, opens in named_weak)}
        return sorted(named, key=lambda span: 2 if span in inside else int(span in weak))

    def _written(self, query: str, start: int, end: int, iris: list[str]) -> tuple[list[str], int]:
        """Of nodes sharing a folded name, those whose name the query writes exactly from ``start`` (the
        longest such name), and where the mention then ends; all of them when none is written so."""
        if len(iris) < 2:
            return iris, end
        written = [(len(label), iri) for iri in iris
                   if (label := self.index.labels.get(iri)) and len(label) >= end - start
                   and query[start : start + len(label)].lower() == label.lower()]
        if not written:
            return iris, end
        size = max(n for n, _iri in written)
        return [iri for n, iri in written if n == size], start + size



class _Scan:
    """A request's words as the mention rules read them: which may start or end a name, which are weak at an edge,
    which are taken, and the mentions found."""

    def __init__(self, linker: Linker, query: str, max_words: int | None, skip_words: Iterable[str]) -> None:
        skip = STOPWORDS | {w.lower() for w in skip_words}
        self.linker, self.query, index = linker, query, linker.index
        self.tokens = tokens = [(m.group(0), m.start(), m.end()) for m in _TOKEN.finditer(query)]
        self.keys = keys = [normalise_name(t[0]) for t in tokens]
        # a possessive alone names nothing, but ends names well ("McCool's")
        self.plain = [w.lower() in skip or w in ("'s", "’s") or (w.isdigit() and len(w) < 4) for w, _a, _b in tokens]
        # A lower-case stopword or schema word at an edge makes a span weak ("in Time").
        self.soft = [w.lower() in skip and not w[:1].isupper() for w, _a, _b in tokens]
        # One capitalised only because it opens the sentence makes a span weak beside an overlapping name, not
        # beside a name inside it ("The Apartment Zero film" names "Apartment Zero"; "The Apartment was ..." not
        # "Apartment").
        self.opening = [w.lower() in skip and w[:1].isupper() and not query[:a].rstrip()[-1:].strip(".?!")
                        for w, a, _b in tokens]
        self.longest = max_words or index.longest
        self.taken = [False] * len(tokens)
        self.found: list[Mention] = []
        # Which words may start or end a name: most spans of a long request are passed over without a lookup.
        self.starts = [index.could_start(k.partition(" ")[0]) for k in keys]
        self.ends = [index.could_end(k.rpartition(" ")[2]) for k in keys]
        # Words before each token in the folded text (a token may fold to none, "'s" to one, "don't" to two).
        self.before = [0]
        for k in keys:
            self.before.append(self.before[-1] + (k.count(" ") + 1 if k else 0))
        self.exact = self.spans()

    def spans(self, exact: bool = True, shortest: int = 1) -> list[tuple[int, int]]:
        """(first word, words) of the spans to try, longest first, then in the order of the request."""
        size, index, keys, before = len(self.tokens), self.linker.index, self.keys, self.before
        return sorted(((i, n) for i in range(size) if self.starts[i] or not exact
                       for n in range(shortest, min(self.longest, size - i) + 1)
                       if not exact or (self.ends[i + n - 1] and index.could_name(keys[i].partition(" ")[0],
                                                                                    before[i + n] - before[i]))),
                      key=lambda span: (-span[1], span[0]))

    def free(self, i: int, n: int) -> str:
        """The span's folded text when none of its words is taken yet."""
        return "" if any(self.taken[i : i + n]) else " ".join(k for k in self.keys[i : i + n] if k)

    def take(self, i: int, n: int, iris: list[str], how: str, score: float) -> None:
        for j in range(i, i + n):
            self.taken[j] = True
        linker = self.linker
        start, end = self.tokens[i][1], self.tokens[i + n - 1][2]
        iris, end = linker._written(self.query, start, end, iris)
        cands = tuple(Candidate(iri, linker._name(iri), score, how) for iri in iris[: linker.alternatives * 2])
        self.found.append(Mention(self.query[start:end], start, end, cands))

    def mentions(self) -> list[Mention]:
        """The mentions found, in the order of the request, each with what the request says of it (:func:`in_context`:
        "absent speech" names a phenotype, it negates nothing)."""
        return in_context(self.query, sorted(self.found, key=lambda m: m.start))

#: What separates a list's items: commas, semicolons, sentence ends, "and", "with", "plus".
_SEPARATORS = re.compile(r"[,;:.!?]|\b(?:and|with|plus)\b", re.I)
#: Longest list item (content words) linked approximately.
PHRASE_WORDS = 6
#: A broader name's link score: below a name (1.0) and a person's short name (0.9).
BROADER = 0.8
#: When the encoder's nearest name links a phrase no name matches (:meth:`Linker.meant`): (cosine, lead over the
#: second nearest) on its own, and where BM25's first name agrees.
MEANT = ((0.87, 0.03), (0.75, 0.10))


def item_spans(query: str) -> list[tuple[int, int]]:
    """The (start, end) of a request's list items: what :data:`_SEPARATORS` separate, stripped, non-empty."""
    out, at = [], 0
    for sep in [*_SEPARATORS.finditer(query), None]:
        end = sep.start() if sep else len(query)
        text = query[at:end]
        if text.strip():
            start = at + len(text) - len(text.lstrip())
            out.append((start, start + len(text.strip())))
        at = sep.end() if sep else end
    return out


def list_items(query: str) -> list[str]:
    """A request's list items (:func:`item_spans`).

    >>> list_items("boy with progressive proximal weakness, calf pseudohypertrophy and elevated CK")
    ['boy', 'progressive proximal weakness', 'calf pseudohypertrophy', 'elevated CK']
    """
    return [query[a:b] for a, b in item_spans(query)]


_ARTICLES = re.compile(r" (?:the|a|an)(?= )")
_ARTICLE_WORDS = frozenset({"the", "a", "an"})


def without_articles(key: str) -> str:
    """A folded name without the articles inside it, which requests add to names that lack them.

    >>> without_articles("blood in the urine"), without_articles("the matrix")
    ('blood in urine', 'the matrix')
    """
    return _ARTICLES.sub("", key)


def _same_word(a: str, b: str) -> bool:
    """Two words alike enough to be one (a shared start of five letters: "dilatation", "dilation" not;
    "pseudohypertrophy", "weakness" themselves).

    >>> _same_word("weakness", "weakness"), _same_word("progressive", "progression"), _same_word("big", "large")
    (True, True, False)
    """
    return a == b or (len(a) >= 5 and len(b) >= 5 and a[:5] == b[:5])


def _is_symbol(name: str) -> bool:
    """A name written as a symbol or an abbreviation: letters, all upper case, perhaps digits ("SON", "BRCA1").

    >>> _is_symbol("SON"), _is_symbol("BRCA1"), _is_symbol("Heat"), _is_symbol("360")
    (True, True, False, False)
    """
    name = name.strip()
    return bool(name) and " " not in name and any(c.isalpha() for c in name) and name.upper() == name


@functools.lru_cache(maxsize=65536)
def english_word(word: str) -> bool:
    """Whether WordNet knows the word ("son", "set"), so a lower-case use of it is the word, not a symbol."""
    from .lexicon import wordnet

    wn = wordnet()
    return wn is not None and (any(wn.morphy(word, pos) is not None for pos in ("n", "v")) or word in wn.adjectives)


def in_context(query: str, mentions: Sequence[Mention]) -> list[Mention]:
    """``mentions`` with their state in ``query`` (:func:`.context.read`: the trigger and its scope, "seizures; no
    hypotonia" negates hypotonia alone).

    >>> [(m.text, m.state, m.trigger) for m in in_context("seizures, no ataxia", [
    ...     Mention("seizures", 0, 8, ()), Mention("ataxia", 13, 19, ())])]
    [('seizures', 'present', ''), ('ataxia', 'absent', 'no')]
    """
    # (an item linked approximately may have taken in the trigger beside its term: "... stature were not observed")
    near = ("approximate", "meaning")
    spans = [context.trimmed(query, m.start, m.end) if m.candidates and m.candidates[0].how in near
             else (m.start, m.end) for m in mentions]
    read = context.read(query, spans)
    return [replace(m, negated=c.state == ABSENT, state=c.state, trigger=c.trigger) for m, c in zip(mentions, read)]
