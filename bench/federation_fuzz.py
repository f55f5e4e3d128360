"""Differential fuzzing of the federation guard at scale: thousands of generated SERVICE/LOAD calls (issue 37).

The cases of tests/support/federation_fuzz.py (escapes, comments, four quote kinds, whitespace and letter case around
SERVICE and LOAD, glued keywords) call a canary listener on loopback. Each goes to an unguarded pyoxigraph
store (the oracle: does Oxigraph call out?), to five guarded servers on loopback (default, isolation off,
allow-listed, update token, update token with an allow-list) and every tenth query to ``kqe-rdf sparql``
(isolated and on the verified path). Reports per target the requests, the canary connections (must be 0) and
the answers, and writes them to docs/benchmarks.md.

    nice -n 5 python bench/federation_fuzz.py              # 5,000 cases, writes docs/benchmarks.md
    python bench/federation_fuzz.py --quick                 # 200 cases, prints only
    python bench/federation_fuzz.py --cases 20000 --seed 7
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from support.federation_fuzz import cases, run_cases  # noqa: E402
from harness import Environment, arguments, command_line, table, update_doc  # noqa: E402
from server import beside_python  # noqa: E402
from support.canary import Canary  # noqa: E402


def main() -> None:
    args = arguments(__doc__.splitlines()[0], lambda p: (
        p.add_argument("--cases", type=int, default=None, help="generated cases (default 5000; --quick: 200)"),
        p.add_argument("--seed", type=int, default=1, help="the generator's seed (tests use 37)")))
    count = args.cases or (200 if args.quick else 5000)
    info = Environment(["pyoxigraph", "rdflib"])
    canary, allowed = Canary(), Canary()
    allowed_url = f"http://127.0.0.1:{allowed.port}/sparql"
    started = time.perf_counter()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            (Path(tmp) / "one.ttl").write_text('<urn:kqe:fuzz> <http://www.w3.org/2000/01/rdf-schema#label> "x" .\n')
            subprocess.run([beside_python("kqe-rdf", "pip install -e ."), "kb", "build", "rdf", str(Path(tmp) / "one.ttl"),
                            "--kb", str(Path(tmp) / "kb"), "--no-embed"], check=True, capture_output=True)
            generated = cases(args.seed, count, f"http://127.0.0.1:{canary.port}", allowed_url)
            report = run_cases(Path(tmp) / "kb", Path(tmp) / "work", generated, canary, allowed_url, cli_every=10)
    finally:
        canary.close()
        allowed.close()
        info.finish()
    seconds = time.perf_counter() - started
    queries = sum(c.kind == "query" for c in generated)
    rows = [[name, f"{report.sent[name]:,}", report.called[name],
             ", ".join(f"{status}: {n:,}" for status, n in sorted(report.statuses[name].items(), key=str))]
            for name in report.sent]
    body = "\n".join([
        info.markdown(command_line()), "",
        f"{count:,} generated cases (seed {args.seed}; {queries:,} queries, {count - queries:,} updates), each "
        f"calling a canary listener on loopback; an unguarded pyoxigraph store called the canary for "
        f"**{report.oxigraph_called:,}** of them (the oracle). Canary connections per guarded target (must be 0), "
        f"in {seconds / 60:.1f} min:", "",
        table(["target", "requests", "canary connections", "answers"], rows)])
    print(body)
    if any(report.called.values()):
        print("A GUARDED TARGET CALLED THE CANARY", file=sys.stderr)
    if args.doc:
        update_doc("federation-fuzz", "Federation guard, differential fuzzing (`bench/federation_fuzz.py`)", body)
    sys.exit(1 if any(report.called.values()) else 0)


if __name__ == "__main__":
    main()
