"""Where the ontologies and SPARQL files live, in a checkout and in a wheel.

The wheel carries ``ontologies/`` and ``queries/`` inside the package; a source
checkout keeps them at the top level, where people read and edit them.
"""

from __future__ import annotations

import contextlib
import gc
import os
import pickle
import tempfile
from collections.abc import Iterator
from pathlib import Path

_HERE = Path(__file__).resolve().parent.parent  # the kqe_rdf package


def resource_dir(name: str) -> Path:
    for candidate in (_HERE / name, _HERE.parent / name):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(f"kqe-rdf resource folder {name!r} is missing; reinstall kqe-rdf")


def ontology_path(domain: str) -> Path:
    return resource_dir("ontologies") / f"{domain}.ttl"


def cache_dir() -> Path:
    """Where derived tables that every process would otherwise rebuild are kept (the reader's WordNet index and
    relation words): ``$KQE_CACHE_DIR``, else ``$XDG_CACHE_HOME/kqe-rdf``, else ``~/.cache/kqe-rdf``."""
    if os.environ.get("KQE_CACHE_DIR"):
        return Path(os.environ["KQE_CACHE_DIR"])
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "kqe-rdf"


def cached(name: str, make):
    """``make()``, kept in :func:`cache_dir` under ``name`` (a name that says what the value was made from): a later
    process reads it instead of making it again. A cache that cannot be read or written is made anew, never an
    error; it is written aside and renamed, so a reader never sees half a file."""
    path = cache_dir() / name
    try:
        with open(path, "rb") as f, cyclic_gc_paused():
            return pickle.load(f)
    except Exception:  # noqa: BLE001 - absent, stale or unreadable: made again below
        pass
    value = make()
    keep(name, value)
    return value


def keep(name: str, value) -> None:
    """Write ``value`` to :func:`cache_dir` under ``name`` for :func:`cached` (aside, then renamed: of two processes
    writing at once, one wins whole). A home that cannot be written keeps nothing, which is not an error."""
    path = cache_dir() / name
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile("wb", dir=path.parent, delete=False, suffix=".part") as f:
            pickle.dump(value, f, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(f.name, path)
    except OSError:
        pass


@contextlib.contextmanager
def cyclic_gc_paused() -> Iterator[None]:
    """For code that makes many objects and frees few (a build; a table read whole from a file): Python's cyclic
    collector, run by allocation counts, walked them over and over (half the name index's time on MetaQA at
    build; the bio KB's name index read in 0.11 s instead of 0.2 in a new process)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
