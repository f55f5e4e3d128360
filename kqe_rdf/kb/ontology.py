"""The schema of a knowledge base, read from its OWL/RDFS ontology by SPARQL.

The ontology is the one place the schema is written: document rendering,
importers' name checks, and (later) LLM prompts and the triplet compiler all
read this object, which is produced by ``queries/schema_*.rq``.

>>> schema = Schema.from_files(["kqe"])
>>> schema.field("description").label
'description'
"""

from __future__ import annotations

import difflib
import functools
import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote

from pyoxigraph import NamedNode, RdfFormat, Store

from . import queries
from .words import NEGATION_WORDS
from ..core.errors import SchemaError
from ..core.resources import ontology_path

RDFS_LABEL = "http://www.w3.org/2000/01/rdf-schema#label"
CORE = queries.PREFIXES["kqe"]


def local_name(iri: str) -> str:
    return iri.rsplit("#", 1)[-1].rsplit("/", 1)[-1]


def shown_names(iris: Iterable[str], prefixes: dict[str, str]) -> dict[str, str]:
    """The names a user reads for classes or relations: the local name as the source wrote it (a relation
    imported as ``state%2Fprovince`` reads ``state/province``), and, where two share it (``dbo:Country`` and
    ``geof:Country``), prefixed by their namespace's prefix, else the whole IRI.

    >>> shown_names(["http://a.org/x#Country", "http://b.org/y#Country", "http://a.org/x#made%20by"], {"a": "http://a.org/x#"})
    {'http://a.org/x#Country': 'a:Country', 'http://b.org/y#Country': 'http://b.org/y#Country', 'http://a.org/x#made%20by': 'made by'}
    """
    iris = list(dict.fromkeys(iris))
    local = {iri: unquote(local_name(iri)) for iri in iris}
    seen = Counter(local.values())
    out = {}
    for iri in iris:
        prefix = next((p for p, ns in prefixes.items() if iri == ns + local_name(iri)), None)
        out[iri] = local[iri] if seen[local[iri]] == 1 else f"{prefix}:{local[iri]}" if prefix else iri
    return out




def negates(label: str) -> bool:
    """Whether a relation's label says the fact is an absence.

    >>> negates("lacks phenotype"), negates("absent in"), negates("has phenotype")
    (True, True, False)
    """
    return bool(NEGATION_WORDS & set(re.findall(r"[a-z]+", label.lower())))


#: What separates the segments of a namespaced name: Freebase's ``people.person.place_of_birth``, its RDF dumps'
#: ``/people/person/place_of_birth`` and IRN's ``__people__person__place_of_birth``.
_SEGMENTS = re.compile(r"__|[./]")


def readable(name: str) -> str:
    """A name as words, for a relation the source gives no label (``hasBrand`` / ``has_brand`` → ``has brand``); a
    namespaced name reads as its last segment, the way people say it (:func:`name_context` keeps the rest).

    >>> readable("placeOfBirth"), readable("__people__person__place_of_birth"), readable("/film/film/genre")
    ('place of birth', 'place of birth', 'genre')
    """
    segments = [p for p in _SEGMENTS.split(name) if p.strip("_ ")]
    last = segments[-1] if segments else name
    return " ".join(re.sub(r"(?<=[a-z0-9])(?=[A-Z])", " ", last).replace("_", " ").split()).lower()


def name_context(name: str) -> str:
    """The segments of a namespaced name before its last, as words: what kind of thing the relation belongs to.

    >>> name_context("__people__person__place_of_birth"), name_context("people.person.nationality")
    ('people › person', 'people › person')
    >>> name_context("placeOfBirth")
    ''
    """
    segments = [p for p in _SEGMENTS.split(name) if p.strip("_ ")]
    return " › ".join(" ".join(s.replace("_", " ").split()).lower() for s in segments[:-1])


@dataclass(frozen=True)
class Term:
    iri: str
    label: str
    comment: str = ""

    @property
    def name(self) -> str:
        return local_name(self.iri)


@dataclass(frozen=True)
class Relation(Term):
    domain: str | None = None
    range: str | None = None
    inverse: str | None = None
    transitive: bool = False
    #: Declared as ``owl:inverseOf`` another property: a reading direction, not stored in the data.
    virtual: bool = False


