"""The request's syntax gives the chain, the KB gives each link.

Possessives ("X's mom's offspring") and ``of`` phrases ("the offspring of the mother of X"), and their mixtures
("the father of X's dad"), are read as an ordered chain of relation *slots* from the named constant to the answer:
the possessives after the constant first, then the ``of`` phrases before it, nearest first, then what the
question asks of the last node (its wh-noun and its predicate: "what sex is …", "… do for a living"). The number
of hops is the number of slots, whatever the lexicon knows of their words.

Each slot is then filled by the graph: of the relations that really leave the nodes reached so far (either
direction), the one the slot's words name best: by the relation's own words, WordNet (related words, role words
such as "grandmother": two hops and a quality), else the encoder over the relation's phrases. A slot no word
names is still a hop: the relation the encoder places nearest wins. A slot may repeat the previous relation, and
the chain may come back to its start ("the husband of X's wife" is X). A role's quality ("mom": female)
constrains its own hop where some node on the hop has it, and is dropped (with a note) where none does.

Values (the end of this module): a question that asks for a literal is answered with the value the graph stores,
typed. "The release year of Weather Maps", "Weather Maps's release year", "when was Nora Vale born", "how tall is
X": the last link of the request's chain is a relation whose objects are literals, not nodes. Such a *value
relation* is any predicate with literal objects that is not one of the KB's document properties (names,
aliases, text fields, identifiers: what documents already show). It fills the last slot as the slot's words
name it: by its phrase's words (its ``rdfs:label`` or its local name read as words, ``releaseYear`` → "release
year"), else by the encoder. The wh-word says which kind of value it wants ("when" and "what year" a date or
time, "how many", "how long", "how tall" a number): a relation of another kind is not read, and one of that kind
is read more surely. The answer is each value with its datatype, of the nodes the rest of the chain reaches.

Nothing here names a relation, a class or a word of one KB: the structure comes from English syntax (possessives,
``of``, wh-words), the links from the KB's relations, WordNet and the encoder; the value relations are the KB's,
the kinds XML Schema's.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import numpy as np
from pyoxigraph import Literal, NamedNode

from ...core.caches import per_instance
from ...kb import queries
from ...kb.documents import text_properties
from ...kb.linking import english_word, singular
from ...kb.ontology import CORE, RDFS_LABEL, local_name, readable
from ...kb.words import (ARTICLES, ASKING_WH, CLASSIFIERS, FRAME_WORDS, FUNCTION_WORDS, PREPOSITIONS,
                         HOW_MUCH, QUESTION_PARTICLES, TELLING_WH, WHEN_NOUNS, phrase_stems, stem)
from .paths import Path, retraces
from .ranking import Scored

#: How many nodes a hop's frontier keeps (a hub's neighbours are enough to say which relations leave it).
FRONTIER = 300
#: Partial chains kept after each slot.
BEAM = 6
#: How much the encoder's similarity adds to a link's score: a tie-breaker between relations named alike.
TIE = 0.05
#: What a hop costs whose phrase names the node it leaves, not the one it reaches ("X's parent" is not read by
#: ``parent of`` from X, which leads to X's children).
OF_START = 0.5
#: How much of a word's weight a word defined by it keeps.
DEFINED = 0.9
#: What a role's quality, held by some node on its hop, adds to a chain that keeps to those nodes.
QUALITY = 0.1
#: What a hop walked against a relation that has no phrase of its own for that direction costs: "X's parents" reads
#: ``parents`` from X, not ``children`` walked backwards, when both lead to the same people.
AGAINST = 0.05


@dataclass(frozen=True)
class Slot:
    """One link of a chain: its words as written, their token positions, and whether it is what the question
    asks of the last node (a wh-noun or a predicate) rather than a noun of the chain."""

    words: tuple[str, ...]
    positions: tuple[int, ...]
    asked: bool = False

    @property
    def text(self) -> str:
        return " ".join(self.words)


@dataclass
class Link:
    """A slot filled: the relation (and direction) that fills it, how surely, and how it was read."""

    relation: str
    forward: bool
    score: float
    how: str
    word: str
    #: Values the hop's node holds by a role word ("mom": gender female), as (relation, value IRI, value name).
    constraints: tuple[tuple[str, str, str], ...] = ()
    note: str = ""


@dataclass
class Chain:
    """A chain being filled: its links so far, the nodes they reach, and their summed score."""

    links: list[Link] = field(default_factory=list)
    nodes: frozenset[str] = frozenset()
    score: float = 0.0
    #: The nodes each link reached (the last is :attr:`nodes`).
    reached: list[frozenset] = field(default_factory=list)


def _names(word: str) -> bool:
    """Whether a word can name a link: WordNet knows it as a noun, verb or adjective ("living", "died", "religious";
    not an adverb such as "strangely"); true without WordNet."""
    from ...kb.lexicon import wordnet

    return wordnet() is None or english_word(word)


def tokens(query: str) -> list[tuple[str, int, int]]:
    """The request's words as the reader counts them (``[a-z0-9]+``, lower case), with their character offsets."""
    return [(m.group(0), m.start(), m.end()) for m in re.finditer(r"[a-z0-9]+", query.lower())]


