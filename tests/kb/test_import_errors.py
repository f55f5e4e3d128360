"""Malformed import files and options, as a careless or hostile user gives them to ``kqe-rdf kb build``.

Each one is refused with one line naming ``file:line`` (or the option at fault), and the KB
that was there before is byte for byte what it was. The cases are the ones a probe of the
importers found ending in a Python traceback, an abort, or silent acceptance (issue 15,
items 7 and 9), plus the inputs that used to be refused and are now read (``.owl``, a BOM).
"""

from __future__ import annotations

import gzip
import json
import time

import pytest
from click.testing import CliRunner

from support.hostile_inputs import kb_digest, names_the_place, one_line_error
from kqe_rdf.kb.build import build_kb
from kqe_rdf.cli import cli
from kqe_rdf.kb.importers.jsonl import JsonlImporter
from kqe_rdf.kb.knowledge_base import KnowledgeBase

pytestmark = pytest.mark.slow  # servers, subprocesses or big inputs: not in `make test-quick`

NODE = {"kind": "node", "id": "x1", "type": "Product", "name": "Tripod"}
LABEL = "http://www.w3.org/2000/01/rdf-schema#label"
RDF_XML = """<?xml version="1.0"?>
{doctype}<rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#" xmlns:rdfs="http://www.w3.org/2000/01/rdf-schema#">
<rdf:Description rdf:about="{about}"><rdfs:label>{label}</rdfs:label></rdf:Description></rdf:RDF>
"""
LAUGHS = "<!DOCTYPE lolz [\n<!ENTITY lol0 \"lol\">\n" + "".join(
    f'<!ENTITY lol{i} "{f"&lol{i - 1};" * 10}">\n' for i in range(1, 10)) + "]>\n"


def node(**changes) -> str:
    return json.dumps({**NODE, **changes})


def big_literal_line() -> str:
    return node(fields={"description": "a" * (17 << 20)})


@pytest.fixture(scope="module")
def kb_path(tmp_path_factory, products_file):
    path = tmp_path_factory.mktemp("target") / "products"
    build_kb(JsonlImporter([products_file]), path)
    return path


@pytest.fixture
def refused(kb_path, tmp_path):
    """``refused(importer, name, content, *options)`` → the one-line error; the KB must not have changed."""

    def run(importer: str, name: str, content: str | bytes, *options: str, line: bool = True) -> str:
        """``content`` as text is written as UTF-8 (compressed for ``.gz`` names); bytes are written as given."""
        source = tmp_path / name
        if isinstance(content, str):
            content = content.encode("utf-8")
            content = gzip.compress(content) if name.endswith(".gz") else content
        source.write_bytes(content)
        before = kb_digest(kb_path)
        result = CliRunner().invoke(cli, ["kb", "build", importer, str(source), "--kb", str(kb_path), "--force",
                                          *options])
        message = one_line_error(result)
        assert names_the_place(message, source, line), message
        assert kb_digest(kb_path) == before
        return message

    return run


# --- item 7: tracebacks that became one-line errors --------------------------------------------


@pytest.mark.parametrize("line, expected", [
    ('{"kind": "node", "id": "x", "type": "Product", "fields": {"d": ' + "[" * 1000 + "]" * 1000 + "}}",
     "JSON nested too deeply"),
    ("[" * 100_000 + "]" * 100_000, "JSON nested too deeply"),
    ('{"kind": "edge", "head": "a", "relation": "r", "tail": "b", "qualifiers": {"q": ' + "{\"a\": " * 5000
     + "1" + "}" * 5000 + "}}", "JSON nested too deeply"),
    (node(iri=5), "'iri' must be a string (an absolute IRI), not 5"),
    (node(iri=["http://x/a"]), "'iri' must be a string"),
    (node(iri={"@id": "http://x/a"}), "'iri' must be a string"),
    (node(iri=True), "'iri' must be a string (an absolute IRI), not true"),
    ('{"kind": "node", "id": "a\\ud800", "type": "Product", "name": "X"}', "lone surrogate"),
    ('{"kind": "node", "id": "a", "type": "Product", "name": "\\udfff"}', "lone surrogate"),
    ('{"kind": "node", "id": "a", "type": "Product", "fields": {"d": "x\\uDBFF"}}', "lone surrogate"),
    ('{"kind": "edge", "head": "\\ud800", "relation": "hasBrand", "tail": "b"}', "lone surrogate"),
    ('{"kind": "node", "id": ' + "9" * 4301 + ', "type": "Product", "name": "X"}', "a number too long to read"),
    ('{"kind": "edge", "head": "a", "relation": "r", "tail": "b", "qualifiers": {"n": ' + "1" * 10_000 + "}}",
     "a number too long to read"),
    (node(fields={"d": ["a"]})[:-1] + ', "extra": -' + "7" * 5000 + "}", "a number too long to read"),
    (node(name="n" * (17 << 20)), "the name is"),
    (node(fields={"description": "d" * (17 << 20)}), "field 'description' is"),
    (node(aliases=["a" * (9 << 20)]), "an alias is"),
], ids=["nested-field", "nested-line", "nested-qualifier", "iri-int", "iri-list", "iri-object", "iri-true",
        "surrogate-id", "surrogate-name", "surrogate-field", "surrogate-edge", "int-4301-digits-id",
        "int-qualifier", "int-unused-key", "literal-17mib-name", "literal-17mib-field", "literal-9mib-alias"])
