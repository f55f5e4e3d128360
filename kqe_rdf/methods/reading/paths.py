"""Step 3 of reading: the relation paths that really leave a request's constants (grounded enumeration).

From the linked constants, the relations that really leave them in the KB are listed hop by hop
(``queries/reader_first_hops.rq``, ``queries/reader_next_hops.rq``, or the hop summary stored with the KB:
one (relation, direction, class reached) per path prefix, over at most ``cap`` nodes the prefix reaches), up
to ``max_hops`` hops, both directions. Every path has an instance: a path the data does not have is never
proposed. Beyond the first hop only the ``beam`` prefixes that best fit the request are extended; the
ranking itself is :mod:`.ranking`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from string import Template

from pyoxigraph import Literal, NamedNode

from ...core.caches import per_instance
from ...kb import queries
from ...kb.linking import Mention
from ...kb.ontology import local_name
from ...kb.rdfize import RDF_TYPE
from ...kb.words import phrase_stems
from . import ranking
from .ranking import Scored
from .request import Request
from .words import RelationWords


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


class PathReader:
    """Grounded relation paths from constants (this module), ranked against a request (:mod:`.ranking`)."""

    #: How many solutions of a further hop's walk a listing on a local store reads at most (``walked``): the nodes
    #: their ends reach are a sample of the walk, and a listing only needs which kinds of edge leave them. Without
    #: it a walk that comes back to few nodes reads every edge on the way ("the brands of the products of brand X":
    #: every product of the brand, for one brand).
    WALKED = 40

    def __init__(self, kb, max_hops: int = 3, beam: int = 6, cap: int = 40, hop_penalty: float = 0.25,
                 phrase_vectors: dict | None = None, walked: int = WALKED) -> None:
        self.kb = kb
        self.max_hops = max_hops
        self.beam = beam
        self.cap = cap
        self.walked = walked
        self.hop_penalty = hop_penalty
        #: Which words name which relation (:mod:`.words`).
        self.words = RelationWords(kb, phrase_vectors)
        self._classes = set(kb.schema.classes)
        #: (head class, relation, tail class) the data holds beyond typing noise (a movie named like a genre).
        self.signatures = set(kb.relation_signatures)
        #: Hops already listed, by (constants, path, class reached): a request asks for the same ones again (each
        #: constant's own paths after its group's) and the KB under an open reader never changes.
        self._listed: dict[tuple, list[tuple[str, bool, str]]] = {}

    #: How many hop listings :attr:`_listed` keeps (the oldest go first).
    LISTED = 4096

    # ------------------------------------------------------------------ enumeration

    def _hops(self, nodes: Sequence[str], path: str | None, reached: str | None) -> list[tuple[str, bool, str]]:
        """The (relation, walked head → tail, class reached) kinds of edge that leave the nodes ``path`` reaches
        from ``nodes`` (``nodes`` themselves without a path), remembered (:attr:`_listed`)."""
        key = (tuple(nodes), path, reached)
        found = self._listed.get(key)
        if found is None:
            if len(self._listed) >= self.LISTED:
                del self._listed[next(iter(self._listed))]
            found = self._listed[key] = self._list_hops(nodes, path, reached)
        return list(found)

    def _list_hops(self, nodes: Sequence[str], path: str | None, reached: str | None) -> list[tuple[str, bool, str]]:
        values = " ".join(str(NamedNode(n)) for n in nodes)
        slots = {}
        if path is not None:
            slots = {"constants": f"VALUES ?c {{ {values} }}", "reached": str(NamedNode(reached)), "cap": self.cap,
                     "walk": path if " . " in path or path.startswith("?") else f"?c {path} ?n"}
        names = self.kb.names
        if names.has_hops:
            # The KB's hop summary says which edges leave a node; only the nodes a path reaches are asked for.
            if path is not None:
                nodes = self._first_reached(slots, reached)
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

    def _first_reached(self, slots: dict, reached: str) -> list[str]:
        """The first :attr:`cap` distinct nodes of class ``reached`` the walk in ``slots`` reaches, in the store's
        order. On a local store the walk streams without its type pattern and stops after :attr:`walked` solutions
        (``queries/reader_walked.rq``), and each node's classes come from the name index (the store's for a node
        the index does not know): one store lookup per distinct node instead of one per walked edge, and a walk
        that comes back to a few nodes stops early. A remote store answers ``queries/reader_reached.rq`` whole."""
        store = self.kb.store
        if not hasattr(store, "quads_for_pattern"):  # a remote store answers whole: the LIMIT stays in the query
            text = Template(_body("reader_reached")).substitute(slots)
            return [row["n"].value for row in store.query(text, use_default_graph_as_union=True)]
        types, cls, out = self.kb.names.types, NamedNode(reached), []
        text = Template(_body("reader_walked")).substitute(constants=slots["constants"], walk=slots["walk"],
                                                           walked=self.walked)
        for row in store.query(text, use_default_graph_as_union=True):
            node = row["n"]
            if isinstance(node, Literal):
                continue
            known = types.get(node.value) if isinstance(node, NamedNode) else None
            typed = (reached in known if known is not None
                     else next(iter(store.quads_for_pattern(node, RDF_TYPE, cls, None)), None) is not None)
            if typed:
                out.append(node.value)
                if len(out) >= self.cap:
                    break
        return out

    def first_hops(self, nodes: Sequence[str], starts: set[str]) -> list[Path]:
        """First hops from the constants; where the ontology has a hierarchy on a constant's class, from the
        nodes below it too (the compiled query follows it: "seizure" finds what "focal seizure" has)."""
        found: list[Path] = []
        plain, rest = True, set(nodes)
        for start in sorted(starts):
            below = self.kb.schema.hierarchy_relation(start)
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

    def first_steps_each(self, groups: Sequence[Sequence[str]]) -> list[set[tuple]]:
        """For each group of nodes (a mention's candidates), the first hops that leave it as path steps
        ``((relation, walked head → tail),)``, as :meth:`first_hops` lists them; one pass over a hierarchy's
        arrays where the nodes are all terms of one (a list of phenotypes)."""
        index = self.kb.names
        starts = {t for nodes in groups for n in nodes for t in index.types.get(n, ())}
        if len(starts) == 1 and self.kb.hierarchies and self.kb.schema.hierarchy_relation(start := next(iter(starts))):
            found = self.kb.hierarchies.hops_below_each(start, groups)
            if found is not None:
                return [{((rel, forward),) for rel, forward, cls in hops if self._typed(start, rel, forward, cls)}
                        for hops in found]
        return [{p.steps for p in self.first_hops(nodes, {t for n in nodes for t in index.types.get(n, ())})}
                for nodes in groups]

    def enumerate(self, nodes: Sequence[str], start_classes: Iterable[str], request: Request | None = None,
                  positions: Sequence[tuple[int, int]] = (), max_hops: int | None = None) -> list[Path]:
        """The relation paths (up to ``max_hops``) that really leave ``nodes``; beyond the first hop only
        the ``beam`` prefixes that best fit ``request`` are extended."""
        nodes = sorted(set(nodes))
        if not nodes:
            return []
        starts = set(start_classes)
        out: list[Path] = []
        frontier = self.first_hops(nodes, starts)
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

    #: The share of a hop's steps a second hop must walk back to undo it (``children`` then ``parents``); two
    #: relations that merely share many of their pairs (a film's director is often its writer: 43% in MetaQA) do
    #: not undo each other.
    MIRROR = 0.7

    def returns(self, nodes: Sequence[str], steps: Sequence[tuple[str, bool]]) -> bool:
        """Whether a path comes back to its constants by its structure, so they may be its answer ("the mother of
        X's daughter", "X's spouse's spouse", "the tracks of X's tracks" where X is its own track): every hop is a
        self-loop at a constant or is undone by the next one in the data, and no hop is retraced ("the films of X's
        director" walks ``directed by`` back: X's director's other films, never X)."""
        steps = list(steps)
        if retraces(steps):
            return False
        steps = [s for s in steps if not self._loops(tuple(nodes), s)]
        while steps:
            undone = next((i for i in range(len(steps) - 1) if self._mirrors(steps[i], steps[i + 1])), None)
            if undone is None:
                return False
            del steps[undone : undone + 2]
        return True

    def returning(self, mentions: Sequence[Mention], choice: dict[int, Scored]) -> set[str]:
        """The constants whose path comes back to them by its structure (:meth:`returns`): "the
        mother of X's daughter" may be X; "who wrote the films X directed" is never X, though X wrote one."""
        return {mentions[n].text for n, scored in choice.items()
                if scored.why.get("returns", False)
                or ("returns" not in scored.why
                    and self.returns([c.iri for c in mentions[n].candidates], scored.path.steps))}

    def revisiting(self, mentions: Sequence[Mention], choice: dict[int, Scored]) -> set[str]:
        """The constants the path may pass through: its first hops come back to them by structure ("the release of
        X's track", where X is its own track; "the genre of the release of X's tracks"). "The films of the writer
        of X's director" may not."""
        return {mentions[n].text for n, scored in choice.items()
                if scored.why.get("revisits", False)
                or ("revisits" not in scored.why
                    and any(self.returns([c.iri for c in mentions[n].candidates], scored.path.steps[:i])
                            for i in range(1, len(scored.path.steps))))}

    def _loops(self, nodes: tuple[str, ...], step: tuple[str, bool]) -> bool:
        return step[0] in self._looped(nodes)

    @per_instance(4096)  # the KB under an open reader never changes
    def _looped(self, nodes: tuple[str, ...]) -> frozenset[str]:
        """The relations that link one of ``nodes`` to itself: one store query answers every hop tried from them."""
        values = "VALUES ?c { " + " ".join(str(NamedNode(n)) for n in nodes) + " }"
        text = Template(_body("reader_loops")).substitute(constants=values)
        return frozenset(row["p"].value for row in self.kb.store.query(text, use_default_graph_as_union=True))

    @per_instance(4096)
    def _mirrors(self, first: tuple[str, bool], second: tuple[str, bool]) -> bool:
        text = Template(_body("reader_mirror")).substitute(first=walk([first], "?a", "?b"),
                                                           back=walk([second], "?b", "?a"), cap=2000)
        row = next(iter(self.kb.store.query(text, use_default_graph_as_union=True)))
        steps, back = int(row["steps"].value), int(row["back"].value) if row["back"] is not None else 0
        return steps > 0 and back >= self.MIRROR * steps

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

    # ------------------------------------------------------------------ a request's groups of constants

    def groups(self, mentions: Sequence[Mention], index) -> dict[frozenset, list[int]]:
        """Mentions grouped by their types: mentions that share types share the relation choice (phenotype
        lists have dozens). ``index``: the linker's name index (node → its types)."""
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

    def ranked(self, groups: dict[frozenset, list[int]], mentions: Sequence[Mention], request: Request,
               index) -> dict[frozenset, list[Scored]]:
        """Each group's grounded relation paths, best first (``index``: the linker's name index, for the classes
        a name is spelt as)."""
        ranked: dict[frozenset, list[Scored]] = {}
        listing = any(len(members) > 3 for members in groups.values())
        for types, members in groups.items():
            nodes = [c.iri for n in members for c in mentions[n].candidates]
            spans = [request.mention_positions[n] for n in members]
            # A list of constants of one type (phenotypes of a case) reads as one relation each to the answer.
            paths = self.enumerate(nodes, types, request, spans, max_hops=1 if listing else None)
            # A name written exactly as a node of one of the group's classes is spelt ("Parents", the film,
            # not the tag "parents") prefers paths from that class (the rule "starts at the class a name is spelt as").
            exact = frozenset(t for n in members for c in mentions[n].candidates if c.name == mentions[n].text
                              for t in index.types.get(c.iri, ()))
            ranked[types] = self.rank(paths, request, spans,
                                             written=exact if exact and exact != set(types) else frozenset())
        return ranked

    def from_graph(self, ranked: list[Scored], members: list[int], mentions: Sequence[Mention],
                    wanted: set[str]) -> Scored | None:
        """The relation the graph says links the constants to the answer class when no word names one: of the
        one-hop paths to a wanted class, the one that leaves most of the constants, then the one with most edges
        between the two classes ("seizures and microcephaly" → diseases that have them; "Tom Hanks, Meg Ryan" →
        films they starred in). Where no one-hop path reaches the class asked for, the best longer path to it
        ("what genre is X" for a film with no genre of its own). Without an answer class, the one relation that
        leaves the constants when there is only one ("who are painters": their holders); else None.

        >>> from kqe_rdf.methods.reading import OfflineTriplets
        >>> OfflineTriplets(example_kb())("Gran Torino").notes[0][:69]
        "no word names a relation: read from the graph, 'directed by' → Person"
        """
        options = [s for s in ranked if len(s.path.steps) == 1 and (s.path.end in wanted or not wanted)]
        if not options and wanted and (longer := [s for s in ranked if s.path.end in wanted]):
            why = f"no word names a relation: the best path to the class asked for ({local_name(longer[0].path.end)})"
            return Scored(longer[0].path, longer[0].score, longer[0].phrases,
                          {**longer[0].why, "read from": why, "source": "graph"}, longer[0].confidence)
        if not options or (not wanted and len({s.path.steps for s in options}) > 1):
            return None  # which of the constants' relations, to which class, the graph cannot tell
        leaving: dict[tuple, int] = {}
        for steps in self.first_steps_each([[c.iri for c in mentions[n].candidates] for n in members]):
            for step in steps:
                leaving[step] = leaving.get(step, 0) + 1
        edges = self.kb.relation_edges

        def count(s: Scored) -> int:
            (rel, forward), = s.path.steps
            head, tail = (s.path.start, s.path.end) if forward else (s.path.end, s.path.start)
            return edges.get((head, rel, tail), 0)

        best = max(options, key=lambda s: (leaving.get(s.path.steps, 0), count(s), s.score))
        shown = (f"no word names a relation: read from the graph, '{best.phrases[0]}' → "
                 f"{local_name(best.path.end)} leaves {leaving.get(best.path.steps, 0)} of the {len(members)} "
                 f"constant(s) of this class (of {len(mentions)} linked) and has the most edges between the two "
                 f"classes ({count(best):,})")
        hops = [{"relation": best.phrases[0], "how": f"graph, {count(best):,} edges", "words": []}]
        return Scored(best.path, best.score, best.phrases,
                      {**best.why, "hops": hops, "read from": shown, "source": "graph"}, best.confidence)

    # ------------------------------------------------------------------ ranking

    def label_stems(self, cls: str) -> set[str]:
        term = self.kb.schema.classes.get(cls)
        return phrase_stems(term.label) if term else set()

    def phrase(self, rel: str, forward: bool) -> str:
        schema = self.kb.schema
        if forward:
            return schema.relations[rel].label if rel in schema.relations else local_name(rel)
        return schema.inverse_label(rel)

    def rank(self, paths: Sequence[Path], request: Request, positions: Sequence[tuple[int, int]] = (),
             prefix: bool = False, written: frozenset[str] = frozenset()) -> list[Scored]:
        """Paths best first (:func:`.ranking.rank`), with what it reads of them here: their phrases, the encoder's
        similarity of each to the request, the stems of their answer classes' labels."""
        if not paths:
            return []
        phrase_lists = [[self.phrase(r, f) for r, f in p.steps] for p in paths]
        label_stems = {p.end: self.label_stems(p.end) for p in paths}
        sims: dict[str, float] = {}
        if request.vector is not None:
            every = sorted({x for ph in phrase_lists for x in ph} | {" ".join(ph) for ph in phrase_lists})
            sims = dict(zip(every, (float(s) for s in self.words.vectors(every) @ request.vector)))
        return ranking.rank(self, paths, phrase_lists, sims, label_stems, request, positions, prefix, written)


def retraces(steps: Sequence[tuple[str, bool]]) -> bool:
    """Whether a hop walks the previous one back ("the films of X's director": ``directed by`` and back).

    >>> retraces([("d", False), ("d", True)]), retraces([("t", True), ("t", True)])
    (True, False)
    """
    return any(a == b and fa != fb for (a, fa), (b, fb) in zip(steps, steps[1:]))


def walk(steps: Sequence[tuple[str, bool]], start: str = "?c", end: str = "?n") -> str:
    """The hops as triple patterns from ``start`` to ``end`` through ``?w1``, ``?w2``, ... (IRIs serialised
    by pyoxigraph)."""
    names = [start] + [f"?w{i}" for i in range(1, len(steps))] + [end]
    return " . ".join(f"{a} {NamedNode(rel)} {b}" if forward else f"{b} {NamedNode(rel)} {a}"
                      for (rel, forward), a, b in zip(steps, names, names[1:]))


def property_path(steps: Sequence[tuple[str, bool]]) -> str:
    """``<p1>/^<p2>``: the hops as a SPARQL property path (IRIs serialised by pyoxigraph)."""
    return "/".join(("" if forward else "^") + str(NamedNode(rel)) for rel, forward in steps)


def _body(name: str) -> str:
    return "\n".join(line for line in queries.load(name).splitlines() if not line.startswith("#")).strip()

