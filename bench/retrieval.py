"""Per-query latency of the named retrieval methods (bm25, prf, dense, hybrid, hybrid-rrf) on one KB, BM25 as the baseline.

The KB is ``--kb PATH`` or the first of ``data/kb/bio``, ``data/kb/metaqa``,
``data/kb/scifact`` that exists and has embeddings; when none does, a scratch
KB of the first 2,000 SciFact abstracts is built and embedded once into the
system temp dir (``kqe-bench/``) and reused by later runs. Queries are real
ones that fit the KB: phenopacket case templates (bio, ``--type Disease``),
MetaQA dev questions (1/2/3-hop, a third each), SciFact claims, or TREC DL 2019
topics for a passages KB.

Each method is ``pipeline(name, kb, settings, k=10, types).search(text)``, one
query per call, as ``kqe-rdf search`` runs it; after a warm-up every query is
timed ``--repeats`` times per method (in rounds: each method over all queries), the
per-query median kept, and p50/p95 taken over the queries.

    python bench/retrieval.py            # ~100 queries, 5 runs each
    python bench/retrieval.py --quick    # 20 queries, 2 runs (scratch KB: 300 abstracts)
    python bench/retrieval.py --kb data/kb/dl19
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import harness
from harness import ms, percentile, table

METHODS = ("bm25", "prf", "dense", "hybrid", "hybrid-rrf")
CANDIDATES = ("data/kb/bio", "data/kb/metaqa", "data/kb/scifact")


def scratch_kb(abstracts: int) -> Path:
    """A SciFact KB of the first ``abstracts`` abstracts, built and embedded once, then reused."""
    from kqe_rdf.kb.build import build_kb, embed_kb
    from kqe_rdf.kb.knowledge_base import KnowledgeBase
    from kqe_rdf.kb.importers.scifact import SciFactImporter

    path = Path(tempfile.gettempdir()) / "kqe-bench" / f"scifact-{abstracts}"
    try:
        if KnowledgeBase.open(path).has_embeddings:
            print(f"re-using the scratch KB {path}")
            return path
    except Exception:  # noqa: BLE001 - any unusable leftover is rebuilt
        pass
    print(f"building and embedding a scratch SciFact KB of {abstracts:,} abstracts in {path} (once) …", flush=True)
    t0 = time.perf_counter()
    build_kb(SciFactImporter([harness.shared("scifact", "corpus.csv.gz")], limit=abstracts), path)
    info = embed_kb(path)
    print(f"  done in {time.perf_counter() - t0:.0f} s ({info.get('passages_per_second')} passages/s)")
    return path


def choose_kb(given: Path | None, quick: bool) -> tuple[Path, str]:
    from kqe_rdf.kb.knowledge_base import KnowledgeBase

    if given is not None:
        if not KnowledgeBase.open(given).has_embeddings:
            raise SystemExit(f"{given} has no embeddings; run `kqe-rdf kb embed --kb {given}` first")
        return given, "given with --kb"
    root = harness.ROOT
    for candidate in CANDIDATES:
        path = root / candidate
        try:
            if KnowledgeBase.open(path).has_embeddings:
                return path, "the first of " + ", ".join(CANDIDATES) + " with embeddings"
        except Exception:  # noqa: BLE001 - missing or damaged: try the next
            continue
    size = 300 if quick else 2000
    return scratch_kb(size), (f"scratch: none of {', '.join(CANDIDATES)} exists with embeddings, so the first "
                              f"{size:,} SciFact abstracts were built and embedded into the temp dir")


def queries_for(kb, limit: int) -> tuple[list[str], list[str] | None, str]:
    """(query texts, type filter, description) for the KB's importer."""
    from kqe_rdf.evaluation import querysets

    importer = kb.manifest["importer"]
    if importer == "bio":
        qs = querysets.load("phenopackets", harness.shared("phenopackets", "dev.jsonl.gz"), limit=limit)
        return [q.text for q in qs], ["Disease"], (
            f"the first {len(qs)} phenopacket case templates (`../shared/data/phenopackets/dev.jsonl.gz`), "
            "restricted to `--type Disease`")
    if importer == "metaqa":
        texts: list[str] = []
        per_hop = [limit - 2 * (limit // 3), limit // 3, limit // 3]
        for hop, n in zip(("1-hop", "2-hop", "3-hop"), per_hop):
            texts += [q.text for q in querysets.load("metaqa", harness.shared("metaqa", hop, "dev.txt.gz"), limit=n)]
        return texts, None, f"{len(texts)} MetaQA dev questions ({'/'.join(map(str, per_hop))} of 1/2/3-hop)"
    if importer == "passages":
        qs = querysets.load("trec", harness.shared("trec_dl19", "topics.dl19-passage.txt"),
                            harness.shared("trec_dl19", "qrels.dl19-passage.txt"), limit=limit)
        return [q.text for q in qs], None, f"the {len(qs)} TREC DL 2019 passage topics"
    qs = querysets.load("scifact", harness.shared("scifact", "claims_train.csv"),
                        harness.shared("scifact", "qrels_train.txt"), limit=limit)
    return [q.text for q in qs], None, f"the first {len(qs)} SciFact train claims"


def query_caches(kb) -> list:
    """What empties kqe_rdf's per-query caches of ``kb`` (``KnowledgeBase.embed_query``'s query vectors: every
    ``per_instance`` cache of the KB). They are cleared before every timed call, so each call costs what a new
    query costs; otherwise the repeats of a query would time only the cache.
    """
    from kqe_rdf.core.caches import forget

    return [("per-instance caches of the KB", lambda: forget(kb))]


def measure(args, kb_path: Path) -> dict:
    """p50/p95/mean seconds per call name, plus what the report needs about the KB and the queries."""
    from kqe_rdf.core.config import Settings
    from kqe_rdf.kb.knowledge_base import KnowledgeBase
    from kqe_rdf.methods.registry import pipeline
    from kqe_rdf.methods.retrieval import fusion_weight

    settings = Settings()
    kb = KnowledgeBase.open(kb_path, settings)
    texts, types, described = queries_for(kb, args.queries or (20 if args.quick else 100))
    print(f"KB {kb_path} ({kb.manifest['importer']}, {kb.manifest['counts']['documents']:,} documents, "
          f"{len(kb.dense):,} embedded); {described}", flush=True)

    pipelines = {m: pipeline(m, kb, settings, args.k, types) for m in METHODS}
    # Dense's two parts, to show where its time goes: encoding the query, then the exact top-k.
    dense = pipelines["dense"].stages[0] if hasattr(pipelines["dense"], "stages") else pipelines["dense"]
    mask = getattr(dense, "mask", None)

    def encode_only(text: str) -> None:
        kb.encoder.encode([text])

    vectors = {t: kb.encoder.encode([t]) for t in texts}

    def topk_only(text: str) -> None:
        kb.dense.search(vectors[text], args.k, mask)

    calls = {m: p.search for m, p in pipelines.items()}
    calls["dense: query encoding only"] = encode_only
    calls["dense: exact top-k only"] = topk_only

    caches = query_caches(kb)

    def forget() -> None:
        for _, clear in caches:
            clear()

    for text in texts[:5]:  # warm-up: opens the index, the encoder, the vectors; fills caches
        for fn in calls.values():
            fn(text)
    samples: dict[str, list[list[float]]] = {name: [[] for _ in texts] for name in calls}
    # Method by method within each round: ONNX Runtime's threads spin for a while after a call, which would
    # slow a BM25 call made right after a dense one on two cores.
    for _ in range(args.repeats):
        for name, fn in calls.items():
            for i, text in enumerate(texts):
                forget()
                t0 = time.perf_counter()
                fn(text)
                samples[name][i].append(time.perf_counter() - t0)
    latency = {name: [statistics.median(r) for r in rows] for name, rows in samples.items()}
    return {
        "stats": {name: [percentile(v, 50), percentile(v, 95), statistics.mean(v)] for name, v in latency.items()},
        "importer": kb.manifest["importer"], "documents": kb.manifest["counts"]["documents"],
        "embedded": len(kb.dense), "model_id": kb.dense.model_id, "described": described,
        "queries": len(texts), "words": statistics.median(len(t.split()) for t in texts),
        "caches": [n for n, _ in caches], "hybrid_depth": settings.hybrid.depth, "prf_docs": settings.prf.docs,
        "hybrid_weight": fusion_weight(kb, settings).source,
        "prf_terms": settings.prf.terms,
    }


def result_table(stats: dict) -> str:
    base50, base95, _ = stats["bm25"]
    rows = []
    for name, (p50, p95, mean) in stats.items():
        label = f"`{name}`" if name in METHODS else f"  ({name})"
        rows.append([label, ms(p50), ms(p95), ms(mean), f"{p50 / base50:.2f}×", f"{p95 / base95:.2f}×"])
    return table(["method", "p50 ms", "p95 ms", "mean ms", "p50 vs bm25", "p95 vs bm25"], rows)


def one_blas_thread(args, kb_path: Path) -> dict | None:
    """The same measurement in a child process whose OpenBLAS (NumPy's BLAS) may use one thread only."""
    with tempfile.TemporaryDirectory(prefix="kqe-bench-") as tmp:
        out = Path(tmp) / "child.json"
        command = [sys.executable, str(Path(__file__).resolve()), "--kb", str(kb_path), "--no-doc", "--no-blas-compare",
                   "--blas-threads", "1", "--repeats", str(args.repeats), "-k", str(args.k), "--json", str(out)]
        if args.quick:
            command.append("--quick")
        if args.queries:
            command += ["--queries", str(args.queries)]
        print("\nthe same in a child process with OPENBLAS_NUM_THREADS=1 …", flush=True)
        done = subprocess.run(command, cwd=harness.ROOT, check=False, capture_output=True, text=True)
        if done.returncode != 0 or not out.is_file():
            print(f"the child process failed ({done.returncode}):\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
            return None
        return json.loads(out.read_text())


def main() -> None:
    def extra(parser):
        parser.add_argument("--kb", type=Path, help="a built and embedded KB (default: see above)")
        parser.add_argument("--queries", type=int, default=None, help="queries (default 100; --quick 20)")
        parser.add_argument("-k", type=int, default=10, help="results per query (default 10, as the CLI)")
        parser.add_argument("--blas-threads", type=int, default=None,
                            help="set OPENBLAS_NUM_THREADS/OMP_NUM_THREADS for this process (before NumPy loads)")
        parser.add_argument("--no-blas-compare", dest="blas_compare", action="store_false",
                            help="skip the second measurement in a child process limited to one BLAS thread")
        parser.add_argument("--json", type=Path, help=argparse.SUPPRESS)

    args = harness.arguments(__doc__.split("\n")[0], extra)
    if args.blas_threads:
        for name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
            os.environ[name] = str(args.blas_threads)
    env = harness.Environment(["tantivy", "onnxruntime", "numpy"])
    kb_path, why = choose_kb(args.kb, args.quick)
    found = measure(args, kb_path)
    env.finish()
    result = result_table(found["stats"])
    print()
    print(result)
    if args.json:
        args.json.write_text(json.dumps(found))
    cache_note = ("Every call is timed as a new query: kqe-rdf's per-query caches ("
                  + ", ".join(f"`KnowledgeBase.{n}`" for n in found["caches"])
                  + ") are cleared before each timed call (untimed); a repeated query would skip the encoding."
                  if found["caches"] else "kqe-rdf has no per-query cache to clear in this version.")
    print(cache_note)

    child = one_blas_thread(args, kb_path) if args.blas_compare else None
    blas_part = ""
    if child is not None:
        child_table = result_table(child["stats"])
        print()
        print(child_table)
        def parts(stats: dict) -> tuple[float, float, float]:
            return (stats["dense"][0], stats["dense: query encoding only"][0], stats["dense: exact top-k only"][0])

        (d_main, e_main, t_main), (d_child, e_child, t_child) = parts(found["stats"]), parts(child["stats"])
        blas_part = f"""
**The same, in a child process started with `OPENBLAS_NUM_THREADS=1`** (NumPy's BLAS limited to one
thread; everything else identical, its own BM25 baseline):

{child_table}

p50 of a dense query: {ms(d_main)} ms with NumPy's default BLAS threads, {ms(d_child)} ms with one
({d_main / d_child:.2f}×). Its two parts timed on their own add up to {ms(e_main + t_main)} ms and
{ms(e_child + t_child)} ms: with default threads a dense query costs {ms(d_main - e_main - t_main)} ms more
than its parts, with one BLAS thread {ms(d_child - e_child - t_child)} ms. When the ONNX model and the
matrix-vector product alternate, ONNX Runtime's and OpenBLAS's thread pools (both spin-wait after work)
compete for the {os.cpu_count()} cores.
"""
    if args.doc:
        rel = kb_path.relative_to(harness.ROOT) if str(kb_path).startswith(str(harness.ROOT)) else kb_path
        body = f"""{env.markdown(harness.command_line())}
- KB: `{rel}` ({why}): {found['importer']} importer, {found['documents']:,} node documents,
  {found['embedded']:,} embedded ({found['model_id']}).
- Queries: {found['described']}; {found['words']:.0f} words per query (median), k = {args.k}.
- Each method is `kqe_rdf.methods.registry.pipeline(name, kb, Settings(), k={args.k}, types).search(text)`, one query per
  call, with default settings (hybrid: BM25's and dense's normalised scores weighed, each side at depth
  {found['hybrid_depth']}, weight from: {found['hybrid_weight']}; hybrid-rrf: the same two lists fused by
  reciprocal rank, the hybrid before issue 55; prf: RM3 with
  {found['prf_docs']} feedback documents, {found['prf_terms']} terms). Warm-up: 5 queries through every method.
  Runs: {args.repeats} rounds, each running every method over all queries in turn; the per-query median
  is kept and p50/p95 taken over the {found['queries']} queries. BM25 is the 1.00× baseline.
- {cache_note}

{result}

p50 of `hybrid` against `hybrid-rrf` (the same two searches, fused by reciprocal rank): {found['stats']['hybrid'][0] / found['stats']['hybrid-rrf'][0]:.2f}×.
The two indented rows split `dense` into encoding the query with the ONNX model and the exact
top-k over the stored vectors (a matrix-vector product in NumPy, then `argpartition`).
{blas_part}"""
        harness.update_doc("retrieval", "Retrieval latency per query (`bench/retrieval.py`)", body)
        print(f"\nwrote the retrieval section of {harness.DOC}")


if __name__ == "__main__":
    main()