def test_malformed_json_lines_are_one_line_errors_at_their_line(refused, line, expected):
    message = refused("jsonl", "kb.jsonl", node(id="ok") + "\n" + line + "\n")
    assert "kb.jsonl:2: " in message and expected in message


def test_options_are_checked_and_named(refused, products_text, tmp_path):
    good = products_text
    assert "--option domain='a b'" in refused("jsonl", "kb.jsonl", good, "--option", "domain=a b")
    assert "--option domain='../x'" in refused("jsonl", "kb.jsonl", good, "--option", "domain=../x")
    hostname = tmp_path / "hostname"
    hostname.write_text("vm-1234\n")
    message = refused("jsonl", "kb.jsonl", good, "--option", f"ontology={hostname}")
    assert f"--option ontology={hostname}: not a Turtle ontology: {hostname}:1: " in message
    message = refused("jsonl", "kb.jsonl", good, "--option", f"ontology={tmp_path / 'none.ttl'}")
    assert "none.ttl: no such file" in message
    turtle = f'<http://x/a> <{LABEL}> "A" .\n'
    message = refused("rdf", "kb.ttl", turtle, "--text-property", "http://x/p q")
    assert message == "error: --text-property 'http://x/p q' is not an IRI or a known CURIE (Invalid IRI code point ' ')"
    assert "--text-property 'nosuch:label'" in refused("rdf", "kb.ttl", turtle, "--text-property", "nosuch:label")


# --- item 9: JSON Lines accepted silently, or reported without file:line ----------------------


@pytest.mark.parametrize("line, expected", [
    ('{"kind": "node", "id": "x", "type": "Product", "name": ["a", "b"]}', "'name' must be a string, not [\"a\", \"b\"]"),
    ('{"kind": "node", "id": true, "type": "Product", "name": "X"}', "a node needs a non-empty 'id' (a string or an integer, not true)"),
    ('{"kind": "edge", "head": false, "relation": "hasBrand", "tail": "b"}', "an edge needs a non-empty 'head'"),
    ('{"kind": "node", "id": 1e999999, "type": "Product", "name": "X"}', "the number 1e999999 is out of range"),
    ('{"kind": "edge", "head": "a", "relation": "r", "tail": "b", "qualifiers": {"w": -1e999999}}', "out of range"),
    ('{"kind": "edge", "head": "a", "relation": "r", "tail": "b", "qualifiers": {"w": NaN}}', "NaN is not a JSON number"),
    ('{"kind": "edge", "head": "a", "relation": "r", "tail": "b", "qualifiers": {"w": [1]}}', "qualifier 'w' must be a string or a number"),
    (node(iri="not an iri"), "'iri' 'not an iri' is not a valid IRI"),
    (node(iri="http://x/a b"), "is not a valid IRI"),
    (node(id="i" * 5000), "is 5,000 characters long; at most 4,096"),
], ids=["name-list", "id-true", "head-false", "id-overflow", "qualifier-overflow", "qualifier-nan", "qualifier-list",
        "iri-with-spaces", "iri-invalid-character", "id-too-long"])
def test_values_of_the_wrong_kind_are_refused_at_their_line(refused, line, expected):
    message = refused("jsonl", "kb.jsonl", node(id="ok") + "\n" + line + "\n")
    assert "kb.jsonl:2: " in message and expected in message


def test_an_explicit_iri_may_not_be_another_nodes(refused):
    taken = "https://w3id.org/kqe/skb/node/a"
    message = refused("jsonl", "kb.jsonl", "\n".join([node(id="a"), node(id="b", iri=taken)]) + "\n")
    assert "kb.jsonl:2: node 'b' has the IRI <https://w3id.org/kqe/skb/node/a> of node 'a' (first seen at " in message
    message = refused("jsonl", "kb.jsonl", "\n".join([node(id="b", iri=taken), node(id="a")]) + "\n")
    assert "kb.jsonl:2: node 'a' has the IRI <https://w3id.org/kqe/skb/node/a> of node 'b'" in message


def test_an_unknown_type_names_its_line(refused, tmp_path):
    ontology = tmp_path / "shop.ttl"
    ontology.write_text("@prefix kqe: <https://w3id.org/kqe/core#> . "
                        "@prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> .\n"
                        "<http://shop/Product> rdfs:subClassOf kqe:Node .\n")
    message = refused("jsonl", "kb.jsonl", node(id="ok") + "\n" + node(id="x", type="Gadget") + "\n",
                      "--option", f"ontology={ontology}")
    assert "kb.jsonl:2: the ontology defines no class 'Gadget'" in message


# --- item 9: RDF files ------------------------------------------------------------------------


