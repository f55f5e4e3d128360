"""Answers from the structural reader's grounded reading: 4StepFocus's ranked answers, cited with their KG path.

The offline reader (:mod:`kqe_rdf.methods.reading`) reads a question as relation paths that really
leave the nodes it names ("who directed the films starring John Krasinski": *starred in / directed by*), and
4StepFocus compiles them to SPARQL and ranks the nodes at their ends. When the reader has such a *grounded
reading* and it finds answers, they are the answers ``ask`` gives — its first answer is ``4step-offline``'s
first result — and the first is cited with the facts along its path, read from the store
(``queries/qa_path_nodes.rq``): "Away We Go starred actors John Krasinski", "Away We Go directed by Sam
Mendes"; for a list of hierarchy terms (a phenopacket's phenotypes), with the node's annotations that match
each term. :attr:`Grounded.path` keeps the reading (its relations, the words each was read from), the
triplets, the SPARQL and the facts.

Why first: on the same evidence the evidence reader picked the answer far less often than 4StepFocus ranked
it first (issue 25: MetaQA 2-hop 56 against 97 on held-out samples), so the pool, pruning and reader of
:mod:`kqe_rdf.methods.answering` answer only questions the reader has no grounded reading for.

The reading is offline even when an LLM is configured (as for the structural candidates of :mod:`.focus`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from string import Template

from pyoxigraph import NamedNode, Variable

from ...core.errors import KqeError
from ...kb import queries
from ...kb.linking import Linker
from ..fourstep.compiler import relation_path, sparql_variable, stored_direction
from ..fourstep.pipeline import Attempt, FourStep
from ..reading import OfflineTriplets
from ..reading.triplets import Triplet
from .answer import CandidateAnswer, Reading
from .evidence import EntityRef, Evidence

#: Paths (or matched terms) of the first answer that are spelt out as facts.
MAX_PATHS = 5
METHOD = "4step-offline (grounded reading)"


@dataclass
class Grounded:
    """What a grounded reading answers: the answers (as the evidence reader's :class:`.answer.Reading` would
    give them), the facts the first one is cited with, and the path (reading, triplets, SPARQL, facts)."""

    reading: Reading
    evidence: list[Evidence]
    path: dict
    #: The reading's hops that no word of the question names ("not named" in the reader's account).
    unnamed: list[str] = field(default_factory=list)
    #: Words of the question that name a relation exactly and that no path of the reading reads ("released"
    #: when no path from the film reaches a year): the graph may lack the edge the question asks about.
    unread: list[str] = field(default_factory=list)
    #: The most relations words of the question name along one path of the reading.
    named: int = 0
    #: The facts along the paths of each of the first ``cite`` answers (the first's are ``evidence``), by node.
    cited: dict[str, list[Evidence]] = field(default_factory=dict)

    @property
    def weak(self) -> bool:
        """Whether the reading reads around the question (a relation word unread, or a hop no word names), names
        one relation at most and reads three constants at most (not a list, such as a case's phenotypes): a
        one-hop question whose edge the graph may lack."""
        return bool(self.unread or self.unnamed) and self.named <= 1 and len(self.path.get("reading", ())) <= 3


class GroundedReading:
    """4StepFocus with the offline reader, configured as ``4step-offline`` (no top-up: structural answers only)."""

    def __init__(self, kb, linker: Linker, triplets: OfflineTriplets, depth: int = 10,
                 max_answers: int = 1000) -> None:
        self.kb = kb
        self.depth = depth
        # Ranked deep enough to hold every answer of a list question (the nodes the paths reach equally well).
        self.stage = FourStep(kb, triplets, mode=kb.settings.fourstep.mode, k=max(depth, max_answers),
                              linker=linker)
        self._query = queries.strip_comments(queries.load("qa_path_nodes"))

    def __call__(self, question: str, cite: int = 1) -> Grounded | None:
        """The reading's answers for ``question``, the first ``cite`` of them cited with their facts, or None
        when the reader has no grounded reading or it finds nothing (the caller then answers from evidence)."""
        try:
            hits, explain, used = self.stage.answers("q", question)
        except KqeError:  # the evidence pipeline answers instead, and its structural stage says why
            return None
        if hits and "value" in explain:
            return self._valued(hits, explain, used)
        if not hits or used.compiled is None or used.error or not used.reading.triplets:
            return None
        cited = {h.iri: self.cite(h.iri, used) for h in hits[: max(cite, 1)]}
        evidence, facts = cited[hits[0].iri]
        answered = len(answer_set(hits, used.scores))
        hits = hits[: max(self.depth, answered)]
        names = [self.display_name(h.iri) for h in hits]
        wanted = self.kb.schema.subclasses(used.reading.answer_type) if used.reading.answer_type else set()
        index = self.stage.linker.index
        candidates = [CandidateAnswer(name, (h.iri,), h.score, [e.id for e in evidence] if not rank else [],
                                      bool(index.types.get(h.iri, frozenset()) & wanted) if wanted else None)
                      for rank, (h, name) in enumerate(zip(hits, names))]
        parts = used.reading.reading
        # The last hop of a path to the class the question asks for is named by the class word ("what genre is
        # X": has genre), which the reader counts for the answer, not for the hop.
        asked = used.reading.answer_type in self.stage.generator.answer_types(question)
        unnamed = [hop["relation"] for part in parts for i, hop in enumerate(part.get("hops", ()))
                   if hop.get("how") == "not named" and not (asked and i == len(part["hops"]) - 1)]
        named = self._named_relations(parts, used.reading.triplets)
        unread = [w for w in parts[0].get("unread", ()) if all(w in part.get("unread", ()) for part in parts)] \
            if parts else []
        # Paths no word names that the encoder or the graph chose (a guess), and what the reading left out of the
        # request: a triplet or type the ontology lacks, a role's quality ("mom": female) no node on its hop has.
        guessed = [part["path"] for part in parts if part.get("read from") in ("encoder", "graph")]
        dropped = [note for note in used.reading.notes
                   if note.endswith("dropped") or "which no node on this hop is in the KB" in note]
        path = {"triplets": explain["triplets"]["triplets"], "reading": used.reading.reading,
                "relations": [self.kb.schema.label(t.relation) for t in used.reading.triplets],
                "facts": facts, "linked": used.shown, "sparql": used.compiled.sparql,
                # What the confidence is lowered for: relation words no path reads, hops no word names, paths
                # guessed, conditions dropped.
                "unread": unread, "unnamed": unnamed, "guessed": guessed, "dropped": dropped}
        if explain.get("tried"):
            path["tried"] = explain["tried"]
        reading = Reading(candidates[0], candidates, METHOD, answers=candidates[:answered])
        return Grounded(reading, evidence, path, unnamed, unread, named,
                        {iri: pieces for iri, (pieces, _facts) in cited.items()})

    def _valued(self, hits: list, explain: dict, used: Attempt) -> Grounded:
        """A question that asks for a value ("when was X born"): the values are the answers, each cited with the
        fact that holds it ("Nora Vale birth date 1980-04-02")."""
        shown = explain["value"]
        relation, values = shown["relation"], shown["values"]
        answered = [h for h in hits if round(h.score, 9) == round(hits[0].score, 9)]
        evidence = []
        if "counted" in shown:  # "how many …": one piece naming what was counted
            nodes = shown["counted"]
            names = [self.display_name(n) for n in nodes]
            evidence.append(Evidence("path-0", "kg", f"{len(nodes)} answers: " + ", ".join(names[:20]),
                                     tuple(EntityRef(name, (n,)) for name, n in zip(names[:20], nodes)),
                                     {"counted": nodes, "method": METHOD}, 1))
        # Each stored value is cited by the fact that holds it (a count has no such fact).
        for n, h in enumerate([] if "counted" in shown else answered[:MAX_PATHS]):
            node = values[h.iri]["of"]
            name = self.name(node)
            evidence.append(Evidence(f"path-{n}", "kg", f"{name} {shown['phrase']} {h.name}",
                                     (EntityRef(name, (node,)),), {"head": node, "relation": relation, "tail": h.iri, "method": METHOD}, 1))
        candidates = [CandidateAnswer(h.name, (), h.score, [e.id for e in evidence] if not rank else [], None,
                                      {"lexical": h.name, "datatype": values[h.iri]["datatype"], "term": h.iri,
                                       "of": values[h.iri]["of"]})
                      for rank, h in enumerate(hits)]
        reading = used.reading
        path = {"triplets": explain["triplets"]["triplets"], "reading": reading.reading,
                "relations": [self.kb.schema.label(t.relation) for t in reading.triplets] + [shown["phrase"]],
                "facts": [[e.origin["head"], relation, e.origin["tail"]] for e in evidence if "head" in e.origin],
                "linked": used.shown,
                "sparql": used.compiled.sparql if used.compiled is not None else None, "value": shown,
                "unread": list(reading.unread), "unnamed": []}
        answer = Reading(candidates[0], candidates, METHOD, answers=candidates[: len(answered)])
        return Grounded(answer, evidence, path, [], [], len(path["relations"]))

    def _named_relations(self, parts: list[dict], triplets: list[Triplet]) -> int:
        """The most relations (a relation and its inverse are one) that words of the question name along one
        constant's path: "Tape: written by / directed / directed by" around a missing edge names one, "directed",
        twice; "the film X starred which actors" read as "has tags / tag of / starred actors" names one.

        The reader writes each constant's triplets in the order of its account (``TripletQuery.reading``)."""
        relations = self.kb.schema.relations
        out, at = 0, 0
        for part in parts:
            hops = part.get("hops", ())
            steps = triplets[at : at + len(hops)]
            at += len(hops)
            named = {frozenset({t.relation, relations[t.relation].inverse or t.relation})
                     if t.relation in relations else frozenset({t.relation})
                     for hop, t in zip(hops, steps) if hop.get("how") != "not named"}
            out = max(out, len(named))
        return out

    def cite(self, answer: str, used: Attempt) -> tuple[list[Evidence], list[list[str]]]:
        """The facts along the first answer's paths (at most :data:`MAX_PATHS`), as evidence and as
        [head, relation, tail] IRIs."""
        pieces: list[Evidence] = []
        for binding in used.support.get(answer, [])[:MAX_PATHS]:
            if "ancestor" in binding:
                pieces += self._annotations(answer, binding, used, len(pieces))
            else:
                pieces += self._path(answer, binding, used, len(pieces))
        unique = list({p.text: p for p in pieces}.values())
        return unique, [[p.origin["head"], p.origin["relation"], p.origin["tail"]] for p in unique]

    def _path(self, answer: str, binding: dict, used: Attempt, number: int) -> list[Evidence]:
        """The facts of the path(s) a SPARQL binding satisfied, inner nodes read from the store."""
        compiled, reading = used.compiled, used.reading
        chosen = [compiled.units[int(binding["unit"])]] if "unit" in binding else compiled.units
        bound = {v for k, v in binding.items() if k != "unit"}
        out: list[Evidence] = []
        for unit in chosen:
            linked = {c["iri"] for c in used.shown.get(unit.constant, ())}
            constant = next(iter(sorted(bound & linked)), None)
            if unit.negated or constant is None:
                continue  # a negated path ("X was not observed") is no support
            nodes = self._inner(unit.triplets, unit.constant, reading.answer, constant, answer)
            if nodes is None:
                continue
            for hop, t in enumerate(unit.triplets, 1):
                out.append(self._fact(t, nodes, hop, number + len(out)))
        return out

    def _inner(self, triplets: list[Triplet], constant_text: str, answer_var: str, constant: str,
               answer: str) -> dict[str, str] | None:
        """Every end of the path as an IRI (the constant's text and the variables as keys), or None when the
        path has another constant or no instance (it had one when 4StepFocus ran; the store may have changed)."""
        nodes = {constant_text: constant, answer_var: answer}
        inner = sorted({v for t in triplets for v in t.variables()} - {answer_var})
        if any(not e.is_variable and e.text != constant_text for t in triplets for e in (t.head, t.tail)):
            return None
        if not inner:
            return nodes

        def term(end) -> str:
            return "?c" if not end.is_variable else ("?x" if end.text == answer_var else sparql_variable(end.text))

        walk = "\n".join(f"  {term(t.head)} "
                         f"{relation_path(self.kb.schema, t.relation, t.head.type, t.tail.type, not t.tail.is_variable, not t.head.is_variable)} "
                         f"{term(t.tail)} ." for t in triplets)
        text = Template(self._query).substitute(inner=" ".join(sparql_variable(v) for v in inner), walk=walk)
        rows = self.kb.store.query(text, use_default_graph_as_union=True,
                                   substitutions={Variable("c"): NamedNode(constant), Variable("x"): NamedNode(answer)})
        row = next(iter(rows), None)
        if row is None:
            return None
        nodes.update({v: row[sparql_variable(v)[1:]].value for v in inner})
        return nodes

    def _fact(self, t: Triplet, nodes: dict[str, str], hop: int, number: int) -> Evidence:
        """One triplet with its ends filled in, as the KG stores the edge."""
        relation, backwards = stored_direction(self.kb.schema, t.relation)
        head, tail = nodes[t.head.text], nodes[t.tail.text]
        if backwards:
            head, tail = tail, head
        h, tl = self.name(head), self.name(tail)
        return Evidence(f"path-{number}", "kg", f"{h} {self.kb.schema.label(relation)} {tl}",
                        (EntityRef(h, (head,)), EntityRef(tl, (tail,))),
                        {"head": head, "relation": relation, "tail": tail, "method": METHOD}, hop)

    def _annotations(self, answer: str, match: dict, used: Attempt, number: int) -> list[Evidence]:
        """A hierarchy match (:func:`kqe_rdf.kb.hierarchy.hierarchical_scores`): the answer's annotations at or
        below the most informative ancestor it shares with a term of the question, one fact each."""
        if not match.get("ancestor") or not used.reading.triplets:
            return []
        relation, _backwards = stored_direction(self.kb.schema, used.reading.triplets[0].relation)
        term, ancestor = self.name(match["term"]), self.name(match["ancestor"])
        why = f"for {term}" if match["ancestor"] == match["term"] else f"shares {ancestor} with {term}"
        name, label = self.name(answer), self.kb.schema.label(relation)
        return [Evidence(f"path-{number + i}", "kg", f"{name} {label} {self.name(a)} ({why})",
                         (EntityRef(name, (answer,)), EntityRef(self.name(a), (a,))),
                         {"head": answer, "relation": relation, "tail": a, "term": match["term"],
                          "ancestor": match["ancestor"], "ic": match.get("ic"), "method": METHOD}, 1)
                for i, a in enumerate(match["annotations"])]

    def name(self, iri: str) -> str:
        try:
            return self.kb.document(iri).name
        except KqeError:
            return iri.rsplit("/", 1)[-1]

    def display_name(self, iri: str) -> str:
        """A node's name as cheaply as it is at hand (a list question's hundreds of answers are not worth reading
        every document for, which :meth:`name` does past a hundred look-ups)."""
        try:
            return self.kb.name(iri)
        except KqeError:
            return iri.rsplit("/", 1)[-1]


def answer_set(hits: list, scores: dict[str, float]) -> list:
    """The answers of a reading: the first hits whose structural score is the best one (every node the paths
    reach equally well: all the films an actor starred in, all the diseases a term list fits equally), not the
    ones below, which satisfy fewer or less specific paths.

    >>> from kqe_rdf.methods.retrieval import Hit
    >>> hits = [Hit("q", "a", 2.001, 1), Hit("q", "b", 2.0, 2), Hit("q", "c", 1.0, 3)]
    >>> [h.iri for h in answer_set(hits, {"a": 2.0, "b": 2.0, "c": 1.0})]
    ['a', 'b']
    """
    if not hits:
        return []
    best = round(scores[hits[0].iri], 9)
    out = []
    for hit in hits:
        if round(scores[hit.iri], 9) != best:
            break
        out.append(hit)
    return out