def is_possessive(query: str, toks: Sequence[tuple[str, int, int]], i: int) -> bool:
    """Whether token ``i`` is the ``s`` of a possessive ("X's", "X 's", "X’s")."""
    word, start, _end = toks[i]
    return word == "s" and start > 0 and query[start - 1] in "'’"


def _order(chain: Chain) -> tuple:
    """Best first; among equals, forward hops first, then by relation (a stable order)."""
    return -chain.score, tuple((link.relation, not link.forward) for link in chain.links)


class ChainReader:
    """Reads a request's chain of slots (:meth:`slots`) and fills it from the graph (:meth:`read`)."""

    def __init__(self, kb, words, roles) -> None:
        self.kb = kb
        self.words = words
        self.roles = roles
        relations = kb.schema.relations
        #: Each relation's phrases and its inverse's, as the encoder reads them (label words, not IRIs).
        self.phrases = {iri: sorted(ps) for iri, ps in words.named.items() if iri in relations}
        #: Multi-word relation phrases, as word tuples: a slot may be one ("country of origin", "line of work").
        self.compounds = {tuple(re.findall(r"[a-z0-9]+", p.lower())) for ps in self.phrases.values() for p in ps}
        self.compounds = {c for c in self.compounds if len(c) > 1}
        #: The same phrases as sets of stems: two links whose words together are one phrase are one link ("the
        #: release of the year of X" for "release year").
        self.joined = {frozenset(phrase_stems(" ".join(c))) for c in self.compounds} - {frozenset()}
        #: Words that name a class of the KB: the kind of the answer ("which films"), not a link.
        self.class_words = {w for cues in kb.schema.class_cues.values() for w in cues} | {
            c.label.lower() for c in kb.schema.classes.values()}
        self._owners = [(iri, p) for iri, ps in sorted(self.phrases.items()) for p in ps]
        self._owner_vectors: np.ndarray | None = None
        #: Relations whose objects are literals: a chain's last link may ask for one (the values section below).
        self.values = ValueRelations(kb, words)

    # ------------------------------------------------------------------ syntax

    def _is_compound(self, words: Sequence[str], extra: frozenset = frozenset()) -> bool:
        """A multi-word noun: a relation's phrase ("country of origin"; ``extra``: value relations' phrases,
        "release year"), a WordNet compound ("line of work", "line of business") or an adjective before a noun
        ("best friend")."""
        from ...kb.lexicon import wordnet

        words = tuple(words)
        if words in self.compounds or words in extra:
            return True
        wn = wordnet()
        if wn is None or len(words) < 2:
            return False
        if wn.morphy("_".join(words), "n") is not None:
            return True
        # An adjective before a noun, each nothing else ("best friend"; not "sweetheart come", a noun and a verb).
        return len(words) == 2 and words[0] in wn.adjectives and wn.morphy(words[0], "n") is None \
            and wn.morphy(words[1], "n") is not None and wn.morphy(words[1], "v") is None \
            and words[0] not in FRAME_WORDS

    def _noun_phrase(self, words: Sequence[str], extra: frozenset = frozenset()) -> int:
        """How many of ``words`` (from the start) form the noun phrase a possessive names: the longest compound of
        up to four words, else one word."""
        for n in (4, 3, 2):
            if len(words) >= n and self._is_compound(words[:n], extra):
                return n
        return 1

    def slots(self, query: str, span: tuple[int, int], extra: frozenset = frozenset()) -> list[Slot] | None:
        """The chain of slots from the constant at token ``span`` to the answer, or None where the request has no
        possessive after the constant and no ``of`` before it, or its words around them are not a chain's (a verb
        or a clause: "which films share the director of X" is read by the ranking, not here).

        >>> reader = ChainReader.__new__(ChainReader); reader.compounds = set()
        >>> [s.text for s in reader.slots("who is the offspring of Ann Smith's mom?", (5, 7))]
        ['mom', 'offspring']
        >>> [s.text for s in reader.slots("what does Ann Smith's dad do for a living?", (2, 4))]
        ['dad', 'do for a living']
        >>> [s.text for s in reader.slots("the father of the wife of Ann's kid", (6, 7))]
        ['kid', 'wife', 'father']
        >>> print(reader.slots("which films share the director of Heat", (6, 7)))
        None
        """
        toks = tokens(query)
        words = [w for w, _a, _b in toks]
        a, b = span
        after = self._possessives(query, toks, words, b, extra)
        if after is None:
            return None
        chain, predicate = after
        before = self._of_phrases(words, a, extra)
        if before is None or (not before[0] and not chain and before[1] is None):
            return None  # a broken "of" phrase, or no possessive after the constant and no "of" before it
        of_slots, lead = before
        chain = self._joined(chain + of_slots)
        asked = self._asked(words, list(range(a)) if lead is None else lead, predicate, a)
        if asked:
            # The asked slot's words as written, function words kept ("do for a living"): the encoder reads them.
            chain.append(Slot(tuple(words[p] for p in asked), tuple(asked), asked=True))
        return chain or None

    def _possessives(self, query: str, toks: list, words: list[str], b: int,
                     extra: frozenset) -> tuple[list[Slot], list[int]] | None:
        """After the constant (ending at token ``b``): its possessives' links, nearest first, and the words after the
        last one (the predicate); None where a possessive's words are not a link's."""
        chain: list[Slot] = []
        i, predicate = b, []
        while i < len(words) and is_possessive(query, toks, i):
            k = next((j for j in range(i + 1, len(words)) if is_possessive(query, toks, j)), len(words))
            segment = list(range(i + 1, k))
            if not segment:
                return None
            if k < len(words):  # another possessive follows: the whole segment names one link
                phrase = [p for p in segment if words[p] not in ARTICLES]
                if not phrase or len(phrase) > 4 or any(words[p] in FRAME_WORDS for p in phrase[1:-1]) \
                        or (len(phrase) > 1 and not self._is_compound([words[p] for p in phrase], extra)):
                    return None
            else:
                n = self._noun_phrase([words[p] for p in segment], extra)
                phrase, predicate = segment[:n], segment[n:]
            chain.append(Slot(tuple(words[p] for p in phrase), tuple(phrase)))
            i = k
        if i < len(words) and not chain:
            predicate = list(range(b, len(words)))
        return chain, predicate

    def _of_phrases(self, words: list[str], a: int,
                    extra: frozenset) -> tuple[list[Slot], list[int] | None] | None:
        """Before the constant (starting at token ``a``): "the R2 of (the) R1 of X", read from X outwards — the
        links, and the question's frame words before them (its telling wh-word: "where is the …"); no links and
        no frame (None) where no "of" comes before the constant; None where the words are not a chain's."""
        before = list(range(a))
        if not (before and words[before[-1]] == "of" or (len(before) > 1 and words[before[-1]] in ARTICLES
                                                          and words[before[-2]] == "of")):
            return [], None
        segments: list[list[int]] = [[]]
        for p in before:
            if words[p] == "of":
                segments.append([])
            else:
                segments[-1].append(p)
        segments = [[p for p in s if words[p] not in ARTICLES] for s in segments]
        if segments[-1]:
            return None  # "of the X" only: an article may stand between "of" and the constant
        segments.pop()
        # "the line of work of X": a compound across an "of" is one link.
        merged: list[list[int]] = []
        for s in segments:
            if merged and merged[-1] and s and self._is_compound([words[merged[-1][-1]], "of", words[s[0]]], extra):
                merged[-1] = merged[-1] + [p for p in range(merged[-1][-1] + 1, s[0]) if words[p] == "of"] + s
            else:
                merged.append(s)
        lead, *rest = merged
        # The first segment holds the question's frame too ("what is the name", "who is the spouse").
        at = 0  # the frame comes first: "what is the" / "where is the"; a compound keeps its "of"
        while at < len(lead) and (words[lead[at]] in FRAME_WORDS or words[lead[at]] in ASKING_WH
                                  or words[lead[at]] in TELLING_WH):
            at += 1
        head = lead[at:]
        if head:
            if len(head) > 4 or (len(head) > 1 and not self._is_compound([words[p] for p in head], extra)):
                return None
            rest = [head] + rest
        for s in rest:
            if not s or len(s) > 4 or (len(s) > 1 and not self._is_compound([words[p] for p in s], extra)):
                return None
        # A classifier before another link introduces it ("the name of the spouse of X").
        while len(rest) > 1 and all(words[p] in CLASSIFIERS for p in rest[0]):
            rest = rest[1:]
        return [Slot(tuple(words[p] for p in s), tuple(s)) for s in reversed(rest)], \
            [p for p in lead[:at] if words[p] in TELLING_WH]

    def _asked(self, words: list[str], lead: list[int], predicate: list[int], a: int) -> list[int]:
        """What the question asks of the last node: its wh-noun ("what sex is X's dad") and its predicate ("… do for
        a living", "why … died"), read together; none where they name nothing (or only the answer's class)."""
        asked = [p for p in lead if words[p] not in FRAME_WORDS and words[p] not in ASKING_WH] + predicate
        kinds = getattr(self, "class_words", set())
        content = [p for p in asked if words[p] not in FRAME_WORDS and words[p] not in QUESTION_PARTICLES
                   and _names(words[p]) and words[p] not in kinds and singular(words[p]) not in kinds]
        if not content and [words[p] for p in predicate] == ["do"] and any(w in ASKING_WH for w in words[:a]):
            # "what does X's dad do": the last "do" is the main verb, asking what the node does.
            return [p for p in lead if words[p] in ASKING_WH][:1] + predicate
        return asked if content else []

    def _joined(self, chain: list[Slot]) -> list[Slot]:
        """Neighbouring links whose words together are one relation's phrase, as one link."""
        joined = getattr(self, "joined", set())
        out: list[Slot] = []
        for slot in chain:
            first, second = (phrase_stems(out[-1].text), phrase_stems(slot.text)) if out else (set(), set())
            if first and second and not first & second and frozenset(first | second) in joined:
                last = out.pop()
                slot = Slot(last.words + slot.words, last.positions + slot.positions)
            out.append(slot)
        return out

    # ------------------------------------------------------------------ meaning

    def _encoded(self) -> np.ndarray:
        if self._owner_vectors is None:
            self._owner_vectors = self.words.vectors([p for _i, p in self._owners])
        return self._owner_vectors

    @per_instance(4096)
    def similarity(self, text: str) -> dict[str, tuple[float, str]]:
        """The encoder's similarity of a slot's text with each relation: its nearest phrase (either direction)."""
        vector = self.kb.encoder.encode([text])[0]
        out: dict[str, tuple[float, str]] = {}
        for (iri, phrase), sim in zip(self._owners, self._encoded() @ vector):
            if sim > out.get(iri, (-1.0, ""))[0]:
                out[iri] = (float(sim), phrase)
        return out

    def lexical(self, word: str) -> dict[str, tuple[float, str]]:
        """The relations a word names by the lexicon: its own words (1), WordNet's related words (their weight)."""
        s = stem(word)
        out = {rel: (1.0, "exact") for rel, stems in self.words.relation_stems.items() if s in stems}
        for rel, table in self.words.related.items():
            how, weight, text = table.get(s, (None, 0.0, ""))
            if how and how != "wh" and weight > out.get(rel, (0.0, ""))[0]:
                out[rel] = (weight, f"{text.partition(' (')[2].rstrip(')') or how}, {weight:.2f}")
        return out

    def expand(self, slot: Slot) -> list[tuple[Slot, dict[str, tuple[float, str]], tuple, str]]:
        """A slot as the links it names, each with the relations it names lexically and the role values of its node:
        a role word may name several ("grandmother": parent, parent, and female on the second)."""
        lexical: dict[str, tuple[float, str]] = {}
        for w in slot.words:
            if w in FUNCTION_WORDS or w in FRAME_WORDS:
                continue
            for rel, (weight, how) in self.lexical(w).items():
                if weight > lexical.get(rel, (0.0, ""))[0]:
                    lexical[rel] = (weight, how)
        if len(slot.words) == 1 and not slot.asked:
            role = self.role(slot.words[0])
            if role is not None and (len(role.chain) > 1 or role.values):
                links = []
                for k, part in enumerate(role.chain):
                    names = {rel: (w, f"role {'/'.join(role.chain)}, {w:.2f}")
                             for rel, w in self.roles.names(part).items()}
                    if len(role.chain) == 1:
                        names = {**names, **{r: v for r, v in lexical.items() if v[0] > names.get(r, (0.0,))[0]}}
                    values = role.values if k == len(role.chain) - 1 else ()
                    links.append((Slot((part,), slot.positions, slot.asked), names, values, slot.text))
                return links
            from ...kb.lexicon import wh_words

            if role is not None and not lexical and len(role.chain) == 1 and "who" in wh_words(slot.words[0]):
                # A person WordNet defines by another ("heir": "a person who inherits … issue") names what that one
                # does; not a thing ("citizenship" is defined as a status, a "position", which names no relation).
                lexical = {rel: (w * DEFINED, f"{how} by its definition ({role.chain[0]})")
                           for rel, (w, how) in self.lexical(role.chain[0]).items()}
        return [(slot, lexical, (), slot.text)]

    def role(self, word: str):
        """A role word (:meth:`.words.RoleReader.role`); "grand-" before a role word adds a generation of its first
        link ("grandmom": a parent's parent, female), as English forms the word."""
        role = self.roles.role(word)
        if role is None and word.startswith("grand") and len(word) > 7:
            inner = self.roles.role(word[5:])
            if inner is not None and inner.chain:
                return replace(inner, word=word, chain=inner.chain[:1] + inner.chain)
        return role

    # ------------------------------------------------------------------ the graph

    def _edges(self, nodes: Sequence[str], values: bool = False) -> dict[tuple[str, bool], set]:
        """The relations (and directions) that leave ``nodes``, each with the nodes it reaches; with ``values``,
        also the value relations (the values section below), each with the literals it reaches."""
        text = queries.with_values(queries.load("reader_chain_hops"), c=[NamedNode(n) for n in nodes])
        relations = self.kb.schema.relations
        out: dict[tuple[str, bool], set] = {}
        for row in self.kb.store.query(text, use_default_graph_as_union=True):
            rel = row["relation"].value
            node = row["n"]
            forward = row["forward"].value == "true"
            if rel not in relations:
                if values and forward and self.values.is_value(rel, node):
                    out.setdefault((rel, True), set()).add(node)
                continue
            if isinstance(node, Literal) and not forward:
                continue
            out.setdefault((rel, forward), set()).add(node.value if isinstance(node, NamedNode) else node)
        return out

    def holders(self, nodes: Sequence[str], relation: str, value: str) -> set[str]:
        """Which of ``nodes`` hold ``value`` by ``relation``."""
        if not nodes:
            return set()
        text = queries.with_values(queries.load("reader_holders"), n=[NamedNode(x) for x in nodes],
                                   relation=[NamedNode(relation)], value=[NamedNode(value)])
        return {row["n"].value for row in self.kb.store.query(text, use_default_graph_as_union=True)}

    def fill(self, start: Sequence[str], slots: Sequence[Slot], kind: str | None = None,
             only_values: bool = False) -> Chain | None:
        """The best-scoring filling of the slots from the constant's nodes: a beam over the relations that really
        leave the nodes each partial chain reaches. The last link may be a value relation the slot names
        (the values section below; ``kind``: the kind of value the question asks for); with ``only_values`` it must
        be."""
        beam = [Chain([], frozenset(start), 0.0)]
        for number, slot in enumerate(slots):
            parts = self.expand(slot)
            for at, (part, lexical, values, said) in enumerate(parts):
                last = number == len(slots) - 1 and at == len(parts) - 1
                encoded = self.similarity(part.text)
                grown: list[Chain] = []
                for chain in beam:
                    nodes = sorted(n for n in chain.nodes if isinstance(n, str))[:FRONTIER]
                    if not nodes:
                        continue
                    for (rel, forward), reached in self._edges(nodes, values=last).items():
                        if rel not in self.kb.schema.relations:
                            named = self.values.named(part.text, rel, reached, kind)
                            if named is not None:
                                link = Link(rel, True, named[0], named[1], said)
                                grown.append(Chain(chain.links + [link], frozenset(reached), chain.score + named[0],
                                                   chain.reached + [frozenset(reached)]))
                            continue
                        if only_values and last:
                            continue
                        weight, how = lexical.get(rel, (0.0, ""))
                        sim, phrase = encoded.get(rel, (0.0, ""))
                        if sim > weight:
                            weight, how = sim, f"encoder {sim:.2f} to '{phrase}'"
                        # Between relations the words name alike ("release" names "release" and "releases"),
                        # the one whose phrase the encoder places nearest.
                        weight += TIE * sim
                        if not forward and not self._has_own_phrase(rel, forward):
                            weight -= AGAINST
                        if not part.asked and self._names_the_start(rel, forward):
                            weight -= OF_START
                        link = Link(rel, forward, weight, how, said)
                        grown.append(Chain(chain.links + [link], frozenset(reached), chain.score + weight,
                                           chain.reached + [frozenset(reached)]))
                if not grown:
                    return None
                grown.sort(key=_order)
                if values:
                    grown = [c for chain in grown[:BEAM] for c in self._constrained(chain, values)]
                    grown.sort(key=_order)
                beam = grown[:BEAM]
        return beam[0] if beam else None

    def _constrained(self, chain: Chain, values) -> list[Chain]:
        """A role's quality on its hop's node ("mom": female), where some node on the hop has it, scored
        :data:`QUALITY` above the hop without it; the hop without it stays in the beam, for where the KB lacks the
        quality or the rest of the chain disagrees with the word (no later link leaves the nodes that have it)."""
        link = chain.links[-1]
        nodes = sorted(n for n in chain.nodes if isinstance(n, str))
        names = ", ".join(name for _r, _v, name in values)
        bare = Link(link.relation, link.forward, link.score, link.how, link.word,
                    note=f"'{link.word}' says {names}, which no node on this hop is in the KB (or no later link "
                         "leaves those that are): the hop stands without it")
        out = [Chain(chain.links[:-1] + [bare], chain.nodes, chain.score, chain.reached)]
        for relation, value, name in values:
            holding = self.holders(nodes, relation, value)
            if holding:
                held = Link(link.relation, link.forward, link.score, link.how, link.word, ((relation, value, name),))
                out.insert(0, Chain(chain.links[:-1] + [held], frozenset(holding), chain.score + QUALITY,
                                    chain.reached[:-1] + [frozenset(holding)]))
                break
        return out

    def _names_the_start(self, rel: str, forward: bool) -> bool:
        """Whether the hop's phrase, read from the node it leaves, says what that node is ("parent of": the node
        left is the parent). A slot's noun says what the node reached is ("X's parent", "the parent of X")."""
        schema = self.kb.schema
        phrase = schema.relations[rel].label if forward else schema.inverse_label(rel)
        return phrase.lower().rstrip().endswith(" of")

    def _has_own_phrase(self, rel: str, forward: bool) -> bool:
        relation = self.kb.schema.relations.get(rel)
        return forward or (relation is not None and bool(relation.inverse))

    # ------------------------------------------------------------------ reading

    def read(self, query: str, span: tuple[int, int], nodes: Sequence[str], reader) -> Scored | None:
        """The chain of the request's structure, filled from the graph, as a scored path for the reader; None when
        the request has no chain or the graph cannot fill it. A chain whose last link is a value relation ends at
        the nodes before it, with the value asked in ``why["value"]`` (:class:`ValueAsk`); a question with
        no chain that asks for a kind of value ("when was X born") is one slot that only a value fills."""
        slots = self.slots(query, span)
        if (slots is None or (len(slots) > 1 and slots[-1].asked and len(slots[-1].words) == 1)) \
                and re.search(r"\bof\b|['’]s\b", query):
            # A compound the lexicon does not know may be a value relation's phrase ("the release year of X",
            # "X's birth date"): read again with the phrases of those that leave the constant or its neighbours.
            extra = self._value_phrases(nodes)
            if extra:
                slots = self.slots(query, span, extra) or slots
        kind = asked_kind([w for w, _a, _b in tokens(query)])
        only_values = False
        if not slots and kind is not None and self._value_relations(nodes):
            slots, only_values = self.value_slots(query, span), True
        if not slots:
            return None
        chain = self.fill(nodes, slots, kind, only_values)
        if chain is None or not chain.links:
            return None
        confidence = float(np.mean([min(1.0, max(0.0, link.score)) for link in chain.links]))
        value = None
        if chain.links[-1].relation not in self.kb.schema.relations:
            link = chain.links[-1]
            value = ValueAsk(link.relation, self.values.phrase(link.relation), link.how, link.word)
            reached = chain.reached[:-1]
            chain = Chain(chain.links[:-1], reached[-1] if reached else frozenset(nodes), chain.score, reached)
        if any(not isinstance(n, str) for n in chain.nodes):
            return None
        steps = tuple((link.relation, link.forward) for link in chain.links)
        classes = [self._class_of(nodes)] + [self._class_of(reached) for reached in chain.reached]
        if any(c is None for c in classes):
            return None
        phrases = [reader.phrase(link.relation, link.forward) for link in chain.links]
        hops = [{"relation": phrase, "how": link.how, "words": [link.word]}
                for phrase, link in zip(phrases, chain.links)]
        constraints = {i: link.constraints for i, link in enumerate(chain.links) if link.constraints}
        # A chain may come back to its start ("the husband of X's wife" is X, and "the offspring of X's mom" X and
        # X's siblings): where the graph says it does, unless a hop only walks the previous one back ("the films of
        # X's director", which is X only when the director made no other).
        start = set(nodes)

        def back(i: int) -> bool:
            reached = chain.reached[i]
            return bool(start & reached) and (not retraces(steps[: i + 1]) or reached <= start)
        notes = [link.note for link in chain.links if link.note]
        read = f"the request's structure: {len(slots)} slot(s) ({' / '.join(repr(s.text) for s in slots)}) filled " \
               f"by the graph as '{' / '.join(phrases + ([value.phrase] if value else []))}'"
        if value is not None:
            read += f"; the last is a value: '{value.phrase}' ({value.how})"
        why = {"hops": hops, "source": "syntax", "constraints": constraints, "slots": [s.text for s in slots],
               "returns": bool(steps) and back(len(steps) - 1), "revisits": any(back(i) for i in range(len(steps) - 1)),
               "read from": read + ("; " + "; ".join(notes) if notes else "")}
        if value is not None:
            why["value"] = value
        return Scored(Path(steps, tuple(classes)), chain.score, phrases, why, confidence)

    def _value_relations(self, nodes: Sequence[str], near: bool = False) -> set[str]:
        """The value relations that leave ``nodes`` (``near``: or the nodes one hop from them, up to 300)."""
        start = [NamedNode(n) for n in sorted(nodes)[:FRONTIER]]
        store = self.kb.store
        if near:
            text = queries.with_values(queries.load("reader_neighbours"), c=start)
            start = start + [row["n"] for row in store.query(text, use_default_graph_as_union=True)]
        text = queries.with_values(queries.load("reader_value_relations_near"), n=start)
        return {rel for row in store.query(text, use_default_graph_as_union=True)
                if self.values.is_value_relation(rel := row["relation"].value)}

    def _value_phrases(self, nodes: Sequence[str]) -> frozenset:
        """The multi-word phrases (as word tuples) of the value relations that leave ``nodes`` or the nodes one
        hop from them."""
        phrases = {tuple(re.findall(r"[a-z0-9]+", self.values.phrase(rel).lower()))
                   for rel in self._value_relations(nodes, near=True)}
        return frozenset(p for p in phrases if len(p) > 1)

    def value_slots(self, query: str, span: tuple[int, int]) -> list[Slot] | None:
        """A question about one constant with no chain, asking for a kind of value ("when was X born", "how tall is
        X"): its words other than the constant, the frame and the wh-words, as one asked slot."""
        toks = tokens(query)
        words = [w for w, _a, _b in toks]
        a, b = span
        picked = tuple(p for p in range(len(words)) if not a <= p < b and words[p] not in FRAME_WORDS
                       and words[p] not in ASKING_WH and words[p] not in TELLING_WH
                       and words[p] not in ("many", "much") and not is_possessive(query, toks, p))
        return [Slot(tuple(words[p] for p in picked), picked, asked=True)] if picked else None

    def _class_of(self, nodes) -> str | None:
        """The class most of ``nodes`` have (the name index's classes)."""
        counts: dict[str, int] = {}
        for n in nodes:
            for t in self.kb.names.types.get(n, ()):
                counts[t] = counts.get(t, 0) + 1
        return max(sorted(counts), key=lambda t: counts[t]) if counts else None


