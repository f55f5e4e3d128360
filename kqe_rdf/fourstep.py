"""4StepFocus (Boer et al.) on the RDF store: triplets → SPARQL candidates → ranking.

1. *Triplet generation*: an LLM (``kqe_rdf.llm``) or, offline, :class:`OfflineTriplets`
   reads the query as triplets over the ontology's relations.
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

import math
import re
from collections import defaultdict
from collections.abc import Sequence

import numpy as np

from .compiler import Compiled, compile_query, run
from .errors import KqeError
from .linking import _NEGATION, Linker
from .ontology import local_name
from .progress import StepClock
from .retrieval import Batch, Hit, Stage
from .triplets import End, Triplet, TripletQuery, normalise


WH_WORDS = ("what", "which", "who", "whom", "whose", "when", "where", "how")


class OfflineTriplets:
    """Triplets without an LLM: mentions from the name index, relations by embedding similarity.

    Mentions are the longest n-grams of the query that name nodes. For each
    mention, the relations its node type takes part in (as stored in the KB)
    are phrased from the ontology — the relation's label when the mention is
    the head, its inverse label when it is the tail — and the phrase most
    similar to the query (mentions removed) wins; paths of up to ``max_hops``
    relations are considered, and a class named in the question ("which
    disease", "who", "when") decides the answer type.
    """

    name = "offline"

    def __init__(self, kb, linker: Linker | None = None, max_hops: int = 3, hop_penalty: float = 0.15) -> None:
        self.kb = kb
        self.linker = linker or Linker(kb)
        self.max_hops = max_hops
        self.hop_penalty = hop_penalty
        self._phrase_vectors: dict[str, np.ndarray] = {}
        schema = kb.schema
        words = set()
        for cues in schema.class_cues.values():
            for cue in cues:
                words.update(cue.split())
        for r in schema.relations.values():
            words.update(r.label.lower().split())
        self.schema_words = words
        # (head class, relation, tail class) the data actually has, from the KB's edge usage.
        self.edges = kb.relation_signatures

    def _vectors(self, phrases: Sequence[str]) -> np.ndarray:
        missing = [p for p in phrases if p not in self._phrase_vectors]
        if missing:
            for p, v in zip(missing, self.kb.encoder.encode(missing)):
                self._phrase_vectors[p] = v
        return np.stack([self._phrase_vectors[p] for p in phrases])

    def answer_types(self, query: str, wh_only: bool = False) -> set[str]:
        """The class a question asks for: the class word right after its wh-word ("which years",
        "what genre"), or the wh-word itself ("who", "when"); else (unless ``wh_only``) every class it names."""
        words = re.findall(r"[a-z0-9]+", query.lower())
        cues = self.kb.schema.class_cues

        def classes_at(i: int, span: int = 3) -> set[str]:
            found = set()
            for j in range(i, min(i + span, len(words))):
                for n in (2, 1):
                    phrase = " ".join(words[j : j + n])
                    found |= {c for c, cs in cues.items() if phrase in cs}
                if found:
                    return found
            return found

        for i, w in enumerate(words):
            if w in WH_WORDS:
                found = classes_at(i, 4)
                if found:
                    return found
        if wh_only:
            return set()
        everywhere = set()
        for i in range(len(words)):
            everywhere |= classes_at(i, 1)
        return everywhere

    def paths(self, start_types: set[str]) -> list[tuple[list[tuple[str, bool]], list[str], str]]:
        """Relation paths from a mention's types: ([(relation, mention side is head)], hop phrases, answer type).

        A hop is phrased by the relation's label when the walk follows the
        stored direction, by its inverse label otherwise ("directed by" vs
        "directed"), so a path's phrases say its direction.
        """
        schema = self.kb.schema
        out = []
        frontier: list[tuple[list, str, list[str]]] = [([], t, []) for t in start_types]
        for _hop in range(self.max_hops):
            nxt = []
            for steps, cls, phrases in frontier:
                for head, rel, tail in self.edges:
                    for forward in (True, False):
                        if (head if forward else tail) != cls:
                            continue
                        if forward:
                            label = schema.relations[rel].label if rel in schema.relations else local_name(rel)
                        else:
                            label = schema.inverse_label(rel)
                        nxt.append((steps + [(rel, forward)], tail if forward else head, phrases + [label]))
            out += [(st, ph, c) for st, c, ph in nxt]
            frontier = nxt
        return out

    def choose_path(self, types: frozenset, qvec: np.ndarray, wanted: set[str]):
        """The best path: every hop must fit the question (minimum hop similarity), fewer hops preferred."""
        best, best_score = None, -math.inf
        options = [o for o in self.paths(set(types)) if not wanted or o[2] in wanted]
        if not options:
            return None, best_score
        phrases = sorted({p for _, ph, _ in options for p in ph} | {" ".join(ph) for _, ph, _ in options})
        sims = dict(zip(phrases, self._vectors(phrases) @ qvec))
        for steps, hop_phrases, cls in options:
            # Every hop must fit (the weakest hop) and the whole path should cover the question.
            weakest = min(float(sims[p]) for p in hop_phrases)
            score = (weakest + float(sims[" ".join(hop_phrases)])) / 2 - self.hop_penalty * (len(steps) - 1)
            if score > best_score:
                best, best_score = (steps, " / ".join(hop_phrases), cls), score
        return best, best_score

    def __call__(self, query: str) -> TripletQuery:
        mentions = self.linker.mentions(query, skip_words=self.schema_words)
        notes = []
        if not mentions:
            return TripletQuery(query, [], "?x", None, "offline", ["no entity of the KB is named in the query"])
        # The relation is read from what the query says about its positive mentions:
        # mentions and negated sentences ("D and E were not observed") are taken out.
        stripped = query
        for m in sorted(mentions, key=lambda m: -m.start):
            stripped = stripped[: m.start] + stripped[m.end :]
        positive = " ".join(s for s in re.split(r"(?<=[.!?])\s+", stripped) if not _NEGATION.search(s)) or stripped
        qvec = self.kb.embed_query(positive)
        wanted = self.answer_types(stripped)
        # Mentions that share types share the relation choice (phenotype lists have dozens).
        choice: dict[frozenset, tuple | None] = {}
        triplets: list[Triplet] = []
        answer_type = None
        index = self.linker.index
        for n, mention in enumerate(mentions):
            types = frozenset(t for c in mention.candidates for t in index.types.get(c.iri, ()))
            if not types:
                continue
            if types not in choice:
                best, score = self.choose_path(types, qvec, wanted)
                choice[types] = best
                if best:
                    notes.append(f"mentions of type {', '.join(sorted(local_name(t) for t in types))}: "
                                 f"relation path '{best[1]}' → {local_name(best[2])} (score {score:.2f})")
            best = choice[types]
            if best is None:
                continue
            steps, _phrase, cls = best
            answer_type = answer_type or cls
            if cls != answer_type:
                continue  # a mention leading to another answer type is not about the answer
            const = End(mention.text)
            prev: End = const
            for i, (rel, mention_is_head) in enumerate(steps):
                nxt = End("?x") if i == len(steps) - 1 else End(f"?m{n}_{i}")
                head, tail = (prev, nxt) if mention_is_head else (nxt, prev)
                triplets.append(Triplet(head, rel, tail, negated=mention.negated))
                prev = nxt
        return TripletQuery(query, triplets, "?x", answer_type, "offline", notes)


class LLMTriplets:
    """Triplets from an LLM given the ontology's document structure; the offline reading when the
    LLM fails or says nothing usable (the explanation says which happened)."""

    def __init__(self, kb, llm, offline: OfflineTriplets | None = None) -> None:
        self.kb = kb
        self.llm = llm
        self.offline = offline or OfflineTriplets(kb)
        self.name = f"llm:{llm.model}"

    def __call__(self, query: str) -> TripletQuery:
        from .llm import LLMError
        from .prompts import triplet_messages
        from .triplets import TRIPLETS_SCHEMA, from_json

        try:
            with self.llm.budget():
                result = self.llm.json(triplet_messages(self.kb.schema.describe_for_prompt(), query),
                                       TRIPLETS_SCHEMA, name="triplets")
        except LLMError as exc:
            return self._fallback(query, f"LLM failed ({exc})")
        if not result.ok:
            return self._fallback(query, f"LLM answer unusable ({result.error})")
        tq = from_json(result.value, query, self.name)
        usable = normalise(tq, self.kb.schema)
        if not usable.triplets:
            why = "; ".join(usable.notes) or "it gave no triplets"
            return self._fallback(query, f"LLM gave no triplet the ontology can express ({why})")
        if usable.guessed_answers:
            asked, reachable = self.offline.answer_types(query, wh_only=True), self._answer_classes(usable)
            if asked and reachable and not asked & reachable:
                names = ", ".join(sorted(local_name(c) for c in asked))
                return self._fallback(query, f"LLM triplets, once its guessed answer became a variable, cannot "
                                             f"reach the class the request asks for ({names})")
        return tq

    def _answer_classes(self, tq: TripletQuery) -> set[str]:
        """Classes the answer variable can have at either end of its relations (direction is tolerated)."""
        schema, found = self.kb.schema, set()
        for t in tq.triplets:
            rel = schema.relations.get(t.relation)
            if rel is not None and tq.answer in (t.head.text, t.tail.text):
                for cls in (rel.domain, rel.range):
                    if cls:
                        found |= set(schema.subclasses(cls))
        return found

    def _fallback(self, query: str, why: str) -> TripletQuery:
        tq = self.offline(query)
        tq.notes.insert(0, why + "; the offline reading is used")
        tq.source = "offline (after LLM failure)"
        return tq


class LLMReranker:
    """An LLM orders the top ``depth`` results by their documents; any failure keeps the order."""

    def __init__(self, kb, llm, depth: int = 10) -> None:
        self.kb, self.llm, self.depth = kb, llm, depth

    def rerank(self, query: str, hits: list[Hit]) -> tuple[list[Hit], str]:
        from .llm import LLMError
        from .prompts import rerank_messages

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
        out = [Hit(qid, h.iri, top_score + (len(reranked) - r) if r < len(top) else h.score, r)
               for r, h in enumerate(reranked)]
        return out, f"reranked the top {len(top)} by {self.llm.model}"


class FourStep(Stage):
    """4StepFocus as a retrieval stage (``--method 4step``)."""

    def __init__(self, kb, generator=None, mode: str = "soft", k: int = 100, types: Sequence[str] | None = None,
                 fallback: Stage | None = None, reranker=None, linker: Linker | None = None,
                 sparql_limit: int = 20000, timeout: float = 10.0, negation_weight: float = 0.1) -> None:
        if mode not in ("soft", "strict"):
            raise KqeError("4StepFocus mode must be soft or strict")
        self.kb = kb
        self.linker = linker or Linker(kb)
        self.generator = generator or OfflineTriplets(kb, self.linker)
        self.mode = mode
        self.k = k
        self.types = sorted(kb.resolve_types(types)) if types else None
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

    def link(self, tq: TripletQuery) -> tuple[dict[tuple[str, str | None], list[str]], dict[str, list[dict]]]:
        linked, shown = {}, {}
        for const in tq.constants():
            cls = const.type or self.expected_type(tq, const)
            types = self.kb.schema.subclasses(cls) if cls else None
            cands = self.linker.link(const.text, types)
            linked[(const.text, const.type)] = [c.iri for c in cands]
            shown[const.text] = [{"iri": c.iri, "name": c.name, "score": round(c.score, 3), "how": c.how} for c in cands]
        return linked, shown

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

    def candidates(self, tq: TripletQuery, compiled: Compiled) -> tuple[dict[str, float], dict[str, list]]:
        rows = run(self.kb.store, compiled, self.timeout)
        answer = compiled.answer.lstrip("?")
        if compiled.mode == "strict":
            support = {r[answer]: [r] for r in rows if answer in r}
            return {iri: 1.0 for iri in support}, support
        by_unit: dict[int, set[str]] = defaultdict(set)
        bindings: dict[str, list] = defaultdict(list)
        for r in rows:
            if answer in r:
                by_unit[int(r["unit"])].add(r[answer])
                bindings[r[answer]].append(r)
        scores: dict[str, float] = defaultdict(float)
        for unit, iris in by_unit.items():
            weight = self.path_weight(len(iris))
            sign = -self.negation_weight if compiled.units[unit].negated else 1.0
            for iri in iris:
                scores[iri] += sign * weight
        return dict(scores), dict(bindings)

    def similarity(self, text: str, iris: list[str]) -> dict[str, float]:
        if not iris:
            return {}
        if self.kb.has_embeddings:
            found, matrix = self.kb.dense.vectors_of(iris)
            if found:
                sims = matrix @ self.kb.embed_query(text)
                return {i: float(s) for i, s in zip(found, sims)}
        bm25 = dict(self.kb.text_index.search(text, 2000, self.types))
        top = max(bm25.values(), default=1.0) or 1.0
        return {i: bm25.get(i, 0.0) / top for i in iris}

    def plan(self, text: str, clock: StepClock | None = None) -> tuple[TripletQuery, dict, Compiled | None]:
        """The reading of ``text``, its linked constants (as shown) and the compiled SPARQL (None without
        triplets): steps 1-3, which ``kqe-rdf triplets`` and ``/triplets`` show without running the query."""
        clock = clock or StepClock()
        tq = normalise(self.generator(text), self.kb.schema)
        clock.lap("triplets")
        if not tq.triplets:
            return tq, {}, None
        linked, shown = self.link(tq)
        compiled = compile_query(self.kb.schema, tq, linked, self.mode, self.sparql_limit)
        clock.lap("linking")
        return tq, shown, compiled

    def reading(self, text: str) -> dict:
        """``plan`` as JSON: triplets, linked constants, SPARQL."""
        tq, shown, compiled = self.plan(text)
        return {"triplets": tq.to_json(), "linked": shown, "sparql": compiled.sparql if compiled else None}

    def _one(self, qid: str, text: str) -> tuple[list[Hit], dict]:
        clock = StepClock()
        tq, shown, compiled = self.plan(text, clock)
        explain: dict = {"triplets": tq.to_json(), "mode": self.mode, "seconds": clock.laps}
        scores: dict[str, float] = {}
        support: dict[str, list] = {}
        if compiled is not None:
            explain["linked"] = shown
            explain["sparql"] = compiled.sparql
            try:
                scores, support = self.candidates(tq, compiled)
            except KqeError as exc:
                explain["error"] = str(exc)
            clock.lap("sparql")
        if self.types and scores:
            allowed = set(self.types)
            index = self.linker.index
            scores = {i: s for i, s in scores.items() if index.types.get(i, frozenset()) & allowed}
        sims = self.similarity(text, list(scores))
        ordered = sorted(scores, key=lambda i: (-round(scores[i], 9), -sims.get(i, 0.0), i))[: self.k]
        hits = [Hit(qid, iri, scores[iri] + sims.get(iri, 0.0) * 1e-3, rank) for rank, iri in enumerate(ordered)]
        explain["candidates"] = len(scores)
        explain["support"] = {iri: support.get(iri, [])[:5] for iri in ordered[:20]}
        if self.fallback is not None and len(hits) < self.k:
            seen = set(ordered)
            extra = [h for h in self.fallback.search(text, qid) if h.iri not in seen][: self.k - len(hits)]
            floor = min((h.score for h in hits), default=0.0) - 1.0
            hits += [Hit(qid, h.iri, floor - (j + 1) / (len(extra) + 1), len(hits) + j) for j, h in enumerate(extra)]
            explain["topped_up"] = len(extra)
        clock.lap("ranking")
        if self.reranker is not None and hits:
            hits, note = self.reranker.rerank(text, hits)
            explain["rerank"] = note
            clock.lap("rerank")
        return hits, explain

    def transform(self, batch: Batch) -> Batch:
        out = Batch(batch.queries, {}, dict(batch.explain))
        for q in batch.queries:
            hits, explain = self._one(q.qid, q.text)
            out.hits[q.qid] = hits
            out.explain[q.qid] = explain
        return out
