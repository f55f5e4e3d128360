"""CSV/TSV tables registered with a knowledge base, as a third source of evidence beside the graph and text.

``kqe-rdf tables add FILE --entity-column C`` copies a table into ``<kb>/tables/<name>/``
(``table.json`` + ``rows.jsonl``), linking each row to KG nodes through the cell of
its entity column (exact source id, else exact normalised name; a name several nodes
share is settled by the type most of the column links to). Registration is atomic —
written aside, then swapped in under the KB's lock — so a failed or interrupted
``add`` leaves the previous tables as they were. Question answering renders each row
as one evidence sentence, ``"<table> / <column>: <value>, …"``.

>>> render_row("movies", ["movie", "year"], ["Kismet", "1944"])
'movies / movie: Kismet, year: 1944'
"""

from __future__ import annotations

import csv
import functools
import hashlib
import json
import os
import re
import shutil
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from ...kb.layout import kb_lock
from ...core.errors import InputError, KqeError
from ...kb.linking import normalise_name

TABLES = "tables"
_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")


def render_row(table: str, columns: list[str], values: list[str]) -> str:
    """One row as a sentence; empty cells are left out."""
    return f"{table} / " + ", ".join(f"{c}: {v}" for c, v in zip(columns, values) if v.strip())


@dataclass(frozen=True)
class TableRow:
    table: str
    number: int  # 1-based data row (the header is line 1 of the file)
    values: tuple[str, ...]
    #: KG nodes the entity cell names (empty when it names none).
    nodes: tuple[str, ...]


@dataclass(eq=False)  # identity hash: loaded tables are cached and looked up as a set
class Table:
    name: str
    columns: list[str]
    entity_column: str
    rows: list[TableRow]
    info: dict

    def text(self, row: TableRow) -> str:
        return render_row(self.name, self.columns, list(row.values))


def table_name(path: Path, name: str | None) -> str:
    """The registered name: given, or the file's stem lower-cased with other characters as ``_``."""
    chosen = name if name is not None else re.sub(r"[^a-z0-9_-]+", "_", path.name.split(".")[0].lower()).strip("_")
    if not _NAME.match(chosen or ""):
        raise InputError(f"table name {chosen!r} must be 1-64 lower-case letters, digits, '_' or '-', "
                         "starting with a letter or digit; pass --name")
    return chosen


def read_table(path: Path, entity_column: str, delimiter: str | None = None) -> tuple[list[str], list[list[str]]]:
    """Header and rows of a CSV (``,``) or TSV (``.tsv``/``.tab``: tab) file; every error names ``file:line``."""
    path = Path(path)
    if not path.is_file():
        raise InputError(f"no such file: {path}")
    if delimiter is None:
        delimiter = "\t" if path.suffix.lower() in (".tsv", ".tab") else ","
    try:
        text = path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InputError(f"not UTF-8 text ({exc.reason} at byte {exc.start})", str(path)) from None
    reader = csv.reader(text.splitlines(), delimiter=delimiter, strict=True)
    try:
        header = next(reader, None)
        if not header or not any(h.strip() for h in header):
            raise InputError("the file is empty: a table needs a header line naming its columns", f"{path}:1")
        header = [h.strip() for h in header]
        if any(not h for h in header):
            raise InputError(f"column {header.index('') + 1} of the header has no name", f"{path}:1")
        repeated = [h for h, n in Counter(header).items() if n > 1]
        if repeated:
            raise InputError(f"column name(s) {', '.join(repeated)} appear more than once", f"{path}:1")
        if entity_column not in header:
            raise InputError(f"no column {entity_column!r} for --entity-column; the columns are "
                             f"{', '.join(header)}", f"{path}:1")
        rows = []
        for values in reader:
            if not values or not any(v.strip() for v in values):
                continue
            if len(values) != len(header):
                raise InputError(f"expected {len(header)} cells ({delimiter.join(header)}), found {len(values)}",
                                 f"{path}:{reader.line_num}")
            rows.append([v.strip() for v in values])
    except csv.Error as exc:
        raise InputError(f"malformed {'TSV' if delimiter == chr(9) else 'CSV'} ({exc})",
                         f"{path}:{reader.line_num}") from None
    if not rows:
        raise InputError("the table has a header but no rows", str(path))
    return header, rows