# ------------------------------------------------------------------ values

_XSD = "http://www.w3.org/2001/XMLSchema#"
#: XML Schema's datatypes by the kind of value a question asks for.
KINDS = {
    "time": frozenset(_XSD + t for t in "date dateTime dateTimeStamp time gYear gYearMonth gMonthDay gDay "
                                         "gMonth".split()),
    "number": frozenset(_XSD + t for t in "integer int long short byte decimal double float nonNegativeInteger "
                                           "positiveInteger negativeInteger nonPositiveInteger unsignedInt "
                                           "unsignedLong unsignedShort unsignedByte".split()),
}
#: What a relation whose values are of the kind the question asks for adds to its link.
KIND = 0.3
#: How surely a slot's words must name a value relation (label words or the encoder) for it to fill the slot: a
#: value is read only where the request names it (the walk to nodes stands otherwise).
NAMED = 0.5
_SKOS = "http://www.w3.org/2004/02/skos/core#"
#: Properties that name or describe a node in the common vocabularies: text, not values.
NAMING = frozenset([RDFS_LABEL, "http://www.w3.org/2000/01/rdf-schema#comment", "http://schema.org/name",
                    "http://schema.org/description", "https://schema.org/name", "https://schema.org/description",
                    "http://purl.org/dc/terms/title", "http://purl.org/dc/terms/description",
                    "http://purl.org/dc/elements/1.1/title", "http://purl.org/dc/elements/1.1/description",
                    "http://xmlns.com/foaf/0.1/name"]
                   + [_SKOS + p for p in "prefLabel altLabel hiddenLabel definition note scopeNote notation".split()])
