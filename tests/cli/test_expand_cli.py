"""`kqe-rdf expand` as a user runs it (issue 26): readable by default, one line for pipes, stdin, a size
limit, saying when an LLM method ran offline, and never a fact that contradicts the request."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from support.fixtures_kb import bio_kb  # noqa: F401 - fixture
from kqe_rdf.cli import cli
from support.paths import ROOT


@pytest.fixture
def expand(bio_kb, monkeypatch):  # noqa: F811
    import os

    for name in list(os.environ):
        if name.startswith(("KQE_", "OPENAI_")):
            monkeypatch.delenv(name)

    def run(*args: str, stdin: str | None = None):
        result = CliRunner().invoke(cli, ["expand", *args, "--kb", str(bio_kb.path)], input=stdin)
        return result

    return run


def test_in_a_pipe_the_expanded_query_is_one_line(expand):
    result = expand("seizures and microcephaly", "-m", "kar-offline")
    assert result.exit_code == 0 and len(result.stdout.strip().splitlines()) == 1
    assert result.stdout.startswith("seizures and microcephaly")
    assert expand("seizures and microcephaly", "-m", "kar-offline", "--plain").stdout == result.stdout


def test_text_dash_reads_standard_input(expand):
    result = expand("-", "-m", "kar-offline", "--json", stdin="seizures and microcephaly\n")
    assert result.exit_code == 0 and json.loads(result.stdout)["query"] == "seizures and microcephaly"
    # `echo "seizures and microcephaly" | kqe-rdf expand -`: one line out, the piped line's newline left behind.
    piped = expand("-", "-m", "kar-offline", stdin="seizures and microcephaly\n")
    assert piped.exit_code == 0 and piped.stdout.count("\n") == 1
    assert piped.stdout.startswith("seizures and microcephaly ") and piped.stdout == expand(
        "seizures and microcephaly", "-m", "kar-offline").stdout


def test_a_method_that_wants_an_llm_says_it_ran_offline(expand):
    result = expand("seizures", "-m", "kar")
    assert result.exit_code == 0 and "kar ran offline" in result.stderr
    data = json.loads(expand("seizures", "-m", "kar", "--json").stdout)
    assert data["ran_offline"] and "ran offline" in data["notes"][0]
    assert json.loads(expand("seizures", "-m", "kar-offline", "--json").stdout)["ran_offline"] is False


def test_an_over_long_request_is_refused_in_one_line(expand):
    result = expand("-", "-m", "kar-offline", stdin="word " * 3000)
    assert result.exit_code == 2 and "at most 10,000 are expanded (setting expand_max_chars)" in result.stderr


def test_no_appended_fact_says_the_request_s_phenotype_is_absent(expand):
    data = json.loads(expand("child with seizures", "-m", "kar-offline", "--json").stdout)
    assert data["neighbours"] and not any("lacks" in n["relation"] for n in data["neighbours"])
    negated = json.loads(expand("no seizures were observed", "-m", "kar-offline", "--json").stdout)
    assert negated["query"] == "no seizures were observed"  # a negating request may follow such relations


def test_prf_is_rm3_for_expand_as_for_search_and_the_usage_page(expand, bio_kb):  # noqa: F811
    from pathlib import Path

    from kqe_rdf.methods.retrieval import RM3
    from kqe_rdf.kb.words import terms

    data = json.loads(expand("high forehead", "-m", "prf", "--json").stdout)
    weights = RM3(bio_kb).expansion("high forehead")
    added = [t for t, w in sorted(weights.items(), key=lambda tw: (-tw[1], tw[0])) if t not in terms("high forehead")]
    assert data["method"] == "prf" and data["expansions"] == added and data["expansions"]
    assert data["context"][0].split()[0] == max(weights, key=weights.get)  # the weights search -m prf uses
    help_text = " ".join(CliRunner().invoke(cli, ["expand", "--help"]).output.split())
    usage = (ROOT / "docs" / "usage.md").read_text(encoding="utf-8")
    assert "prf (the words RM3 adds, as search -m prf uses them)" in help_text and "prf is prf-docs" not in help_text
    assert "`prf` (RM3 on BM25" in usage and "prf-docs" in usage


@pytest.mark.parametrize("request_", ["high forehead", "seizures and microcephaly", "focal epilepsy"])
def test_prf_adds_no_word_of_the_documents_template(expand, bio_kb, request_):  # noqa: F811
    """Issue 67: RM3 counted the field labels every document has ("definition", "has phenotype", "type: disease")
    and added them to requests."""
    from kqe_rdf.kb.documents import template_labels
    from kqe_rdf.kb.words import terms

    labels = template_labels(bio_kb.schema) | {bio_kb.schema.label(c) for c in bio_kb.schema.classes}
    template = {w for label in labels for w in terms(label)}
    data = json.loads(expand(request_, "-m", "prf", "--json").stdout)
    assert data["expansions"] and not set(data["expansions"]) & template, data["expansions"]
