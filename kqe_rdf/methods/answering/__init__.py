"""Question answering over the KG, node text and registered tables, grounded in cited evidence (QUASAR-style).

Two stages, tried in turn. First, when the "kg" source is used and the structural reader has a grounded
reading of the question, its answers (:mod:`.grounded`: 4StepFocus's ranked answers, the first cited with the
KG path that supports it). Otherwise one pipeline for every source (Christmann & Weikum's QUASAR): question
understanding (:mod:`.intent`) → evidence retrieval, every source verbalised as sentences
(:mod:`.evidence`, :mod:`.tables`; the "kg" source adds 4StepFocus's structural
candidates, :mod:`.focus`) → re-ranking and pruning 1,000 → 100 → 30
(:mod:`.pruning`) → an answer read from the top evidence, citing it (:mod:`.answer`)::

    from kqe_rdf.methods.answering import answer
    result = answer(kb, settings, "who directed Kismet", sources=("kg", "text"))
    print(result.answer, [e.text for e in result.evidence])
    json.dumps(result.as_dict())   # what `kqe-rdf ask --json` prints and `/answer` returns

With an LLM configured (``settings``) the evidence pipeline's intent and answer come from the model and
are checked against the ontology and the evidence; without one — or with
``offline=True`` — both are read offline, and ``Answer.method`` says which happened
("4step-offline (grounded reading)" for the first stage; ``Answer.path`` then holds the reading).
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Sequence
from dataclasses import dataclass, field

from ...core.config import Settings
from ...core.errors import InputError
from ...kb.linking import Linker, normalise_name
from ...core.progress import StepClock
from . import confidence
from .answer import CandidateAnswer, LLMReader, OfflineReader, Reading
from .evidence import SOURCES, Evidence, KGFacts, NameFinder, TableRows, TextSentences
from .focus import FocusCandidates
from .grounded import GroundedReading
from .tables import load_tables
from .text_facts import TextFacts
from .intent import Intent, LLMIntent, OfflineIntent
from .pruning import EvidenceScorer, Pruner, Pruning, Ranked, TextPool

__all__ = ["SOURCES", "Answer", "QuestionAnswering", "answer", "check_sources"]

#: Most characters of a question (longer input is a mistake, not a question).
MAX_QUESTION_CHARS = 2000


@dataclass
class Answer:
    question: str
    #: The answer as the evidence writes it, or None when nothing in the evidence answers the question.
    answer: str | None
    #: KG nodes the answer links to (may be empty, e.g. a table value naming no node).
    nodes: tuple[str, ...]
    #: The pieces that support the answer (what it cites).
    evidence: list[Evidence]
    candidates: list[CandidateAnswer]
    intent: Intent
    #: The final pruned evidence the answer was read from, best first.
    top: list[Ranked]
    sources: tuple[str, ...]
    #: "offline", "llm:<model>", or "offline (after LLM: why)".
    method: str
    flags: list[str] = field(default_factory=list)
    #: Each pruning stage's pieces (pool, bm25, fusion@100, fusion@30, ...), for evidence recall.
    pruning: Pruning | None = None
    usage: dict[str, int] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)
    schema: object = field(default=None, repr=False)
    #: The grounded reading the answer came from (:class:`.grounded.Grounded`: triplets, the reader's account of
    #: each relation, the facts cited, SPARQL); None when the answer was read from evidence.
    path: dict | None = None
    #: Every answer of the question, best first (``answer`` is the first's name): all the children of a "who are
    #: the children of John", one for "who directed Kismet".
    answers: list[CandidateAnswer] = field(default_factory=list)
    #: How likely the first answer is right, from 0 to 1 (:mod:`.confidence`), and what it was read from.
    confidence: float = 0.0
    confidence_because: dict = field(default_factory=dict)

    def as_dict(self) -> dict:
        # Every answer's nodes, as `answers` lists them (a list question's, not the first answer's alone).
        nodes = list(dict.fromkeys([*self.nodes, *(i for a in self.answers for i in a.iris)]))
        return {"question": self.question, "answer": self.answer, "nodes": nodes,
                "answers": [c.as_dict() for c in self.answers], "confidence": self.confidence,
                "confidence_because": self.confidence_because,
                "method": self.method, "sources": list(self.sources), "flags": self.flags,
                "evidence": [e.as_dict() for e in self.evidence],
                "candidates": [c.as_dict() for c in self.candidates],
                "intent": self.intent.as_dict(self.schema),
                "top_evidence": [r.as_dict() for r in self.top],
                "stages": self.pruning.sizes() if self.pruning else {},
                "notes": self.pruning.notes if self.pruning else [],
                "path": self.path, "usage": self.usage, "seconds": self.seconds}


def check_sources(sources: Sequence[str] | str) -> tuple[str, ...]:
    """("kg", "text") from "kg,text", ["kg", "text"] or ["kg,text"] (a query string); unknown names are an InputError."""
    items = [sources] if isinstance(sources, str) else list(sources)
    names = [s.strip() for item in items for s in str(item).split(",") if s.strip()]
    unknown = [s for s in names if s not in SOURCES]
    if unknown or not names:
        raise InputError(f"unknown evidence source(s) {', '.join(unknown) or '(none given)'}; "
                         f"choose from {', '.join(SOURCES)}")
    return tuple(dict.fromkeys(names))


class QuestionAnswering:
    """The pipeline on one KB: linker, readers, evidence sources and pruner, made once and reused."""

    def __init__(self, kb, settings: Settings, llm=None, extra: EvidenceScorer | None = None) -> None:
        self.kb = kb
        self.settings = settings
        self.llm = llm
        self.linker = Linker(kb)
        index = self.linker.index
        self.offline_intent = OfflineIntent(kb, self.linker)
        self.intent = LLMIntent(kb, llm, self.offline_intent) if llm else self.offline_intent
        self.offline_reader = OfflineReader(kb, index, prior_weight=settings.qa.focus_weight)
        self.reader = LLMReader(kb, llm, self.offline_reader) if llm else self.offline_reader
        s = settings
        self.kg = KGFacts(kb, index, s.qa.kg_hops, s.qa.expand_nodes, s.qa.facts_per_node)
        self.text = TextSentences(kb, NameFinder(index), s.qa.text_hits)
        self.tables = TableRows(kb, index, s.qa.table_hits)
        self.focus = FocusCandidates(kb, self.linker, self.offline_intent.reader, s.qa.focus_hits)
        self.grounded = GroundedReading(kb, self.linker, self.offline_intent.reader, s.qa.grounded_depth,
                                        s.qa.max_answers) \
            if s.qa.grounded else None
        self.text_facts = TextFacts(kb, index, self.offline_intent.reader, self.text)
        self.pruner = Pruner(kb, s.qa.pool_size, s.qa.stages, s.qa.bm25_weight, s.qa.dense_weight,
                             s.qa.entity_weight, s.qa.dense_depth, extra, type_weight=s.qa.type_weight,
                             prior_weight=s.qa.focus_weight)

    def __call__(self, question: str, sources: Sequence[str] | str | None = None) -> Answer:
        question = " ".join((question or "").split())
        if not question:
            raise InputError("the question is empty: ask something, e.g. kqe-rdf ask \"who directed Kismet\"")
        if len(question) > MAX_QUESTION_CHARS:
            raise InputError(f"the question has {len(question)} characters; at most {MAX_QUESTION_CHARS} are read")
        chosen = check_sources(sources if sources is not None else self.settings.qa.sources)
        return self.from_reading(question, chosen) or self.from_evidence(question, chosen)

    def from_reading(self, question: str, sources: tuple[str, ...]) -> Answer | None:
        """The structural reader's answer (:mod:`.grounded`) when it reads the question fully; when its reading
        reads around an edge the graph lacks (a relation word unread, a hop no word names) or there is none,
        the relation the question names read from text (:mod:`.text_facts`, with the "text" source). None when
        neither answers, or when registered tables may hold what the graph lacks: the evidence pipeline then
        answers."""
        clock = StepClock(digits=4)
        found = self.grounded(question) if self.grounded is not None and "kg" in sources else None
        clock.lap("grounded reading")
        weak = found is None or found.weak
        if weak and self.grounded is not None and "text" in sources:
            intent = self.offline_intent(question)
            read = self.text_facts(question, intent, [p["constant"] for p in found.path["reading"]] if found else ())
            clock.lap("text facts")
            if read is not None:
                reading, evidence = read
                flags = [f"the graph's reading leaves {', '.join(found.unread)} unread" if found and found.unread
                         else "no grounded reading" if found is None else
                         f"hops no word names: {', '.join(found.unnamed)}"]
                return self.answer_from(question, sources, reading, evidence, intent, clock.laps, flags=flags)
        if found is None or (weak and "tables" in sources and load_tables(self.kb.path)):
            return None
        intent = self.offline_intent(question)
        clock.lap("intent")
        return self.answer_from(question, sources, found.reading, found.evidence, intent, clock.laps, found.path)

    def answer_from(self, question: str, sources: tuple[str, ...], reading: Reading, evidence: list[Evidence],
                    intent: Intent, seconds: dict[str, float], path: dict | None = None,
                    flags: Sequence[str] = ()) -> Answer:
        """An answer a reading of the question gave (grounded or from text facts), citing ``evidence``."""
        best = reading.answer
        seconds["total"] = round(sum(seconds.values()), 4)
        return Answer(question, best.name, best.iris, evidence, reading.candidates, intent,
                      [Ranked(e, 1.0) for e in evidence], sources, reading.method, [*reading.flags, *flags], None, {},
                      seconds, self.kb.schema, path, list(reading.answers),
                      *how_sure(reading, path, "grounded" if path is not None else "text facts"))

    def from_evidence(self, question: str, chosen: tuple[str, ...]) -> Answer:
        """The answer read from the evidence of ``chosen`` sources, pruned (the QUASAR pipeline)."""
        clock = StepClock(digits=4)
        lap, seconds = clock.lap, clock.laps
        budget = self.llm.budget() if self.llm else None
        if budget is not None:
            budget.__enter__()
        try:
            intent = self.intent(question)
            lap("intent")
            notes: list[str] = []
            evidence = self.collect(question, intent, chosen, notes)
            lap("evidence")
            pruning = self.pruner.run(question, intent.seeds, evidence, self.answer_like(intent))
            pruning.notes[:0] = notes
            lap("pruning")
            reading = self.reader(question, intent, pruning.final)
            lap("answer")
        finally:
            if budget is not None:
                budget.__exit__(None, None, None)
        by_id = {r.evidence.id: r.evidence for r in pruning.final}
        best = reading.answer
        seconds["total"] = round(sum(seconds.values()), 4)
        return Answer(question, best.name if best else None, best.iris if best else (),
                      [by_id[i] for i in best.evidence if i in by_id] if best else [], reading.candidates, intent,
                      pruning.final, chosen, reading.method, reading.flags, pruning,
                      budget.usage.as_dict() if budget is not None else {}, seconds, self.kb.schema, None,
                      list(reading.answers), *how_sure(reading, stage="evidence"))

    def answer_like(self, intent: Intent):
        """Whether a piece names an entity of the answer type other than the question's own (None: no type known)."""
        if not intent.answer_types:
            return None
        seeds = set(intent.seeds)
        factor = self.offline_reader.type_factor

        def test(piece: Evidence) -> bool:
            return any(not seeds.intersection(e.iris) and factor(e.iris, {e.column} if e.column else set(), intent)[1]
                       for e in piece.entities)

        return test

    def collect(self, question: str, intent: Intent, sources: tuple[str, ...],
                notes: list[str] | None = None) -> list[Evidence]:
        """The evidence pool: KG facts (the nodes they walk pick table rows) and 4StepFocus's structural
        candidates, then text, then table rows."""
        seeds = intent.seeds
        pool: list[Evidence] = []
        walked: dict[str, int] = {}
        if "kg" in sources and seeds:
            phrase = intent.relation or question
            pool += self.kg.collect(seeds, lambda texts: TextPool(texts).scores(phrase), walked)
        if "kg" in sources:
            pool += self.focus.collect(question, intent.answer_types, seeds, notes)
        if "text" in sources:
            pool += self.text.collect(question, seeds)
        if "tables" in sources:
            pool += self.tables.collect(question, seeds, walked)
        return pool