#: Longest literal read as a value (longer ones are text, which documents show).
MAX_VALUE_CHARS = 200


@dataclass(frozen=True)
class ValueAsk:
    """What a request asks as a value: the relation, how it was read, and the nodes whose value it is when no
    hop leads to them (the value of the request's own constant: "the release year of Weather Maps")."""

    relation: str
    phrase: str
    how: str
    word: str = ""
    nodes: tuple[str, ...] = ()
    #: A count of the answers ("how many albums did X produce"), not a stored value.
    count: bool = False

    def to_json(self) -> dict:
        return {"relation": self.relation, "phrase": self.phrase, "how": self.how, "words": self.word,
                **({"count": True} if self.count else {})}


def asked_kind(words: Sequence[str]) -> str | None:
    """The kind of value a question's wh-words ask for: "time", "number" or None.

    >>> asked_kind("when was nora vale born".split()), asked_kind("how many pages has it".split())
    ('time', 'number')
    >>> asked_kind("what year was it released".split()), asked_kind("who is nora vale".split())
    ('time', None)
    """
    for i, w in enumerate(words):
        nxt = words[i + 1] if i + 1 < len(words) else ""
        if w == "when":
            return "time"
        if w == "how" and nxt in HOW_MUCH:
            return "number"
        if w in ("what", "which") and nxt in WHEN_NOUNS:
            return "time"
    return None


