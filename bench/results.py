"""docs/results.md, the current state, written from the run folders of `bench/devsets.py`.

A run folder holds, per dev set, ``SET.json`` (the summary `kqe-rdf eval --json` printed, with the command that
made it) and ``SET.jsonl`` (one record per method and query). The first ``--run`` is the current state and comes
first; each further ``--run`` gets a table of its own below it (an earlier code state, another analyzer ...):

    python bench/devsets.py --kbs $KBS --out $RUN                          # every set, bm25 and 4step-offline
    python bench/results.py --run $RUN --label "issue 39" --out docs/results.md
    python bench/results.py --run $RUN --label new --run $OLD --label old --commit 2f5977c --out docs/results.md

The summaries do not record the commit they were measured at: ``--commit REV`` (after its ``--run``) says it,
else a ``commit`` key in the summaries, else ``git rev-parse HEAD`` of this checkout (said on stderr: right only
when the run was made from it as it is). The date is the time the last summary of the run was written.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from devsets import DATA, SETS, DevSet, compared  # noqa: E402
from harness import without_machine_folders  # noqa: E402  (bench/ is a folder of scripts, not a package)

ROOT = Path(__file__).resolve().parent.parent
#: The summary keys shown per set and method, in this order (STaRK's, then TREC's nDCG@10).
MEASURES = ("Hit@1", "Hit@5", "MRR", "Recall@20", "nDCG@10")


def git_head() -> str:
    done = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    return done.stdout.strip() or "unknown"


def read_run(path: Path) -> list[tuple[DevSet, dict]]:
    """``(set, summary)`` for every set of ``SETS`` the run folder has, in ``SETS``' order."""
    return [(s, json.loads((path / f"{s.name}.json").read_text())) for s in SETS if (path / f"{s.name}.json").exists()]


def commit_of(run: dict, summaries: list[tuple[DevSet, dict]]) -> str:
    if run.get("commit"):
        return run["commit"]
    recorded = {summary["commit"] for _, summary in summaries if summary.get("commit")}
    if len(recorded) == 1:
        return recorded.pop()
    head = git_head()
    print(f"{run['path']}: no commit recorded (pass --commit REV after --run); using this checkout's HEAD {head}",
          file=sys.stderr)
    return head


def by_method(summary: dict) -> dict[str, dict]:
    return {r["method"]: r for r in summary["results"]}


def percent(value: float | None) -> str:
    return "" if value is None else f"{100 * value:.2f}"


def headline(summaries: list[tuple[DevSet, dict]]) -> list[str]:
    """One row per set: its measure for every method, and whether 4step-offline is at least bm25 on it."""
    methods: list[str] = []
    for _, summary in summaries:
        methods += [m for m in by_method(summary) if m not in methods]
    lines = ["| dev set | measure | queries | " + " | ".join(methods) + " | 4step-offline ≥ bm25 |",
             "|---|---|---:|" + "---:|" * len(methods) + "---|"]
    for s, summary in summaries:
        results = by_method(summary)
        score = {m: results[m][s.metric] for m in results}
        ok = ("yes" if score["4step-offline"] >= score["bm25"] else "**no**") \
            if {"bm25", "4step-offline"} <= score.keys() else ""
        lines.append(f"| {s.name} | {s.metric} | {summary['queries']:,} | "
                     + " | ".join(percent(score.get(m)) for m in methods) + f" | {ok} |")
    return lines


def detail(summaries: list[tuple[DevSet, dict]]) -> list[str]:
    """One row per set and method: every measure of ``MEASURES`` the summary has, and the speed."""
    lines = ["| dev set | method | " + " | ".join(MEASURES) + " | queries/s |",
             "|---|---|" + "---:|" * (len(MEASURES) + 1)]
    for s, summary in summaries:
        for method, result in by_method(summary).items():
            cells = [f"**{percent(result.get(m))}**" if m == s.metric else percent(result.get(m)) for m in MEASURES]
            lines.append(f"| {s.name} | {method} | " + " | ".join(cells) + f" | {result.get('queries/s', '')} |")
    return lines


def versus(current: Path, earlier: Path) -> list[str]:
    """Per set and method: the set's measure in an earlier run and in the current one, the difference, and the
    queries won and lost (per query, over the queries both runs have)."""
    lines = ["| dev set | method | measure | this run | current state | current − this run | "
             "queries the current state wins / loses |", "|---|---|---|---:|---:|---:|---:|"]
    means: dict[str, list[tuple[float, float]]] = {}
    for c in compared(earlier, current):
        lines.append(f"| {c.devset.name} | {c.method} | {c.devset.metric} | {c.before:.2f} | {c.after:.2f} | "
                     f"{c.after - c.before:+.2f} | {len(c.won)} / {len(c.lost)} |")
        means.setdefault(c.method, []).append((c.before, c.after))
    for method, pairs in sorted(means.items()):
        old, new = (sum(p[i] for p in pairs) / len(pairs) for i in (0, 1))
        lines.append(f"| mean over {len(pairs)} sets | {method} | | {old:.2f} | {new:.2f} | {new - old:+.2f} | |")
    return lines


