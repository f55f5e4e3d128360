"""Node documents, rendered from the store.

A node's document is its name, types, aliases and text fields, plus — as
STaRK's ``add_rel`` does — a capped verbalisation of its relations in both
directions (neighbour names grouped by relation label), so relational facts
are searchable as text. Everything is read by SPARQL from ``queries/``.
"""

from __future__ import annotations

import hashlib
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from pyoxigraph import NamedNode, Store

from . import queries
from .ontology import CORE, Schema, local_name

ALIAS = CORE + "alias"
#: Up to this many text properties are named in the query's VALUES; Oxigraph joins a longer VALUES list in
#: quadratic time (8,000 fields: 10 s), so beyond it every literal is read and the wanted ones kept here.
VALUES_PROPERTIES = 256


@dataclass(frozen=True)
class NodeDocument:
    iri: str
    identifier: str
    name: str
    types: tuple[str, ...]
    text: str

    @property
    def digest(self) -> str:
        """Content hash: unchanged documents keep their embeddings across rebuilds."""
        return hashlib.sha1(self.text.encode("utf-8")).hexdigest()


def _rows(store: Store, query: str):
    return store.query(query, use_default_graph_as_union=True)


def render_documents(
    store: Store,
    schema: Schema,
    extra_text_properties: Iterable[str] = (),
    neighbours_per_relation: int = 25,
    max_chars: int = 6000,
    signatures: Counter | None = None,
    hops: dict[str, set] | None = None,
) -> Iterator[NodeDocument]:
    """Yield one document per node, in a stable order (sorted by IRI).

    ``signatures``, when given, is filled with the edges per (head class, relation, tail class), counted from
    the edges read here: on the bio KB a second, separate query for them took longer than the documents.
    ``hops``, when given, is filled with the kinds of edges (relation, walked head → tail, class reached) that
    leave each node, for the path reader (:class:`~kqe_rdf.linking.NameIndex`), from the same edges.
    """
    nodes: set[str] = set()
    names: dict[str, str] = {}
    identifiers: dict[str, str] = {}
    for row in _rows(store, queries.load("node_labels")):
        iri = row["node"].value
        nodes.add(iri)
        if row["name"] is not None and iri not in names:
            names[iri] = row["name"].value
        if row["identifier"] is not None:
            identifiers.setdefault(iri, row["identifier"].value)
    types: dict[str, list[str]] = defaultdict(list)
    for row in _rows(store, queries.load("node_types")):
        types[row["node"].value].append(row["type"].value)

    field_props = list(dict.fromkeys([ALIAS, *schema.fields, *extra_text_properties]))
    text: dict[str, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    if len(field_props) <= VALUES_PROPERTIES:
        query, wanted = queries.with_values(queries.load("node_text"), property=[NamedNode(p) for p in field_props]), None
    else:
        query, wanted = queries.load("node_literals"), set(field_props)
    for row in _rows(store, query):
        if wanted is not None and row["property"].value not in wanted:
            continue
        values = text[row["node"].value][row["property"].value]
        if row["value"].value not in values:
            values.append(row["value"].value)

    out_edges: dict[str, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    in_edges: dict[str, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    for row in _rows(store, queries.load("node_edges")):
        head, rel, tail = row["head"].value, row["relation"].value, row["tail"].value
        out_edges[head][rel].append(tail)
        in_edges[tail][rel].append(head)

    if signatures is not None or hops is not None:
        for head, relations in out_edges.items():
            for rel, tails in relations.items():
                for tail in tails:
                    head_types, tail_types = types.get(head, ()), types.get(tail, ())
                    if signatures is not None:
                        for domain in head_types:
                            for range_ in tail_types:
                                signatures[(domain, rel, range_)] += 1
                    if hops is not None:
                        hops[head].update((rel, True, c) for c in tail_types)
                        hops[tail].update((rel, False, c) for c in head_types)

    def neighbour_line(label: str, iris: list[str]) -> str:
        # Ties of the case-blind order broken by the exact name: a set's order changes with the hash seed, and
        # documents must not change between builds (their hashes key the embeddings kept across rebuilds).
        shown = sorted({names.get(i, local_name(i)) for i in iris}, key=lambda name: (name.lower(), name))
        more = len(shown) - neighbours_per_relation
        listed = ", ".join(shown[:neighbours_per_relation])
        return f"{label}: {listed}" + (f" (and {more} more)" if more > 0 else "")

    for iri in sorted(nodes):
        name = names.get(iri) or local_name(iri)
        node_types = tuple(sorted(types.get(iri, ())))
        lines = [f"name: {name}"]
        if node_types:
            lines.append("type: " + ", ".join(schema.label(t) for t in node_types))
        fields = text.get(iri, {})
        if fields.get(ALIAS):
            lines.append("aliases: " + "; ".join(fields[ALIAS]))
        for prop, values in fields.items():
            if prop != ALIAS:
                lines.append(f"{schema.label(prop)}: " + " ".join(values))
        for rel, tails in sorted(out_edges.get(iri, {}).items()):
            lines.append(neighbour_line(schema.label(rel), tails))
        for rel, heads in sorted(in_edges.get(iri, {}).items()):
            lines.append(neighbour_line(schema.inverse_label(rel), heads))
        body = "\n".join(lines)
        if len(body) > max_chars:
            body = body[:max_chars].rsplit(" ", 1)[0] + " …"
        yield NodeDocument(iri, identifiers.get(iri, iri), name, node_types, body)
