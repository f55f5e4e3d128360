"""Completion of names (issue 71): what ``/complete?q=…`` offers the page's search box and its SPARQL editor.

The KB's nodes come from the name index the linker reads (:meth:`~kqe_rdf.kb.linking.NameIndex.complete`: its
names sorted once, looked up by their start, then searched inside), its relations and classes from the schema.
What was typed is a name ("seiz", "has phen"), or, as an editor has it, the start of an IRI or of a prefixed
name of the KB's (``bio:hasPh``, ``<http://purl.obolibrary.org/obo/HP_00012``, ``obo:seiz``: by the IRI's
start, then by the name of the nodes in that namespace). ``class`` keeps the nodes of a class, ``relations_of``
the relations leaving a node, counted.
"""

from __future__ import annotations

import re

from pyoxigraph import NamedNode

from ..core.errors import KqeError
from ..kb.linking import normalise_name
from ..kb.ontology import local_name
from ..kb.queries import load, with_values
from ..kb.sparql import run_query
from .node import node_iri, shown
from .protocol import HTTPError

#: Completions a request gets unless it asks for another number, and the most it may ask for.
LIMIT, MAX_LIMIT = 10, 100
#: The longest text completed: a name being typed, or an IRI's start.
MAX_CHARS = 300
KINDS = ("node", "relation", "class")
#: How a name matched, best first.
TIERS = ("exact", "prefix", "word", "contains")
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_IRI_START = re.compile(r"^(?:<|[a-z][a-z0-9+.-]*://|urn:)", re.I)


def folded(name: str) -> str:
    """A schema term's name as typed words: camel case apart ("hasPhenotype" → "has phenotype")."""
    return normalise_name(_CAMEL.sub(" ", name))


def tier(key: str, names: list[str]) -> int | None:
    """How well ``key`` (folded) matches the best of ``names`` (folded): the index of :data:`TIERS`, or None."""
    best = None
    for name in names:
        found = (0 if name == key else 1 if name.startswith(key) else 2 if " " + key in name
                 else 3 if key in name else None)
        if found is not None and (best is None or found < best):
            best = found
    return best


def typed_iri(text: str, prefixes: dict[str, str]) -> tuple[str, str] | None:
    """The IRI start a text is (``<…``, ``http…``, ``bio:has``), and its namespace part, or None for a name."""
    text = text.strip()
    if _IRI_START.match(text):
        iri = text.lstrip("<").rstrip(">")
        return iri, iri[: max(iri.rfind("/"), iri.rfind("#")) + 1]
    prefix, colon, rest = text.partition(":")
    if colon and prefix in prefixes and not rest.startswith("//"):
        return prefixes[prefix] + rest, prefixes[prefix]
    return None


def complete(kb, text: str, cls: str | None = None, relations_of: str | None = None, limit: int = LIMIT,
             kinds: list[str] | None = None) -> dict:
    """The completions of ``text``: nodes, relations and classes (or ``kinds``), best match first."""
    if len(text) > MAX_CHARS:
        raise HTTPError(400, f"parameter 'q' is {len(text):,} characters long: completion takes at most {MAX_CHARS}")
    if not 1 <= limit <= MAX_LIMIT:
        raise HTTPError(400, f"parameter 'limit' must be between 1 and {MAX_LIMIT}")
    for kind in kinds or ():
        if kind not in KINDS:
            raise HTTPError(400, f"parameter 'kind': {kind!r} is not one of {', '.join(KINDS)}")
    if relations_of is not None:
        try:
            relations_of = node_iri(relations_of, kb.prefixes)
        except KqeError as exc:
            raise HTTPError(400, f"parameter 'relations_of': {exc}") from None
        kinds = ["relation"]
    types = None
    if cls is not None:
        try:
            types = kb.resolve_types([cls])
        except KqeError as exc:
            raise HTTPError(400, f"parameter 'class': {exc}") from None
        kinds = ["node"]
    if not text.strip() and relations_of is None:
        raise HTTPError(400, "parameter 'q' is empty: type the start of a name (or give 'relations_of' to list "
                             "the relations leaving a node)")
    kinds = kinds or list(KINDS)
    iri = typed_iri(text, kb.prefixes)
    out: list[dict] = []
    if "relation" in kinds or "class" in kinds:
        out += _schema_terms(kb, text, iri, kinds, relations_of)
    if "node" in kinds:
        out += _nodes(kb, text, iri, types, limit)
    out.sort(key=lambda c: TIERS.index(c["how"]) if c["how"] in TIERS else -1)  # stable: each list's order kept
    return {"q": text, "completions": out[:limit]}


