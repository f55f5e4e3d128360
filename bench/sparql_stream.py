"""`kqe-rdf sparql` as a table into a pipe that wants one row: `... --format table | head -1`, whole pipeline timed.

A 100,000-row result (two VALUES blocks joined, 100 × 1,000, so any KB serves) goes to `head -1` as a table, and,
as the same-run baseline, as TSV (Oxigraph's own writer, streamed since issue 47). Each run is a fresh process
of the console script this checkout installed; rounds alternate the commands. The whole table to /dev/null
shows what laying out every row costs once nothing stops early. Wall time is the median over rounds.

    python bench/sparql_stream.py --kb data/kb/bio
    python bench/sparql_stream.py --kb $KBS/bio --quick
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import harness
from harness import table

QUERY = ("SELECT ?a ?b WHERE { VALUES ?a { " + " ".join(f"<http://example.org/a/{i}>" for i in range(100))
         + " } VALUES ?b { " + " ".join(str(i) for i in range(1000)) + " } }")


def timed(command: list[str], head: bool) -> float:
    """Wall seconds of ``command | head -1`` (or ``command > /dev/null``), until both ends have exited."""
    t0 = time.perf_counter()
    child = subprocess.Popen(command, stdout=subprocess.PIPE if head else subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
    if head:
        child.stdout.readline()
        child.stdout.close()
    child.wait()
    return time.perf_counter() - t0


def main() -> None:
    def extra(parser):
        parser.add_argument("--kb", type=Path, default=harness.ROOT / "data" / "kb" / "bio",
                            help="the KB (default data/kb/bio; the query reads none of it)")

    args = harness.arguments(__doc__.split("\n")[0], extra, repeats=5)
    cli = shutil.which("kqe-rdf", path=str(Path(sys.executable).parent)) or "kqe-rdf"
    with tempfile.TemporaryDirectory() as folder:
        query = Path(folder) / "rows.rq"
        query.write_text(QUERY, encoding="utf-8")
        sparql = [cli, "sparql", str(query), "--kb", str(args.kb), "--format"]
        commands = {"tsv into head -1 (baseline)": ([*sparql, "tsv"], True),
                    "table into head -1": ([*sparql, "table"], True),
                    "table to /dev/null (every row)": ([*sparql, "table"], False)}
        env = harness.Environment(["pyoxigraph"])
        for command, head in commands.values():
            timed(command, head)  # untimed: bytecode and the page cache
        samples: dict[str, list[float]] = {name: [] for name in commands}
        for _round in range(args.repeats):
            for name, (command, head) in commands.items():
                samples[name].append(timed(command, head))
        env.finish()
    base = statistics.median(samples["tsv into head -1 (baseline)"])
    rows = [[name, f"{statistics.median(runs):.2f}", f"{min(runs):.2f}", f"{statistics.median(runs) / base:.2f}×"]
            for name, runs in samples.items()]
    result = table(["kqe-rdf sparql (100,000 rows)", "wall s (median)", "wall s (best)", "vs tsv into head -1"], rows)
    print(result)
    if args.doc:
        body = f"""{env.markdown(harness.command_line())}
- KB: `{harness.without_machine_folders(str(args.kb))}` (opened, not read); 100,000 rows of two columns.
- {args.repeats} rounds, each running the three commands in turn, after one untimed run of each. Target (issue 67):
  the table into `head -1` within 2 s (before it: the whole table was laid out first, 469 s for 55,000 rows).

{result}"""
        harness.update_doc("sparql_stream", "A `sparql` table into `head` (`bench/sparql_stream.py`)", body)
        print(f"\nwrote the sparql_stream section of {harness.DOC}")


if __name__ == "__main__":
    os.environ.setdefault("PYTHONWARNINGS", "ignore")
    main()
