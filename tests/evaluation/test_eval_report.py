"""What `kqe-rdf eval` leaves behind to find out why a method fails: per-query records and an HTML report.

One evaluation of three methods on MetaQA-style 1-hop and 2-hop questions over the tiny movie KB
(real build, real indexes) writes both; the report is then opened in the real browser (Debian
chromium), which saves a screenshot under tests/artifacts/ (gitignored).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from support.fixtures_kb import movie_kb  # noqa: F401 - fixture
from kqe_rdf.cli import cli
from support.browser import ARGS, ARTIFACTS, browser_or_skip, new_tab

pytestmark = pytest.mark.slow  # servers, subprocesses or big inputs: not in `make test-quick`

ONE_HOP = """\
who directed [Kismet]\tWilliam Dieterle
what films did [Ridley Scott] direct\tAlien|Blade Runner
who directed [Delicatessen]\tJean-Pierre Jeunet
"""
TWO_HOP = """\
who acted in the films directed by [Peter Weir]\tHarrison Ford
which movies share actors with [Witness]\tBlade Runner
"""
METHODS = ("bm25", "4step-offline", "kar-offline")
M = "https://w3id.org/kqe/metaqa/node/"


@pytest.fixture(scope="module")
def evaluated(movie_kb, tmp_path_factory):  # noqa: F811
    """(records by (method, qid), the report's path) of one evaluation run as a user runs it."""
    folder = tmp_path_factory.mktemp("eval")
    for hops, text in (("1-hop", ONE_HOP), ("2-hop", TWO_HOP)):
        (folder / hops).mkdir()
        (folder / hops / "dev.txt").write_text(text, encoding="utf-8")
    per_query, report = folder / "per-query.jsonl", folder / "report.html"
    args = ["eval", "metaqa", folder / "1-hop" / "dev.txt", folder / "2-hop" / "dev.txt", "--kb", movie_kb.path,
            "--depth", "20", "--per-query", per_query, "--report", report, "--run-dir", folder / "runs"]
    for method in METHODS:
        args += ["-m", method]
    result = CliRunner().invoke(cli, [str(a) for a in args])
    assert result.exit_code == 0, result.output
    records = {(r["method"], r["qid"]): r for r in map(json.loads, per_query.read_text(encoding="utf-8").splitlines())}
    return records, report


def test_a_per_query_record_says_what_was_asked_what_came_back_and_why(evaluated):
    records, _report = evaluated
    assert len(records) == len(METHODS) * 5
    r = records[("4step-offline", "2-hop-1")]
    assert r["query"] == "who acted in the films directed by Peter Weir"
    assert r["facets"] == {"hops": "2-hop", "template": "who acted in the films directed by E"}
    assert (r["Hit@1"], r["MRR"]) == (1.0, 1.0)  # the metrics stay at the top level
    assert r["gold"] == [{"id": "Harrison Ford", "relevance": 1, "iris": [M + "Harrison%20Ford"],
                          "name": "Harrison Ford"}]
    assert len(r["ranked"]) == 10  # the top 10 of the 20 ranked
    assert r["ranked"][0] == {"rank": 1, "iri": M + "Harrison%20Ford", "id": "Harrison Ford",
                              "name": "Harrison Ford", "score": r["ranked"][0]["score"], "gold": True}
    assert not any(h["gold"] for h in r["ranked"][1:])
    assert [h["rank"] for h in r["ranked"]] == list(range(1, 11))

    why = r["explanation"]
    assert why["reader"] == "offline" and why["answer_type"] == "Person"
    assert any("directed_by, Peter Weir)" in t for t in why["triplets"])
    assert any("starred_actors" in t for t in why["triplets"])
    assert why["linked"]["Peter Weir"][0].startswith("Peter Weir (exact")
    assert why["candidates"] == 1 and why["topped_up"] == 19  # to the depth of 20
    assert "directed_by" in why["sparql"] and "LIMIT" in why["sparql"]
    assert why["why"][0]["name"] == "Harrison Ford" and "Peter Weir" in why["why"][0]["because"][0]

    kar = records[("kar-offline", "1-hop-2")]["explanation"]
    assert "(Alien) --directed by--> (Ridley Scott)" in kar["facts"]
    assert kar["entities"]["Ridley Scott"] == ["Ridley Scott"]
    assert records[("bm25", "1-hop-1")]["explanation"] == {}  # BM25 keeps nothing beyond its scores


def test_the_report_opens_in_the_browser_with_its_table_chart_and_worst_queries(evaluated):
    _records, report = evaluated
    executable = browser_or_skip()
    import playwright.sync_api as playwright

    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=executable, args=ARGS)
        try:
            page = new_tab(browser, 1300)
            fetched = []
            page.on("request", lambda request: fetched.append(request.url))
            page.goto(report.as_uri())
            rows = page.locator("#metric-table tbody tr")
            assert [rows.nth(i).locator("td").first.text_content() for i in range(rows.count())] == list(METHODS)
            assert "Hit@1" in page.locator("#metric-table thead").text_content()

            bars = page.locator("svg#chart rect.bar")
            assert bars.count() == len(METHODS) * 5  # Hit@1, Hit@5, Recall@20, MRR, nDCG@10
            assert bars.first.bounding_box()["width"] > 0
            height = {(b.get_attribute("data-method"), b.get_attribute("data-metric")): float(b.get_attribute("height"))
                      for b in bars.all()}
            assert height[("4step-offline", "Hit@1")] > height[("kar-offline", "Hit@1")] > height[("bm25", "Hit@1")]

            hops = page.locator('table.by-type[data-facet="hops"] tbody tr td:first-child').all_text_contents()
            assert sorted(hops) == ["1-hop", "2-hop"]
            assert page.locator('table.by-type[data-facet="template"] tbody tr').count() == 4
            worst = page.locator('.worst[data-method="bm25"] .query')
            assert worst.count() == 5 and worst.first.get_attribute("data-qid") == "2-hop-1"  # MRR 0 comes first
            assert page.locator('.worst[data-method="4step-offline"] details pre').first.text_content().startswith(
                "SELECT")
            assert fetched == [report.as_uri()]  # self-contained: nothing else is loaded

            ARTIFACTS.mkdir(exist_ok=True)
            shot = ARTIFACTS / "eval-report.png"
            page.screenshot(path=str(shot), full_page=True)
            print(f"screenshot saved: {shot}")
        finally:
            browser.close()


def test_report_and_per_query_paths_are_checked_before_the_evaluation_runs(movie_kb, tmp_path):  # noqa: F811
    questions = tmp_path / "dev.txt"
    questions.write_text(ONE_HOP, encoding="utf-8")
    for option in ("--report", "--per-query"):
        result = CliRunner().invoke(cli, ["eval", "metaqa", str(questions), "--kb", str(movie_kb.path),
                                          option, str(tmp_path / "absent" / "out")])
        assert result.exit_code == 2 and option in result.output and "does not exist" in result.output
        assert "Traceback" not in result.output
