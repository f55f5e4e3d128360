"""Is `hybrid` at least the better of BM25 and dense? Fit on half 1 of a dev set, measure on half 2, as a user does.

For each set of ``bench/devsets.py`` asked for, on its KB (embedded: `kqe-rdf kb embed`):

1. ``kqe-rdf kb tune-fusion --forget``: the KB has no fitted weight, so `hybrid` weighs each request;
2. ``kqe-rdf eval ... --half 2 -m bm25 -m dense -m hybrid -m hybrid-rrf``: both sides, the hybrid weighed per
   request and reciprocal rank fusion (the hybrid before issue 55);
3. ``kqe-rdf kb tune-fusion ... --half 1 --measure M``: the weight fitted on the other half (M: the set's measure);
4. ``kqe-rdf eval ... --half 2 -m hybrid``: the hybrid with that weight.

Halves split by the parity of each query id's sha256 (`--half`). Each step's per-query records go to
``OUT/SET.request.jsonl`` and ``OUT/SET.fitted.jsonl``, the fit to ``OUT/SET.fit.json``, and the commands and
means to ``OUT/SET.json``:

    python bench/fusion.py --kbs $KBS --out $RUN --sets scifact-train dl19 phenopackets-template metaqa-1-hop
    python bench/fusion.py --kbs $KBS --out $RUN --sets phenopackets-template --sample 500   # 500 of each half
    python bench/fusion.py --table $RUN          # the Markdown tables (means; per query against the better side)
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

from devsets import DATA, SETS, DevSet

#: What each method is called in the tables.
LABELS = {"bm25": "bm25", "dense": "dense", "hybrid-rrf": "hybrid-rrf", "hybrid": "hybrid (per request)",
          "fitted": "hybrid (fitted on half 1)"}
#: hybrid may be this far below the better side (points of the set's measure, in percent) and still pass.
TOLERANCE = 0.5


def kqe(*args: str) -> str:
    done = subprocess.run([sys.executable, "-m", "kqe_rdf", *args], capture_output=True, text=True)
    if done.returncode:
        sys.exit(f"kqe-rdf {' '.join(args)} failed:\n{done.stderr[-3000:]}")
    return done.stdout


def shown(args: list[str], kbs: Path) -> str:
    return "kqe-rdf " + " ".join(a.replace(str(DATA), "$DATA").replace(str(kbs), "$KBS") for a in args)


def run(kbs: Path, out: Path, s: DevSet, sample: int | None = None) -> dict:
    kb = str(kbs / s.kb)
    source = [s.queryset, *(str(DATA / f) for f in s.files)]
    scope = list(s.options)  # --type, --wording, --rel, --depth: eval and tune-fusion read the set alike
    if sample:  # a seeded sample of each half (the fit's of half 1, the measure's of half 2)
        scope += ["--sample", str(sample), "--seed", "0"]
    commands = [
        ["kb", "tune-fusion", *source, "--kb", kb, "--forget"],
        ["eval", *source, "--kb", kb, *scope, "--half", "2", "-m", "bm25", "-m", "dense", "-m", "hybrid",
         "-m", "hybrid-rrf", "--json", "--per-query", str(out / f"{s.name}.request.jsonl")],
        ["kb", "tune-fusion", *source, "--kb", kb, *scope, "--half", "1", "--measure", s.metric],
        ["eval", *source, "--kb", kb, *scope, "--half", "2", "-m", "hybrid", "--json", "--per-query",
         str(out / f"{s.name}.fitted.jsonl")],
    ]
    outputs = [kqe(*c) for c in commands]
    fit = json.loads(outputs[2])
    (out / f"{s.name}.fit.json").write_text(json.dumps(fit, indent=1))
    means = {r["method"]: 100 * r[s.metric] for r in json.loads(outputs[1])["results"]}
    means["fitted"] = 100 * json.loads(outputs[3])["results"][0][s.metric]
    summary = {"set": s.name, "measure": s.metric, "queries": json.loads(outputs[1])["queries"], "means": means,
               "weight": fit["bm25_weight"], "normalisation": fit["normalisation"], "fit_queries": fit["queries"],
               "commands": [shown(c, kbs) for c in commands]}
    (out / f"{s.name}.json").write_text(json.dumps(summary, indent=1))
    better = max(means["bm25"], means["dense"])
    print(f"{s.name:24s} " + "  ".join(f"{m} {v:6.2f}" for m, v in means.items())
          + f"  (BM25 weight {fit['bm25_weight']:.2f} {fit['normalisation']}; better side {better:.2f})", flush=True)
    return summary


def per_query(path: Path, measure: str) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    for line in path.open():
        r = json.loads(line)
        out.setdefault(r["method"], {})[r["qid"]] = r.get(measure, 0.0)
    return out


def tables(run_dir: Path) -> str:
    head = ("| dev set (half 2) | measure | n | bm25 | dense | hybrid-rrf | hybrid (per request) | BM25 weight fitted on "
            "half 1 | hybrid (fitted) | better side − 0.5 | passes |")
    lines = [head, "|---|---|---:|---:|---:|---:|---:|---|---:|---:|---|"]
    details = []
    for s in SETS:
        path = run_dir / f"{s.name}.json"
        if not path.exists():
            continue
        r = json.loads(path.read_text())
        m = r["means"]
        floor = max(m["bm25"], m["dense"]) - TOLERANCE
        lines.append(f"| {s.name} | {s.metric} | {r['queries']:,} | {m['bm25']:.2f} | {m['dense']:.2f} | "
                     f"{m['hybrid-rrf']:.2f} | {m['hybrid']:.2f} | {r['weight']:.2f} ({r['normalisation']}, "
                     f"{r['fit_queries']:,} queries) | {m['fitted']:.2f} | {floor:.2f} | "
                     f"{'yes' if m['fitted'] >= floor else '**no**'} |")
        request = per_query(run_dir / f"{s.name}.request.jsonl", s.metric)
        fitted = per_query(run_dir / f"{s.name}.fitted.jsonl", s.metric)["hybrid"]
        side = "bm25" if m["bm25"] >= m["dense"] else "dense"
        rows = [(q, request["bm25"][q], request["dense"][q], request["hybrid-rrf"][q], request["hybrid"][q], fitted[q])
                for q in sorted(fitted, key=lambda q: (len(q), q))]
        count = {name: (sum(1 for row in rows if row[col] > row[1 if side == "bm25" else 2]),
                        sum(1 for row in rows if row[col] < row[1 if side == "bm25" else 2]))
                 for name, col in (("hybrid-rrf", 3), ("hybrid (per request)", 4), ("hybrid (fitted)", 5))}
        details.append(f"\n**{s.name}**, half 2, per query against the better side ({side}): "
                       + "; ".join(f"{name} better on {w}, worse on {lo}" for name, (w, lo) in count.items()) + ".")
        better = 1 if side == "bm25" else 2
        if len(rows) > 60:  # the 15 queries the fitted hybrid loses most on against the better side
            below = sorted((row for row in rows if row[5] < row[better]), key=lambda row: row[5] - row[better])[:15]
            if below:
                details.append(f"The {len(below)} queries of half 2 where the fitted hybrid falls furthest below "
                               f"{side}:")
            else:  # then the queries any hybrid ranks otherwise than the better side, so the table still says why
                below = sorted((row for row in rows if any(row[c] != row[better] for c in (3, 4, 5))),
                               key=lambda row: (row[5] == row[better], row[4] == row[better]))[:15]
                details.append(f"The fitted hybrid is below {side} on no query of half 2; {len(below)} queries where "
                               f"a hybrid differs from {side}:")
            rows = below
        details.append("\n| query | bm25 | dense | hybrid-rrf | hybrid (per request) | hybrid (fitted) |\n"
                       "|---|---:|---:|---:|---:|---:|")
        details += [f"| {q} | {b:.3f} | {d:.3f} | {f:.3f} | {h:.3f} | {t:.3f} |" for q, b, d, f, h, t in rows]
    return "\n".join(lines + details)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kbs", type=Path, help="folder holding one embedded KB per name")
    parser.add_argument("--out", type=Path, help="write the runs here")
    parser.add_argument("--sets", nargs="+", default=["scifact-train", "dl19", "phenopackets-template", "metaqa-1-hop"])
    parser.add_argument("--sample", type=int, default=None, help="a seeded random sample of N queries of each half")
    parser.add_argument("--table", type=Path, metavar="RUN", help="print the Markdown tables of a run")
    args = parser.parse_args()
    if args.table:
        print(tables(args.table))
        return
    if args.kbs is None or args.out is None:
        parser.error("--kbs and --out are needed to run")
    unknown = set(args.sets) - {s.name for s in SETS}
    if unknown:
        parser.error(f"unknown set(s): {', '.join(sorted(unknown))}")
    args.out.mkdir(parents=True, exist_ok=True)
    for s in SETS:
        if s.name in args.sets:
            run(args.kbs, args.out, s, args.sample)


if __name__ == "__main__":
    main()
