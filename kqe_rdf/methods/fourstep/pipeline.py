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

import itertools
import math
import re
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from .compiler import Compiled, compile_query, run
from ...core.errors import KqeError
from ...kb.hierarchy import hierarchical_scores
from ...kb.linking import _NEGATION, Linker, Mention, singular
from ...kb.ontology import local_name
from ...core.progress import StepClock
from .reader import FUNCTION_WORDS, PathReader, Request, Scored, stem
from ..retrieval import STOPWORDS, Batch, Hit, Stage
from .triplets import End, Triplet, TripletQuery, normalise


def _constants(compiled: Compiled | None) -> set[str]:
    """The IRIs the request's constants were linked to: never answers, never top-up results."""
    return {i for iris in (compiled.constants.values() if compiled else ()) for i in iris}


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


_ARTICLES = ("the", "a", "an")
_LIST_GAP = re.compile(r"\x00(?:(?:\s*(?:,|;|\band\b|\bor\b))+\s*\x00)*")
WH_WORDS = ("what", "which", "who", "whom", "whose", "when", "where", "how")
_FUNCTION_WORDS = STOPWORDS | {"do", "does", "did", "been", "being", "some", "all", "many", "much"}


def _is_name(query: str, mention: Mention) -> bool:
    """Whether a mention is written as a proper name: capitalised ("Kismet", "Nikon D500"), and not only because
    it starts a sentence (at a sentence start a later word must be capitalised too: "Roberto Benigni")."""
    before = query[: mention.start].rstrip()
    if not mention.text[:1].isupper():
        return False
    return (bool(before) and before[-1] not in ".!?:;") or any(w[:1].isupper() for w in mention.text.split()[1:])


def _is_common_word(mention: Mention) -> bool:
    """A single lower-case word ("together", "heat")."""
    return mention.text.islower() and " " not in mention.text.strip()


def _own_note(mention: Mention, scored: Scored) -> str:
    return f"mention '{mention.text}': its own relation path '{' / '.join(scored.phrases)}' (score {scored.score:.2f})"


