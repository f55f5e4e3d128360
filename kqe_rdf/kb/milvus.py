"""Text and vector search on Milvus: the second backend of the BM25 index and of the dense index.

The in-process engines (Tantivy, usearch) are the default and need nothing of this module; a KB built with
``kb build --text URI`` or embedded with ``kb embed --vectors URI`` keeps its BM25 documents or its vectors
in a Milvus collection instead, which a Milvus cluster shards over machines. A URI is
``milvus://HOST:PORT/COLLECTION`` (a Milvus server), ``milvus-lite`` (a milvus-lite file inside the KB
folder, ``milvus.db``) or ``milvus-lite:PATH`` (a milvus-lite file elsewhere). The KB's manifest records
where each index is, and ``kb info`` shows it.

What the two engines do differently, and what is done about it (docs/scale.md; parity in docs/results-log.md):

* **Analysis.** milvus-lite's analyzer lower-cases and splits on ``\\w+`` but has no stemmer (its
  ``stemmer`` filter is accepted and ignored); a Milvus server's analyzers differ again. So the text is
  analysed here, by the KB's own Tantivy analyzer (:func:`.text_index.analyzer`), and Milvus indexes the
  analysed terms (``seizures`` is stored and searched as ``seizur``): both backends see the same terms.
* **Fields.** Tantivy sums BM25 over the name and the body, each with its own length statistics; Milvus scores
  one field per search. Each field is searched on its own (``2k + 10`` deep), the candidates' missing field
  scores are fetched, and the sum ranks them; ties rank by node number, as Tantivy's do.
* **Scores.** milvus-lite returns BM25 scores negated (as distances); a server returns them positive. BM25 is
  never negative, so the magnitude is the score. k1 = 1.2 and b = 0.75, Tantivy's.
* **Not the same:** Tantivy's document lengths are quantised to one byte (Lucene's norms), Milvus's are exact;
  milvus-lite's IDF is per segment; a word of several tokens (``foo_bar``) is Tantivy's phrase but Milvus's
  separate terms; of the ``raw`` query syntax, boosts (``word^2``, RM3's weights) are read, operators are not.
* **Vectors.** The KB folder keeps ``vectors.npy`` (what ``kb embed`` re-uses and resumes from, and what a
  request reads a node's vector from); Milvus holds the searchable copy. Candidates from Milvus are ranked by
  their exact cosine from ``vectors.npy``, so scores and ties are usearch's.
"""

from __future__ import annotations

import functools
import json
import os
import re
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..core.config import INDEX_URI, index_uri_problem
from ..core.errors import KqeError
from .documents import NodeDocument
from .embeddings import DenseIndex

LITE, LITE_FILE = "milvus-lite", "milvus.db"
_SERVER = re.compile(r"^milvus://(?P<host>[^/:]+):(?P<port>\d+)/(?P<collection>[A-Za-z_][A-Za-z0-9_]*)$")
#: Tantivy's BM25 parameters, so the two engines score alike.
BM25_PARAMS = {"bm25_k1": 1.2, "bm25_b": 0.75}
_FIELDS = ("name", "body")
#: A word and its boost in a raw request (``seizures^0.25``).
_BOOSTED = re.compile(r"([^\s^]+)(\^([0-9.]+))?")
#: Rows a write sends at once.
_BATCH = 1000
#: A server's version (``v2.3.5``, ``v2.5.4-…``); milvus-lite answers ``milvus_lite-3.2.2``.
_SERVER_VERSION = re.compile(r"^v?(\d+)\.(\d+)")
#: The first Milvus server with a BM25 function (full-text search over an analysed VARCHAR field).
BM25_SINCE = (2, 5)


