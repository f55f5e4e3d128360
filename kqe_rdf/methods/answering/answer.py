"""Answers read from the pruned evidence, each with the evidence that supports it.

Offline (:class:`OfflineReader`): every entity the top pieces mention is a candidate
(except the question's own entities); its score sums, over the pieces naming it,
1/log2(rank + 2) — so frequency and rank both count — times a type factor: 1 when
its KG type (or, for a table value, its column name) is the answer type, 0.1 when
its type is another, 0.3 when unknown; with no answer type, 1 when it sits in a
column or fact whose name shares a word with the relation phrase, else 0.3. A
4StepFocus piece (:mod:`.focus`) counts, wherever it ranks, as many top facts
as the specificity-weighted paths its node satisfies beyond the best hit not shown
(its ``prior``, times ``qa_focus_weight``), so a node that fits most of the 25
phenotypes of a case outweighs one named beside a few of them. The best-supported
candidate is the answer.

With an LLM (:class:`LLMReader`) the model answers from the top pieces only and
cites their ids. Its answer is checked, never trusted: citations of pieces that were
not shown are dropped and flagged; an answer that is no entity or value of any shown
piece (a word of a sentence such as "directed" does not count) is rejected (flagged)
and the offline answer is used instead; an answer only uncited pieces name keeps those
as its evidence (flagged). Answers are linked back to KG
nodes through the pieces that name them, else by exact name.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from ...kb.linking import NameIndex, normalise_name
from ...kb.ontology import local_name
from .evidence import Evidence
from .intent import Intent, stems
from .pruning import Ranked

ANSWER_SCHEMA = {
    "type": "object", "required": ["answer", "evidence"],
    "properties": {"answer": {"type": ["string", "number", "null"]},
                   "evidence": {"type": "array", "items": {"type": ["string", "integer"]}}},
}
MATCH, OTHER, UNKNOWN = 1.0, 0.1, 0.3


@dataclass
class CandidateAnswer:
    name: str
    iris: tuple[str, ...]
    score: float
    #: Ids of the pieces that name it, best first.
    evidence: list[str]
    type_match: bool | None = None
    #: An answer that is a value, not a node: its lexical form, datatype and the node that holds it.
    value: dict | None = None

    def as_dict(self) -> dict:
        return {"name": self.name, "iris": list(self.iris), "score": round(self.score, 4),
                "evidence": self.evidence, "type_match": self.type_match,
                **({"value": self.value} if self.value is not None else {})}


@dataclass
class Reading:
    """What a reader concluded: the answer (or None), the ranked candidates, and flags on what went wrong.

    ``answers`` is every answer of the question, best first (a list question, "who are the children of
    John", has several; a reading that finds one gives that one): by default the ``answer`` alone."""

    answer: CandidateAnswer | None
    candidates: list[CandidateAnswer]
    method: str
    flags: list[str] = field(default_factory=list)
    answers: list[CandidateAnswer] | None = None
    #: For an LLM's answer, what the offline reader concluded from the same pieces (the support it counts).
    offline: Reading | None = None

    def __post_init__(self) -> None:
        if self.answers is None:
            self.answers = [self.answer] if self.answer is not None else []


class OfflineReader:
    name = "offline"

    def __init__(self, kb, index: NameIndex, max_candidates: int = 10, prior_weight: float = 1.0) -> None:
        self.kb = kb
        self.index = index
        self.max_candidates = max_candidates
        #: A piece with a prior (a 4StepFocus hit: the specificity-weighted paths its node satisfies) counts
        #: as that many top facts times this weight; a piece without one counts 1/log2(rank + 2).
        self.prior_weight = prior_weight

    def type_factor(self, iris: Sequence[str], columns: set[str], intent: Intent,
                    relations: set[str] = frozenset()) -> tuple[float, bool | None]:
        """A table column naming the answer type settles it (a value "French" in column "language" is a
        language, even if the KG's only "French" is a tag); else the KG types of the candidate's nodes.

        With no answer type ("what was the release date of X"), the relation phrase stands in for it: a
        candidate in a table column or at the end of a KG fact whose name shares a word with the phrase
        (column "release year", relation release_year) is what is asked about; others weigh 0.3."""
        wanted = set(intent.answer_types)
        if not wanted:
            words = stems(intent.relation)
            if not words:
                return 1.0, None
            named = relations & set(intent.relations) or any(words & stems(c) for c in columns)
            return (MATCH if named else UNKNOWN), None
        cues = {c for t in wanted for c in self.kb.schema.class_cues.get(t, [])} | \
               {normalise_name(local_name(t)) for t in wanted}
        if any(normalise_name(c) in cues or any(cue in normalise_name(c) for cue in cues) for c in columns):
            return MATCH, True
        types = {t for i in iris for t in self.index.types.get(i, ())}
        if types:
            return (MATCH, True) if types & wanted else (OTHER, False)
        return UNKNOWN, None

    def candidates(self, intent: Intent, ranked: Sequence[Ranked]) -> list[CandidateAnswer]:
        asked = {normalise_name(e.text) for e in intent.entities}
        seeds = set(intent.seeds)
        support: dict[str, dict] = {}
        for rank, r in enumerate(ranked):
            prior = r.evidence.prior
            # A structural piece's weight is its own score: its rank among the pieces adds nothing to it.
            weight = 1.0 / math.log2(rank + 2) if prior is None else self.prior_weight * prior
            for entity in r.evidence.entities:
                key = normalise_name(entity.name)
                if not key or key in asked or seeds.intersection(entity.iris):
                    continue
                s = support.setdefault(key, {"name": entity.name, "iris": {}, "columns": set(), "relations": set(),
                                             "evidence": {}})
                s["iris"].update(dict.fromkeys(entity.iris))
                if entity.column:
                    s["columns"].add(entity.column)
                s["relations"].update(_relations(r.evidence))
                s["evidence"].setdefault(r.evidence.id, weight)
        out = []
        for s in support.values():
            iris = list(s["iris"])
            factor, match = self.type_factor(iris, s["columns"], intent, s["relations"])
            if match and intent.answer_types:  # of a name several nodes share, keep the ones of the wanted type
                iris = [i for i in iris if set(self.index.types.get(i, ())) & set(intent.answer_types)] or iris
            out.append(CandidateAnswer(s["name"], tuple(iris), factor * sum(s["evidence"].values()),
                                       list(s["evidence"]), match))
        out.sort(key=lambda c: (-c.score, c.name))
        return out[: self.max_candidates]

    def __call__(self, question: str, intent: Intent, ranked: Sequence[Ranked]) -> Reading:
        candidates = self.candidates(intent, ranked)
        flags = [] if candidates else ["no candidate answer in the evidence"]
        return Reading(candidates[0] if candidates else None, candidates, self.name, flags)


def _relations(piece: Evidence) -> set[str]:
    """The KG relations a piece states: a fact's own, a 4StepFocus hit's triplets' (none for text and rows)."""
    origin = piece.origin
    if "relation" in origin:
        return {origin["relation"]}
    return {t["relation"] for t in origin.get("triplets", ()) if isinstance(t, dict) and "relation" in t}


class LLMReader:
    """The LLM answers from the shown pieces and cites them; the answer is checked against them."""

    def __init__(self, kb, llm, offline: OfflineReader) -> None:
        self.kb = kb
        self.llm = llm
        self.offline = offline
        self.name = f"llm:{llm.model}"

    def __call__(self, question: str, intent: Intent, ranked: Sequence[Ranked]) -> Reading:
        from ...llm.client import LLMError
        from .prompts import answer_messages

        fallback = self.offline(question, intent, ranked)
        if not ranked:
            return fallback
        types = ", ".join(self.kb.schema.label(t) for t in intent.answer_types[:3]) or None
        try:
            result = self.llm.json(answer_messages(question, [(r.evidence.id, r.evidence.text) for r in ranked], types),
                                   ANSWER_SCHEMA, name="answer")
        except LLMError as exc:
            return self._offline(fallback, f"LLM failed ({exc})")
        if not result.ok:
            return self._offline(fallback, f"LLM answer unusable ({result.error})")
        return self.checked(result.value, intent, ranked, fallback)

    def checked(self, value: dict, intent: Intent, ranked: Sequence[Ranked], fallback: Reading) -> Reading:
        """The LLM's answer if the shown evidence supports it, else the offline one; flags say what was wrong."""
        shown = {r.evidence.id: r.evidence for r in ranked}
        flags: list[str] = []
        cited = [str(i).strip().strip("[]") for i in value.get("evidence") or []]
        missing = [i for i in cited if i not in shown]
        if missing:
            flags.append(f"LLM cited evidence that does not exist: {', '.join(missing[:10])}; citations dropped")
        cited = [i for i in dict.fromkeys(cited) if i in shown]
        text = value.get("answer")
        text = "" if text is None else str(text).strip()
        if not text:
            return self._offline(fallback, "LLM found no answer in the evidence", flags)
        key = normalise_name(text)
        supporting = [i for i in cited if shown[i].names(key)]
        if not supporting:
            elsewhere = [r.evidence.id for r in ranked if r.evidence.names(key)]
            if not elsewhere:
                return self._offline(fallback, f"LLM answer {text[:80]!r} is not supported by the evidence", flags)
            flags.append(f"LLM answer {text[:80]!r} is not in the evidence it cited "
                         f"({', '.join(cited) or 'none'}); the pieces that contain it are cited instead")
            supporting = elsewhere
        name, iris, columns = self.link(text, [shown[i] for i in supporting])
        candidate = CandidateAnswer(name, iris, 1.0, supporting, self.offline.type_factor(iris, columns, intent)[1])
        return Reading(candidate, [candidate] + [c for c in fallback.candidates if normalise_name(c.name) != key],
                       self.name, flags, offline=fallback)

    def link(self, text: str, pieces: Sequence[Evidence]) -> tuple[str, tuple[str, ...], set[str]]:
        """The answer's display name, KG nodes and table columns: from an entity of its pieces, else by exact name."""
        key = normalise_name(text)
        for piece in pieces:
            for entity in piece.entities:
                if normalise_name(entity.name) == key:
                    return entity.name, entity.iris, {entity.column} if entity.column else set()
        return text, tuple(self.offline.index.nodes(key)), set()

    def _offline(self, fallback: Reading, why: str, flags: Sequence[str] = ()) -> Reading:
        return Reading(fallback.answer, fallback.candidates, f"offline (after LLM: {why})",
                       [*flags, f"{why}; the offline answer is used"])

