"""Step 2 of reading: which words of a request name which relation, and how surely.

Three sources, strongest first, none of them written for one KB:

1. :func:`label_words`: the words of a relation's ``rdfs:label`` and ``skos:altLabel`` phrases and those of
   its inverse, matched on their stems (:func:`stem`): "directed", "director", "directs" name ``directed by``.
2. :func:`wordnet_words`: words WordNet relates to those (:mod:`kqe_rdf.kb.lexicon`): "manager" is a synonym
   of "director", "dad" is below "parent", "national" pertains to "country", "where" asks for a place.
3. :meth:`RelationWords.similar`: words of this one request that the encoder places clearly nearest to one
   relation's phrases ("couple" 0.59 from "spouse"), where neither of the others says anything.

A relation's table maps a word's stem to ``[how, weight, text]`` (``["synonym", 0.8, "manager (synonym of
director)"]``); the ranking (:mod:`.ranking`) reads the weights, the explanation the texts.
"""

from __future__ import annotations

import atexit
import functools
import hashlib
import re
import weakref
from collections.abc import Iterable, Sequence

import numpy as np

from ...kb.lexicon import WEIGHTS
from ...kb.ontology import negates
from ...kb.phrases import remember_phrase_vectors, remembered_phrase_vectors, stored_phrase_vectors
from ...kb.words import FUNCTION_WORDS

#: How near a request's word must be to a relation's phrases, and how much nearer than to any other relation's,
#: to mean it by the encoder alone (all-MiniLM-L6-v2 cosines: unrelated words sit at 0.25-0.45).
SIMILAR = 0.55
SIMILAR_MARGIN = 0.1

_WORD = re.compile(r"[a-z0-9]+")
_SUFFIXES = ("ings", "ing", "ers", "ors", "er", "or", "ed", "en", "es", "s")


@functools.lru_cache(maxsize=65536)  # (a request's words are stemmed once per path it ranks)
def stem(word: str) -> str:
    """A light English stemmer, enough to match relation words across forms: "directed", "director",
    "directors" → "direct"; "starred", "starring", "stars" → "star"; "written", "writer" → "writ".

    >>> stem("directed") == stem("director") == stem("directs")
    True
    """
    w = word.lower()
    for suffix in _SUFFIXES:
        if w.endswith(suffix) and len(w) - len(suffix) >= 3:
            w = w[: -len(suffix)]
            break
    if len(w) >= 4 and w[-1] == w[-2] and w[-1] not in "lsz":
        w = w[:-1]
    if len(w) >= 4 and w.endswith("e"):
        w = w[:-1]
    return w


def phrase_stems(phrase: str) -> set[str]:
    """The stems of a phrase's words that can name a relation.

    >>> sorted(phrase_stems("directed by"))
    ['direct']
    """
    return {stem(w) for w in _WORD.findall(phrase.lower()) if w not in FUNCTION_WORDS}


def ontology_phrases(kb) -> dict[str, set[str]]:
    """The ontology's phrases per relation: its ``rdfs:label`` and ``skos:altLabel`` values
    (:attr:`~kqe_rdf.kb.ontology.Schema.relation_phrases`), copied: rules add to them."""
    return {iri: set(phrases) for iri, phrases in kb.schema.relation_phrases.items()}


def label_words(schema, phrases: dict[str, set[str]]) -> dict[str, set[str]]:
    """Rule 1. Each relation's phrases: its label and alt labels, and those of its inverse (which direction a
    request walks is the data's business)."""
    named: dict[str, set[str]] = {}
    for iri, rel in schema.relations.items():
        named[iri] = phrases.get(iri, set()) | {rel.label}
        if rel.inverse:
            named[iri] |= phrases.get(rel.inverse, set()) | {schema.label(rel.inverse)}
    return named


_LEXICONS: dict[tuple, dict] = {}


def wordnet_words(named: dict[str, set[str]]) -> dict[str, dict[str, list]]:
    """Rule 2. The WordNet table of :mod:`kqe_rdf.kb.lexicon` for these relation phrases (made once per
    process): ``{relation: {stem: [how, weight, text]}}``."""
    key = tuple(sorted((iri, tuple(sorted(ps))) for iri, ps in named.items()))
    if key not in _LEXICONS:
        from ...core.resources import cached
        from ...kb.lexicon import LEXICON_VERSION, build_lexicon, wordnet_dir

        # Made once per machine for these phrases (about half a second a process otherwise).
        made_from = hashlib.sha256(repr((key, sorted(FUNCTION_WORDS), LEXICON_VERSION, str(wordnet_dir()))).encode()
                              ).hexdigest()[:24]
        _LEXICONS[key] = cached(f"lexicon-{made_from}.pickle", lambda: build_lexicon(named, stem, FUNCTION_WORDS))
    return _LEXICONS[key]


#: Readers with phrases encoded but not yet written: written when the process exits.
_UNWRITTEN: weakref.WeakSet = weakref.WeakSet()


@atexit.register
def _write_unwritten() -> None:
    for words in list(_UNWRITTEN):
        if words.kb.path.exists():  # (a KB removed meanwhile has no later process to read them)
            words.write_remembered()