@dataclass
class Schema:
    classes: dict[str, Term] = field(default_factory=dict)
    parents: dict[str, set[str]] = field(default_factory=dict)
    fields: dict[str, Term] = field(default_factory=dict)
    relations: dict[str, Relation] = field(default_factory=dict)
    qualifiers: dict[str, Term] = field(default_factory=dict)
    #: Words naming each class in questions (its label and skos:altLabel values).
    class_cues: dict[str, list[str]] = field(default_factory=dict)
    #: How the ontology names each relation: its rdfs:label and skos:altLabel phrases ("directed by", "director").
    relation_phrases: dict[str, set[str]] = field(default_factory=dict)
    #: Relations the data actually uses (set by the KB from its edge counts); their inverses are virtual.
    stored_relations: set[str] = field(default_factory=set)
    #: Hierarchy relation → the predicate of its reflexive-transitive closure stored with the KB (set by the KB).
    closures: dict[str, str] = field(default_factory=dict)

    @classmethod
    def from_files(cls, domains: Iterable[str | Path]) -> Schema:
        """Load ``ontologies/<domain>.ttl`` files (or explicit paths) into a scratch store."""
        store = Store()
        for domain in domains:
            path = Path(domain) if isinstance(domain, Path) else ontology_path(domain)
            if not path.is_file():
                raise SchemaError(f"no ontology file {path}")
            try:
                store.load(path=str(path), format=RdfFormat.TURTLE)
            except SyntaxError as exc:
                line = getattr(exc, "lineno", None)
                raise SchemaError(f"{path}{f':{line}' if line else ''}: not a Turtle ontology "
                                  f"({str(exc).split(' (')[0]})") from None
        return cls.from_store(store)

    @classmethod
    def from_store(cls, store: Store) -> Schema:
        schema = cls()

        def rows(name: str):
            return store.query(queries.load(name), use_default_graph_as_union=True)

        def text(term) -> str:
            return term.value if term is not None else ""

        for row in rows("schema_classes"):
            iri = row["class"].value
            schema.classes.setdefault(iri, Term(iri, text(row["label"]) or local_name(iri), text(row["comment"])))
            if row["parent"] is not None:
                schema.parents.setdefault(iri, set()).add(row["parent"].value)
        for row in rows("schema_fields"):
            iri = row["property"].value
            schema.fields.setdefault(iri, Term(iri, text(row["label"]) or local_name(iri), text(row["comment"])))
        for row in rows("schema_relations"):
            iri = row["property"].value
            if iri in schema.relations:
                continue
            schema.relations[iri] = Relation(
                iri,
                text(row["label"]) or readable(local_name(iri)),
                text(row["comment"]),
                domain=text(row["domain"]) or None,
                range=text(row["range"]) or None,
                inverse=text(row["inverse"]) or None,
                transitive=row["transitive"] is not None,
                virtual=row["virtual"] is not None,
            )
        for row in rows("schema_class_cues"):
            cues = schema.class_cues.setdefault(row["class"].value, [])
            if row["cue"].value.lower() not in cues:
                cues.append(row["cue"].value.lower())
        for iri in schema.classes:
            if iri not in schema.class_cues:
                # A user's class with no label (``nobel:Laureate``, ``dbo:NobelPrize``) is still named in requests
                # by its local name as words ("which laureates", "the nobel prize").
                schema.class_cues[iri] = [readable(local_name(iri))]
        for row in rows("relation_phrases"):
            schema.relation_phrases.setdefault(row["property"].value, set()).add(row["phrase"].value)
        for row in rows("schema_qualifiers"):
            iri = row["property"].value
            schema.qualifiers.setdefault(iri, Term(iri, text(row["label"]) or local_name(iri)))
        return schema

    @functools.cached_property
    def words(self) -> frozenset[str]:
        """The words of the class cues and relation phrases (labels and alt labels), lower-case: a request's
        words that speak of the schema ("film", "directed", "director"), never alone the name of a node it
        mentions and never one of its unknown words.

        >>> {"film", "directed", "director", "screenwriter"} <= Schema.from_files(["kqe", "metaqa"]).words
        True
        """
        words = {w for cues in self.class_cues.values() for cue in cues for w in cue.split()}
        words |= {w for r in self.relations.values() for w in r.label.lower().split()}
        words |= {w for phrases in self.relation_phrases.values() for p in phrases for w in p.lower().split()}
        return frozenset(words)

    def hierarchy_relation(self, class_iri: str | None) -> str | None:
        """A transitive relation from a class to itself (e.g. bio:isA on Phenotype), if the ontology has one."""
        if not class_iri:
            return None
        for r in self.relations.values():
            if r.transitive and r.domain == class_iri and r.range == class_iri:
                return r.iri
        return None

    # Names in records are local names ("Disease", "hasPhenotype") or full IRIs.
    def _resolve(self, kind: str, table: dict[str, Term], name: str) -> Term:
        if name in table:
            return table[name]
        cache = self.__dict__.setdefault("_resolved", {})
        if (kind, name) in cache:
            return cache[(kind, name)]
        # Local name → terms, indexed once per kind: a scan per name made imports quadratic in the fields.
        by_name = self.__dict__.setdefault("_by_name", {})
        if kind not in by_name:
            by_name[kind] = {}
            for term in table.values():
                by_name[kind].setdefault(term.name, []).append(term)
        matches = by_name[kind].get(name, [])
        if len(matches) > 1:  # a domain term overrides a core term of the same name
            matches = [t for t in matches if not t.iri.startswith(CORE)] or matches
        if len(matches) == 1:
            cache[(kind, name)] = matches[0]
            return matches[0]
        if len(matches) > 1:
            raise SchemaError(f"{kind} name {name!r} is ambiguous: {', '.join(t.iri for t in matches)}")
        known = sorted(by_name[kind])
        close = difflib.get_close_matches(name, known, n=3) if len(known) <= 1000 else []
        hint = f"; did you mean {', '.join(close)}?" if close else f"; known: {', '.join(known[:30])}"
        raise SchemaError(f"the ontology defines no {kind} {name[:80]!r}{hint}")

    def node_class(self, name: str) -> Term:
        return self._resolve("class", self.classes, name)

    def field(self, name: str) -> Term:
        return self._resolve("document field", self.fields, name)

    def relation(self, name: str) -> Relation:
        return self._resolve("relation", self.relations, name)  # type: ignore[return-value]

    def qualifier(self, name: str) -> Term:
        return self._resolve("edge qualifier", self.qualifiers, name)

    def inverse_label(self, relation_iri: str) -> str:
        """How a relation reads from its tail: the inverse's label, else "<label> of"."""
        rel = self.relations.get(relation_iri)
        if rel is None:
            return f"{local_name(relation_iri)} (inverse)"
        if rel.inverse and rel.inverse in self.relations:
            return self.relations[rel.inverse].label
        label = rel.label
        if label.startswith("has "):
            return f"{label[4:]} of"
        if label.endswith(" of"):
            return f"has {label[:-3]}"
        if label.startswith("is ") and label.endswith(" by"):
            return label[3:-3]
        return f"{label} (inverse)"

    def label(self, iri: str) -> str:
        for table in (self.classes, self.relations, self.fields, self.qualifiers):
            if iri in table:
                return table[iri].label
        return local_name(iri)

    def subclasses(self, class_iri: str) -> set[str]:
        """The class and every class below it (for type filters)."""
        out = {class_iri}
        changed = True
        while changed:
            changed = False
            for child, parents in self.parents.items():
                if child not in out and parents & out:
                    out.add(child)
                    changed = True
        return out

    def describe_for_prompt(self) -> str:
        """The document structure an LLM needs: node types, and the stored relations with their
        direction and how they read backwards."""
        lines = ["Node types:"]
        lines += [f"- {c.name}: {c.comment or c.label}" for c in self.classes.values()]
        lines.append("Relations (name: head type -> tail type; meaning):")
        for r in self.relations.values():
            if r.virtual or (self.stored_relations and r.iri not in self.stored_relations):
                continue
            dom = local_name(r.domain) if r.domain else "Node"
            rng = local_name(r.range) if r.range else "Node"
            lines.append(f"- {r.name}: {dom} -> {rng}; \"{dom} {r.label} {rng}\" "
                         f"(read backwards: \"{rng} {self.inverse_label(r.iri)} {dom}\")")
        return "\n".join(lines)

    def describe(self) -> str:
        """The document structure as text: node types, fields, relations with direction."""
        lines = ["Node types:"]
        lines += [f"- {c.name}: {c.comment or c.label}" for c in self.classes.values()]
        lines.append("Document fields:")
        lines += [f"- {f.name} ({f.label})" for f in self.fields.values()]
        lines.append("Relations (head type -> tail type):")
        for r in self.relations.values():
            dom = local_name(r.domain) if r.domain else "Node"
            rng = local_name(r.range) if r.range else "Node"
            lines.append(f"- {r.name}: {dom} -> {rng} ({r.label})")
        return "\n".join(lines)


