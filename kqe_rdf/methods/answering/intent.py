"""The structured intent of a question (QUASAR's question understanding): a small frame, not a parse.

The frame holds the answer type (ontology classes), the entities the question names
(linked to KG nodes), the relation phrase, and time and location cues. Offline it
comes from the reader's mention finder (:meth:`OfflineTriplets.mentions`), the ontology's class cues
("who" → Person, "which films" → Movie) and relation labels; with an LLM it is the
model's JSON, checked against the ontology — an unknown answer type is dropped, an
entity the question does not contain is dropped, names that link to nothing are
noted, and with nothing usable the offline frame is used and the notes say why.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ...core.errors import SchemaError
from ..reading import OfflineTriplets
from ...kb.context import FAMILY
from ...kb.linking import Linker, normalise_name, singular
from ...kb.ontology import local_name

INTENT_SCHEMA = {
    "type": "object", "required": ["answer_type", "entities", "relation"],
    "properties": {"answer_type": {"type": ["string", "null"]},
                   "entities": {"type": "array", "items": {"type": "string"}},
                   "relation": {"type": "string"},
                   "time": {"type": "array", "items": {"type": "string"}},
                   "location": {"type": "array", "items": {"type": "string"}}},
}

_YEAR = re.compile(r"\b(1[5-9]\d\d|20\d\d)s?\b")
_TIME_WORDS = re.compile(r"\b(before|after|since|until|during|between|january|february|march|april|june|july|"
                         r"august|september|october|november|december|century|decade|\d{1,2}(?:st|nd|rd|th) century)"
                         r"\b", re.I)
_PLACE = re.compile(r"\b(?:in|at|from|near)\s+((?:[A-Z][\w'-]+)(?:\s+[A-Z][\w'-]+)*)")
_PLACE_CLASS = re.compile(r"place|location|country|city|region|area", re.I)
_WH = {"what", "which", "who", "whom", "whose", "when", "where", "how", "did", "does", "do", "is", "are", "was",
       "were", "the", "a", "an", "of", "in", "by", "to", "that", "for", "with", "be", "can", "you", "me", "tell"}


@dataclass(frozen=True)
class IntentEntity:
    text: str
    iris: tuple[str, ...]
    how: str  # exact | fuzzy | bm25 | dense | mention


@dataclass
class Intent:
    question: str
    answer_types: list[str]
    entities: list[IntentEntity]
    relation: str
    #: Relations whose label (or inverse label) shares a word with the relation phrase.
    relations: list[str] = field(default_factory=list)
    time: list[str] = field(default_factory=list)
    location: list[str] = field(default_factory=list)
    source: str = "offline"
    notes: list[str] = field(default_factory=list)

    @property
    def seeds(self) -> list[str]:
        """The KG nodes the question names, in order, each once."""
        return list(dict.fromkeys(i for e in self.entities for i in e.iris))

    def as_dict(self, schema=None) -> dict:
        label = (lambda iri: schema.label(iri)) if schema is not None else local_name
        return {"answer_types": [label(t) for t in self.answer_types],
                "entities": [{"text": e.text, "iris": list(e.iris), "how": e.how} for e in self.entities],
                "relation": self.relation, "relations": [label(r) for r in self.relations],
                "time": self.time, "location": self.location, "source": self.source, "notes": self.notes}


class OfflineIntent:
    """The frame without an LLM: mentions, class cues, relation labels, regex time and place cues."""

    name = "offline"

    def __init__(self, kb, linker: Linker | None = None) -> None:
        self.kb = kb
        self.linker = linker or Linker(kb)
        self.reader = OfflineTriplets(kb, self.linker)  # its class-cue reading of the answer type

    def __call__(self, question: str) -> Intent:
        constants, conditions = self.reader.mentions(question)  # as 4StepFocus reads them
        mentions = constants + conditions
        # "... was not observed", "family history of ...": not what the answer is about
        negated = [m for m in mentions if m.negated or m.state == FAMILY]
        entities = [IntentEntity(m.text, tuple(c.iri for c in m.candidates), "mention")
                    for m in mentions if m not in negated]
        stripped = question
        for m in sorted(mentions, key=lambda m: -m.start):
            stripped = stripped[: m.start] + " " + stripped[m.end :]
        relation = " ".join(w for w in re.findall(r"[\w'-]+", stripped) if w.lower() not in _WH)
        notes = [] if mentions else ["no entity of the KB is named in the question"]
        if negated:
            notes.append(f"{len(negated)} negated or relatives' mention(s) left out: "
                         f"{', '.join(f'{m.text} ({m.trigger})' for m in negated[:5])}")
        return Intent(question, sorted(self.reader.answer_types(stripped)), entities, relation,
                      self.relations(relation), time_cues(question), self.places(question, entities),
                      "offline", notes)

    def relations(self, phrase: str) -> list[str]:
        """Stored relations whose label or inverse label shares a word with ``phrase`` (:func:`stems`)."""
        words = stems(phrase)
        schema = self.kb.schema
        out = []
        for iri, rel in schema.relations.items():
            if rel.virtual or (schema.stored_relations and iri not in schema.stored_relations):
                continue
            if words & stems(f"{rel.label} {schema.inverse_label(iri)}"):
                out.append(iri)
        return out

    def places(self, question: str, entities: list[IntentEntity]) -> list[str]:
        """Entities of a place-like class, and capitalised names after in/at/from/near that link to no other kind."""
        index = self.linker.index
        out = [e.text for e in entities
               if any(_PLACE_CLASS.search(self.kb.schema.label(t)) for i in e.iris for t in index.types.get(i, ()))]
        linked = {normalise_name(e.text) for e in entities}
        for match in _PLACE.finditer(question):
            if normalise_name(match.group(1)) not in linked and not _YEAR.fullmatch(match.group(1)):
                out.append(match.group(1))
        return list(dict.fromkeys(out))


def stems(text: str) -> set[str]:
    """Words of three or more letters, singular, cut to four letters: "release date" and "released" meet.

    >>> sorted(stems("the release dates"))
    ['date', 'rele', 'the']
    """
    return {singular(w)[:4] for w in normalise_name(text).split() if len(w) > 2}


def time_cues(question: str) -> list[str]:
    """Years ("1944", "1990s") and time words ("before", "March").

    >>> time_cues("films released after 1990 or in the 1960s")
    ['1990', '1960s', 'after']
    """
    return list(dict.fromkeys([m.group(0) for m in _YEAR.finditer(question)] +
                              [m.group(0).lower() for m in _TIME_WORDS.finditer(question)]))


class LLMIntent:
    """The frame from an LLM's JSON, validated against the ontology; the offline frame when it is unusable."""

    def __init__(self, kb, llm, offline: OfflineIntent) -> None:
        self.kb = kb
        self.llm = llm
        self.offline = offline
        self.name = f"llm:{llm.model}"

    def __call__(self, question: str) -> Intent:
        from ...llm.client import LLMError
        from .prompts import intent_messages

        try:
            result = self.llm.json(intent_messages(self.kb.schema.describe_for_prompt(), question), INTENT_SCHEMA,
                                   name="intent")
        except LLMError as exc:
            return self._fallback(question, f"LLM failed ({exc})")
        if not result.ok:
            return self._fallback(question, f"LLM answer unusable ({result.error})")
        return self.validated(question, result.value)

    def validated(self, question: str, value: dict) -> Intent:
        offline = self.offline(question)
        notes: list[str] = []
        answer_types = offline.answer_types
        if value.get("answer_type"):
            try:
                cls = self.kb.schema.node_class(str(value["answer_type"]).strip())
                answer_types = sorted(self.kb.schema.subclasses(cls.iri))
            except SchemaError as exc:
                notes.append(f"answer type dropped: {exc}")
        asked = f" {normalise_name(question)} "
        entities: list[IntentEntity] = []
        for text in value.get("entities") or []:
            key = normalise_name(str(text))
            if not key or f" {key} " not in asked:
                notes.append(f"entity {str(text)[:80]!r} is not in the question; dropped")
                continue
            candidates = self.offline.linker.link(str(text))
            if candidates:
                entities.append(IntentEntity(str(text), tuple(c.iri for c in candidates), candidates[0].how))
            else:
                notes.append(f"entity {str(text)!r} names no node of the KB")
        if not entities:
            entities = offline.entities
            notes.append("no LLM entity links to the KB; the mention finder's entities are used")
        relation = str(value.get("relation") or "").strip() or offline.relation
        return Intent(question, answer_types, entities, relation, self.offline.relations(relation),
                      [str(t) for t in value.get("time") or []] or offline.time,
                      [str(p) for p in value.get("location") or []] or offline.location, self.name, notes)

    def _fallback(self, question: str, why: str) -> Intent:
        intent = self.offline(question)
        intent.notes.insert(0, why + "; the offline intent is used")
        intent.source = "offline (after LLM failure)"
        return intent