@dataclass(frozen=True)
class Location:
    """Where a Milvus-held index is: a server's URL or a milvus-lite file, and the collection.

    >>> Location.parse("milvus://127.0.0.1:19530/kb_text", "text").record()
    {'backend': 'milvus', 'uri': 'http://127.0.0.1:19530', 'collection': 'kb_text'}
    >>> Location.parse("milvus-lite", "text").record()
    {'backend': 'milvus', 'file': 'milvus.db', 'collection': 'text'}
    """

    collection: str
    uri: str = ""
    file: str = ""  # a milvus-lite file: relative to the KB folder, or absolute

    @classmethod
    def parse(cls, text: str, collection: str) -> Location:
        if not text or index_uri_problem(text, None):
            raise KqeError(f"an index URI must be {INDEX_URI}, not {text!r}")
        if found := _SERVER.match(text):
            return cls(found["collection"], uri=f"http://{found['host']}:{found['port']}")
        path = text[len(LITE) + 1:]
        return cls(collection, file=str(Path(path).resolve()) if path else LITE_FILE)

    @classmethod
    def from_record(cls, record: dict) -> Location:
        return cls(record["collection"], uri=record.get("uri", ""), file=record.get("file", ""))

    def record(self) -> dict:
        """What the manifest keeps (``kb info`` shows it)."""
        where = {"uri": self.uri} if self.uri else {"file": self.file}
        return {"backend": "milvus", **where, "collection": self.collection}

    def client(self, kb_path: Path):
        """The process's client of this location (a milvus-lite file relative to ``kb_path``)."""
        return client(self.uri or str(Path(kb_path) / self.file))

    def shown(self) -> str:
        return f"{self.uri or self.file}, collection {self.collection}"


_CLIENTS: dict[tuple[int, str], object] = {}


def client(uri: str):
    """One client per process and URI: a milvus-lite file is held by one process at a time (a second gets an
    error naming the lock), and the text and vector indexes of one KB may share a file."""
    key = (os.getpid(), uri)
    if key not in _CLIENTS:
        try:
            from pymilvus import MilvusClient
        except ImportError:
            raise KqeError("a Milvus-held index needs pymilvus (and milvus-lite for a local file): "
                           "pip install 'kqe-rdf[scale]'") from None
        try:
            _CLIENTS[key] = MilvusClient(uri)
        except Exception as exc:  # noqa: BLE001 - pymilvus raises its own exception types
            hint = (" (a milvus-lite file is held by one process at a time: to serve a KB with several workers, "
                    "run `milvus-lite server` and build with milvus://HOST:PORT/COLLECTION)") if "://" not in uri else ""
            raise KqeError(f"cannot open Milvus at {uri}: {exc}{hint}") from None
    return _CLIENTS[key]


def release(uri: str) -> None:
    """Close this process's client of ``uri`` (a milvus-lite file is then free for another process)."""
    found = _CLIENTS.pop((os.getpid(), uri), None)
    if found is not None:
        found.close()
        if "://" not in uri:  # the client leaves milvus-lite's in-process server (and its lock) running
            from milvus_lite.server_manager import server_manager_instance

            server_manager_instance.release_server(uri)


def release_all() -> None:
    """Close every client this process holds (and the milvus-lite servers behind file clients)."""
    for pid, uri in [key for key in _CLIENTS if key[0] == os.getpid()]:
        release(uri)


def _strings(values: Iterable[str]) -> str:
    """A list of strings as a Milvus expression literal (JSON's escapes are the expression language's)."""
    return "[" + ", ".join(json.dumps(v, ensure_ascii=False) for v in values) + "]"


def type_filter(types: Sequence[str] | None) -> str:
    return f"array_contains_any(types, {_strings(sorted(types))})" if types else ""


@functools.lru_cache(maxsize=1)
def _analyzer():
    from .text_index import analyzer

    return analyzer("english")


def terms(text: str) -> list[str]:
    """The terms the KB's analyzer makes of ``text`` (what both backends index and search)."""
    return _analyzer().analyze(text)


def _replace(milvus, collection: str, schema, index_params) -> None:
    if milvus.has_collection(collection):
        milvus.drop_collection(collection)
    milvus.create_collection(collection, schema=schema, index_params=index_params)


def check_bm25(milvus, location: Location) -> None:
    """A Milvus server older than 2.5 has no BM25 function: say so before anything is written (it would refuse
    the sparse index with "create index on 104 field is not supported"), and what to do instead."""
    version = str(milvus.get_server_version())
    found = _SERVER_VERSION.match(version)
    if location.uri and found and (int(found[1]), int(found[2])) < BM25_SINCE:
        raise KqeError(f"the Milvus server at {location.uri} is {version}: BM25 needs Milvus 2.5 or later (its BM25 "
                       "function); keep the text index in Tantivy (leave out --text) and give this server the "
                       "vectors only (kb embed --vectors)")


