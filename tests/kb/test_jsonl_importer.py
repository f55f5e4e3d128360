"""The JSON Lines importer: the documented format, and an error naming file:line for every way it can be wrong."""

from __future__ import annotations

import gzip
import re

import pytest

from kqe_rdf.kb.build import build_kb
from kqe_rdf.core.config import Settings
from kqe_rdf.core.errors import InputError, KqeError, SchemaError
from kqe_rdf.kb.importers import get_importer
from kqe_rdf.kb.importers.jsonl import JsonlImporter, readable
from kqe_rdf.kb.knowledge_base import KnowledgeBase
from kqe_rdf.kb.records import Edge, ImportReport, Node

CAMERA = '{"kind": "node", "id": "B001", "type": "Product", "name": "Nikon D500", "fields": {"description": "DSLR"}}'
NIKON = '{"kind": "node", "id": "nikon", "type": "Brand", "name": "Nikon"}'
BRAND_EDGE = '{"kind": "edge", "head": "B001", "relation": "hasBrand", "tail": "nikon"}'
GHOST_EDGE = '{"kind": "edge", "head": "B001", "relation": "inCategory", "tail": "ghost"}'


def at(path, line: int) -> str:
    """The ``file:line`` an error names, as a regex."""
    return re.escape(f"{path}:{line}")


def records(path, **options) -> list:
    return list(JsonlImporter([path], **options).records(ImportReport()))


def build(path, settings=None) -> KnowledgeBase:
    """Build a KB from one JSON Lines file next to it and open it."""
    build_kb(JsonlImporter([path]), path.parent / "kb", settings)
    return KnowledgeBase.open(path.parent / "kb")


def test_lines_become_node_and_edge_records(jsonl):
    path = jsonl("\n".join([
        '{"kind": "node", "id": "B001", "type": "Product", "name": "Nikon D500", "aliases": ["D500"], '
        '"fields": {"description": ["DSLR", "20.9 MP"]}, "xrefs": "EAN:0018208015580"}',
        "",  # blank lines are allowed
        '{"head": "B001", "relation": "hasBrand", "tail": "nikon", "qualifiers": {"since": 2016}}',  # kind inferred
    ]))
    node, edge = records(path)
    fields = (("description", "DSLR"), ("description", "20.9 MP"))
    assert node == Node("B001", "Product", "Nikon D500", ("D500",), fields, ("EAN:0018208015580",), None, f"{path}:1")
    assert edge == Edge("B001", "hasBrand", "nikon", (("since", "2016"),), f"{path}:3")


def test_the_importer_is_registered_by_name():
    assert get_importer("jsonl") is JsonlImporter


def test_an_ontology_is_written_from_the_names_the_file_uses(jsonl):
    kb = build(jsonl("\n".join([CAMERA, NIKON, BRAND_EDGE])))
    relation = kb.schema.relation("hasBrand")
    assert relation.label == "has brand"
    assert (relation.domain, relation.range) == ("https://w3id.org/kqe/skb#Product", "https://w3id.org/kqe/skb#Brand")
    assert readable("inCategory") == readable("in_category") == "in category"


def test_a_broader_alias_is_a_name_people_use_linked_below_names(jsonl):
    kb = build(jsonl('{"kind": "node", "id": "HP:0000256", "type": "Phenotype", "name": "Macrocephaly", '
                     '"broader_aliases": ["Big head"]}\n'))
    from kqe_rdf.kb.linking import Linker

    [mention] = Linker(kb).mentions("my baby has a big head")
    assert (mention.text, mention.candidates[0].name, mention.candidates[0].how) == ("big head", "Macrocephaly",
                                                                                     "broader name")
    assert "broader names: Big head" in next(kb.documents()).text
    with pytest.raises(InputError, match="broader_aliases"):
        build(jsonl('{"kind": "node", "id": "x", "type": "T", "name": "X", "broader_aliases": [1]}\n', "bad.jsonl"))


