"""The knowledge service under load: SPARQL and /search over loopback, against `oxigraph serve` on the same store.

Both servers run as their own processes over the same KB store, opened
read-only (``kqe-rdf serve`` and ``oxigraph serve-read-only --union-default-graph``),
and the same Python client drives both: ``--clients`` threads, each with one
keep-alive HTTP connection, send requests back to back. Reported: requests/s
(requests / wall time) and per-request latency p50/p95, medians over
``--repeats`` runs that alternate between the two servers. Then /search with
BM25 and hybrid (every request a different text, so the query-embedding cache
never answers), and a load run of mixed valid and malformed requests that must
give no 5xx to any valid one.

    python bench/server.py                 # data/kb/bio, 8 clients; writes docs/benchmarks.md
    python bench/server.py --quick         # a smoke run
"""

from __future__ import annotations

import random
import shutil
import socket
import statistics
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from harness import ROOT, Environment, arguments, command_line, ms, percentile, rate, ratio, table, update_doc  # noqa: E402

PREFIXES = ("PREFIX rdfs: <http://www.w3.org/2000/01/rdf-schema#>\n"
            "PREFIX bio: <https://w3id.org/kqe/bio#>\n")
SIMPLE = PREFIXES + "SELECT ?d ?name WHERE { ?d a bio:Disease ; rdfs:label ?name } LIMIT 10"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_ready(url: str, process: subprocess.Popen, seconds: float = 180) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"server exited: {process.stderr.read().decode()[-800:] if process.stderr else ''}")
        try:
            if httpx.get(url, params={"query": "ASK {}"}, timeout=5).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.3)
    raise SystemExit(f"{url} did not answer within {seconds} s")


