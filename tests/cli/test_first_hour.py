"""What a new user met in the first hour (issue 67): KB text that could drive the terminal or a spreadsheet, a
``sparql`` table that waited for its last row, and small edges of the commands.

Each test runs the ``kqe-rdf`` command as a user runs it (``CliRunner`` on :data:`kqe_rdf.cli.cli`, or the
installed script in a pipe), in an empty working directory with no ``KQE_*`` variables, on small KBs built here.
"""

from __future__ import annotations

import csv
import subprocess
import sys
import time
import io
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from kqe_rdf.cli import cli
from kqe_rdf.core.inert import csv_cell, visible


@pytest.fixture(autouse=True)
def clean_environment(tmp_path, monkeypatch):
    for name in list(os.environ):
        if name.startswith(("KQE_", "OPENAI_")):
            monkeypatch.delenv(name)
    monkeypatch.setenv("COLUMNS", "250")
    monkeypatch.chdir(tmp_path)


def run(*args: object):
    return CliRunner().invoke(cli, [str(a) for a in args])


def ok(result):
    assert result.exit_code == 0, f"exit {result.exit_code}: {result.output}\n{result.exception!r}"
    return result


# --------------------------------------------------------- 4. KB text stays inert

#: Names that set the window title and clear the screen, and a literal a spreadsheet would run.
HOSTILE = r"""@prefix ex: <http://example.org/> .
@prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> .
ex:ann rdfs:label "Ann\u001B]0;owned\u0007 Lee" ; ex:parentOf ex:bob ; ex:note "=HYPERLINK(\"http://x\")" .
ex:bob rdfs:label "Bob\u001B[2J\u009B" ; ex:note "-12" , "@SUM(A1)" , "+cmd" .
"""


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    folder = tmp_path_factory.mktemp("hostile")
    (folder / "h.ttl").write_text(HOSTILE, encoding="utf-8")
    ok(run("kb", "build", "rdf", folder / "h.ttl", "--kb", folder / "kb"))
    return folder / "kb"


def shows_escapes(out: str) -> None:
    assert "\x1b" not in out and "\x07" not in out and "\x9b" not in out
    assert "\\x1b" in out


def test_search_shows_control_characters_of_names_as_text(hostile):
    out = ok(run("search", "Ann Lee", "--kb", hostile)).stdout
    shows_escapes(out)
    assert "Ann\\x1b]0;owned\\x07 Lee" in out


def test_ask_shows_control_characters_of_answers_and_evidence_as_text(hostile):
    out = ok(run("ask", "who is the parent of Bob", "--kb", hostile)).stdout
    shows_escapes(out)
    assert "Ann\\x1b]0;owned\\x07 Lee" in out


def test_the_sparql_table_shows_control_characters_as_text(hostile):
    out = ok(run("sparql", "SELECT ?n WHERE { ?a rdfs:label ?n } ORDER BY ?n", "--kb", hostile,
                 "--format", "table")).stdout
    shows_escapes(out)
    assert "Bob\\x1b[2J\\x9b" in out


def test_sparql_csv_neutralises_formulas_and_keeps_numbers(hostile):
    out = ok(run("sparql", "SELECT ?v WHERE { ?a ex:note ?v } ORDER BY ?v", "--kb", hostile,
                 "--format", "csv")).stdout
    rows = list(csv.reader(io.StringIO(out)))
    assert rows[0] == ["v"]
    assert sorted(r[0] for r in rows[1:]) == sorted(["'+cmd", "-12", "'=HYPERLINK(\"http://x\")", "'@SUM(A1)"])


def test_the_two_rules_on_their_own():
    assert visible("a\x1b[31mb\rc\x00") == "a\\x1b[31mb\\x0dc\\x00" and visible("é\n\t") == "é\n\t"
    assert [csv_cell(c) for c in ("=1+1", "+1", "-1.5e3", "-x", "@a", "\tx", "a=b")] == \
        ["'=1+1", "+1", "-1.5e3", "'-x", "'@a", "'\tx", "a=b"]


# --------------------------------------------------------- 3. the sparql table streams

