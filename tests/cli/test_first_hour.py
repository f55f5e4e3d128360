"""What a new user met in the first hour (issue 67): KB text that could drive the terminal or a spreadsheet, a
``sparql`` table that waited for its last row, and small edges of the commands.

Each test runs the ``kqe-rdf`` command as a user runs it (``CliRunner`` on :data:`kqe_rdf.cli.cli`, or the
installed script in a pipe), in an empty working directory with no ``KQE_*`` variables, on small KBs built here.
"""

from __future__ import annotations

import csv
import io
import os

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
