"""The web page in a real headless browser (Debian chromium driven by Playwright), against a real server.

A person searches in natural language and reads the results with their
provenance (as text and as a graph), opens the SPARQL behind a result in the
editor (YASGUI), then runs a SPARQL query and reads the table; links share a search and a query. Every request
to anywhere but the server is aborted, and the tests fail on one. The run saves screenshots
under tests/artifacts/ (gitignored) and prints their paths; docs/img/provenance.png
is a copy of the provenance graph's (`cp tests/artifacts/provenance.png docs/img/`).
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from support.fixtures_kb import bio_kb  # noqa: F401 - fixture
from kqe_rdf.core.config import Settings
from kqe_rdf.service.app import create_app
from support.browser import ARGS, ARTIFACTS, STEP_SECONDS, browser_or_skip, new_tab
from support.live_servers import serving

pytestmark = pytest.mark.slow  # servers, subprocesses or big inputs: not in `make test-quick`

@pytest.fixture(scope="module")
def page(bio_kb):  # noqa: F811
    executable = browser_or_skip()
    import playwright.sync_api as playwright
    with serving(create_app(bio_kb, Settings())) as url, playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=executable, args=ARGS)
        try:
            tab = new_tab(browser)
            tab.outside = []  # requests to anywhere but this server: aborted, and a test fails on any
            tab.route("**/*", lambda route: route.continue_() if route.request.url.startswith(url)
                      else (tab.outside.append(route.request.url), route.abort()))
            tab.goto(url + "/")
            yield tab
        finally:
            browser.close()


def wait_until(page, expression: str, timeout: float = STEP_SECONDS) -> None:
    """``page.wait_for_function(expression)`` without its ``eval``, which the page's Content-Security-Policy
    forbids (issue 49): the expression is polled through the DevTools protocol, as ``page.evaluate`` runs it."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            if page.evaluate(f"() => Boolean({expression})"):
                return
        except Exception:  # noqa: BLE001 - not there yet (e.g. YASGUI still loading)
            pass
        if time.monotonic() > deadline:
            raise AssertionError(f"still false after {timeout} s: {expression}")
        page.wait_for_timeout(50)


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


def another_tab(page, link: str):
    """A new tab of the same browser at ``link`` (a shared link), as local-only as the first."""
    server = page.url.split("/")[0] + "//" + page.url.split("/")[2]
    tab = new_tab(page.context.browser)
    tab.route("**/*", lambda route: route.continue_() if route.request.url.startswith(server) else route.abort())
    tab.goto(link)
    return tab


def run_query(page, text: str) -> None:
    """Put a query in the YASGUI editor and press its run button."""
    page.evaluate("text => { window.kqeYasgui.getTab().setQuery(text); }", text)
    page.click(".yasqe .yasqe_queryButton")


def table_rows(page) -> list[list[str]]:
    """The rows of YASR's results table, without its row-number column."""
    page.wait_for_selector(".yasr table.dataTable tbody tr td:nth-child(2)")
    return [row.locator("td").all_text_contents()[1:] for row in page.locator(".yasr table.dataTable tbody tr").all()]


def test_sparql_editor_shows_a_table_and_errors(page):
    run_query(page, "SELECT ?name WHERE { ?d a bio:Disease ; rdfs:label ?name } ORDER BY ?name")
    assert [row[0] for row in table_rows(page)] == ["Focal epilepsy type 1", "Frontal bossing syndrome",
                                                   "Generalized epilepsy with forehead anomaly"]
    assert "name" in page.locator(".yasr table.dataTable thead th").all_text_contents()
    ARTIFACTS.mkdir(exist_ok=True)
    shot = ARTIFACTS / "web-page.png"
    page.screenshot(path=str(shot), full_page=True)
    print(f"screenshot saved: {shot}")
    assert shot.stat().st_size > 10_000

    run_query(page, "SELEC ?x")
    page.wait_for_selector(".yasr .errorResult")
    assert "did you mean SELECT" in page.text_content(".yasr .errorResult")
    assert page.outside == []