def build_text_collection(location: Location, kb_path: Path, documents: Iterable[NodeDocument]) -> int:
    """Write the documents into a fresh collection at ``location`` (replacing one of that name); returns the
    count. Documents are numbered in their order, as :func:`.text_index.build_text_index` numbers them."""
    from pymilvus import DataType, Function, FunctionType

    milvus = location.client(kb_path)
    check_bm25(milvus, location)
    schema = milvus.create_schema(auto_id=False)
    schema.add_field("n", DataType.INT64, is_primary=True)
    schema.add_field("iri", DataType.VARCHAR, max_length=8192)
    schema.add_field("identifier", DataType.VARCHAR, max_length=8192)
    schema.add_field("name", DataType.VARCHAR, max_length=65535)
    schema.add_field("body", DataType.VARCHAR, max_length=65535)
    schema.add_field("types", DataType.ARRAY, element_type=DataType.VARCHAR, max_capacity=512, max_length=2048)
    index = milvus.prepare_index_params()
    for field in _FIELDS:
        schema.add_field(f"{field}_terms", DataType.VARCHAR, max_length=65535, enable_analyzer=True,
                         analyzer_params={"tokenizer": "standard"})
        schema.add_field(f"{field}_sparse", DataType.SPARSE_FLOAT_VECTOR)
        schema.add_function(Function(name=f"{field}_bm25", function_type=FunctionType.BM25,
                                     input_field_names=[f"{field}_terms"], output_field_names=[f"{field}_sparse"]))
        index.add_index(field_name=f"{field}_sparse", index_type="SPARSE_INVERTED_INDEX", metric_type="BM25",
                        params=BM25_PARAMS)
    _replace(milvus, location.collection, schema, index)
    count, rows = 0, []
    for doc in documents:
        rows.append({"n": count, "iri": doc.iri, "identifier": doc.identifier, "name": doc.name, "body": doc.text,
                     "types": list(doc.types), "name_terms": " ".join(terms(doc.name)),
                     "body_terms": " ".join(terms(doc.text))})
        count += 1
        if len(rows) == _BATCH:
            milvus.insert(location.collection, rows)
            rows = []
    if rows:
        milvus.insert(location.collection, rows)
    milvus.flush(location.collection)
    return count


def text_builder(location: Location, kb_path: Path) -> Callable[[Path, Iterable[NodeDocument]], int]:
    """A :func:`.text_index.build_text_index` that writes to ``location`` (the build's feed calls it)."""

    def build(_folder: Path, documents: Iterable[NodeDocument]) -> int:
        try:
            return build_text_collection(location, kb_path, documents)
        finally:
            if location.file:  # the build's folder is swapped into place: let go of the file in it
                release(str(Path(kb_path) / location.file))

    return build