class OfflineTriplets:
    """Triplets without an LLM: mentions from the name index, relation paths grounded in the KB.

    Mentions are the longest n-grams of the query that name nodes. For each group of mentions of the
    same types, :class:`~kqe_rdf.reader.PathReader` lists the relation paths (up to ``max_hops`` hops,
    both directions) that really leave their nodes, and ranks them by how the request names their
    relations (labels and ``skos:altLabel`` of the ontology, the hop nearest the constant first), by the
    answer class the wh-phrase asks for and by embedding similarity. The best-scoring group fixes the
    answer class; other groups join with their best path to that class when they fit about as well.
    Two or three mentions of one type each get their own path, read from the words before them
    ("films starring A directed by B"); longer lists (phenotypes) share one. The next best paths are
    kept as :attr:`TripletQuery.alternatives`, tried when a reading finds no candidate.
    """

    name = "offline"

    def __init__(self, kb, linker: Linker | None = None, max_hops: int = 3, hop_penalty: float = 0.25,
                 alternatives: int = 3, margin: float = 0.5) -> None:
        self.kb = kb
        self.linker = linker or Linker(kb)
        self.max_hops = max_hops
        self.hop_penalty = hop_penalty
        self.alternatives = alternatives
        #: How much worse than the best group's path another group's may fit and still join the reading.
        self.margin = margin
        self._reader: PathReader | None = None
        schema = kb.schema
        words = set()
        for cues in schema.class_cues.values():
            for cue in cues:
                words.update(cue.split())
        for r in schema.relations.values():
            words.update(r.label.lower().split())
        for phrases in self.reader.relation_phrases.values():
            for p in phrases:
                words.update(p.lower().split())
        self.schema_words = words
        #: The classes a wh-word asks for by WordNet ("whom" → the class labelled "person"), where no cue says;
        #: read from class labels only (an alt label such as "type" has a sense that is a person).
        self.wh_classes: dict[str, set[str]] = {}
        from ...kb.lexicon import wh_words

        for cls, term in schema.classes.items():
            for wh in wh_words(term.label.lower()) if " " not in term.label.strip() else ():
                self.wh_classes.setdefault(wh, set()).add(cls)

    @property
    def reader(self) -> PathReader:
        if self._reader is None:
            self._reader = PathReader(self.kb, max_hops=self.max_hops, hop_penalty=self.hop_penalty)
        return self._reader

    def answer_types(self, query: str, wh_only: bool = False) -> set[str]:
        """The class a question asks for: the class word right after its wh-word ("which years",
        "what genre"), or the wh-word itself ("who", "when"); else (unless ``wh_only``) every class it names."""
        words = re.findall(r"[a-z0-9]+", query.lower())

        def cue_at(j: int) -> tuple[set[str], int]:
            for n in (3, 2, 1):
                found = self.classes_named(" ".join(words[j : j + n]))
                if found:
                    return found, n
            return set(), 1

        def classes_at(i: int, span: int = 3) -> set[str]:
            """The classes of the last cue in the first run of cue words within ``span`` words of ``i``
            ("what film genre" → genre, "what kind of film" → genre, "which movies have" → movie)."""
            found, j = set(), i
            while j < len(words) and (found or j < i + span):
                here, n = cue_at(j)
                if here and 0 < j and words[j - 1] in _ARTICLES and words[j + n :] == ["of"]:
                    # A relation's noun before a stranded "of" names the relation, not the class asked for
                    # ("what was E the director of" asks for films; "the genres of the films ..." for genres).
                    break
                if not here:
                    # Only function words may stand between the wh-word and its class ("what are the films");
                    # another word ends the wh-phrase ("which words describe movie X" asks for no movie).
                    if found or (j > i and words[j] not in _FUNCTION_WORDS):
                        break
                    j += 1
                    continue
                found = here
                j += n
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

    def classes_named(self, phrase: str) -> set[str]:
        """The classes a phrase is a cue of ("movies" → Movie), written in the plural or not; a wh-word no cue
        names asks for the classes WordNet says it asks for ("whom" → person)."""
        found = {c for c, cs in self.kb.schema.class_cues.items() if phrase in cs or singular(phrase) in cs}
        return found or set(self.wh_classes.get(phrase, ()))

    def _class_at_edge(self, words: Sequence[str], last: bool) -> set[str]:
        """The classes the first (or last) one to three of ``words`` name, when other words follow (precede)."""
        for n in (3, 2, 1):
            edge = words[-n:] if last else words[:n]
            if len(words) > n and "\x00" not in edge and (found := self.classes_named(" ".join(edge))):
                return found
        return set()

    def leading_class(self, marked: str) -> set[str]:
        """The classes named by the first words of a request that is a noun phrase ("movies starring X");
        ``marked`` has its mentions replaced by NUL, so "X film was written by whom" starts with no class."""
        return self._class_at_edge(re.findall(r"[a-z0-9]+|\x00", marked.lower()), last=False)

    def trailing_class(self, marked: str) -> set[str]:
        """The classes named by the last words of a request with no wh-word ("the scriptwriter of X also wrote
        movies"); ``marked`` has its mentions replaced by NUL, so "describe movie X" ends with no class."""
        words = re.findall(r"[a-z0-9]+|\x00", marked.lower())
        if any(w in WH_WORDS for w in words):
            return set()  # "what were the release dates of X directed films" asks for dates, not films
        return self._class_at_edge(words, last=True)

    def request(self, query: str, mentions: Sequence[Mention], wanted: set[str], vector) -> Request:
        """The request's words outside the mentions (word position, stem) and the mentions' word spans."""
        tokens = [(m.group(0), m.start(), m.end()) for m in re.finditer(r"[a-z0-9]+", query.lower())]
        spans, words = [], []
        for m in mentions:
            inside = [i for i, (_w, a, b) in enumerate(tokens) if a >= m.start and b <= m.end]
            if inside:
                spans.append((inside[0], inside[-1] + 1))
        # Beside a proper name, a common word that names a node may still be a relation word ("who is the
        # manager of Kismet", where "manager" is also a tag): it stays among the words the paths are read from.
        common = {spans[n] for n, m in enumerate(mentions) if n < len(spans) and _is_common_word(m)} \
            if any(_is_name(query, m) for m in mentions) else set()
        for i, (w, _a, _b) in enumerate(tokens):
            if not any(a <= i < b for a, b in spans if (a, b) not in common):
                words.append((i, stem(w)))
        wh = next(([(i, i + 1)] for i, (w, _a, _b) in enumerate(tokens) if w in WH_WORDS
                   and not any(a <= i < b for a, b in spans)), [])
        reader = self.reader
        unknown = [tokens[i][0] for i, s in words if s not in reader.all_stems and s not in reader.related_weight
                   and s not in FUNCTION_WORDS and tokens[i][0] not in self.schema_words
                   and tokens[i][0] not in _FUNCTION_WORDS and not self.classes_named(tokens[i][0])]
        return Request(words, spans, wanted, vector, wh, reader.similar(unknown),
                       {i: w for i, (w, _a, _b) in enumerate(tokens)})

    def __call__(self, query: str) -> TripletQuery:
        mentions = self.linker.mentions(query, skip_words=self.schema_words)
        if not mentions:
            return TripletQuery(query, [], "?x", None, "offline", ["no entity of the KB is named in the query"])
        request = self._request(query, mentions)
        groups = self._groups(mentions)
        ranked = self._rank(groups, mentions, request)
        usable = [t for t in groups if ranked[t]]
        if not usable:
            return TripletQuery(query, [], "?x", None, "offline",
                                ["no relation of the KB leaves the entities named in the query"])
        # Beside a proper name, a common word that happens to name a node is not the request's constant
        # ("who wrote movies together with Todd McFarlane", where "together" is also a film).
        common = set()
        if any(_is_name(query, m) for m in mentions):
            common = {t for t in usable if all(_is_common_word(mentions[n]) for n in groups[t])}
        primary = max(usable, key=lambda t: (t not in common, ranked[t][0].score,
                                             sum(len(mentions[n].text) for n in groups[t]), -groups[t][0]))
        best = ranked[primary][0]
        answer_type = best.path.end
        notes: list[str] = []
        choice = self._joint(usable, groups, mentions, request, best)
        notes.extend(_own_note(mentions[n], scored) for n, scored in choice.items())
        for types in usable if not choice else ():
            fitting = [s for s in ranked[types] if s.path.end == answer_type]
            if not fitting or (types != primary
                               and not self._joins(fitting[0], best, types, primary, request, types in common)):
                continue
            members = groups[types]
            notes.append(f"mentions of type {', '.join(sorted(local_name(t) for t in types))}: relation path "
                         f"'{' / '.join(fitting[0].phrases)}' → {local_name(answer_type)} "
                         f"(score {fitting[0].score:.2f})")
            own = self._own_paths(members, mentions, request, answer_type) if 2 <= len(members) <= 3 else {}
            for n in members:
                choice[n] = own.get(n, fitting[0])
                if n in own:
                    notes.append(_own_note(mentions[n], own[n]))
        tq = TripletQuery(query, self._triplets(mentions, choice), "?x", answer_type, "offline", notes)
        tq.reading = self._reading(mentions, choice, groups, ranked)
        # The primary group's next paths: tried in turn when a reading finds no candidate.
        for other in ranked[primary][1 : 1 + self.alternatives]:
            alt = {n: (other if n in groups[primary] else s) for n, s in choice.items()
                   if n in groups[primary] or s.path.end == other.path.end}
            tq.alternatives.append(TripletQuery(query, self._triplets(mentions, alt), "?x", other.path.end, "offline",
                                                [f"next relation path '{' / '.join(other.phrases)}' → "
                                                 f"{local_name(other.path.end)} (score {other.score:.2f})"]))
        return tq

    def _request(self, query: str, mentions: Sequence[Mention]) -> Request:
        """The request around its mentions: the relation is read from what the query says about its positive
        mentions, so mentions and negated sentences ("D and E were not observed") are taken out."""
        stripped = query
        for m in sorted(mentions, key=lambda m: -m.start):
            stripped = stripped[: m.start] + "\x00" + stripped[m.end :]
        marked = stripped
        # A list of mentions leaves one gap: requests that differ only in what they list read (and embed) alike.
        stripped = " ".join(_LIST_GAP.sub("", stripped).split())
        positive = " ".join(s for s in re.split(r"(?<=[.!?])\s+", stripped) if not _NEGATION.search(s)) or stripped
        # Only a wh-phrase ("which films", "who") or a request that starts or ends with a class ("films starring
        # X", "... also wrote movies") says which class is asked for; a class merely named ("describe movie X")
        # does not.
        wanted = (self.answer_types(stripped, wh_only=True) or self.leading_class(marked)
                  or self.trailing_class(marked))
        return self.request(query, mentions, wanted, self.kb.embed_query(positive))

    def _groups(self, mentions: Sequence[Mention]) -> dict[frozenset, list[int]]:
        """Mentions grouped by their types: mentions that share types share the relation choice (phenotype
        lists have dozens)."""
        index = self.linker.index
        groups: dict[frozenset, list[int]] = {}
        for n, mention in enumerate(mentions):
            types = frozenset(t for c in mention.candidates for t in index.types.get(c.iri, ()))
            if types:
                groups.setdefault(types, []).append(n)
        for types, members in groups.items():
            if 2 <= len(members) <= 3 and any(any(ch.isupper() for ch in mentions[n].text) for n in members):
                # Beside a capitalised name, a lone lower-case word that happens to name a node of the same
                # type ("the creator of the film script for La Belle Noiseuse") is not a second constant.
                groups[types] = [n for n in members if " " in mentions[n].text.strip()
                                 or any(ch.isupper() for ch in mentions[n].text)]
        return groups

    def _rank(self, groups: dict[frozenset, list[int]], mentions: Sequence[Mention],
              request: Request) -> dict[frozenset, list[Scored]]:
        """Each group's grounded relation paths, best first."""
        index = self.linker.index
        ranked: dict[frozenset, list[Scored]] = {}
        listing = any(len(members) > 3 for members in groups.values())
        for types, members in groups.items():
            nodes = [c.iri for n in members for c in mentions[n].candidates]
            spans = [request.mention_positions[n] for n in members]
            # A list of constants of one type (phenotypes of a case) reads as one relation each to the answer.
            paths = self.reader.enumerate(nodes, types, request, spans, max_hops=1 if listing else None)
            ranked[types] = self.reader.rank(paths, request, spans)
            # A name written exactly as a node of one of the group's classes is spelt ("Parents", the film,
            # not the tag "parents") prefers paths from that class.
            exact = {t for n in members for c in mentions[n].candidates if c.name == mentions[n].text
                     for t in index.types.get(c.iri, ())}
            if exact and exact != set(types):
                for scored in ranked[types]:
                    if scored.path.start in exact:
                        scored.score += 0.2
                ranked[types].sort(key=lambda x: (-x.score, len(x.path.steps), x.phrases))
        return ranked

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

    def _path_stems(self, scored: Scored) -> set[str]:
        """The word stems that name the path's relations (labels and alt labels)."""
        return {s for rel, _f in scored.path.steps for s in self.reader.relation_stems.get(rel, ())}

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
            if not any(s in self.reader.all_stems for _p, s in words):
                hi = spans[order[k + 1]][0] if k + 1 < len(order) else 10**9
                words = [(p, s) for p, s in request.words if spans[n][1] <= p < hi]
            if not any(s in self.reader.all_stems for _p, s in words):
                continue
            local = Request(words, [spans[n]], {answer_type}, request.vector, request.answer_at, request.similar,
                            request.surface)
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
                        "score": round(scored.score, 2), "hops": scored.why.get("hops", []), "beat": beat})
        return out

    @staticmethod
    def _triplets(mentions: Sequence[Mention], choice: dict[int, Scored]) -> list[Triplet]:
        triplets: list[Triplet] = []
        for n in sorted(choice):
            mention = mentions[n]
            steps = choice[n].path.steps
            prev: End = End(mention.text)
            for i, (rel, mention_is_head) in enumerate(steps):
                nxt = End("?x") if i == len(steps) - 1 else End(f"?m{n}_{i}")
                head, tail = (prev, nxt) if mention_is_head else (nxt, prev)
                triplets.append(Triplet(head, rel, tail, negated=mention.negated))
                prev = nxt
        return triplets


