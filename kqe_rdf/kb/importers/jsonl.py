"""Bring your own KB: a STaRK-style SKB as JSON Lines.

One JSON object per line, nodes and edges in any order::

    {"kind": "node", "id": "B0001", "type": "Product", "name": "Nikon D750",
     "aliases": ["D750"], "fields": {"description": "Full-frame DSLR ..."}, "xrefs": []}
    {"kind": "node", "id": "HP:0000256", "type": "Phenotype", "name": "Macrocephaly",
     "broader_aliases": ["Big head"]}
    {"kind": "edge", "head": "B0001", "relation": "hasBrand", "tail": "nikon",
     "qualifiers": {}}

``aliases`` are other names of the node; ``broader_aliases`` names people use for it that also cover more (a
thesaurus's broader synonyms: "big head" for Macrocephaly), which the linker takes below names
(``kqe:broadAlias``). ``type``, field names and ``relation`` are names in an ontology: give one
with ``--option ontology=schema.ttl`` (classes under kqe:Node, fields under
kqe:field, relations under kqe:relation), or let the importer write one from
the names the file uses (readable labels from camelCase/snake_case names,
domain and range from the first edge seen).
"""

from __future__ import annotations

import json
import re
import shutil
import tempfile
import weakref
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

from pyoxigraph import Literal, NamedNode, RdfFormat, Triple, parse, serialize

from ...core.errors import InputError
from ..ontology import name_context, readable
from ..records import Edge, ImportReport, Node
from ...core.resources import ontology_path
from . import Importer
from .reading import numbered_lines, parse_json


def _check_ontology(path: Path) -> None:
    """``--option ontology=FILE`` must be a Turtle file: say so now, naming the option and the line."""
    what = f"--option ontology={path}"
    if not path.is_file():
        raise InputError(f"{what}: no such file")
    try:
        with open(path, "rb") as handle:
            for _ in parse(handle, format=RdfFormat.TURTLE, base_iri=path.resolve().as_uri()):
                pass
    except SyntaxError as exc:
        line = getattr(exc, "lineno", None)
        raise InputError(f"{what}: not a Turtle ontology: {path}{f':{line}' if line else ''}: "
                         f"{str(exc).split(' (')[0]}") from None
    except (OSError, MemoryError, ValueError) as exc:
        raise InputError(f"{what}: cannot read it as a Turtle ontology ({exc})") from None

RDF = "http://www.w3.org/1999/02/22-rdf-syntax-ns#"
RDFS = "http://www.w3.org/2000/01/rdf-schema#"
OWL = "http://www.w3.org/2002/07/owl#"
KQE = "https://w3id.org/kqe/core#"
SKOS_NOTATION = "http://www.w3.org/2004/02/skos/core#notation"




_NAME = re.compile(r"[\w.-]+")
#: A domain names the ontology's namespace and the node IRIs (``https://w3id.org/kqe/<domain>/node/…``).
_DOMAIN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}")
#: Longest type, field, relation or qualifier name (it becomes an IRI in the ontology).
MAX_NAME_CHARS = 256


def ontology_local(name: str) -> str:
    """The local name of a type, field or relation's IRI: the name itself when it is one word, else the name
    percent-encoded, so that real data's names (``state/province``, ``portD'attache``, Freebase's
    ``/people/person/nationality``, ``date of birth``) import as they are; the label reads the original.

    >>> ontology_local("hasBrand"), ontology_local("state/province"), ontology_local("né à")
    ('hasBrand', 'state%2Fprovince', 'n%C3%A9%20%C3%A0')
    """
    return name if _NAME.fullmatch(name) else quote(name, safe="")


def _ontology_name(name: str, what: str, where: str) -> str:
    """A type, field or relation name: at most :data:`MAX_NAME_CHARS` long, since it becomes an IRI."""
    if len(name) > MAX_NAME_CHARS:
        raise InputError(f"{what} {name[:40]!r}… is {len(name):,} characters long; at most {MAX_NAME_CHARS}", where)
    return name


def _values(value: object, what: str, where: str) -> tuple:
    """A field's values: strings, and numbers and booleans kept as such (typed literals in the store, so a value
    condition compares them); a list of them."""
    def plain(v: object) -> bool:
        return isinstance(v, str | int | float) and not (isinstance(v, float) and v != v)

    if value is None:
        return ()
    if plain(value):
        return (value,)
    if isinstance(value, list) and all(plain(v) for v in value):
        return tuple(value)
    raise InputError(f"{what} must be a string, a number, a boolean or a list of them", where)


def _strings(value: object, what: str, where: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,)
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return tuple(value)
    raise InputError(f"{what} must be a string or a list of strings", where)


