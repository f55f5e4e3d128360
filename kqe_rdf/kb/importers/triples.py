"""A KG shipped as ``head<TAB>relation<TAB>tail`` (or ``head|relation|tail``) lines, the commonest way KGs ship.

MetaQA, FB15k-style benchmarks and IRN's World Cup KB come like this: ids and relation names, no schema.
The importer writes the ontology itself from what the file uses (nothing is written by hand for a dataset):

- every node is of one class, ``Entity`` (the file says nothing about classes; the reader reads relations, and
  the relation signatures come from the data);
- every relation name becomes a relation whose label is the name read as words (``plays_in_club`` →
  "plays in club");
- a relation named ``R_inverse`` (or ``R_reverse``) whose edges are exactly R's read backwards is the same
  fact: it is declared ``owl:inverseOf`` R, labelled "R (inverse)", and not stored twice (counted as
  ``folded_inverse_edges``); one whose edges differ stays a relation of its own.

Node names come from an optional names file (``--option names=PATH``, ``id<TAB>name`` lines) or from the
ids, underscores read as spaces (``Alan_PULIDO`` → "Alan PULIDO"); the id stays an alias, so a question that
writes the id links too. The separator is read from each file's first line.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path

from ...core.errors import InputError
from ..records import ImportReport
from .jsonl import JsonlImporter, readable
from .reading import numbered_lines

CLASS = "Entity"
_INVERSE_SUFFIXES = ("_inverse", "_reverse")


def _fields(line: str, separator: str, where: str) -> tuple[str, str, str]:
    parts = [p.strip() for p in line.split(separator)]
    if len(parts) != 3 or not all(parts):
        shown = "TAB" if separator == "\t" else repr(separator)
        raise InputError(f"expected 'head{separator}relation{separator}tail' (3 fields separated by {shown}), "
                         f"got {line[:120]!r}", where)
    return parts[0], parts[1], parts[2]


class TriplesImporter(JsonlImporter):
    name = "triples"
    domain = "kg"
    summary = "a KG as head<TAB>relation<TAB>tail (or head|relation|tail) lines; names from the ids or --option names=FILE"

    def __init__(self, sources=(), limit=None, **options) -> None:
        super().__init__(sources, limit, **{"domain": "kg", **options})
        self.stats: Counter[str] = Counter()
        self._read: tuple[list[dict], list[dict], dict[str, str]] | None = None

    def dataset_info(self) -> dict[str, str]:
        return {"name": "triples", "sources": ", ".join(str(s) for s in self.sources)}

    def _names(self, report: ImportReport | None) -> dict[str, str]:
        given = self.options.get("names")
        if not given:
            return {}
        path = Path(str(given))
        if not path.is_file():
            raise InputError(f"--option names={path}: no such file")
        names = {}
        for number, line in numbered_lines(path, report):
            if not line.strip():
                continue
            node, tab, name = line.partition("\t")
            if not tab or not node.strip() or not name.strip():
                raise InputError(f"expected 'id<TAB>name', got {line[:120]!r}", f"{path}:{number}")
            names[node.strip()] = name.strip()
        return names

    def _triples(self, report: ImportReport | None) -> tuple[list[dict], list[dict], dict[str, str]]:
        """Nodes and edges as JSON Lines records would give them, and the inverses folded into their relation."""
        if self._read is not None:
            return self._read
        edges: list[tuple[str, str, str, str]] = []
        first: dict[str, str] = {}
        for path in self.require_sources(1, "a file of head<TAB>relation<TAB>tail lines"):
            separator = None
            for number, line in numbered_lines(path, report):
                if not line.strip():
                    continue
                where = f"{path}:{number}"
                separator = separator or ("\t" if "\t" in line else "|")
                head, relation, tail = _fields(line, separator, where)
                edges.append((head, relation, tail, where))
                first.setdefault(head, where)
                first.setdefault(tail, where)
        if not edges:
            raise InputError(f"{', '.join(map(str, self.sources))}: no head<TAB>relation<TAB>tail line")
        pairs: dict[str, set[tuple[str, str]]] = {}
        for head, relation, tail, _where in edges:
            pairs.setdefault(relation, set()).add((head, tail))
        folded = {}
        for relation in pairs:
            for suffix in _INVERSE_SUFFIXES:
                base = relation[: -len(suffix)] if relation.endswith(suffix) else None
                if base in pairs and {(t, h) for h, t in pairs[relation]} == pairs[base]:
                    folded[relation] = base
        names = self._names(report)
        nodes = []
        for node, where in first.items():
            name = names.get(node) or " ".join(node.replace("_", " ").split())
            nodes.append({"kind": "node", "id": node, "type": CLASS, "name": name,
                          "aliases": [node] if node != name else [], "where": where})
        kept = [{"kind": "edge", "head": h, "relation": r, "tail": t, "where": w} for h, r, t, w in edges
                if r not in folded]
        self.stats["folded_inverse_edges"] = len(edges) - len(kept)
        self._read = (nodes, kept, folded)
        return self._read

    def _parsed(self, report: ImportReport | None = None) -> Iterator[tuple[str, dict]]:
        nodes, edges, folded = self._triples(report)
        if folded and report is not None:
            report.warn(f"{self.stats['folded_inverse_edges']:,} edges of {', '.join(sorted(folded))} are the edges "
                        f"of {', '.join(folded[r] for r in sorted(folded))} read backwards: declared owl:inverseOf, "
                        "not stored twice")
        for record in nodes + edges:
            yield record["where"], record

    def inverse_relations(self) -> dict[str, str]:
        return self._triples(None)[2]

    def inverse_label(self, relation: str) -> str:
        return f"{readable(self.inverse_relations()[relation])} (inverse)"
