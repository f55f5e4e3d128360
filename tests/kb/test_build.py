"""Building a KB: what lands on disk and in the store, atomic swaps, one writer at a time, resumable embedding."""

from __future__ import annotations

import gc
import gzip
import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

from support.fixtures_kb import bio_kb, movie_kb  # noqa: F401 - fixtures
from support.products import generated_products
from kqe_rdf.kb.build import DOCUMENTS, MANIFEST, build_kb, embed_kb
from kqe_rdf.kb.documents import GraphTables
from kqe_rdf.core.config import Settings
from kqe_rdf.core.errors import InputError, KBNotFound, KqeError, SchemaError
from kqe_rdf.kb.importers.jsonl import JsonlImporter
from kqe_rdf.kb.knowledge_base import KnowledgeBase

SKB = "https://w3id.org/kqe/skb#"


def text_of(kb: KnowledgeBase, node_id: str) -> str:
    (node,) = kb.resolve_identifiers([node_id])[node_id]
    return kb.document(node).text


# --- what a build produces ---------------------------------------------------------------------


def test_manifest_counts_what_was_imported(kb):
    counts = kb.manifest["counts"]
    assert counts["nodes"] == counts["documents"] == 17
    assert counts["edges"] == 16
    assert counts["skipped_edges"] == 1
    assert (counts["empty_nodes"], counts["duplicate_nodes"]) == (0, 0)
    assert any("unknown node 'B999'" in warning for warning in kb.manifest["warnings"])
    assert kb.manifest["embeddings"]["count"] == 17


def test_kb_dir_holds_store_indexes_documents_and_manifest(kb):
    assert (kb.path / "store").is_dir()
    assert (kb.path / "bm25").is_dir()
    assert (kb.path / "embeddings" / "index.json").is_file()
    assert (kb.path / DOCUMENTS).is_file()
    assert json.loads((kb.path / MANIFEST).read_text())["importer"] == "jsonl"
    assert not (kb.path / "embeddings.partial").exists()
    assert not (kb.path / "embeddings.previous").exists()


def test_document_has_name_type_aliases_fields_and_relations_in_both_directions(kb):
    lines = text_of(kb, "B001").splitlines()
    assert lines[:3] == ["name: Nikon D500 DSLR Camera Body", "type: product", "aliases: D500"]
    assert "compatibility: Takes Nikon F-mount lenses." in lines
    assert any(line.startswith("description: APS-C DSLR with a 10 fps burst") for line in lines)
    assert "has brand: Nikon" in lines
    assert "in category: Digital SLR Cameras" in lines
    # The lens points at the camera; the camera's document shows the edge from its end.
    assert "compatible with (inverse): Nikon AF-S 200-500mm f/5.6E Telephoto Zoom Lens" in lines

    brand = text_of(kb, "nikon").splitlines()
    assert ("brand of: Nikon AF-S 200-500mm f/5.6E Telephoto Zoom Lens, Nikon D500 DSLR Camera Body, "
            "Nikon Z fc Mirrorless Camera") in brand


def test_relation_lists_are_capped_with_a_count_of_the_rest(jsonl):
    lines = ['{"kind": "node", "id": "acme", "type": "Brand", "name": "Acme"}']
    lines += [f'{{"kind": "node", "id": "c{i}", "type": "Colour", "name": "Colour {i}"}}' for i in range(3)]
    for i in range(5):
        lines.append(f'{{"kind": "node", "id": "bag{i}", "type": "Product", "name": "Acme Bag {i}"}}')
        lines.append(f'{{"kind": "edge", "head": "bag{i}", "relation": "hasBrand", "tail": "acme"}}')
    lines += [f'{{"kind": "edge", "head": "bag0", "relation": "hasColour", "tail": "c{i}"}}' for i in range(3)]
    lines.append('{"kind": "edge", "head": "bag1", "relation": "hasColour", "tail": "c0"}')
    lines.append('{"kind": "edge", "head": "bag1", "relation": "hasColour", "tail": "c1"}')
    source = jsonl("\n".join(lines))

    build_kb(JsonlImporter([source]), source.parent / "kb", Settings(doc_neighbours_per_relation=2))
    kb = KnowledgeBase.open(source.parent / "kb")

    assert "brand of: Acme Bag 0, Acme Bag 1 (and 3 more)" in text_of(kb, "acme").splitlines()
    assert "has colour: Colour 0, Colour 1 (and 1 more)" in text_of(kb, "bag0").splitlines()
    assert "has colour: Colour 0, Colour 1" in text_of(kb, "bag1").splitlines()  # exactly at the cap
    assert kb.manifest["settings"]["doc_neighbours_per_relation"] == 2