def _nodes(kb, text: str, iri: tuple[str, str] | None, types: set[str] | None, limit: int) -> list[dict]:
    index, prefixes = kb.names, kb.prefixes
    found: list[tuple[str, str, str]] = []
    if iri is not None:
        start, namespace = iri
        found = [(i, index.labels.get(i, ""), "iri") for i in index.iris_starting(start, types, limit)]
        local = start[len(namespace):]
        if len(found) < limit and normalise_name(local):
            # "obo:seiz": the nodes of that namespace named so (the index is asked for more, then kept by IRI)
            named = index.complete(local, types, limit * 20)
            seen = {f[0] for f in found}
            found += [f for f in named if f[0].startswith(namespace) and f[0] not in seen][: limit - len(found)]
    else:
        found = index.complete(text, types, limit)
    shown_types = kb.class_names
    return [{"kind": "node", "iri": i, "prefixed": _prefixed(i, prefixes), "name": index.labels.get(i) or kb.name(i),
             "matched": matched, "how": how,
             "types": sorted(shown_types.get(t, local_name(t)) for t in index.types.get(i, ()))}
            for i, matched, how in found]


def _schema_terms(kb, text: str, iri: tuple[str, str] | None, kinds: list[str], relations_of: str | None) -> list[dict]:
    """Relations (those leaving ``relations_of``, counted, when given) and classes matched by name or IRI start."""
    schema, prefixes = kb.schema, kb.prefixes
    terms: list[tuple[str, str, str, int]] = []  # (kind, iri, label, count)
    if relations_of is not None:
        rows = run_query(kb.store, with_values(load("node_relations_out"), node=[NamedNode(relations_of)]))
        for row in rows:
            relation = row["relation"].value
            term = schema.relations.get(relation)
            terms.append(("relation", relation, term.label if term else local_name(relation), int(row["count"].value)))
    else:
        counts = kb.relation_counts
        if "relation" in kinds:
            terms += [("relation", r, t.label, counts.get(r, 0)) for r, t in schema.relations.items()
                      if not t.virtual and counts.get(r, 0)]
        if "class" in kinds:
            terms += [("class", c, t.label, 0) for c, t in schema.classes.items()]
    if iri is not None:
        start, namespace = iri
        key = folded(start[len(namespace):])
    else:
        start, namespace, key = None, None, normalise_name(text)
    out = []
    for kind, term, label, count in terms:
        if start is not None and term.startswith(start):
            how = "iri"
        elif start is not None and not term.startswith(namespace):
            continue
        elif not key:
            how = "contains" if relations_of is not None else None  # (nothing typed: every relation of the node)
        else:
            found = tier(key, [folded(label or ""), folded(local_name(term))])
            how = None if found is None else TIERS[found]
        if how is None:
            continue
        out.append({"kind": kind, "iri": term, "prefixed": _prefixed(term, prefixes),
                    "name": label or local_name(term), "how": how, **({"count": count} if relations_of else {})})
    rank = {how: n for n, how in enumerate(("iri", *TIERS))}
    return sorted(out, key=lambda c: (rank[c["how"]], -c.get("count", 0), len(c["name"]), c["iri"]))


def _prefixed(iri: str, prefixes: dict[str, str]) -> str | None:
    """``bio:hasPhenotype`` where a prefix of the KB's fits the IRI and leaves a valid local name, else None."""
    name = shown(iri, prefixes)
    return name if name != iri and ":" in name and re.fullmatch(r"[A-Za-z][\w.-]*:[\w-][\w.-]*", name) else None
