"""The web page in a real headless browser (Debian chromium driven by Playwright), against a real server.

A person searches in natural language and reads the results with their
provenance (as text and as a graph), opens the SPARQL behind a result in the
editor, then runs a SPARQL query and reads the table. The run saves screenshots
under tests/artifacts/ (gitignored) and prints their paths; docs/img/provenance.png
is a copy of the provenance graph's (`cp tests/artifacts/provenance.png docs/img/`).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from fixtures_kb import bio_kb  # noqa: F401 - fixture
from kqe_rdf.core.config import Settings
from kqe_rdf.service.app import create_app
from live_servers import serving

#: Debian's chromium (what `make test` installs), at its packaged path rather than whatever PATH holds.
CHROMIUM = next((p for p in ("/usr/bin/chromium", "/usr/lib/chromium/chromium") if Path(p).exists()), None)
ARTIFACTS = Path(__file__).parent / "artifacts"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]



def browser_or_skip():
    """Chromium, or a skip on a developer's machine without it; under CI a missing browser fails the run."""
    if CHROMIUM is None:
        message = "Debian chromium is not installed (`make test` installs it when it can: apt-get install chromium)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return CHROMIUM


@pytest.fixture(scope="module")
def page(bio_kb):  # noqa: F811
    executable = browser_or_skip()
    import playwright.sync_api as playwright
    with serving(create_app(bio_kb, Settings())) as url, playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=executable, args=ARGS)
        try:
            tab = browser.new_page(viewport={"width": 1400, "height": 900})
            tab.goto(url + "/")
            yield tab
        finally:
            browser.close()


def search_diseases(page, text: str, method: str = "4step-offline") -> None:
    """Type a request, pick the method and the Disease type, press Search and wait for the results."""
    page.fill("#search-text", text)
    page.select_option("#search-method", method)
    page.fill("#search-type", "Disease")
    page.click("#search-button")
    page.wait_for_selector("#search-results li.result")


def test_search_shows_ranked_results_with_their_provenance(page):
    search_diseases(page, "Which disease has Seizure?")
    first = page.locator("#search-results li.result .name").first.text_content()
    assert first in ("Focal epilepsy type 1", "Generalized epilepsy with forehead anomaly")
    assert "result(s)" in page.text_content("#search-status")
    page.click("#search-provenance summary")
    provenance = page.text_content("#search-provenance-body")
    assert '"sparql"' in provenance and '"triplets"' in provenance


def test_sparql_editor_shows_a_table_and_errors(page):
    page.fill("#sparql-text", "SELECT ?name WHERE { ?d a bio:Disease ; rdfs:label ?name } ORDER BY ?name")
    page.click("#sparql-button")
    page.wait_for_selector("#sparql-results tbody tr")
    cells = page.locator("#sparql-results tbody td").all_text_contents()
    assert cells == ["Focal epilepsy type 1", "Frontal bossing syndrome", "Generalized epilepsy with forehead anomaly"]
    assert page.locator("#sparql-results thead th").all_text_contents() == ["name"]
    ARTIFACTS.mkdir(exist_ok=True)
    shot = ARTIFACTS / "web-page.png"
    page.screenshot(path=str(shot), full_page=True)
    print(f"screenshot saved: {shot}")
    assert shot.stat().st_size > 10_000

    page.fill("#sparql-text", "SELEC ?x")
    page.click("#sparql-button")
    page.wait_for_function("document.querySelector('#sparql-status').textContent.startsWith('error')")
    assert "did you mean SELECT" in page.text_content("#sparql-status")


def test_a_result_s_provenance_is_drawn_as_a_graph_and_its_sparql_opens_in_the_editor(page):
    search_diseases(page, "Which disease has Seizure and High forehead?")
    page.wait_for_selector("#provenance-graph svg .node.answer")
    graph = page.locator("#provenance-graph")
    first = page.locator("#search-results li.result .name").first.text_content()
    assert first == "Generalized epilepsy with forehead anomaly"  # the one disease with both
    # request constants (as linked) → relation → the answer; both paths hold for this answer
    assert sorted(graph.locator(".node.constant .label").all_text_contents()) == ["High forehead", "Seizure"]
    assert graph.locator(".node.answer .label tspan").all_text_contents() == ["Generalized epilepsy with", "forehead anomaly"]
    assert graph.locator(".edge-label").all_text_contents() == ["hasPhenotype", "hasPhenotype"]
    assert graph.locator("line.edge.holds").count() == 2
    # its annotation is the more specific Bilateral tonic-clonic seizure, which the hierarchy match says
    assert "Bilateral tonic-clonic seizure" in " ".join(graph.locator(".node.constant .sub").all_text_contents())
    ARTIFACTS.mkdir(exist_ok=True)
    shot = ARTIFACTS / "provenance.png"
    graph.screenshot(path=str(shot))
    print(f"screenshot saved: {shot} (docs/img/provenance.png is a copy)")

    # another result: the answer changes, and a path it does not satisfy is drawn dashed
    page.locator("#search-results li.result").nth(1).locator("button.why").click()
    second = page.locator("#search-results li.result .name").nth(1).text_content()
    page.wait_for_function(f"document.querySelector('#provenance-graph figcaption strong').textContent === {second!r}")
    assert graph.locator("line.edge.misses").count() == 1

    page.click("#provenance-sparql")
    query = page.input_value("#sparql-text")
    assert query.startswith("SELECT") and "hasPhenotype" in query and "LIMIT" in query
    page.click("#sparql-button")
    page.wait_for_selector("#sparql-results tbody tr")
    answers = {cells[1] for cells in (row.locator("td").all_text_contents()
                                       for row in page.locator("#sparql-results tbody tr").all())}
    assert "https://omim.org/entry/100003" in answers  # the first result is among what the query returns


def test_the_method_list_is_the_server_s_registry(page):
    from kqe_rdf.methods.registry import METHODS

    page.wait_for_function(f"document.querySelectorAll('#search-method option').length === {len(METHODS)}")
    shown = page.eval_on_selector_all("#search-method option", "options => options.map(o => o.value)")
    assert sorted(shown) == sorted(METHODS)
