"""What every benchmark script shares: repeated timing, the machine, and its section of docs/benchmarks.md.

Speed is reported as medians of repeated runs and as ratios against a
baseline measured in the same process, because absolute times on a shared
two-core machine say little on their own. Each script owns one section of
``docs/benchmarks.md``, delimited by ``<!-- bench:NAME -->`` markers, and
replaces only that section.

>>> median_time(lambda: None, repeats=3).runs
3
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SHARED = (ROOT / ".." / "shared" / "data").resolve()
DOC = ROOT / "docs" / "benchmarks.md"
DOC_HEADER = """# Benchmarks

Speed of kqe-rdf's building blocks against plain baselines, measured by the
scripts in `bench/` (`python bench/NAME.py`, add `--quick` for a smoke run).
Every number is a **median of repeated runs** (the count is given with each
table) and every comparison is a **ratio against a baseline run in the same
process**, so the ratios, not the absolute times, are what carries over to
another machine. Each script rewrites only its own section below.
"""


@dataclass(frozen=True)
class Timing:
    """Wall-clock seconds of repeated runs of one measurement."""

    seconds: tuple[float, ...]

    @property
    def runs(self) -> int:
        return len(self.seconds)

    @property
    def median(self) -> float:
        return statistics.median(self.seconds)

    def spread(self) -> str:
        """min–max relative to the median, e.g. ``±4%``, to show how noisy the runs were."""
        lo, hi = min(self.seconds), max(self.seconds)
        return f"{(lo / self.median - 1) * 100:+.0f}%/{(hi / self.median - 1) * 100:+.0f}%"


def median_time(run: Callable[[], object], repeats: int, setup: Callable[[], object] | None = None) -> Timing:
    """Time ``run`` ``repeats`` times (``setup`` runs untimed before each)."""
    seconds = []
    for _ in range(repeats):
        if setup is not None:
            setup()
        t0 = time.perf_counter()
        run()
        seconds.append(time.perf_counter() - t0)
    return Timing(tuple(seconds))


def percentile(values: Sequence[float], q: float) -> float:
    """Linear-interpolated percentile (``q`` in 0..100), as numpy's default."""
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    pos = (len(ordered) - 1) * q / 100
    lo = int(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


# ---------------------------------------------------------------- the machine


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def ram_gib() -> float:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) / 1024 / 1024
    except OSError:
        pass
    return float("nan")


def competing_jobs() -> list[str]:
    """Other kqe-rdf processes (e.g. a `kqe-rdf kb embed`) that share the CPU with this run."""
    try:
        out = subprocess.run(["pgrep", "-af", "kqe-rdf"], capture_output=True, text=True, check=False).stdout
    except OSError:
        return []
    mine = {os.getpid(), os.getppid()}
    jobs = []
    for line in out.splitlines():
        pid, _, command = line.partition(" ")
        if int(pid) in mine or _descends_from(int(pid), os.getpid()) or "pgrep" in command or "bench/" in command:
            continue  # (a benchmark's own children, e.g. bench/cold.py's timed commands, compete with nothing)
        # "/…/python3.11 /…/bin/kqe-rdf kb embed --kb x" -> "kqe-rdf kb embed --kb x"
        words = command.split()
        start = next((i for i, w in enumerate(words) if w.endswith("kqe-rdf")), 0)
        jobs.append(" ".join(["kqe-rdf", *words[start + 1 :]])[:100])
    return jobs


def _descends_from(pid: int, ancestor: int) -> bool:
    """Whether process ``pid`` is a child (or a child's child ...) of ``ancestor`` (by /proc; False without it)."""
    seen = 0
    while pid > 1 and seen < 64:
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            return False
        pid = int(stat.rpartition(")")[2].split()[1])  # the field after the state: the parent's pid
        if pid == ancestor:
            return True
        seen += 1
    return False


def versions(packages: Sequence[str]) -> str:
    out = []
    for p in packages:
        try:
            out.append(f"{p} {metadata.version(p)}")
        except metadata.PackageNotFoundError:
            out.append(f"{p} (not installed)")
    return ", ".join(out)


class Environment:
    """The machine and load a run saw, captured at its start and checked again at its end."""

    def __init__(self, packages: Sequence[str], every: float = 10.0) -> None:
        self.started = datetime.now(timezone.utc)
        self.packages = versions(["kqe-rdf", *packages])
        self.jobs = set(competing_jobs())
        self.load_start = os.getloadavg()[0]
        self.loads = [self.load_start]
        self._stop = threading.Event()
        # A daemon thread looks for competing jobs every few seconds, so one that starts and ends mid-run is noted.
        self._watch = threading.Thread(target=self._sample, args=(every,), daemon=True)
        self._watch.start()

    def _sample(self, every: float) -> None:
        while not self._stop.wait(every):
            self.jobs |= set(competing_jobs())
            self.loads.append(os.getloadavg()[0])

    def finish(self) -> None:
        self._stop.set()
        self._watch.join()
        self.jobs |= set(competing_jobs())
        self.load_end = os.getloadavg()[0]
        self.loads.append(self.load_end)

    def markdown(self, command: str) -> str:
        command = without_machine_folders(command)
        lines = [
            f"- Command: `{command}` (from the repository root)",
            f"- Machine: {os.cpu_count()} CPUs (`nproc`: {nproc()}), {cpu_model()}, "
            f"{ram_gib():.1f} GiB RAM; Python {platform.python_version()} on {platform.system()} {platform.release()}",
            f"- Date: {self.started.strftime('%Y-%m-%d %H:%M')} UTC",
            f"- Versions: {self.packages}",
        ]
        if self.jobs:
            listed = "; ".join(f"`{without_machine_folders(j)}`" for j in sorted(self.jobs))
            lines.append(f"- **Not an idle machine**: other kqe-rdf jobs were running during this run ({listed}); "
                         "absolute speeds are lower than on an idle machine and the ratios are noisier.")
        lines.append(f"- Load average (1 min) at start / median during / end: {self.load_start:.2f} / "
                     f"{statistics.median(self.loads):.2f} / {self.load_end:.2f} (this benchmark itself keeps about "
                     f"1-2 of the {os.cpu_count()} CPUs busy)")
        return "\n".join(lines)


