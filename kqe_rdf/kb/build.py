"""Building a knowledge base atomically, and embedding it resumably.

A build writes everything into a sibling folder ``.<name>.build-<pid>`` and
swaps it into place only when complete, so a failed or interrupted build
leaves the previous KB intact. Embedding is the slow step (tens of passages
a second on two cores); it runs after the swap, saves its work in chunks and
resumes where it stopped, and re-uses the vectors of documents whose text did
not change.
"""

from __future__ import annotations

import contextlib
import gc
import hashlib
import json
import os
import queue
import shutil
import signal
import threading
import time
import traceback
from collections.abc import Iterator, Sequence
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path

import numpy as np
from pyoxigraph import Literal, NamedNode, RdfFormat, Store, Triple, serialize

from . import queries
from ..core.config import Settings
from .documents import GraphTables, NodeDocument, text_properties
from .embeddings import DenseIndex, OnnxEncoder, write_dense_index
from ..core.errors import InputError, KqeError
from .hierarchy import FOLDER as HIERARCHY_FOLDER, build_hierarchies
from .importers import Importer
from .linking import NameIndex
from .ontology import CORE, Schema
from ..core.progress import Progress
from ..core.resources import cyclic_gc_paused
from .phrases import PHRASES, TERMS, phrase_encoder, term_classes, write_phrase_vectors, write_term_vectors
from .rdfize import RecordWriter
from .records import ImportReport
from .layout import (DOCUMENTS, MANIFEST, kb_lock, kb_location, read_documents, recover,  # noqa: F401 - re-exported
                     relation_signatures, write_documents, write_json_atomic)
from .text_index import build_text_index

ONTOLOGY_GRAPH = "https://w3id.org/kqe/graph/ontology"
FORMAT_VERSION = 1
#: N-Triples characters per call of the store's bulk loader (about 400,000 statements): small enough that
#: loading keeps pace with the import, large enough that each call's fixed cost (its sorted files, which
#: RocksDB ingests and then compacts) stays small: at 1M edges, 16 MB calls took more CPU than one call over
#: the same triples, 64 MB calls about as much (docs/benchmarks.md, issue 52's build section).
LOAD_CHUNK_BYTES = 64 << 20
#: Chunks waiting for the store's loader, at most (memory: at most this many chunks beside the one written).
QUEUED_CHUNKS = 2
#: Documents handed at a time, as they are rendered, to Tantivy's thread and the documents file's.
DOCUMENTS_HANDED = 2000


def _version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "unknown"


def build_source(importer: Importer) -> dict:
    """What a KB is built from, to tell a rebuild of the same source from a build of another one: a ``--limit``
    or an ``--option`` makes another KB of the same files (``bio --limit 3`` must not replace the full bio KB).
    ``recorded`` marks a source that says both: a manifest without it (older) is compared on importer and files."""
    source = {"importer": importer.name, "paths": sorted(str(Path(s).resolve()) for s in importer.sources),
              "recorded": "limit, options"}
    if importer.limit is not None:
        source["limit"] = importer.limit
    options = {key: str(value) for key, value in sorted(importer.options.items()) if value not in (None, "", (), [])}
    if options:
        source["options"] = options
    return source


def held_source(manifest: dict) -> dict:
    """:func:`build_source` of the KB a manifest describes (read from the dataset line of older manifests)."""
    if isinstance(manifest.get("source"), dict):
        return manifest["source"]
    dataset = manifest.get("dataset") if isinstance(manifest.get("dataset"), dict) else {}
    given = [s for s in str(dataset.get("sources") or "").split(", ") if s]
    return {"importer": manifest.get("importer"), "paths": sorted(str(Path(s).resolve()) for s in given)}