class LLMTriplets:
    """Triplets from an LLM given the ontology's document structure; the offline reading when the
    LLM fails or says nothing usable (the explanation says which happened)."""

    def __init__(self, kb, llm, offline: OfflineTriplets | None = None) -> None:
        self.kb = kb
        self.llm = llm
        self.offline = offline or OfflineTriplets(kb)
        self.name = f"llm:{llm.model}"

    def __call__(self, query: str) -> TripletQuery:
        from ...llm.client import LLMError
        from ...llm.prompts import triplet_messages
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
        # A reading whose path has no instance in this KB gives way to the offline reader's grounded paths.
        offline = self.offline(query)
        tq.alternatives = [a for a in (offline, *offline.alternatives) if a.triplets]
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
        out = [Hit(qid, h.iri, top_score + (len(reranked) - r) if r < len(top) else h.score, r)
               for r, h in enumerate(reranked)]
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
        self.matcher = matcher or kb.settings.fourstep_matcher
        if self.matcher not in ("hierarchy", "exact"):
            raise KqeError("4StepFocus matcher must be hierarchy or exact")
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

    def candidates(self, tq: TripletQuery, compiled: Compiled) -> tuple[dict[str, float], dict[str, list], dict]:
        """Scored candidates, their support (bindings or hierarchy matches) and what the explanation adds."""
        if self.matcher == "hierarchy":
            # Terms of one hierarchy (a phenotype list): IC-weighted partial credit from the closures and arrays
            # stored with the KB, already fused with the request's text.
            found = hierarchical_scores(self.kb, compiled, tq.query, self.types or self._answer_types(tq),
                                        self.kb.settings.fourstep_negated, self.kb.settings.fourstep_negated_weight,
                                        top=max(5 * self.k, 500))
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
            sign = -self.negation_weight if compiled.units[unit].negated else 1.0
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

    def _attempt(self, tq: TripletQuery, clock: StepClock) -> Attempt:
        """One reading linked, compiled and run."""
        if not tq.triplets:
            return Attempt(tq)
        linked, shown = self.link(tq)
        compiled = compile_query(self.kb.schema, tq, linked, self.mode, self.sparql_limit)
        clock.lap("linking")
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
        own = _constants(compiled)
        excluded = sorted(i for i in scores if i in own)
        scores = {i: s for i, s in scores.items() if i not in own}
        if self.types and scores:
            allowed = set(self.types)
            index = self.linker.index
            scores = {i: s for i, s in scores.items() if index.types.get(i, frozenset()) & allowed}
        return scores, excluded

    def _one(self, qid: str, text: str) -> tuple[list[Hit], dict]:
        clock = StepClock()
        tq = normalise(self.generator(text), self.kb.schema)
        clock.lap("triplets")
        explain: dict = {"triplets": tq.to_json(), "mode": self.mode, "seconds": clock.laps}
        used = self._attempt(tq, clock)
        tried = []
        # A reading that finds nothing gives way to the reader's next one (the next relation path).
        for alternative in tq.alternatives if used.compiled is not None else ():
            if used.scores:
                break
            tried.append(" / ".join(t.relation.rsplit("#", 1)[-1] for t in used.reading.triplets))
            attempt = self._attempt(alternative, clock)
            if attempt.compiled is not None:
                used = attempt
        if used.reading is not tq:
            explain["triplets"] = used.reading.to_json()
            explain["tried"] = tried
        compiled, scores = used.compiled, used.scores
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
        ordered = sorted(scores, key=lambda i: (-round(scores[i], 9), -sims.get(i, 0.0), i))[: self.k]
        hits = [Hit(qid, iri, scores[iri] + sims.get(iri, 0.0) * 1e-3, rank) for rank, iri in enumerate(ordered)]
        explain.setdefault("candidates", len(scores))
        explain["support"] = {iri: used.support.get(iri, [])[:5] for iri in ordered[:20]}
        if self.fallback is not None and len(hits) < self.k:
            hits += self._top_up(qid, text, used.reading, compiled, hits, explain)
        clock.lap("ranking")
        if self.reranker is not None and hits:
            hits, note = self.reranker.rerank(text, hits)
            explain["rerank"] = note
            clock.lap("rerank")
        return hits, explain

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
        extra = [h for h in self.fallback.search(text, qid) if h.iri not in seen and h.iri not in own
                 and (allowed is None or index.types.get(h.iri, frozenset()) & allowed)][: self.k - have]
        if len(extra) < self.k - have:
            # Too few of the fallback's results are left (of the answer type, other than the request's own
            # constants): the rest from a BM25 search over the wanted type.
            taken = seen | own | {h.iri for h in extra}
            if allowed is not None:
                typed = sorted(allowed & set(self.types)) if self.types else sorted(allowed)
            else:
                typed = sorted(self.types or ())
            more = [h for h in self._typed_fallback(tuple(typed)).search(text, qid) if h.iri not in taken]
            extra += more[: self.k - have - len(extra)]
        floor = min((h.score for h in hits), default=0.0) - 1.0
        explain["topped_up"] = len(extra)
        if allowed is not None:
            explain["top_up_type"] = local_name(tq.answer_type)
        return [Hit(qid, h.iri, floor - (j + 1) / (len(extra) + 1), have + j) for j, h in enumerate(extra)]

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
