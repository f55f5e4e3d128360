"""Bring your own KB: a STaRK-style SKB as JSON Lines.

One JSON object per line, nodes and edges in any order::

    {"kind": "node", "id": "B0001", "type": "Product", "name": "Nikon D750",
     "aliases": ["D750"], "fields": {"description": "Full-frame DSLR ..."}, "xrefs": []}
    {"kind": "edge", "head": "B0001", "relation": "hasBrand", "tail": "nikon",
     "qualifiers": {}}

``type``, field names and ``relation`` are names in an ontology: give one
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

from pyoxigraph import Literal, NamedNode, RdfFormat, Triple, serialize

from ..errors import InputError
from ..records import Edge, ImportReport, Node
from ..resources import ontology_path
from . import Importer
from .reading import numbered_lines

RDF = "http://www.w3.org/1999/02/22-rdf-syntax-ns#"
RDFS = "http://www.w3.org/2000/01/rdf-schema#"
OWL = "http://www.w3.org/2002/07/owl#"
KQE = "https://w3id.org/kqe/core#"


def readable(name: str) -> str:
    """``hasBrand`` / ``has_brand`` → ``has brand``."""
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", " ", name).replace("_", " ").strip().lower()


_NAME = re.compile(r"[\w.-]+")


def _ontology_name(name: str, what: str, where: str) -> str:
    """A type, field or relation name becomes the local name of an ontology IRI, so it must be one word."""
    if not _NAME.fullmatch(name):
        suggestion = "_".join(_NAME.findall(name)) or "name"
        raise InputError(f"{what} {name!r} cannot be an ontology name: use letters, digits, '_', '-' or '.' "
                         f"(e.g. {suggestion!r})", where)
    return name


def _strings(value: object, what: str, where: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,)
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return tuple(value)
    raise InputError(f"{what} must be a string or a list of strings", where)


class JsonlImporter(Importer):
    name = "jsonl"
    domain = "skb"
    summary = "a STaRK-style semi-structured KB as JSON Lines (nodes with type/name/fields, typed edges)"

    def __init__(self, sources=(), limit=None, **options) -> None:
        super().__init__(sources, limit, **options)
        self.domain = str(options.get("domain") or "skb")
        self._generated: Path | None = None

    def _parsed(self, report: ImportReport | None = None) -> Iterator[tuple[str, dict]]:
        for path in self.require_sources(1, "a JSON Lines file"):
            for number, line in numbered_lines(path, report):
                where = f"{path}:{number}"
                if not line.strip():
                    continue
                try:
                    obj = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise InputError(f"not valid JSON ({exc.msg} at column {exc.colno})", where) from None
                if not isinstance(obj, dict):
                    raise InputError("each line must be a JSON object", where)
                yield where, obj

    def records(self, report: ImportReport) -> Iterator[Node | Edge]:
        nodes = 0
        for where, obj in self._parsed(report):
            kind = obj.get("kind") or ("edge" if "relation" in obj else "node")
            if kind == "node":
                if self.limit is not None and nodes >= self.limit:
                    continue
                for key in ("id", "type"):
                    if not isinstance(obj.get(key), (str, int)) or str(obj.get(key)).strip() == "":
                        raise InputError(f"a node needs a non-empty {key!r}", where)
                fields = obj.get("fields") or {}
                if not isinstance(fields, dict):
                    raise InputError("'fields' must be an object of field name → text", where)
                pairs = tuple((k, v) for k, vs in fields.items() for v in _strings(vs, f"field {k!r}", where))
                nodes += 1
                yield Node(str(obj["id"]), str(obj["type"]), str(obj.get("name") or ""),
                           _strings(obj.get("aliases"), "aliases", where), pairs,
                           _strings(obj.get("xrefs"), "xrefs", where), obj.get("iri"), where)
            elif kind == "edge":
                for key in ("head", "relation", "tail"):
                    if not isinstance(obj.get(key), (str, int)) or str(obj.get(key)).strip() == "":
                        raise InputError(f"an edge needs a non-empty {key!r}", where)
                quals = obj.get("qualifiers") or {}
                if not isinstance(quals, dict):
                    raise InputError("'qualifiers' must be an object", where)
                yield Edge(str(obj["head"]), str(obj["relation"]), str(obj["tail"]),
                           tuple((k, str(v)) for k, v in quals.items()), where)
            else:
                raise InputError(f"'kind' must be 'node' or 'edge', not {kind!r}", where)

    def ontology_files(self) -> list[Path]:
        given = self.options.get("ontology")
        if given:
            return [ontology_path("kqe"), Path(str(given))]
        if self._generated is None:
            self._generated = self._generate_ontology()
        return [ontology_path("kqe"), self._generated]

    def _generate_ontology(self) -> Path:
        ns = f"https://w3id.org/kqe/{self.domain}#"
        types: dict[str, str] = {}
        fields: set[str] = set()
        relations: dict[str, tuple[str, str]] = {}
        qualifiers: set[str] = set()
        node_type: dict[str, str] = {}
        edges = []
        for where, obj in self._parsed():
            if (obj.get("kind") or ("edge" if "relation" in obj else "node")) == "node":
                if obj.get("type") is not None and obj.get("id") is not None:
                    types.setdefault(_ontology_name(str(obj["type"]), "type", where), "")
                    node_type.setdefault(str(obj["id"]), str(obj["type"]))
                if isinstance(obj.get("fields"), dict):
                    fields.update(_ontology_name(str(f), "field name", where) for f in obj["fields"])
            else:
                if obj.get("relation") is not None:
                    _ontology_name(str(obj["relation"]), "relation", where)
                edges.append((str(obj.get("head")), str(obj.get("relation")), str(obj.get("tail"))))
                if isinstance(obj.get("qualifiers"), dict):
                    qualifiers.update(_ontology_name(str(q), "qualifier", where) for q in obj["qualifiers"])
        for head, rel, tail in edges:
            relations.setdefault(rel, (node_type.get(head, ""), node_type.get(tail, "")))
        a, label, sub = NamedNode(RDF + "type"), NamedNode(RDFS + "label"), NamedNode(RDFS + "subPropertyOf")
        triples = []
        for t in types:
            iri = NamedNode(ns + t)
            triples += [Triple(iri, a, NamedNode(OWL + "Class")), Triple(iri, NamedNode(RDFS + "subClassOf"), NamedNode(KQE + "Node")),
                        Triple(iri, label, Literal(readable(t)))]
        for f in sorted(fields):
            iri = NamedNode(ns + f)
            triples += [Triple(iri, a, NamedNode(OWL + "DatatypeProperty")), Triple(iri, sub, NamedNode(KQE + "field")),
                        Triple(iri, label, Literal(readable(f)))]
        for q in sorted(qualifiers):
            iri = NamedNode(ns + q)
            triples += [Triple(iri, a, NamedNode(OWL + "DatatypeProperty")), Triple(iri, sub, NamedNode(KQE + "qualifier")),
                        Triple(iri, label, Literal(readable(q)))]
        for rel, (dom, rng) in relations.items():
            iri = NamedNode(ns + rel)
            triples += [Triple(iri, a, NamedNode(OWL + "ObjectProperty")), Triple(iri, sub, NamedNode(KQE + "relation")),
                        Triple(iri, label, Literal(readable(rel)))]
            if dom:
                triples.append(Triple(iri, NamedNode(RDFS + "domain"), NamedNode(ns + dom)))
            if rng:
                triples.append(Triple(iri, NamedNode(RDFS + "range"), NamedNode(ns + rng)))
        folder = tempfile.mkdtemp(prefix="kqe-jsonl-")
        weakref.finalize(self, shutil.rmtree, folder, True)  # a build copies the file into the KB
        path = Path(folder) / f"{self.domain}.ttl"
        path.write_bytes(serialize(triples, format=RdfFormat.TURTLE) or b"")
        return path
