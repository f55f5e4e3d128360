"""Class hierarchies, computed once with the KB: closures, information content, and IC-weighted matching.

Where the ontology declares an ``owl:TransitiveProperty`` from a class to itself
(HPO ``is a`` on phenotypes, a category tree, GO ``is_a``), the KB build stores,
in ``<kb>/hierarchy/``:

- the reflexive-transitive closure of that relation (every term → its ancestors),
  also as ``kqe:subsumedBy`` triples in the named graph :data:`CLOSURE_GRAPH`, so
  compiled SPARQL follows a hierarchy without walking it at query time;
- for every stored *annotation* relation between another class and the hierarchy
  class (``Disease hasPhenotype Phenotype``), the annotated nodes × ancestor
  terms matrix, and each term's information content from the KB's own counts:
  ``IC(t) = -log(share of annotated nodes annotated with t or a descendant)``.

:class:`HierarchyMatch` then scores every annotated node against a set of
requested terms at once (numpy over the stored matrix): each term earns the IC of
its most informative common ancestor with the node's annotations (Resnik), so a
node annotated with a more specific or a sibling term gets partial credit.

>>> ic(np.array([4, 2, 1]), 4).round(3).tolist()
[0.0, 0.693, 1.386]
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from string import Template

import numpy as np
from pyoxigraph import NamedNode, Quad

from . import queries
from .ontology import CORE, Schema, local_name

CLOSURE_GRAPH = "https://w3id.org/kqe/graph/closure"
SUBSUMED_BY = CORE + "subsumedBy"
FOLDER = "hierarchy"
#: Version of the stored arrays; a KB built with another is matched by exact paths until rebuilt.
FORMAT = 2

log = logging.getLogger(__name__)


def ic(counts: np.ndarray, total: int) -> np.ndarray:
    """Information content of terms annotated (directly or below) to ``counts`` of ``total`` nodes.

    A term no node uses gets the IC of a single use (it is at least that rare)."""
    return np.log(max(total, 1) / np.maximum(counts, 1))


def declared_hierarchies(schema: Schema) -> list[tuple[str, str]]:
    """(transitive relation, class) pairs: relations the ontology declares transitive from a class to itself."""
    return sorted((r.iri, r.domain) for r in schema.relations.values()
                  if r.transitive and r.domain and r.domain == r.range)


def annotation_relations(schema: Schema, signatures: Iterable[Sequence[str]], hierarchy: str,
                         term_class: str) -> list[tuple[str, str, bool]]:
    """Stored relations between another class and the hierarchy's class: (relation, other class, terms are tails)."""
    found = set()
    for head, rel, tail, *_count in signatures:
        if rel == hierarchy:
            continue
        if tail == term_class and head != term_class:
            found.add((rel, head, True))
        elif head == term_class and tail != term_class:
            found.add((rel, tail, False))
    return sorted(found)


def relation_pairs(store, relation: str) -> list[tuple[str, str]]:
    """Every (head, tail) edge of one relation."""
    text = queries.with_values(queries.load("hierarchy_edges"), relation=[NamedNode(relation)])
    return [(r["head"].value, r["tail"].value) for r in store.query(text, use_default_graph_as_union=True)]


def _csr(rows: np.ndarray, cols: np.ndarray, n_rows: int) -> tuple[np.ndarray, np.ndarray]:
    """(indptr, indices) of a boolean sparse matrix given its (row, column) cells, duplicates dropped."""
    # One int64 key per cell, sorted, first of each run kept: np.unique(axis=0) on pairs is ~30x slower.
    width = int(cols.max()) + 1 if len(cols) else 1
    keys = np.sort(rows.astype(np.int64) * width + cols.astype(np.int64))
    keys = keys[np.r_[True, keys[1:] != keys[:-1]]] if len(keys) else keys
    row, col = np.divmod(keys, width)
    indptr = np.r_[0, np.cumsum(np.bincount(row, minlength=n_rows))].astype(np.int64)
    return indptr, col.astype(np.int32)


