"""Structural candidates as evidence: 4StepFocus run on the question, each top hit one piece (part of "kg").

KG facts around the question's entities say what is *near* them; they do not say
which node satisfies *all* of the question's constraints at once. 4StepFocus does:
it reads the question as triplets, links their constants and asks the store for the
nodes that satisfy the most (specificity-weighted) paths. For a phenopacket ("which
disease explains these 25 phenotypes?") that ranking is far better than counting how
often a disease is named near each phenotype (see the question-answering section of
``docs/results.md``).

So each of the top ``qa_focus_hits`` hits becomes one evidence piece of the "kg"
source, written like a fact — the satisfied paths with the hit in the answer's place
("Kismet directed by William Dieterle"; "Marfan syndrome has phenotype Ectopia lentis; …")
— and keeping its provenance in ``origin``: the node IRI, its 4StepFocus rank, the
bindings from ``Batch.explain`` and the triplets they satisfy. Its ``prior`` is its
weighted paths beyond those of the best hit not shown: pruning weighs it as a feature
and the offline reader counts it as that many facts (``qa_focus_weight``), so the
reader can pick the best-supported answer, while hits tied with many others (every
actor at the end of a 3-hop path) add nothing.

The triplets are read offline (:class:`~kqe_rdf.methods.reading.OfflineTriplets`) even when an
LLM is configured: the LLM already reads the intent, and one more call per question
would double its cost. If 4StepFocus fails on a question, the pool simply has no
structural pieces and a note says why; the other evidence stands.
"""

from __future__ import annotations

from collections.abc import Sequence

from ...core.errors import KqeError
from ..fourstep.pipeline import FourStep
from ..reading import OfflineTriplets
from ...kb.linking import Linker
from ..retrieval import Batch, Query
from .evidence import EntityRef, Evidence

#: Satisfied paths spelled out per hit (``Batch.explain`` keeps at most 5 bindings per hit anyway).
MAX_PATHS = 5


