"""The grounded path reader: relation paths that really leave a request's constants, ranked by the request.

The offline 4StepFocus reader (:class:`~kqe_rdf.fourstep.OfflineTriplets`) reads a request as
relation paths from the nodes it names to the answer. This module finds and ranks those paths:

1. *Grounded enumeration*: from the linked constants, the relations that really leave them in the
   KB are listed hop by hop (``queries/reader_first_hops.rq``, ``queries/reader_next_hops.rq``: one
   ``SELECT DISTINCT`` of (relation, direction, class reached) per path prefix, over at most ``cap``
   nodes the prefix reaches), up to ``max_hops`` hops, both directions. Every path it returns has an
   instance: a path the data does not have is never proposed.
2. *Ranking* by how the path's phrases align with the request:

   - lexical: each hop's relation is named by its ``rdfs:label`` and ``skos:altLabel`` phrases (and
     those of its inverse); a hop whose words (stemmed) the request uses is *supported*, and a word
     of the request that names some relation but no hop of the path is *uncovered*;
   - order: the hop named nearest to the constant comes first ("who directed the films starred by X"
     starts with starring);
   - the answer class the wh-phrase asks for ("which films", "who", "when") must be the path's end
     class (the ontology's class cues, ``skos:altLabel`` on classes);
   - embedding similarity of the hop phrases with the request (as the schema-only reader had), a
     tie-breaker that also reads phrasings no label names.

Nothing here names a relation or a class of a particular KB: words come from the ontology, paths
from the data.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from string import Template

import numpy as np
from pyoxigraph import NamedNode

from ...kb import queries
from ...kb.lexicon import WEIGHTS
from ...kb.phrases import stored_phrase_vectors
from .compiler import _hierarchy
from ...kb.ontology import local_name

#: Words of relation phrases that say nothing about which relation is meant.
FUNCTION_WORDS = frozenset("a an the of by in on at to for with from has have had is are was were be been "
                           "its it this that which who what s do does did doe".split())

_WORD = re.compile(r"[a-z0-9]+")
#: What a word supports a hop with when another hop of the path has read it already.
REUSED = 0.5
#: How near a request's word must be to a relation's phrases, and how much nearer than to any other relation's,
#: to mean it by the encoder alone (all-MiniLM-L6-v2 cosines: unrelated words sit at 0.25-0.45).
SIMILAR = 0.55
SIMILAR_MARGIN = 0.1
_SUFFIXES = ("ings", "ing", "ers", "ors", "er", "or", "ed", "en", "es", "s")


def stem(word: str) -> str:
    """A light English stemmer, enough to match relation words across forms: "directed", "director",
    "directors" → "direct"; "starred", "starring", "stars" → "star"; "written", "writer" → "writ"."""
    w = word.lower()
    for suffix in _SUFFIXES:
        if w.endswith(suffix) and len(w) - len(suffix) >= 3:
            w = w[: -len(suffix)]
            break
    if len(w) >= 4 and w[-1] == w[-2] and w[-1] not in "lsz":
        w = w[:-1]
    if len(w) >= 4 and w.endswith("e"):
        w = w[:-1]
    return w


def phrase_stems(phrase: str) -> set[str]:
    return {stem(w) for w in _WORD.findall(phrase.lower()) if w not in FUNCTION_WORDS}


@dataclass(frozen=True)
class Path:
    """A relation path from a constant: hops of (stored relation IRI, walked head → tail), and the classes
    along it (``classes[0]`` the constant's, ``classes[-1]`` the answer's)."""

    steps: tuple[tuple[str, bool], ...]
    classes: tuple[str, ...]

    @property
    def end(self) -> str:
        return self.classes[-1]

    @property
    def start(self) -> str:
        return self.classes[0]


@dataclass
class Scored:
    path: Path
    score: float
    phrases: list[str]
    why: dict = field(default_factory=dict)


@dataclass
class Request:
    """What the ranking reads from a request: its words (position, stem) outside the mentions, the word
    positions of the mentions, the wanted answer classes and the request's vector."""

    words: list[tuple[int, str]]
    mention_positions: list[tuple[int, int]]
    wanted: set[str]
    vector: np.ndarray | None
    #: Word spans of the wh-word that asks for the answer (none when the request has no wh-word).
    answer_at: list[tuple[int, int]] = field(default_factory=list)
    #: Words of this request that mean a relation by the encoder alone (:meth:`PathReader.similar`), in the shape
    #: of :attr:`PathReader.related`: ``{relation: {stem: [how, weight, word]}}``.
    similar: dict[str, dict[str, list]] = field(default_factory=dict)
    #: The request's words as written, by position (for explanations).
    surface: dict[int, str] = field(default_factory=dict)


