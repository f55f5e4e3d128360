"""Values: a question that asks for a literal is answered with the value the graph stores, typed.

"The release year of Weather Maps", "Weather Maps's release year", "when was Nora Vale born", "how tall is X":
the last link of the request's chain (:mod:`.chains`) is a relation whose objects are literals, not nodes. Such
a *value relation* is any predicate with literal objects that is not one of the KB's document properties (names,
aliases, text fields, identifiers: what documents already show). It fills the last slot as the slot's words
name it: by its phrase's words (its ``rdfs:label`` or its local name read as words, ``releaseYear`` → "release
year"), else by the encoder. The wh-word says which kind of value it wants ("when" and "what year" a date or
time, "how many", "how long", "how tall" a number): a relation of another kind is not read, and one of that kind
is read more surely. The answer is each value with its datatype, of the nodes the rest of the chain reaches.

Nothing here names a relation of one KB: the value relations are the KB's, the kinds XML Schema's.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from pyoxigraph import Literal, NamedNode

from ...core.caches import per_instance
from ...kb import queries
from ...kb.documents import text_properties
from ...kb.ontology import CORE, RDFS_LABEL, local_name, readable
from ...kb.words import HOW_MUCH, WHEN_NOUNS
from .words import phrase_stems

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


def counting(query: str) -> bool:
    """Whether a question asks how many of something there are ("how many albums did X produce"); a value that
    says how many ("how many tracks does X have", a number stored with X) is read first.

    >>> counting("How many albums did Nora Vale produce?"), counting("how much is it")
    (True, False)
    """
    words = query.lower().split()
    return any(a == "how" and b == "many" for a, b in zip(words, words[1:]))


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