def test_documents_are_the_same_whatever_the_hash_seed(tmp_path, jsonl):
    """Names that differ only in case ("Burn-McKeown" / "Burn-Mckeown" in HPO) keep one order in a document:
    its hash keys the embeddings a rebuild keeps, so it must not change with Python's string hashing."""
    lines = ['{"kind": "node", "id": "g", "type": "Product", "name": "Gene"}']
    for i, name in enumerate(["Burn-McKeown syndrome", "Burn-Mckeown syndrome", "BURN-MCKEOWN SYNDROME"]):
        lines.append(f'{{"kind": "node", "id": "d{i}", "type": "Brand", "name": "{name}"}}')
        lines.append(f'{{"kind": "edge", "head": "g", "relation": "hasBrand", "tail": "d{i}"}}')
    source = jsonl("\n".join(lines))
    render = textwrap.dedent(f"""
        from kqe_rdf.kb.build import build_kb
        from kqe_rdf.kb.importers.jsonl import JsonlImporter
        from kqe_rdf.kb.knowledge_base import KnowledgeBase
        import sys
        kb_dir = sys.argv[1]
        build_kb(JsonlImporter([{str(source)!r}]), kb_dir)
        kb = KnowledgeBase.open(kb_dir)
        print(next(d.text for d in kb.documents() if d.name == "Gene"))
    """)
    texts = {subprocess.run([sys.executable, "-c", render, str(tmp_path / f"kb{seed}")], check=True, text=True,
                            capture_output=True, env={**os.environ, "PYTHONHASHSEED": str(seed)}).stdout
             for seed in range(4)}
    assert len(texts) == 1
    assert "has brand: BURN-MCKEOWN SYNDROME, Burn-McKeown syndrome, Burn-Mckeown syndrome" in texts.pop()


def test_identifiers_and_cross_references_resolve_to_node_iris(kb):
    found = kb.resolve_identifiers(["B001", "nikon", "EAN:4548736133730", "no-such-id"])
    assert found == {
        "B001": ["https://w3id.org/kqe/skb/node/B001"],
        "nikon": ["https://w3id.org/kqe/skb/node/nikon"],
        "EAN:4548736133730": ["https://w3id.org/kqe/skb/node/B003"],
    }


def test_relation_signatures_counted_by_the_build_are_what_the_store_query_finds(kb):
    from kqe_rdf.kb.build import relation_signatures

    recorded = kb.manifest["relation_signatures"]
    assert recorded == relation_signatures(kb.store)  # the same rows, in the same order
    assert [SKB + "Product", SKB + "hasBrand", SKB + "Brand", 7] in recorded


def test_schema_is_read_back_from_the_store(kb):
    schema = kb.schema
    assert schema.node_class("Product").iri == SKB + "Product"
    has_brand = schema.relation("hasBrand")
    assert (has_brand.label, has_brand.domain, has_brand.range) == ("has brand", SKB + "Product", SKB + "Brand")
    assert schema.inverse_label(has_brand.iri) == "brand of"
    assert schema.field("compatibility").label == "compatibility"
    with pytest.raises(SchemaError, match="did you mean Product"):
        schema.node_class("Prodcut")
    assert dict(kb.info()["types"]) == {"Product": 9, "Brand": 4, "Category": 4}


def test_opening_a_missing_kb_says_how_to_build_one(tmp_path):
    with pytest.raises(KBNotFound, match=r"no knowledge base at .*nowhere.*`kqe-rdf kb build"):
        KnowledgeBase.open(tmp_path / "nowhere")
    with pytest.raises(KBNotFound):
        embed_kb(tmp_path / "nowhere")


def test_a_damaged_manifest_is_reported(tmp_path):
    (tmp_path / "kb").mkdir()
    (tmp_path / "kb" / MANIFEST).write_text('{"counts": ')
    with pytest.raises(KqeError, match="manifest.json is damaged .*rebuild the KB"):
        KnowledgeBase.open(tmp_path / "kb")


