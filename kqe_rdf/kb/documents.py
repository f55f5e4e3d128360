"""Node documents, rendered from the records of a build (or from the store).

A node's document is its name, types, aliases and text fields, plus — as
STaRK's ``add_rel`` does — a capped verbalisation of its relations in both
directions (neighbour names grouped by relation label), so relational facts
are searchable as text.

A build collects what documents need in :class:`GraphTables` while the importer's
records stream into the store (one pass: no full-edge SPARQL scan), and the same
tables give the relation statistics, the hop summary and the hierarchy edges. A
KB whose triples come as RDF (or are changed in the store after loading) fills the
tables from the store by SPARQL (``queries/node_*.rq``) instead; both fillings
render the same text.
"""

from __future__ import annotations

import hashlib
import re
from array import array
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator
from typing import NamedTuple

import numpy as np
from pyoxigraph import NamedNode, Store

from . import queries
from .ontology import CORE, RDFS_LABEL, Schema, local_name

ALIAS = CORE + "alias"
#: A broader name (an OBO BROAD synonym): shown in the document, linked below names (:mod:`~kqe_rdf.kb.linking`).
BROAD_ALIAS = CORE + "broadAlias"
IDENTIFIER = CORE + "identifier"
#: Up to this many text properties are named in the query's VALUES; Oxigraph joins a longer VALUES list in
#: quadratic time (8,000 fields: 10 s), so beyond it every literal is read and the wanted ones kept here.
VALUES_PROPERTIES = 256


class NodeDocument(NamedTuple):
    """A node's document (a named tuple: a build makes one per node, and a frozen dataclass took three times as
    long to make)."""

    iri: str
    identifier: str
    name: str
    types: tuple[str, ...]
    text: str

    @property
    def digest(self) -> str:
        """Content hash: unchanged documents keep their embeddings across rebuilds."""
        return hashlib.sha1(self.text.encode("utf-8")).hexdigest()


