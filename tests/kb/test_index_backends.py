"""One suite, four places for the BM25 index and the vectors: in this process (Tantivy, usearch: the default),
in a milvus-lite file inside the KB folder (``--text milvus-lite``), on a Milvus server
(``milvus://127.0.0.1:PORT/COLLECTION``, which `milvus-lite server` serves here, as a Milvus cluster would), and
the vectors alone on the real Milvus server (PyPI ``milvus`` 2.3.5, standalone: it has no BM25, so the text stays
in Tantivy; skipped, with the reason, where it does not start).

Each KB is the product KB of conftest.py, built from the same lines. Every test runs on each and must find what
the in-process engines find: dense search exactly (Milvus proposes, the stored vectors' cosines rank), BM25 the
same hits with scores within 10% (Tantivy stores document lengths in one byte; Milvus exactly), and the
methods built on them (hybrid, PRF, 4StepFocus, KAR, SPARQL's SERVICE <urn:kqe:search>, the server) alike.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys

import numpy as np
import pytest
from click.testing import CliRunner
from starlette.testclient import TestClient

from kqe_rdf.cli import cli
from kqe_rdf.core.config import Settings
from kqe_rdf.core.errors import KqeError
from kqe_rdf.kb.build import build_kb, embed_kb
from kqe_rdf.kb.importers.jsonl import JsonlImporter
from kqe_rdf.kb.knowledge_base import KnowledgeBase
from kqe_rdf.kb.milvus import release_all
from kqe_rdf.methods.registry import pipeline
from kqe_rdf.service.app import create_app
from kqe_rdf.service.sparql_search import SearchFunctions, execute, prepare
from support.live_servers import free_port, milvus_server, milvus_standalone

pytestmark = pytest.mark.slow  # servers, subprocesses or big inputs: not in `make test-quick`

BACKENDS = ["in-process", "milvus-lite", "milvus", "milvus-2.3-vectors"]
QUERIES = ["camera for birds in flight", "tripod", "lens cap", "D500", "Japanese maker", "portrait lens creamy blur"]


@pytest.fixture(scope="module")
def backends(kb, products_file, tmp_path_factory):
    """``backends(name)``: the product KB with its indexes there, built (and embedded) on first use."""
    with contextlib.ExitStack() as running:
        opened: dict[str, KnowledgeBase] = {"in-process": kb}
        standalone: list[str] = []  # the real server's URL, started once for the module

        def real_server() -> str:
            if not standalone:
                standalone.append(running.enter_context(milvus_standalone(tmp_path_factory.mktemp("standalone"))))
            return standalone[0]

        def open_(name: str) -> KnowledgeBase:
            if name not in opened:
                path = tmp_path_factory.mktemp(f"kb-{name}") / "products"
                if name == "milvus-lite":  # as a user does it
                    runner = CliRunner()
                    built = runner.invoke(cli, ["kb", "build", "jsonl", str(products_file), "--kb", str(path),
                                                "--text", "milvus-lite"])
                    embedded = runner.invoke(cli, ["kb", "embed", "--kb", str(path), "--vectors", "milvus-lite"])
                    assert built.exit_code == embedded.exit_code == 0, built.output + embedded.output
                    assert "searched in Milvus (milvus.db, collection vectors)" in embedded.output
                elif name == "milvus-2.3-vectors":
                    settings = Settings(index_vectors=f"{real_server()}/products_vectors")
                    build_kb(JsonlImporter([products_file]), path, settings)
                    embed_kb(path, settings)
                else:
                    url = running.enter_context(milvus_server(tmp_path_factory.mktemp("milvus")))
                    settings = Settings(index_text=f"{url}/products", index_vectors=f"{url}/products_vectors")
                    build_kb(JsonlImporter([products_file]), path, settings)
                    embed_kb(path, settings)
                opened[name] = KnowledgeBase.open(path)
            return opened[name]

        open_.real_server = real_server
        yield open_
        release_all()  # no gRPC channel left open in this process for the next tests' forked workers


@pytest.fixture(scope="module", params=BACKENDS)
def backend(request, backends):
    return backends(request.param)


def ids(kb, hits) -> list[str]:
    return [kb.document(h.iri if hasattr(h, "iri") else h[0]).identifier for h in hits]


def test_kb_info_says_which_engine_holds_each_index(backend):
    held = backend.info()["indexes"]
    assert held["text"]["backend"] in ("tantivy", "milvus") and held["vectors"]["backend"] in ("usearch", "milvus")
    shown = CliRunner().invoke(cli, ["kb", "info", "--kb", str(backend.path)]).output
    if held["text"]["backend"] == "milvus":
        assert held["text"]["collection"] in ("text", "products")
        assert "documents in Milvus" in shown
        assert not (backend.path / "bm25").exists()  # Tantivy's index is not built beside it
    else:
        assert "in Tantivy, 1 segment(s)" in shown
    if held["vectors"]["backend"] == "milvus":
        assert held["vectors"]["index"] == "FLAT" and "vectors: searched in Milvus" in shown
    else:
        assert "vectors: searched in this process (usearch)" in shown


@pytest.mark.parametrize("text", QUERIES)
def test_bm25_finds_what_tantivy_finds(backend, kb, text):
    expected = kb.text_index.search(text, 3)
    found = backend.text_index.search(text, 3)
    assert ids(backend, found) == ids(kb, expected)
    assert [s for _i, s in found] == pytest.approx([s for _i, s in expected], rel=0.1)


def test_bm25_keeps_to_a_type_and_reads_names_and_documents(backend, kb):
    brand = kb.resolve_types(["Brand"])
    assert ids(backend, backend.text_index.search("camera", 5, sorted(brand))) == ["nikon", "sony", "canon"]
    assert ids(backend, backend.text_index.search_names("Befree tripod", 1)) == ["B007"]
    iri = kb.document(kb.text_index.search("D500", 1)[0][0]).iri
    assert backend.text_index.document(iri) == kb.text_index.document(iri)
    assert backend.text_index.scores_of("D500 lens", [iri]) == pytest.approx(kb.text_index.scores_of("D500 lens", [iri]),
                                                                            rel=0.1)
    assert backend.text_index.search("the of in", 5) == [] and backend.text_index.only_stop_words("the of in")


def test_dense_gives_the_in_process_scores(backend, kb):
    for text in QUERIES:
        vector = kb.embed_query(text)[None, :]
        expected = kb.dense.search(vector, 5)[0]
        found = backend.dense.search(vector, 5)[0]
        # Exact cosines: the same up to the last float digits of two embedding runs' vectors.
        assert [i for i, _s in found] == [i for i, _s in expected]
        assert [s for _i, s in found] == pytest.approx([s for _i, s in expected], abs=1e-5)
    products = backend.dense.type_mask(kb.resolve_types(["Product"]))
    hits = backend.dense.search(kb.embed_query("tripod")[None, :], 3, products)[0]
    assert ids(backend, hits)[0] == "B007" and all(backend.document(i).types == kb.document(i).types for i, _s in hits)


@pytest.mark.parametrize("method", ["hybrid", "prf", "4step-offline", "kar-offline"])
def test_methods_built_on_the_indexes_rank_alike(backend, kb, method):
    text = "camera for birds in flight"
    expected = ids(kb, pipeline(method, kb, Settings(), 3).search(text))
    assert ids(backend, pipeline(method, backend, Settings(), 3).search(text))[:2] == expected[:2]


def test_search_inside_sparql(backend, kb):
    query = """SELECT ?name WHERE {
      SERVICE <urn:kqe:search> { ?p kqe:query "tripod for travel" ; kqe:method "hybrid" ; kqe:type "Product" ; kqe:k 1 }
      ?p rdfs:label ?name }"""

    def rows(on):
        prepared = prepare(on, query, Settings())
        return [r["name"].value for r in execute(on, prepared, SearchFunctions(on))]

    assert rows(backend) == rows(kb) == ["Manfrotto Befree Travel Tripod"]
    score = """SELECT ?s WHERE { ?p rdfs:label "Manfrotto Befree Travel Tripod" . BIND(kqe:bm25(?p, "tripod") AS ?s) }"""
    on = [float(next(iter(execute(k, prepare(k, score, Settings()), SearchFunctions(k))))["s"].value)
          for k in (backend, kb)]
    assert on[0] == pytest.approx(on[1], rel=0.1) and on[1] > 0


def test_the_server_searches_with_its_indexes_on_a_milvus_server(backends):
    """The server's workers are processes of their own: a Milvus server is what they share (a milvus-lite file
    is held by one process at a time). The same answers as the in-process engines give (tests/service/test_server.py)."""
    served = backends("milvus")
    with TestClient(create_app(served, served.settings)) as client:
        found = client.get("/search", params={"q": "travel tripod", "method": "hybrid", "k": 2}).json()
        assert [r["id"] for r in found["results"]][0] == "B007"
        dense = client.get("/search", params={"q": "telephoto zoom for sports", "method": "dense", "k": 1}).json()
        assert [r["id"] for r in dense["results"]] == ["B005"]
        response = client.get("/sparql", params={"query": 'SELECT ?p WHERE { SERVICE <urn:kqe:search> { '
                                                          '?p kqe:query "lens cap" ; kqe:k 2 } }'})
        assert len(response.json()["results"]["bindings"]) == 2


def test_a_wrong_or_unreachable_index_uri_is_a_clear_error(products_file, tmp_path):
    with pytest.raises(KqeError, match="index_text must be empty .* or milvus://HOST:PORT/COLLECTION"):
        Settings(index_text="milvus://localhost/products")
    result = CliRunner().invoke(cli, ["kb", "build", "jsonl", str(products_file), "--kb", str(tmp_path / "kb"),
                                      "--text", "opensearch://x"])
    assert result.exit_code == 2 and "milvus-lite" in result.output and not (tmp_path / "kb").exists()
    down = f"milvus://127.0.0.1:{free_port()}/products"
    with pytest.raises(KqeError, match="cannot open Milvus at http://127.0.0.1"):
        build_kb(JsonlImporter([products_file]), tmp_path / "kb", Settings(index_text=down))
    assert not (tmp_path / "kb").exists()


def test_a_milvus_server_without_bm25_is_told_to_keep_the_text_in_tantivy(backends, products_file, tmp_path):
    """Milvus 2.3 has no BM25 function: `kb build --text` on it says so, and what to do, and leaves nothing."""
    url = backends.real_server()
    with pytest.raises(KqeError, match=r"is v2\.3\.5.*BM25 needs Milvus 2\.5 or later.*leave out --text"):
        build_kb(JsonlImporter([products_file]), tmp_path / "kb", Settings(index_text=f"{url}/products"))
    assert not (tmp_path / "kb").exists()


def test_the_default_path_imports_neither_milvus_nor_ray(kb):
    code = (f"import sys; from kqe_rdf.kb.knowledge_base import KnowledgeBase; from kqe_rdf.methods.registry import "
            f"pipeline; kb = KnowledgeBase.open({str(kb.path)!r}); pipeline('hybrid', kb, kb.settings, 3).search('tripod'); "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('pymilvus', 'milvus_lite', 'ray')))")
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout == "[]\n"


def test_embedding_on_ray_gives_the_same_vectors_and_resumes(kb, products_file, tmp_path, monkeypatch):
    """`kb embed --workers local`: Ray on this machine, bound to loopback, usage reporting off; a run stopped
    half-way keeps its shards, and the next run encodes only the rest."""
    import ray

    monkeypatch.setenv("RAY_USAGE_STATS_ENABLED", "0")
    path = tmp_path / "products"
    build_kb(JsonlImporter([products_file]), path)
    settings = Settings(embedding_workers="local")
    try:
        half = embed_kb(path, settings, chunk_size=4, stop_after=8)
        assert half["complete"] is False and len(list((path / "embeddings.partial").glob("chunk-*.npz"))) == 2
        done = embed_kb(path, settings, chunk_size=4)
    finally:
        ray.shutdown()
    assert done["complete"] and done["workers"] == "local"
    assert done["reused"] == 9 and done["new"] + done["reused"] == len(kb.dense)  # B008 and B009: one text
    mine, theirs = KnowledgeBase.open(path).dense, kb.dense
    assert mine.iris == theirs.iris
    cosines = np.sum(np.asarray(mine.vectors) * np.asarray(theirs.vectors), axis=1)
    assert cosines.min() >= 0.9999
    manifest = json.loads((path / "manifest.json").read_text())
    assert manifest["embeddings"]["vectors"] == {"backend": "usearch"}
