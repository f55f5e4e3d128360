"""4StepFocus (Boer et al.) on the RDF store: triplets → SPARQL candidates → ranking.

1. *Triplet generation*: an LLM (``kqe_rdf.llm``) or, offline, :class:`~.reading.OfflineTriplets`
   (the :mod:`.reading` package) reads the query as triplets over the ontology's relations.
2. *Constant linking*: :class:`~kqe_rdf.linking.Linker` maps each constant to nodes.
3. *Candidate substitution*: :mod:`kqe_rdf.compiler` turns the triplets into one
   SPARQL SELECT; soft mode scores candidates by the (specificity-weighted) paths
   they satisfy.
4. *Ranking*: candidates are ordered by that structural score, then by dense
   similarity to the query, and topped up with plain retrieval results, always
   below the structurally supported ones. An optional reranker reorders the top.

Every answer keeps its provenance (triplets, linked constants, SPARQL, the
paths and bindings that made it a candidate): see :attr:`Batch.explain`.
"""

from __future__ import annotations

import functools
import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field

from .compiler import Compiled, compile_query, run
from .llm_reading import check, contest, merged_scores, raw_problems, why_ask
from ...core.errors import KqeError
from ...kb.hierarchy import hierarchical_scores, hierarchical_units
from ...kb.linking import Linker
from ...kb.ontology import local_name
from ...core.progress import StepClock
from ..reading import OfflineTriplets
from ..reading.chains import valued
from ..reading.conditions import ValueConditions
from ..retrieval import Batch, Hit, Stage
from ..reading.triplets import End, TripletQuery, abstain_from_negations, normalise


def _constants(compiled: Compiled | None, returning: bool = True) -> set[str]:
    """The IRIs the request's constants were linked to: never top-up results, and never answers unless their path
    comes back to them (:attr:`Compiled.returning`; ``returning=False`` leaves those out)."""
    return {i for var, iris in (compiled.constants.items() if compiled else ())
            if returning or var not in compiled.returning for i in iris}


@dataclass
class Attempt:
    """One reading run through linking, compilation and candidate scoring."""

    reading: TripletQuery
    shown: dict = field(default_factory=dict)
    compiled: Compiled | None = None
    scores: dict[str, float] = field(default_factory=dict)
    support: dict[str, list] = field(default_factory=dict)
    #: The request's own constants, taken out of the candidates.
    excluded: list[str] = field(default_factory=list)
    error: str | None = None
    #: What the candidate scoring adds to the explanation (the matcher, how many nodes matched, provenance SPARQL).
    notes: dict = field(default_factory=dict)


class LLMTriplets:
    """Triplets from an LLM given the ontology's document structure, as one candidate reading beside the offline
    reader's (:mod:`.llm_reading`): asked only where the grounded reading may need help (``ask="unsure"``), checked
    before it competes, and the offline reading when the LLM fails or its reading is rejected."""

    def __init__(self, kb, llm, offline: OfflineTriplets | None = None, ask: str = "unsure") -> None:
        self.kb = kb
        self.llm = llm
        self.offline = offline or OfflineTriplets(kb)
        self.name = f"llm:{llm.model}"
        if ask not in ("unsure", "always"):
            raise KqeError("fourstep_llm_reading must be unsure or always")
        self.ask = ask

    def __call__(self, query: str) -> TripletQuery:
        """The reading ``kqe-rdf triplets`` shows: the offline one when confident, else the checked LLM one (with
        the offline one as its alternative)."""
        offline = normalise(self.offline(query), self.kb.schema)
        why = why_ask(offline, True) if self.ask == "unsure" else "asked for every request"
        if why is None:
            return offline
        tq, record = self.read(query, offline)
        if tq is None:
            offline.notes.insert(0, record["why"] + "; the offline reading is used")
            offline.source = "offline (after LLM failure)"
            return offline
        tq.alternatives = [a for a in (offline, *offline.alternatives) if a.triplets]
        return tq

    def read(self, query: str, offline: TripletQuery) -> tuple[TripletQuery | None, dict]:
        """The LLM's checked reading (None when it failed or was rejected) and its record for the accounting:
        outcome ("failed", "rejected" or "checked"), why, repairs, whether the model was re-asked."""
        from ...llm.client import LLMError
        from ...llm.prompts import triplet_messages
        from ..reading.triplets import TRIPLETS_SCHEMA, from_json

        record: dict = {"asked": True, "outcome": "failed", "why": "", "repairs": [], "reasked": False}
        messages = triplet_messages(self.kb.schema.describe_for_prompt(), query)
        try:
            with self.llm.budget():
                result = self.llm.json(messages, TRIPLETS_SCHEMA, name="triplets")
        except LLMError as exc:
            record["why"] = f"LLM failed ({exc})"
            return None, record
        record["reasked"] = result.attempts > 1
        record["repairs"] = list(result.repairs)
        if not result.ok:
            record["why"] = f"LLM answer unusable ({result.error})"
            return None, record
        record["outcome"] = "rejected"
        guessed: list[str] = []
        problems = raw_problems(result.value, guessed)
        record["repairs"] += guessed
        if problems:
            record["why"] = "LLM reading rejected: " + "; ".join(problems)
            return None, record
        usable = normalise(from_json(result.value, query, self.name), self.kb.schema)
        usable.guessed_answers += [g.split("'")[1] for g in guessed]  # checked against the prompt's examples
        if not usable.triplets:
            record["why"] = ("LLM gave no triplet the ontology can express ("
                             + ("; ".join(usable.notes) or "it gave no triplets") + ")")
            return None, record
        checked = check(self.kb, self.offline.linker, self.offline, usable, offline, messages[0]["content"])
        record["repairs"] += checked.repairs
        if checked.reading is None:
            record["why"] = "LLM reading rejected: " + "; ".join(checked.reasons)
            return None, record
        record["outcome"], record["why"] = "checked", "the LLM's reading passed the checks"
        return checked.reading, record