def node_iri(domain: str, node_id: str) -> str:
    """A stable IRI for a node that has none of its own: its id percent-encoded as ``quote(id, safe='')``
    does it, encoding only the runs of other characters than unreserved ones (a build names every node).

    >>> node_iri("metaqa", "Tom Hanks/À")
    'https://w3id.org/kqe/metaqa/node/Tom%20Hanks%2F%C3%80'
    """
    return f"https://w3id.org/kqe/{domain}/node/{_RESERVED.sub(_percent_encoded, node_id)}"


_RESERVED = re.compile(r"[^A-Za-z0-9_.~-]+")
#: Runs already encoded (most are a space, a comma or a parenthesis): looked up, not encoded again.
_ENCODED_RUNS: dict[str, str] = {}


def _percent_encoded(match: re.Match) -> str:
    run = match.group()
    encoded = _ENCODED_RUNS.get(run)
    if encoded is None:
        encoded = "".join([f"%{byte:02X}" for byte in run.encode("utf-8")])
        if len(_ENCODED_RUNS) < 100_000:
            _ENCODED_RUNS[run] = encoded
    return encoded


def as_named_node(iri: str) -> NamedNode:
    try:
        return NamedNode(iri)
    except ValueError as exc:
        raise SchemaError(f"not a valid IRI: {iri!r} ({exc})") from None
