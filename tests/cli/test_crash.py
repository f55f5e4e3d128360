"""The crash suite: ``kill -9`` at random points of every command that writes a KB.

``kb build``, ``kb embed``, ``tables add`` and ``link`` run as a user runs them (the console
script, in its own process) and are killed with SIGKILL after a random delay drawn from
how long an uninterrupted run takes (seeded, so the points are reproducible). After every
kill the KB must open and answer (SPARQL, BM25, and dense search once it has vectors), hold
either what it held before or the command's complete result (never half of it), and the
next run of the command must succeed. Twenty kills a command run with ``-m crash`` (or
``-m slow``); two a command run by default::

    .venv/bin/python -m pytest -q -m crash tests/cli/test_crash.py -s
"""

from __future__ import annotations

import json
import random
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from kqe_rdf.methods.answering.tables import list_tables, load_tables
from kqe_rdf.kb.build import build_kb
from kqe_rdf.kb.importers.jsonl import JsonlImporter
from kqe_rdf.kb.knowledge_base import KnowledgeBase
from support.live_servers import oxigraph_server
from support.products import generated_products

SCRIPT = str(Path(sys.executable).with_name("kqe-rdf"))
FULL, DEFAULT = 20, 2
pytestmark = [pytest.mark.crash, pytest.mark.slow]


def answers(path: Path) -> KnowledgeBase:
    """The KB at ``path`` opens and answers SPARQL, BM25 and (when it has vectors) dense search."""
    kb = KnowledgeBase.open(path)
    (row,) = kb.query("SELECT (COUNT(?n) AS ?count) WHERE { ?n a kqe:Node }")
    assert int(row["count"].value) > 0
    assert kb.text_index.search("generated product", k=3)
    if kb.has_embeddings:
        assert len(kb.dense.search(kb.encoder.encode(["generated product"]), 3)[0]) == 3
    return kb