def start_kqe(kb: Path, port: int) -> subprocess.Popen:
    binary = shutil.which("kqe-rdf") or sys.exit("kqe-rdf is not installed (pip install -e .)")
    process = subprocess.Popen([binary, "serve", "--kb", str(kb), "--port", str(port), "--result-cap", "100000"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    wait_ready(f"http://127.0.0.1:{port}/sparql", process)
    return process


def start_oxigraph(kb: Path, port: int) -> subprocess.Popen:
    binary = shutil.which("oxigraph") or sys.exit("the oxigraph CLI is missing: pip install 'oxigraph>=0.5.13,<0.6'")
    process = subprocess.Popen([binary, "serve-read-only", "--location", str(kb / "store"), "--bind",
                                f"127.0.0.1:{port}", "--union-default-graph"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    wait_ready(f"http://127.0.0.1:{port}/query", process)
    return process


class Run:
    """One load: ``clients`` threads × ``per_client`` requests; latencies and statuses."""

    def __init__(self, clients: int, per_client: int, make_request) -> None:
        self.latencies: list[float] = []
        self.statuses: Counter = Counter()
        self.bad: Counter = Counter()  # (kind, status) of answers that were not what the kind expects
        lock = threading.Lock()

        def client(index: int) -> None:
            local, statuses, bad = [], Counter(), Counter()
            with httpx.Client(timeout=120) as http:
                for n in range(per_client):
                    request, expected = make_request(index, n)
                    t0 = time.perf_counter()
                    try:
                        status = http.send(http.build_request(**request)).status_code
                    except httpx.HTTPError as exc:
                        status = type(exc).__name__
                    local.append(time.perf_counter() - t0)
                    statuses[status] += 1
                    if status not in expected:
                        bad[("valid" if 200 in expected else "malformed", status)] += 1
            with lock:
                self.latencies += local
                self.statuses.update(statuses)
                self.bad.update(bad)

        threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
        t0 = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.seconds = time.perf_counter() - t0
        self.requests = clients * per_client

    @property
    def rate(self) -> float:
        return self.requests / self.seconds


def sparql_request(url: str):
    def make(_client: int, _n: int):
        return {"method": "GET", "url": url, "params": {"query": SIMPLE},
                "headers": {"Accept": "application/sparql-results+json"}}, {200}

    return make


def search_request(url: str, method: str, texts: list[str], clients: int, per_client: int):
    def make(client: int, n: int):
        text = texts[(client * per_client + n) % len(texts)]
        return {"method": "GET", "url": url + "/search",
                "params": {"q": text, "method": method, "type": "Disease", "k": 10}}, {200}

    return make


def mixed_request(url: str, texts: list[str], seed: int = 0):
    """60% valid (SPARQL GET/POST, /search bm25), 40% malformed (syntax, params, size, method, route)."""
    big = "SELECT * WHERE { ?s ?p ?o } #" + "x" * 1_100_000

    def make(client: int, n: int):
        pick = random.Random(seed * 1_000_003 + client * 100_003 + n).random()
        text = texts[(client * 7919 + n) % len(texts)]
        if pick < 0.25:
            return {"method": "GET", "url": url + "/sparql", "params": {"query": SIMPLE}}, {200}
        if pick < 0.40:
            return {"method": "POST", "url": url + "/sparql", "content": SIMPLE,
                    "headers": {"Content-Type": "application/sparql-query", "Accept": "text/csv"}}, {200}
        if pick < 0.60:
            return {"method": "GET", "url": url + "/search", "params": {"q": text, "k": 5}}, {200}
        if pick < 0.72:
            return {"method": "GET", "url": url + "/sparql", "params": {"query": "SELEC ?x WHERE { ?x ?p }"}}, {400}
        if pick < 0.80:
            return {"method": "GET", "url": url + "/search", "params": {"q": text, "k": "many"}}, {400}
        if pick < 0.86:
            return {"method": "POST", "url": url + "/sparql", "content": b"\xff\xfe",
                    "headers": {"Content-Type": "application/sparql-query"}}, {400}
        if pick < 0.90:
            return {"method": "POST", "url": url + "/sparql", "content": big,
                    "headers": {"Content-Type": "application/sparql-query"}}, {413}
        if pick < 0.95:
            return {"method": "POST", "url": url + "/sparql", "content": SIMPLE,
                    "headers": {"Content-Type": "text/plain"}}, {415}
        return {"method": "GET", "url": url + "/no-such-route"}, {404}

    return make


def query_texts(kb: Path, count: int) -> list[str]:
    """Distinct phenotype names from the KB, as realistic short search texts."""
    from kqe_rdf.kb import KnowledgeBase

    rows = KnowledgeBase.open(kb).query(PREFIXES + "SELECT DISTINCT ?name WHERE { ?p a bio:Phenotype ; "
                                                   "rdfs:label ?name } ORDER BY ?name LIMIT 20000")
    names = [r["name"].value for r in rows]
    random.Random(0).shuffle(names)
    return names[:count]


def summary(runs: list[Run]) -> tuple[float, float, float]:
    return (statistics.median(r.rate for r in runs),
            statistics.median(percentile(r.latencies, 50) for r in runs),
            statistics.median(percentile(r.latencies, 95) for r in runs))


def main() -> None:
    def extra(parser):
        parser.add_argument("--kb", type=Path, default=ROOT / "data" / "kb" / "bio")
        parser.add_argument("--clients", type=int, default=8)
        parser.add_argument("--requests", type=int, default=None, help="requests per client per run [400]")
        parser.add_argument("--load-clients", type=int, default=16)
        parser.add_argument("--load-requests", type=int, default=None, help="per load client [2000]")

    args = arguments(__doc__.splitlines()[0], extra, repeats=3)
    per = args.requests or (40 if args.quick else 400)
    search_per = max(per // 4, 5)
    load_per = args.load_requests or (100 if args.quick else 2000)
    env = Environment(["pyoxigraph", "oxigraph", "starlette", "uvicorn", "httpx"])
    kqe_port, oxi_port = free_port(), free_port()
    kqe = start_kqe(args.kb, kqe_port)
    oxi = start_oxigraph(args.kb, oxi_port)
    kqe_url, oxi_url = f"http://127.0.0.1:{kqe_port}", f"http://127.0.0.1:{oxi_port}"
    try:
        texts = query_texts(args.kb, args.clients * search_per * args.repeats * 2 + 100)
        for url in (kqe_url + "/sparql", oxi_url + "/query"):  # warm-up
            Run(args.clients, 5, sparql_request(url))
        Run(2, 3, search_request(kqe_url, "hybrid", texts[-50:], 2, 3))
        ours, theirs = [], []
        for _ in range(args.repeats):
            ours.append(Run(args.clients, per, sparql_request(kqe_url + "/sparql")))
            theirs.append(Run(args.clients, per, sparql_request(oxi_url + "/query")))
        search_runs: dict[str, list[Run]] = {"bm25": [], "hybrid": []}
        offset = 0
        for _ in range(args.repeats):
            for method in search_runs:
                chunk = texts[offset:offset + args.clients * search_per]
                offset += len(chunk)
                search_runs[method].append(Run(args.clients, search_per,
                                               search_request(kqe_url, method, chunk, args.clients, search_per)))
        load = Run(args.load_clients, load_per, mixed_request(kqe_url, texts))
        alive = kqe.poll() is None
    finally:
        for process in (kqe, oxi):
            process.terminate()
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                process.kill()
        env.finish()
        env.jobs = {j for j in env.jobs if f"--port {kqe_port}" not in j}  # the server under test itself

    for name, runs in (("failed SPARQL runs (ours)", ours), ("failed SPARQL runs (oxigraph)", theirs)):
        if any(r.statuses.keys() - {200} for r in runs):
            print(f"warning: {name}: {[dict(r.statuses) for r in runs]}")
    o_rate, o_p50, o_p95 = summary(ours)
    t_rate, t_p50, t_p95 = summary(theirs)
    rows = [["`kqe-rdf serve` /sparql", rate(o_rate), ms(o_p50), ms(o_p95), ratio(o_rate, t_rate)],
            ["`oxigraph serve-read-only` /query", rate(t_rate), ms(t_p50), ms(t_p95), "1.00×"]]
    sparql_table = table(["server", "requests/s", "p50 ms", "p95 ms", "requests/s vs oxigraph"], rows)
    search_rows = []
    for method, runs in search_runs.items():
        r, p50, p95 = summary(runs)
        errors = sum(sum(v for k, v in run.statuses.items() if k != 200) for run in runs)
        search_rows.append([f"/search `{method}` (type Disease, k 10)", rate(r), ms(p50), ms(p95),
                            ratio(r, o_rate), errors])
    search_table = table(["request", "requests/s", "p50 ms", "p95 ms", "vs /sparql simple", "non-200"], search_rows)
    # A valid request answered with 5xx, or not answered at all (a connection error), is a failure.
    failed_valid = sum(n for (kind, status), n in load.bad.items()
                       if kind == "valid" and not (isinstance(status, int) and status < 500))
    unexpected = {f"{kind} → {status}": n for (kind, status), n in load.bad.items()}
    load_lines = [
        f"- {args.load_clients} clients × {load_per:,} requests = {load.requests:,} requests in {load.seconds:.1f} s "
        f"({rate(load.rate)} requests/s; p50 {ms(percentile(load.latencies, 50))} ms, "
        f"p95 {ms(percentile(load.latencies, 95))} ms)",
        "- Mix (seeded): 25% SPARQL GET, 15% SPARQL POST (CSV), 20% /search bm25 — valid; 12% SPARQL syntax "
        "errors, 8% bad `k`, 6% non-UTF-8 bodies, 4% 1.1 MB bodies (over the 1 MB limit), 5% wrong content "
        "type, 5% unknown routes — malformed",
        f"- Status counts: {', '.join(f'{k}: {v:,}' for k, v in sorted(load.statuses.items(), key=str))}",
        f"- Answers other than the expected status: {unexpected or 'none'}; **5xx or no answer on valid "
        f"requests: {failed_valid}**; server still running afterwards: {'yes' if alive else 'NO'}",
    ]
    spec = (f"- Data: `{args.kb.relative_to(ROOT) if args.kb.is_relative_to(ROOT) else args.kb}` "
            f"(the biomedical KB, 2.4 M triples), opened read-only by both servers.\n"
            f"- Simple query: `SELECT ?d ?name WHERE {{ ?d a bio:Disease ; rdfs:label ?name }} LIMIT 10` (JSON results).\n"
            f"- Clients: {args.clients} threads of one Python process (httpx, keep-alive), on the same 2 CPUs as the "
            f"servers; {per} requests per client per run, {args.repeats} runs alternating the servers; medians "
            f"of the runs. /search: {search_per} requests per client per run, every request a different HPO "
            f"phenotype name as text.")
    body = "\n".join([env.markdown(command_line()), spec, "", "SPARQL, simple query:", "", sparql_table, "",
                      "Search (REST):", "", search_table, "", "Load run, mixed valid and malformed requests:", "",
                      *load_lines])
    print(body)
    if args.doc:
        update_doc("server", "Knowledge service over HTTP (`bench/server.py`)", body)


if __name__ == "__main__":
    main()
