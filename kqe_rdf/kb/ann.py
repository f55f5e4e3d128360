"""The approximate nearest-neighbour index dense search uses above a node count: an HNSW graph (usearch).

Chosen by measurement (``bench/ann.py``, docs/benchmarks.md) among usearch,
hnswlib and faiss, and for one property the others lack: a saved usearch index
is *viewed* — memory-mapped read-only — so the server's worker processes share
one copy in the page cache, outside their memory limit, and opening it costs
no load time.

The index lives beside the vectors (``ann.usearch``, and ``ann.json`` with the
parameters and the fingerprint of the rows it indexes); its keys are row
numbers of ``vectors.npy``. ``kb embed`` updates the previous index instead of
building anew: rows whose (IRI, content hash) are unchanged keep their place
in the graph (renamed to their new row), vanished rows are removed and new
rows added; a wholly new build happens only when most rows changed.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import time
from pathlib import Path

import numpy as np

from ..core.errors import KqeError

log = logging.getLogger(__name__)

FILE, META = "ann.usearch", "ann.json"
LIBRARY = "usearch"
#: HNSW links per node and the candidate list while inserting. 32 links, not 16: on 812k clustered vectors the
#: KB's dense search reached recall@100 0.995 against 0.981 with 16, for about the same build time (482 s against
#: 381-472 s) and an 8% larger file (docs/benchmarks.md, ANN section).
CONNECTIVITY, EXPANSION_ADD = 32, 100
#: Renamed keys pass through this offset, so a row never takes a number another row still holds.
_ASIDE = 1 << 40


class AnnUnusable(KqeError):
    """The stored index is missing, stale or damaged (the message says which)."""


def keys_digest(keys_json: bytes) -> str:
    """The fingerprint of a dense index's rows: which node, with which content, in which row."""
    return hashlib.sha1(keys_json).hexdigest()


def _usearch():
    try:
        from usearch.index import Index
    except ImportError:
        raise KqeError("dense search over large KBs needs usearch: pip install usearch") from None
    return Index


def load(folder: Path, count: int, digest: str, view: bool = True):
    """The index stored in ``folder`` for ``count`` rows with fingerprint ``digest``; raises :class:`AnnUnusable`."""
    path, meta_path = folder / FILE, folder / META
    if not path.is_file() or not meta_path.is_file():
        raise AnnUnusable(f"no approximate index in {folder}")
    try:
        meta = json.loads(meta_path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise AnnUnusable(f"{meta_path} is damaged ({exc})") from None
    if not isinstance(meta, dict):
        raise AnnUnusable(f"{meta_path} is damaged (not an object)")
    if meta.get("keys_digest") != digest or meta.get("count") != count:
        raise AnnUnusable(f"{path} indexes other rows than {folder / 'vectors.npy'} holds (stale)")
    if path.stat().st_size != meta.get("file_bytes"):
        raise AnnUnusable(f"{path} is damaged ({path.stat().st_size:,} bytes; {meta.get('file_bytes')} were written)")
    try:
        index = _usearch().restore(str(path), view=view)
    except (ValueError, RuntimeError, OSError) as exc:
        raise AnnUnusable(f"{path} is damaged ({exc})") from None
    if index is None or index.size != count:
        raise AnnUnusable(f"{path} is damaged (it holds {getattr(index, 'size', 0):,} vectors, not {count:,})")
    return index


def build(folder: Path, vectors: np.ndarray, keys: list[tuple[str, str]], digest: str,
          previous: list[tuple[Path, list[tuple[str, str]], str]] = (), threads: int = 0) -> dict:
    """Write the index of ``vectors`` (rows ``keys``) into ``folder``, updating the first usable ``previous``
    (folder, its keys, its fingerprint) when most of its rows are still wanted. Returns what was done.

    ``threads`` build the graph (0: every core); one thread builds the same graph every time."""
    started = time.perf_counter()
    index, kept, removed = None, np.zeros((0, 2), dtype=np.int64), 0
    wanted = {key: row for row, key in enumerate(keys)}
    for old_folder, old_keys, old_digest in previous:
        try:
            old = load(old_folder, len(old_keys), old_digest, view=False)
            tombstones = int(_usearch().metadata(str(old_folder / FILE))["count_deleted"])
        except (AnnUnusable, KeyError, TypeError):
            continue
        pairs = np.array([(row, wanted[k]) for row, k in enumerate(old_keys) if k in wanted],
                         dtype=np.int64).reshape(-1, 2)
        gone = np.setdiff1d(np.arange(len(old_keys)), pairs[:, 0])
        if len(pairs) < len(keys) / 2 or tombstones + len(gone) > len(pairs) / 2:
            continue  # mostly new rows, or mostly removed ones: a fresh graph is better and not much slower
        if len(gone):
            old.remove(gone)
        moved = pairs[pairs[:, 0] != pairs[:, 1]]
        if len(moved):  # two steps, so no row takes a number another row still holds
            old.rename(moved[:, 0], moved[:, 1] + _ASIDE)
            old.rename(moved[:, 1] + _ASIDE, moved[:, 1])
        index, kept, removed = old, pairs, len(gone)
        break
    if index is None:
        index = _usearch()(ndim=vectors.shape[1], metric="ip", dtype="f32", connectivity=CONNECTIVITY,
                           expansion_add=EXPANSION_ADD)
    present = np.zeros(len(keys), dtype=bool)
    present[kept[:, 1]] = True
    new_rows = np.flatnonzero(~present)
    if len(new_rows):
        index.add(new_rows, np.ascontiguousarray(vectors[new_rows], dtype=np.float32), threads=threads or os.cpu_count() or 1)
    tmp = folder / f".{FILE}.tmp-{os.getpid()}"
    index.save(str(tmp))
    size = tmp.stat().st_size
    os.replace(tmp, folder / FILE)
    info = {"library": LIBRARY, "count": len(keys), "keys_digest": digest, "file_bytes": size,
            # The index's own: an index updated in place keeps the links it was built with.
            "connectivity": int(index.connectivity), "expansion_add": int(index.expansion_add),
            "added": int(len(new_rows)),
            "reused": int(len(kept)), "removed": int(removed), "seconds": round(time.perf_counter() - started, 2)}
    meta_tmp = folder / f".{META}.tmp-{os.getpid()}"
    meta_tmp.write_text(json.dumps(info))
    os.replace(meta_tmp, folder / META)
    return info


def search(index, query: np.ndarray, count: int, ef: int) -> np.ndarray:
    """Rows of (about) the ``count`` nearest vectors to ``query``, one thread, ``ef`` candidates at least."""
    index.expansion_search = max(ef, count)
    return np.asarray(index.search(np.asarray(query, dtype=np.float32), count, threads=1).keys, dtype=np.int64)