class FocusCandidates:
    """The top 4StepFocus hits for a question, as evidence pieces that say which paths each one satisfies."""

    source = "kg"

    def __init__(self, kb, linker: Linker, triplets: OfflineTriplets, hits: int = 10) -> None:
        self.kb = kb
        self.linker = linker
        self.triplets = triplets
        self.hits = hits
        self._stages: dict[tuple[str, ...], FourStep] = {}

    def stage(self, types: Sequence[str]) -> FourStep:
        """One FourStep per answer-type set (no top-up from plain retrieval: only structural hits count)."""
        key = tuple(sorted(types))
        if key not in self._stages:
            self._stages[key] = FourStep(self.kb, self.triplets, k=self.hits + 1, types=list(key) or None,
                                         linker=self.linker)
        return self._stages[key]

    def collect(self, question: str, answer_types: Sequence[str], seeds: Sequence[str] = (),
                notes: list[str] | None = None) -> list[Evidence]:
        """The top hits as pieces; a piece names its hit and those of its bound constants that are ``seeds``
        (the question's entities as the intent linked them): other constants 4StepFocus linked stay in the
        text and ``origin`` only, so a phenotype of the question can never be read as its answer."""
        if self.hits <= 0:
            return []
        stage = self.stage(answer_types)
        try:
            batch = stage.transform(Batch([Query("q", question)]))
        except KqeError as exc:  # a failing structural stage must not cost the question its other evidence
            if notes is not None:
                notes.append(f"4StepFocus failed ({exc}); no structural candidates")
            return []
        explain = batch.explain.get("q", {})
        if explain.get("error") and notes is not None:
            notes.append(f"4StepFocus: {explain['error']}")
        # A path only one node satisfies adds log(1 + nodes) to a hit's score: the score in those units is the
        # number of satisfied paths weighted by how specific each is (negated paths count against it). A piece's
        # prior is its margin over the best hit not shown: hits tied with many others (every actor of a
        # 3-hop path) say nothing about which of them is the answer, so they add nothing to it.
        unit = stage.path_weight(1)
        hits = batch.ranked("q")
        shown, rest = hits[: self.hits], hits[self.hits :]
        floor = rest[0].score if rest else 0.0
        return [self.evidence(h.iri, h.rank, max(h.score - floor, 0.0) / unit, explain, set(seeds)) for h in shown]

    def evidence(self, iri: str, rank: int, weighted: float, explain: dict, seeds: set[str] = frozenset()) -> Evidence:
        """One hit (``rank`` from 1) as a piece; ``weighted``: its specificity-weighted count of satisfied paths
        beyond the best hit not shown (its prior).
        Satisfied *negated* paths ("… was not observed") count against the hit: they stay in ``origin``
        but are not written as support."""
        name = self._name(iri)
        frame = explain.get("triplets") or {}
        bindings = (explain.get("support") or {}).get(iri, [])[:MAX_PATHS]
        paths, constants = [], {}
        for binding in bindings:
            path, bound, negated = self.verbalise(binding, frame, explain.get("linked") or {}, name)
            if path and not negated and path not in paths:
                paths.append(path)
                constants.update(bound)
        text = "; ".join(paths) or f"{name} (4StepFocus candidate)"
        entities = (EntityRef(name, (iri,)), *(EntityRef(n, (i,)) for i, n in constants.items() if i in seeds))
        origin = {"method": "4StepFocus (offline triplets)", "node": iri, "rank": rank,
                  "weighted_paths_margin": round(weighted, 4), "bindings": bindings, "triplets": frame.get("triplets", [])}
        return Evidence(f"focus-{rank - 1}", self.source, text, entities, origin, hop=1, prior=weighted)

    def verbalise(self, binding: dict, frame: dict, linked: dict, answer_name: str) -> tuple[str, dict[str, str], bool]:
        """One satisfied path as a sentence (its triplets with the hit and the bound constants' names filled
        in), the constants it binds (IRI → name), and whether the path is a negated one."""
        answer = frame.get("answer", "?x")
        triplets = frame.get("triplets", [])
        if "ancestor" in binding:  # a hierarchy match (kqe_rdf.kb.hierarchy): the annotations that carry it
            return self._hierarchy_sentence(binding, triplets, answer_name)
        bound = {v: iri for v, iri in binding.items() if v not in ("unit", answer.lstrip("?"))}
        constant_text = {}
        for iri in bound.values():
            for text, candidates in linked.items():
                if any(c.get("iri") == iri for c in candidates):
                    constant_text.setdefault(text, iri)
        start = next((t for t in triplets if t["head"] in constant_text or t["tail"] in constant_text), None)
        if start is None:
            return "", {}, False
        names = {iri: self._name(iri) for iri in bound.values()}

        def end(text: str) -> str:
            if text == answer:
                return answer_name
            if text in constant_text:
                return names[constant_text[text]]
            return "something" if text.startswith("?") else text

        path = _path(triplets, start, answer)
        sentence = ", ".join(f"{end(t['head'])} {self.kb.schema.label(t['relation'])} {end(t['tail'])}"
                             for t in path)
        return sentence, {iri: names[iri] for iri in bound.values()}, any(t.get("negated") for t in path)

    def _hierarchy_sentence(self, match: dict, triplets: list[dict], answer_name: str) -> tuple[str, dict, bool]:
        """"D has phenotype Focal seizure (for Seizure)" when an annotation is the term or below it; "D has
        phenotype Absence seizure (shares Seizure with Focal seizure)" when they only share an ancestor."""
        if not match.get("ancestor") or not match.get("annotations") or not triplets:
            return "", {}, False
        label = self.kb.schema.label(triplets[0]["relation"])
        had = ", ".join(self._name(a) for a in match["annotations"])
        term, ancestor = self._name(match["term"]), self._name(match["ancestor"])
        why = f"for {term}" if match["ancestor"] == match["term"] else f"shares {ancestor} with {term}"
        return f"{answer_name} {label} {had} ({why})", {match["term"]: term}, False

    def _name(self, iri: str) -> str:
        try:
            return self.kb.document(iri).name
        except KqeError:
            return iri.rsplit("/", 1)[-1]


def _path(triplets: list[dict], start: dict, answer: str) -> list[dict]:
    """The triplets from ``start`` to one naming ``answer``, joined through shared variables (breadth first)."""

    def variables(t: dict) -> set[str]:
        return {e for e in (t["head"], t["tail"]) if e.startswith("?")}

    frontier = [[start]]
    seen = {id(start)}
    while frontier:
        path = frontier.pop(0)
        if answer in variables(path[-1]):
            return path
        for t in triplets:
            if id(t) not in seen and variables(t) & variables(path[-1]):
                seen.add(id(t))
                frontier.append(path + [t])
    return [start]