def _key(obj: dict, key: str, what: str, where: str) -> str:
    """An id, type or relation: a non-empty string or an integer (JSON ``true`` is not an id)."""
    value = obj.get(key)
    if isinstance(value, bool) or not isinstance(value, (str, int)) or str(value).strip() == "":
        shown = "" if value is None else f", not {json.dumps(value)[:40]}"
        raise InputError(f"{what} needs a non-empty {key!r} (a string or an integer{shown})", where)
    return str(value)


def _kind(obj: dict) -> str:
    return obj.get("kind") or ("edge" if "relation" in obj else "node")


def _checked(obj: dict, where: str) -> dict:
    """The line's record with every value of the type the format documents, or an error naming ``where``."""
    kind = _kind(obj)
    if kind == "node":
        for key in ("id", "type"):
            _key(obj, key, "a node", where)
        if obj.get("name") is not None and not isinstance(obj["name"], str):
            raise InputError(f"'name' must be a string, not {json.dumps(obj['name'])[:40]}", where)
        if obj.get("iri") is not None:
            iri = obj["iri"]
            if not isinstance(iri, str):
                raise InputError(f"'iri' must be a string (an absolute IRI), not {json.dumps(iri)[:40]}", where)
            try:
                NamedNode(iri)
            except ValueError as exc:
                raise InputError(f"'iri' {iri[:80]!r} is not a valid IRI ({exc})", where) from None
        fields = obj.get("fields") or {}
        if not isinstance(fields, dict):
            raise InputError("'fields' must be an object of field name → text", where)
        for name, values in fields.items():
            _values(values, f"field {name[:80]!r}", where)
        _strings(obj.get("aliases"), "aliases", where)
        _strings(obj.get("broader_aliases"), "broader_aliases", where)
        _strings(obj.get("xrefs"), "xrefs", where)
    elif kind == "edge":
        for key in ("head", "relation", "tail"):
            _key(obj, key, "an edge", where)
        quals = obj.get("qualifiers") or {}
        if not isinstance(quals, dict):
            raise InputError("'qualifiers' must be an object", where)
        for name, value in quals.items():
            if isinstance(value, bool) or not isinstance(value, (str, int, float)):
                raise InputError(f"qualifier {name[:80]!r} must be a string or a number, "
                                 f"not {json.dumps(value)[:40]}", where)
    else:
        raise InputError(f"'kind' must be 'node' or 'edge', not {repr(kind)[:40]}", where)
    return obj