def test_the_editor_has_the_kb_s_prefixes_and_a_shareable_link(page):
    fresh = another_tab(page, page.url.split("#")[0])
    wait_until(fresh, "window.kqeYasgui.getTab().getYasqe().getValue().includes('PREFIX bio:')")
    fresh.close()
    query = "SELECT ?name WHERE { ?d a bio:Disease ; rdfs:label ?name } ORDER BY ?name LIMIT 1"
    page.evaluate("text => { window.kqeYasgui.getTab().setQuery(text); }", query)
    link = page.evaluate("window.kqeYasgui.getTab().getShareableLink()")
    assert "query=" in link
    shared = another_tab(page, link)
    wait_until(shared, "window.kqeYasgui && window.kqeYasgui.getTab().getYasqe().getValue().includes('LIMIT 1')")
    shared.close()


def test_a_search_is_shared_by_its_link(page):
    search_diseases(page, "Which disease has Seizure?")
    link = page.url
    assert "#q=" in link and "method=4step-offline" in link
    shared = another_tab(page, link)
    shared.wait_for_selector("#search-results li.result")
    assert shared.input_value("#search-text") == "Which disease has Seizure?"
    shared.close()


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
    wait_until(page, f"document.querySelector('#provenance-graph figcaption strong').textContent === {second!r}")
    assert graph.locator("line.edge.misses").count() == 1

    page.click("#provenance-sparql")
    query = page.evaluate("window.kqeYasgui.getTab().getYasqe().getValue()")
    assert query.startswith("SELECT") and "hasPhenotype" in query and "LIMIT" in query
    page.click(".yasqe .yasqe_queryButton")
    wait_until(page, "document.querySelector('.yasr table.dataTable tbody') && "
                           "document.querySelector('.yasr table.dataTable tbody').textContent.includes('100003')")
    answers = " ".join(" ".join(row) for row in table_rows(page))
    assert "100003" in answers  # the first result is among what the query returns


def test_the_method_list_is_the_server_s_registry(page):
    from kqe_rdf.methods.registry import METHODS

    wait_until(page, f"document.querySelectorAll('#search-method option').length === {len(METHODS)}")
    shown = page.eval_on_selector_all("#search-method option", "options => options.map(o => o.value)")
    assert sorted(shown) == sorted(METHODS)


def local_tab(page, link: str):
    """A new tab at ``link`` whose requests to anywhere but this server are recorded (and aborted)."""
    server = page.url.split("/")[0] + "//" + page.url.split("/")[2]
    tab = new_tab(page.context.browser)
    tab.outside = []
    tab.route("**/*", lambda route: route.continue_() if route.request.url.startswith(server)
              else (tab.outside.append(route.request.url), route.abort()))
    tab.goto(link)
    wait_until(tab, "window.kqeYasgui && window.kqeYasgui.getTab().getYasqe()")
    return tab


TYPED = "SELECT ?name WHERE { ?d a bio:Disease ; rdfs:label ?name }"


def test_a_query_typed_in_the_editor_stays_on_this_server_and_uses_the_kb_s_prefixes(page):
    """Issue 37: typed key by key (autocompletion on), a query that uses the KB's predeclared bio: asks no other
    site for completions, gets no PREFIX line inserted (LOV's bio: would shadow the KB's), is not flagged as an
    error, and returns the KB's diseases."""
    tab = local_tab(page, page.url.split("#")[0])
    try:
        wait_until(tab, "document.getElementById('kb-info').textContent.startsWith('KB ')")  # prefixes read
        tab.click(".yasqe .CodeMirror")
        tab.keyboard.press("Control+A")
        tab.keyboard.press("Backspace")
        tab.keyboard.type(TYPED, delay=25)
        tab.keyboard.press("Escape")  # close a completion list, if one is open
        tab.wait_for_timeout(1000)  # time for an autocompleter to fetch or insert something
        value = tab.evaluate("window.kqeYasgui.getTab().getYasqe().getValue()")
        assert value == TYPED, value
        assert tab.locator(".yasqe .CodeMirror-gutter-elt .error, .yasqe .gutterErrorBar *").count() == 0
        assert tab.evaluate("window.kqeYasgui.getTab().getYasqe().queryValid") is True
        # bio: completes from the KB's own prefixes: typing "PREFIX b" offers the KB's bio: only
        hints = tab.evaluate("""async () => {
            const yasqe = window.kqeYasgui.getTab().getYasqe();
            return await yasqe.autocompleters.kbPrefixes.getCompletions({string: "bio", autocompletionString: "bio"});
        }""")
        assert hints and all(h.startswith("bio") for h in hints) and "https://w3id.org/kqe/bio#" in hints[0], hints
        tab.click(".yasqe .yasqe_queryButton")
        names = sorted(row[0] for row in table_rows(tab))
        assert names == ["Focal epilepsy type 1", "Frontal bossing syndrome", "Generalized epilepsy with forehead anomaly"]
        assert tab.outside == [], tab.outside
    finally:
        tab.close()


