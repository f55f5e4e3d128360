"""PrimeKG (Chandak, Huang and Zitnik, Sci. Data 2023), the graph STaRK-Prime is made from.

Sources: a folder holding PrimeKG's published ``kg.csv`` and, for node text,
``disease_features.csv`` and ``drug_features.csv`` (Harvard Dataverse,
doi:10.7910/DVN/IXA7BM), or those files named one by one. ``kg.csv`` is
required; without a feature file its nodes are named but have no text.

- ``kg.csv`` (``relation, display_relation, x_index, x_id, x_type, x_name,
  x_source, y_index, y_id, y_type, y_name, y_source``): one node per
  ``x_index``/``y_index`` — PrimeKG's node index, which is STaRK-Prime's node
  id, so ``kqe-rdf eval stark`` finds gold answers by it — typed by ``x_type``,
  named by ``x_name``, with ``x_source:x_id`` as a cross-reference; one edge
  per row. Every edge is listed in both directions; the one the ontology's
  domain and range fix is stored once (for edges within one type, the first
  seen), and the inverse reads it from the other end.
- ``disease_features.csv`` / ``drug_features.csv``: their text columns become
  the node's fields, member names of a grouped disease (``mondo_name``) its aliases.

Which x_type, column and relation value stands for which class, field and
relation is written in ``ontologies/primekg.ttl`` (``primekg:csvName``), nowhere else.

>>> edge_key(3, 10, 7, symmetric=True) == edge_key(3, 7, 10, symmetric=True)
True
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from pyoxigraph import RdfFormat, Store

from .. import queries
from ...core.errors import InputError, KqeError
from ..ontology import local_name
from ..records import Edge, ImportReport, Node
from . import Importer
from .reading import CsvFile

KG = "kg.csv"
FEATURES = ("disease_features.csv", "drug_features.csv")
KG_COLUMNS = ("relation", "display_relation", "x_index", "x_id", "x_type", "x_name", "x_source",
              "y_index", "y_id", "y_type", "y_name", "y_source")
#: Feature columns that are identifiers or names rather than text (mondo_name: the member's own name → alias).
ID_COLUMNS = ("node_index", "mondo_id", "group_id_bert")
ALIAS_COLUMN = "mondo_name"

DATAVERSE = "Harvard Dataverse, doi:10.7910/DVN/IXA7BM (https://dataverse.harvard.edu/dataset.xhtml?persistentId=doi:10.7910/DVN/IXA7BM)"
LICENCE = ("PrimeKG, Chandak, Huang and Zitnik, Building a knowledge graph to enable precision medicine, Sci. Data "
           "10, 67 (2023), CC BY 4.0; its feature texts come from DrugBank, Orphanet, UMLS and the Mayo Clinic "
           "under their own terms.")


def edge_key(relation: int, head: int, tail: int, symmetric: bool) -> int:
    """One number per stored edge, the same for both directions of a relation within one type."""
    if symmetric and tail < head:
        head, tail = tail, head
    return (relation << 80) | (head << 40) | tail


@dataclass(frozen=True)
class Mapping:
    """PrimeKG's words for the ontology's terms (read from primekg.ttl)."""

    classes: dict[str, str]  # x_type → class name
    fields: dict[str, str]  # feature column → field name
    relations: dict[tuple[str, str], tuple[str, str, str]]  # (relation, display_relation) → (relation, domain, range)

    @classmethod
    def from_files(cls, files: list[Path]) -> Mapping:
        store = Store()
        for path in files:
            store.load(path=str(path), format=RdfFormat.TURTLE)
        classes, fields, relations = {}, {}, {}
        for row in store.query(queries.load("primekg_mapping")):
            name, kind, csv_name = local_name(row["term"].value), local_name(row["kind"].value), row["csv"].value
            if kind == "Class":
                classes[csv_name] = name
            elif kind == "DatatypeProperty":
                fields[csv_name] = name
            elif row["display"] is not None and row["domain"] is not None and row["range"] is not None:
                relations[(csv_name, row["display"].value)] = (name, local_name(row["domain"].value),
                                                               local_name(row["range"].value))
        return cls(classes, fields, relations)


class PrimeKGImporter(Importer):
    name = "primekg"
    domain = "primekg"
    summary = "PrimeKG (the KB of STaRK-Prime) from its published kg.csv and disease/drug feature CSVs"

    def _files(self) -> tuple[Path, list[Path]]:
        """(kg.csv, the feature files present)."""
        sources = self.require_sources(1, f"PrimeKG's {KG} (a folder holding it and {' and '.join(FEATURES)})")
        kg: Path | None = None
        features: list[Path] = []
        for source in sources:
            if source.is_dir():
                kg = source / KG if (source / KG).is_file() else kg
                features += [source / name for name in FEATURES if (source / name).is_file()]
            elif source.name == KG:
                kg = source
            elif source.name in FEATURES:
                features.append(source)
            else:
                raise KqeError(f"{source}: the primekg importer reads {KG}, {' and '.join(FEATURES)} (or a folder "
                               "holding them)")
        if kg is None:
            raise KqeError(f"no {KG} in {', '.join(str(s) for s in sources)}; download PrimeKG from {DATAVERSE}")
        return kg, list(dict.fromkeys(features))

    def dataset_info(self) -> dict[str, str]:
        kg, features = self._files()
        info = {"name": self.name, "title": "PrimeKG, the precision medicine knowledge graph (STaRK-Prime's KB)",
                "source": DATAVERSE, "licence": LICENCE, "kg_file": str(kg.resolve()),
                "feature_files": ", ".join(str(f.resolve()) for f in features) or "none"}
        if self.limit:
            info["limit"] = f"first {self.limit} nodes of {KG}"
        return info

    def records(self, report: ImportReport) -> Iterator[Node | Edge]:
        kg_path, feature_paths = self._files()
        mapping = Mapping.from_files(self.ontology_files())
        if not feature_paths:
            report.warn(f"no {' or '.join(FEATURES)} next to {kg_path}: nodes get names but no text")
        texts: dict[int, tuple[list[str], list[tuple[str, str]]]] = {}
        for path in feature_paths:
            self._read_features(path, mapping, texts, report)

        limit = None if self.limit is None else max(int(self.limit), 0)
        table = CsvFile(kg_path, KG_COLUMNS, report)
        col = table.columns
        sides = [tuple(col[f"{side}_{name}"] for name in ("index", "id", "type", "name", "source")) for side in "xy"]
        relation_col, display_col = col["relation"], col["display_relation"]
        relation_numbers = {key: n for n, key in enumerate(sorted(mapping.relations))}
        nodes: dict[int, str] = {}  # node index → class
        stored: set[int] = set()
        for where, cells in table:
            ends = []
            for index_col, id_col, type_col, name_col, source_col in sides:
                index = _index(cells[index_col], where)
                cls = mapping.classes.get(cells[type_col])
                if cls is None:
                    raise InputError(f"unknown node type {cells[type_col]!r}; primekg.ttl knows "
                                     f"{', '.join(sorted(mapping.classes))}", where)
                seen = nodes.get(index)
                if seen is None:
                    if limit is not None and len(nodes) >= limit:
                        ends.append(None)
                        continue
                    nodes[index] = cls
                    aliases, fields = texts.pop(index, ((), ()))
                    name = cells[name_col]
                    yield Node(id=str(index), type=cls, name=name, where=where,
                               aliases=tuple(a for a in aliases if a != name), fields=tuple(fields),
                               xrefs=(f"{cells[source_col]}:{cells[id_col]}",) if cells[id_col] else ())
                elif seen != cls:
                    raise InputError(f"node {index} is a {cells[type_col]} here but a {seen} on an earlier line", where)
                ends.append((index, cls))
            key = (cells[relation_col], cells[display_col])
            relation = mapping.relations.get(key)
            if relation is None:
                raise InputError(f"unknown relation {key[0]!r} with display_relation {key[1]!r}; primekg.ttl knows "
                                 f"{', '.join(sorted({r for r, _ in mapping.relations}))}", where)
            if None in ends:
                continue
            (x, x_cls), (y, y_cls) = ends
            name, domain, range_ = relation
            if (x_cls, y_cls) == (domain, range_):
                head, tail = x, y
            elif (x_cls, y_cls) == (range_, domain):
                head, tail = y, x
            else:
                raise InputError(f"relation {key[0]!r} joins {domain} and {range_} in primekg.ttl, not "
                                 f"{cells[sides[0][2]]} and {cells[sides[1][2]]}", where)
            number = edge_key(relation_numbers[key], head, tail, symmetric=domain == range_)
            if number in stored:
                continue
            stored.add(number)
            yield Edge(str(head), name, str(tail), where=where)
        if texts and limit is None:
            report.warn(f"{len(texts)} feature rows name a node_index absent from {kg_path}; not imported")

    @staticmethod
    def _read_features(path: Path, mapping: Mapping, texts: dict, report: ImportReport) -> None:
        """Each node's aliases and (field, text) pairs from one feature file, duplicates dropped."""
        table = CsvFile(path, ("node_index",), report)
        index_col = table.columns["node_index"]
        alias_col = table.columns.get(ALIAS_COLUMN)
        wanted = [(i, mapping.fields[c]) for c, i in table.columns.items() if c in mapping.fields]
        ignored = [c for c in table.columns if c not in mapping.fields and c not in ID_COLUMNS and c != ALIAS_COLUMN]
        if ignored:
            report.warn(f"{path}: column(s) {', '.join(ignored)} not imported (no field of primekg.ttl names them)")
        for where, cells in table:
            aliases, fields = texts.setdefault(_index(cells[index_col], where), ([], []))
            if alias_col is not None and cells[alias_col].strip() and cells[alias_col] not in aliases:
                aliases.append(cells[alias_col])
            for i, field in wanted:
                value = cells[i].strip()
                if value and (field, value) not in fields:
                    fields.append((field, value))


def _index(text: str, where: str) -> int:
    value = text.strip()
    if not value.isdigit():
        raise InputError(f"node index {text[:40]!r} is not a non-negative integer", where)
    return int(value)