def gather(ptr: np.ndarray, idx: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The entries of ``rows`` of a CSR matrix (``ptr``, ``idx``) one after the other, and each row's count
    (vectorised: no Python loop over the rows).

    >>> gather(np.array([0, 2, 3, 5]), np.array([7, 8, 9, 4, 5]), np.array([2, 0]))[0].tolist()
    [4, 5, 7, 8]
    """
    rows = np.asarray(rows, dtype=np.int64)
    sizes = ptr[rows + 1] - ptr[rows]
    cells = np.arange(int(sizes.sum())) - np.repeat(np.cumsum(sizes) - sizes - ptr[rows], sizes)
    return idx[cells], sizes


def closure(terms: list[str], edges: list[tuple[str, str]]) -> list[list[int]]:
    """Each term's ancestors, itself included (iterative, so deep or cyclic hierarchies are safe)."""
    index = {t: i for i, t in enumerate(terms)}
    parents: list[list[int]] = [[] for _ in terms]
    for child, parent in edges:
        parents[index[child]].append(index[parent])
    done: list[list[int] | None] = [None] * len(terms)
    for start in range(len(terms)):
        if done[start] is not None:
            continue
        stack, on_path = [start], {start}
        while stack:
            node = stack[-1]
            pending = [p for p in parents[node] if done[p] is None and p not in on_path]
            if pending:
                stack.append(pending[0])
                on_path.add(pending[0])
                continue
            found = {node}
            for p in parents[node]:
                found.update(done[p] if done[p] is not None else (p,))
            done[node] = sorted(found)
            stack.pop()
            on_path.discard(node)
    return done  # type: ignore[return-value]


def build_hierarchies(store, schema: Schema, signatures: Sequence[Sequence[str]], folder: Path,
                      edges_of: Callable[[str], list[tuple[str, str]]] | None = None) -> dict:
    """Closures, annotation matrices and IC for every declared hierarchy; closure triples into the store.

    ``edges_of(relation)`` gives a relation's (head, tail) pairs (a build passes those it collected while
    importing); by default they are read from the store. Returns what the manifest records (per hierarchy:
    terms, closure pairs, annotation relations, seconds)."""
    edges_of = edges_of or (lambda relation: relation_pairs(store, relation))
    started = time.perf_counter()
    summary: dict = {}
    folder.mkdir(parents=True, exist_ok=True)
    for relation, term_class in declared_hierarchies(schema):
        edges = edges_of(relation)
        annotations = annotation_relations(schema, signatures, relation, term_class)
        pairs_of = {rel: edges_of(rel) for rel, _other, _tails in annotations}
        terms = sorted({t for e in edges for t in e} | {(p[1] if tails else p[0]) for rel, _o, tails in annotations
                                                        for p in pairs_of[rel]})
        if not terms:
            continue
        index = {t: i for i, t in enumerate(terms)}
        ancestors = closure(terms, edges)
        anc_ptr = np.cumsum([0] + [len(a) for a in ancestors]).astype(np.int64)
        anc_idx = np.fromiter((a for row in ancestors for a in row), dtype=np.int32, count=int(anc_ptr[-1]))
        arrays = {"terms": np.array(terms), "ancestor_ptr": anc_ptr, "ancestor_idx": anc_idx}
        described = []
        for n, (rel, other, tails) in enumerate(annotations):
            pairs = [(h, t) if tails else (t, h) for h, t in pairs_of[rel]]  # (annotated node, term)
            nodes = sorted({node for node, _ in pairs})
            node_index = {node: i for i, node in enumerate(nodes)}
            node_of = np.fromiter((node_index[node] for node, _ in pairs), dtype=np.int64, count=len(pairs))
            term_of = np.fromiter((index[term] for _, term in pairs), dtype=np.int64, count=len(pairs))
            cols, sizes = gather(anc_ptr, anc_idx, term_of)
            rows, cols = np.repeat(node_of, sizes), cols.astype(np.int64)
            # Column-major: the nodes annotated at or below each term, which is what matching reads.
            col_ptr, col_nodes = _csr(cols, rows, len(terms))
            counts = np.diff(col_ptr)
            # Row-major, direct annotations only: which of a node's own annotations carry a match (provenance).
            direct_ptr, direct_idx = _csr(node_of, term_of, len(nodes))
            arrays[f"a{n}_nodes"] = np.array(nodes)
            arrays[f"a{n}_ptr"] = col_ptr
            arrays[f"a{n}_idx"] = col_nodes
            arrays[f"a{n}_direct_ptr"] = direct_ptr
            arrays[f"a{n}_direct_idx"] = direct_idx
            arrays[f"a{n}_ic"] = ic(counts, len(nodes))
            described.append({"relation": rel, "class": other, "terms_are_tails": tails, "nodes": len(nodes),
                              "annotations": len(pairs)})
        name = local_name(relation)
        np.savez(folder / f"{name}.npz", **arrays)
        store.bulk_extend(Quad(NamedNode(terms[i]), NamedNode(SUBSUMED_BY), NamedNode(terms[a]), NamedNode(CLOSURE_GRAPH))
                          for i, row in enumerate(ancestors) for a in row)
        summary[relation] = {"class": term_class, "file": f"{FOLDER}/{name}.npz", "terms": len(terms),
                             "closure_pairs": int(anc_ptr[-1]), "annotations": described}
    return {"hierarchies": summary, "format": FORMAT, "seconds": round(time.perf_counter() - started, 2)}


@dataclass
class Match:
    """One requested term's best explanation in one node: the most informative common ancestor, and the
    node's own annotations at or below it (the edges that carry the match)."""

    term: str
    ancestor: str | None
    ic: float
    annotations: list[str] = field(default_factory=list)


class HierarchyMatch:
    """IC-weighted matching of term sets against one annotation relation of one stored hierarchy.

    ``score(terms)`` gives every annotated node the mean over requested terms of
    ``IC(most informative common ancestor) ** power`` (``power`` 1 is Resnik's
    best-match average; higher powers favour nodes that explain the specific
    terms over nodes that explain many general ones).
    """

    #: How many terms' per-node scores are kept at most (about 100 KB each on the bio KB) ...
    CACHED = 512
    #: ... and how many bytes they may take: on a KB of 800,000 annotated nodes each is 6.4 MB, and 512 of them
    #: would hold 3.3 GB in every serving process.
    CACHED_BYTES = 256 * 2**20

    def __init__(self, arrays, relation: str, hierarchy: str, slot: int, power: float = 3.0,
                 terms_are_tails: bool = True) -> None:
        self.relation, self.hierarchy, self.power = relation, hierarchy, power
        #: Whether the relation points from the annotated node to the term (``Disease hasPhenotype Phenotype``).
        self.terms_are_tails = terms_are_tails
        self.terms = [str(t) for t in arrays["terms"]]
        self.term_index = {t: i for i, t in enumerate(self.terms)}
        self._anc_ptr, self._anc_idx = arrays["ancestor_ptr"], arrays["ancestor_idx"]
        self.nodes = [str(n) for n in arrays[f"a{slot}_nodes"]]
        self.node_index = {n: i for i, n in enumerate(self.nodes)}
        self._ptr, self._idx, self.ic = arrays[f"a{slot}_ptr"], arrays[f"a{slot}_idx"], arrays[f"a{slot}_ic"]
        self._direct_ptr, self._direct_idx = arrays[f"a{slot}_direct_ptr"], arrays[f"a{slot}_direct_idx"]
        self._powered: dict[int, np.ndarray] = {}  # least recently used first
        #: ``ic ** power`` per term, raised once: raising a node-long array per requested term was a third of
        #: hierarchy matching's time, and scattering the raised values gives the very same numbers.
        self._ic_powered = self.ic ** power

    def ancestors(self, term: int) -> np.ndarray:
        """A term's ancestors (itself included), most informative first."""
        lineage = self._anc_idx[self._anc_ptr[term]:self._anc_ptr[term + 1]]
        return lineage[np.argsort(-self.ic[lineage], kind="stable")]

    def best(self, term: int) -> np.ndarray:
        """Per annotated node: ``IC ** power`` of its most informative common ancestor with ``term`` (0 if none)."""
        out = np.zeros(len(self.nodes), dtype=np.float64)
        for a in self.ancestors(term)[::-1]:  # least informative first, so the most informative write last
            if self.ic[a] > 0:  # an ancestor every node has (the root) adds nothing and costs a write per node
                out[self._idx[self._ptr[a]:self._ptr[a + 1]]] = self._ic_powered[a]
        return out

    def best_of_one(self, term: int, top: int) -> tuple[np.ndarray, np.ndarray, int, float, float]:
        """What :func:`_best_rooted` reads of ``best(term)``, without a value per node: the ``top`` nodes by it
        (largest first, ties by index), their values, how many nodes are above 0, and the values next below and
        above the last one kept (0 and inf without one). Read level by level from the term's ancestors' node
        lists, most informative first: on a large KB a fresh node-long array cost more than the rest."""
        lineage = self.ancestors(term)
        lineage = lineage[self.ic[lineage] > 0]
        powered = self._ic_powered[lineage]
        taken = np.zeros(len(self.nodes), dtype=bool)
        chosen: list[np.ndarray] = []
        values: list[np.ndarray] = []
        levels: list[float] = []
        kept = matched = 0
        start = 0
        while start < len(lineage):
            end = start + 1
            while end < len(lineage) and powered[end] == powered[start]:
                end += 1
            rows = [self._idx[self._ptr[a]:self._ptr[a + 1]] for a in lineage[start:end].tolist()]
            if len(rows) == 1:
                new = rows[0][~taken[rows[0]]]  # (a row is sorted and distinct)
            else:
                level = np.zeros(len(self.nodes), dtype=bool)
                for row in rows:
                    level[row] = True
                new = np.flatnonzero(level & ~taken)
            if len(new):
                taken[new] = True
                matched += len(new)
                levels.append(float(powered[start]))
                if kept < top:
                    part = new[: top - kept]
                    chosen.append(part)
                    values.append(np.full(len(part), powered[start]))
                    kept += len(part)
            start = end
        order = np.concatenate(chosen) if chosen else np.zeros(0, dtype=np.int64)
        found = np.concatenate(values) if values else np.zeros(0, dtype=np.float64)
        edge = float(found[-1]) if len(found) else 0.0
        below = max((v for v in levels if v < edge), default=0.0)
        above = min((v for v in levels if v > edge), default=float("inf"))
        return order, found, matched, below, above

    def term_scores(self, term: int) -> np.ndarray:
        """``best(term)``, kept (read-only) for the last :attr:`CACHED` terms asked for, or as many as
        :attr:`CACHED_BYTES` hold: requests share their common terms."""
        found = self._powered.pop(term, None)
        if found is None:
            found = self.best(term)
            found.setflags(write=False)
            kept = max(1, min(self.CACHED, self.CACHED_BYTES // max(found.nbytes, 1)))
            while len(self._powered) >= kept:
                self._powered.pop(next(iter(self._powered)))
        self._powered[term] = found
        return found

    def cache_clear(self) -> None:
        self._powered.clear()

    def score(self, terms: Sequence[str], weights: dict[str, float] | None = None) -> np.ndarray:
        return self.scored(terms, weights)[0]

    def scored(self, terms: Sequence[str], weights: dict[str, float] | None = None) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`score`, and the nodes that score above 0 (in order)."""
        total, known = self.summed(terms, weights)
        total = total if total.flags.writeable else total.copy()
        # The root of a power is most of the cost on a large KB: it is taken where the sum is not 0 (most nodes
        # share no informative ancestor with a request), the others stay 0, as the power would leave them.
        matched = np.flatnonzero(total)
        total[matched] = self.rooted(total[matched], known)
        return total, matched

    def summed(self, terms: Sequence[str], weights: dict[str, float] | None = None) -> tuple[np.ndarray, float]:
        """Per node, the sum over the known ``terms`` of ``IC ** power`` (what :meth:`score` roots; one term's kept
        scores themselves, read-only, when there is one), and how many terms were known. ``weights``: a term's
        share where it is not 1 (an uncertain term counts for less), in the sum and in the count alike."""
        known = [self.term_index[t] for t in terms if t in self.term_index]
        if not known:
            return np.zeros(len(self.nodes), dtype=np.float64), 0
        if weights and any(weights.get(t, 1.0) != 1.0 for t in terms if t in self.term_index):
            total = np.zeros(len(self.nodes), dtype=np.float64)
            count = 0.0
            for t in terms:
                if t in self.term_index:
                    w = weights.get(t, 1.0)
                    total += w * self.term_scores(self.term_index[t])
                    count += w
            return total, count
        if len(known) == 1:
            return self.term_scores(known[0]), 1
        # Summed one term after another, as np.sum over the stacked rows adds them, without stacking them.
        total = self.term_scores(known[0]) + self.term_scores(known[1])
        for t in known[2:]:
            total += self.term_scores(t)
        return total, len(known)

    def rooted(self, sums: np.ndarray, known: int) -> np.ndarray:
        """Sums of :meth:`summed` as scores: the power's root of their mean."""
        return (sums / known) ** (1.0 / self.power)

    def explain(self, nodes: Sequence[str], terms: Sequence[str]) -> dict[str, list[Match]]:
        """For each node, each requested term's most informative common ancestor, its IC and the node's
        annotations at or below it (from the stored arrays: no query)."""
        known = [self.term_index.get(t, -1) for t in terms]
        lineages = [self.ancestors(i) if i >= 0 else np.zeros(0, dtype=np.int32) for i in known]
        # The terms' lineages as one padded matrix (most informative first); the pad points at a term never reached.
        pad = len(self.terms)
        table = np.full((len(terms), max((len(x) for x in lineages), default=0) or 1), pad, dtype=np.int64)
        for row, lineage in enumerate(lineages):
            table[row, : len(lineage)] = lineage
        rows = {node: self.node_index.get(node, -1) for node in nodes}
        shown = [node for node, row in rows.items() if row >= 0]
        out = {node: [Match(t, None, 0.0) for t in terms] for node, row in rows.items() if row < 0}
        if not shown:
            return {node: out[node] for node in nodes}
        # All the shown nodes at once: the (node, ancestor, annotation) cells of their closures, by node and
        # ancestor; each requested term's first lineage ancestor a node reaches, and the annotations under it.
        direct, counts = gather(self._direct_ptr, self._direct_idx, np.array([rows[n] for n in shown]))
        above, sizes = gather(self._anc_ptr, self._anc_idx, direct)
        below = np.repeat(direct, sizes)
        who = np.repeat(np.repeat(np.arange(len(shown)), counts), sizes)
        cell = who * (pad + 1) + above
        order = np.argsort(cell, kind="stable")
        cell, below = cell[order], below[order]
        reached = np.zeros((len(shown), pad + 1), dtype=bool)
        reached[who, above] = True
        present = reached[:, table]  # (node, term, lineage)
        ancestor = table[np.arange(len(terms))[None, :], present.argmax(axis=2)]
        wanted = np.arange(len(shown))[:, None] * (pad + 1) + ancestor
        lo, hi = np.searchsorted(cell, wanted, "left"), np.searchsorted(cell, wanted, "right")
        names, below = self.terms, below.tolist()  # (Python lists from here: a few hundred lookups)
        rows_found, ics = present.any(axis=2).tolist(), self.ic[np.minimum(ancestor, pad - 1)].tolist()  # (pad: unused)
        for n, node in enumerate(shown):
            matches = []
            for t, found, a, ic, start, end in zip(terms, rows_found[n], ancestor[n].tolist(), ics[n], lo[n].tolist(),
                                                   hi[n].tolist()):
                if not found:
                    matches.append(Match(t, None, 0.0))
                    continue
                carried = sorted({names[d] for d in below[start:end]})
                matches.append(Match(t, names[a], round(ic, 3), carried))
            out[node] = matches
        return {node: out[node] for node in nodes}


class Hierarchies:
    """The hierarchies a KB was built with (``<kb>/hierarchy/``), loaded on first use."""

    def __init__(self, path: Path, manifest: dict) -> None:
        self.path = path
        stored = manifest.get("hierarchies") or {}
        self.summary = stored.get("hierarchies", {})
        if self.summary and stored.get("format") != FORMAT:
            log.warning("the KB's hierarchy arrays are of an older format: hierarchy matching is off until "
                        "`kqe-rdf kb build` rebuilds it")
            self.summary = {}
        self._arrays: dict[str, dict] = {}
        self._matchers: dict[tuple[str, float], HierarchyMatch | None] = {}
        self._below: dict[str, tuple[dict[str, int], np.ndarray]] = {}

    def arrays(self, hierarchy: str) -> dict:
        if hierarchy not in self._arrays:
            self._arrays[hierarchy] = dict(np.load(self.path / self.summary[hierarchy]["file"]))
        return self._arrays[hierarchy]

    def hops_below(self, term_class: str, terms: Sequence[str]) -> tuple[list[tuple[str, bool, str]], set[str]] | None:
        """The relations that leave ``terms`` of a hierarchical class or any term below them, as (relation,
        walked head → tail, class reached), read from the stored arrays instead of walking the hierarchy, and
        which of ``terms`` are terms of it; None when no stored hierarchy is on ``term_class``."""
        for hierarchy, info in self.summary.items():
            if info["class"] != term_class:
                continue
            arrays = self.arrays(hierarchy)
            if hierarchy not in self._below:
                index = {str(t): i for i, t in enumerate(arrays["terms"])}
                # A term is below another when it has an ancestor besides itself; above one when it is one.
                self._below[hierarchy] = (index, np.bincount(arrays["ancestor_idx"], minlength=len(index)) > 1)
            index, has_children = self._below[hierarchy]
            covered = {t for t in terms if t in index}
            cols = np.array([index[t] for t in covered], dtype=np.int64)
            if not len(cols):
                return [], covered
            ptr = arrays["ancestor_ptr"]
            has_below = bool(has_children[cols].any())
            hops = []
            if has_below or bool(((ptr[cols + 1] - ptr[cols]) > 1).any()):
                hops.append((hierarchy, True, term_class))
            if has_below:
                hops.append((hierarchy, False, term_class))
            for slot, ann in enumerate(info["annotations"]):
                col_ptr = arrays[f"a{slot}_ptr"]
                if bool(((col_ptr[cols + 1] - col_ptr[cols]) > 0).any()):
                    hops.append((ann["relation"], not ann["terms_are_tails"], ann["class"]))
            return sorted(set(hops)), covered
        return None

    def hops_below_each(self, term_class: str, groups: Sequence[Sequence[str]]) -> list[set] | None:
        """:meth:`hops_below` for each group of terms (a request's mentions, each with its candidate terms) in one
        pass over the stored arrays: the relations that leave each group's terms or any term below them; None
        when no stored hierarchy is on ``term_class``."""
        for hierarchy, info in self.summary.items():
            if info["class"] != term_class:
                continue
            self.hops_below(term_class, [])  # the term index and which terms have terms below them
            arrays = self.arrays(hierarchy)
            index, has_children = self._below[hierarchy]
            cols = [np.array([index[t] for t in terms if t in index], dtype=np.int64) for terms in groups]
            flat = np.concatenate(cols) if cols else np.zeros(0, dtype=np.int64)
            owner = np.repeat(np.arange(len(groups)), [len(c) for c in cols])
            out: list[set] = [set() for _ in groups]
            ptr = arrays["ancestor_ptr"]
            below = has_children[flat]
            above = (ptr[flat + 1] - ptr[flat]) > 1
            for g in np.unique(owner[below | above]).tolist():
                out[g].add((hierarchy, True, term_class))
            for g in np.unique(owner[below]).tolist():
                out[g].add((hierarchy, False, term_class))
            for slot, ann in enumerate(info["annotations"]):
                col_ptr = arrays[f"a{slot}_ptr"]
                hop = (ann["relation"], not ann["terms_are_tails"], ann["class"])
                for g in np.unique(owner[(col_ptr[flat + 1] - col_ptr[flat]) > 0]).tolist():
                    out[g].add(hop)
            return out
        return None

    def __bool__(self) -> bool:
        return bool(self.summary)

    def roots(self) -> frozenset[str]:
        """The roots of the KB's hierarchies: terms with no parent that are the parent of some term (HPO's "All",
        GO's three). A root is above every term of its hierarchy, so it fits every request about it and answers
        none; a term with neither parent nor child is no root."""
        if "_roots" not in self.__dict__:
            found: set[str] = set()
            for hierarchy in self.summary:
                arrays = self.arrays(hierarchy)
                ptr, ancestors = arrays["ancestor_ptr"], arrays["ancestor_idx"]
                alone = np.flatnonzero(np.diff(ptr) == 1)  # (its closure is reflexive: itself only)
                above = np.bincount(ancestors, minlength=len(arrays["terms"])) > 1
                found.update(str(t) for t in arrays["terms"][alone[above[alone]]])
            self._roots = frozenset(found)
        return self._roots

    def cache_clear(self) -> None:
        """Forget the per-term scores the matchers keep (benchmarks time a request as if it were the first)."""
        for matcher in self._matchers.values():
            if matcher is not None:
                matcher.cache_clear()

    def closure_of(self, relation: str) -> str | None:
        """The closure predicate stored for a hierarchy relation (None when the KB has none)."""
        return SUBSUMED_BY if relation in self.summary else None

    def matcher(self, relation: str, power: float = 3.0) -> HierarchyMatch | None:
        """The matcher for an annotation relation (either direction), or None when no hierarchy covers it."""
        key = (relation, power)
        if key not in self._matchers:
            self._matchers[key] = None
            for hierarchy, info in self.summary.items():
                for slot, ann in enumerate(info["annotations"]):
                    if ann["relation"] == relation:
                        self._matchers[key] = HierarchyMatch(self.arrays(hierarchy), relation, hierarchy, slot, power,
                                                             ann["terms_are_tails"])
        return self._matchers[key]


def hierarchical_units(kb, compiled) -> tuple[HierarchyMatch, list[str], list[str], dict[str, float]] | None:
    """When every path of a soft reading is one annotation edge from the answer to a constant of one
    hierarchical class (``?x hasPhenotype <seizure>``, ``<seizure> phenotypeOf ?x``, ...): the matcher, the
    (positive, negated) terms and the weights of the uncertain ones; None for any other reading, which keeps the
    exact-path soft mode."""
    if compiled.mode != "soft" or not compiled.units or not kb.hierarchies:
        return None
    schema = kb.schema
    relation, positive, negated, weights = None, [], [], {}
    for unit in compiled.units:
        if len(unit.triplets) != 1 or not unit.values:
            return None
        t = unit.triplets[0]
        rel = schema.relations.get(t.relation)
        forward, constant_is_tail = t.relation, not t.tail.is_variable
        if rel is not None and rel.iri not in schema.stored_relations and rel.inverse:
            forward, constant_is_tail = rel.inverse, not constant_is_tail
        if relation not in (None, forward):
            return None
        relation = forward
        (negated if unit.negated else positive).append(unit.values[0])
        if unit.uncertain and not unit.negated:
            weights[unit.values[0]] = kb.settings.fourstep.uncertain_weight
    matcher = kb.hierarchies.matcher(relation, kb.settings.fourstep.ic_power)
    if matcher is None or not positive:
        return None
    if matcher.terms_are_tails != constant_is_tail:
        return None  # the answer is the term side ("which phenotypes does X have"): exact paths answer that
    return matcher, positive, negated, weights


@dataclass
class Scored:
    """Hierarchy matching's answer for one reading: scores of the best nodes, each shown node's matches, how
    many nodes matched at all, and the SPARQL over the stored closure that shows the first answers' matches."""

    scores: dict[str, float]
    support: dict[str, list]
    matched: int
    provenance_sparql: str | None
    #: How the request's negated terms counted ("context", "cost" or "ignore") and how many there were.
    negated: dict = field(default_factory=dict)


def hierarchical_scores(kb, compiled, text: str, types: Sequence[str] | None = None,
                        negated: str = "ignore", negated_weight: float = 0.0, top: int = 500) -> Scored | None:
    """4StepFocus's soft mode for sets of terms of one hierarchy: IC-weighted partial credit for every annotated
    node (vectorized over the stored matrix), fused with BM25 of the request (``fourstep_text_weight``).
    Negated terms count as ``negated`` says (``fourstep_negated``: "context", "cost" or "ignore").

    Scores the best ``top`` nodes; the support of the first 20 names each requested term's most informative
    common ancestor in the node and the node's annotations that carry it (from the stored arrays). None
    when the reading is not of that shape."""
    found = hierarchical_units(kb, compiled)
    if found is None:
        return None
    matcher, positive, ruled_out, weights = found
    weight = kb.settings.fourstep.text_weight
    # The BM25 side needs only the request: Tantivy searches while the arrays below are summed.
    bm25_among = kb.text_index.scores_among_later(text, top, list(types) if types else None) if weight else None
    counts_negated = bool(ruled_out and negated_weight and negated != "ignore")
    if counts_negated or weights:
        structural, _above = matcher.scored(positive, weights)
        if counts_negated:
            sign = 1.0 if negated == "context" else -1.0
            structural = structural + sign * negated_weight * matcher.score(ruled_out)
        # Only nodes that score above 0 are kept: the best of those, without ordering every node of a large KB.
        above = np.flatnonzero(structural > 0)
        order, matched = above[best_first(structural[above], top)], len(above)
        values = structural[order]
    else:
        order, values, matched = _best_rooted(matcher, positive, top)
    scores = dict(zip([matcher.nodes[i] for i in order.tolist()], values.tolist()))
    if bm25_among is not None and scores:
        found, best = bm25_among(list(scores))
        best = best or 1.0
        for iri, s in found.items():
            scores[iri] += weight * s / best
    shown = sorted(scores, key=lambda i: -scores[i])[:20]
    support = {iri: [{"term": m.term, "ancestor": m.ancestor, "ic": m.ic, "annotations": m.annotations[:3]}
                     for m in matches] for iri, matches in matcher.explain(shown, positive).items()}
    counted = {"as": negated if negated_weight else "ignore", "terms": len(ruled_out)} if ruled_out else {}
    return Scored(scores, support, matched, provenance_query(matcher, support, shown[:3]), counted)


def _best_rooted(matcher: HierarchyMatch, terms: Sequence[str], top: int) -> tuple[np.ndarray, np.ndarray, int]:
    """The ``top`` nodes by :meth:`HierarchyMatch.score` of ``terms`` (above 0; by score, then index), their scores,
    and how many nodes score above 0, taking the root for those nodes only, not for every node of a large KB.

    The root keeps the sums' order, so the best sums are the best scores, but two different sums may have one root:
    the ``top``-th sum's neighbours (the next sum below it and above it) are rooted too, and when either comes out
    equal to its root, every node is rooted as :meth:`HierarchyMatch.score` does."""
    known = [matcher.term_index[t] for t in terms if t in matcher.term_index]
    if len(known) == 1 and top > 0:  # one term (a category): from its ancestors' lists, no node-long array
        chosen, values, matched, below, above = matcher.best_of_one(known[0], top)
        count = 1
        roots = matcher.rooted(values, count)
        edge = values[-1] if len(values) else 0.0
    else:
        total, count = matcher.summed(terms)
        matched = int(np.count_nonzero(total))
        chosen = best_first(total, top)
        chosen = chosen[total[chosen] > 0]
        roots = matcher.rooted(total[chosen], count) if count else total[chosen]
        if 0 < top == len(chosen) < matched:
            edge = total[chosen[-1]]
            below = np.max(total, where=total < edge, initial=0.0)
            above = np.min(total, where=total > edge, initial=np.inf)
    if 0 < top == len(chosen) < matched:
        neighbours = matcher.rooted(np.array([below, edge, above if np.isfinite(above) else edge]), count)
        if (below > 0 and neighbours[0] == neighbours[1]) or (np.isfinite(above) and neighbours[2] == neighbours[1]):
            structural, nonzero = matcher.scored(terms)
            order = nonzero[best_first(structural[nonzero], top)]
            return order, structural[order], matched
    ranked = np.lexsort((chosen, -roots))
    return chosen[ranked], roots[ranked], matched


#: ``best_first`` samples an array this many times longer than the top asked for before partitioning it.
SAMPLED_FROM = 64


def best_first(values: np.ndarray, top: int) -> np.ndarray:
    """The indices of the ``top`` largest values, largest first, ties by index: ``np.argsort(-values,
    kind="stable")[:top]`` without sorting every value (a KB has hundreds of thousands of annotated nodes).

    >>> best_first(np.array([0.5, 2.0, 0.5, 1.0, 0.5]), 3).tolist()
    [1, 3, 0]
    """
    if top <= 0:
        return np.zeros(0, dtype=np.int64)
    if len(values) > SAMPLED_FROM * top:
        # A large array: a strided sample says a value the top ones are at or above, and only the values at or
        # above it are partitioned (partitioning every value is slow where many are equal, as a hierarchy's
        # scores on a large KB are: a few levels shared by hundreds of thousands of nodes). The nodes kept hold
        # all of the top, ties included, so the answer is the whole array's.
        stride = len(values) // (SAMPLED_FROM // 2 * top)
        sample = -values[::stride]
        for wanted in (2 * (top // stride) + 2, 8 * (top // stride) + 8):
            if wanted >= len(sample):
                break
            bound = -np.partition(sample, wanted - 1)[wanted - 1]
            kept = np.flatnonzero(values >= bound)
            if len(kept) < top:
                continue
            if np.count_nonzero(values[kept] > bound) < top:  # the bound is the top-th value: no partition at all
                return kept[_cut(values[kept], bound, top)]
            if len(kept) <= len(values) // 2:
                return kept[_partitioned(values[kept], top)]
    return _partitioned(values, top)


def _partitioned(values: np.ndarray, top: int) -> np.ndarray:
    """:func:`best_first` by one partition of every value (``top`` > 0)."""
    if top >= len(values):
        return np.argsort(-values, kind="stable")
    return _cut(values, -np.partition(-values, top - 1)[top - 1], top)


def _cut(values: np.ndarray, threshold: float, top: int) -> np.ndarray:
    """The ``top`` best indices when ``threshold`` is the ``top``-th value: those above it, then those at it by
    index, largest first, ties by index."""
    above = np.flatnonzero(values > threshold)
    chosen = np.concatenate([above, np.flatnonzero(values == threshold)[: top - len(above)]])
    return chosen[np.lexsort((chosen, -values[chosen]))]


def provenance_query(matcher: HierarchyMatch, support: dict[str, list], nodes: Sequence[str]) -> str | None:
    """The SPARQL over the stored closure that lists, for ``nodes``, the annotations carrying each match: what a
    user runs to check the arrays' account (``queries/hierarchy_support.rq`` with its rows filled in)."""
    rows = sorted({(iri, m["ancestor"]) for iri in nodes for m in support.get(iri, ()) if m["ancestor"]})
    if not rows:
        return None
    text = queries.with_rows(queries.load("hierarchy_support"), ["node", "ancestor"],
                             [[NamedNode(n), NamedNode(a)] for n, a in rows])
    return Template(text).substitute(relation=str(NamedNode(matcher.relation)))