def test_a_shared_link_cannot_point_the_editor_at_another_endpoint(page):
    from urllib.parse import quote

    base = page.url.split("#")[0].rstrip("/")
    link = f"{base}/#query={quote(TYPED)}&endpoint={quote('http://other.example/sparql')}"
    tab = local_tab(page, link)
    try:
        wait_until(tab, "window.kqeYasgui.getTab().getYasqe().getValue().includes('bio:Disease')")
        assert tab.evaluate("window.kqeYasgui.getTab().getEndpoint()") == base + "/sparql"
        tab.click(".yasqe .yasqe_queryButton")
        assert len(table_rows(tab)) == 3
        assert tab.outside == [], tab.outside
    finally:
        tab.close()


HOSTILE = "javascript:void(document.title='pwned')"


@pytest.fixture(scope="module")
def hostile_page(page, tmp_path_factory):
    """The page over a KB built from JSON Lines whose one node has a ``javascript:`` IRI (issue 49)."""
    import json

    from kqe_rdf.kb.build import build_kb
    from kqe_rdf.kb.importers.jsonl import JsonlImporter
    from kqe_rdf.kb.knowledge_base import KnowledgeBase

    folder = tmp_path_factory.mktemp("hostile")
    (folder / "nodes.jsonl").write_text(json.dumps({"id": "x", "type": "Gadget", "name": "Clickable gadget",
                                                    "iri": HOSTILE, "fields": {"text": "a clickable gadget"}})
                                        + "\n", encoding="utf-8")
    build_kb(JsonlImporter([folder / "nodes.jsonl"]), folder / "kb")
    with serving(create_app(KnowledgeBase.open(folder / "kb"), Settings())) as url:
        tab = new_tab(page.context.browser)  # the same browser
        try:
            tab.route("**/*", lambda route: route.continue_() if route.request.url.startswith(url) else route.abort())
            tab.goto(url + "/#q=clickable%20gadget&method=bm25")
            yield tab
        finally:
            tab.close()


def test_a_javascript_iri_from_the_kb_is_text_and_clicking_it_runs_nothing(hostile_page):
    page = hostile_page
    page.wait_for_selector("#search-results li.result")
    shown = page.locator("#search-results li.result .iri").first
    assert shown.text_content() == HOSTILE
    assert shown.evaluate("node => node.tagName") == "SPAN" and shown.get_attribute("href") is None
    shown.click()
    # Other code may still make a link of such an IRI (YASGUI's table links every IRI it shows): the page's
    # Content-Security-Policy forbids javascript: URLs, so following one runs nothing.
    page.evaluate("iri => { const a = document.createElement('a'); a.id = 'probe'; a.href = iri; a.textContent = iri;"
                  " document.body.append(a); }", HOSTILE)
    page.click("#probe")
    page.wait_for_timeout(500)
    assert page.title() != "pwned"


def test_fillers_are_marked_apart_from_the_reading_s_answers(page):
    search_diseases(page, "Which disease has Seizure?")
    results = page.locator("#search-results li.result")
    fillers = page.locator("#search-results li.result.filler")
    assert 0 < fillers.count() < results.count()  # two answers of the reading, the rest topped up
    assert "filler: from the fallback search" in fillers.first.text_content()
    assert "filler" not in results.first.text_content()


