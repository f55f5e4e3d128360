"""The offline reader: a request read as relation paths from the nodes it names to its answer, without an LLM.

Read top-down, the steps are one module each, in the order :meth:`OfflineTriplets.__call__` calls them:

1. :mod:`.request` — the request's mentions (the one mention finder) and the request around them: its words,
   the class its wh-phrase asks for, its role words;
2. :mod:`.words` — which words name which relation: the ontology's labels, WordNet, the encoder, role words;
3. :mod:`.paths` — the mentions grouped by type and the relation paths that really leave them in the KB
   (grounded), each group's ranked by
4. :mod:`.ranking` — how the request names their relations, rule by rule (the score is a table);
5. :mod:`.chains` — the chain the request's possessives and ``of`` phrases spell, filled link by link from the
   graph (and a value asked of its last node);
6. this module — the primary group's reading (the chain, else its best path, else one read from the graph or
   the encoder, or an abstention), constants of other types joined on the same answer, several constants on one
   answer made to meet in the data, and the triplets (:mod:`.triplets`) 4StepFocus compiles to SPARQL, with the
   reading shown in the explanation.

Nothing here names a relation, a class or a word of a particular KB: rules follow from the ontology, the
graph and WordNet.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Sequence
from dataclasses import replace

from ...kb.context import FAMILY, UNCERTAIN
from ...kb.linking import Linker, Mention
from ...kb.ontology import local_name
from ...kb.words import FUNCTION_WORDS, QUESTION_WORDS, WH_WORDS, stem
from ..retrieval import STOPWORDS
from .triplets import End, Triplet, TripletQuery
from .chains import ChainReader
from .chains import ValueAsk
from .paths import Path, PathReader
from .ranking import Scored
from .request import Request, RequestReader, is_common_word, is_name


#: What stands between two conditions on one answer: a coordinating word, then the second condition's own words
#: ("… by X and released by Y"), in the same clause.
_COORDINATION = re.compile(r"\s*,?\s*(?:and|but|as well as)\s+(?:[^\W\d]+\s+){1,4}", re.I)


def _own_note(mention: Mention, scored: Scored) -> str:
    return f"mention '{mention.text}': its own relation path '{' / '.join(scored.phrases)}' (score {scored.score:.2f})"


class OfflineTriplets:
    """Triplets without an LLM: mentions from the name index, relation paths grounded in the KB.

    Mentions are the longest n-grams of the query that name nodes. For each group of mentions of the
    same types, :class:`~.paths.PathReader` lists the relation paths (up to ``max_hops`` hops,
    both directions) that really leave their nodes, and ranks them by how the request names their
    relations (labels and ``skos:altLabel`` of the ontology, the hop nearest the constant first), by the
    answer class the wh-phrase asks for and by embedding similarity. The best-scoring group fixes the
    answer class; other groups join with their best path to that class when they fit about as well.
    Two or three mentions of one type each get their own path, read from the words before them
    ("films starring A directed by B"); longer lists (phenotypes) share one. The next best paths are
    kept as :attr:`TripletQuery.alternatives`, tried when a reading finds no candidate.
    """

    name = "offline"
    #: Below this confidence (:attr:`.ranking.Scored.confidence`: how surely words name the path) a reading is not
    #: imposed: the relation is read from the graph where the answer class is known, else the reader abstains.
    min_confidence = 0.01

    def __init__(self, kb, linker: Linker | None = None, max_hops: int = 3, hop_penalty: float = 0.25,
                 alternatives: int = 3, margin: float = 0.5, answer_types: Sequence[str] | None = None) -> None:
        self.kb = kb
        #: The classes the caller asks for (``--type``), read as the answer class when the request names none.
        self.given_types = set(answer_types or ())
        self.linker = linker or Linker(kb)
        self.alternatives = alternatives
        #: How much worse than the best group's path another group's may fit and still join the reading.
        self.margin = margin
        #: Steps 3 and 4: the relation paths that leave the constants, ranked.
        self.reader = PathReader(kb, max_hops=max_hops, hop_penalty=hop_penalty)
        #: Step 1: the request around its mentions.
        self.requests = RequestReader(kb, self.reader.words, self.linker)
        #: The chain a request's possessives and ``of`` phrases spell (:mod:`.chains`).
        self.chains = ChainReader(kb, self.reader.words, self.requests.roles)

    def answer_types(self, query: str, wh_only: bool = False) -> set[str]:
        """The class a question asks for (:meth:`.request.RequestReader.answer_types`)."""
        return self.requests.answer_types(query, wh_only)

    def classes_named(self, phrase: str) -> set[str]:
        """The classes a phrase names (:meth:`.request.RequestReader.classes_named`)."""
        return self.requests.classes_named(phrase)

    def mentions(self, query: str) -> tuple[list[Mention], list[Mention]]:
        """The request's constants and its conditions on the answer (:meth:`.request.RequestReader.mentions`)."""
        return self.requests.mentions(query)

    def __call__(self, query: str) -> TripletQuery:
        """The request read as triplets: its mentions, their groups' relation paths, the primary group's reading
        (:meth:`_decide`), every group's path to the answer (:meth:`_choose`), the conditions, the alternatives."""
        mentions, conditions = self.mentions(query)
        terms = [{"text": m.text, "state": m.state, **({"trigger": m.trigger} if m.trigger else {})} for m in mentions]
        # A relative's finding ("family history of X", "her mother has X") is not the patient's: no constraint.
        relatives = [m.text for m in mentions if m.state == FAMILY]
        mentions = [m for m in mentions if m.state != FAMILY]
        if not mentions:
            notes = ["no entity of the KB is named in the query"] if not relatives else [
                f"only a relative's findings are named ({', '.join(relatives)}): nothing of the patient's to read"]
            return TripletQuery(query, [], "?x", None, "offline", notes, terms=terms)
        request = self.requests.read(query, mentions, self.given_types)
        groups = self.reader.groups(mentions, self.linker.index)
        ranked = self.reader.ranked(groups, mentions, request, self.linker.index)
        usable = [t for t in groups if ranked[t]]
        if not usable:
            return TripletQuery(query, [], "?x", None, "offline",
                                ["no relation of the KB leaves the entities named in the query"], terms=terms)
        # Beside a proper name, a common word that happens to name a node is not the request's constant
        # ("who wrote movies together with Todd McFarlane", where "together" is also a film).
        common = set()
        if any(is_name(query, m) for m in mentions):
            common = {t for t in usable if all(is_common_word(mentions[n]) for n in groups[t])}
        primary = max(usable, key=lambda t: (t not in common, ranked[t][0].score,
                                             sum(len(mentions[n].text) for n in groups[t]), -groups[t][0]))
        notes: list[str] = []
        best = self._decide(query, mentions, conditions, request, groups, ranked, primary, notes)
        if isinstance(best, TripletQuery):
            best.terms = terms
            return best
        choice = self._choose(query, mentions, request, groups, ranked, usable, primary, common, best, notes)
        triplets = self._triplets(mentions, choice, notes)
        for condition in conditions:
            held = self.requests.roles.holders([c.iri for c in condition.candidates])
            if held:  # "which people born in X are painters": the answer holds the value the complement names
                triplets.append(Triplet(End("?x"), held[0][0], End(condition.text)))
                notes.append(f"'{condition.text}' after the copula: a condition on the answer by "
                             f"'{self.reader.phrase(held[0][0], True)}'")
        reading = self._reading(mentions, choice, groups, ranked)
        unread = self._unread(request, choice, conditions)
        alternatives = self._alternatives(query, mentions, choice, groups[primary], ranked[primary])
        also = self._also_asked(best, ranked[primary], request, notes)
        tq = TripletQuery(query, triplets, "?x", best.path.end, "offline", notes,
                          returning=self.reader.returning(mentions, choice),
                          revisiting=self.reader.revisiting(mentions, choice), value=best.why.get("value"))
        tq.reading, tq.unread, tq.alternatives, tq.terms = reading, unread, alternatives, terms
        tq.also_types = also
        if relatives:
            notes.append(f"a relative's, not the patient's (not required): {', '.join(relatives)}")
        if tq.value is None and triplets and request.counting:
            tq.value = ValueAsk("", "number of answers", "'how many' asks for a count of what the reading answers",
                                count=True)
        return tq

    def _decide(self, query: str, mentions: Sequence[Mention], conditions: list[Mention], request: Request,
                groups: dict, ranked: dict, primary: frozenset, notes: list[str]) -> Scored | TripletQuery:
        """The primary group's reading: the chain the request's structure gives, else its best path where a word
        names it, else one read from the graph or the encoder — or the whole answer (a value of the constant, or
        an abstention) as a :class:`TripletQuery`. ``ranked[primary]`` is put in that order."""
        best = ranked[primary][0]
        chained = self._chained(query, mentions, request, best)
        if chained is not None and "value" in chained.why and not chained.path.steps:
            # The value of the request's own constant ("the release year of X", "when was X born").
            value = replace(chained.why["value"], nodes=tuple(c.iri for c in mentions[0].candidates))
            tq = TripletQuery(query, [], "?x", None, "offline", [chained.why["read from"]], value=value)
            tq.unread = self._unread(request, {0: chained}, conditions)
            return tq
        if chained is not None:
            # The request's structure gives the chain (its number of hops and their order), the graph each link.
            best = chained
        elif best.confidence < self.min_confidence:
            # No word names the relation: the reading is evidence, not an order. A list of names, or a name with
            # no other word, is read from the graph (with the class asked for or given), else answered as text; the
            # words around one name are read by the encoder ("what has X", "X is a film by that person").
            if len(groups[primary]) > 1 or not self._says_more(request) or self._is_list(query, request):
                best = self.reader.from_graph(ranked[primary], groups[primary], mentions, request.wanted)
                if best is None:
                    return self._abstained(query, ranked[primary][0], request.wanted)
            else:
                best = self._guessed(best)
        else:
            return best
        ranked[primary] = [best] + [s for s in ranked[primary] if s.path != best.path]
        notes.append(best.why["read from"])
        return best

    def _choose(self, query: str, mentions: Sequence[Mention], request: Request, groups: dict, ranked: dict,
                usable: list, primary: frozenset, common: set, best: Scored, notes: list[str]) -> dict[int, Scored]:
        """Each mention's path to the answer: a joint reading of several constants (:meth:`_joint`), else each
        group's best path to the primary reading's answer class where it joins it (:meth:`_joins`, or a
        coordinated name: :meth:`_conjoined`), a member's own path where two or three share a group."""
        answer_type = best.path.end
        choice = self._joint(usable, groups, mentions, request, best)
        notes.extend(_own_note(mentions[n], scored) for n, scored in choice.items())
        for types in usable if not choice else ():
            fitting = [s for s in ranked[types] if s.path.end == answer_type]
            if not fitting:
                continue
            if types != primary and not self._joins(fitting[0], best, types, primary, request, types in common):
                conjoined = self._conjoined(query, mentions, groups[primary], groups[types], fitting)
                if conjoined is None:
                    continue
                fitting = [conjoined]
            members = groups[types]
            notes.append(f"mentions of type {', '.join(sorted(local_name(t) for t in types))}: relation path "
                         f"'{' / '.join(fitting[0].phrases)}' → {local_name(answer_type)} "
                         f"(score {fitting[0].score:.2f})")
            own = self._own_paths(members, mentions, request, answer_type) if 2 <= len(members) <= 3 else {}
            for n in members:
                choice[n] = own.get(n, fitting[0])
                if n in own:
                    notes.append(_own_note(mentions[n], own[n]))
        return choice

    def _alternatives(self, query: str, mentions: Sequence[Mention], choice: dict[int, Scored], members: list[int],
                      ranked: list[Scored]) -> list[TripletQuery]:
        """The primary group's next paths, tried in turn when a reading finds no candidate."""
        out = []
        for other in ranked[1 : 1 + self.alternatives]:
            alt = {n: (other if n in members else s) for n, s in choice.items()
                   if n in members or s.path.end == other.path.end}
            out.append(TripletQuery(query, self._triplets(mentions, alt), "?x", other.path.end, "offline",
                                    [f"next relation path '{' / '.join(other.phrases)}' → "
                                     f"{local_name(other.path.end)} (score {other.score:.2f})"],
                                    returning=self.reader.returning(mentions, alt),
                                    revisiting=self.reader.revisiting(mentions, alt)))
        return out

    #: Below this confidence a one-link reading of the words gives way to the request's structure (a chain of two
    #: or more links always does).
    chain_over = 1.01

    def _chained(self, query: str, mentions: Sequence[Mention], request: Request, best: Scored) -> Scored | None:
        """The reading of the request's structure (:class:`.chains.ChainReader`) for a request about one constant:
        possessives and ``of`` phrases give the chain, the graph each link. None where the request has no such
        structure, its chain ends in another class than the one asked for, or it is one link that the words already
        name (the ranking reads those)."""
        if len(mentions) != 1 or not request.mention_positions:
            return None
        scored = self.chains.read(query, request.mention_positions[0], [c.iri for c in mentions[0].candidates],
                                  self.reader)
        if scored is None or (request.wanted and scored.path.end not in request.wanted
                              and "value" not in scored.why):
            return None
        if len(scored.path.steps) < 2 and best.confidence >= self.chain_over:
            return None
        return scored

    def _also_asked(self, best: Scored, ranked: list[Scored], request: Request, notes: list[str]) -> tuple[str, ...]:
        """The other classes the request asks for that the best path reaches too ("which artists": bands and
        musicians): each of them answers."""
        also = tuple(sorted({other.path.end for other in ranked if other.path.steps == best.path.steps
                             and other.path.end in request.wanted - {best.path.end}}))
        if not also or best.path.end not in request.wanted:
            return ()
        notes.append("the path reaches " + ", ".join(sorted(self.kb.schema.label(c) for c in (best.path.end, *also)))
                     + ": each is asked for")
        return also

    @staticmethod
    def _says_more(request: Request) -> bool:
        """Whether the request says more than its constants ("what has X", "what is a X film"; not "a, b and c"
        or a name alone): a question or words the encoder can read a relation from where no word names one."""
        return any((s not in FUNCTION_WORDS and s not in QUESTION_WORDS) or s in WH_WORDS for _p, s in request.words)

    @staticmethod
    def _is_list(query: str, request: Request) -> bool:
        """A list of items, some of which name nothing in the graph ("seizures, microcephaly and hypotonia" where
        only seizures links): its other words are more items, not words that say a relation."""
        return "," in query and not any(s in WH_WORDS for _p, s in request.words)

    @staticmethod
    def _guessed(best: Scored) -> Scored:
        """The path the encoder places nearest the request's words, where no word names a relation and the graph
        cannot tell which (no class is asked for): a guess, shown as one.

        >>> OfflineTriplets(example_kb())("what has Gran Torino").notes[0][:80]
        "no word names a relation and no class is asked for: 'directed by', the path the "
        """
        why = (f"no word names a relation and no class is asked for: '{' / '.join(best.phrases)}', the path the "
               f"encoder places nearest the request's words (a guess, confidence {best.confidence:.2f})")
        return Scored(best.path, best.score, best.phrases, {**best.why, "read from": why, "source": "encoder"},
                      best.confidence)

    def _abstained(self, query: str, best: Scored, wanted: set[str]) -> TripletQuery:
        """No reading: a list of names, or a name alone, with no word that names a relation and no answer class
        asked for or given (``--type``), so the request is answered as text (4StepFocus's fallback).

        >>> reading = OfflineTriplets(example_kb())("Spike Jonze")  # who directed and who wrote Her: which?
        >>> reading.triplets, reading.notes[0][:50]
        ([], 'abstained: no word of the request names a relation')
        """
        why = (f"abstained: no word of the request names a relation (best path '{' / '.join(best.phrases)}', "
               f"confidence {best.confidence:.2f} < {self.min_confidence})"
               + ("" if wanted else " and no answer class is named or given (--type)"))
        tq = TripletQuery(query, [], "?x", None, "offline", [why])
        tq.reading = [{"constant": None, "path": " / ".join(best.phrases), "score": round(best.score, 2),
                       "confidence": round(best.confidence, 2), "used": False, "hops": best.why.get("hops", []),
                       "beat": []}]
        return tq

    def _joins(self, other: Scored, best: Scored, types: frozenset, primary: frozenset, request: Request,
               common: bool = False) -> bool:
        """Whether another group's path joins the reading: it fits about as well as the best one, and a group
        of other types than the best one's, or of common words beside a proper name, must be named by words of
        its own (a word of the request that happens to name a movie, "fall" or "creator", reuses the best path's
        words and adds nothing)."""
        if other.score < best.score - self.margin:
            return False
        if types & primary and not common:
            return True
        stems = {s for _p, s in request.words}
        return bool((self._path_stems(other) & stems) - (self._path_stems(best) & stems))

    def _conjoined(self, query: str, mentions: Sequence[Mention], primary: list[int], members: list[int],
                   fitting: list[Scored]) -> Scored | None:
        """Another group's path when its names are a second condition on the same answer by the request's syntax:
        a coordinating "and" (or "but", "as well as") stands between them and the reading's constants ("albums
        produced by X and released by Y"), and one hop of the graph links them to the answer class, whether or not
        a word names it ("released" for a record label): the best such hop. None otherwise."""
        one = next((s for s in fitting if len(s.path.steps) == 1), None)
        if one is None or len(primary) > 3 or len(members) > 3 \
                or not all(is_name(query, mentions[n]) for n in members):
            return None  # (a list of phenotypes is one condition read many times, not a conjunction)
        for a, b in itertools.product(primary, members):
            first, second = sorted((mentions[a], mentions[b]), key=lambda m: m.start)
            if _COORDINATION.fullmatch(query[first.end : second.start]):
                return one
        return None

    def _path_stems(self, scored: Scored) -> set[str]:
        """The word stems that name the path's relations (labels and alt labels)."""
        return {s for rel, _f in scored.path.steps for s in self.reader.words.relation_stems.get(rel, ())}

    def _named(self, scored: Scored, request: Request) -> set[int]:
        """Positions of the request's words that name a relation of the path."""
        stems = self._path_stems(scored)
        return {p for p, s in request.words if s in stems}

    def _joint(self, usable: list[frozenset], groups: dict[frozenset, list[int]], mentions: Sequence[Mention],
               request: Request, best: Scored) -> dict[int, Scored]:
        """Constants of different classes that each read their own words ("films about war starring Tom Hanks":
        a tag, then a person), when together they name more of the request's relation words than the best
        path alone, or as many with fewer hops (alone, "Tom Hanks" reads 'starred in / has tags / tag of');
        empty when they do not ("the actor X starred together with who" is X's path alone)."""
        if len(usable) < 2 or any(len(groups[t]) > 3 for t in usable):
            return {}
        own: dict[int, Scored] = {}
        for types in usable:
            paths = self._own_paths(groups[types], mentions, request, best.path.end)
            if set(paths) != set(groups[types]):
                return {}  # every constant needs relation words of its own
            own.update(paths)
        alone, joint = self._named(best, request), set().union(*(self._named(s, request) for s in own.values()))
        hops = sum(len(s.path.steps) for s in own.values())
        if joint > alone or (joint == alone and hops < len(best.path.steps)):
            return own
        return {}

    def _own_paths(self, members: list[int], mentions: Sequence[Mention], request: Request,
                   answer_type: str) -> dict[int, Scored]:
        """A path per mention of a small group, read from the words between the previous mention and it
        (else those after it): "films starring A directed by B"."""
        spans = request.mention_positions
        order = sorted(range(len(spans)), key=lambda i: spans[i])
        out = {}
        for n in members:
            k = order.index(n)
            lo = spans[order[k - 1]][1] if k else 0
            words = [(p, s) for p, s in request.words if lo <= p < spans[n][0]]
            if not any(s in self.reader.words.all_stems for _p, s in words):
                hi = spans[order[k + 1]][0] if k + 1 < len(order) else 10**9
                words = [(p, s) for p, s in request.words if spans[n][1] <= p < hi]
            if not any(s in self.reader.words.all_stems for _p, s in words):
                continue
            local = Request(words, [spans[n]], {answer_type}, request.vector, request.answer_at, request.similar,
                            request.surface, request.kinds,
                            {p: role for p, role in request.roles.items() if any(p == q for q, _s in words)})
            nodes = [c.iri for c in mentions[n].candidates]
            types = {t for c in mentions[n].candidates for t in self.linker.index.types.get(c.iri, ())}
            scored = [s for s in self.reader.rank(self.reader.enumerate(nodes, types, local, [spans[n]]), local,
                                                  [spans[n]]) if s.path.end == answer_type]
            if scored:
                out[n] = [x for x in scored[: self.conjunction_options]
                          if x.score >= scored[0].score - self.conjunction_margin]
        return self._meeting(out, mentions)

    #: How many of each constant's best paths :meth:`_meeting` tries together, and how much worse than a
    #: constant's best path one may be.
    conjunction_options = 5
    conjunction_margin = 1.5

    def _meeting(self, options: dict[int, list[Scored]], mentions: Sequence[Mention]) -> dict[int, Scored]:
        """One path per constant such that the paths meet: several constants on one answer are intersected in
        the compiled SPARQL, so the best combination whose answers overlap in the KB wins ("films by D starring
        A": the director's path and the actor's must reach the same films; with one
        class for every node the answer class cannot tell). Without overlap, each constant's best path."""
        best = {n: ranked[0] for n, ranked in options.items()}
        if len(options) < 2:
            return best
        members = sorted(options)
        reached: dict[tuple[int, int], set[str]] = {}

        def answers(n: int, i: int) -> set[str]:
            if (n, i) not in reached:
                nodes = [c.iri for c in mentions[n].candidates]
                reached[(n, i)] = self.reader.reached(nodes, options[n][i].path)
            return reached[(n, i)]

        # Fewest hops first, then the best score: a word such as "genre" in "Comedy genre films starring A" is
        # read once, by the constant it describes, not again as a second hop from the actor.
        combos = sorted(itertools.product(*(range(len(options[n])) for n in members)),
                        key=lambda c: (sum(len(options[n][i].path.steps) for n, i in zip(members, c)),
                                       -sum(options[n][i].score for n, i in zip(members, c))))
        for combo in combos:
            common = answers(members[0], combo[0])
            for n, i in zip(members[1:], combo[1:]):
                common = common & answers(n, i)
            if common:
                return {n: options[n][i] for n, i in zip(members, combo)}
        return best

    def _unread(self, request: Request, choice: dict[int, Scored], conditions: Sequence[Mention]) -> list[str]:
        """The request's words the reading left unread: outside the mentions, not a function, question or class
        word, and read by no hop of the chosen paths (nor a role word of theirs)."""
        read = {w for scored in choice.values() for hop in scored.why.get("hops", [])
                for said in hop.get("words", []) for w in said.lower().split()}
        read |= {w for scored in choice.values() if "value" in scored.why for w in scored.why["value"].word.split()}
        read |= {stem(w) for w in read}
        read |= {c.text.lower() for c in conditions}
        out = []
        for position, s in request.words:
            word = request.surface.get(position, s)
            if word in read or s in read or s in FUNCTION_WORDS or word in QUESTION_WORDS or word in STOPWORDS \
                    or position in request.kinds or self.requests.classes_named(word) or not word.isalpha():
                continue
            out.append(word)
        return list(dict.fromkeys(out))

    @staticmethod
    def _reading(mentions: Sequence[Mention], choice: dict[int, Scored], groups: dict[frozenset, list[int]],
                 ranked: dict[frozenset, list[Scored]]) -> list[dict]:
        """What the explanation shows of the reading: per constant, each hop of its path with the words it was
        read from and how (exact, synonym 0.80, similarity 0.59, not named), its score, and the paths it beat."""
        out = []
        for n in sorted(choice):
            scored = choice[n]
            group = next((ranked[t] for t, members in groups.items() if n in members), [])
            beat = [{"path": " / ".join(s.phrases), "score": round(s.score, 2)} for s in group
                    if s is not scored][:2]
            out.append({"constant": mentions[n].text, "path": " / ".join(scored.phrases),
                        "score": round(scored.score, 2), "confidence": round(scored.confidence, 2), "used": True,
                        "hops": scored.why.get("hops", []), "beat": beat})
            if scored.why.get("source"):
                out[-1]["read from"] = scored.why["source"]  # "graph" or "encoder": no word names the path
            if scored.why.get("unread"):
                out[-1]["unread"] = scored.why["unread"]
        return out

    def _triplets(self, mentions: Sequence[Mention], choice: dict[int, Scored],
                  notes: list[str] | None = None) -> list[Triplet]:
        triplets: list[Triplet] = []
        negative = self.reader.words.negative
        for n in sorted(choice):
            mention = mentions[n]
            steps = choice[n].path.steps
            # A relation that states the absence ("lacks") carries the request's negation: it is not negated again.
            negated = mention.negated and not any(rel in negative for rel, _f in steps)
            prev: End = End(mention.text)
            constraints = choice[n].why.get("constraints")
            if constraints is None:
                constraints = self._role_values(mention, choice[n], notes)
            for i, (rel, mention_is_head) in enumerate(steps):
                nxt = End("?x") if i == len(steps) - 1 else End(f"?m{n}_{i}")
                head, tail = (prev, nxt) if mention_is_head else (nxt, prev)
                triplets.append(Triplet(head, rel, tail, negated=negated, uncertain=mention.state == UNCERTAIN))
                # The node a role word names has its values, joined to its hop: "X's mom" is a parent who is female.
                triplets += [Triplet(nxt, value_rel, End(name), constraint=True)
                             for value_rel, _node, name in constraints.get(i, ())]
                prev = nxt
        return triplets

    def _role_values(self, mention: Mention, scored: Scored, notes: list[str] | None) -> dict[int, tuple]:
        """The values role words give the hops they name ("X's mom": female), where some node the hop reaches in the
        KB has one; a value no node on the hop has is left out (the data may not record it, or disagree with the
        word), and the notes say so."""
        roles = scored.why.get("roles", {})
        nodes = [c.iri for c in mention.candidates]
        out: dict[int, tuple] = {}
        for i, role in roles.items():
            if roles.get(i + 1) is role or not role.values:
                continue
            prefix = Path(scored.path.steps[: i + 1], scored.path.classes[: i + 2])
            reached = sorted(self.reader.reached(nodes, prefix, cap=2000))
            held = next(((v,) for v in role.values if self.chains.holders(reached, v[0], v[1])), ())
            if held:
                out[i] = held
            elif notes is not None:
                notes.append(f"'{role.word}' says {', '.join(v[2] for v in role.values)}, which no node on its hop "
                             "is in the KB: the hop stands without it")
        return out


