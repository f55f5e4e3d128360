"""The web page in a real headless browser (Debian chromium driven by Playwright), against a real server.

A person searches in natural language and reads the results with their
provenance, then runs a SPARQL query and reads the table. The run saves a
screenshot under tests/artifacts/ (gitignored) and prints its path.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from fixtures_kb import bio_kb  # noqa: F401 - fixture
from kqe_rdf.config import Settings
from kqe_rdf.server import create_app
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


def test_search_shows_ranked_results_with_their_provenance(page):
    page.fill("#search-text", "Which disease has Seizure?")
    page.select_option("#search-method", "4step-offline")
    page.fill("#search-type", "Disease")
    page.click("#search-button")
    page.wait_for_selector("#search-results li.result")
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