def test_build_refuses_to_replace_a_folder_that_is_not_a_kb(tmp_path, jsonl, products_text):
    thesis = tmp_path / "thesis"
    thesis.mkdir()
    (thesis / "chapter1.tex").write_text("\\chapter{Introduction}")
    source = jsonl(products_text)
    with pytest.raises(KqeError, match="not a kqe-rdf knowledge base"):
        build_kb(JsonlImporter([source]), thesis)
    assert (thesis / "chapter1.tex").read_text() == "\\chapter{Introduction}"

    empty = tmp_path / "empty"
    empty.mkdir()
    build_kb(JsonlImporter([source]), empty)
    assert KnowledgeBase.open(empty).manifest["counts"]["nodes"] == 17


# --- one pass: what a build reads from the records is what its store holds -------------------------

#: Records that the store and the record stream see differently unless the build takes care: a node given
#: twice (another name, more aliases, given in no sorted order), an edge given twice, an edge with
#: qualifiers (its statement node points at both ends), N-Triples escapes, an edge to an unknown node.
AWKWARD = """\
{"kind": "node", "id": "B003", "type": "Product", "name": "Alpha 7 IV", "aliases": ["Zeta", "Alpha", "A7 IV"]}
{"kind": "node", "id": "q1", "type": "Brand", "name": "Quote \\"Q\\" \\\\ back", "fields": {"description": "tab\\there"}}
{"kind": "edge", "head": "B001", "relation": "hasBrand", "tail": "nikon"}
{"kind": "edge", "head": "B003", "relation": "hasBrand", "tail": "q1", "qualifiers": {"since": "2021"}}
{"kind": "edge", "head": "B003", "relation": "hasBrand", "tail": "q1", "qualifiers": {"since": "2022"}}
"""


def read_back(kb: KnowledgeBase, folder) -> dict:
    """Documents, relation statistics, name index and hierarchy arrays of a KB as the build before the
    streamed one derived them: by SPARQL over its store (a copy, since the hierarchies write closures)."""
    import shutil

    from pyoxigraph import Store

    from kqe_rdf.kb.build import relation_signatures
    from kqe_rdf.kb.documents import GraphTables
    from kqe_rdf.kb.hierarchy import build_hierarchies
    from kqe_rdf.kb.linking import NameIndex
    from kqe_rdf.kb.ontology import Schema

    shutil.copytree(kb.path / "store", folder / "store")
    store = Store(str(folder / "store"))
    schema = Schema.from_store(store)
    tables = GraphTables.from_store(store, schema, kb.manifest["text_properties"])
    settings = kb.manifest["settings"]
    documents = list(tables.documents(schema, settings["doc_neighbours_per_relation"], settings["doc_max_chars"]))
    NameIndex.build(documents, tables, folder / NameIndex.FILE)
    hierarchies = build_hierarchies(store, schema, relation_signatures(store), folder / "hierarchy")
    counts = {r["relation"].value: int(r["count"].value) for r in kb.query(
        "SELECT ?relation (COUNT(*) AS ?count) WHERE { ?h ?relation ?t . ?t a kqe:Node "
        "FILTER(isIRI(?t) && ?relation NOT IN (rdf:type, kqe:importedFrom, kqe:subsumedBy)) } GROUP BY ?relation")}
    del store
    return {"documents": documents, "signatures": relation_signatures(kb.store), "relation_counts": counts,
            "names": json.loads(gzip.open(folder / NameIndex.FILE).read()),
            "hierarchies": {k: v for k, v in hierarchies.items() if k != "seconds"},
            "arrays": {f.name: dict(np.load(f)) for f in sorted((folder / "hierarchy").glob("*.npz"))}}


def as_built(kb: KnowledgeBase) -> dict:
    from kqe_rdf.kb.linking import NameIndex

    return {"documents": list(kb.documents()), "signatures": kb.manifest["relation_signatures"],
            "relation_counts": kb.manifest["relation_counts"],
            "names": json.loads(gzip.open(kb.path / NameIndex.FILE).read()),
            "hierarchies": {k: v for k, v in kb.manifest["hierarchies"].items() if k != "seconds"},
            "arrays": {f.name: dict(np.load(f)) for f in sorted((kb.path / "hierarchy").glob("*.npz"))}}