class LLMReranker:
    """An LLM orders the top ``depth`` results by their documents; any failure keeps the order."""

    def __init__(self, kb, llm, depth: int = 10) -> None:
        self.kb, self.llm, self.depth = kb, llm, depth

    def rerank(self, query: str, hits: list[Hit]) -> tuple[list[Hit], str]:
        from ...llm.client import LLMError
        from ...llm.prompts import rerank_messages

        top, rest = hits[: self.depth], hits[self.depth :]
        schema = {"type": "object", "required": ["ranking"],
                  "properties": {"ranking": {"type": "array", "items": {"type": "integer"}}}}
        try:
            with self.llm.budget():
                result = self.llm.json(rerank_messages(query, [self.kb.document(h.iri).text for h in top]), schema,
                                       name="ranking")
        except LLMError as exc:
            return hits, f"reranker failed ({exc}); order kept"
        if not result.ok:
            return hits, f"reranker answer unusable ({result.error}); order kept"
        order = []
        for number in result.value["ranking"]:
            if isinstance(number, float) and number.is_integer():
                number = int(number)
            if isinstance(number, int) and 1 <= number <= len(top) and number - 1 not in order:
                order.append(number - 1)
        if not order:
            return hits, "reranker named no shown candidate; order kept"
        order += [i for i in range(len(top)) if i not in order]
        reranked = [top[i] for i in order] + rest
        qid = hits[0].qid
        top_score = max(h.score for h in hits)
        out = [Hit(qid, h.iri, top_score + (len(reranked) - r + 1) if r <= len(top) else h.score, r)
               for r, h in enumerate(reranked, start=1)]
        return out, f"reranked the top {len(top)} by {self.llm.model}"