def kill_at_random(args: list[str], delay: float) -> str:
    """Run the CLI with ``args``, SIGKILL it after ``delay`` seconds; → "killed" or "finished"."""
    process = subprocess.Popen([SCRIPT, *args], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        process.wait(delay)
    except subprocess.TimeoutExpired:
        process.send_signal(signal.SIGKILL)
        process.wait()
        process.stderr.close()
        return "killed"
    error = process.stderr.read().decode()
    process.stderr.close()
    assert process.returncode == 0, error[-2000:]
    return "finished"


def run_ok(args: list[str]) -> float:
    """Run the CLI to the end; → seconds it took."""
    started = time.perf_counter()
    done = subprocess.run([SCRIPT, *args], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    return time.perf_counter() - started


def crash_loop(rounds: int, seed: int, args: Callable[[int], list[str]], check: Callable[[int, str], None],
               between: Callable[[int, str], None] = lambda n, how: None) -> dict[str, int]:
    """Calibrate on one whole run, then ``rounds`` kills at uniform random points of such a run."""
    rng = random.Random(seed)
    duration = run_ok(args(0))
    check(0, "finished")
    counts = {"killed": 0, "finished": 0}
    for number in range(1, rounds + 1):
        how = kill_at_random(args(number), rng.uniform(0, duration * 1.1))
        counts[how] += 1
        check(number, how)
        between(number, how)
    print(f"{' '.join(args(0)[:2])}: {counts} in {rounds} rounds (a whole run takes {duration:.1f} s)")
    return counts


@pytest.fixture
def products(tmp_path) -> Path:
    """A KB of 300 generated products with an edge chain (not embedded)."""
    path = tmp_path / "kb"
    build_kb(JsonlImporter([write(tmp_path / "300.jsonl", generated_products(300))]), path)
    return path


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def rounds(request) -> int:
    """Twenty under ``-m crash`` or ``-m slow``, two in the default run."""
    chosen = request.config.getoption("markexpr") or ""
    return FULL if ("crash" in chosen or "slow" in chosen) else DEFAULT


# --- kb build ----------------------------------------------------------------------------------


def test_kill_9_during_kb_build(products, tmp_path, request):
    sources = [write(tmp_path / f"v{v}.jsonl", generated_products(2500 + v)) for v in (0, 1)]
    manifests = {"before": KnowledgeBase.open(products).manifest}

    def check(number: int, how: str) -> None:
        kb = answers(products)
        nodes = kb.manifest["counts"]["nodes"]
        if how == "finished":
            assert nodes == 2500 + number % 2
        else:  # the previous KB, or the new one when the kill came after the swap
            assert kb.manifest == manifests["before"] or nodes == 2500 + number % 2
        manifests["before"] = kb.manifest

    crash_loop(rounds(request), 1, lambda n: ["kb", "build", "jsonl", str(sources[n % 2]), "--kb", str(products),
                                                "--force"],
               check)
    run_ok(["kb", "build", "jsonl", str(sources[0]), "--kb", str(products), "--force"])
    assert sorted(p.name for p in products.parent.glob(".kb.*") if not p.name.endswith(".lock")) == []


# --- kb embed ----------------------------------------------------------------------------------


def test_kill_9_during_kb_embed(tmp_path, request):
    count, variant = 80, {"round": 0}
    products = tmp_path / "kb"
    build_kb(JsonlImporter([write(tmp_path / "r0.jsonl", generated_products(count))]), products)

    def check(number: int, how: str) -> None:
        kb = answers(products)
        if kb.has_embeddings:  # a dense index is there only when complete
            assert len(kb.dense.iris) == kb.manifest["counts"]["documents"] == count

    def between(number: int, how: str) -> None:
        if KnowledgeBase.open(products).manifest["embeddings"]:
            # Embedded: new texts, so the next run has all its work to do again.
            variant["round"] += 1
            text = generated_products(count).replace("Generated product", f"Generated product v{variant['round']}")
            build_kb(JsonlImporter([write(tmp_path / f"r{number}.jsonl", text)]), products)

    crash_loop(rounds(request), 2, lambda n: ["kb", "embed", "--kb", str(products)], check, between)
    run_ok(["kb", "embed", "--kb", str(products)])
    assert answers(products).has_embeddings


# --- tables add --------------------------------------------------------------------------------


def table(version: int, rows: int = 40_000) -> str:
    lines = ["name,price,version"] + [f"Product {i % 300},{i},{version}" for i in range(rows)]
    return "\n".join(lines) + "\n"


def test_kill_9_during_tables_add(products, tmp_path, request):
    files = [write(tmp_path / f"prices{v}.csv", table(v)) for v in (0, 1)]

    def check(number: int, how: str) -> None:
        answers(products)
        found = {t["name"]: t for t in list_tables(products)}
        if how == "finished":
            assert found["prices"]["sha256"]
        for loaded in load_tables(products):  # a registered table is whole: every row, one version
            assert len(loaded.rows) == loaded.info["rows"] == 40_000
            assert len({row.values[2] for row in loaded.rows}) == 1

    crash_loop(rounds(request), 3, lambda n: ["tables", "add", str(files[n % 2]), "--kb", str(products),
                                              "--entity-column", "name", "--name", "prices", "--replace"], check)
    run_ok(["tables", "add", str(files[0]), "--kb", str(products), "--entity-column", "name", "--name", "prices",
            "--replace"])
    assert [t["name"] for t in list_tables(products)] == ["prices"]
    assert not [p.name for p in (products / "tables").iterdir() if p.name.startswith(".")]


# --- link --------------------------------------------------------------------------------------


def test_kill_9_during_link(products, tmp_path, request):
    labels = "\n".join(f'<http://example.org/item/{i}> <http://www.w3.org/2000/01/rdf-schema#label> "Product {i}"@en .'
                       for i in range(300))
    folder = tmp_path / "endpoint"
    folder.mkdir()
    with oxigraph_server(folder, labels, "items.nt") as url:
        def links() -> int:
            rows = KnowledgeBase.open(products).query(
                "SELECT (COUNT(*) AS ?n) WHERE { GRAPH ?g { ?s skos:exactMatch ?o } }")
            return int(next(iter(rows))["n"].value)

        def check(number: int, how: str) -> None:
            answers(products)
            assert links() in (0, 300)  # written in one transaction: all or none
            if how == "finished":
                assert links() == 300

        args = ["link", "--kb", str(products), "--endpoint", url, "--rate", "1000", "--restart"]
        crash_loop(rounds(request), 4, lambda n: args, check)
        run_ok(args)
        assert links() == 300
        progress = (products / "links").glob("*.jsonl")
        assert all(json.loads(line) for file in progress for line in file.read_text().splitlines())
