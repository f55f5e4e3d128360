"""Embedding in shards on Ray (``kb embed --workers local`` or ``--workers ray://HOST:PORT``).

Each Ray worker is an actor that loads the encoder once (the settings' ``embedding_*``, the same bytes and
checks as in one process) and encodes one shard of documents at a time; the driver writes each finished
shard as the single-process path writes its chunks (``embeddings.partial/chunk-*.npz``), so an interrupted
run resumes from the shards already written, by either path. ``local`` starts Ray on this machine, bound to
127.0.0.1 with one worker per core; a cluster's workers need kqe-rdf installed (``pip install
'kqe-rdf[scale]'``). Ray's usage reporting is off unless the environment turns it on.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence

import numpy as np

from ..core.config import EmbeddingSettings, Settings
from ..core.errors import KqeError


def _ray(address: str):
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")  # Ray reports usage off the machine by default
    try:
        import ray
    except ImportError:
        raise KqeError("kb embed --workers needs Ray: pip install 'kqe-rdf[scale]'") from None
    if not ray.is_initialized():
        # Ray's local node may miss its own start-up deadline on a busy machine ("Timed out waiting for file
        # …/gcs_server_port_…"): a second start, after clearing the first, is what a user would do.
        for attempt in (1, 2):
            try:
                if address == "local":
                    # A small object store: a shard's vectors are under a megabyte (512 × 384 floats), and Ray's
                    # default (30% of the machine's memory) is memory a shared machine may not have.
                    ray.init(num_cpus=os.cpu_count() or 1, include_dashboard=False, log_to_driver=False,
                             _node_ip_address="127.0.0.1", configure_logging=False, object_store_memory=256 << 20)
                else:
                    ray.init(address=address, log_to_driver=False)
                break
            except Exception as exc:  # noqa: BLE001 - Ray raises many kinds of errors when it cannot start or connect
                ray.shutdown()
                if attempt == 2:
                    raise KqeError(f"cannot start Ray at {address}: {exc}") from None
    return ray


class _Shards:
    """An actor's encoder: loaded once per worker, then one shard of texts per call."""

    def __init__(self, embedding: EmbeddingSettings, threads: int) -> None:
        from .embeddings import OnnxEncoder

        self.encoder = OnnxEncoder.from_settings(Settings(embedding=embedding), threads=threads)

    def encode(self, number: int, texts: Sequence[str]) -> tuple[int, np.ndarray]:
        return number, self.encoder.encode(list(texts))


def encode_shards(address: str, settings: Settings, shards: Sequence[tuple[int, Sequence[str]]],
                  workers: int = 0, tick: Callable[[int], None] | None = None) -> Iterator[tuple[int, np.ndarray]]:
    """(shard number, vectors) for each of ``shards`` ((number, texts) pairs), as Ray's workers finish them
    (not in order). ``workers``: actors to start (0: one per CPU Ray has), each encoding on one thread."""
    ray = _ray(address)
    from ray.util import ActorPool

    count = workers or max(int(ray.available_resources().get("CPU", 1)), 1)
    count = max(min(count, len(shards)), 1)
    actor = ray.remote(num_cpus=1)(_Shards)
    pool = ActorPool([actor.remote(settings.embedding, 1) for _ in range(count)])
    sizes = {number: len(texts) for number, texts in shards}
    for number, vectors in pool.map_unordered(lambda a, shard: a.encode.remote(*shard), list(shards)):
        if tick:
            tick(sizes[number])
        yield number, vectors