def test_a_given_ontology_is_used_and_checked(jsonl, tmp_path):
    ontology = tmp_path / "shop.ttl"
    ontology.write_text("""
        @prefix kqe: <https://w3id.org/kqe/core#> . @prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> .
        @prefix shop: <https://example.org/shop#> .
        shop:Product rdfs:subClassOf kqe:Node ; rdfs:label "product" .
        shop:Brand rdfs:subClassOf kqe:Node ; rdfs:label "brand" .
        shop:madeBy rdfs:subPropertyOf kqe:relation ; rdfs:label "made by" .
    """)
    source = jsonl("\n".join([CAMERA, NIKON, '{"head": "B001", "relation": "madeBy", "tail": "nikon"}']))
    build_kb(JsonlImporter([source], ontology=ontology), tmp_path / "kb")
    assert "made by: Nikon" in KnowledgeBase.open(tmp_path / "kb").document(
        "https://w3id.org/kqe/skb/node/B001").text.splitlines()

    typo = jsonl(CAMERA.replace('"Product"', '"Prodcut"'), "typo.jsonl")
    with pytest.raises(SchemaError, match="the ontology defines no class 'Prodcut'; did you mean Product"):
        build_kb(JsonlImporter([typo], ontology=ontology), tmp_path / "kb2")


def test_gzipped_files_are_read(tmp_path):
    path = tmp_path / "kb.jsonl.gz"
    with gzip.open(path, "wt", encoding="utf-8") as out:
        out.write("\n".join([CAMERA, NIKON, BRAND_EDGE]) + "\n")
    assert [type(r).__name__ for r in records(path)] == ["Node", "Node", "Edge"]


def test_limit_caps_the_number_of_nodes(jsonl):
    path = jsonl("\n".join([CAMERA, NIKON, BRAND_EDGE]))
    assert [r.id for r in records(path) if isinstance(r, Node)] == ["B001", "nikon"]
    assert [r.id for r in records(path, limit=1) if isinstance(r, Node)] == ["B001"]


# --- errors --------------------------------------------------------------------------------------


def test_malformed_json_names_file_and_line(jsonl):
    path = jsonl("\n".join([CAMERA, NIKON, '{"kind": "edge", "head": "B001",, "relation": "hasBrand"}']))
    with pytest.raises(InputError, match=rf"^{at(path, 3)}: not valid JSON \(Expecting property name .* column 33\)$"):
        records(path)


def test_a_line_that_is_not_an_object_is_an_error(jsonl):
    path = jsonl(CAMERA + '\n["B002", "Product"]\n')
    with pytest.raises(InputError, match=rf"{at(path, 2)}: each line must be a JSON object"):
        records(path)


@pytest.mark.parametrize("line, message", [
    ('{"kind": "node", "type": "Product", "name": "No id"}', "a node needs a non-empty 'id'"),
    ('{"kind": "node", "id": "  ", "type": "Product", "name": "Blank id"}', "a node needs a non-empty 'id'"),
    ('{"kind": "node", "id": "B002", "name": "No type"}', "a node needs a non-empty 'type'"),
    ('{"kind": "edge", "head": "B001", "relation": "hasBrand"}', "an edge needs a non-empty 'tail'"),
    ('{"kind": "node", "id": "B002", "type": "Product", "fields": "text"}', "'fields' must be an object"),
    ('{"kind": "node", "id": "B002", "type": "Product", "aliases": [1, 2]}', "aliases must be a string or a list"),
    ('{"kind": "vertex", "id": "B002", "type": "Product"}', "'kind' must be 'node' or 'edge', not 'vertex'"),
])
def test_records_missing_what_they_need_are_errors(jsonl, line, message):
    path = jsonl(CAMERA + "\n" + line + "\n")
    with pytest.raises(InputError, match=rf"^{at(path, 2)}: {message}"):
        records(path)


def test_names_of_several_words_import_as_types_fields_and_relations(jsonl):
    kb = build(jsonl("\n".join([
        CAMERA, NIKON,
        '{"kind": "node", "id": "B002", "type": "Digital Camera", "name": "Z6", "fields": {"screen size": "3 in"}}',
        '{"kind": "edge", "head": "B002", "relation": "made by", "tail": "nikon"}'])))
    assert {"Digital%20Camera": "digital camera"}.items() <= {t.name: t.label for t in kb.schema.classes.values()}.items()
    assert {"screen%20size": "screen size"}.items() <= {t.name: t.label for t in kb.schema.fields.values()}.items()
    assert {"made%20by": "made by"}.items() <= {t.name: t.label for t in kb.schema.relations.values()}.items()
    assert any("Z6" in d.text and "3 in" in d.text for d in kb.documents())


def test_edges_to_unknown_nodes_are_skipped_and_counted(jsonl):
    kb = build(jsonl("\n".join([CAMERA, NIKON, BRAND_EDGE, GHOST_EDGE])))
    assert (kb.manifest["counts"]["edges"], kb.manifest["counts"]["skipped_edges"]) == (1, 1)
    assert any(w.endswith("kb.jsonl:4: edge 'B001' -inCategory-> 'ghost' points at unknown node 'ghost'; skipped")
               for w in kb.manifest["warnings"])