def how_sure(reading: Reading, path: dict | None = None, stage: str = "evidence") -> tuple[float, dict]:
    """How likely a reading's first answer is right (:func:`.confidence.calibrated`) and what that was read from:
    the raw confidence's factors, ``raw``, how many answers, unread words, unnamed hops, guessed paths and dropped
    conditions, the stage; 0 without an answer."""
    if reading.answer is None:
        return 0.0, {}
    if path is not None:  # a grounded reading: structural scores
        others = [c.score for c in reading.candidates[len(reading.answers):]]
        raw, because = confidence.grounded(path, reading.answer.score, others)
    else:
        counted = reading.offline or reading  # an LLM's answer is as well supported as the offline reader finds it
        key = normalise_name(reading.answer.name)
        own = [c.score for c in counted.candidates if normalise_name(c.name) == key][:1]
        others = [c.score for c in counted.candidates[len(reading.answers):] if normalise_name(c.name) != key]
        raw, because = confidence.supported(own[0] if own else 0.0, others)
    because = {**because, "raw": raw, "answers": max(len(reading.answers), 1),
               "unread": len((path or {}).get("unread", ())), "unnamed": len((path or {}).get("unnamed", ())),
               "hops": len((path or {}).get("relations", ())), "tried": len((path or {}).get("tried", ())),
               "guessed": len((path or {}).get("guessed", ())), "dropped": len((path or {}).get("dropped", ())),
               "stage": stage}
    return confidence.calibrated(because), because


_pipelines: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_lock = threading.Lock()


def answer(kb, settings: Settings, question: str, sources: Sequence[str] | str | None = None, *,
           offline: bool = False) -> Answer:
    """Answer ``question`` from the KB's ``sources`` (default ``settings.qa.sources``); the pipeline is
    built once per KB, settings and mode. The REST server's ``/answer`` calls this."""
    from ...llm.client import LLM

    with _lock:
        per_kb = _pipelines.setdefault(kb, {})
        key = (settings, offline)
        if key not in per_kb:
            per_kb[key] = QuestionAnswering(kb, settings, None if offline else LLM.from_settings(settings))
        pipeline = per_kb[key]
    return pipeline(question, sources)