class PathReader:
    """Grounded relation paths from constants, ranked against a request (see the module docstring)."""

    def __init__(self, kb, max_hops: int = 3, beam: int = 6, cap: int = 40, hop_penalty: float = 0.25,
                 phrase_vectors: dict | None = None) -> None:
        self.kb = kb
        self.max_hops = max_hops
        self.beam = beam
        self.cap = cap
        self.hop_penalty = hop_penalty
        self._phrase_vectors: dict[str, np.ndarray] = phrase_vectors if phrase_vectors is not None else {}
        schema = kb.schema
        phrases: dict[str, set[str]] = {}
        for row in kb.store.query(queries.load("relation_phrases"), use_default_graph_as_union=True):
            phrases.setdefault(row["property"].value, set()).add(row["phrase"].value)
        self.relation_phrases = phrases
        #: Each relation's phrases and its inverse's (direction is the data's business).
        named: dict[str, set[str]] = {}
        for iri, rel in schema.relations.items():
            named[iri] = phrases.get(iri, set()) | {rel.label}
            if rel.inverse:
                named[iri] |= phrases.get(rel.inverse, set()) | {schema.label(rel.inverse)}
        #: Stems naming each relation.
        self.relation_stems: dict[str, set[str]] = {iri: set().union(*map(phrase_stems, ps)) for iri, ps in named.items()}
        self.all_stems = set().union(*self.relation_stems.values()) if self.relation_stems else set()
        #: Stems of words related to each relation's words (WordNet, :mod:`kqe_rdf.kb.lexicon`): ``[how, weight,
        #: word]``, where no relation spells the word itself.
        self.related = {iri: {s: v for s, v in table.items() if s not in self.all_stems}
                        for iri, table in _lexicon(named).items()}
        self.named = named
        self._words: dict[str, np.ndarray] = {}
        self.related_weight: dict[str, float] = {}
        for table in self.related.values():
            for s, (_how, weight, _word) in table.items():
                self.related_weight[s] = max(weight, self.related_weight.get(s, 0.0))
        self._classes = set(schema.classes)
        #: (head class, relation, tail class) the data holds beyond typing noise (a movie named like a genre).
        self.signatures = set(kb.relation_signatures)

    # ------------------------------------------------------------------ enumeration

    def _hops(self, nodes: Sequence[str], path: str | None, reached: str | None) -> list[tuple[str, bool, str]]:
        values = " ".join(str(NamedNode(n)) for n in nodes)
        slots = {}
        if path is not None:
            slots = {"constants": f"VALUES ?c {{ {values} }}", "reached": str(NamedNode(reached)), "cap": self.cap,
                     "walk": path if " . " in path or path.startswith("?") else f"?c {path} ?n"}
        names = self.kb.names
        if names.has_hops:
            # The KB's hop summary says which edges leave a node; only the nodes a path reaches are asked for.
            if path is not None:
                text = Template(_body("reader_reached")).substitute(slots)
                nodes = [row["n"].value for row in self.kb.store.query(text, use_default_graph_as_union=True)]
            return sorted((rel, forward, cls) for rel, forward, cls in names.hops(nodes)
                          if cls in self._classes and rel in self.kb.schema.relations)
        if path is None:
            text = Template(_body("reader_first_hops")).substitute(constants=f"VALUES ?n {{ {values} }}")
        else:
            text = Template(_body("reader_next_hops")).substitute(slots)
        out = []
        for row in self.kb.store.query(text, use_default_graph_as_union=True):
            cls = row["class"].value
            if cls in self._classes and row["relation"].value in self.kb.schema.relations:
                out.append((row["relation"].value, row["forward"].value == "true", cls))
        return sorted(set(out))

    def _first_hops(self, nodes: Sequence[str], starts: set[str]) -> list[Path]:
        """First hops from the constants; where the ontology has a hierarchy on a constant's class, from the
        nodes below it too (the compiled query follows it: "seizure" finds what "focal seizure" has)."""
        found: list[Path] = []
        plain, rest = True, set(nodes)
        for start in sorted(starts):
            below = _hierarchy(self.kb.schema, start)
            if below:
                plain = False
                # The hierarchy's arrays stored with the KB say which relations leave the terms below these;
                # without them the hierarchy is walked (slow from dozens of phenotypes).
                stored = self.kb.hierarchies.hops_below(start, nodes) if self.kb.hierarchies else None
                if stored is not None:
                    hops, covered = stored
                    rest -= covered
                else:
                    hops = self._hops(nodes, "^" + str(NamedNode(below)) + "*", start)
                for rel, forward, cls in hops:
                    if self._typed(start, rel, forward, cls):
                        found.append(Path(((rel, forward),), (start, cls)))
        if (plain or len(starts) > 1) and rest:
            for rel, forward, cls in self._hops(sorted(rest), None, None):
                for start in self._start_classes(rel, forward, starts):
                    if self._typed(start, rel, forward, cls):
                        found.append(Path(((rel, forward),), (start, cls)))
        return sorted(set(found), key=lambda p: (p.steps, p.classes))

    def enumerate(self, nodes: Sequence[str], start_classes: Iterable[str], request: Request | None = None,
                  positions: Sequence[tuple[int, int]] = (), max_hops: int | None = None) -> list[Path]:
        """The relation paths (up to ``max_hops``) that really leave ``nodes``; beyond the first hop only
        the ``beam`` prefixes that best fit ``request`` are extended."""
        nodes = sorted(set(nodes))
        if not nodes:
            return []
        starts = set(start_classes)
        out: list[Path] = []
        frontier = self._first_hops(nodes, starts)
        out += frontier
        for _hop in range(1, self.max_hops if max_hops is None else max_hops):
            if request is not None and len(frontier) > self.beam:
                frontier = [s.path for s in self.rank(frontier, request, positions, prefix=True)[: self.beam]]
            nxt = []
            for prefix in frontier:
                for rel, forward, cls in self._hops(nodes, self._grounding_path(prefix), prefix.end):
                    if self._typed(prefix.end, rel, forward, cls):
                        nxt.append(Path(prefix.steps + ((rel, forward),), prefix.classes + (cls,)))
            out += nxt
            frontier = nxt
        return out

    def reached(self, nodes: Sequence[str], path: Path, cap: int = 20000) -> set[str]:
        """The nodes ``path`` reaches from ``nodes`` (at most ``cap``): what the path's answer can be."""
        text = Template(_body("reader_reached")).substitute(
            constants="VALUES ?c { " + " ".join(str(NamedNode(n)) for n in nodes) + " }",
            walk=walk(path.steps), reached=str(NamedNode(path.end)), cap=cap)
        return {row["n"].value for row in self.kb.store.query(text, use_default_graph_as_union=True)}

    def _modified(self, words: Sequence[tuple[int, str]], path: Path, covered: set[str]) -> set[int]:
        """Positions of the words after an adjective the path reads as one of its relations (a pertainym:
        "national" to "country"), up to the next function word or relation word: the noun phrase it modifies."""
        adjectives = {s for rel, _f in path.steps for s, (how, _w, _word) in self.related.get(rel, {}).items()
                      if how == "pertainym" and s in covered}
        out, after = set(), False
        for pos, s in sorted(words):
            if s in FUNCTION_WORDS or s in self.all_stems:
                after = False
            elif after:
                out.add(pos)
            if s in adjectives:
                after = True
        return out

    def similar(self, words: Sequence[str]) -> dict[str, dict[str, list]]:
        """Relations that words of a request mean by the encoder, where neither a label nor WordNet says
        ("kid" is 0.58 from "children"): a word counts for the relation whose phrases it is nearest to when
        it is near enough (:data:`SIMILAR`) and clearly nearer than to any other (:data:`SIMILAR_MARGIN`)."""
        words = sorted({w for w in words if len(w) > 2})
        if not words or not self.named:
            return {}
        owners = [(iri, p) for iri, ps in sorted(self.named.items()) for p in sorted(ps)]
        phrases = self._vectors([p for _i, p in owners])
        new = [w for w in words if w not in self._words]
        if new:
            self._words.update(zip(new, self.kb.encoder.encode(new)))
        out: dict[str, dict[str, list]] = {}
        for word in words:
            best: dict[str, tuple[float, str]] = {}
            for (iri, phrase), sim in zip(owners, phrases @ self._words[word]):
                if sim > best.get(iri, (-1.0, ""))[0]:
                    best[iri] = (float(sim), phrase)
            ranked = sorted(best.items(), key=lambda kv: -kv[1][0])
            (iri, (top, phrase)), second = ranked[0], (ranked[1][1][0] if len(ranked) > 1 else 0.0)
            if top >= SIMILAR and top - second >= SIMILAR_MARGIN:
                weight = round(min(top, WEIGHTS["synonym"]), 2)
                out.setdefault(iri, {})[stem(word)] = ["similarity", weight,
                                                       f"{word} (similarity {top:.2f} to {phrase})"]
        return out

    def _typed(self, at: str, rel: str, forward: bool, reached: str) -> bool:
        """Whether the hop's classes are a signature of the data (not typing noise); true without signatures."""
        if not self.signatures:
            return True
        return ((at, rel, reached) if forward else (reached, rel, at)) in self.signatures

    def _grounding_path(self, prefix: Path) -> str:
        # From the constants themselves: following a hierarchy's closure from dozens of phenotypes at every
        # hop costs seconds, and the first hop has already looked below them. Written as triple patterns,
        # not a property path, so the LIMIT stops the walk early instead of after every node it reaches.
        return walk(prefix.steps)

    def _start_classes(self, rel: str, forward: bool, starts: set[str]) -> list[str]:
        """The constant's class for a first hop: the one the relation's domain (range, walked backwards)
        admits, when the constant has several."""
        if len(starts) <= 1:
            return sorted(starts)
        r = self.kb.schema.relations.get(rel)
        expected = (r.domain if forward else r.range) if r else None
        fitting = sorted(c for c in starts if expected and c in self.kb.schema.subclasses(expected))
        return fitting or sorted(starts)

    # ------------------------------------------------------------------ ranking

    def _label_stems(self, cls: str) -> set[str]:
        term = self.kb.schema.classes.get(cls)
        return phrase_stems(term.label) if term else set()

    def phrase(self, rel: str, forward: bool) -> str:
        schema = self.kb.schema
        if forward:
            return schema.relations[rel].label if rel in schema.relations else local_name(rel)
        return schema.inverse_label(rel)

    def _vectors(self, phrases: Sequence[str]) -> np.ndarray:
        if not self._phrase_vectors:
            self._phrase_vectors.update(stored_phrase_vectors(self.kb))
        missing = [p for p in phrases if p not in self._phrase_vectors]
        if missing:
            for p, v in zip(missing, self.kb.encoder.encode(missing)):
                self._phrase_vectors[p] = v
        return np.stack([self._phrase_vectors[p] for p in phrases])

    def rank(self, paths: Sequence[Path], request: Request, positions: Sequence[tuple[int, int]] = (),
             prefix: bool = False) -> list[Scored]:
        """Paths best first. ``positions``: the word spans of the constant(s) the paths leave (for the hop
        order); ``prefix``: the paths are beginnings, so neither the answer class nor uncovered words count."""
        if not paths:
            return []
        phrase_lists = [[self.phrase(r, f) for r, f in p.steps] for p in paths]
        sims: dict[str, float] = {}
        if request.vector is not None:
            all_phrases = sorted({x for ph in phrase_lists for x in ph} | {" ".join(ph) for ph in phrase_lists})
            sims = dict(zip(all_phrases, (float(s) for s in self._vectors(all_phrases) @ request.vector)))
        spans = list(positions) or request.mention_positions
        out = []
        for path, phrases in zip(paths, phrase_lists):
            # The word naming the answer's class names the answer, not a relation: it need not be covered, and
            # where the wh-phrase asks for that class it supports no hop ("which disease" does not support
            # "associated with disease").
            own = set() if prefix else self._label_stems(path.end)
            asked = own if path.end in request.wanted else set()
            words = [(pos, s) for pos, s in request.words if s not in asked]
            evidence = {s for _, s in words if s in self.all_stems and s not in own}
            # Words that name no relation but are related to one ("dad" to parents) are weaker evidence.
            weights = dict(self.related_weight)
            for table in request.similar.values():
                for st, (_how, weight, _word) in table.items():
                    weights[st] = max(weight, weights.get(st, 0.0))
            soft = {s: weights[s] for _, s in words if s in weights and s not in own}
            unsupported, places, covered, read = 0.0, [], set(), []
            used: dict[int, frozenset] = {}  # word position → the relation (with its inverse) that read it
            hops: list[dict] = []  # what each hop was read from, for the explanation
            extra = 0.0
            for hop, (rel, _forward) in enumerate(path.steps, 1):
                stems = self.relation_stems.get(rel, set())
                hits = [pos for pos, s in words if s in stems]
                covered |= stems & evidence
                related = {**self.related.get(rel, {}), **request.similar.get(rel, {})}
                covered |= soft.keys() & related.keys()
                # The hop's support: a word of its phrases the request uses, else a word related to one; a word a
                # hop of another relation has read already counts half ("works" in "works at company" and "works in
                # city" names one of them; "share directors" names both hops there and back).
                pair = frozenset({rel, self.kb.schema.relations[rel].inverse or rel}) \
                    if rel in self.kb.schema.relations else frozenset({rel})
                fresh = {p for p in set(hits) if used.get(p, pair) == pair}
                support = (1.0 if fresh else REUSED) if hits else 0.0
                # A wh-word asks for the answer: it can name the last hop only.
                near = [(related[s][1] * (1.0 if used.get(pos, pair) == pair else REUSED), pos, s) for pos, s in words
                        if s in related and s in soft and (hop == len(path.steps) or related[s][0] != "wh")]
                weight = max((w for w, _p, _s in near), default=0.0)
                read += [related[s][2] for _w, _p, s in near if related[s][2] not in read]
                shown = {"relation": self.phrase(rel, _forward), "how": "exact",
                         "words": [request.surface.get(p, s) for p, s in words if p in hits]}
                if weight > support:
                    hits = [pos for w, pos, _s in near if w == weight]
                    support = weight
                    at, best = next((p, s) for w, p, s in near if w == weight)
                    how = related[best][2].partition(" (")[2].rstrip(")")  # "synonym of director"
                    shown = {"relation": shown["relation"], "how": f"{how}, {weight:.2f}",
                             "words": [request.surface.get(at, best)]}
                if not hits:
                    shown = {"relation": shown["relation"], "how": "not named", "words": []}
                hops.append(shown)
                if hop > 1:
                    # A further hop costs less the more a word no earlier hop read names it ("X's dad's offspring").
                    named = support if hits and not set(hits) & used.keys() else 0.0
                    extra += self.hop_penalty * (1.0 - named)
                used.update((p, pair) for p in hits if p not in used)
                if hits:
                    unsupported += 1.0 - support
                if hits:
                    # Where the request names the hop: towards the constant (negative) or the answer's wh-word.
                    places.append((frozenset(stems) or frozenset([rel]),
                                   [_distance(p, spans) - _distance(p, request.answer_at) for p in hits]))
                else:
                    unsupported += 1
            # The hop named nearest the constant comes first, the one nearest the wh-word last: a hop all of
            # whose words lie answer-side of all words of a later (different) hop is out of order.
            inversions = sum(1 for i in range(len(places)) for j in range(i + 1, len(places))
                             if places[i][0] != places[j][0] and min(places[i][1]) > max(places[j][1]))
            # An adjective read as a relation names the noun it modifies too ("the Italian car maker": a
            # country's maker, not also some other relation of "maker").
            excused = self._modified(words, path, covered)
            unread = {s: soft[s] for p, s in words
                      if s in soft and s not in evidence and s not in covered and p not in excused}
            uncovered = 0.0 if prefix else len(evidence - covered) + sum(unread.values())
            similarity = 0.0
            if sims:
                similarity = (min(sims[p] for p in phrases) + sims[" ".join(phrases)]) / 2
            score = (-1.0 * unsupported - 1.0 * uncovered - 0.3 * inversions
                     - extra + 0.5 * similarity)
            why = {"unsupported": round(unsupported, 2), "uncovered": round(uncovered, 2), "inversions": inversions,
                   "similarity": round(similarity, 3)}
            if read:
                why["related words"] = read
            why["hops"] = hops
            out.append(Scored(path, score, phrases, why))
        out.sort(key=lambda s: (-s.score, len(s.path.steps), s.phrases))
        if not prefix and request.wanted:
            typed = [s for s in out if s.path.end in request.wanted]
            if typed:
                return typed
        return out