def describe_source(source: dict, other: dict | None = None) -> str:
    """``rdf (music.ttl)``: an importer and the names of its files, for one line of an error; with the options
    in which it differs from ``other`` (those both share, such as a default domain, are left out)."""
    shared = (other or {}).get("options", {})
    names = ", ".join([Path(p).name for p in source["paths"]]
                      + ([f"--limit {source['limit']}"] if source.get("limit") is not None else [])
                      + [f"--option {key}={value}" for key, value in source.get("options", {}).items()
                         if shared.get(key) != value])
    return f"{source['importer']}" + (f" ({names})" if names else "")


def _dataset_iri(importer: Importer) -> str:
    return f"https://w3id.org/kqe/{importer.domain}/dataset/{importer.name}"


def _dataset_ntriples(importer: Importer, dataset_iri: str) -> bytes:
    """What the KB says about its dataset (the importer's name, version, source, licence), as N-Triples."""
    subject = NamedNode(dataset_iri)
    triples = [Triple(subject, NamedNode("http://www.w3.org/1999/02/22-rdf-syntax-ns#type"),
                      NamedNode(CORE + "Dataset"))]
    triples += [Triple(subject, NamedNode(CORE + key.replace(" ", "_")), Literal(str(value)))
                for key, value in importer.dataset_info().items() if value]
    return serialize(triples, format=RdfFormat.N_TRIPLES)


def build_kb(
    importer: Importer,
    path: Path,
    settings: Settings | None = None,
    progress: Progress | None = None,
    replace_other_source: bool = True,
) -> dict:
    """Import, load, render documents and index them; swap the result into ``path``.

    With ``replace_other_source=False`` (what ``kqe-rdf kb build`` passes without ``--force``) a folder that
    holds a KB of another source (another importer or other source files) is not replaced: building a new
    catalogue with the default ``--kb`` must not silently drop the bio KB. Python callers name the folder and
    rebuild it with new files on purpose (tests, benchmarks), so they replace by default.
    """
    settings = settings or Settings()
    progress = progress or Progress.quiet()
    path = kb_location(path)
    with kb_lock(path):
        recover(path)
        if path.exists() and not (path / MANIFEST).is_file() and (not path.is_dir() or any(path.iterdir())):
            raise KqeError(f"{path} exists and is not a kqe-rdf knowledge base (no {MANIFEST}); a build would "
                           "replace it, so choose another --kb path or remove it yourself")
        if not replace_other_source and (path / MANIFEST).is_file():
            held = json.loads((path / MANIFEST).read_text(encoding="utf-8"))
            wanted = build_source(importer)
            if "recorded" not in held_source(held):  # a manifest from before limits and options were recorded
                wanted = {k: v for k, v in wanted.items() if k not in ("limit", "options")}
            if {k: v for k, v in held_source(held).items() if k != "recorded"} != \
                    {k: v for k, v in wanted.items() if k != "recorded"}:
                raise KqeError(f"{path} holds the {describe_source(held_source(held), build_source(importer))} KB; "
                               f"building {describe_source(build_source(importer), held_source(held))} there would "
                               "replace it: choose another "
                               "--kb folder, or add --force to replace it")
        work = path.parent / f".{path.name}.build-{os.getpid()}"
        work.mkdir(parents=True)
        try:
            with cyclic_gc_paused(), _terminate_as_exit():
                manifest = _build_into(importer, work, settings, progress, previous=path)
            gc.collect()
            old = path.parent / f".{path.name}.old"
            if path.exists():
                os.rename(path, old)
            os.rename(work, path)
            shutil.rmtree(old, ignore_errors=True)
            return manifest
        except BaseException as exc:
            # The traceback's frames hold the half-built Store; RocksDB would re-create its folder
            # when that Store is dropped later, so drop it before removing the folder.
            traceback.clear_frames(exc.__traceback__)
            gc.collect()
            shutil.rmtree(work, ignore_errors=True)
            raise


