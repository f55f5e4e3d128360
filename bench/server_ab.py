"""Two versions of `kqe-rdf serve` (result cache off) and `oxigraph serve` in alternating rounds: what a change costs.

On a shared machine the load moves between runs, so a change is compared with the code before it by running both
at once, over the same KB, round after round, beside `oxigraph serve` (the servers of bench/server.py, the same
clients). The baseline is a copy of an older tree (``git archive COMMIT | tar -x -C DIR``), imported through
``PYTHONPATH``; the other is this checkout.

    git archive 2c06ba1 | tar -x -C /tmp/base
    nice -n 5 python bench/server_ab.py --kb /tmp/bio --baseline /tmp/base --rounds 3
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from harness import ROOT, arguments, table  # noqa: E402
from server import WORKERS, Run, free_port, sparql_request, start_kqe, start_oxigraph, wait_settled  # noqa: E402


def main() -> None:
    def extra(parser):
        parser.add_argument("--kb", type=Path, default=ROOT / "data" / "kb" / "bio")
        parser.add_argument("--baseline", type=Path, required=True, help="a copy of the older tree")
        parser.add_argument("--rounds", type=int, default=3)
        parser.add_argument("--clients", type=int, default=8)
        parser.add_argument("--requests", type=int, default=200, help="per client per round")

    args = arguments(__doc__.splitlines()[0], extra)
    cache_off = {"KQE_SERVER_RESULT_CACHE_MB": "0"}
    ports = {name: free_port() for name in ("baseline", "this tree", "oxigraph")}
    servers = {"baseline": start_kqe(args.kb, ports["baseline"], env={**cache_off, "PYTHONPATH": str(args.baseline)}),
               "this tree": start_kqe(args.kb, ports["this tree"], env=cache_off),
               "oxigraph": start_oxigraph(args.kb, ports["oxigraph"])}
    urls = {name: f"http://127.0.0.1:{port}/" + ("query" if name == "oxigraph" else "sparql")
            for name, port in ports.items()}
    try:
        for name in ("baseline", "this tree"):
            said = httpx.get(urls[name].replace("/sparql", "/health"), timeout=30).json().get("protection")
            print(f"{name}: SERVICE/LOAD protection: {said or 'not reported (before issue 37)'}")
        for url in urls.values():
            Run(args.clients, 5, sparql_request(url))
        for name in ("baseline", "this tree"):
            wait_settled(servers[name].pid, 1 + WORKERS)
        rates: dict[str, list[float]] = {name: [] for name in urls}
        cpu: dict[str, list[float]] = {name: [] for name in urls}
        for _ in range(args.rounds):
            for name, url in urls.items():
                run = Run(args.clients, args.requests, sparql_request(url), servers[name].pid)
                if run.failed:
                    sys.exit(f"{name}: {run.failed} of {run.requests} requests failed: {dict(run.statuses)}")
                rates[name].append(run.rate)
                cpu[name].append(run.cpu * 1000)
    finally:
        for process in servers.values():
            process.terminate()
            process.wait(30)
    rows = [[name, " ".join(f"{r:,.0f}" for r in rates[name]), " ".join(f"{c:.2f}" for c in cpu[name]),
             " ".join(f"{a / b:.2f}" for a, b in zip(rates[name], rates["oxigraph"])),
             f"{statistics.median(a / b for a, b in zip(rates[name], rates['oxigraph'])):.2f}×"] for name in urls]
    print(table(["server (cache off)", "requests/s by round", "server CPU ms/request", "vs oxigraph by round",
                 "median vs oxigraph"], rows))


if __name__ == "__main__":
    main()