@pytest.fixture
def awkward_kb(tmp_path, jsonl, products_text) -> KnowledgeBase:
    path = tmp_path / "awkward"
    build_kb(JsonlImporter([jsonl(products_text + AWKWARD, "awkward.jsonl")]), path)
    return KnowledgeBase.open(path)


@pytest.mark.parametrize("which", ["awkward_kb", "movie_kb", "bio_kb"])
def test_what_the_build_read_from_the_records_is_what_the_store_gives_by_sparql(which, request, tmp_path):
    kb = request.getfixturevalue(which)
    built, stored = as_built(kb), read_back(kb, tmp_path)

    assert [d.text for d in built["documents"]] == [d.text for d in stored["documents"]]
    assert built["documents"] == stored["documents"]
    for part in ("signatures", "relation_counts", "names", "hierarchies"):
        assert built[part] == stored[part], part
    assert built["arrays"].keys() == stored["arrays"].keys()
    for name, arrays in built["arrays"].items():
        assert arrays.keys() == stored["arrays"][name].keys()
        for key, array in arrays.items():
            assert np.array_equal(array, stored["arrays"][name][key]), (name, key)
    if which == "bio_kb":
        assert built["arrays"]  # the disease KB has a hierarchy (is a) to compare


def test_a_node_given_twice_shows_everything_once_in_a_fixed_order(awkward_kb):
    doc = text_of(awkward_kb, "B003")
    # The least of its two names, and all aliases of both records, sorted: whichever record came first.
    assert doc.splitlines()[:3] == ["name: Alpha 7 IV", "type: product", "aliases: A7 IV; Alpha; ILCE-7M4; Zeta"]
    assert "has brand: Quote \"Q\" \\ back, Sony" in doc  # the edge given twice is listed once
    assert awkward_kb.manifest["counts"]["duplicate_nodes"] == 1
    (row,) = awkward_kb.query('SELECT (COUNT(*) AS ?n) WHERE { ?s rdf:object ?o . ?o kqe:identifier "q1" }')
    assert int(row["n"].value) == 2  # each qualified edge keeps its own statement


# --- atomicity: the previous KB survives every failed build ------------------------------------


@pytest.fixture
def built(tmp_path, jsonl, products_text):
    """A freshly built (not embedded) copy of the product KB that a test may rebuild or break."""
    path = tmp_path / "kbs" / "products"
    build_kb(JsonlImporter([jsonl(products_text, "products.jsonl")]), path)
    return path


def leftovers(path) -> list[str]:
    """Build folders, swap leftovers and the lock file beside a KB."""
    return sorted(p.name for p in path.parent.glob(f".{path.name}.*"))


def assert_intact(path, manifest: dict) -> None:
    kb = KnowledgeBase.open(path)
    assert kb.manifest == manifest
    rows = kb.query('SELECT ?name WHERE { ?p kqe:identifier "B001" ; rdfs:label ?name }')
    assert [row["name"].value for row in rows] == ["Nikon D500 DSLR Camera Body"]
    assert kb.text_index.search("travel tripod", k=1)[0][0] == "https://w3id.org/kqe/skb/node/B007"


class FailsMidway(JsonlImporter):
    """An importer whose source breaks after a few records (a network share going away)."""

    def records(self, report):
        for number, record in enumerate(super().records(report)):
            if number == 10:
                raise RuntimeError("the source went away")
            yield record


BROKEN_LAST_LINE = '{"kind": "node", "id": "B010", "type": "Product", "name": "Half a line"\n'
ONLY_EMPTY_NODE = '{"kind": "node", "id": "ghost", "type": "Product"}\n'


@pytest.mark.parametrize(
    "importer, error, message",
    [
        (lambda source, text: JsonlImporter([source(text + BROKEN_LAST_LINE, "broken.jsonl")]),
         InputError, r"broken\.jsonl:35: not valid JSON"),
        (lambda source, text: FailsMidway([source(text, "flaky.jsonl")]), RuntimeError, "the source went away"),
        # Fails after the new store was opened and loaded.
        (lambda source, text: JsonlImporter([source(ONLY_EMPTY_NODE, "empty.jsonl")]),
         KqeError, "produced no nodes with text"),
    ],
    ids=["malformed-line-near-the-end", "importer-raises", "no-nodes-after-loading"],
)
def test_a_failed_build_leaves_the_previous_kb_intact(built, jsonl, products_text, importer, error, message):
    before = KnowledgeBase.open(built).manifest

    with pytest.raises(error, match=message):
        build_kb(importer(jsonl, products_text), built)
    gc.collect()  # whatever the failed build left open is gone now; nothing may re-appear on disk

    assert leftovers(built) == []
    assert_intact(built, before)