class MilvusTextIndex:
    """BM25 over node documents held in Milvus: what :class:`.text_index.TextIndex` offers, searched there."""

    analyzer_name = "english"

    def __init__(self, location: Location, kb_path: Path) -> None:
        self.location, self.milvus = location, location.client(kb_path)
        if not self.milvus.has_collection(location.collection):
            raise KqeError(f"no BM25 collection at {location.shown()}; rebuild the KB with `kqe-rdf kb build`")
        self.milvus.load_collection(location.collection)
        #: The names of the nodes a search has found: what a result shows.
        self.names: dict[str, str] = {}

    def __len__(self) -> int:
        return int(self.milvus.get_collection_stats(self.location.collection)["row_count"])

    def describe(self) -> dict:
        from .text_index import ANALYZERS

        return {"backend": "milvus", "where": self.location.shown(), "analyzer": self.analyzer_name,
                "analysis": ANALYZERS[self.analyzer_name] + " (applied by kqe-rdf; Milvus indexes the terms)",
                "segments": None, "documents": len(self)}

    def only_stop_words(self, text: str) -> bool:
        from .text_index import plain_query

        words = plain_query(text).split()
        return bool(words) and not terms(" ".join(words))

    def _query_terms(self, text: str, raw: bool = False) -> dict[str, float]:
        """Each term of the request once (as Tantivy's flat query has it), with its weight: 1, or with ``raw``
        the boost written after it (``seizur^0.4``, how RM3 weighs its expansion terms)."""
        from .text_index import plain_query

        if not raw:
            return dict.fromkeys(terms(plain_query(text)), 1.0)
        weighted: dict[str, float] = {}
        for word, _hat, boost in _BOOSTED.findall(text):
            for term in terms(word):
                weighted[term] = weighted.get(term, 0.0) + (float(boost) if boost else 1.0)
        return weighted

    def _field(self, field: str, query: str, limit: int, where: str) -> dict[int, float]:
        found = self.milvus.search(self.location.collection, data=[query], anns_field=f"{field}_sparse",
                                   limit=limit, filter=where, output_fields=["n"],
                                   search_params={"metric_type": "BM25"})
        return {int(hit["n"] if "n" in hit else hit["id"]): abs(float(hit["distance"])) for hit in found[0]}

    def _scored(self, weighted: dict[str, float], limit: int, where: str = "", fields: Sequence[str] = _FIELDS
                ) -> list[tuple[float, int]]:
        """(score, node number) of the top ``limit`` by BM25 summed over ``fields`` and weighted terms, ties by
        number. Terms of one weight are one Milvus search per field (``2 limit + 10`` deep); the candidates' scores
        missing from a search's top are fetched by a search restricted to them."""
        if not weighted or limit <= 0:
            return []
        by_weight: dict[float, list[str]] = {}
        for term, weight in weighted.items():
            by_weight.setdefault(weight, []).append(term)
        parts = [(weight, " ".join(group), field) for weight, group in by_weight.items() for field in fields]
        deep = limit if len(parts) == 1 else 2 * limit + 10
        scores = [self._field(field, query, deep, where) for _w, query, field in parts]
        candidates = set().union(*scores)
        for (_w, query, field), found in zip(parts, scores):
            missing = sorted(candidates - found.keys())
            if missing:
                among = f"n in [{', '.join(map(str, missing))}]"
                found.update(self._field(field, query, len(missing), f"({where}) and {among}" if where else among))
        ranked = sorted(((sum(w * found.get(n, 0.0) for (w, _q, _f), found in zip(parts, scores)), n)
                         for n in candidates), key=lambda x: (-x[0], x[1]))
        return ranked[:limit]

    def _named(self, hits: list[tuple[float, int]]) -> list[tuple[str, float]]:
        if not hits:
            return []
        rows = self.milvus.query(self.location.collection, filter=f"n in [{', '.join(str(n) for _s, n in hits)}]",
                                 output_fields=["n", "iri", "name"])
        by_number = {int(r["n"]): r for r in rows}
        for row in rows:
            self.names.setdefault(row["iri"], row["name"])
        return [(by_number[n]["iri"], score) for score, n in hits if n in by_number]

    def search(self, text: str, k: int = 10, types: Sequence[str] | None = None, raw: bool = False
               ) -> list[tuple[str, float]]:
        """(node IRI, BM25 score) pairs, best first; ``raw``: words with boosts (``word^2``), operators ignored."""
        return self._named(self._scored(self._query_terms(text, raw), k, type_filter(types)))

    def search_later(self, text: str, k: int = 10, types: Sequence[str] | None = None) -> Future:
        from .text_index import in_background

        return in_background(self.search, text, k, types)

    def search_ahead(self, text: str, depth: int, types: Sequence[str] | None = None) -> None:
        """Nothing to start ahead: the search runs in Milvus when its scores are asked for."""

    def scores_among_later(self, text: str, depth: int, types: Sequence[str] | None = None, now: bool = False
                           ) -> Callable[[Sequence[str]], tuple[dict[str, float], float]]:
        top = self._named(self._scored(self._query_terms(text), depth, type_filter(types)))

        def among(iris: Sequence[str]) -> tuple[dict[str, float], float]:
            wanted = set(iris)
            return {iri: s for iri, s in top if iri in wanted}, top[0][1] if top else 0.0

        return among

    def scores_among(self, text: str, iris: Sequence[str], depth: int, types: Sequence[str] | None = None
                     ) -> tuple[dict[str, float], float]:
        return self.scores_among_later(text, depth, types)(iris)

    def scores_of(self, text: str, iris: Sequence[str]) -> dict[str, float]:
        if not iris:
            return {}
        where = f"iri in {_strings(dict.fromkeys(iris))}"
        return dict(self._named(self._scored(self._query_terms(text), len(set(iris)), where)))

    def search_names(self, text: str, k: int = 5, types: Sequence[str] | None = None) -> list[tuple[str, float]]:
        """BM25 over node names only (entity linking)."""
        return self._named(self._scored(self._query_terms(text), k, type_filter(types), fields=("name",)))

    def document(self, iri: str) -> dict[str, object] | None:
        rows = self.milvus.query(self.location.collection, filter=f"iri == {json.dumps(iri, ensure_ascii=False)}",
                                 output_fields=["iri", "identifier", "name", "types", "body"], limit=1)
        if not rows:
            return None
        row = rows[0]
        return {"iri": row["iri"], "identifier": row["identifier"], "name": row["name"],
                "types": list(row["types"] or []), "text": row["body"]}


