"""A first request in a new process: `kqe-rdf search ... -m 4step-offline` as a user types it, whole process timed.

Each run is a fresh `kqe-rdf` process (the console script this checkout installed): its imports, opening the KB,
the reader's tables (WordNet, relation words, the encoder's session) and one request, then exit. The baseline in
the same run is the same command with `-m bm25`, and `python -c pass` is the interpreter's own start. Rounds
alternate the commands, so load changes reach them alike; one untimed run of each fills the per-machine cache
(`~/.cache/kqe-rdf`) and writes the modules' bytecode first, as any earlier use on the machine (or a pip
install) would have. Wall time is the median over rounds; CPU time is user + system of the child (rusage).

The last row is the first request on a freshly built KB: a request that links a phrase by meaning ("tall man"),
with a cache folder of its own emptied before each run (``KQE_CACHE_DIR``): nothing any earlier request on the
machine made (the reader's WordNet tables, the encoder's optimized graph, the names of the 19,034 phenotypes, which
a first request encoded before the build did: issue 67).

    python bench/cold.py                    # the bio KB, 9 rounds
    python bench/cold.py --kb $KBS/bio --quick
"""

from __future__ import annotations

import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import harness
from harness import table

REQUEST = "seizures and microcephaly"
#: The first request's: "tall man" is linked by meaning (Tall stature), with the names of the class's terms.
FIRST = "tall man, seizures and microcephaly"
FIRST_ROW = "first request on a freshly built KB (cache emptied)"


#: The children's environment: as an installed kqe-rdf runs, with its modules' bytecode written (pip compiles a
#: wheel's modules when it installs them). A shell with PYTHONDONTWRITEBYTECODE set would otherwise time the
#: compilation of every module of the package in every process.
ENVIRONMENT = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def timed(command: list[str], cache: Path | None = None) -> tuple[float, float]:
    """Wall and CPU seconds of one whole process (``cache``: its cache folder, emptied first, untimed)."""
    env = ENVIRONMENT
    if cache is not None:
        shutil.rmtree(cache, ignore_errors=True)
        env = {**ENVIRONMENT, "KQE_CACHE_DIR": str(cache)}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    def extra(parser):
        parser.add_argument("--kb", type=Path, default=harness.ROOT / "data" / "kb" / "bio",
                            help="the KB (default data/kb/bio)")

    args = harness.arguments(__doc__.split("\n")[0], extra, repeats=9)
    cli = shutil.which("kqe-rdf", path=str(Path(sys.executable).parent)) or "kqe-rdf"
    search = [cli, "search", REQUEST, "--kb", str(args.kb), "-k", "10"]
    commands = {"python -c pass (interpreter start)": [sys.executable, "-c", "pass"],
                "kqe-rdf search -m bm25 (baseline)": [*search, "-m", "bm25"],
                "kqe-rdf search -m 4step-offline": [*search, "-m", "4step-offline"],
                FIRST_ROW: [cli, "search", FIRST, "--kb", str(args.kb), "-k", "10", "-m", "4step-offline"]}
    env = harness.Environment(["pyoxigraph", "tantivy", "onnxruntime"])
    caches = {FIRST_ROW: Path(tempfile.mkdtemp(prefix="kqe-cold-"))}
    try:
        for name, command in commands.items():
            if name not in caches:
                timed(command)  # untimed: the per-machine cache, as after any earlier use
        samples: dict[str, list[tuple[float, float]]] = {name: [] for name in commands}
        for _round in range(args.repeats):
            for name, command in commands.items():
                samples[name].append(timed(command, caches.get(name)))
    finally:
        for folder in caches.values():
            shutil.rmtree(folder, ignore_errors=True)
    env.finish()
    base = statistics.median(w for w, _c in samples["kqe-rdf search -m bm25 (baseline)"])
    rows = []
    for name, runs in samples.items():
        wall, cpu = statistics.median(w for w, _c in runs), statistics.median(c for _w, c in runs)
        rows.append([name, f"{wall:.2f}", f"{min(w for w, _c in runs):.2f}", f"{cpu:.2f}", f"{wall / base:.2f}×"])
    result = table(["whole process", "wall s (median)", "wall s (best)", "CPU s (median)", "wall vs bm25"], rows)
    print(result)
    if args.doc:
        body = f"""{env.markdown(harness.command_line())}
- KB: `{harness.without_machine_folders(str(args.kb))}`; request `{REQUEST}` (k 10), printed as a table.
- {args.repeats} rounds, each running the commands in turn, after one untimed run of each (the
  per-machine cache of the reader's tables in `~/.cache/kqe-rdf` and the modules' bytecode, as after any
  earlier use or a pip install).
- Last row: `kqe-rdf search "{FIRST}" -m 4step-offline` (it links "tall man" by meaning) with a cache folder
  of its own (`KQE_CACHE_DIR`) emptied before each run: a first request on a freshly built KB.

{result}"""
        harness.update_doc("cold", "A first request in a new process (`bench/cold.py`)", body)
        print(f"\nwrote the cold section of {harness.DOC}")


if __name__ == "__main__":
    os.environ.setdefault("PYTHONWARNINGS", "ignore")
    main()
