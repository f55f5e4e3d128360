"""The Python API as docs/usage.md shows it: its snippets run as written on a bio KB without vectors, `open()`
finds the KB as the CLI does, ranks count from 1 everywhere, hits carry names, batches become DataFrames.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

import kqe_rdf
from support.fixtures_kb import bio_kb  # noqa: F401 - fixture
from kqe_rdf.cli import cli
from kqe_rdf.core.errors import KBNotFound, KqeError
from kqe_rdf.kb.knowledge_base import KnowledgeBase
from kqe_rdf.methods.retrieval import BM25, RM3, Batch, Query
from kqe_rdf.service.sparql_search import SearchFunctions, execute, prepare
from support.live_servers import oxigraph_endpoint  # noqa: F401 - fixture
from support.paths import ROOT

USAGE = ROOT / "docs" / "usage.md"


def python_snippets() -> list[str]:
    """The ```python blocks of docs/usage.md's "Python API" section, in order."""
    text = USAGE.read_text(encoding="utf-8")
    section = text[text.index("\n## Python API\n"):]
    section = section[: section.index("\n## ", 1)]
    return re.findall(r"```python\n(.*?)```", section, re.S)


@pytest.fixture
def kb_without_vectors(bio_kb, tmp_path):  # noqa: F811
    """A copy of the bio KB with no dense index, as `make demo` leaves the demo KB."""
    path = tmp_path / "kb"
    shutil.copytree(bio_kb.path, path, ignore=shutil.ignore_patterns("embeddings"))
    assert not KnowledgeBase.open(path).has_embeddings
    return path


def run_python(code: str, kb_path: Path, cwd: Path) -> str:
    env = {**os.environ, "KQE_KB": str(kb_path)}
    done = subprocess.run([sys.executable, "-c", code], cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def test_usage_snippets_run_as_written_on_a_kb_without_vectors(kb_without_vectors, tmp_path, oxigraph_endpoint):  # noqa: F811
    search, batches, expansion, linking = python_snippets()
    lines = run_python(search, kb_without_vectors, tmp_path).splitlines()
    assert lines and lines[0].startswith("1 ") and [line.split()[0] for line in lines] == [
        str(n) for n in range(1, len(lines) + 1)]
    assert run_python(batches, kb_without_vectors, tmp_path).startswith("['")
    # The link example, against a local Wikidata-shaped endpoint instead of Wikidata.
    local = linking.replace("https://query.wikidata.org/sparql", oxigraph_endpoint)
    said = run_python(expansion + local, kb_without_vectors, tmp_path).splitlines()
    assert said[0].startswith("child with seizures and microcephaly") and said[1].startswith("2 [")


def test_the_python_link_snippet_resumes_what_the_usage_page_s_command_began(kb_without_vectors, tmp_path,
                                                                             oxigraph_endpoint):  # noqa: F811
    """docs/usage.md's `kqe-rdf link` recipe and its Python snippet link with the same options, so the snippet resumes the
    command's saved progress instead of asking for --restart."""
    text = " ".join(USAGE.read_text(encoding="utf-8").split())
    command = re.search(r"`kqe-rdf link (--endpoint https://query\.wikidata\.org/sparql [^`]*)`", text).group(1)
    args = command.replace("https://query.wikidata.org/sparql", oxigraph_endpoint).split()
    began = CliRunner().invoke(cli, ["link", *args, "--kb", str(kb_without_vectors), "--limit", "1", "--no-write"])
    assert began.exit_code == 0, began.output

    *_, expansion, linking = python_snippets()  # (the expansion snippet opens the KB the link snippet uses)
    said = run_python(expansion + linking.replace("https://query.wikidata.org/sparql", oxigraph_endpoint),
                      kb_without_vectors, tmp_path).splitlines()
    assert said[1].startswith("2 [")  # the two diseases the sample endpoint knows, one looked up by the command


def test_open_without_a_path_finds_the_kb_as_the_cli_does(bio_kb, tmp_path, monkeypatch):  # noqa: F811
    monkeypatch.setenv("KQE_KB", str(bio_kb.path))
    assert KnowledgeBase.open().path == bio_kb.path
    monkeypatch.delenv("KQE_KB")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(KBNotFound, match="data/kb/bio"):
        KnowledgeBase.open()


def test_ranks_count_from_one_as_the_cli_shows_them(bio_kb):  # noqa: F811
    hits = BM25(bio_kb, 10).search("forehead")
    assert [h.rank for h in hits] == list(range(1, len(hits) + 1))
    shown = CliRunner().invoke(cli, ["search", "forehead", "--kb", str(bio_kb.path), "--json"])
    assert [(r["rank"], r["iri"]) for r in json.loads(shown.stdout)["results"]] == [(h.rank, h.iri) for h in hits]
    query = ('SELECT ?n ?r WHERE { SERVICE <urn:kqe:search> { ?n kqe:query "forehead" ; kqe:k 10 ; kqe:rank ?r } } '
             'ORDER BY ?r')
    rows = execute(bio_kb, prepare(bio_kb, query, bio_kb.settings), SearchFunctions(bio_kb))
    assert [(int(r["r"].value), r["n"].value) for r in rows] == [(h.rank, h.iri) for h in hits]
    # Reciprocal rank fusion adds 1/(60 + rank) for each ranking a node is in.
    fused = (BM25(bio_kb, 10) + BM25(bio_kb, 10)).search("forehead")
    assert fused[0].score == pytest.approx(2 / (60 + 1)) and fused[0].rank == 1


def test_hits_carry_the_names_of_their_nodes(bio_kb):  # noqa: F811
    hits = (BM25(bio_kb, 10, types=["Disease"]) % 2).search("forehead")
    assert [h.name for h in hits] == [bio_kb.document(h.iri).name for h in hits]
    assert all(h.name for h in hits) and "Frontal bossing syndrome" in [h.name for h in hits]


def test_a_batch_becomes_a_dataframe_of_pyterriers_shape(bio_kb):  # noqa: F811
    batch = RM3(bio_kb, 3).named(RM3(bio_kb, 3).transform(Batch([Query("a", "forehead"), Query("b", "seizure")])))
    frame = batch.to_dataframe()
    assert list(frame.columns) == ["qid", "query", "iri", "name", "score", "rank"]
    assert list(frame["qid"]) == ["a"] * len(batch.ranked("a")) + ["b"] * len(batch.ranked("b"))
    assert list(frame[frame.qid == "b"]["rank"]) == list(range(1, len(batch.ranked("b")) + 1))
    assert all(frame["name"])


def test_without_pandas_to_dataframe_says_how_to_get_it():
    code = ("import sys; sys.modules['pandas'] = None\n"  # what an environment without pandas does on import
            "from kqe_rdf.methods.retrieval import Batch\nBatch([]).to_dataframe()")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 1 and "to_dataframe() needs pandas" in done.stderr and "pip install" in done.stderr


def test_expand_and_link_are_in_the_package_api(bio_kb):  # noqa: F811
    assert "expand" in kqe_rdf.__all__ and "link" in kqe_rdf.__all__
    expansion = kqe_rdf.expand(bio_kb, "high forehead", "prf")
    assert expansion.method == "prf" and expansion.expanded.startswith("high forehead")
    with pytest.raises(KqeError, match="no expansion method"):
        kqe_rdf.expand(bio_kb, "high forehead", "magic")
    with pytest.raises(AttributeError):
        kqe_rdf.no_such_name  # noqa: B018


def test_query_holds_service_calls_to_the_allow_list_unless_opened(bio_kb):  # noqa: F811
    """Issue 49: ``KnowledgeBase.query`` called any SERVICE endpoint. Now it refuses one off the allow-list (the
    settings' server_service_allow, empty by default) before connecting, hidden by the escape trick or not, and
    ``allow_service=`` opens it to named endpoints."""

    from support.canary import Canary

    from kqe_rdf.kb.sparql_guard import ServiceNotAllowed

    canary = Canary()
    try:
        endpoint = f"http://127.0.0.1:{canary.port}/sparql"
        plain = f"SELECT * {{ SERVICE <{endpoint}> {{ ?s ?p ?o }} }}"
        trick = ('SELECT * { BIND("p\\u0022q" AS ?z) VALUES ?v { <urn:x\\u0041#> } '
                 f'SERVICE <{endpoint}> {{ ?s ?p ?o }} }} #"')
        for query in (plain, trick):
            with pytest.raises(ServiceNotAllowed, match="not on this server's allow-list"):
                bio_kb.query(query)
        assert canary.connections == 0
        list(bio_kb.query(plain, allow_service=[endpoint]))  # opened: the call is made
        assert canary.connections == 1
        assert len(list(bio_kb.query("SELECT ?d WHERE { ?d a bio:Disease }"))) == 3  # everything else as before
    finally:
        canary.close()