@contextlib.contextmanager
def _terminate_as_exit() -> Iterator[None]:
    """SIGTERM (``kill``, a service manager, a container stopping) ends the build as Ctrl-C does, through the
    cleanup that removes its folder, instead of killing the process at once with the folder left (issue 49).
    Only the main thread may set a handler; elsewhere, and for SIGKILL, the KB's next opening removes it."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum, _frame):
        raise SystemExit(128 + signum)

    previous = signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


class Background:
    """A call run in a thread, for work that mostly releases the GIL (Tantivy's indexing, the documents file's
    compression, the phrase encoder) while Python work goes on; :meth:`join` returns its result or raises its
    error."""

    def __init__(self, name: str, call, *args, **kwargs) -> None:
        self.result, self.error, self.seconds = None, None, 0.0
        self.thread = threading.Thread(target=self._run, args=(call, args, kwargs), name=name, daemon=True)
        self.thread.start()

    def _run(self, call, args, kwargs) -> None:
        started = time.perf_counter()
        try:
            self.result = call(*args, **kwargs)
        except BaseException as exc:  # handed to the building thread by join()
            self.error = exc
        self.seconds = time.perf_counter() - started

    def join(self, raise_error: bool = True):
        self.thread.join()
        if raise_error and self.error is not None:
            error, self.error = self.error, None
            raise error
        return self.result


class ChunkedLoad:
    """Oxigraph's bulk loader in a thread, given the import's N-Triples a chunk at a time.

    Each chunk is one ``bulk_load`` call, which parses and indexes it without holding the GIL, so loading
    keeps pace with the import's Python work instead of starting when the import ends (one call over a
    FIFO parsed alongside but indexed everything after: a build waited about as long as the load took).
    Chunks end between records: a bulk load names blank nodes afresh per call, and an edge's statement
    (a blank node) is one record's lines.
    """

    def __init__(self, store: Store) -> None:
        self.store = store
        #: Chunks waiting for the loader: the import goes on while it catches up (bounded memory).
        self.queue: queue.Queue[bytes | None] = queue.Queue(maxsize=QUEUED_CHUNKS)
        self.error: BaseException | None = None
        #: Seconds the loader spent loading (not waiting for chunks).
        self.seconds = 0.0
        self.thread = threading.Thread(target=self._run, name="kqe-bulk-load", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while (chunk := self.queue.get()) is not None:
            if self.error is not None:
                continue  # drain, so the import's put() never blocks on a loader that failed
            started = time.perf_counter()
            try:
                self.store.bulk_load(input=chunk, format=RdfFormat.N_TRIPLES)
            except BaseException as exc:  # handed to the building thread by write() or wait()
                self.error = exc
            self.seconds += time.perf_counter() - started

    def write(self, data: bytes) -> None:
        if self.error is not None:
            self.wait()
        self.queue.put(data)

    def wait(self) -> None:
        """Wait for every chunk to be loaded; the loader's error, if it had one, is raised here."""
        self.stop()
        if self.error is not None:
            error, self.error = self.error, None
            raise error

    def stop(self) -> None:
        """End the loader's thread, whatever happened (a build that failed drops the store after)."""
        if self.thread.is_alive():
            self.queue.put(None)
            self.thread.join()


def _streams(importer: Importer) -> bool:
    """Whether the importer's records are the KB (not RDF of its own, nor changed in the store after loading)."""
    kind = type(importer)
    return kind.triples is Importer.triples and kind.after_load is Importer.after_load


def _import_streamed(importer: Importer, report: ImportReport, store: Store, store_schema: Schema,
                     settings: Settings, progress: Progress,
                     chunk_bytes: int = LOAD_CHUNK_BYTES) -> tuple[GraphTables, ChunkedLoad, int]:
    """Records → N-Triples into the store's loader, and through the writer's sink into the build's tables;
    → (tables, the loader, still loading, and the number of triples)."""
    dataset_iri = _dataset_iri(importer)
    tables = GraphTables(text_properties(store_schema, importer.extra_text_properties))
    writer = RecordWriter(importer.schema(), importer.domain, report, settings.on_unknown_edge, dataset_iri,
                          sink=tables)
    loader = ChunkedLoad(store)
    counted = 0
    try:
        with progress.task("importing", unit="triples") as tick:
            for text in writer.chunks(importer.records(report), chunk_bytes):
                chunk = _encoded(text)
                lines = chunk.count(b"\n")
                loader.write(chunk)
                counted += lines
                tick(lines)
            loader.write(_dataset_ntriples(importer, dataset_iri))
    except BaseException:
        loader.stop()
        raise
    return tables, loader, counted


