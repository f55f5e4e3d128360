"""The W3C SPARQL 1.1 suites over HTTP: `kqe-rdf serve` and `oxigraph serve`, the same requests to both.

Runs the query-evaluation, syntax and update tests of w3c/rdf-tests (``sparql/sparql11``; read from
``KQE_W3C_SPARQL11`` or ``../shared/data/w3c-rdf-tests/sparql/sparql11``) through tests/support/w3c_sparql.py
against both servers, each a process on loopback over an empty store (``kqe-rdf serve`` over a one-triple
KB, with an update token, no result cap in the way and the store's default graph alone, as the suites
expect), and writes the outcome counts to docs/benchmarks.md. `kqe-rdf serve` runs as it starts by default
(no allow-list: SPARQL evaluated without network) and, in a second column, with network isolation off
(every query on the verified path). The ``service`` tests (row ``federation``) run against endpoints
served on loopback (tests/support/w3c_sparql.py ``ServiceEndpoints``), for `kqe-rdf serve` with their URLs on its
allow-list. Other tests that mention SERVICE or LOAD call endpoints off this machine: they go to
`kqe-rdf serve` only, which refuses them without a call.

    python bench/w3c.py            # writes docs/benchmarks.md
    python bench/w3c.py --no-doc   # prints the table only
"""

from __future__ import annotations

import functools
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from harness import arguments, command_line, update_doc  # noqa: E402
from server import beside_python, free_port, wait_ready  # noqa: E402
from support.w3c_sparql import GROUPS, SUITE, Endpoint, ServiceEndpoints, run_suite, table  # noqa: E402

TOKEN = "w3c"


def kqe_server(folder: Path, port: int, allow: str = "", isolation: bool = True) -> subprocess.Popen:
    binary = beside_python("kqe-rdf", "kqe-rdf is not installed (pip install -e .)")
    if not (folder / "kb").exists():  # built once; a restart serves the same KB
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "one.ttl").write_text('<urn:kqe:w3c> <http://www.w3.org/2000/01/rdf-schema#label> "W3C suite" .\n')
        subprocess.run([binary, "kb", "build", "rdf", str(folder / "one.ttl"), "--kb", str(folder / "kb"),
                        "--no-embed"], check=True, capture_output=True)
    env = {**os.environ, "KQE_SERVER_UNION_DEFAULT_GRAPH": "false", "KQE_SERVER_RESULT_CACHE_MB": "0",
           "KQE_SERVER_NETWORK_ISOLATION": str(isolation).lower()}
    process = subprocess.Popen([binary, "serve", "--kb", str(folder / "kb"), "--port", str(port), "--update-token",
                                TOKEN, "--result-cap", "1000000", *(["--service-allow", allow] if allow else [])],
                               env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_ready(f"http://127.0.0.1:{port}/sparql", process)
    return process


def oxigraph_server(folder: Path, port: int) -> subprocess.Popen:
    binary = beside_python("oxigraph", "the oxigraph CLI is missing: pip install 'oxigraph>=0.5.13,<0.6'")
    folder.mkdir(parents=True, exist_ok=True)
    process = subprocess.Popen([binary, "serve", "--location", str(folder / "store"), "--bind", f"127.0.0.1:{port}"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    wait_ready(f"http://127.0.0.1:{port}/query", process)
    return process


def run(start, folder: Path, endpoint, groups=tuple(GROUPS), services=None) -> dict:
    """The suite against a server that ``start`` runs; a crash restarts it (the crashing test counts as 5xx)."""
    port = free_port()
    process = [start(folder, port)]

    def restart() -> None:
        process[0].kill()
        process[0].wait()
        process[0] = start(folder, port)

    try:
        return run_suite(endpoint(f"http://127.0.0.1:{port}"), groups, restart=restart, services=services)
    finally:
        process[0].terminate()
        process[0].wait(30)


def main() -> None:
    args = arguments(__doc__.splitlines()[0])
    if not (SUITE / "manifest-sparql11-query.ttl").is_file():
        sys.exit(f"the W3C SPARQL 1.1 suite is not at {SUITE}: set KQE_W3C_SPARQL11 to its sparql/sparql11 folder")
    services = ServiceEndpoints()
    allow = " ".join(services.urls.values())
    local = [g for g in GROUPS if g != "federation"]

    def kqe(url: str) -> Endpoint:
        return Endpoint(url + "/sparql", url + "/update", {"Authorization": f"Bearer {TOKEN}"}, federation_safe=True)

    try:
        with tempfile.TemporaryDirectory() as tmp:
            ours = run(kqe_server, Path(tmp) / "kqe", kqe, local)
            federated = run(functools.partial(kqe_server, allow=allow), Path(tmp) / "kqe", kqe, ["federation"],
                            services)
            verified = run(functools.partial(kqe_server, isolation=False), Path(tmp) / "kqe", kqe, local)
            theirs = run(oxigraph_server, Path(tmp) / "oxigraph", lambda url: Endpoint(url + "/query", url + "/update"),
                         services=services)
    finally:
        services.close()
    ours.update(federated)
    verified.update(federated)
    missed = [name for group in GROUPS for name, outcome in theirs[group].items()
              if outcome == "pass" and ours[group][name] != "pass"]
    missed_verified = [name for group in GROUPS for name, outcome in theirs[group].items()
                       if outcome == "pass" and verified[group][name] != "pass"]
    body = "\n".join([
        f"`{command_line()}`: every test of the groups below, sent over the SPARQL 1.1 Protocol to both servers "
        "(tests/support/w3c_sparql.py says how each is judged). Row `federation`: W3C's `service` folder, its endpoints "
        "served on loopback (for `kqe-rdf serve` on its allow-list, so on the verified path in both of its "
        "columns). Outcome `federation`: the test calls SERVICE or LOAD on a host off this machine, so it is not "
        "sent to `oxigraph serve` (which would call it); `kqe-rdf serve` refuses it (403) or, for LOAD SILENT, "
        "answers as a failed silent load, calling nothing. `kqe-rdf serve (verified path)`: network isolation off "
        "(`KQE_SERVER_NETWORK_ISOLATION=false`), so every query and update is parsed by the verifier and the text "
        "that runs is its plain form (what a server with an allow-list, or on a machine without namespaces, "
        "does).", "",
        table({"kqe-rdf serve": ours, "kqe-rdf serve (verified path)": verified, "oxigraph serve": theirs}), "",
        f"Tests `oxigraph serve` passes that `kqe-rdf serve` does not: {len(missed)}"
        + (f" ({', '.join(missed)})" if missed else "") + "; that it does not on the verified path: "
        + f"{len(missed_verified)}" + (f" ({', '.join(missed_verified)})" if missed_verified else "") + "."])
    print(body)
    if args.doc:
        update_doc("w3c", "W3C SPARQL 1.1 suites over HTTP (`bench/w3c.py`)", body)


if __name__ == "__main__":
    main()