class JsonlImporter(Importer):
    name = "jsonl"
    domain = "skb"
    summary = "a STaRK-style semi-structured KB as JSON Lines (nodes with type/name/fields, typed edges)"

    def __init__(self, sources=(), limit=None, **options) -> None:
        super().__init__(sources, limit, **options)
        self.domain = str(options.get("domain") or "skb")
        if not _DOMAIN.fullmatch(self.domain):
            raise InputError(f"--option domain={self.domain!r}: a domain is 1-64 letters, digits, '_' or '-', "
                             "starting with a letter or digit (it names the ontology and the node IRIs)")
        if options.get("ontology"):
            _check_ontology(Path(str(options["ontology"])))
        self._generated: Path | None = None

    def _parsed(self, report: ImportReport | None = None) -> Iterator[tuple[str, dict]]:
        for path in self.require_sources(1, "a JSON Lines file"):
            for number, line in numbered_lines(path, report):
                where = f"{path}:{number}"
                if not line.strip():
                    continue
                obj = parse_json(line, where)
                if not isinstance(obj, dict):
                    raise InputError("each line must be a JSON object", where)
                yield where, _checked(obj, where)

    def records(self, report: ImportReport) -> Iterator[Node | Edge]:
        nodes = 0
        for where, obj in self._parsed(report):
            if _kind(obj) == "node":
                if self.limit is not None and nodes >= self.limit:
                    continue
                pairs = tuple((ontology_local(k), v) for k, vs in (obj.get("fields") or {}).items()
                              for v in _values(vs, k, where))
                broader = _strings(obj.get("broader_aliases"), "broader_aliases", where)
                pairs += tuple(("broadAlias", v) for v in broader)
                nodes += 1
                yield Node(str(obj["id"]), ontology_local(str(obj["type"])), obj.get("name") or "",
                           _strings(obj.get("aliases"), "aliases", where), pairs,
                           _strings(obj.get("xrefs"), "xrefs", where), obj.get("iri"), where)
            else:
                yield Edge(str(obj["head"]), ontology_local(str(obj["relation"])), str(obj["tail"]),
                           tuple((ontology_local(k), str(v)) for k, v in (obj.get("qualifiers") or {}).items()), where)

    def ontology_files(self) -> list[Path]:
        given = self.options.get("ontology")
        if given:
            return [ontology_path("kqe"), Path(str(given))]
        if self._generated is None:
            self._generated = self._generate_ontology()
        return [ontology_path("kqe"), self._generated]

    def inverse_relations(self) -> dict[str, str]:
        """Relations declared ``owl:inverseOf`` another, whose edges the file does not store (none here)."""
        return {}

    def inverse_label(self, relation: str) -> str:
        return readable(relation)

    def _generate_ontology(self) -> Path:
        ns = f"https://w3id.org/kqe/{self.domain}#"
        types: dict[str, str] = {}
        fields: set[str] = set()
        relations: dict[str, tuple[str, str]] = {}
        qualifiers: set[str] = set()
        node_type: dict[str, str] = {}
        edges = []
        for where, obj in self._parsed():
            if _kind(obj) == "node":
                types.setdefault(_ontology_name(str(obj["type"]), "type", where), "")
                node_type.setdefault(str(obj["id"]), str(obj["type"]))
                fields.update(_ontology_name(f, "field name", where) for f in obj.get("fields") or {})
            else:
                _ontology_name(str(obj["relation"]), "relation", where)
                edges.append((str(obj["head"]), str(obj["relation"]), str(obj["tail"])))
                qualifiers.update(_ontology_name(q, "qualifier", where) for q in obj.get("qualifiers") or {})
        for head, rel, tail in edges:
            relations.setdefault(rel, (node_type.get(head, ""), node_type.get(tail, "")))
        a, label, sub = NamedNode(RDF + "type"), NamedNode(RDFS + "label"), NamedNode(RDFS + "subPropertyOf")

        def term(name: str) -> NamedNode:
            return NamedNode(ns + ontology_local(name))

        triples = [Triple(term(name), NamedNode(SKOS_NOTATION), Literal(name))  # the name as the file writes it
                   for name in (*types, *fields, *qualifiers, *relations, *self.inverse_relations())
                   if ontology_local(name) != name]
        for t in types:
            iri = term(t)
            triples += [Triple(iri, a, NamedNode(OWL + "Class")), Triple(iri, NamedNode(RDFS + "subClassOf"), NamedNode(KQE + "Node")),
                        Triple(iri, label, Literal(readable(t)))]
        for f in sorted(fields):
            iri = term(f)
            triples += [Triple(iri, a, NamedNode(OWL + "DatatypeProperty")), Triple(iri, sub, NamedNode(KQE + "field")),
                        Triple(iri, label, Literal(readable(f)))]
        for q in sorted(qualifiers):
            iri = term(q)
            triples += [Triple(iri, a, NamedNode(OWL + "DatatypeProperty")), Triple(iri, sub, NamedNode(KQE + "qualifier")),
                        Triple(iri, label, Literal(readable(q)))]
        for rel, (dom, rng) in relations.items():
            iri = term(rel)
            triples += [Triple(iri, a, NamedNode(OWL + "ObjectProperty")), Triple(iri, sub, NamedNode(KQE + "relation")),
                        Triple(iri, label, Literal(readable(rel)))]
            if context := name_context(rel):  # "__people__person__nationality": the nationality of a person
                triples.append(Triple(iri, NamedNode(RDFS + "comment"), Literal(f"{readable(rel)} ({context})")))
            if dom:
                triples.append(Triple(iri, NamedNode(RDFS + "domain"), term(dom)))
            if rng:
                triples.append(Triple(iri, NamedNode(RDFS + "range"), term(rng)))
        for inverse, rel in sorted(self.inverse_relations().items()):
            iri = term(inverse)
            triples += [Triple(iri, a, NamedNode(OWL + "ObjectProperty")), Triple(iri, sub, NamedNode(KQE + "relation")),
                        Triple(iri, NamedNode(OWL + "inverseOf"), term(rel)),
                        Triple(iri, label, Literal(self.inverse_label(inverse)))]
            dom, rng = relations.get(rel, ("", ""))
            if rng:
                triples.append(Triple(iri, NamedNode(RDFS + "domain"), term(rng)))
            if dom:
                triples.append(Triple(iri, NamedNode(RDFS + "range"), term(dom)))
        folder = tempfile.mkdtemp(prefix="kqe-jsonl-")
        weakref.finalize(self, shutil.rmtree, folder, True)  # a build copies the file into the KB
        path = Path(folder) / f"{self.domain}.ttl"
        path.write_bytes(serialize(triples, format=RdfFormat.TURTLE) or b"")
        return path