def _encoded(text: str) -> bytes:
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InputError(f"a text holds {exc.object[exc.start:exc.end]!r}, which no UTF-8 store can hold "
                         f"(near {exc.object[max(exc.start - 60, 0):exc.start]!r})") from None


def _build_into(importer: Importer, work: Path, settings: Settings, progress: Progress, previous: Path) -> dict:
    started = time.perf_counter()
    report = ImportReport()
    store, store_schema = _new_store(importer, work)
    # The relation phrases need only the ontology: encoded while the import runs (ONNX Runtime releases the GIL).
    phrases = Background("kqe-phrases", _write_phrase_vectors, store_schema, settings, work / PHRASES)
    loader = bm25 = writing = terms = None
    try:  # a failed build removes the folder the threads write into: not before they end
        if _streams(importer):
            tables, loader, counted = _import_streamed(importer, report, store, store_schema, settings, progress)
            import_seconds = time.perf_counter() - started
            relation_counts = tables.relation_counts()
            edges_of = tables.pairs
        else:
            counted, load_seconds = _import_to_file(importer, report, store, work, settings, progress)
            import_seconds = time.perf_counter() - started - load_seconds
            relation_counts = {r["relation"].value: int(r["count"].value) for r in
                               store.query(queries.load("count_edges_by_relation"), use_default_graph_as_union=True)}
            report.edges = report.edges or sum(relation_counts.values())  # raw RDF: its edges are counted here
            tables = GraphTables.from_store(store, store_schema, importer.extra_text_properties)
            edges_of = None
        t0 = time.perf_counter()
        # Tantivy indexes and gzip compresses without the GIL, alongside the rendering, the name index and the
        # closures.
        documents, (bm25, writing) = _documents(importer, report, tables, store_schema, settings, work, progress)
        seconds = {"import": import_seconds, "documents": time.perf_counter() - t0}
        # The names of the hierarchies' terms need only the documents: encoded while the rest is built (a first
        # request that links a phrase by meaning would otherwise encode a whole class).
        terms = TermNames(term_classes(store_schema, documents) if settings.embedding.term_names else {}, settings,
                          work / TERMS)
        t0 = time.perf_counter()
        with progress.task("name index", total=None):
            # A first request reads it, not every name; the reader reads which edges leave a node from it.
            NameIndex.build(documents, tables, work / NameIndex.FILE)
        seconds["names"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        if loader is not None:  # the store is queried from here on
            with progress.task("loading store", total=None):
                loader.wait()
                store.flush()
            load_seconds = loader.seconds
        seconds.update(load=load_seconds, load_wait=time.perf_counter() - t0)
        signatures = tables.signatures()
        with progress.task("hierarchy closures", total=None):
            # After the documents, so the closure triples (kqe:subsumedBy, their own named graph) never show in them.
            hierarchies = build_hierarchies(store, store_schema, signatures, work / HIERARCHY_FOLDER, edges_of)
            store.flush()
        background = {"BM25 index": bm25, "documents file": writing, "relation phrase vectors": phrases}
        if terms.thread is not None:
            terms.wait(progress)
            background["term name vectors"] = terms.thread
        settled = time.monotonic() + 1.0  # a wait under a second gets no line of its own
        for thread in background.values():
            thread.thread.join(max(settled - time.monotonic(), 0.0))
        if running := [what for what, thread in background.items() if thread.thread.is_alive()]:
            with progress.task("waiting for the " + " and ".join(running), total=None):
                for thread in background.values():
                    thread.join()
        for thread in background.values():
            thread.join()
        progress.note("built alongside: " + ", ".join(f"{what} ({thread.seconds:.0f} s)"
                                                      for what, thread in background.items()))
    finally:
        if loader is not None:
            loader.stop()
        if terms is not None:
            terms.cancel()  # (done by now on success; a failed build need not wait for the encoding)
        for thread in (bm25, writing, phrases, terms and terms.thread):
            if thread is not None:
                thread.join(raise_error=False)
    # The store closes when its last reference goes (no cycle holds it: a full collection over the build's
    # objects took seconds at millions of nodes), before the folder is swapped into place.
    del store, tables, loader

    _carry_over(previous, work)
    seconds.update(bm25=bm25.seconds, hierarchies=hierarchies["seconds"], phrases=phrases.seconds)
    if terms.thread is not None:
        seconds["term_names"] = terms.thread.seconds
    seconds = {k: round(v, 2) for k, v in seconds.items()}
    manifest = _manifest(importer, report, counted, len(documents), relation_counts, signatures, hierarchies, seconds,
                         work, settings)
    write_json_atomic(work / MANIFEST, manifest)
    return manifest


def _new_store(importer: Importer, work: Path) -> tuple[Store, Schema]:
    """The store in ``work``, holding the importer's ontologies (also copied beside it), and their schema."""
    store = Store(str(work / "store"))
    for onto in importer.ontology_files():
        store.bulk_load(path=str(onto), format=RdfFormat.TURTLE, to_graph=NamedNode(ONTOLOGY_GRAPH))
    (work / "ontology").mkdir()
    for onto in importer.ontology_files():
        shutil.copy(onto, work / "ontology" / onto.name)
    return store, Schema.from_store(store)


def _write_phrase_vectors(schema: Schema, settings: Settings, path: Path) -> None:
    # One thread: a few dozen phrases, and ONNX Runtime's pool would spin beside the import (same vectors).
    encoder = OnnxEncoder.from_settings(settings, threads=1)
    write_phrase_vectors(schema, encoder, path)


class TermNames:
    """The names of the hierarchies' terms (:func:`.phrases.term_classes`) encoded in a thread while the build goes on,
    counted, so that the build's wait for them (when they are the last step) shows how far they are."""

    def __init__(self, classes: dict, settings: Settings, path: Path) -> None:
        self.total = sum(len(iris) for iris, _names in classes.values())
        self.done = 0
        self.cancelled = False
        self.thread = Background("kqe-terms", self._write, classes, settings, path) if self.total else None

    def _write(self, classes: dict, settings: Settings, path: Path) -> None:
        def counted(n: int) -> None:
            if self.cancelled:  # (the build failed: its folder goes, the encoding with it, batch by batch)
                raise KqeError("build cancelled")
            self.done += n

        write_term_vectors(classes, OnnxEncoder.from_settings(settings), path, progress=counted)

    def wait(self, progress: Progress) -> None:
        """Until the names are encoded: a count of them, if that takes over a second."""
        self.thread.thread.join(1.0)
        if self.thread.thread.is_alive():
            with progress.task("encoding term names", total=self.total, unit="names") as tick:
                shown = 0
                while self.thread.thread.is_alive():
                    self.thread.thread.join(0.5)
                    tick(self.done - shown)
                    shown = self.done
        self.thread.join()

    def cancel(self) -> None:
        self.cancelled = True


def _carry_over(previous: Path, work: Path) -> None:
    """What a rebuild keeps of the KB it replaces."""
    # Vectors of unchanged documents are carried over; `embed` re-uses them by content hash.
    if (previous / "embeddings" / "index.json").is_file():
        shutil.copytree(previous / "embeddings", work / "embeddings.previous")
    # Tables registered with `kqe-rdf tables add` are the user's input, not derived from the sources: keep them.
    if (previous / "tables").is_dir():
        shutil.copytree(previous / "tables", work / "tables", ignore=shutil.ignore_patterns(".*"))


def _manifest(importer: Importer, report: ImportReport, counted: int, documents: int, relation_counts: dict,
              signatures: list[list], hierarchies: dict, seconds: dict, work: Path, settings: Settings) -> dict:
    """What ``manifest.json`` records of a build."""
    return {
        "format_version": FORMAT_VERSION,
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "importer": importer.name,
        "domain": importer.domain,
        "dataset": importer.dataset_info(),
        "source": build_source(importer),
        "prefixes": dict(getattr(importer, "prefixes", {})),
        "text_properties": list(importer.extra_text_properties),
        "counts": {
            "triples": counted, "nodes": report.nodes, "edges": report.edges, "documents": documents,
            "skipped_edges": report.skipped_edges, "empty_nodes": report.empty_nodes,
            "duplicate_nodes": report.duplicate_nodes,
        },
        "relation_counts": relation_counts,
        "relation_signatures": signatures,
        "warnings": report.warnings,
        "documents_sha256": _sha256(work / DOCUMENTS),
        "settings": {"doc_neighbours_per_relation": settings.documents.neighbours_per_relation,
                     "doc_max_chars": settings.documents.max_chars},
        "versions": {p: _version(p) for p in ("kqe-rdf", "pyoxigraph", "tantivy", "onnxruntime")},
        "seconds": seconds,
        "embeddings": None,
        "text_index": text_backend(settings),
        "hierarchies": hierarchies,
    }


def _import_to_file(importer: Importer, report: ImportReport, store: Store, work: Path, settings: Settings,
                    progress: Progress) -> tuple[int, float]:
    """An importer's own triples → an N-Triples file → the store (then its after-load hook);
    → (triples, seconds the load took)."""
    schema, dataset_iri = importer.schema(), _dataset_iri(importer)

    def writer(imp: Importer) -> RecordWriter:
        return RecordWriter(schema, imp.domain, report, settings.on_unknown_edge, dataset_iri)

    triples_file = work / "import.nt"
    counted = 0
    with progress.task("importing", unit="triples") as tick, open(triples_file, "wb") as out:
        def counting(triples):
            nonlocal counted
            for t in triples:
                counted += 1
                if counted % 20000 == 0:
                    tick(20000)
                yield t

        serialize(counting(importer.triples(report, writer)), out, RdfFormat.N_TRIPLES)
        out.write(_dataset_ntriples(importer, dataset_iri))
    with progress.task("loading store", total=None):
        t0 = time.perf_counter()
        store.bulk_load(path=str(triples_file), format=RdfFormat.N_TRIPLES)
        importer.after_load(store)
        store.flush()
        load_seconds = time.perf_counter() - t0
    triples_file.unlink()
    return counted, load_seconds


class Feed:
    """A consumer of documents in a thread (Tantivy's indexing, the documents file), handed them in batches as
    they are rendered, so it works alongside the rendering instead of after it."""

    def __init__(self, name: str, consume, path: Path) -> None:
        self.queue: queue.SimpleQueue[list[NodeDocument] | None] = queue.SimpleQueue()
        self.thread = Background(name, consume, path, self._items())

    def _items(self) -> Iterator[NodeDocument]:
        while (batch := self.queue.get()) is not None:
            yield from batch

    def put(self, batch: list[NodeDocument]) -> None:
        self.queue.put(batch)

    def close(self) -> None:
        self.queue.put(None)


def text_backend(settings: Settings) -> dict:
    """Where a build puts the BM25 index, as the manifest records it: Tantivy in the KB folder, or a Milvus
    collection (setting index_text, ``kb build --text``)."""
    if not settings.index.text:
        return {"backend": "tantivy"}
    from .milvus import Location

    return Location.parse(settings.index.text, "text").record()


def _text_feed(settings: Settings, work: Path) -> tuple:
    """What the BM25 feed of a build calls, and with which folder."""
    record = text_backend(settings)
    if record["backend"] == "tantivy":
        return build_text_index, work / "bm25"
    from .milvus import Location, text_builder

    return text_builder(Location.from_record(record), work), work / "bm25"


def _documents(importer: Importer, report: ImportReport, tables: GraphTables, schema: Schema, settings: Settings,
               work: Path, progress: Progress) -> tuple[list[NodeDocument], list[Background]]:
    """The node documents, rendered from the tables, and the threads that index them and write them out."""
    feeds = [Feed("kqe-bm25", *_text_feed(settings, work)), Feed("kqe-documents", write_documents, work / DOCUMENTS)]
    documents: list[NodeDocument] = []
    try:
        with progress.task("rendering documents", total=len(tables.nodes), unit="documents") as tick:
            start = 0
            written = settings.documents
            for document in tables.documents(schema, written.neighbours_per_relation, written.max_chars):
                documents.append(document)
                if len(documents) - start == DOCUMENTS_HANDED:
                    for feed in feeds:
                        feed.put(documents[start:])
                    tick(DOCUMENTS_HANDED)
                    start = len(documents)
            for feed in feeds:
                feed.put(documents[start:])
                feed.close()
            tick(len(documents) - start)  # the last, partial hand-over: the count ends at the total
        if not documents:
            sources = ", ".join(str(s) for s in importer.sources) or "its sources"
            raise KqeError(f"the {importer.name} import produced no nodes with text; nothing to index in "
                           f"{sources} ({report.empty_nodes} empty nodes, warnings: {report.warnings[:3]})")
    except BaseException:
        for feed in feeds:
            feed.close()
            feed.thread.join(raise_error=False)
        raise
    return documents, [feed.thread for feed in feeds]


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _cached_vectors(kb: Path, model_id: str) -> dict[str, np.ndarray]:
    """Content hash → vector from a previous index and from the chunks of an interrupted run."""
    cache: dict[str, np.ndarray] = {}
    for folder in (kb / "embeddings.previous", kb / "embeddings"):
        if (folder / "index.json").is_file():
            try:
                index = DenseIndex(folder)
            except (OSError, ValueError, KeyError):
                continue
            if index.model_id == model_id:
                for row, digest in enumerate(index.hashes):
                    cache[digest] = np.asarray(index.vectors[row])
    for chunk in sorted((kb / "embeddings.partial").glob("chunk-*.npz")):
        with np.load(chunk) as data:
            if str(data["model_id"]) != model_id:
                continue
            for digest, vector in zip(data["hashes"], data["vectors"]):
                cache[str(digest)] = vector
    return cache


def embed_kb(
    path: Path,
    settings: Settings | None = None,
    types: Sequence[str] | None = None,
    progress: Progress | None = None,
    encoder: OnnxEncoder | None = None,
    chunk_size: int = 512,
    stop_after: int | None = None,
) -> dict:
    """Embed the KB's documents (optionally only nodes of ``types``); resumable.

    ``types`` are class IRIs or local names. ``stop_after`` stops after that
    many new documents (used to prove resumption; a Ctrl-C does the same).
    """
    from .knowledge_base import KnowledgeBase

    settings = settings or Settings()
    progress = progress or Progress.quiet()
    path = Path(path)
    with kb_lock(path):
        index, old = path / "embeddings", path / "embeddings.old"
        if not index.exists() and old.is_dir():  # an embedding killed between the two renames of its swap
            os.rename(old, index)
        kb = KnowledgeBase.open(path)
        wanted = kb.resolve_types(types) if types else None
        documents = [d for d in read_documents(path / DOCUMENTS) if wanted is None or wanted.intersection(d.types)]
        if not documents:
            raise KqeError(f"no documents of type {', '.join(types or [])} to embed")
        encoder = encoder or OnnxEncoder.from_settings(settings)
        cache = _cached_vectors(path, encoder.model_id)
        todo = [d for d in documents if d.digest not in cache]
        if stop_after is not None:
            todo = todo[:stop_after]
        partial = path / "embeddings.partial"
        partial.mkdir(exist_ok=True)
        started = time.perf_counter()
        with progress.task("embedding", total=len(todo), unit="docs") as tick:
            existing = len(list(partial.glob("chunk-*.npz")))
            chunks = {number: todo[start : start + chunk_size]
                      for number, start in enumerate(range(0, len(todo), chunk_size), start=existing)}
            if settings.embedding.workers:  # shards encoded by Ray's workers, written here as they finish
                from .ray_embedding import encode_shards

                encoded = encode_shards(settings.embedding.workers, settings,
                                        [(number, [d.text for d in chunk]) for number, chunk in chunks.items()],
                                        tick=tick)
            else:
                encoded = ((number, encoder.encode([d.text for d in chunk], progress=tick))
                           for number, chunk in chunks.items())
            for number, vectors in encoded:
                chunk = chunks[number]
                tmp = partial / f".chunk-{number:06d}.npz"
                with open(tmp, "wb") as out:
                    np.savez(out, hashes=np.array([d.digest for d in chunk]), vectors=vectors,
                             model_id=np.array(encoder.model_id))
                os.replace(tmp, partial / f"chunk-{number:06d}.npz")
                for d, v in zip(chunk, vectors):
                    cache[d.digest] = v
        seconds = time.perf_counter() - started
        missing = [d for d in documents if d.digest not in cache]
        if missing:
            return {"complete": False, "embedded": len(documents) - len(missing), "remaining": len(missing)}
        vectors = np.stack([cache[d.digest] for d in documents]) if documents else np.zeros((0, encoder.dimension))
        held = {"backend": "usearch"}
        if settings.index.vectors:  # Milvus holds the searchable copy; usearch's index is not built
            from . import ann as usearch
            from .milvus import Location, write_vectors

            held = write_vectors(Location.parse(settings.index.vectors, "vectors"), path, vectors,
                                 [d.types for d in documents], settings.dense.threshold, usearch.CONNECTIVITY,
                                 usearch.EXPANSION_ADD)
        ann = write_dense_index(path / "embeddings", [(d.iri, d.digest) for d in documents], vectors,
                                encoder.model_id, [d.types for d in documents], sorted(wanted) if wanted else None,
                                None if settings.index.vectors else settings.dense.threshold, encoder.fingerprint,
                                settings.dense.build_threads)
        shutil.rmtree(partial, ignore_errors=True)
        shutil.rmtree(path / "embeddings.previous", ignore_errors=True)
        if phrase_encoder(path) not in (None, encoder.model_id):
            # The relation phrases follow the vectors: a KB re-embedded with another encoder reads with that one.
            write_phrase_vectors(kb.schema, encoder, path / PHRASES)
        info = {"model_id": encoder.model_id, "encoder": encoder.fingerprint, "count": len(documents), "types": sorted(wanted) if wanted else None,
                "new": len(todo), "reused": len(documents) - len(todo), "seconds": round(seconds, 2),
                "passages_per_second": round(len(todo) / seconds, 2) if todo and seconds else None,
                "ann": ann and {k: ann[k] for k in ("library", "added", "reused", "removed", "seconds")},
                "workers": settings.embedding.workers or "this process",
                "vectors": held}
        manifest = json.loads((path / MANIFEST).read_text())
        manifest["embeddings"] = info
        write_json_atomic(path / MANIFEST, manifest)
        return {"complete": True, **info}


def record_fusion(path: Path, fusion: dict | None) -> None:
    """Keep a fitted hybrid weight (:func:`kqe_rdf.evaluation.fusion.fit_fusion`) in the KB's manifest, where
    ``hybrid`` reads it (None: remove it); under the KB's lock, so an embedding meanwhile cannot lose it or be
    lost."""
    path = Path(path)
    if not (path / MANIFEST).is_file():
        raise KqeError(f"no KB at {path} (no {MANIFEST})")
    with kb_lock(path):
        manifest = json.loads((path / MANIFEST).read_text())
        if fusion is None:
            manifest.pop("fusion", None)
        else:
            manifest["fusion"] = {**fusion, "created": datetime.now(timezone.utc).isoformat(timespec="seconds")}
        write_json_atomic(path / MANIFEST, manifest)