def kind_of(value: Literal) -> str | None:
    """Which kind a literal's datatype is of ("time", "number"), None for another (a string)."""
    datatype = value.datatype.value if value.datatype is not None else ""
    return next((kind for kind, types in KINDS.items() if datatype in types), None)


class ValueRelations:
    """The KB's value relations, their phrases, and how a slot's words name them."""

    def __init__(self, kb, words) -> None:
        self.kb = kb
        self.words = words
        #: What documents already show, and the store's bookkeeping: never asked as a value.
        self.shown = set(text_properties(kb.schema, kb.manifest.get("text_properties") or ())) | NAMING
        self._phrases: dict[str, str] = {}

    def is_value_relation(self, relation: str) -> bool:
        """Whether a predicate with literal objects may be asked for: not a relation between nodes, not what
        documents show, not the store's bookkeeping."""
        return relation not in self.kb.schema.relations and relation not in self.shown and not relation.startswith(CORE)

    def is_value(self, relation: str, value) -> bool:
        """Whether an edge's object is a value a question may ask for."""
        return (isinstance(value, Literal) and self.is_value_relation(relation)
                and 0 < len(value.value) <= MAX_VALUE_CHARS)

    def phrase(self, relation: str) -> str:
        """The relation's label in the store, else its local name as words (``releaseYear`` → "release year")."""
        if relation not in self._phrases:
            text = queries.with_values(queries.load("reader_value_labels"), relation=[NamedNode(relation)])
            labels = sorted(row["label"].value for row in self.kb.store.query(text, use_default_graph_as_union=True))
            self._phrases[relation] = labels[0] if labels else readable(local_name(relation))
        return self._phrases[relation]

    @per_instance(1024)
    def _text_vector(self, text: str) -> np.ndarray:
        return self.kb.encoder.encode([text])[0]

    def named(self, text: str, relation: str, values: set, kind: str | None) -> tuple[float, str] | None:
        """How surely a slot's words name a value relation (with how), or None where they do not or the question
        asks for another kind of value than the relation holds."""
        phrase = self.phrase(relation)
        own, said = phrase_stems(phrase), phrase_stems(text)
        weight, how = 0.0, ""
        if own and said and own <= said:
            weight, how = 1.0, "exact"
        else:
            sim = float(self.words.vectors([phrase])[0] @ self._text_vector(text))
            weight, how = sim, f"encoder {sim:.2f} to '{phrase}'"
        if kind is not None:
            kinds = {kind_of(v) for v in values if isinstance(v, Literal)}
            if kind not in kinds:
                return None
            weight += KIND
            how += f"; '{kind}' asked, {kind} values"
        return (weight, how) if weight >= NAMED else None



