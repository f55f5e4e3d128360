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

Role words (:class:`RoleReader`): a noun that means a chain of relations and a quality of whoever holds it.
"Grandfather" is the father of a father or mother: two hops of ``parents``, to someone male. "Mom" is a parent
who is female; "the religion of X's husband" reads ``spouse``, a male, then his religion. WordNet says so in
its definitions, compounds and hypernyms (:func:`kqe_rdf.kb.lexicon.role`); this module keeps what this KB can
read of it:

- the chain, when every word of it names one of the KB's relations (:class:`RelationWords`);
- the qualities that are values of the KB: nodes named so ("Male") that an attribute-like relation (few values,
  many edges: ``gender``) points at.

The ranking reads a path's hops from a role's chain (:func:`.ranking.role_hops`); the reader adds one triplet per
value to the node the role names (:mod:`.offline`). Nothing here names a relation or a word of a KB.
"""

from __future__ import annotations

import atexit
import functools
import hashlib
import weakref
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
from pyoxigraph import NamedNode

from ...core.caches import per_instance
from ...kb import queries
from ...kb.lexicon import WEIGHTS
from ...kb.linking import normalise_name
from ...kb.ontology import negates
from ...kb.phrases import remember_phrase_vectors, remembered_phrase_vectors, stored_phrase_vectors
from ...kb.words import FUNCTION_WORDS, phrase_stems, stem  # noqa: F401 (the package's names)

#: How near a request's word must be to a relation's phrases, and how much nearer than to any other relation's,
#: to mean it by the encoder alone (all-MiniLM-L6-v2 cosines: unrelated words sit at 0.25-0.45).
SIMILAR = 0.55
SIMILAR_MARGIN = 0.1


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


# ------------------------------------------------------------------ role words

#: How a related word may name a relation in a role's chain: said otherwise, not a broader word or a kind.
CHAIN_KINDS = frozenset({"synonym", "derived", "narrower", "form", "similarity"})
#: A relation whose edges point at at most this many distinct nodes holds values (sexes, statuses), not things
#: (queries/reader_relation_values.rq stops at one more).
MAX_VALUES = 32


@dataclass(frozen=True)
class Role:
    """A role word of a request: its position, the stems of its chain of relation words (nearest the person
    first) and the KB's values its holder has, as (relation IRI, value node IRI, value name)."""

    position: int
    word: str
    chain: tuple[str, ...]
    values: tuple[tuple[str, str, str], ...] = ()


class RoleReader:
    """The role words of requests against one KB."""

    def __init__(self, kb, words: RelationWords) -> None:
        self.kb = kb
        self.words = words

    def read(self, surface: dict[int, str], positions) -> dict[int, Role]:
        """The role words among the request's word ``positions`` (outside its mentions): those whose chain is
        longer than one relation or whose holder has a value of the KB ("grandfather", "mom")."""
        out = {}
        for position in positions:
            word = surface.get(position, "")
            if len(word) < 3 or word in FUNCTION_WORDS or stem(word) in self.words.all_stems:
                continue
            found = self.role(word)
            if found is not None and (len(found.chain) > 1 or found.values):
                out[position] = Role(position, word, found.chain, found.values)
        return out

    @per_instance(4096)
    def role(self, word: str) -> Role | None:
        from ...kb.lexicon import role

        found = role(word, self.names)
        if found is None:
            return None
        chain, qualities = found
        values = tuple(v for quality in sorted(qualities) for v in self.values(quality))
        return Role(-1, word, tuple(stem(w) for w in chain), values)

    def names(self, word: str) -> dict[str, float]:
        """The relations a word names and how surely: 1 by their own phrases' words, else the weight of a word that
        is one of theirs said otherwise (a synonym, a derived form, a narrower word: not a broader or a kind, which
        a dozen relations share)."""
        s = stem(word)
        out = {rel: 1.0 for rel, stems in self.words.relation_stems.items() if s in stems}
        for rel, table in self.words.related.items():
            how, weight, _text = table.get(s, (None, 0.0, ""))
            if how in CHAIN_KINDS and rel not in out:
                out[rel] = weight
        return out

    @per_instance(1024)
    def values(self, quality: str) -> tuple[tuple[str, str, str], ...]:
        """(relation, node, name) for each node named ``quality`` that an attribute-like relation points at."""
        index = self.kb.names
        out = []
        for node in index.nodes(normalise_name(quality)):
            text = queries.with_values(queries.load("reader_value_relations"), value=[NamedNode(node)])
            rows = self.kb.store.query(text, use_default_graph_as_union=True)
            for row in rows:
                relation = row["relation"].value
                if relation in self.kb.schema.relations and self._holds_values(relation):
                    out.append((relation, node, index.labels.get(node) or quality))
        return tuple(out)

    def holders(self, nodes) -> list[tuple[str, int]]:
        """The relations that point at any of ``nodes``, with how many edges, most first: how a value ("Painter")
        is held ("which people born in X are painters": by ``profession``)."""
        text = queries.with_values(queries.load("reader_value_relations"), value=[NamedNode(n) for n in nodes])
        found = [(row["relation"].value, int(row["edges"].value))
                 for row in self.kb.store.query(text, use_default_graph_as_union=True)]
        return sorted((f for f in found if f[0] in self.kb.schema.relations), key=lambda f: (-f[1], f[0]))

    @functools.lru_cache(maxsize=256)  # noqa: B019
    def _holds_values(self, relation: str) -> bool:
        text = queries.with_values(queries.load("reader_relation_values"), relation=[NamedNode(relation)])
        return len(list(self.kb.store.query(text, use_default_graph_as_union=True))) <= MAX_VALUES