def test_the_page_s_examples_come_from_the_kb(page):
    page.wait_for_function("document.getElementById('search-type').placeholder.startsWith('any, e.g. ')")
    node = page.get_attribute("#search-text", "placeholder").removeprefix("e.g. ")
    assert node and node != "seizures and intellectual disability in a child"


def test_a_result_opens_its_node_page_whose_query_this_button_fills_the_editor(page):
    """Issue 71: a result's name links to its node page on this server (facts by relation, counted and paged), a
    drawn provenance node too; the page's "query this" opens the node's facts in the editor; nothing leaves."""
    search_diseases(page, "Which disease has Seizure and High forehead?")
    link = page.locator("#search-results li.result a.name").first
    assert link.text_content() == "Generalized epilepsy with forehead anomaly"
    href = link.get_attribute("href")
    assert href.startswith("/node?iri=")
    page.wait_for_selector("#provenance-graph svg a.node-link")
    assert all(h.startswith("/node?iri=") for h in
               page.eval_on_selector_all("#provenance-graph svg a.node-link", "links => links.map(a => a.getAttribute('href'))"))
    server = page.url.split("/")[0] + "//" + page.url.split("/")[2]
    tab = new_tab(page.context.browser)
    tab.outside = []
    tab.route("**/*", lambda route: route.continue_() if route.request.url.startswith(server)
              else (tab.outside.append(route.request.url), route.abort()))
    tab.goto(server + href)
    assert tab.text_content("#node-label") == "Generalized epilepsy with forehead anomaly"
    assert "Disease" in tab.text_content("#node-types")
    phenotypes = tab.locator('#node-outgoing .group[data-relation="https://w3id.org/kqe/bio#hasPhenotype"]')
    assert phenotypes.locator("a.node").count() >= 2 and "of" in phenotypes.locator(".shown").text_content()
    ARTIFACTS.mkdir(exist_ok=True)
    shot = ARTIFACTS / "node-page.png"
    tab.screenshot(path=str(shot), full_page=True)
    print(f"screenshot saved: {shot}")
    # a linked phenotype opens its own page, and "query this" opens its facts in the editor
    linked = phenotypes.locator("a.node").first
    name, iri = linked.text_content(), linked.get_attribute("title")
    linked.click()
    wait_until(tab, f"document.querySelector('#node-label').textContent === {name!r}")
    assert tab.text_content("#node-iri") == iri
    tab.click("#node-query")
    wait_until(tab, f"window.kqeYasgui && window.kqeYasgui.getTab().getYasqe().getValue().includes({iri!r})")
    assert tab.outside == []
    tab.close()


# ---------------------------------------------------------------- issue 71: completion, paging, values


def test_a_name_completes_in_the_search_box(page):
    """Typed key by key, the request's last words complete to the KB's names (a click or the arrow keys and Enter
    put one in their place); the results' text marks the request's words, as text."""
    page.fill("#search-text", "")
    page.fill("#search-type", "")
    page.click("#search-text")
    page.keyboard.type("Which disease has Sei", delay=40)
    page.wait_for_selector("#search-suggestions li.suggestion")
    names = page.locator("#search-suggestions li .name").all_text_contents()
    assert names[0] == "Seizure" and "Focal-onset seizure" in names, names
    ARTIFACTS.mkdir(exist_ok=True)
    shot = ARTIFACTS / "search-completion.png"
    page.locator("#search-panel").screenshot(path=str(shot))
    print(f"screenshot saved: {shot}")
    page.keyboard.press("ArrowDown")
    page.keyboard.press("Enter")  # picks the suggestion: no search yet
    assert page.input_value("#search-text") == "Which disease has Seizure"
    assert page.locator("#search-suggestions").is_hidden()
    # a class in the type box keeps its nodes
    page.fill("#search-type", "Disease")
    page.fill("#search-text", "")
    page.click("#search-text")
    page.keyboard.type("generalized epi", delay=40)
    page.wait_for_selector("#search-suggestions li.suggestion")
    page.locator("#search-suggestions li.suggestion").first.dispatch_event("mousedown")
    assert page.input_value("#search-text") == "Generalized epilepsy with forehead anomaly"
    page.select_option("#search-method", "bm25")
    page.click("#search-button")
    page.wait_for_selector("#search-results li.result .snippet mark")
    marks = {m.lower() for m in page.locator("#search-results li.result .snippet mark").all_text_contents()}
    assert marks and marks <= {"generalized", "epilepsy", "forehead", "anomaly"}, marks
    assert page.outside == []


