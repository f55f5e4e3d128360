"""Shared real components: one small product KB (a mini STaRK-Amazon), built and embedded once per session.

Everything is real — Oxigraph store, Tantivy index, the packaged ONNX MiniLM —
because on seventeen nodes it all takes a few seconds. Tests that change a KB
build their own copy from the same lines (``products_text``) with the ``jsonl`` fixture.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from chat_server import chat_server  # noqa: F401  (scripted OpenAI-compatible server for every test file)
import pytest

from kqe_rdf.kb.build import build_kb, embed_kb
from kqe_rdf.kb.embeddings import OnnxEncoder
from kqe_rdf.kb.importers.jsonl import JsonlImporter
from kqe_rdf.kb.knowledge_base import KnowledgeBase

# Brands, categories and products with descriptions and typed edges. B008 and B009 are the
# same lens cap listed twice (identical documents, so their scores tie). The last edge points
# at a product that is not in the file and is skipped.
PRODUCTS = """\
{"kind": "node", "id": "nikon", "type": "Brand", "name": "Nikon", "fields": {"description": "Japanese maker of cameras, binoculars and F-mount and Z-mount lenses."}}
{"kind": "node", "id": "canon", "type": "Brand", "name": "Canon", "fields": {"description": "Japanese maker of EOS cameras, printers and EF lenses."}}
{"kind": "node", "id": "sony", "type": "Brand", "name": "Sony", "fields": {"description": "Electronics company making Alpha mirrorless cameras and E-mount lenses."}}
{"kind": "node", "id": "manfrotto", "type": "Brand", "name": "Manfrotto", "fields": {"description": "Italian maker of tripods, heads and lighting supports."}}
{"kind": "node", "id": "dslr", "type": "Category", "name": "Digital SLR Cameras"}
{"kind": "node", "id": "mirrorless", "type": "Category", "name": "Mirrorless Cameras"}
{"kind": "node", "id": "lenses", "type": "Category", "name": "Camera Lenses"}
{"kind": "node", "id": "supports", "type": "Category", "name": "Tripods and Supports"}
{"kind": "node", "id": "B001", "type": "Product", "name": "Nikon D500 DSLR Camera Body", "aliases": ["D500"], "fields": {"description": "APS-C DSLR with a 10 fps burst and 153-point autofocus that tracks birds in flight; weather sealed for wildlife photography in the field.", "compatibility": "Takes Nikon F-mount lenses."}}
{"kind": "node", "id": "B002", "type": "Product", "name": "Canon EOS 90D DSLR Camera", "fields": {"description": "32.5 MP DSLR for travel and family photos with a vari-angle touchscreen.", "compatibility": "Takes Canon EF and EF-S lenses."}}
{"kind": "node", "id": "B003", "type": "Product", "name": "Sony Alpha 7 IV Mirrorless Camera", "aliases": ["A7 IV", "ILCE-7M4"], "xrefs": ["EAN:4548736133730"], "fields": {"description": "Full-frame mirrorless camera for 4K video and vlogging, with eye autofocus.", "compatibility": "Takes Sony E-mount lenses."}}
{"kind": "node", "id": "B004", "type": "Product", "name": "Nikon Z fc Mirrorless Camera", "fields": {"description": "Retro-styled mirrorless camera with film-era dials for street photography.", "compatibility": "Takes Nikon Z-mount lenses."}}
{"kind": "node", "id": "B005", "type": "Product", "name": "Nikon AF-S 200-500mm f/5.6E Telephoto Zoom Lens", "fields": {"description": "Super-telephoto zoom lens for sports and distant subjects, with vibration reduction.", "compatibility": "Nikon F-mount lens."}}
{"kind": "node", "id": "B006", "type": "Product", "name": "Canon EF 50mm f/1.8 STM Lens", "aliases": ["nifty fifty"], "fields": {"description": "Small and light prime lens for portraits with a creamy background blur.", "compatibility": "Canon EF-mount lens."}}
{"kind": "node", "id": "B007", "type": "Product", "name": "Manfrotto Befree Travel Tripod", "fields": {"description": "Aluminium travel tripod that folds to 40 cm and holds 8 kg, with a ball head."}}
{"kind": "node", "id": "B008", "type": "Product", "name": "Lens Cap 52mm", "fields": {"description": "Snap-on front lens cap."}}
{"kind": "node", "id": "B009", "type": "Product", "name": "Lens Cap 52mm", "fields": {"description": "Snap-on front lens cap."}}
{"kind": "edge", "head": "B001", "relation": "hasBrand", "tail": "nikon"}
{"kind": "edge", "head": "B002", "relation": "hasBrand", "tail": "canon"}
{"kind": "edge", "head": "B003", "relation": "hasBrand", "tail": "sony"}
{"kind": "edge", "head": "B004", "relation": "hasBrand", "tail": "nikon"}
{"kind": "edge", "head": "B005", "relation": "hasBrand", "tail": "nikon"}
{"kind": "edge", "head": "B006", "relation": "hasBrand", "tail": "canon"}
{"kind": "edge", "head": "B007", "relation": "hasBrand", "tail": "manfrotto"}
{"kind": "edge", "head": "B001", "relation": "inCategory", "tail": "dslr"}
{"kind": "edge", "head": "B002", "relation": "inCategory", "tail": "dslr"}
{"kind": "edge", "head": "B003", "relation": "inCategory", "tail": "mirrorless"}
{"kind": "edge", "head": "B004", "relation": "inCategory", "tail": "mirrorless"}
{"kind": "edge", "head": "B005", "relation": "inCategory", "tail": "lenses"}
{"kind": "edge", "head": "B006", "relation": "inCategory", "tail": "lenses"}
{"kind": "edge", "head": "B007", "relation": "inCategory", "tail": "supports"}
{"kind": "edge", "head": "B005", "relation": "compatibleWith", "tail": "B001"}
{"kind": "edge", "head": "B006", "relation": "compatibleWith", "tail": "B002"}
{"kind": "edge", "head": "B006", "relation": "compatibleWith", "tail": "B999"}
"""


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


def write_jsonl(path: Path, text: str | bytes) -> Path:
    """Write a JSON Lines fixture (text, or raw bytes for encoding tests) and return its path."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


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