def distinct(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct integers of ``keys``, sorted, and how often each occurs: ``np.unique(keys,
    return_counts=True)`` by a sort (NumPy 2.4's ``np.unique`` took 19 s on 3M int64 keys that sort in 0.6 s).

    >>> [a.tolist() for a in distinct(np.array([3, 1, 3, 2, 3]))]
    [[1, 2, 3], [1, 1, 3]]
    """
    keys = np.sort(keys)
    starts = np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]]) if len(keys) else np.zeros(0, dtype=np.int64)
    return keys[starts], np.diff(np.r_[starts, len(keys)])


def text_properties(schema: Schema, extra: Iterable[str] = ()) -> list[str]:
    """The literal properties a document shows, in the order it shows them (aliases first)."""
    return list(dict.fromkeys([ALIAS, *schema.fields, *extra]))


def template_labels(schema: Schema, extra: Iterable[str] = ()) -> frozenset[str]:
    """The field labels a node document writes before its values (:meth:`GraphTables.documents`): "name", "type",
    "aliases", each text property's ("definition") and each relation's both ways ("has phenotype", "phenotype of")."""
    labels = {"name", "type", "aliases", *(schema.label(p) for p in text_properties(schema, extra))}
    for relation in schema.relations:
        labels |= {schema.label(relation), schema.inverse_label(relation)}
    return frozenset(labels)


_MORE = re.compile(r" \(and \d+ more\)$")


def without_template(text: str, labels: frozenset[str] | set[str]) -> str:
    """A node document's values without the template around them: the field labels (``labels``), the type line (its
    class's name, which every node of the class has) and the count of neighbours left unlisted. Pseudo-relevance
    feedback counts the words of documents, and the template's are in every one of a class ("definition",
    "phenotype"): they say nothing of a request.

    >>> without_template("name: Seizure\\ntype: phenotype\\ndefinition: A fit\\nphenotype of: A, B (and 3 more)",
    ...                  {"name", "type", "definition", "phenotype of"})
    'Seizure\\nA fit\\nA, B'
    """
    out = []
    for line in text.split("\n"):
        label, sep, value = line.partition(": ")
        if sep and label in labels:
            if label == "type":
                continue
            line = value
        out.append(_MORE.sub("", line))
    return "\n".join(out)


class GraphTables:
    """The nodes (names, identifiers, types, text) and the edges between nodes of a KB being built.

    Filled by :class:`~kqe_rdf.kb.rdfize.RecordWriter` as it writes (see :class:`~kqe_rdf.kb.rdfize.RecordSink`),
    or by :meth:`from_store`. Everything a node has several of is kept as a set and shown sorted, so the
    text does not depend on the order records or query rows came in; an edge written twice is one edge,
    as in the store.
    """

    def __init__(self, text_properties: Iterable[str]) -> None:
        #: The literal properties documents show, in their order (:func:`text_properties`).
        self.properties = list(text_properties)
        self.wanted = set(self.properties)
        self.handles: dict[str, int] = {}
        self.iris: list[str] = []
        self.nodes: set[int] = set()
        self.labels: dict[int, str] = {}
        #: Every name (rdfs:label) of each node: a node seen twice may have two, and the name index keeps both.
        self.names: dict[int, set[str]] = defaultdict(set)
        self.identifiers: dict[int, str] = {}
        self.types: dict[int, set[str]] = defaultdict(set)
        self.text: dict[int, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
        self.relations: dict[str, int] = {}
        self._heads, self._rels, self._tails = array("q"), array("q"), array("q")
        #: Edges from something that is not a node (the statement of an edge with qualifiers) to a node.
        self.links: Counter = Counter()
        self._edges: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
        self._kind_table: tuple[np.ndarray, list[tuple[str, ...]]] | None = None

    def handle(self, iri: str) -> int:
        found = self.handles.get(iri)
        if found is None:
            found = self.handles[iri] = len(self.iris)
            self.iris.append(iri)
            self._kind_table = None
        return found

    # --- filling (the RecordSink protocol) ---

    def node(self, iri: str, type_iri: str, identifier: str) -> int:
        handle = self.handle(iri)
        self.nodes.add(handle)
        self.types[handle].add(type_iri)
        self._kind_table = None  # (a node's classes are numbered once every node is in)
        self._least(self.identifiers, handle, identifier)
        return handle

    def literal(self, handle: int, prop: str, value: str) -> None:
        if prop == RDFS_LABEL:
            self._least(self.labels, handle, value)
            self.names[handle].add(value)
        if prop in self.wanted:
            self.text[handle][prop].add(value)

    def add_edges(self, heads: list[int], relations: list[str], tails: list[int]) -> None:
        numbers = self.relations
        for relation in dict.fromkeys(relations):  # numbered as met, so the tables do not depend on hashing
            if relation not in numbers:
                numbers[relation] = len(numbers)
        self._heads.extend(heads)
        self._rels.extend([numbers[r] for r in relations])
        self._tails.extend(tails)
        self._edges = None

    def link(self, relation: str) -> None:
        self.links[relation] += 1

    @staticmethod
    def _least(table: dict[int, str], handle: int, value: str) -> None:
        """Of several names (a node seen twice), the least: the same whichever came first."""
        old = table.get(handle)
        if old is None or value < old:
            table[handle] = value

    @classmethod
    def from_store(cls, store: Store, schema: Schema, extra_text_properties: Iterable[str] = ()) -> GraphTables:
        """The tables of a loaded store, read by SPARQL (for importers that write RDF themselves)."""
        props = text_properties(schema, extra_text_properties)
        tables = cls(props)

        def rows(query: str):
            return store.query(query, use_default_graph_as_union=True)

        for row in rows(queries.load("node_labels")):
            handle = tables.handle(row["node"].value)
            tables.nodes.add(handle)
            if row["name"] is not None:
                tables._least(tables.labels, handle, row["name"].value)
                tables.names[handle].add(row["name"].value)
            if row["identifier"] is not None:
                tables._least(tables.identifiers, handle, row["identifier"].value)
        for row in rows(queries.load("node_types")):
            tables.types[tables.handle(row["node"].value)].add(row["type"].value)
        if len(props) <= VALUES_PROPERTIES:
            query = queries.with_values(queries.load("node_text"), property=[NamedNode(p) for p in props])
        else:
            query = queries.load("node_literals")
        for row in rows(query):
            prop = row["property"].value
            if prop in tables.wanted:
                tables.text[tables.handle(row["node"].value)][prop].add(row["value"].value)
        edges = [(tables.handle(row["head"].value), row["relation"].value, tables.handle(row["tail"].value))
                 for row in rows(queries.load("node_edges"))]
        if edges:
            tables.add_edges(*(list(column) for column in zip(*edges)))
        return tables

    # --- reading ---

    def names_of(self, handle: int) -> Iterable[str]:
        """A node's names and aliases (what ``queries/node_names.rq`` returns of it from the store)."""
        names = self.names.get(handle, ())
        fields = self.text.get(handle)
        return names if fields is None or ALIAS not in fields else [*names, *fields[ALIAS]]

    def edges(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(heads, relations, tails) of the distinct edges between nodes, sorted."""
        if self._edges is None:
            heads, rels, tails = (np.frombuffer(a, dtype=np.int64) if len(a) else np.zeros(0, np.int64)
                                  for a in (self._heads, self._rels, self._tails))
            is_node = np.zeros(len(self.iris), dtype=bool)
            is_node[list(self.nodes)] = True
            keep = is_node[heads] & is_node[tails]
            heads, rels, tails = heads[keep], rels[keep], tails[keep]
            order = np.lexsort((tails, rels, heads))
            heads, rels, tails = heads[order], rels[order], tails[order]
            distinct = np.ones(len(heads), dtype=bool)
            distinct[1:] = (np.diff(heads) != 0) | (np.diff(rels) != 0) | (np.diff(tails) != 0)
            self._edges = (heads[distinct], rels[distinct], tails[distinct])
        return self._edges

    def relation_iris(self) -> list[str]:
        return sorted(self.relations, key=self.relations.get)

    def relation_counts(self) -> dict[str, int]:
        """Edges per relation into nodes, as ``queries/count_edges_by_relation.rq`` counts them in the store."""
        _heads, rels, _tails = self.edges()
        names = self.relation_iris()
        counts = Counter({names[r]: int(n) for r, n in zip(*distinct(rels))})
        counts.update(self.links)
        return dict(counts.most_common())

    def pairs(self, relation: str) -> list[tuple[str, str]]:
        """Every (head, tail) edge of one relation (what ``hierarchy.relation_pairs`` reads from the store)."""
        heads, rels, tails = self.edges()
        rel = self.relations.get(relation)
        if rel is None:
            return []
        mask = rels == rel
        iris = self.iris
        return [(iris[h], iris[t]) for h, t in zip(heads[mask].tolist(), tails[mask].tolist())]

    def _type_lists(self) -> list[tuple[str, ...]]:
        return [tuple(sorted(self.types.get(h, ()))) for h in range(len(self.iris))]

    def signatures(self) -> list[list]:
        """[head class, relation, tail class, edges] for every combination in the data, most used first
        (what ``build.relation_signatures`` reads from the store)."""
        heads, rels, tails = self.edges()
        kind_ids, kind_names = self._kinds()
        n_kinds, n_rels = max(len(kind_names), 1), max(len(self.relations), 1)
        key = (kind_ids[heads] * n_rels + rels) * n_kinds + kind_ids[tails]
        found: Counter = Counter()
        names = self.relation_iris()
        for k, n in zip(*distinct(key)):
            k = int(k)
            head_kind, rest = divmod(k, n_rels * n_kinds)
            rel, tail_kind = divmod(rest, n_kinds)
            for domain in kind_names[head_kind]:
                for range_ in kind_names[tail_kind]:
                    found[(domain, names[rel], range_)] += int(n)
        return sorted(([d, rel, r, n] for (d, rel, r), n in found.items()), key=lambda x: (-x[3], x[1], x[0], x[2]))

    def _kinds(self) -> tuple[np.ndarray, list[tuple[str, ...]]]:
        """Each handle's set of classes as a number, and the sets (most nodes have one class)."""
        if self._kind_table is None:
            kind_of: dict[tuple[str, ...], int] = {}
            ids = [kind_of.setdefault(k, len(kind_of)) for k in self._type_lists()]
            self._kind_table = np.array(ids, dtype=np.int64), list(kind_of)
        return self._kind_table

    def hop_table(self) -> tuple[list[tuple[str, bool, str]], dict[int, list[int]]]:
        """The kinds of edges (relation, walked head → tail, class reached) that leave nodes, sorted, and for
        each node (by handle) the numbers of the kinds that leave it, sorted."""
        heads, rels, tails = self.edges()
        kind_ids, kinds = self._kinds()
        names = self.relation_iris()
        n_kinds, n_rels = max(len(kinds), 1), max(len(names), 1)
        # (node, relation, direction, set of classes reached), each once, as (node, combination) arrays
        nodes, combos = [], []
        for forward, start, end in ((1, heads, tails), (0, tails, heads)):
            node, rest = np.divmod(distinct((start * n_rels + rels) * n_kinds + kind_ids[end])[0], n_rels * n_kinds)
            nodes.append(node)
            combos.append(rest * 2 + forward)
        nodes, combos = np.concatenate(nodes), np.concatenate(combos)
        # A combination is one kind per class in its set (most sets hold one class; a node of no class, none).
        used = distinct(combos)[0]
        expanded = []
        for combo in used.tolist():
            (rel, kind), forward = divmod(combo // 2, n_kinds), combo % 2
            expanded.append([(names[rel], bool(forward), c) for c in kinds[kind]])
        vocabulary = sorted({k for ks in expanded for k in ks})
        number = {k: i for i, k in enumerate(vocabulary)}
        flat = np.array([number[k] for ks in expanded for k in ks], dtype=np.int64)
        sizes = np.array([len(ks) for ks in expanded], dtype=np.int64)
        offsets = np.r_[0, np.cumsum(sizes)[:-1]] if len(sizes) else sizes
        which = np.searchsorted(used, combos)
        count = sizes[which]
        pair_nodes = np.repeat(nodes, count)
        # each pair's numbers: its combination's offset, plus 0, 1, ... up to the combination's size
        within = np.arange(len(pair_nodes)) - np.repeat(np.cumsum(count) - count, count)
        pair_numbers = flat[np.repeat(offsets[which], count) + within] if len(pair_nodes) else pair_nodes
        keys = distinct(pair_nodes * max(len(vocabulary), 1) + pair_numbers)[0]
        node_of, kind_of = np.divmod(keys, max(len(vocabulary), 1))
        starts = np.flatnonzero(np.r_[True, node_of[1:] != node_of[:-1]]) if len(keys) else keys
        kind_list = kind_of.tolist()
        bounds = np.r_[starts, len(keys)].tolist()
        return vocabulary, {node: kind_list[bounds[i]:bounds[i + 1]]
                            for i, node in enumerate(node_of[starts].tolist())}

    def _neighbour_lines(self, nodes: np.ndarray, rels: np.ndarray, others: np.ndarray, rank: np.ndarray,
                         ranked: list[str], labels: list[str], cap: int) -> dict[int, list[str]]:
        """Per node, one line per relation (in ``rels``' order) listing its neighbours' distinct names in
        name order, at most ``cap`` of them and a count of the rest."""
        near = rank[others]
        order = np.lexsort((near, rels, nodes))
        nodes, rels, near = nodes[order], rels[order], near[order]
        if len(nodes):  # neighbours of the same name are listed once
            distinct = np.ones(len(nodes), dtype=bool)
            distinct[1:] = (nodes[1:] != nodes[:-1]) | (rels[1:] != rels[:-1]) | (near[1:] != near[:-1])
            nodes, rels, near = nodes[distinct], rels[distinct], near[distinct]
        starts = np.flatnonzero(np.r_[True, (nodes[1:] != nodes[:-1]) | (rels[1:] != rels[:-1])]) if len(nodes) \
            else np.zeros(0, dtype=np.int64)
        ends = np.r_[starts[1:], len(nodes)].astype(np.int64)
        lines: dict[int, list[str]] = defaultdict(list)
        names, name_of = near.tolist(), ranked.__getitem__
        for node, rel, start, end in zip(nodes[starts].tolist(), rels[starts].tolist(), starts.tolist(),
                                         ends.tolist()):
            more = end - start - cap
            if end - start == 1 and more <= 0:  # one neighbour (most lines): its name alone
                lines[node].append(f"{labels[rel]}: {ranked[names[start]]}")
                continue
            listed = ", ".join(map(name_of, names[start:end if more <= 0 else start + cap]))
            lines[node].append(f"{labels[rel]}: {listed}" + (f" (and {more} more)" if more > 0 else ""))
        return lines

    def documents(self, schema: Schema, neighbours_per_relation: int = 25,
                  max_chars: int = 6000) -> Iterator[NodeDocument]:
        """One document per node, in a stable order (sorted by IRI)."""
        iris = self.iris
        names = {h: self.labels.get(h) or local_name(iris[h]) for h in self.nodes}
        # Neighbours are listed by name, case-blind, ties broken by the exact name (a set's order changes with
        # the hash seed, and documents must not change between builds: their hashes key the embeddings).
        # (By the exact name, then stably by the case-blind one: the order of the key (lower, name), without a
        # tuple per name.)
        ranked = sorted(sorted(set(names.values())), key=str.lower)
        rank_of = {name: i for i, name in enumerate(ranked)}
        rank = np.full(len(iris), -1, dtype=np.int64)
        for h, name in names.items():
            rank[h] = rank_of[name]
        heads, rels, tails = self.edges()
        # Relations renumbered in IRI order, so a node's relation lines come sorted.
        by_iri = sorted(self.relations)
        renumber = np.array([by_iri.index(r) for r in self.relation_iris()] or [0], dtype=np.int64)
        rels = renumber[rels]
        cap = neighbours_per_relation
        out_lines = self._neighbour_lines(heads, rels, tails, rank, ranked, [schema.label(r) for r in by_iri], cap)
        in_lines = self._neighbour_lines(tails, rels, heads, rank, ranked,
                                         [schema.inverse_label(r) for r in by_iri], cap)
        fields_shown = [(p, schema.label(p)) for p in self.properties if p != ALIAS]
        type_labels: dict[tuple[str, ...], str] = {}

        for handle in sorted(self.nodes, key=iris.__getitem__):
            iri, name = iris[handle], names[handle]
            node_types = tuple(sorted(self.types.get(handle, ())))
            lines = [f"name: {name}"]
            if node_types:
                if node_types not in type_labels:
                    type_labels[node_types] = "type: " + ", ".join(schema.label(t) for t in node_types)
                lines.append(type_labels[node_types])
            fields = self.text.get(handle)
            if fields:
                if fields.get(ALIAS):
                    lines.append("aliases: " + "; ".join(sorted(fields[ALIAS])))
                for prop, label in fields_shown:
                    if fields.get(prop):
                        lines.append(f"{label}: " + " ".join(sorted(fields[prop])))
            lines += out_lines.get(handle, ())
            lines += in_lines.get(handle, ())
            body = "\n".join(lines)
            if len(body) > max_chars:
                body = body[:max_chars].rsplit(" ", 1)[0] + " …"
            yield NodeDocument(iri, self.identifiers.get(handle, iri), name, node_types, body)


def render_documents(
    store: Store,
    schema: Schema,
    extra_text_properties: Iterable[str] = (),
    neighbours_per_relation: int = 25,
    max_chars: int = 6000,
) -> Iterator[NodeDocument]:
    """The documents of a loaded store, read by SPARQL (what a build renders from its records)."""
    tables = GraphTables.from_store(store, schema, extra_text_properties)
    return tables.documents(schema, neighbours_per_relation, max_chars)