_LEXICONS: dict[tuple, dict] = {}


def _lexicon(named: dict[str, set[str]]) -> dict:
    """The WordNet table of :mod:`kqe_rdf.kb.lexicon` for these relation phrases, made once per process."""
    key = tuple(sorted((iri, tuple(sorted(ps))) for iri, ps in named.items()))
    if key not in _LEXICONS:
        from ...kb.lexicon import build_lexicon

        _LEXICONS[key] = build_lexicon(named, stem, FUNCTION_WORDS)
    return _LEXICONS[key]


def walk(steps: Sequence[tuple[str, bool]], start: str = "?c", end: str = "?n") -> str:
    """The hops as triple patterns from ``start`` to ``end`` through ``?w1``, ``?w2``, ... (IRIs serialised
    by pyoxigraph)."""
    names = [start] + [f"?w{i}" for i in range(1, len(steps))] + [end]
    return " . ".join(f"{a} {NamedNode(rel)} {b}" if forward else f"{b} {NamedNode(rel)} {a}"
                      for (rel, forward), a, b in zip(steps, names, names[1:]))


def property_path(steps: Sequence[tuple[str, bool]]) -> str:
    """``<p1>/^<p2>``: the hops as a SPARQL property path (IRIs serialised by pyoxigraph)."""
    return "/".join(("" if forward else "^") + str(NamedNode(rel)) for rel, forward in steps)


def _distance(position: int, spans: Sequence[tuple[int, int]]) -> int:
    """Words between ``position`` and the nearest span (0 inside one, or without spans)."""
    if not spans:
        return 0
    return min(start - position if position < start else position - end + 1 if position >= end else 0
               for start, end in spans)


def _body(name: str) -> str:
    return "\n".join(line for line in queries.load(name).splitlines() if not line.startswith("#")).strip()