def held(kb, nodes: Sequence[str], relation: str) -> dict[str, list[Literal]]:
    """The values ``nodes`` hold by ``relation``, per node, in the store's order of each node's."""
    if not nodes:
        return {}
    text = queries.with_values(queries.load("reader_values"), n=[NamedNode(n) for n in nodes],
                               relation=[NamedNode(relation)])
    out: dict[str, list[Literal]] = {}
    for row in kb.store.query(text, use_default_graph_as_union=True):
        value = row["value"]
        if 0 < len(value.value) <= MAX_VALUE_CHARS:
            out.setdefault(row["n"].value, []).append(value)
    return out


def valued(kb, qid: str, value: ValueAsk, nodes: Sequence[str], scores: dict[str, float]) -> tuple[list, dict]:
    """The hits of a request that asks for a value: each value the ``nodes`` (best first) hold by the relation, as a
    hit whose ``iri`` is the literal in N-Triples syntax (``"2019"^^<…#gYear>``: value and datatype) and whose
    ``name`` is its lexical form, scored as its node; a value two nodes share comes once. With what to explain."""
    from ..retrieval import Hit

    if value.count:
        best = max((scores.get(n, 0.0) for n in nodes), default=0.0)
        counted = [n for n in nodes if round(scores.get(n, 0.0), 9) == round(best, 9)]
        literal = Literal(str(len(counted)), datatype=NamedNode(_XSD + "integer"))
        term = str(literal)
        hit = Hit(qid, term, best, 1, literal.value)
        return [hit] if counted else [], {**value.to_json(), "counted": counted, "values": {term: {
            "value": literal.value, "datatype": _XSD + "integer", "of": None}}}
    found = held(kb, nodes, value.relation)
    hits, shown = [], {}
    for node in nodes:
        for literal in sorted(found.get(node, ()), key=str):
            term = str(literal)
            if term not in shown:
                shown[term] = {"value": literal.value, "of": node,
                               "datatype": literal.datatype.value if literal.datatype is not None else None,
                               **({"language": literal.language} if literal.language else {})}
                hits.append(Hit(qid, term, scores.get(node, 1.0), len(hits) + 1, literal.value))
    return hits, {**value.to_json(), "values": shown}
