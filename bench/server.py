"""The knowledge service under load: SPARQL and /search over loopback, against `oxigraph serve` on the same store.

Both servers run as their own processes over the same KB store, opened
read-only (``kqe-rdf serve`` and ``oxigraph serve-read-only --union-default-graph``),
and the same Python client drives both: ``--clients`` threads, each with one
keep-alive HTTP connection, send requests back to back. Reported: requests/s
(requests / wall time) and per-request latency p50/p95, medians over
``--repeats`` runs that alternate between the two servers. Then /search with
BM25, hybrid and 4step-offline (every request a different text, so the query-embedding cache
never answers), and a load run of mixed valid and malformed requests that must
give no 5xx to any valid one. Last, **under attack** (a second server with a 10 s
query timeout): simple-query latency from one client with 0 and then with 4
adversarial queries in flight from another address (127.0.0.2: the issue's
``COUNT(*)`` over a cross product, and ``ORDER BY RAND()`` over one, which grows
by ~160 MB/s), the CPU seconds the server spends after each adversarial query's
503, and the peak memory of the server's processes.

    python bench/server.py                 # data/kb/bio, 8 clients; writes docs/benchmarks.md
    python bench/server.py --quick         # a smoke run
"""

from __future__ import annotations

import os
import random
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


def beside_python(name: str, missing: str) -> str:
    """An executable the project installs, next to the interpreter running this (the venv's ``bin/`` need not be
    on PATH: `.venv/bin/python bench/server.py` runs it as README's commands do)."""
    binary = Path(sys.executable).with_name(name)
    return str(binary) if binary.exists() else sys.exit(missing)


def start_kqe(kb: Path, port: int, *options: str, env: dict[str, str] | None = None) -> subprocess.Popen:
    binary = beside_python("kqe-rdf", "kqe-rdf is not installed (pip install -e .)")
    process = subprocess.Popen([binary, "serve", "--kb", str(kb), "--port", str(port), "--result-cap", "100000",
                                *options], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                               env={**os.environ, **(env or {})})
    wait_ready(f"http://127.0.0.1:{port}/sparql", process)
    return process


