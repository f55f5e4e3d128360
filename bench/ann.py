"""Approximate nearest-neighbour libraries against exact search: usearch, hnswlib and faiss-cpu (HNSW each).

Vectors are random but clustered, shaped like sentence embeddings: unit-length
384-d float32, ``n / 500`` cluster centres in random directions, and each
vector its centre plus noise with a decaying spectrum (the variance of the
i-th axis falls as 1/i, as in real embedding sets, whose variance sits in few
directions), normalised again; two members of one cluster have a cosine of
about 0.5. Queries are fresh draws from the same clusters. The real bio KB's
vectors (``--real PATH``, read only) add a row on real MiniLM embeddings.

Each library builds its index in a child process of its own (two threads,
M = 16 links, ef_construction = 100), so its memory is measured alone: the
growth of the child's resident memory while building, with the vectors
already loaded. Then every query is sent alone on one thread (as a request
is served) at rising ef_search, and recall@100 is measured against exact
search and p50 latency over the queries. Exact search is kqe-rdf's own:
a matrix-vector product on one BLAS thread and ``argpartition``, timed on
the same queries in the same run.

    python bench/ann.py                  # 100k and 1M vectors (the 1M builds take minutes each)
    python bench/ann.py --quick          # 20k vectors, a smoke run
    python bench/ann.py --sizes 100000   # one size
    python bench/ann.py --large-libraries usearch   # at 1M only usearch (each 1M build takes long on 2 cores)
    python bench/ann.py --sizes 1000000 --libraries usearch --connectivity 32 --no-doc   # the KB's own M
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import harness
from harness import ms, percentile, table

DIM, K, EF_CONSTRUCTION = 384, 100, 100
#: Links per node (``--connectivity``; handed to the building child processes through the environment).
M = int(os.environ.get("KQE_BENCH_ANN_M", "16"))
EF_SEARCH = (100, 150, 200, 300, 400, 600)
LIBRARIES = ("usearch", "hnswlib", "faiss")
PACKAGES = {"usearch": "usearch", "hnswlib": "hnswlib", "faiss": "faiss-cpu"}


def clustered(n: int, seed: int, centres: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``n`` unit vectors around ``centres`` (drawn when not given); returns (vectors, centres)."""
    rng = np.random.default_rng(seed)
    if centres is None:
        centres = rng.standard_normal((max(n // 500, 10), DIM)).astype(np.float32)
        centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    scale = (1.0 / np.sqrt(np.arange(1, DIM + 1))).astype(np.float32)
    scale /= np.sqrt((scale ** 2).sum())  # total noise variance 1: within-cluster cosine about 0.5
    out = np.empty((n, DIM), dtype=np.float32)
    for start in range(0, n, 100_000):
        stop = min(n, start + 100_000)
        rows = centres[rng.integers(0, len(centres), stop - start)]
        rows = rows + rng.standard_normal((stop - start, DIM), dtype=np.float32) * scale
        out[start:stop] = rows / np.linalg.norm(rows, axis=1, keepdims=True)
    return out, centres


def exact(vectors: np.ndarray, queries: np.ndarray) -> tuple[np.ndarray, list[float]]:
    """The exact top-100 of every query, and per-query seconds, as kqe_rdf.kb.embeddings.DenseIndex searches."""
    from threadpoolctl import threadpool_limits

    truth = np.empty((len(queries), K), dtype=np.int64)
    seconds = []
    with threadpool_limits(limits=1, user_api="blas"):
        for i, q in enumerate(queries):
            t0 = time.perf_counter()
            scores = q[None, :] @ vectors.T
            top = np.argpartition(-scores[0], K - 1)[:K]
            seconds.append(time.perf_counter() - t0)
            truth[i] = top
    return truth, seconds


def rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def child(library: str, folder: Path) -> dict:
    """Build ``library``'s index over folder/vectors.npy, then time and score queries; returns a JSON-able dict."""
    vectors = np.load(folder / "vectors.npy")
    queries = np.load(folder / "queries.npy")
    truth = np.load(folder / "truth.npy")
    n = len(vectors)
    before = rss_mib()
    t0 = time.perf_counter()
    if library == "hnswlib":
        import hnswlib

        index = hnswlib.Index(space="ip", dim=DIM)
        index.init_index(max_elements=n, M=M, ef_construction=EF_CONSTRUCTION)
        index.add_items(vectors, np.arange(n), num_threads=2)

        def set_ef(ef):
            index.set_ef(ef)

        def search(q):
            return index.knn_query(q[None, :], k=K, num_threads=1)[0][0]

        def save(path):
            index.save_index(str(path))
    elif library == "usearch":
        from usearch.index import Index

        index = Index(ndim=DIM, metric="ip", dtype="f32", connectivity=M, expansion_add=EF_CONSTRUCTION)
        index.add(np.arange(n), vectors, threads=2)

        def set_ef(ef):
            index.expansion_search = ef

        def search(q):
            return index.search(q, K, threads=1).keys

        def save(path):
            index.save(str(path))
    elif library == "faiss":
        import faiss

        faiss.omp_set_num_threads(2)
        index = faiss.IndexHNSWFlat(DIM, M, faiss.METRIC_INNER_PRODUCT)
        index.hnsw.efConstruction = EF_CONSTRUCTION
        index.add(vectors)
        faiss.omp_set_num_threads(1)

        def set_ef(ef):
            index.hnsw.efSearch = ef

        def search(q):
            return index.search(q[None, :], K)[1][0]

        def save(path):
            faiss.write_index(index, str(path))
    else:
        raise SystemExit(f"unknown library {library}")
    build = time.perf_counter() - t0
    grown = rss_mib() - before
    save(folder / f"{library}.index")
    size = (folder / f"{library}.index").stat().st_size
    (folder / f"{library}.index").unlink()
    sweep = []
    for ef in EF_SEARCH:
        set_ef(ef)
        for q in queries[:5]:  # warm-up
            search(q)
        found, seconds = [], []
        for q in queries:
            t = time.perf_counter()
            keys = search(q)
            seconds.append(time.perf_counter() - t)
            found.append(keys)
        recall = float(np.mean([len(set(map(int, f)) & set(map(int, t))) / K for f, t in zip(found, truth)]))
        sweep.append({"ef": ef, "recall": recall, "p50": percentile(seconds, 50), "p95": percentile(seconds, 95)})
    return {"library": library, "n": n, "build": build, "memory_mib": grown, "file_bytes": size, "sweep": sweep}


def run_size(name: str, vectors: np.ndarray, queries: np.ndarray, libraries, folder: Path) -> dict:
    folder.mkdir(parents=True, exist_ok=True)
    truth, exact_seconds = exact(vectors, queries)
    np.save(folder / "vectors.npy", vectors)
    np.save(folder / "queries.npy", queries)
    np.save(folder / "truth.npy", truth)
    results = {"name": name, "n": len(vectors), "exact_p50": percentile(exact_seconds, 50),
               "exact_p95": percentile(exact_seconds, 95), "libraries": []}
    for library in libraries:
        print(f"  {name}: {library} …", flush=True)
        out = subprocess.run([sys.executable, __file__, "--child", library, str(folder)], capture_output=True,
                             text=True, check=False)
        if out.returncode:
            raise SystemExit(f"{library} failed on {name}: {out.stderr[-2000:]}")
        row = json.loads(out.stdout.strip().splitlines()[-1])
        results["libraries"].append(row)
        print(f"    built in {row['build']:.1f} s, +{row['memory_mib']:.0f} MiB; "
              + ", ".join(f"ef {s['ef']}: R {s['recall']:.3f} {ms(s['p50'])} ms" for s in row["sweep"]), flush=True)
    for f in ("vectors.npy", "queries.npy", "truth.npy"):
        (folder / f).unlink()
    return results


def first_reaching(sweep: list[dict], target: float = 0.98) -> dict | None:
    return next((s for s in sweep if s["recall"] >= target), None)


def report(results: list[dict]) -> str:
    rows, sweeps = [], []
    for size in results:
        rows.append([size["name"], "exact (NumPy, 1 thread)", "–", "–", "–", "1.000", ms(size["exact_p50"]),
                     ms(size["exact_p95"]), "1.00×"])
        for lib in size["libraries"]:
            best = first_reaching(lib["sweep"])
            note = "" if best else ", none reaches 0.98"
            best = best or lib["sweep"][-1]
            rows.append([size["name"], f"{lib['library']} (ef_search {best['ef']}{note})", f"{lib['build']:.1f}",
                         f"{lib['memory_mib']:.0f}", f"{lib['file_bytes'] / 2**20:.0f}", f"{best['recall']:.4f}",
                         ms(best["p50"]), ms(best["p95"]), f"{size['exact_p50'] / best['p50']:.1f}×"])
            sweeps.append([size["name"], lib["library"]] + [f"{s['recall']:.3f} / {ms(s['p50'])}" for s in lib["sweep"]])
    main = table(["vectors", "search", "build s", "memory MiB", "file MiB", "recall@100", "p50 ms", "p95 ms",
                  "p50 speed-up vs exact"], rows)
    sweep = table(["vectors", "library"] + [f"ef {ef}" for ef in EF_SEARCH], sweeps)
    return (main + "\n\nEach library's row is at the smallest ef_search (of "
            + ", ".join(map(str, EF_SEARCH)) + ") that reaches recall@100 ≥ 0.98 (the largest when none does). "
            "Recall@100 / p50 ms at every ef_search:\n\n" + sweep)


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        print(json.dumps(child(sys.argv[2], Path(sys.argv[3]))))
        return

    def extra(parser):
        parser.add_argument("--sizes", type=lambda s: [int(x) for x in s.split(",")], default=None,
                            help="comma-separated vector counts (default 100000,1000000; --quick: 20000)")
        parser.add_argument("--queries", type=int, default=200)
        parser.add_argument("--libraries", default=",".join(LIBRARIES))
        parser.add_argument("--large-libraries", default=None,
                            help="libraries built at sizes of 1M and more (default: all of --libraries)")
        parser.add_argument("--real", type=Path, default=None,
                            help="a KB's embeddings folder (read only) for a row on real vectors")
        parser.add_argument("--connectivity", type=int, default=M,
                            help=f"HNSW links per node, M (default {M}; the KB's own index uses 32)")

    global M
    args = harness.arguments(__doc__.splitlines()[0], extra, repeats=1)
    M = args.connectivity
    os.environ["KQE_BENCH_ANN_M"] = str(M)
    sizes = args.sizes or ([20_000] if args.quick else [100_000, 1_000_000])
    libraries = args.libraries.split(",")
    large = args.large_libraries.split(",") if args.large_libraries else libraries
    env = harness.Environment([PACKAGES[lib] for lib in libraries] + ["numpy"])
    work = Path(tempfile.mkdtemp(prefix="kqe-ann-"))
    results = []
    centres = None
    for n in sizes:
        vectors, centres = clustered(n, seed=n)
        queries, _ = clustered(args.queries, seed=n + 1, centres=centres)
        chosen = large if n >= 1_000_000 else libraries
        results.append(run_size(f"{n:,} clustered", vectors, queries, chosen, work / str(n)))
        del vectors
    if args.real:
        vectors = np.asarray(np.load(args.real / "vectors.npy", mmap_mode="r"), dtype=np.float32)
        rng = np.random.default_rng(0)
        pick = rng.choice(len(vectors), size=min(args.queries, len(vectors) // 10), replace=False)
        keep = np.setdiff1d(np.arange(len(vectors)), pick)
        results.append(run_size(f"{len(keep):,} real (bio KB)", vectors[keep], vectors[pick], libraries,
                                work / "real"))
    env.finish()
    body = report(results)
    print(body)
    if args.doc:
        intro = (env.markdown(harness.command_line()) + "\n"
                 f"- Data: {__doc__.split(chr(10) + chr(10))[1]}\n"
                 f"- Index: HNSW in each library, M = {M}, ef_construction = {EF_CONSTRUCTION}, inner product, "
                 "float32; built with 2 threads; each query searched alone on 1 thread; "
                 f"{args.queries} queries; memory is the growth of the building process's resident memory.\n"
                 f"- Libraries: {', '.join(libraries)} below 1M vectors; {', '.join(large)} at 1M and more "
                 "(a 1M build takes tens of minutes on this shared machine, so the others are compared at 100k).\n")
        harness.update_doc("ann", "Approximate nearest neighbours: usearch, hnswlib, faiss (`bench/ann.py`)",
                           intro + "\n" + body)


if __name__ == "__main__":
    main()
