"""Triplets: the structured reading of a query that 4StepFocus compiles to SPARQL.

A triplet ``(head, relation, tail)`` has ends that are variables (``?movie``)
or constants (a named entity as the user wrote it, with an optional type);
one variable is the answer. Whoever produces triplets — an LLM or the offline
mention finder — produces these objects, and :func:`normalise` maps their
relation and type names onto the ontology before anything reaches SPARQL:
exact local names, then labels, then close spellings; what cannot be mapped
is dropped with a note, never sent as-is.

>>> t = Triplet(End("?m"), "directed_by", End("Kismet", "Movie"))
>>> t.variables()
['?m']
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field, replace

from ...kb.ontology import Schema, local_name

_VARIABLE = re.compile(r"^\?[A-Za-z_]\w*$")


@dataclass(frozen=True)
class End:
    text: str
    type: str | None = None

    @property
    def is_variable(self) -> bool:
        return self.text.startswith("?")


@dataclass(frozen=True)
class Triplet:
    head: End
    relation: str
    tail: End
    negated: bool = False
    #: A condition on a node of another triplet's path ("X's mom": the parent is female), joined to that path in the
    #: compiled query, never a path to the answer of its own.
    constraint: bool = False
    #: The request is unsure of the constant ("possible hypotonia", "rule out ..."): a weaker constraint.
    uncertain: bool = False

    def variables(self) -> list[str]:
        return [e.text for e in (self.head, self.tail) if e.is_variable]

    def __str__(self) -> str:
        def show(e: End) -> str:
            return e.text if e.is_variable else f'"{e.text}"' + (f":{e.type}" if e.type else "")

        return ("NOT " if self.negated else "") + f"({show(self.head)}, {self.relation}, {show(self.tail)})" + (
            " [condition]" if self.constraint else "") + (" [uncertain]" if self.uncertain else "")


@dataclass
class TripletQuery:
    query: str
    triplets: list[Triplet]
    answer: str
    answer_type: str | None = None
    source: str = "offline"
    notes: list[str] = field(default_factory=list)
    #: Constants the request never mentions that :func:`normalise` read as the answer (a model's guess at it).
    guessed_answers: list[str] = field(default_factory=list)
    #: Other readings to try, best first, when this one finds no candidate (the offline reader's next paths).
    alternatives: list[TripletQuery] = field(default_factory=list)
    #: How the offline reader read the request: per constant, the hops of its path, the words each was read
    #: from and how, and the paths it beat (see ``OfflineTriplets._reading``).
    reading: list[dict] = field(default_factory=list)
    #: Constants (by text) whose path comes back to them by its structure ("the mother of X's daughter", "the
    #: tracks of X's tracks"): they may be their own answer. Every other constant is not.
    returning: set[str] = field(default_factory=set)
    #: Constants (by text) a path may pass through: its hops before the last come back to them by structure ("the
    #: release of X's track", where X is its own track); other paths ("the films of X's director") may not.
    revisiting: set[str] = field(default_factory=set)
    #: Words of the request the reading did not read: no mention, no hop, no class or question word took them.
    unread: list[str] = field(default_factory=list)
    #: What the request asks as a value of the answers (or of ``value.nodes``): a
    #: :class:`~kqe_rdf.methods.reading.chains.ValueAsk`, None for a request that asks for nodes.
    value: object | None = None
    #: What the request says of each term it names (:mod:`kqe_rdf.kb.context`): text, state (present, absent,
    #: family, uncertain) and the trigger that set it.
    terms: list[dict] = field(default_factory=list)
    #: Other classes the answer may be of beside ``answer_type`` (a path that reaches bands and musicians, both
    #: asked for by "which artists").
    also_types: tuple[str, ...] = ()

    def constants(self) -> list[End]:
        seen: dict[tuple[str, str | None], End] = {}
        for t in self.triplets:
            for e in (t.head, t.tail):
                if not e.is_variable:
                    seen.setdefault((e.text, e.type), e)
        return list(seen.values())

    def to_json(self) -> dict:
        out = {
            "answer": self.answer, "answer_type": self.answer_type, "source": self.source, "notes": self.notes,
            "triplets": [{"head": t.head.text, "head_type": t.head.type, "relation": t.relation, "tail": t.tail.text,
                          "tail_type": t.tail.type, "negated": t.negated, **({"condition": True} if t.constraint else {}),
                          **({"uncertain": True} if t.uncertain else {})}
                         for t in self.triplets],
        }
        if self.terms:
            out["terms"] = self.terms
        if self.reading:
            out["reading"] = self.reading
        if self.unread:
            out["unread"] = self.unread
        if self.value is not None:
            out["value"] = self.value.to_json()
        return out


#: What an LLM is asked to return (JSON Schema), validated before use.
TRIPLETS_SCHEMA = {
    "type": "object",
    "required": ["triplets", "answer"],
    "properties": {
        "answer": {"type": "string", "description": "the variable that is the answer, e.g. ?x"},
        "answer_type": {"type": ["string", "null"]},
        "triplets": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["head", "relation", "tail"],
                "properties": {
                    "head": {"type": "string"}, "head_type": {"type": ["string", "null"]},
                    "relation": {"type": "string"},
                    "tail": {"type": "string"}, "tail_type": {"type": ["string", "null"]},
                },
            },
        },
    },
}


def from_json(obj: dict, query: str, source: str) -> TripletQuery:
    """Triplets from validated LLM JSON (see :data:`TRIPLETS_SCHEMA`)."""
    triplets = []
    for item in obj.get("triplets", []):
        head, tail = str(item.get("head", "")).strip(), str(item.get("tail", "")).strip()
        if not head or not tail or not str(item.get("relation", "")).strip():
            continue
        triplets.append(Triplet(End(_as_variable(head), item.get("head_type") or None), str(item["relation"]).strip(),
                                End(_as_variable(tail), item.get("tail_type") or None)))
    answer = _as_variable(str(obj.get("answer") or "?x"))
    return TripletQuery(query, triplets, answer if answer.startswith("?") else "?" + answer,
                        obj.get("answer_type") or None, source)


def _as_variable(text: str) -> str:
    """LLMs write variables as ?x, x, or "?movie"; constants stay as written."""
    text = text.strip().strip('"')
    if text.startswith("?"):
        name = re.sub(r"\W", "_", text[1:]) or "x"
        return "?" + name
    return text


def _closest(name: str, options: dict[str, str]) -> str | None:
    """Map a name to an ontology IRI via local name, label, then close spelling."""
    key = name.strip()
    if "://" in key and key in options:
        return key  # an IRI of the ontology (no local name or label is written with "://")
    norm = re.sub(r"[\s_-]+", "", key).lower()
    for iri, label in options.items():
        if local_name(iri) == key or iri == key:
            return iri
    for iri, label in options.items():
        if re.sub(r"[\s_-]+", "", label).lower() == norm or re.sub(r"[\s_-]+", "", local_name(iri)).lower() == norm:
            return iri
    by_norm = {re.sub(r"[\s_-]+", "", local_name(i)).lower(): i for i in options}
    by_norm.update({re.sub(r"[\s_-]+", "", lbl).lower(): i for i, lbl in options.items()})
    close = difflib.get_close_matches(norm, list(by_norm), n=1, cutoff=0.75)
    return by_norm[close[0]] if close else None


def _mentioned(name: str, query: str) -> bool:
    """Whether the request writes this name (case, spacing and small misspellings aside)."""
    from rapidfuzz import fuzz

    name, query = " ".join(name.lower().split()), " ".join(query.lower().split())
    return bool(name) and (name in query or fuzz.partial_ratio(name, query) >= 90)


def normalise(tq: TripletQuery, schema: Schema) -> TripletQuery:
    """Relations and types mapped onto the ontology (IRIs); unusable triplets dropped with a note."""
    relations = {iri: r.label for iri, r in schema.relations.items()}
    classes = {iri: c.label for iri, c in schema.classes.items()}
    notes = list(tq.notes)

    def fix_type(end: End) -> End:
        if end.type is None:
            return end
        iri = _closest(end.type, classes)
        if iri is None:
            notes.append(f"type {end.type!r} is not in the ontology; dropped")
        return replace(end, type=iri)

    kept, guesses = [], list(tq.guessed_answers)
    for t in tq.triplets:
        rel = _closest(t.relation, relations)
        if rel is None:
            notes.append(f"relation {t.relation!r} is not in the ontology; triplet {t} dropped")
            continue
        if not t.head.is_variable and not t.tail.is_variable:
            guessed = [end for end in (t.head, t.tail) if not _mentioned(end.text, tq.query)]
            if len(guessed) != 1:
                notes.append(f"triplet {t} has no variable; dropped")
                continue
            # Small models write their guess at the answer where the variable belongs ("Jeff Nichols",
            # directed_by, "Kismet"): the one constant the request never mentions is read as the answer.
            notes.append(f"{guessed[0].text!r} is not in the request: read as the answer {tq.answer}")
            guesses.append(guessed[0].text)
            as_answer = End(tq.answer, guessed[0].type)
            t = Triplet(as_answer if t.head is guessed[0] else t.head, t.relation,
                        as_answer if t.tail is guessed[0] else t.tail, t.negated)
        kept.append(Triplet(fix_type(t.head), rel, fix_type(t.tail), t.negated, t.constraint, t.uncertain))
    answer_type = _closest(tq.answer_type, classes) if tq.answer_type else None
    if tq.answer_type and answer_type is None:
        notes.append(f"answer type {tq.answer_type!r} is not in the ontology; ignored")
    answer = tq.answer
    variables = {v for t in kept for v in t.variables()}
    if kept and answer not in variables:
        notes.append(f"answer {answer} appears in no triplet; using {sorted(variables)[0]}")
        answer = sorted(variables)[0]
    alternatives = [normalise(a, schema) for a in tq.alternatives]
    return TripletQuery(tq.query, kept, answer, answer_type, tq.source, notes, guesses,
                        [a for a in alternatives if a.triplets], tq.reading, set(tq.returning), set(tq.revisiting),
                        list(tq.unread), tq.value, list(tq.terms),
                        tuple(c for c in tq.also_types if c in classes) if answer_type else ())


def abstain_from_negations(tq: TripletQuery, as_context: bool = False) -> TripletQuery:
    """The reading without its negations where they cannot be trusted to narrow the answers: a list of terms of
    which more than half are negated (a misread scope would invert the request), or a term both stated and
    negated. What is left is the positive terms, ranked with the request's text, so the answer is never below
    what BM25 gives; with no positive term left there is no reading and BM25 answers. A single negated condition
    ("which albums were not produced by X") is a filter and stays. ``as_context``: the negations only add context
    to positive terms' ranking (hierarchy matching, ``fourstep_negated``), which cannot invert it: only a
    contradiction abstains.

    >>> r = TripletQuery("a; no b or c", [Triplet(End("?x"), "has", End("a")), Triplet(End("?x"), "has", End("b"),
    ...     negated=True), Triplet(End("?x"), "has", End("c"), negated=True)], "?x")
    >>> [str(t) for t in abstain_from_negations(r).triplets], abstain_from_negations(r).notes[0][:40]
    (['(?x, has, "a")'], 'abstained from the negations of b, c: mo')
    """
    def constants(negated: bool) -> list[str]:
        return list(dict.fromkeys(e.text for t in tq.triplets if t.negated == negated and not t.constraint
                                  for e in (t.head, t.tail) if not e.is_variable))

    positive, negative = constants(False), constants(True)
    if not negative:
        return tq
    contradicted = sorted(set(positive) & set(negative))
    if contradicted:
        why = f"{', '.join(contradicted)} both stated and negated"
    elif len(positive) + len(negative) >= 2 and len(negative) > len(positive) and not (as_context and positive):
        why = f"more than half of the request's {len(positive) + len(negative)} terms negated"
    else:
        return tq
    paths = [t for t in tq.triplets if not t.negated and not t.constraint]
    reached = {v for t in paths for v in t.variables()}
    kept = [t for t in tq.triplets if not t.negated and (not t.constraint or set(t.variables()) <= reached)]
    note = f"abstained from the negations of {', '.join(negative)}: {why}"
    return replace(tq, triplets=kept, notes=[*tq.notes, note],
                   alternatives=[abstain_from_negations(a, as_context) for a in tq.alternatives])