#: 100 × 1,000 = 100,000 rows from any KB: two VALUES blocks joined.
HUNDRED_THOUSAND = ("SELECT ?a ?b WHERE { VALUES ?a { " + " ".join(f"<http://example.org/a/{i}>" for i in range(100))
                    + " } VALUES ?b { " + " ".join(str(i) for i in range(1000)) + " } }")


def test_a_sparql_table_of_100000_rows_gives_a_pipe_its_first_row_at_once(hostile, tmp_path):
    query = tmp_path / "big.rq"
    query.write_text(HUNDRED_THOUSAND, encoding="utf-8")
    script = Path(sys.executable).with_name("kqe-rdf")
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    started = time.perf_counter()
    child = subprocess.Popen([str(script), "sparql", str(query), "--kb", str(hostile), "--format", "table"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    head = [child.stdout.readline() for _ in range(4)]  # `| head -4`: the header and the first row
    first_row = time.perf_counter() - started
    child.stdout.close()
    _, err = child.communicate(timeout=60)
    assert head[1].split() == ["┃", "a", "┃", "b", "┃"] and head[3].startswith("│ http://example.org/a/")
    # Laid out whole, the first row came after every row's layout (minutes); streamed, after the process start.
    assert first_row < 20, first_row
    assert child.returncode == 0 and "Traceback" not in err and "output closed before the last row" in err


def test_a_streamed_sparql_table_holds_every_row(hostile, monkeypatch):
    import kqe_rdf.cli as commands

    monkeypatch.setattr(commands, "_TABLE_BLOCK", 7)  # blocks of 7 rows: 1,000 rows in many blocks
    query = HUNDRED_THOUSAND.replace(str(list(range(1000)))[1:-1].replace(",", ""), " ".join(map(str, range(10))))
    result = ok(run("sparql", query, "--kb", hostile, "--format", "table"))
    lines = result.stdout.splitlines()
    body = [line for line in lines if line.startswith("│")]
    assert len(body) == 1000 and lines[0].startswith("┏") and lines[-1].startswith("└")
    assert {tuple(cell.strip() for cell in line.split("│")[1:-1]) for line in body} == \
        {(f"http://example.org/a/{a}", str(b)) for a in range(100) for b in range(10)}
    assert result.stderr.splitlines()[0] == "1,000 result(s)"


# --------------------------------------------------------- 5. smaller edges


def test_tune_fusion_and_eval_refuse_a_sample_or_depth_below_one_in_one_line(hostile, tmp_path):
    queries = tmp_path / "q.txt"
    queries.write_text("who is [Ann]\tBob\n", encoding="utf-8")
    for args, said in [(("kb", "tune-fusion", "metaqa", queries, "--sample", "-1"), "--sample must be at least 1"),
                       (("kb", "tune-fusion", "metaqa", queries, "--depth", "0"), "--depth must be at least 1"),
                       (("kb", "tune-fusion", "metaqa", queries, "--limit", "0"), "--limit must be at least 1"),
                       (("eval", "metaqa", queries, "--sample", "-1"), "--sample must be at least 1")]:
        result = run(*args, "--kb", hostile)
        assert result.exit_code == 2 and "Traceback" not in result.output, result.output
        assert [line for line in result.stderr.splitlines() if line.startswith("error:")] == \
            [f"error: {said}, got {args[-1]}"]


def test_triplets_of_an_empty_text_is_refused(hostile):
    for text in ("", "   "):
        result = run("triplets", text, "--kb", hostile)
        assert result.exit_code == 2 and "error: TEXT is empty" in result.stderr


@pytest.mark.parametrize("text", ["", "# nothing yet\n@prefix ex: <http://example.org/> .\n"])
def test_an_rdf_file_with_no_triple_says_so(tmp_path, text):
    (tmp_path / "empty.ttl").write_text(text, encoding="utf-8")
    result = run("kb", "build", "rdf", tmp_path / "empty.ttl", "--kb", tmp_path / "kb")
    assert result.exit_code == 2 and "the file holds no triples" in result.stderr, result.output
    assert not (tmp_path / "kb").exists()


def test_every_kb_folder_the_usage_page_names_is_built_on_it():
    import re

    from support.paths import ROOT

    page = (ROOT / "docs" / "usage.md").read_text(encoding="utf-8")
    built = set(re.findall(r"kb build [^`]*?--kb (data/kb/[\w.-]+)", page)) | {"data/kb/music"}  # music: named
    assert set(re.findall(r"--kb (data/kb/[\w.-]+)", page)) - built == set()                    # as a new folder


def test_a_build_with_another_limit_or_option_is_another_source(tmp_path):
    from kqe_rdf.kb.knowledge_base import KnowledgeBase

    family = tmp_path / "family.txt"
    family.write_text("Ann\tparent_of\tBob\nBob\tparent_of\tCid\nAnn\tlives_in\tOslo\n", encoding="utf-8")
    ok(run("kb", "build", "triples", family, "--kb", tmp_path / "kb"))
    for other in (("--limit", "1"), ("--option", "kind=Person")):
        result = run("kb", "build", "triples", family, "--kb", tmp_path / "kb", *other)
        assert result.exit_code == 2 and "would replace it" in result.stderr and " ".join(other) in result.stderr, \
            result.output
    assert KnowledgeBase.open(tmp_path / "kb").manifest["counts"]["nodes"] == 4  # the full KB, untouched
    ok(run("kb", "build", "triples", family, "--kb", tmp_path / "kb"))  # the same source rebuilds
    ok(run("kb", "build", "triples", family, "--kb", tmp_path / "small", "--limit", "1"))
    ok(run("kb", "build", "triples", family, "--kb", tmp_path / "small", "--limit", "1"))  # and so does a trial


#: CURIEs of the common vocabularies and the IRIs they stand for (the hostile KB's file declares none of them).
COMMON = {"foaf:name": "http://xmlns.com/foaf/0.1/name", "schema:name": "http://schema.org/name",
          "dc:title": "http://purl.org/dc/elements/1.1/title", "dcterms:title": "http://purl.org/dc/terms/title",
          "skos:prefLabel": "http://www.w3.org/2004/02/skos/core#prefLabel",
          "owl:sameAs": "http://www.w3.org/2002/07/owl#sameAs",
          "rdf:type": "http://www.w3.org/1999/02/22-rdf-syntax-ns#type",
          "rdfs:label": "http://www.w3.org/2000/01/rdf-schema#label",
          "xsd:date": "http://www.w3.org/2001/XMLSchema#date",
          "wd:Q12136": "http://www.wikidata.org/entity/Q12136", "wdt:P31": "http://www.wikidata.org/prop/direct/P31"}


def test_sparql_knows_the_common_vocabularies_prefixes(hostile):
    import json

    binds = " ".join(f"BIND({curie} AS ?v{i})" for i, curie in enumerate(COMMON))
    out = json.loads(ok(run("sparql", f"SELECT * WHERE {{ {binds} }}", "--kb", hostile, "--format", "json")).stdout)
    row = out["results"]["bindings"][0]
    assert [row[f"v{i}"]["value"] for i in range(len(COMMON))] == list(COMMON.values())


def test_a_text_property_is_a_curie_of_a_common_vocabulary(tmp_path):
    from kqe_rdf.kb.knowledge_base import KnowledgeBase

    (tmp_path / "p.ttl").write_text(
        "<http://example.org/ann> <http://www.w3.org/2000/01/rdf-schema#label> \"Ann\" ;\n"
        "    <http://xmlns.com/foaf/0.1/nick> \"Annie\" ;\n"
        "    <http://purl.org/dc/elements/1.1/description> \"violinist\" ;\n"
        "    <http://example.org/knows> <http://example.org/bob> .\n"
        "<http://example.org/bob> <http://www.w3.org/2000/01/rdf-schema#label> \"Bob\" .\n", encoding="utf-8")
    ok(run("kb", "build", "rdf", tmp_path / "p.ttl", "--kb", tmp_path / "kb", "--text-property", "foaf:nick",
           "--text-property", "dc:description"))
    kb = KnowledgeBase.open(tmp_path / "kb")
    assert kb.manifest["text_properties"] == ["http://xmlns.com/foaf/0.1/nick",
                                              "http://purl.org/dc/elements/1.1/description"]
    assert "Annie" in kb.document("http://example.org/ann").text
