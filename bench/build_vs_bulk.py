"""build_kb against Store.bulk_load of the same triples at one size of bench/scale.py's generated KB, with CPU time.

Each build and each bulk load runs in its own child process (``scale.py --child``), interleaved run by run; wall
seconds from the child, CPU seconds (user + system, every thread) and peak RSS from ``wait4``. ``--against REF``
also builds with the code of a git ref (exported with ``git archive`` into a temporary folder), interleaved with
this tree's, so a change to the build is measured against its base in the same run.

    python bench/build_vs_bulk.py                                  # 1M edges, 3 runs
    python bench/build_vs_bulk.py --edges 1000000 --runs 3 --against main
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import harness
from harness import rate, ratio, table


def child(tree: Path, *args: str) -> dict:
    """One ``scale.py --child`` measurement with the code of ``tree``; its JSON line, CPU seconds and peak RSS."""
    env = dict(os.environ, PYTHONPATH=str(tree))
    process = subprocess.Popen([sys.executable, str(tree / "bench" / "scale.py"), "--child", *args],
                               stdout=subprocess.PIPE, cwd=tree, env=env)
    output = process.stdout.read()
    process.stdout.close()
    _pid, status, usage = os.wait4(process.pid, 0)
    if status != 0:
        raise SystemExit(f"child {args} failed (status {status})")
    row = json.loads(output.decode().strip().splitlines()[-1])
    return row | {"cpu": usage.ru_utime + usage.ru_stime, "rss": usage.ru_maxrss * 1024}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--edges", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--against", default=None, help="a git ref whose build is timed beside this tree's")
    args = parser.parse_args()
    env = harness.Environment(["pyoxigraph", "tantivy"])
    scratch = Path(tempfile.mkdtemp(prefix="kqe-bench-build-bulk-"))
    try:
        trees = {"this tree": harness.ROOT}
        if args.against:
            base = scratch / "base"
            base.mkdir()
            archive = subprocess.run(["git", "archive", args.against], cwd=harness.ROOT, check=True,
                                     capture_output=True).stdout
            subprocess.run(["tar", "-x", "-C", str(base)], input=archive, check=True)
            trees = {f"{args.against}": base, **trees}
        nt = scratch / "triples.nt"
        exported = child(harness.ROOT, "export", str(args.edges), str(nt))["triples"]
        rows: dict[str, list[dict]] = {name: [] for name in [*trees, "bulk_load"]}
        for run in range(args.runs):
            for name in rows:
                target = scratch / f"out-{run}"
                print(f"run {run + 1}/{args.runs}: {name} …", flush=True)
                if name == "bulk_load":
                    rows[name].append(child(harness.ROOT, "bulk", str(args.edges), str(target), str(nt)))
                else:
                    rows[name].append(child(trees[name], "build", str(args.edges), str(target)))
                shutil.rmtree(target, ignore_errors=True)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    env.finish()

    def median(name: str, key: str) -> float:
        return statistics.median(r[key] for r in rows[name])

    def runs(name: str) -> str:
        return ", ".join(f"{r['seconds']:.1f}" for r in rows[name])

    bulk = median("bulk_load", "seconds")
    counts = rows[next(iter(trees))][0]["counts"]
    print(f"\n{counts['edges']:,} edges, {counts['nodes']:,} nodes, {counts['triples']:,} triples "
          f"({exported:,} exported for bulk_load); {args.runs} runs each, interleaved; medians\n")
    print(table(["what", "wall s (runs)", "CPU s", "peak RSS", "triples/s", "vs bulk_load"],
                [[f"`build_kb`, {name}" if name != "bulk_load" else "`Store.bulk_load`",
                  f"{median(name, 'seconds'):.2f} ({runs(name)})",
                  f"{median(name, 'cpu'):.1f}", f"{max(r['rss'] for r in rows[name]) / 2**30:.2f} GiB",
                  rate(counts["triples"] / median(name, "seconds")),
                  ratio(bulk, median(name, "seconds"))] for name in rows]))
    stages = sorted({s for name in trees for r in rows[name] for s in r["stages"]})
    print()
    print(table(["stage (manifest seconds)", *trees],
                [[s, *(f"{statistics.median(r['stages'].get(s, 0.0) for r in rows[name]):.2f}" for name in trees)]
                 for s in stages]))
    print()
    print(env.markdown(harness.command_line()))


if __name__ == "__main__":
    main()