def test_edges_to_unknown_nodes_fail_when_asked(jsonl):
    path = jsonl("\n".join([CAMERA, NIKON, GHOST_EDGE]))
    unknown = r"edge .* points at unknown node 'ghost' \(use --on-unknown-edge skip to skip such edges\)"
    with pytest.raises(InputError, match=rf"^{at(path, 3)}: {unknown}$"):
        build_kb(JsonlImporter([path]), path.parent / "kb", Settings(on_unknown_edge="fail"))
    assert not (path.parent / "kb").exists()


def test_a_duplicate_id_with_another_type_names_both_places(jsonl):
    path = jsonl("\n".join([CAMERA, NIKON, '{"kind": "node", "id": "B001", "type": "Brand", "name": "Also B001"}']))
    with pytest.raises(InputError) as failure:
        build_kb(JsonlImporter([path]), path.parent / "kb")
    message = str(failure.value)
    assert message.startswith(f"{path}:3: duplicate node id 'B001'")
    assert f"first seen as https://w3id.org/kqe/skb#Product at {path}:1" in message
    assert "again as https://w3id.org/kqe/skb#Brand" in message


def test_a_duplicate_id_with_the_same_type_merges_its_text(jsonl):
    again = '{"kind": "node", "id": "B001", "type": "Product", "fields": {"description": "weather sealed"}}'
    kb = build(jsonl("\n".join([CAMERA, again])))
    assert kb.manifest["counts"]["duplicate_nodes"] == 1
    assert kb.manifest["counts"]["nodes"] == 1
    (document,) = kb.documents()
    assert "weather sealed" in document.text and "DSLR" in document.text


def test_an_empty_node_is_reported_not_indexed(jsonl):
    blank = '{"kind": "node", "id": "B002", "type": "Product", "fields": {"description": " "}}'
    kb = build(jsonl("\n".join([CAMERA, blank])))
    assert kb.manifest["counts"]["empty_nodes"] == 1
    assert any("node 'B002' has no name and no text; skipped" in w for w in kb.manifest["warnings"])
    assert [d.identifier for d in kb.documents()] == ["B001"]


def test_bytes_that_are_not_utf8_name_file_and_line(jsonl):
    path = jsonl(CAMERA.encode() + b'\n{"kind": "node", "id": "B002", "type": "Product", "name": "Caf\xe9"}\n')
    with pytest.raises(InputError, match=rf"^{at(path, 2)}: not UTF-8 text .*re-encode the file as UTF-8"):
        records(path)


@pytest.mark.parametrize("text", ["", "\n\n"], ids=["empty", "blank-lines"])
def test_a_file_without_nodes_is_a_clear_error(jsonl, text):
    path = jsonl(text)
    with pytest.raises(KqeError, match="the jsonl import produced no nodes with text; nothing to index"):
        build_kb(JsonlImporter([path]), path.parent / "kb")
    assert not (path.parent / "kb").exists()


def test_a_missing_file_is_an_error(tmp_path):
    with pytest.raises(KqeError, match="no-such.jsonl: no such file or folder"):
        records(tmp_path / "no-such.jsonl")
    with pytest.raises(KqeError, match="the jsonl importer needs a JSON Lines file"):
        list(JsonlImporter([]).records(ImportReport()))


def test_thousands_of_distinct_field_names_are_resolved_and_rendered(jsonl):
    """Each field name used to be looked up by a scan of every field (8,000 fields: 47 s to build)."""
    import time

    from kqe_rdf.kb.documents import VALUES_PROPERTIES
    from kqe_rdf.kb.ontology import Schema, Term

    count = 30_000
    schema = Schema(fields={f"https://example.org/f#field{i}": Term(f"https://example.org/f#field{i}", f"f{i}")
                            for i in range(count)})
    started = time.perf_counter()
    assert [schema.field(f"field{i}").label for i in range(count)] == [f"f{i}" for i in range(count)]
    assert time.perf_counter() - started < 5  # a scan per name: 900 million comparisons, minutes

    many = VALUES_PROPERTIES + 44  # past the size where documents stop naming the fields in VALUES
    lines = [f'{{"kind": "node", "id": "n{i}", "type": "Product", "name": "Node {i}", '
             f'"fields": {{"spec_{i}": "value {i}"}}}}' for i in range(many)]
    kb = build(jsonl("\n".join(lines)))
    texts = {d.identifier: d.text for d in kb.documents()}
    assert all(f"spec {i}: value {i}" in texts[f"n{i}"] for i in range(many))