def test_a_first_build_that_fails_leaves_nothing_where_the_kb_would_be(tmp_path, jsonl, products_text):
    folder = tmp_path / "kbs"
    with pytest.raises(RuntimeError, match="the source went away"):
        build_kb(FailsMidway([jsonl(products_text, "flaky.jsonl")]), folder / "products")
    gc.collect()

    assert list(folder.iterdir()) == []  # no half-built KB, and no hidden .products.lock


def test_a_build_that_fails_while_tantivy_indexes_its_documents_leaves_nothing_behind(built, jsonl, products_text,
                                                                                       monkeypatch):
    """Tantivy and the documents file take the documents as they are rendered: a build failing halfway through
    the rendering (a disk filling up), with their threads at work, leaves the previous KB as it was and nothing
    beside it."""
    before = KnowledgeBase.open(built).manifest
    render = GraphTables.documents

    def fails_halfway(self, *args, **kwargs):
        for number, document in enumerate(render(self, *args, **kwargs)):
            if number == 5:
                raise OSError(28, "No space left on device")
            yield document

    monkeypatch.setattr(GraphTables, "documents", fails_halfway)
    with pytest.raises(OSError, match="No space left"):
        build_kb(JsonlImporter([jsonl(products_text)]), built)
    gc.collect()

    assert leftovers(built) == []
    assert_intact(built, before)


BUILD_IN_SUBPROCESS = textwrap.dedent("""\
    import sys
    from kqe_rdf.kb.build import build_kb
    from kqe_rdf.kb.importers.jsonl import JsonlImporter
    build_kb(JsonlImporter([sys.argv[1]]), sys.argv[2])
""")