def write_vectors(location: Location, kb_path: Path, vectors: np.ndarray, row_types: list[tuple[str, ...]],
                  ann_threshold: int | None, connectivity: int, expansion_add: int) -> dict:
    """Write the vectors (row ``n`` of ``vectors.npy`` as primary key ``n``) into a fresh collection at
    ``location``: an exact (FLAT) index below ``ann_threshold`` rows, an HNSW graph with usearch's parameters
    from it on. Returns what the manifest records."""
    from pymilvus import DataType

    milvus = location.client(kb_path)
    schema = milvus.create_schema(auto_id=False)
    schema.add_field("n", DataType.INT64, is_primary=True)
    schema.add_field("vector", DataType.FLOAT_VECTOR, dim=int(vectors.shape[1]))
    schema.add_field("types", DataType.ARRAY, element_type=DataType.VARCHAR, max_capacity=512, max_length=2048)
    index = milvus.prepare_index_params()
    approximate = ann_threshold is not None and len(vectors) >= ann_threshold
    kind = "HNSW" if approximate else "FLAT"
    index.add_index(field_name="vector", index_type=kind, metric_type="IP",
                    params={"M": connectivity, "efConstruction": expansion_add} if approximate else {})
    _replace(milvus, location.collection, schema, index)
    for start in range(0, len(vectors), _BATCH):
        milvus.insert(location.collection, [
            {"n": n, "vector": vectors[n].tolist(), "types": list(row_types[n])}
            for n in range(start, min(start + _BATCH, len(vectors)))])
    milvus.flush(location.collection)
    milvus.load_collection(location.collection)
    return {**location.record(), "index": kind, "count": len(vectors)}


class MilvusDenseIndex(DenseIndex):
    """Dense search in Milvus: the vectors of ``vectors.npy`` rank Milvus's candidates by exact cosine, so scores
    and ties are those of the in-process search (:class:`.embeddings.DenseIndex`)."""

    def __init__(self, path: Path, location: Location, kb_path: Path, **options) -> None:
        super().__init__(path, **options)
        self.attach(location, kb_path)

    def attach(self, location: Location, kb_path: Path) -> None:
        self.location, self.milvus = location, location.client(kb_path)
        if not self.milvus.has_collection(location.collection):
            raise KqeError(f"no vector collection at {location.shown()}; run `kqe-rdf kb embed` again")
        self.milvus.load_collection(location.collection)
        held = int(self.milvus.get_collection_stats(location.collection)["row_count"])
        if held != len(self):
            raise KqeError(f"the vector collection at {location.shown()} holds {held:,} rows, not the KB's "
                           f"{len(self):,} (another KB's?); run `kqe-rdf kb embed` again")
        self._mask_types: dict[bytes, list[str]] = {}

    @property
    def approximate(self):
        return None  # Milvus holds the index: usearch's is never built beside it

    def type_mask(self, types: Iterable[str]) -> np.ndarray:
        wanted = sorted(set(types))
        mask = super().type_mask(wanted)
        self._mask_types[np.packbits(mask).tobytes()] = wanted  # a search over this mask filters by these types
        return mask

    def search(self, query_vectors: np.ndarray, k: int, mask: np.ndarray | None = None) -> list[list[tuple[str, float]]]:
        if len(self) == 0 or k <= 0:
            return [[] for _ in range(len(query_vectors))]
        where = ""
        if mask is not None:
            types = self._mask_types.get(np.packbits(mask).tobytes())
            if types is None:  # a mask not made by type_mask: score its rows here
                return self._exact(np.asarray(query_vectors, dtype=np.float32), k, mask)
            where = type_filter(types)
        query_vectors = np.asarray(query_vectors, dtype=np.float32)
        fetch = min(len(self), k + max(k, 10))  # a few more than asked: equal cosines rank by row, as here
        found = self.milvus.search(self.location.collection, data=[q.tolist() for q in query_vectors],
                                   anns_field="vector", limit=fetch, filter=where, output_fields=["n"],
                                   search_params={"metric_type": "IP", "params": {"ef": max(self.ef_search, fetch)}})
        out = []
        for query, hits in zip(query_vectors, found):
            rows = np.array(sorted(int(h["n"] if "n" in h else h["id"]) for h in hits), dtype=np.int64)
            out.append(self._ranked(rows, np.asarray(self.vectors[rows]) @ query, k) if len(rows) else [])
        return out
