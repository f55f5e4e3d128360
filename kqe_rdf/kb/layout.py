"""The files of a KB folder, and the lock every writer of one takes.

:mod:`.build` writes these files and :mod:`.knowledge_base` reads them; both import them from here, so the
reader does not import the builder.
"""

from __future__ import annotations

import contextlib
import fcntl
import gzip
import json
import os
import shutil
from collections.abc import Iterable, Iterator
from pathlib import Path

from pyoxigraph import Store

from ..core.errors import KqeError
from . import queries
from .documents import NodeDocument

MANIFEST = "manifest.json"
DOCUMENTS = "documents.jsonl.gz"

def write_json_atomic(path: Path, data: object) -> None:
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=True), encoding="utf-8")
    os.replace(tmp, path)


def kb_location(path: Path) -> Path:
    """Where the KB really is: a symlinked ``--kb`` is followed, so a rebuild swaps the folder it points at
    (beside it, in its own parent) and leaves the link in place; every writer locks that same folder.

    A link whose target does not exist yet is followed too (the first build creates the target).
    """
    return Path(os.path.realpath(path))


@contextlib.contextmanager
def kb_lock(path: Path) -> Iterator[None]:
    """One writer per KB at a time (a second build or embed fails fast with a clear message).

    The lock file (``.NAME.lock`` beside the KB) is removed when the writer is done, whether it succeeded or
    failed, while it still holds the lock; a writer that locked a file just removed (it opened it before the
    removal) sees that the file at the path is another one and takes that one instead."""
    path = kb_location(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    lock_path = path.parent / f".{path.name}.lock"
    while True:
        handle = open(lock_path, "a")
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.close()
            raise KqeError(f"another build or embedding of {path} is running (lock {lock_path})") from None
        try:
            current = os.stat(lock_path).st_ino == os.fstat(handle.fileno()).st_ino
        except FileNotFoundError:
            current = False
        if current:
            break
        handle.close()
    try:
        yield
    finally:
        with contextlib.suppress(OSError):
            os.unlink(lock_path)
        fcntl.flock(handle, fcntl.LOCK_UN)
        handle.close()


def recover(path: Path) -> None:
    """Finish a swap that was cut between its two renames, and drop dead build folders."""
    old = path.parent / f".{path.name}.old"
    if not path.exists() and old.is_dir():
        os.rename(old, path)
    elif old.exists():
        shutil.rmtree(old, ignore_errors=True)
    for leftover in path.parent.glob(f".{path.name}.build-*"):
        shutil.rmtree(leftover, ignore_errors=True)


def relation_signatures(store: Store) -> list[list]:
    """[head class, relation, tail class, edges] for every combination in the data, most used first.

    A build counts them from its tables (:meth:`GraphTables.signatures`); this query serves KBs built before."""
    rows = store.query(queries.load("relation_usage"), use_default_graph_as_union=True)
    found = [[r["domain"].value, r["relation"].value, r["range"].value, int(r["count"].value)] for r in rows]
    return sorted(found, key=lambda x: (-x[3], x[1], x[0], x[2]))


def document_line(doc: NodeDocument) -> str:
    """A document as one line of ``documents.jsonl.gz``: what ``json.dumps`` writes of its fields, written with
    the JSON string encoder alone (``json.dumps`` makes an encoder per call, which took half the time).

    >>> doc = NodeDocument("x:1", "1", 'Crohn "disease"', ("x:D",), "name: Crohn\\nà")
    >>> document_line(doc) == json.dumps({"iri": "x:1", "identifier": "1", "name": 'Crohn "disease"',
    ...     "types": ["x:D"], "text": "name: Crohn\\nà", "hash": doc.digest})
    True
    """
    quoted = _json_string
    return (f'{{"iri": {quoted(doc.iri)}, "identifier": {quoted(doc.identifier)}, "name": {quoted(doc.name)}, '
            f'"types": [{", ".join(map(quoted, doc.types))}], "text": {quoted(doc.text)}, "hash": "{doc.digest}"}}')


_json_string = json.encoder.encode_basestring_ascii


def write_documents(path: Path, documents: Iterable[NodeDocument], batch: int = 1000) -> None:
    lines: list[str] = []
    # Level 1 and a thousand lines a write: zlib then runs on large blocks, mostly without the GIL.
    with gzip.open(path, "wb", compresslevel=1) as out:
        for doc in documents:
            lines.append(document_line(doc))
            if len(lines) == batch:
                out.write(("\n".join(lines) + "\n").encode("utf-8"))
                lines.clear()
        if lines:
            out.write(("\n".join(lines) + "\n").encode("utf-8"))


def read_documents(path: Path) -> Iterator[NodeDocument]:
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        for line in handle:
            row = json.loads(line)
            yield NodeDocument(row["iri"], row["identifier"], row["name"], tuple(row["types"]), row["text"])