def test_a_name_and_a_relation_complete_in_the_editor(page):
    """In the SPARQL editor, a prefixed name completes to the KB's relations where a predicate goes, and "<" with
    the start of a name to the node's IRI (the list shows the names); nothing is asked of another site."""
    page.evaluate("text => { window.kqeYasgui.getTab().setQuery(text); }", "SELECT ?d WHERE {\n  ?d \n}")
    editor = "window.kqeYasgui.getTab().getYasqe()"
    page.evaluate(f"() => {{ const y = {editor}; y.focus(); y.getDoc().setCursor({{line: 1, ch: 5}}); }}")
    page.keyboard.type("bio:hasP", delay=60)
    page.wait_for_selector(".CodeMirror-hints li")
    hints = page.locator(".CodeMirror-hints li").all_text_contents()
    assert hints and hints[0].startswith("bio:hasPhenotype") and "has phenotype" in hints[0], hints
    page.keyboard.press("Enter")
    page.keyboard.type(" <seiz", delay=60)
    wait_until(page, "document.querySelector('.CodeMirror-hints li') && "
                     "document.querySelector('.CodeMirror-hints li').textContent.includes('Seizure')")
    hints = page.locator(".CodeMirror-hints li").all_text_contents()
    assert hints[0] == "<http://purl.obolibrary.org/obo/HP_0001250>  Seizure", hints
    ARTIFACTS.mkdir(exist_ok=True)
    shot = ARTIFACTS / "editor-completion.png"
    page.locator("#sparql-panel").screenshot(path=str(shot))
    print(f"screenshot saved: {shot}")
    page.keyboard.press("Enter")
    query = page.evaluate(f"{editor}.getValue()")
    assert "?d bio:hasPhenotype <http://purl.obolibrary.org/obo/HP_0001250>" in query, query
    page.keyboard.type(" .")
    wait_until(page, f"{editor}.queryValid === true")
    assert page.outside == []


#: 5,000 rows from VALUES alone (10 × 10 × 10 × 5), numbered 0 … 4999 in order.
FIVE_THOUSAND = ("SELECT (STR(?i) AS ?n) WHERE { VALUES ?a { 0 1 2 3 4 5 6 7 8 9 } VALUES ?b { 0 1 2 3 4 5 6 7 8 9 } "
                 "VALUES ?c { 0 1 2 3 4 5 6 7 8 9 } VALUES ?d { 0 1 2 3 4 } "
                 "BIND(?a * 500 + ?b * 50 + ?c * 5 + ?d AS ?i) } ORDER BY ?i")


FIRST_CELL = "document.querySelector('.yasr table.dataTable tbody td:nth-child(2)').textContent.trim()"


def test_a_5000_row_sparql_result_is_shown_a_page_at_a_time(page):
    run_query(page, FIVE_THOUSAND)
    wait_until(page, "document.querySelector('.yasr table.dataTable tbody td:nth-child(2)') && "
                     "document.querySelector('.yasr table.dataTable tbody td:nth-child(2)').textContent.trim() === '0'")
    rows = page.locator(".yasr table.dataTable tbody tr")
    assert rows.count() == 50  # one page of the table is in the document, not 5,000 rows
    assert "5000 results" in page.text_content(".yasr")  # the table says how many there are
    page.locator(".yasr .dt-paging-button.next").click()
    wait_until(page, f"{FIRST_CELL} === '50'")
    assert rows.count() == 50
    page.locator(".yasr .dt-paging-button.last").click()
    wait_until(page, f"{FIRST_CELL} === '4950'")
    assert page.locator(".yasr table.dataTable tbody tr").last.locator("td").nth(1).text_content().strip() == "4999"