class RelationWords:
    """The words that name each relation of a KB, by the three rules of this module."""

    def __init__(self, kb, phrase_vectors: dict | None = None) -> None:
        self.kb = kb
        #: The ontology's own phrases per stored relation (label and alt labels).
        self.relation_phrases = ontology_phrases(kb)
        #: Each relation's phrases and its inverse's (rule 1).
        self.named = label_words(kb.schema, self.relation_phrases)
        #: Stems naming each relation (rule 1), and all of them.
        self.relation_stems: dict[str, set[str]] = {iri: set().union(*map(phrase_stems, ps))
                                                    for iri, ps in self.named.items()}
        self.all_stems = set().union(*self.relation_stems.values()) if self.relation_stems else set()
        #: Stems of words related to each relation's words where no relation spells the word itself (rule 2).
        self.related = {iri: {s: v for s, v in table.items() if s not in self.all_stems}
                        for iri, table in wordnet_words(self.named).items()}
        #: The strongest weight each related stem has for any relation.
        self.related_weight: dict[str, float] = {}
        for table in self.related.values():
            for s, (_how, weight, _word) in table.items():
                self.related_weight[s] = max(weight, self.related_weight.get(s, 0.0))
        #: Related stems that are wh-words of some relation's kind ("where" to a relation of places), and each
        #: relation's pertainyms ("national" to country): what ranking asks of every path, looked up once.
        self.wh_stems = {s for table in self.related.values() for s, (how, _w, _t) in table.items() if how == "wh"}
        self.pertainyms = {iri: {s for s, (how, _w, _t) in table.items() if how == "pertainym"}
                           for iri, table in self.related.items()}
        #: Relations that state an absence by their phrases or their inverse's ("lacks phenotype", "absent in"):
        #: read only where the request states one too (:func:`.ranking.says_absence`).
        self.negative = {iri for iri, ps in self.named.items() if any(negates(p) for p in ps)}
        self._phrase_vectors: dict[str, np.ndarray] = phrase_vectors if phrase_vectors is not None else {}
        self._words: dict[str, np.ndarray] = {}
        #: Phrases encoded at request time, by this process or earlier ones (:mod:`kqe_rdf.kb.phrases`).
        self._remembered: dict[str, np.ndarray] | None = None
        #: How many of them the cache file held when this process last read or wrote it.
        self._written = 0

    def vectors(self, phrases: Sequence[str]) -> np.ndarray:
        """The encoder's vectors of phrases: those stored with the KB or remembered from earlier processes, the
        rest encoded once."""
        if self._remembered is None:
            if not self._phrase_vectors:
                self._phrase_vectors.update(stored_phrase_vectors(self.kb))
            self._remembered = remembered_phrase_vectors(self.kb)
            self._written = len(self._remembered)
            for p, v in self._remembered.items():
                self._phrase_vectors.setdefault(p, v)
        missing = [p for p in phrases if p not in self._phrase_vectors]
        if missing:
            for p, v in zip(missing, self.kb.encoder.encode(missing)):
                self._phrase_vectors[p] = self._remembered[p] = v
            # Written once, when the process exits: a long-running server rewrote the whole file (up to 3 MB) after
            # requests that met new paths (issue 52), and a later process needs them only once this one is done.
            _UNWRITTEN.add(self)
        return np.stack([self._phrase_vectors[p] for p in phrases])

    def write_remembered(self) -> None:
        """Keep the phrases this process encoded for later processes (:func:`~kqe_rdf.kb.phrases.remember_phrase_vectors`)."""
        if self._remembered is not None and len(self._remembered) > self._written:
            remember_phrase_vectors(self.kb, self._remembered)
            self._written = len(self._remembered)

    def similar(self, words: Iterable[str], phrases: dict[str, str] | None = None) -> dict[str, dict[str, list]]:
        """Rule 3. Relations that words of a request mean by the encoder, where neither a label nor WordNet
        says ("kid" is 0.58 from "children"): a word counts for the relation whose phrases it is nearest to
        when it is near enough (:data:`SIMILAR`) and clearly nearer than to any other (:data:`SIMILAR_MARGIN`).
        ``phrases`` are read the same way, whole ("a man or a woman" is 0.63 from "gender", "man" alone 0.31),
        each counting as the word it maps to."""
        phrases = phrases or {}
        anchor = {w: w for w in words if len(w) > 2} | phrases
        words = sorted(anchor)
        if not words or not self.named:
            return {}
        owners = [(iri, p) for iri, ps in sorted(self.named.items()) for p in sorted(ps)]
        phrases = self.vectors([p for _i, p in owners])
        new = [w for w in words if w not in self._words]
        if new:
            self._words.update(zip(new, self.kb.encoder.encode(new)))
        # A relation and its inverse share their phrases (rule 1): they are one fact read two ways, so the
        # margin is to the nearest *other* relation, and the word names both directions.
        inverse = {iri: rel.inverse for iri, rel in self.kb.schema.relations.items() if rel.inverse}
        out: dict[str, dict[str, list]] = {}
        for word in words:
            best: dict[str, tuple[float, str]] = {}
            for (iri, phrase), sim in zip(owners, phrases @ self._words[word]):
                if sim > best.get(iri, (-1.0, ""))[0]:
                    best[iri] = (float(sim), phrase)
            ranked = sorted(best.items(), key=lambda kv: -kv[1][0])
            iri, (top, phrase) = ranked[0]
            fact = {iri} | {other for other, _ in ranked if inverse.get(other) == iri or inverse.get(iri) == other}
            second = max((sim for other, (sim, _p) in ranked if other not in fact), default=0.0)
            if top >= SIMILAR and top - second >= SIMILAR_MARGIN:
                weight = round(min(top, WEIGHTS["synonym"]), 2)
                for other in fact:
                    out.setdefault(other, {})[stem(anchor[word])] = ["similarity", weight,
                                                                     f"{word} (similarity {top:.2f} to {phrase})"]
        return out