def start_oxigraph(kb: Path, port: int) -> subprocess.Popen:
    binary = beside_python("oxigraph", "the oxigraph CLI is missing: pip install 'oxigraph>=0.5.13,<0.6'")
    process = subprocess.Popen([binary, "serve-read-only", "--location", str(kb / "store"), "--bind",
                                f"127.0.0.1:{port}", "--union-default-graph"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    wait_ready(f"http://127.0.0.1:{port}/query", process)
    return process


class Run:
    """One load: ``clients`` threads × ``per_client`` requests; latencies and statuses, and with ``server`` (a
    process id) the CPU seconds that server's processes used per request."""

    def __init__(self, clients: int, per_client: int, make_request, server: int | None = None) -> None:
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
        cpu = cpu_by_process(server) if server else {}
        t0 = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.seconds = time.perf_counter() - t0
        self.requests = clients * per_client
        after = cpu_by_process(server) if server else {}
        self.cpu = sum(after[p] - cpu.get(p, 0.0) for p in after) / self.requests

    @property
    def rate(self) -> float:
        return self.requests / self.seconds

    @property
    def failed(self) -> int:
        """Requests not answered as expected (a status other than the request's, or no answer)."""
        return sum(self.bad.values())


def throughput(runs: list[Run]) -> str | None:
    """Why the runs have no throughput to show (None when they have one): a run whose requests all failed measured
    how fast errors come back, not the server."""
    if all(r.failed < r.requests for r in runs):
        return None
    statuses = Counter()
    for r in runs:
        statuses.update(r.statuses)
    return (f"no rate: {sum(r.failed for r in runs):,} of {sum(r.requests for r in runs):,} requests failed "
            f"({', '.join(f'{k}: {v:,}' for k, v in sorted(statuses.items(), key=str))})")


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
    from kqe_rdf.kb.knowledge_base import KnowledgeBase

    rows = KnowledgeBase.open(kb).query(PREFIXES + "SELECT DISTINCT ?name WHERE { ?p a bio:Phenotype ; "
                                                   "rdfs:label ?name } ORDER BY ?name LIMIT 20000")
    names = [r["name"].value for r in rows]
    random.Random(0).shuffle(names)
    return names[:count]


# ---------------------------------------------------------------- under attack

ADVERSARIAL = {
    "CPU: COUNT(*) over a cross product": "SELECT (COUNT(*) AS ?n) { ?a ?b ?c . ?d ?e ?f }",
    "memory: ORDER BY RAND() over a cross product": PREFIXES + "SELECT * { ?a rdfs:label ?b . ?c rdfs:label ?d } "
                                                               "ORDER BY RAND() LIMIT 1",
}
ATTACK_TIMEOUT = 10.0
#: The /search methods timed beside SPARQL: BM25, hybrid and the offline structural method.
SEARCH_METHODS = ("bm25", "hybrid", "4step-offline")
WORKERS = 4  # `server_query_slots`, the default


def process_tree(pid: int) -> list[int]:
    """A process and its children (the server and its query workers)."""
    out = [pid]
    try:
        for task in Path(f"/proc/{pid}/task").iterdir():
            out += [int(c) for c in (task / "children").read_text().split()]
    except OSError:
        pass
    return out


def cpu_by_process(pid: int) -> dict[int, float]:
    """CPU seconds (user + system) used so far by each live process of the tree."""
    out = {}
    for p in process_tree(pid):
        try:
            fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
            out[p] = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        except (OSError, IndexError):
            pass
    return out


def wait_settled(pid: int, processes: int, seconds: float = 120) -> None:
    """Until the server has all its processes (main + query workers) and they are idle: workers start in the
    background, and one still opening the KB would take CPU from the first timed run."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        before = cpu_by_process(pid)
        time.sleep(0.5)
        after = cpu_by_process(pid)
        if len(after) >= processes and sum(after[p] - before.get(p, 0.0) for p in after) < 0.05:
            return
    print(f"warning: the server {pid} did not settle within {seconds:g} s", file=sys.stderr)


def tree_rss(pid: int) -> int:
    """Resident bytes of the live processes of the tree."""
    total = 0
    for p in process_tree(pid):
        try:
            total += int(Path(f"/proc/{p}/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE")
        except (OSError, IndexError):
            pass
    return total


class PeakMemory:
    """Samples the server tree's resident memory every 50 ms until stopped."""

    def __init__(self, pid: int) -> None:
        self.pid, self.peak, self._stop = pid, 0, threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(0.05):
            self.peak = max(self.peak, tree_rss(self.pid))

    def stop(self) -> int:
        self._stop.set()
        self._thread.join()
        return self.peak


def simple_latencies(url: str, count: int) -> list[float]:
    out = []
    with httpx.Client(timeout=120) as http:
        for _ in range(count):
            t0 = time.perf_counter()
            response = http.get(url + "/sparql", params={"query": SIMPLE})
            out.append(time.perf_counter() - t0)
            if response.status_code != 200:
                out[-1] = float("inf")  # an error counts as never answered
    return out


def under_attack(kb: Path, count: int) -> tuple[list[list[str]], list[list[str]], int, int]:
    """Latency rows (0 and 4 adversaries), CPU-after-deadline rows, peak and idle memory of the server tree."""
    port = free_port()
    # The result cache is off: every simple query needs a worker, as a query never seen before would.
    server = start_kqe(kb, port, "--query-timeout", str(ATTACK_TIMEOUT), env={"KQE_SERVER_RESULT_CACHE_MB": "0"})
    url = f"http://127.0.0.1:{port}"
    try:
        simple_latencies(url, 20)  # warm-up
        wait_settled(server.pid, 1 + WORKERS)
        idle_memory = tree_rss(server.pid)
        peak = PeakMemory(server.pid)
        calm = simple_latencies(url, count)
        statuses: Counter = Counter()
        stop = threading.Event()

        def adversary(query: str) -> None:
            transport = httpx.HTTPTransport(local_address="127.0.0.2")
            with httpx.Client(transport=transport, timeout=120) as http:
                while not stop.is_set():
                    statuses[http.get(url + "/sparql", params={"query": query}).status_code] += 1

        queries = list(ADVERSARIAL.values()) * 2
        threads = [threading.Thread(target=adversary, args=(q,)) for q in queries]
        for t in threads:
            t.start()
        time.sleep(1.0)
        attacked = simple_latencies(url, count)
        stop.set()
        for t in threads:
            t.join()
        cpu_rows = []
        for name, query in ADVERSARIAL.items():  # one at a time: CPU the server spends after the 503
            t0 = time.perf_counter()
            response = httpx.get(url + "/sparql", params={"query": query}, timeout=120)
            answered = time.perf_counter() - t0
            before = cpu_by_process(server.pid)
            time.sleep(3.0)
            after = cpu_by_process(server.pid)
            # The killed worker is gone; what is left is the server, the idle workers and the replacement's start.
            used = sum(after[p] - before.get(p, 0.0) for p in after)
            cpu_rows.append([name, response.status_code, f"{answered:.1f}", f"{used:.2f}"])
        peak_memory = peak.stop()
    finally:
        server.terminate()
        try:
            server.wait(30)
        except subprocess.TimeoutExpired:
            server.kill()
    latency_rows = [["none", ms(percentile(calm, 50)), ms(percentile(calm, 95)),
                     sum(x == float("inf") for x in calm)],
                    ["4 in flight from 127.0.0.2 (2 of each, re-sent at once when answered)",
                     ms(percentile(attacked, 50)), ms(percentile(attacked, 95)),
                     sum(x == float("inf") for x in attacked)]]
    latency_rows[1].append(", ".join(f"{k}: {v}" for k, v in sorted(statuses.items())))
    latency_rows[0].append("")
    return latency_rows, cpu_rows, peak_memory, idle_memory


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
    kqe_port, uncached_port, oxi_port = free_port(), free_port(), free_port()
    kqe = start_kqe(args.kb, kqe_port)
    # The same server with its result cache off: every request is evaluated by a worker.
    uncached = start_kqe(args.kb, uncached_port, env={"KQE_SERVER_RESULT_CACHE_MB": "0"})
    oxi = start_oxigraph(args.kb, oxi_port)
    kqe_url, oxi_url = f"http://127.0.0.1:{kqe_port}", f"http://127.0.0.1:{oxi_port}"
    uncached_url = f"http://127.0.0.1:{uncached_port}"
    try:
        protection = httpx.get(uncached_url + "/health", timeout=30).json().get("protection")
        texts = query_texts(args.kb, args.clients * search_per * args.repeats * len(SEARCH_METHODS) + 100)
        for url in (kqe_url + "/sparql", uncached_url + "/sparql", oxi_url + "/query"):  # warm-up
            Run(args.clients, 5, sparql_request(url))
        for process in (kqe, uncached):
            wait_settled(process.pid, 1 + WORKERS)
        for method in SEARCH_METHODS[1:]:  # the encoder, the dense index and the reader opened before timing
            Run(2, 3, search_request(kqe_url, method, texts[-50:], 2, 3))
        ours, evaluated, theirs = [], [], []
        for _ in range(args.repeats):
            ours.append(Run(args.clients, per, sparql_request(kqe_url + "/sparql"), kqe.pid))
            evaluated.append(Run(args.clients, per, sparql_request(uncached_url + "/sparql"), uncached.pid))
            theirs.append(Run(args.clients, per, sparql_request(oxi_url + "/query"), oxi.pid))
        uncached.terminate()
        uncached.wait(30)
        search_runs: dict[str, list[Run]] = {method: [] for method in SEARCH_METHODS}
        offset = 0
        for _ in range(args.repeats):
            for method in search_runs:
                chunk = texts[offset:offset + args.clients * search_per]
                offset += len(chunk)
                search_runs[method].append(Run(args.clients, search_per,
                                               search_request(kqe_url, method, chunk, args.clients, search_per)))
        load = Run(args.load_clients, load_per, mixed_request(kqe_url, texts))
        alive = kqe.poll() is None
        for process in (kqe, oxi):  # the attack runs on its own server, alone
            process.terminate()
            process.wait(30)
        attack_latency, attack_cpu, peak_memory, idle_memory = under_attack(args.kb, 20 if args.quick else 100)
    finally:
        for process in (kqe, uncached, oxi):
            process.terminate()
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                process.kill()
        env.finish()
        env.jobs = {j for j in env.jobs if "--result-cap 100000" not in j}  # the servers under test themselves

    for name, runs in (("failed SPARQL runs (ours)", ours), ("failed SPARQL runs (ours, no cache)", evaluated),
                       ("failed SPARQL runs (oxigraph)", theirs)):
        if any(r.statuses.keys() - {200} for r in runs):
            print(f"warning: {name}: {[dict(r.statuses) for r in runs]}")
    def cpu(runs: list[Run]) -> str:
        return f"{statistics.median(r.cpu for r in runs) * 1000:.2f}"

    def row(name: str, runs: list[Run], baseline: list[Run] | None) -> list[str]:
        """A table row; runs whose requests all failed show why instead of a rate (and no ratio)."""
        value, p50, p95 = summary(runs)
        failures = sum(r.failed for r in runs)
        no_rate = throughput(runs) or (throughput(baseline) if baseline else None)
        if throughput(runs):
            return [name, throughput(runs), "", "", "", "n/a", "", f"{failures:,}"]
        return [name, rate(value), ms(p50), ms(p95), cpu(runs),
                "n/a" if no_rate else ratio(value, summary(baseline)[0]) if baseline else "1.00×",
                "" if no_rate or not baseline else " ".join(f"{a.rate / b.rate:.2f}" for a, b in zip(runs, baseline)),
                f"{failures:,}"]

    rows = [row("`kqe-rdf serve` /sparql", ours, theirs),
            row("`kqe-rdf serve` /sparql, result cache off (every request evaluated by a worker)", evaluated, theirs),
            row("`oxigraph serve-read-only` /query", theirs, None)]
    sparql_table = table(["server", "requests/s", "p50 ms", "p95 ms", "server CPU ms/request",
                          "requests/s vs oxigraph", "ratio in each run", "failed requests"], rows)
    o_rate = None if throughput(ours) else summary(ours)[0]
    search_rows = []
    for method, runs in search_runs.items():
        r, p50, p95 = summary(runs)
        errors = sum(sum(v for k, v in run.statuses.items() if k != 200) for run in runs)
        search_rows.append([f"/search `{method}` (type Disease, k 10)", throughput(runs) or rate(r), ms(p50), ms(p95),
                            "n/a" if throughput(runs) or o_rate is None else ratio(r, o_rate), errors])
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
            f"- Simple query: `SELECT ?d ?name WHERE {{ ?d a bio:Disease ; rdfs:label ?name }} LIMIT 10` (JSON results), "
            "the same text every time: `kqe-rdf serve` answers all but the first from its result cache "
            "(`server_result_cache_mb`); the row with the cache off shows the cost of evaluating each request in a "
            "worker process.\n"
            f"- SERVICE and LOAD protection of both `kqe-rdf serve` (from /health): {protection}.\n"
            f"- Clients: {args.clients} threads of one Python process (httpx, keep-alive), on the same 2 CPUs as the "
            f"servers; {per} requests per client per run, {args.repeats} runs alternating the servers; medians "
            f"of the runs, and the ratio of each run to the oxigraph run after it. Server CPU: user + system time of "
            f"the server's processes (main and workers) per request. /search: {search_per} requests per client per "
            f"run, every request a different HPO phenotype name as text (4step-offline reads it as a phenotype and "
            f"ranks diseases by hierarchy matching).")
    attack_lines = [
        f"A second `kqe-rdf serve` with `--query-timeout {ATTACK_TIMEOUT:g}` and its result cache off (default "
        f"{WORKERS} workers, one client at most {WORKERS - 1} of them, `server_client_workers`' default: all but "
        "one). One client sends the simple query back to back; the adversary, "
        "from another loopback address, keeps 4 adversarial queries in flight:", "",
        table(["adversarial queries", "simple query p50 ms", "p95 ms", "failed", "adversaries' answers"],
              attack_latency), "",
        "CPU the server spends after an adversarial query's answer (each alone; its worker is killed at the "
        "deadline):", "",
        table(["query", "status", "answered after s", "server CPU s in the 3 s after the answer"], attack_cpu), "",
        "(That CPU is the replacement worker starting, about 0.3 s, and the idle server; before issue 15 a "
        "timed-out query ran on in its thread for as long as it needed: 35 s and more of a CPU each, or until "
        "memory ran out.)", "",
        f"- Peak resident memory of the server's processes (main + workers) during the attack: "
        f"{peak_memory / 2**20:,.0f} MiB (idle: {idle_memory / 2**20:,.0f} MiB; each worker may allocate at most "
        "`server_worker_memory_mb` = 2,048 MiB).",
    ]
    body = "\n".join([env.markdown(command_line()), spec, "", "SPARQL, simple query:", "", sparql_table, "",
                      "Search (REST):", "", search_table, "", "Load run, mixed valid and malformed requests:", "",
                      *load_lines, "", "Under attack:", "", *attack_lines])
    print(body)
    if args.doc:
        update_doc("server", "Knowledge service over HTTP (`bench/server.py`)", body)


if __name__ == "__main__":
    main()