def nproc() -> str:
    try:
        return subprocess.run(["nproc"], capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return str(os.cpu_count())


# ---------------------------------------------------------------- output


def table(header: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """A GitHub markdown table, which also reads well in a terminal."""
    cells = [[str(c) for c in header]] + [[str(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]

    def line(row: Sequence[str]) -> str:
        return "| " + " | ".join(c.ljust(w) for c, w in zip(row, widths)) + " |"

    return "\n".join([line(cells[0]), "|" + "|".join("-" * (w + 2) for w in widths) + "|", *map(line, cells[1:])])


def ratio(value: float, baseline: float) -> str:
    return f"{value / baseline:.2f}×" if baseline else "n/a"


def rate(value: float) -> str:
    """A throughput with sensible precision: 1,234,567 / 12,345 / 123.4 / 1.23."""
    if value >= 1000:
        return f"{value:,.0f}"
    if value >= 100:
        return f"{value:.0f}"
    if value >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}"


def ms(seconds: float) -> str:
    value = seconds * 1000
    return f"{value:.2f}" if value < 10 else f"{value:.1f}" if value < 100 else f"{value:.0f}"


def update_doc(name: str, title: str, body: str, path: Path = DOC) -> None:
    """Replace (or append) the ``<!-- bench:NAME -->`` section of docs/benchmarks.md (with no folder of this
    machine in it: :func:`without_machine_folders`)."""
    start, end = f"<!-- bench:{name} -->", f"<!-- /bench:{name} -->"
    section = f"{start}\n## {title}\n\n{without_machine_folders(body.strip())}\n{end}"
    text = path.read_text(encoding="utf-8") if path.is_file() else DOC_HEADER
    pattern = re.compile(re.escape(start) + r".*?" + re.escape(end), re.DOTALL)
    if pattern.search(text):
        text = pattern.sub(lambda _: section, text)
    else:
        text = text.rstrip() + "\n\n" + section + "\n"
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def arguments(description: str, extra: Callable[[argparse.ArgumentParser], None] | None = None,
              repeats: int = 5) -> argparse.Namespace:
    """The options every script takes; ``repeats`` is the default number of runs of a full benchmark."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--quick", action="store_true",
                        help="a small smoke run (seconds); does not touch docs/benchmarks.md unless --doc is given")
    parser.add_argument("--repeats", type=int, default=None,
                        help=f"runs per measurement (default {repeats}; --quick: 2)")
    doc = parser.add_mutually_exclusive_group()
    doc.add_argument("--doc", dest="doc", action="store_true", default=None,
                     help="write the section of docs/benchmarks.md (the default for full runs)")
    doc.add_argument("--no-doc", dest="doc", action="store_false", help="only print the results")
    if extra:
        extra(parser)
    args = parser.parse_args()
    if args.doc is None:
        args.doc = not args.quick
    if args.repeats is None:
        args.repeats = 2 if args.quick else repeats
    if args.repeats < 1:
        parser.error("--repeats must be at least 1")
    return args


#: A folder of this machine in a command (``/tmp/k/bio``): the page names it by its last part (``$TMP/bio``).
_MACHINE_PATH = re.compile(r"(?<![\w.$/~-])/(?:tmp|work|root|home)/[^\s`'\"]*")


def without_machine_folders(text: str) -> str:
    """A command as a reader of docs/benchmarks.md can run it: ``../shared/data`` for the data, paths in the
    repository relative, other folders of this machine as ``$TMP/<last part>``.

    >>> without_machine_folders("python bench/scale.py --reuse /tmp/k28 --kb /work/x/data/kb/bio")
    'python bench/scale.py --reuse $TMP/k28 --kb $TMP/bio'
    """
    text = text.replace(str(SHARED), "../shared/data").replace(str(ROOT) + "/", "")
    return _MACHINE_PATH.sub(lambda m: "$TMP/" + (Path(m.group(0)).name or "…"), text)


def command_line() -> str:
    script = Path(sys.argv[0])
    try:
        script = script.resolve().relative_to(ROOT)
    except ValueError:
        pass
    return " ".join(["python", str(script), *sys.argv[1:]])


def shared(*parts: str) -> Path:
    """A file of ../shared/data, with a clear message when it is missing."""
    path = SHARED.joinpath(*parts)
    if not path.exists():
        raise SystemExit(f"{path} is missing: these benchmarks read the real data in ../shared/data")
    return path