#: Albums with release years (the reader answers "Salt Roads's release year" with the value), and 45 widgets.
VALUES_KB = """\
@prefix ex: <http://music.example/> .
@prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> .
@prefix xsd: <http://www.w3.org/2001/XMLSchema#> .
ex:Album a rdfs:Class ; rdfs:label "Album" .
ex:Person a rdfs:Class ; rdfs:label "Person" .
ex:Widget a rdfs:Class ; rdfs:label "Widget" .
ex:salt_roads a ex:Album ; rdfs:label "Salt Roads" ; ex:producer ex:nora_vale ; ex:releaseYear "2021"^^xsd:gYear .
ex:weather_maps a ex:Album ; rdfs:label "Weather Maps" ; ex:producer ex:nora_vale ; ex:releaseYear "2019"^^xsd:gYear .
ex:nora_vale a ex:Person ; rdfs:label "Nora Vale" .
""" + "".join(f'ex:widget_{n} a ex:Widget ; rdfs:label "Widget {n}" ; rdfs:comment "A blue <b>widget</b>, number {n}. '
              f'It works." .\n' for n in range(45))


@pytest.fixture(scope="module")
def values_page(page, tmp_path_factory):
    """The page over :data:`VALUES_KB`, in a tab of the same browser."""
    from support.fixtures_kb import turtle_kb

    kb = turtle_kb(tmp_path_factory.mktemp("values"), VALUES_KB)
    with serving(create_app(kb, Settings())) as url:
        tab = new_tab(page.context.browser)
        tab.outside = []
        try:
            tab.route("**/*", lambda route: route.continue_() if route.request.url.startswith(url)
                      else (tab.outside.append(route.request.url), route.abort()))
            tab.goto(url + "/")
            yield tab
        finally:
            tab.close()


def test_search_results_are_shown_a_page_at_a_time(values_page):
    page = values_page
    page.fill("#search-text", "blue widget")
    page.select_option("#search-method", "bm25")
    page.fill("#search-k", "100")
    page.click("#search-button")
    page.wait_for_selector("#search-results li.result")
    assert page.locator("#search-results li.result").count() == 20
    assert page.text_content("#search-page") == "results 1–20 of 45"
    assert page.is_disabled("#search-previous")
    page.click("#search-next")
    assert page.text_content("#search-page") == "results 21–40 of 45"
    page.click("#search-next")
    assert page.locator("#search-results li.result").count() == 5 and page.is_disabled("#search-next")
    page.click("#search-previous")
    assert page.text_content("#search-page") == "results 21–40 of 45"
    # a result's line: its description's first sentence, the request's words marked, its markup shown as text
    snippet = page.locator("#search-results li.result .snippet").first
    assert snippet.text_content().startswith("A blue <b>widget</b>, number")
    assert [m.lower() for m in snippet.locator("mark").all_text_contents()] == ["blue", "widget"]
    assert page.locator("#search-results b").count() == 0
    assert page.outside == []


def test_a_value_answer_is_shown_as_a_value_with_its_datatype_and_fact(values_page):
    page = values_page
    page.fill("#search-text", "Salt Roads's release year")
    page.select_option("#search-method", "4step-offline")
    page.fill("#search-k", "10")
    page.click("#search-button")
    page.wait_for_selector("#search-results li.result")
    first = page.locator("#search-results li.result").first
    assert "value" in first.get_attribute("class")
    assert first.locator(".name").text_content() == "2021"
    assert first.locator(".datatype").text_content() == "xsd:gYear"
    assert "filler" not in first.text_content() and "fallback" not in first.text_content()
    fact = first.locator(".fact")
    assert fact.text_content() == "from the fact Salt Roads release year 2021", fact.text_content()
    assert fact.locator("a.of").get_attribute("href") == "/node?iri=" + "http%3A%2F%2Fmusic.example%2Fsalt_roads"
    figure = page.locator("#provenance-graph")
    assert figure.is_visible() and figure.locator("svg").count() == 0
    assert "topped up" not in figure.text_content() and "Salt Roads release year 2021" in figure.text_content()
    ARTIFACTS.mkdir(exist_ok=True)
    shot = ARTIFACTS / "value-answer.png"
    page.locator("#search-panel").screenshot(path=str(shot))
    print(f"screenshot saved: {shot}")
    assert page.outside == []
