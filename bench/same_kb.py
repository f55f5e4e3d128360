"""Whether two KB folders hold the same KB: for a change to the build that must not change what a KB holds.

Compares, and prints one line per part (exit status 1 when any differs):

* the store: every quad (blank nodes, which each load names afresh, by what they say);
* the documents (``documents.jsonl.gz`` decompressed, line by line), the name index (``names.json.gz`` as JSON),
  the hierarchy and phrase arrays, the BM25 node table (arrays);
* the manifest, less what differs from build to build (date, timings, the gzip file's hash, which holds its time,
  the kqe-rdf version);
* BM25 search: the top 10 (IRI and score) of requests made of words drawn (seeded) from the documents.

    python bench/same_kb.py KB_A KB_B
    python bench/same_kb.py KB_A KB_B --requests 500
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import random
import sys
from pathlib import Path

import numpy as np

#: Manifest keys that differ between two builds of the same KB.
PER_BUILD = {"created", "seconds", "documents_sha256", "source"}


def quads(store_path: Path) -> list[str]:
    """Every quad of a store as N-Quads text, sorted; a blank node written as what it says (its triples)."""
    from pyoxigraph import BlankNode, Store

    store = Store.read_only(str(store_path))
    rows = list(store)
    about: dict[str, list[str]] = {}
    for q in rows:
        if isinstance(q.subject, BlankNode):
            about.setdefault(q.subject.value, []).append(f"{q.predicate} {q.object}")
    names = {b: "_:" + hashlib.sha1("\n".join(sorted(lines)).encode()).hexdigest() for b, lines in about.items()}

    def term(t) -> str:
        return names.get(t.value, str(t)) if isinstance(t, BlankNode) else str(t)

    return sorted(f"{term(q.subject)} {q.predicate} {term(q.object)} {q.graph_name}" for q in rows)


def arrays(path: Path) -> dict[str, np.ndarray]:
    with np.load(path, allow_pickle=False) as data:
        return {k: data[k] for k in data.files}


def same_arrays(a: Path, b: Path) -> bool:
    x, y = arrays(a), arrays(b)
    return x.keys() == y.keys() and all(np.array_equal(x[k], y[k]) for k in x)


def manifest(kb: Path) -> dict:
    data = json.loads((kb / "manifest.json").read_text())
    data.get("versions", {}).pop("kqe-rdf", None)
    if isinstance(data.get("hierarchies"), dict):
        data["hierarchies"].pop("seconds", None)
    return {k: v for k, v in data.items() if k not in PER_BUILD}


def top10(kb: Path, requests: list[str]) -> list:
    from kqe_rdf.kb.text_index import TextIndex

    index = TextIndex(kb / "bm25")
    return [[(iri, round(score, 5)) for iri, score in index.search(text, 10)] for text in requests]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("a", type=Path)
    parser.add_argument("b", type=Path)
    parser.add_argument("--requests", type=int, default=200, help="BM25 requests compared (seeded)")
    args = parser.parse_args()
    a, b = args.a, args.b
    results: dict[str, bool] = {}

    qa, qb = quads(a / "store"), quads(b / "store")
    results[f"store: {len(qa):,} quads"] = qa == qb
    da = gzip.decompress((a / "documents.jsonl.gz").read_bytes()).decode().splitlines()
    db = gzip.decompress((b / "documents.jsonl.gz").read_bytes()).decode().splitlines()
    results[f"documents: {len(da):,}"] = da == db
    results["name index (names.json.gz)"] = (json.loads(gzip.decompress((a / "names.json.gz").read_bytes()))
                                             == json.loads(gzip.decompress((b / "names.json.gz").read_bytes())))
    for part in sorted({p.relative_to(a) for p in a.rglob("*.npz")} | {p.relative_to(b) for p in b.rglob("*.npz")}):
        if part.parts[0] == "embeddings":
            continue
        results[f"arrays {part}"] = (a / part).is_file() and (b / part).is_file() and same_arrays(a / part, b / part)
    results["manifest (less date, timings, file hash)"] = manifest(a) == manifest(b)

    rng = random.Random(52)
    words = [w for line in rng.sample(da, min(len(da), 2000))
             for w in json.loads(line)["text"].replace(":", " ").split() if w.isalpha()]
    requests = [" ".join(rng.sample(words, rng.randint(1, 4))) for _ in range(args.requests)]
    results[f"BM25 top 10 of {len(requests)} requests"] = top10(a, requests) == top10(b, requests)

    for what, same in results.items():
        print(f"{'same     ' if same else 'DIFFERENT'} {what}")
    sys.exit(0 if all(results.values()) else 1)


if __name__ == "__main__":
    main()