def commands(summaries: list[tuple[DevSet, dict]], path: Path, name: str) -> list[str]:
    """The eval command of every set as its summary recorded it, with the run folder written as ``name``."""
    return [without_machine_folders(summary.get("command", "").replace(str(path), name).replace(str(DATA), "$DATA"))
            for _, summary in summaries]


def section(run: dict, name: str, current: dict | None = None) -> list[str]:
    path = run["path"]
    summaries = read_run(path)
    if not summaries:
        sys.exit(f"{path}: no SET.json of bench/devsets.py's sets here")
    written = max((path / f"{s.name}.json").stat().st_mtime for s, _ in summaries)
    day = datetime.fromtimestamp(written, timezone.utc).strftime("%Y-%m-%d")
    missing = [s.name for s in SETS if s.name not in {t.name for t, _ in summaries}]
    title = run.get("label") or path.name
    lines = [f"## {title}: commit `{commit_of(run, summaries)}`, measured {day}", "",
             f"Run folder `{name}`. The measure each set is judged by, in percent:", "", *headline(summaries), ""]
    if missing:
        lines += [f"Not in this run: {', '.join(missing)}.", ""]
    if current is not None:
        lines += [f"### {title} against the current state", "",
                  "Per query, over the queries both runs have (mean of the set's measure, percent):", "",
                  *versus(current["path"], path), ""]
    lines += [f"### {title}: every measure, by set and method", "",
              "Percent (the set's own measure in bold); answers whose gold id is not in the KB count as misses.",
              "", *detail(summaries), "", f"### {title}: the commands", "", "```bash",
              *commands(summaries, path, name), "```", ""]
    return lines


def document(runs: list[dict], argv: list[str]) -> str:
    """The page: how to regenerate it (run folders written as ``$RUN``, ``$RUN1`` ...), then one section per run."""
    names = {run["arg"]: ("$RUN" if len(runs) == 1 else f"$RUN{i}") for i, run in enumerate(runs, 1)}
    shown = " ".join(names.get(a, json.dumps(a) if " " in a else a) for a in argv)
    lines = [
        "# Results", "",
        "The current state: the last full run of every dev set of `bench/devsets.py`, one row per set and method.",
        "Written by `bench/results.py`, not by hand; regenerate it with", "", "```bash",
        f"python bench/results.py {shown}", "```", "",
        "where " + ", ".join(f"`{n}`" for n in names.values()) + (" is" if len(names) == 1 else " are each")
        + " a folder `python bench/devsets.py --kbs $KBS --out $RUN` wrote (`$KBS`: the folder of KBs it builds "
        "with `--build`; `$DATA`: `../shared/data`). Every set is a **development split**. The dated rounds before this page, with what changed and why: "
        "[results-log.md](results-log.md); `ask`, the expansion methods (KAR, LKQE) and the LLM runs are measured "
        "there, in its latest rounds.", "",
    ]
    for i, run in enumerate(runs):
        lines += section(run, names[run["arg"]], runs[0] if i else None)
    return "\n".join(lines).rstrip() + "\n"


def parse(argv: list[str]) -> tuple[list[dict], Path | None]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    runs: list[dict] = []

    class Run(argparse.Action):
        def __call__(self, parser, namespace, value, option_string=None):
            if self.dest == "run":
                runs.append({"arg": value, "path": Path(value).resolve()})
            elif not runs:
                parser.error(f"{option_string} belongs to the --run before it")
            else:
                runs[-1][self.dest] = value

    parser.add_argument("--run", action=Run, required=True, metavar="DIR",
                        help="a run folder of bench/devsets.py --out (the first is the current state)")
    parser.add_argument("--label", action=Run, help="the previous --run's title (default: its folder's name)")
    parser.add_argument("--commit", action=Run, metavar="REV", help="the commit the previous --run measured")
    parser.add_argument("--out", type=Path, help="write here (e.g. docs/results.md) instead of stdout")
    args = parser.parse_args(argv)
    for run in runs:
        if not run["path"].is_dir():
            parser.error(f"{run['path']} is not a folder")
    return runs, args.out


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    runs, out = parse(argv)
    text = document(runs, argv)
    if out:
        out.write_text(text, encoding="utf-8")
        print(f"wrote {out}", file=sys.stderr)
    else:
        sys.stdout.write(text)


if __name__ == "__main__":
    main()