def link_column(kb, cells: list[str]) -> list[tuple[str, ...]]:
    """KG nodes named by each cell: source id first, else exact normalised name.

    A name several nodes share (the movie "Heat", the tag "heat") keeps only the
    nodes of the type most unambiguous cells of the column link to.
    """
    by_id = kb.resolve_identifiers([c for c in cells if c])
    index = kb.names
    found = [tuple(sorted(by_id.get(c) or index.nodes(normalise_name(c)))) if c else () for c in cells]
    votes = Counter(t for iris in found if len(iris) == 1 for t in index.types.get(iris[0], ()))
    column_type = votes.most_common(1)[0][0] if votes else None
    if column_type is None:
        return found
    return [tuple(i for i in iris if column_type in index.types.get(i, ())) or iris if len(iris) > 1 else iris
            for iris in found]


def register_table(kb, path: Path, entity_column: str, name: str | None = None, delimiter: str | None = None,
                   replace: bool = False) -> dict:
    """Copy a table into the KB (atomically) with its rows linked to nodes; returns its ``table.json``."""
    path = Path(path)
    chosen = table_name(path, name)
    header, rows = read_table(path, entity_column, delimiter)
    column = header.index(entity_column)
    links = link_column(kb, [r[column] for r in rows])
    unlinked = [r[column] for r, iris in zip(rows, links) if not iris]
    info = {"name": chosen, "columns": header, "entity_column": entity_column, "source": str(path.resolve()),
            "sha256": hashlib.sha256(path.read_bytes()).hexdigest(), "rows": len(rows),
            "linked_rows": len(rows) - len(unlinked), "unlinked_examples": unlinked[:10]}
    root = Path(kb.path) / TABLES
    with kb_lock(Path(kb.path)):
        root.mkdir(exist_ok=True)
        _recover(root)
        final = root / chosen
        if final.exists() and not replace:
            raise KqeError(f"a table named {chosen!r} is already registered; pass --replace to replace it "
                           f"or --name to register this one under another name")
        work = root / f".{chosen}.tmp-{os.getpid()}"
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir()
        try:
            with open(work / "rows.jsonl", "w", encoding="utf-8") as out:
                for number, (values, iris) in enumerate(zip(rows, links), start=1):
                    out.write(json.dumps({"row": number, "values": values, "nodes": list(iris)}) + "\n")
            (work / "table.json").write_text(json.dumps(info, indent=2), encoding="utf-8")
            old = root / f".{chosen}.old-{os.getpid()}"
            if final.exists():
                os.rename(final, old)
            os.rename(work, final)
            shutil.rmtree(old, ignore_errors=True)
        except BaseException:
            shutil.rmtree(work, ignore_errors=True)
            raise
    _load.cache_clear()
    return info


def _recover(root: Path) -> None:
    """Under the KB's lock, what an ``add`` killed midway left: put back a table whose swap was cut between its
    two renames, and drop work folders (no other writer can be running)."""
    for old in sorted(root.glob(".*.old-*")):
        final = root / old.name[1:].rsplit(".old-", 1)[0]
        if not final.exists() and (old / "table.json").is_file():
            os.rename(old, final)
        else:
            shutil.rmtree(old, ignore_errors=True)
    for work in root.glob(".*.tmp-*"):
        shutil.rmtree(work, ignore_errors=True)


def list_tables(kb_path: Path) -> list[dict]:
    """The ``table.json`` of every registered table, by name."""
    root = Path(kb_path) / TABLES
    if not root.is_dir():
        return []
    out = []
    for folder in sorted(root.iterdir()):
        if folder.name.startswith(".") or not (folder / "table.json").is_file():
            continue  # a registration in progress or cut short
        out.append(json.loads((folder / "table.json").read_text(encoding="utf-8")))
    return out


def load_tables(kb_path: Path) -> list[Table]:
    """Every registered table with its rows (cached until the next registration)."""
    root = Path(kb_path) / TABLES
    stamp = tuple((i["name"], i["sha256"]) for i in list_tables(kb_path))
    return _load(str(root), stamp)


@functools.lru_cache(maxsize=8)
def _load(root: str, stamp: tuple) -> list[Table]:
    tables = []
    for name, _sha in stamp:
        folder = Path(root) / name
        info = json.loads((folder / "table.json").read_text(encoding="utf-8"))
        rows = []
        with open(folder / "rows.jsonl", encoding="utf-8") as handle:
            for line in handle:
                r = json.loads(line)
                rows.append(TableRow(name, r["row"], tuple(r["values"]), tuple(r["nodes"])))
        tables.append(Table(name, info["columns"], info["entity_column"], rows, info))
    return tables