def start_build(source, path) -> tuple[subprocess.Popen, object]:
    """Start ``build_kb`` in another process; return it once its build folder holds a store."""
    process = subprocess.Popen([sys.executable, "-c", BUILD_IN_SUBPROCESS, str(source), str(path)],
                               stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120  # a guard against hanging, not a timing assertion
    while True:
        stores = list(path.parent.glob(f".{path.name}.build-*/store"))
        if stores:
            return process, stores[0].parent
        if process.poll() is not None:
            pytest.fail(f"the build finished before its build folder was seen: {process.stderr.read()[-2000:]}")
        if time.monotonic() > deadline:
            process.kill()
            pytest.fail("no build folder appeared")
        time.sleep(0.005)


def test_a_build_killed_midway_leaves_the_previous_kb_and_the_next_build_cleans_up(built, jsonl, products_text):
    before = KnowledgeBase.open(built).manifest
    big = jsonl(generated_products(6000), "big.jsonl")

    process, work = start_build(big, built)
    process.send_signal(signal.SIGKILL)
    process.wait()
    process.stderr.close()

    assert process.returncode == -signal.SIGKILL
    # Killed mid-build: its half-written folder and its lock file are still there (the next build removes both).
    assert leftovers(built) == sorted([work.name, f".{built.name}.lock"])
    assert_intact(built, before)

    manifest = build_kb(JsonlImporter([jsonl(products_text, "again.jsonl")]), built)
    assert leftovers(built) == []
    assert KnowledgeBase.open(built).manifest == manifest


def test_a_killed_build_s_folder_is_removed_when_the_kb_is_next_opened(built, jsonl):
    """Issue 49: the next start (a server, a search: anything that opens the KB) removes it, not only the next
    build; a build still running keeps its folder (it holds the lock)."""
    before = KnowledgeBase.open(built).manifest
    process, work = start_build(jsonl(generated_products(6000), "big.jsonl"), built)
    try:
        KnowledgeBase.open(built)  # while it runs
        assert work.is_dir()
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait()
        process.stderr.close()
    assert leftovers(built) == sorted([work.name, f".{built.name}.lock"])
    assert KnowledgeBase.open(built).manifest == before
    assert leftovers(built) == []


def test_a_terminated_build_removes_its_own_folder(built, jsonl):
    """SIGTERM (what `kill` and service managers send) ends a build through its cleanup, as Ctrl-C does."""
    before = KnowledgeBase.open(built).manifest
    process, work = start_build(jsonl(generated_products(6000), "big.jsonl"), built)
    process.send_signal(signal.SIGTERM)
    process.wait()
    process.stderr.close()
    assert process.returncode == 128 + signal.SIGTERM
    assert leftovers(built) == []
    assert_intact(built, before)


@pytest.mark.parametrize("target_exists", [True, False], ids=["link-to-a-kb", "link-to-nothing-yet"])
def test_a_symlinked_kb_is_rebuilt_in_place_every_time(tmp_path, jsonl, products_text, target_exists):
    target = tmp_path / "disk" / "products"
    if target_exists:
        build_kb(JsonlImporter([jsonl(products_text, "products.jsonl")]), target)
    link = tmp_path / "kb"
    link.symlink_to(target)

    for round in range(3):
        extra = f'{{"kind": "node", "id": "R{round}", "type": "Product", "name": "Round {round} tripod"}}\n'
        build_kb(JsonlImporter([jsonl(products_text + extra, f"round{round}.jsonl")]), link)
        assert link.is_symlink() and link.resolve() == target  # the link stays a link to the same folder
        assert KnowledgeBase.open(link).resolve_identifiers([f"R{round}"])[f"R{round}"]
        assert KnowledgeBase.open(target).manifest == KnowledgeBase.open(link).manifest
        assert leftovers(target) == [] and leftovers(link) == []
    embed_kb(link)  # the other writers follow the link too, under the same lock
    assert KnowledgeBase.open(target).has_embeddings


def test_a_second_build_while_one_runs_fails_fast_with_the_lock_message(built, jsonl, products_text):
    big = jsonl(generated_products(6000), "big.jsonl")
    process, work = start_build(big, built)
    process.send_signal(signal.SIGSTOP)  # hold the running build still, with its lock, while we try
    try:
        with pytest.raises(KqeError, match=r"another build or embedding of .*products is running \(lock "):
            build_kb(JsonlImporter([jsonl(products_text, "second.jsonl")]), built)
        with pytest.raises(KqeError, match="another build or embedding"):
            embed_kb(built)
        assert work.is_dir()  # the refused build touched nothing of the running one
    finally:
        process.send_signal(signal.SIGCONT)
        process.wait()
        process.stderr.close()

    assert process.returncode == 0
    assert KnowledgeBase.open(built).manifest["counts"]["nodes"] == 6000
    assert leftovers(built) == []


# --- embedding: resumable, re-using unchanged vectors ------------------------------------------


def test_embedding_stops_and_resumes_reusing_the_saved_vectors(built, kb, encoder):
    first = embed_kb(built, encoder=encoder, chunk_size=2, stop_after=5)

    assert first == {"complete": False, "embedded": 5, "remaining": 12}
    chunks = sorted(p.name for p in (built / "embeddings.partial").glob("chunk-*.npz"))
    assert chunks == ["chunk-000000.npz", "chunk-000001.npz", "chunk-000002.npz"]
    assert not KnowledgeBase.open(built).has_embeddings  # no half index is ever visible

    second = embed_kb(built, encoder=encoder)

    assert second["complete"] is True
    assert (second["count"], second["new"], second["reused"]) == (17, 12, 5)
    assert not (built / "embeddings.partial").exists()
    resumed = KnowledgeBase.open(built)
    assert resumed.manifest["embeddings"]["new"] == 12
    for node in resumed.dense.iris:  # saved chunks and fresh vectors are the ones a single run gives
        np.testing.assert_allclose(resumed.dense.vector(node), kb.dense.vector(node), atol=1e-5)


def test_a_rebuild_reembeds_only_the_changed_document(built, encoder, jsonl, products_text):
    embed_kb(built, encoder=encoder)
    changed = products_text.replace("Aluminium travel tripod", "Carbon-fibre travel tripod")
    assert changed != products_text

    build_kb(JsonlImporter([jsonl(changed, "changed.jsonl")]), built)
    assert not KnowledgeBase.open(built).has_embeddings  # a new build starts without an index
    info = embed_kb(built, encoder=encoder)

    assert (info["count"], info["new"], info["reused"]) == (17, 1, 16)
    kb = KnowledgeBase.open(built)
    tripod = kb.resolve_identifiers(["B007"])["B007"][0]
    np.testing.assert_allclose(kb.dense.vector(tripod), encoder.encode([kb.document(tripod).text])[0], atol=1e-5)


def test_embedding_only_some_types(built, encoder):
    info = embed_kb(built, types=["Brand"], encoder=encoder)
    assert (info["count"], info["types"]) == (4, [SKB + "Brand"])
    with pytest.raises(SchemaError, match="did you mean Brand"):
        embed_kb(built, types=["Brnad"], encoder=encoder)


def test_a_kb_embedded_with_another_model_setting_is_refused(kb):
    other = KnowledgeBase.open(kb.path, Settings(embedding_max_tokens=128))
    with pytest.raises(KqeError, match=r"another encoder.*all-MiniLM-L6-v2-onnx-int8@256 \(now all-MiniLM-L6-v2-onnx-int8@128\)"):
        other.encoder


# --- the encoder ---------------------------------------------------------------------------------


def test_stored_vectors_are_l2_normalised(kb):
    norms = np.linalg.norm(np.asarray(kb.dense.vectors), axis=1)
    assert len(norms) == 17
    np.testing.assert_allclose(norms, 1.0, atol=1e-5)


def test_a_text_gets_the_same_vector_alone_and_batched_with_longer_texts(encoder):
    text = "weather sealed camera for photographing birds"
    longer = ["a long review of a landscape tripod " * 30, "portrait studio flash and light stands " * 40]
    alone = encoder.encode([text])[0]
    batched = encoder.encode([longer[0], text, longer[1]])[1]
    assert float(alone @ batched) > 0.999


WORDS = "camera lens view bird wildlife photo light flash studio zoom".split()  # one token each


def tokens(encoder, text: str) -> list[int]:
    """Token ids as the encoder sees them (already truncated to its window)."""
    return encoder.tokenizer.encode(text).ids


def test_texts_are_truncated_at_256_tokens(encoder):
    shared = [WORDS[i % len(WORDS)] for i in range(1000)]
    text = " ".join(shared)
    different_tail = " ".join(shared[:300] + ["ocean"] * 700)
    assert len(tokens(encoder, " ".join(shared[:300]))) == 256  # the shared words alone fill the window

    first, second = encoder.encode([text, different_tail])
    assert float(first @ second) > 0.9999


def test_truncation_is_not_at_128_tokens(encoder):
    shared = [WORDS[i % len(WORDS)] for i in range(150)]
    text = " ".join(shared + ["mountain"] * 50)
    different_tail = " ".join(shared + ["ocean"] * 50)
    a, b = tokens(encoder, text), tokens(encoder, different_tail)
    assert a[:151] == b[:151] and a[151] != b[151]  # [CLS] + 150 equal tokens, then they differ
    assert len(a) == len(b) == 202  # nothing cut: [CLS] + 200 words + [SEP]

    first, second = encoder.encode([text, different_tail])
    assert float(first @ second) < 0.99


def test_a_document_looked_up_alone_is_the_one_in_the_documents_file(movie_kb):
    # The first lookups read the BM25 index's stored fields instead of loading every document.
    fresh = KnowledgeBase.open(movie_kb.path)
    every = list(fresh.documents())
    assert [fresh.document(d.iri) for d in every[:50]] == every[:50]
    assert "_documents_by_iri" not in fresh.__dict__
    with pytest.raises(KqeError, match="no node"):
        fresh.document("https://example.org/not-a-node")


def test_a_kb_no_one_holds_any_more_is_freed_with_its_caches(kb):
    """A server reopens its KB after each rebuild: the KB it dropped must go, however much was asked of it (method
    caches keyed by ``self`` kept every KB, and every reader of one, until the process ended)."""
    import gc
    import weakref

    from kqe_rdf.methods.registry import pipeline

    opened = KnowledgeBase.open(kb.path)
    for method in ("hybrid", "4step-offline", "kar-offline"):
        pipeline(method, opened, opened.settings, 5).search("a camera for wildlife photography with Nikon lenses")
    held = weakref.ref(opened)
    del opened
    gc.collect()
    assert held() is None
