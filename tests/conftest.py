"""Shared real components: one small product KB (a mini STaRK-Amazon), built and embedded once per session.

Everything is real — Oxigraph store, Tantivy index, the packaged ONNX MiniLM —
because on seventeen nodes it all takes a few seconds. Tests that change a KB
build their own copy from the same lines (``products_text``) with the ``jsonl`` fixture.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from support.chat_server import chat_server  # noqa: F401  (scripted OpenAI-compatible server for every test file)
from support.products import PRODUCTS, write_jsonl
import pytest

from kqe_rdf.kb.build import build_kb, embed_kb
from kqe_rdf.kb.embeddings import OnnxEncoder
from kqe_rdf.kb.importers.jsonl import JsonlImporter
from kqe_rdf.kb.knowledge_base import KnowledgeBase

#: Markers of suites too long for the default run: they run only when ``-m`` names them.
OPT_IN = {"fuzz": ("fuzz",)}


def pytest_collection_modifyitems(config, items):
    chosen = config.getoption("markexpr") or ""
    for item in items:
        for marker, names in OPT_IN.items():
            if item.get_closest_marker(marker) and not any(re.search(rf"\b{n}\b", chosen) for n in names):
                item.add_marker(pytest.mark.skip(reason=f"run with -m {marker}"))


@pytest.fixture(scope="session")
def wordnet_installed():
    """The reader's lexical resource (Debian's wordnet-base): a developer's machine without it skips, CI fails."""
    from kqe_rdf.kb.lexicon import wordnet

    if wordnet() is None:
        if os.environ.get("CI"):
            pytest.fail("WordNet is missing: `make test` installs Debian's wordnet-base")
        pytest.skip("WordNet is not installed (Debian's wordnet-base)")


@pytest.fixture
def jsonl(tmp_path):
    """``jsonl(text_or_bytes, name="kb.jsonl")`` writes a fixture file in the test's tmp dir."""
    return lambda text, name="kb.jsonl": write_jsonl(tmp_path / name, text)


@pytest.fixture(scope="session")
def products_text() -> str:
    """The JSON Lines of the session KB, for tests that build a variant of it."""
    return PRODUCTS


@pytest.fixture(scope="session")
def products_file(tmp_path_factory) -> Path:
    return write_jsonl(tmp_path_factory.mktemp("source") / "products.jsonl", PRODUCTS)


@pytest.fixture(scope="session")
def kb(tmp_path_factory, products_file) -> KnowledgeBase:
    """The product KB, built and embedded for real; read-only for tests."""
    kb_dir = tmp_path_factory.mktemp("kbs") / "products"
    build_kb(JsonlImporter([products_file]), kb_dir)
    embed_kb(kb_dir)
    return KnowledgeBase.open(kb_dir)


@pytest.fixture(scope="session")
def encoder(kb) -> OnnxEncoder:
    """The packaged MiniLM encoder, loaded once (the same one the KB was embedded with)."""
    return kb.encoder


@pytest.fixture(scope="session")
def iri(kb):
    """Source id → node IRI, e.g. ``iri("B001")``."""
    iris = {d.identifier: d.iri for d in kb.documents()}
    return iris.__getitem__


@pytest.fixture(scope="session")
def ids(kb):
    """Node IRIs of hits → source ids, e.g. ``ids(stage.search("tripod"))``."""
    identifier = {d.iri: d.identifier for d in kb.documents()}
    return lambda hits: [identifier[h.iri] for h in hits]