def test_billion_laughs_is_refused_before_the_parser_sees_it(refused):
    started = time.perf_counter()
    message = refused("rdf", "lol.rdf", RDF_XML.format(doctype=LAUGHS, about="http://x/a", label="&lol9;"))
    assert message.startswith("error: ") and "lol.rdf:2: refused: entity 'lol" in message
    assert "would expand to more than 1 MiB" in message
    assert time.perf_counter() - started < 10  # refused from the declarations, nothing expanded
    # declared and never used is refused as well: Oxigraph expands declarations as it reads them
    refused("rdf", "unused.rdf", RDF_XML.format(doctype=LAUGHS, about="http://x/a", label="A"))
    # flat, a megabyte entity referenced a hundred times: a quadratic blow-up
    flat = '<!DOCTYPE r [ <!ENTITY big "' + "b" * 1_000_000 + '"> ]>\n'
    message = refused("rdf", "flat.rdf", RDF_XML.format(doctype=flat, about="http://x/a", label="&big;" * 100))
    assert "entity references would add 100,000,000 bytes" in message
    cycle = '<!DOCTYPE r [ <!ENTITY a "&b;"> <!ENTITY b "&a;"> ]>\n'
    assert "refers to itself" in refused("rdf", "cycle.rdf", RDF_XML.format(doctype=cycle, about="http://x/a", label="&a;"))
    external = '<!DOCTYPE r [ <!ENTITY secret SYSTEM "file:///etc/passwd"> ]>\n'
    assert "external entity 'secret' is not supported" in refused(
        "rdf", "xxe.rdf", RDF_XML.format(doctype=external, about="http://x/a", label="&secret;"))


def test_rdf_xml_with_flat_entities_as_ontology_editors_write_it_is_read(tmp_path):
    doctype = '<!DOCTYPE rdf:RDF [\n <!ENTITY x "http://x/">\n <!ENTITY y "&x;y/">\n]>\n'
    source = tmp_path / "onto.owl"  # .owl is RDF/XML, as the README says
    source.write_text(RDF_XML.format(doctype=doctype, about="&y;a", label="Tripod &amp; head"), encoding="utf-8")
    build_kb(_rdf(source), tmp_path / "kb")
    (document,) = KnowledgeBase.open(tmp_path / "kb").documents()
    assert (document.iri, document.name) == ("http://x/y/a", "Tripod & head")


def _rdf(*sources, **options):
    from kqe_rdf.kb.importers.rdf import RdfImporter

    return RdfImporter(list(sources), **options)


@pytest.mark.parametrize("name", ["kb.ttl", "kb.nt", "kb.ttl.gz"])
def test_a_utf8_byte_order_mark_is_skipped(tmp_path, name):
    source = tmp_path / name
    data = f'\ufeff<http://x/a> <{LABEL}> "Tripod" .\n'.encode("utf-8")
    source.write_bytes(gzip.compress(data) if name.endswith(".gz") else data)
    build_kb(_rdf(source), tmp_path / "kb")
    assert [d.name for d in KnowledgeBase.open(tmp_path / "kb").documents()] == ["Tripod"]


@pytest.mark.parametrize("importer, name, line", [
    ("rdf", "cut.ttl.gz", f'<http://x/a> <{LABEL}> "A" .\n'),
    ("jsonl", "cut.jsonl.gz", node(id="ok") + "\n"),
])
def test_a_truncated_or_corrupt_gzip_is_a_clear_error_not_an_abort(refused, importer, name, line):
    whole = gzip.compress(line.encode() * 5000)
    message = refused(importer, name, whole[: len(whole) // 2], line=False)
    assert f"{name}: " in message and "cut short" in message
    corrupt = bytearray(whole)
    corrupt[len(corrupt) // 2] ^= 0xFF
    assert "corrupt" in refused(importer, name, bytes(corrupt), line=False)


def test_the_console_script_says_what_is_wrong_with_a_truncated_gzip(tmp_path):
    """It printed "aborted" with status 130, as for a Ctrl-C (click turns an EOFError into an abort)."""
    import subprocess
    import sys
    from pathlib import Path

    source = tmp_path / "cut.ttl.gz"
    whole = gzip.compress(f'<http://x/a> <{LABEL}> "A" .\n'.encode() * 5000)
    source.write_bytes(whole[: len(whole) // 2])
    script = Path(sys.executable).with_name("kqe-rdf")
    done = subprocess.run([str(script), "kb", "build", "rdf", str(source), "--kb", str(tmp_path / "kb")],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert f"error: {source}: the compressed file ends too early" in done.stderr


def test_an_over_long_statement_in_turtle_names_its_line(refused):
    message = refused("rdf", "big.ttl", f'<http://x/a> <{LABEL}> "A" .\n<http://x/b> <{LABEL}> "{"b" * (17 << 20)}" .\n')
    assert "big.ttl:2: a statement longer than the 16 MiB Oxigraph's parser holds" in message


def test_a_literal_over_8_mib_in_rdf_xml_names_the_file_and_triple(refused):
    message = refused("rdf", "big.rdf", RDF_XML.format(doctype="", about="http://x/a", label="c" * (9 << 20)),
                      line=False)
    assert "big.rdf: the literal of <http://x/a> <http://www.w3.org/2000/01/rdf-schema#label> is " in message