class FourStep(Stage):
    """4StepFocus as a retrieval stage (``--method 4step``)."""

    def __init__(self, kb, generator=None, mode: str = "soft", k: int = 100, types: Sequence[str] | None = None,
                 fallback: Stage | None = None, reranker=None, linker: Linker | None = None,
                 sparql_limit: int = 20000, timeout: float = 10.0, negation_weight: float = 0.1,
                 matcher: str | None = None) -> None:
        if mode not in ("soft", "strict"):
            raise KqeError("4StepFocus mode must be soft or strict")
        #: Soft mode for terms of one hierarchy: "hierarchy" (IC-weighted partial credit) or "exact" paths only.
        self.matcher = matcher or kb.settings.fourstep.matcher
        if self.matcher not in ("hierarchy", "exact"):
            raise KqeError("4StepFocus matcher must be hierarchy or exact")
        self.kb = kb
        self.linker = linker or Linker(kb)
        self.mode = mode
        self.k = k
        self.types = sorted(kb.resolve_types(types)) if types else None
        self.generator = generator or OfflineTriplets(kb, self.linker, answer_types=self.types)
        self.fallback = fallback
        self.reranker = reranker
        self.sparql_limit = sparql_limit
        self.timeout = timeout
        #: How much a satisfied negated path ("X was not observed") costs, relative to a positive one.
        #: Small: a disease's annotations list what *can* occur, so a patient's absent sign is weak evidence.
        self.negation_weight = negation_weight
        self.llm = getattr(generator, "llm", None)

    def __repr__(self) -> str:
        return f"FourStep({getattr(self.generator, 'name', 'llm')}, {self.mode})"

    @functools.cached_property
    def conditions(self) -> ValueConditions | None:
        """The request's conditions on values, read with the offline reader's value relations."""
        chains = getattr(getattr(self.generator, "offline", self.generator), "chains", None)
        return ValueConditions(self.kb, chains.values) if chains is not None else None

    def link(self, tq: TripletQuery) -> tuple[dict[tuple[str, str | None], list[str]], dict[str, list[dict]]]:
        linked, shown = {}, {}
        for const in tq.constants():
            cls = const.type or self.expected_type(tq, const)
            types = self.kb.schema.subclasses(cls) if cls else None
            cands = self.linker.link(const.text, types)
            linked[(const.text, const.type)] = [c.iri for c in cands]
            shown[const.text] = [{"iri": c.iri, "name": c.name, "score": round(c.score, 3), "how": c.how} for c in cands]
        return linked, shown

    @property
    def fusion_depth(self) -> int:
        """How deep hierarchy matching scores its best nodes and fuses BM25's."""
        return max(5 * self.k, 500)

    def expected_type(self, tq: TripletQuery, const: End) -> str | None:
        """The class the ontology expects at a constant's end of its triplet (range for a tail,
        domain for a head; swapped for an inverse relation), so "ectopia lentis" as the tail of
        hasPhenotype links to the phenotype, not to the disease of the same name."""
        schema = self.kb.schema
        for t in tq.triplets:
            rel = schema.relations.get(t.relation)
            if rel is None:
                continue
            if t.tail == const:
                return rel.range
            if t.head == const:
                return rel.domain
        return None

    def path_weight(self, candidates: int) -> float:
        """What satisfying a path adds to a node's score when ``candidates`` nodes satisfy it: rarer paths
        say more (an IDF over the KB's nodes)."""
        total = max(self.kb.manifest.get("counts", {}).get("nodes", 1), 1)
        return math.log(1 + total / max(candidates, 1))

    def candidates(self, tq: TripletQuery, compiled: Compiled) -> tuple[dict[str, float], dict[str, list], dict]:
        """Scored candidates, their support (bindings or hierarchy matches) and what the explanation adds."""
        if self.matcher == "hierarchy":
            # Terms of one hierarchy (a phenotype list): IC-weighted partial credit from the closures and arrays
            # stored with the KB, already fused with the request's text.
            found = hierarchical_scores(self.kb, compiled, tq.query, self.types or self._answer_types(tq),
                                        self.kb.settings.fourstep.negated, self.kb.settings.fourstep.negated_weight,
                                        top=self.fusion_depth)
            if found is not None:
                notes = {"matcher": "hierarchy", "candidates": found.matched,
                         "provenance_sparql": found.provenance_sparql}
                if found.negated:
                    notes["negated"] = found.negated  # how "X was not observed" counted (fourstep_negated)
                return found.scores, found.support, notes
        rows = run(self.kb.store, compiled, self.timeout)
        answer = compiled.answer.lstrip("?")
        if compiled.mode == "strict":
            support = {r[answer]: [r] for r in rows if answer in r}
            return {iri: 1.0 for iri in support}, support, {}
        by_unit: dict[int, set[str]] = defaultdict(set)
        bindings: dict[str, list] = defaultdict(list)
        for r in rows:
            if answer in r:
                by_unit[int(r["unit"])].add(r[answer])
                bindings[r[answer]].append(r)
        scores: dict[str, float] = defaultdict(float)
        for unit, iris in by_unit.items():
            weight = self.path_weight(len(iris))
            found = compiled.units[unit]
            sign = -self.negation_weight if found.negated else (
                self.kb.settings.fourstep.uncertain_weight if found.uncertain else 1.0)
            for iri in iris:
                scores[iri] += sign * weight
        return dict(scores), dict(bindings), {}

    def _answer_types(self, tq: TripletQuery) -> list[str] | None:
        return sorted(self.kb.schema.subclasses(tq.answer_type)) if tq.answer_type else None

    def similarity(self, text: str, iris: list[str]) -> dict[str, float]:
        if not iris:
            return {}
        if self.kb.has_embeddings:
            found, matrix = self.kb.dense.vectors_of(iris)
            if found:
                sims = matrix @ self.kb.embed_query(text)
                return {i: float(s) for i, s in zip(found, sims)}
        # The candidates' scores among BM25's top 2000 and the top score, without naming all 2000 hits (most of
        # a MetaQA request's tie-break).
        bm25, top = self.kb.text_index.scores_among(text, iris, 2000, self.types)
        return {i: bm25.get(i, 0.0) / (top or 1.0) for i in iris}

    def plan(self, text: str, clock: StepClock | None = None) -> tuple[TripletQuery, dict, Compiled | None]:
        """The reading of ``text``, its linked constants (as shown) and the compiled SPARQL (None without
        triplets): steps 1-3, which ``kqe-rdf triplets`` and ``/triplets`` show without running the query."""
        clock = clock or StepClock()
        tq = normalise(self.generator(text), self.kb.schema)
        clock.lap("triplets")
        if not tq.triplets:
            return tq, {}, None
        tq, shown, compiled = self._compiled(tq)
        clock.lap("linking")
        return tq, shown, compiled

    def _compiled(self, tq: TripletQuery) -> tuple[TripletQuery, dict, Compiled | None]:
        """A reading linked and compiled: without the negations that could invert it
        (:func:`~..reading.triplets.abstain_from_negations`; hierarchy matching reads them as context only, so only
        a contradiction is left out there), and, when only negated conditions are left, as the asked class's nodes
        that do not meet them ("which albums were not produced by X": FILTER NOT EXISTS), not the nodes that do,
        ranked lower. None compiled when no triplet is left."""
        linked, shown = self.link(tq)
        compiled = compile_query(self.kb.schema, tq, linked, self.mode, self.sparql_limit)
        context = self.matcher == "hierarchy" and hierarchical_units(self.kb, compiled) is not None
        if (guarded := abstain_from_negations(tq, as_context=context)) is not tq:
            tq = guarded
            if not tq.triplets:
                return tq, shown, None
            compiled = compile_query(self.kb.schema, tq, linked, self.mode, self.sparql_limit)
        if compiled.units and all(u.negated for u in compiled.units) and tq.answer_type:
            compiled = compile_query(self.kb.schema, tq, linked, "strict", self.sparql_limit)
        return tq, shown, compiled

    def reading(self, text: str) -> dict:
        """``plan`` as JSON: triplets, linked constants, SPARQL."""
        tq, shown, compiled = self.plan(text)
        return {"triplets": tq.to_json(), "linked": shown, "sparql": compiled.sparql if compiled else None}

    def _attempt(self, tq: TripletQuery, clock: StepClock) -> Attempt:
        """One reading linked, compiled and run."""
        if not tq.triplets:
            return Attempt(tq)
        tq, shown, compiled = self._compiled(tq)
        clock.lap("linking")
        if compiled is None:
            return Attempt(tq)
        attempt = Attempt(tq, shown, compiled)
        try:
            scores, attempt.support, attempt.notes = self.candidates(tq, compiled)
            attempt.scores, attempt.excluded = self._admissible(scores, compiled)
        except KqeError as exc:
            attempt.error = str(exc)
        clock.lap("sparql")
        return attempt

    def _admissible(self, scores: dict[str, float], compiled: Compiled | None) -> tuple[dict[str, float], list[str]]:
        """Candidates without the request's own constants (the answer to "who co-directed with X" is never X)
        and, with a type restriction, of an allowed type; and the constants taken out."""
        own = _constants(compiled, returning=False)
        excluded = sorted(i for i in scores if i in own)
        scores = {i: s for i, s in scores.items() if i not in own}
        if self.types and scores:
            allowed = set(self.types)
            index = self.linker.index
            scores = {i: s for i, s in scores.items() if not allowed.isdisjoint(index.types.get(i, ()))}
        return scores, excluded

    def _one(self, qid: str, text: str) -> tuple[list[Hit], dict]:
        hits, explain, _used = self.answers(qid, text)
        return hits, explain

    def answers(self, qid: str, text: str) -> tuple[list[Hit], dict, Attempt]:
        """The ranked hits for one request, the explanation, and the reading that produced them (the one
        linked, compiled and run: the reader's first, or the next one tried when it found nothing)."""
        clock = StepClock()
        if self.matcher == "hierarchy" and self.kb.settings.fourstep.text_weight and self.kb.hierarchies:
            # Hierarchy matching fuses BM25's top of the request: Tantivy searches while the request is read.
            self.kb.text_index.search_ahead(text, self.fusion_depth, self.types)
        llm = self.generator if isinstance(self.generator, LLMTriplets) else None
        tq = normalise((llm.offline if llm else self.generator)(text), self.kb.schema)
        clock.lap("triplets")
        explain: dict = {"triplets": tq.to_json(), "mode": self.mode, "seconds": clock.laps}
        used, tried = self._grounded(tq, clock)
        if llm is not None:
            used, tq = self._contest(llm, text, tq, used, clock, explain)
        if used.reading is not tq:
            explain["triplets"] = used.reading.to_json()
            explain["tried"] = tried
        compiled, scores = used.compiled, used.scores
        if scores and (conditions := self.conditions) is not None:
            # "born in 1921", "released after 1975", "landlocked": answers meeting them rank above the rest, and
            # ask's answers (the best-scored set) are those that meet them all.
            scores, held = conditions.apply(text, scores, list(used.reading.unread))
            if held:
                used.scores = scores
                explain["value conditions"] = held
        if compiled is not None:
            explain["linked"] = used.shown
            explain["sparql"] = compiled.sparql
            if used.error:
                explain["error"] = used.error
        if used.excluded:
            explain["excluded"] = used.excluded
        explain.update(used.notes)
        # Hierarchy matching has fused the text already; exact paths break their ties by similarity.
        sims = {} if used.notes.get("matcher") == "hierarchy" else self.similarity(text, list(scores))
        every = sorted(scores, key=lambda i: (-round(scores[i], 9), -sims.get(i, 0.0), i))
        ordered = every[: self.k]
        hits = [Hit(qid, iri, scores[iri] + sims.get(iri, 0.0) * 1e-3, rank) for rank, iri in enumerate(ordered, start=1)]
        explain.setdefault("candidates", len(scores))
        explain["support"] = {iri: used.support.get(iri, [])[:5] for iri in ordered[:20]}
        if used.reading.value is not None:
            # A request that asks for a value ("the release year of X"): the answers' values, typed; counted and
            # read over every answer, not the k shown.
            value = used.reading.value
            valued_hits, shown = valued(self.kb, qid, value, list(value.nodes) or every, scores)
            if valued_hits:
                explain["value"] = shown
                clock.lap("values")
                return valued_hits[: self.k], explain, used
        if self.fallback is not None and len(hits) < self.k:
            hits += self._top_up(qid, text, used.reading, compiled, hits, explain)
        clock.lap("ranking")
        if self.reranker is not None and hits:
            hits, note = self.reranker.rerank(text, hits)
            explain["rerank"] = note
            clock.lap("rerank")
        return hits, explain, used

    def _grounded(self, tq: TripletQuery, clock: StepClock) -> tuple[Attempt, list[str]]:
        """``tq`` linked, compiled and run; a reading that finds nothing gives way to the reader's next one (the
        next relation path). Also the paths tried before it."""
        used, tried = self._attempt(tq, clock), []
        for alternative in tq.alternatives if used.compiled is not None else ():
            if used.scores:
                break
            tried.append(" / ".join(t.relation.rsplit("#", 1)[-1] for t in used.reading.triplets))
            attempt = self._attempt(alternative, clock)
            if attempt.compiled is not None:
                used = attempt
        return used, tried

    def _contest(self, llm: LLMTriplets, text: str, tq: TripletQuery, offline: Attempt, clock: StepClock,
                 explain: dict) -> tuple[Attempt, TripletQuery]:
        """The offline reading's attempt against the LLM's (asked only where the offline one may need help):
        the one the graph supports, or both merged where they agree. ``explain`` gets both readings, the winner
        and why, and ``llm_reading``, the record the accounting counts."""
        why = why_ask(tq, bool(offline.scores)) if llm.ask == "unsure" else "asked for every request"
        shown = {"offline": {"triplets": tq.to_json(), "candidates": len(offline.scores)}}
        explain["readings"] = shown
        if why is None:
            explain["llm_reading"] = {"asked": False, "outcome": "not asked",
                                      "why": "the offline reading is confident: it reads every word and finds "
                                             "candidates"}
            shown["winner"], shown["why"] = "offline", explain["llm_reading"]["why"]
            return offline, tq
        reading, record = llm.read(text, tq)
        clock.lap("llm triplets")
        record["why_asked"] = why
        explain["llm_reading"] = record
        if reading is None:
            shown["winner"], shown["why"] = "offline", record["why"]
            tq.source = "offline (after LLM failure)"
            tq.notes.insert(0, record["why"] + "; the offline reading is used")
            explain["triplets"] = tq.to_json()
            return offline, tq
        theirs = self._attempt(reading, clock)
        shown["llm"] = {"triplets": reading.to_json(), "candidates": len(theirs.scores)}
        winner, because = contest(self.kb.schema, tq, offline, reading, theirs)
        shown["winner"], shown["why"] = winner, because
        record["outcome"] = {"offline": "lost", "llm": "used", "merged": "merged"}[winner]
        record["why"] = because
        if winner == "llm":
            explain["triplets"] = reading.to_json()
            return theirs, reading
        if winner == "merged":
            offline.scores = merged_scores(offline.scores, theirs.scores)
            tq.source = f"offline + {llm.name} (merged)"
            explain["triplets"] = tq.to_json()
        return offline, tq

    def _top_up(self, qid: str, text: str, tq: TripletQuery, compiled: Compiled | None, hits: list[Hit],
                explain: dict) -> list[Hit]:
        """The fallback's results below the structured ones: never the request's own constants, and, when
        the reading knows the answer type, only nodes of that type."""
        own = _constants(compiled)
        allowed = self.kb.schema.subclasses(tq.answer_type) if tq.answer_type and tq.triplets else None
        if allowed is not None and self.types and not allowed & set(self.types):
            allowed = None  # the caller's type restriction overrides the reading's answer type
        index = self.linker.index
        seen, have = {h.iri for h in hits}, len(hits)
        extra = [h for h in self.fallback.search(text, qid, names=False) if h.iri not in seen and h.iri not in own
                 and (allowed is None or index.types.get(h.iri, frozenset()) & allowed)][: self.k - have]
        if len(extra) < self.k - have:
            # Too few of the fallback's results are left (of the answer type, other than the request's own
            # constants): the rest from a BM25 search over the wanted type.
            taken = seen | own | {h.iri for h in extra}
            if allowed is not None:
                typed = sorted(allowed & set(self.types)) if self.types else sorted(allowed)
            else:
                typed = sorted(self.types or ())
            more = [h for h in self._typed_fallback(tuple(typed)).search(text, qid, names=False) if h.iri not in taken]
            extra += more[: self.k - have - len(extra)]
        floor = min((h.score for h in hits), default=0.0) - 1.0
        explain["topped_up"] = len(extra)
        if allowed is not None:
            explain["top_up_type"] = local_name(tq.answer_type)
        return [Hit(qid, h.iri, floor - (j + 1) / (len(extra) + 1), have + j + 1) for j, h in enumerate(extra)]

    def _typed_fallback(self, types: tuple[str, ...]) -> Stage:
        cache = self.__dict__.setdefault("_typed_fallbacks", {})
        if types not in cache:
            from ..retrieval import BM25

            wanted = list(types) or None
            stage = BM25(self.kb, self.k + 10, wanted)
            if self.kb.has_embeddings:
                # BM25 finds only nodes that share a word with the request; dense fills the list with the
                # nearest nodes of the type when too few do.
                from ..retrieval import Dense

                stage = stage + Dense(self.kb, self.k + 10, wanted)
            cache[types] = stage
        return cache[types]

    def transform(self, batch: Batch) -> Batch:
        out = Batch(batch.queries, {}, dict(batch.explain))
        for q in batch.queries:
            hits, explain = self._one(q.qid, q.text)
            out.hits[q.qid] = hits
            out.explain[q.qid] = explain
        return out
