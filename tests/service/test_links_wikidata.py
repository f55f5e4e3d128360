"""`kqe-rdf link` against a Wikidata-shaped endpoint: what a careful curator would link is linked, no decoy is.

The endpoint is a real SPARQL server (`oxigraph serve`) over Turtle written here: labels in another case
than the KB's, in another Unicode form, with other punctuation; `skos:altLabel` aliases; items typed through
`P31/P279*` subclass chains; OMIM identifiers in `P492`; and decoys (a film and a band named like diseases, a
gene that carries a disease's OMIM id, a class chain past the depth followed). The local KB is built here from
JSON Lines (diseases with names, aliases and OMIM cross-references).
"""

from __future__ import annotations

import json
import socket
import threading
import time

import pytest
from click.testing import CliRunner

from kqe_rdf.cli import cli
from kqe_rdf.core.errors import KqeError
from kqe_rdf.kb.build import build_kb
from kqe_rdf.kb.importers.jsonl import JsonlImporter
from kqe_rdf.kb.knowledge_base import KnowledgeBase
from kqe_rdf.service.links import Endpoint, id_property, label_key, link, spellings
from support.live_servers import WD, WIKIDATA_PREFIXES, oxigraph_server

pytestmark = pytest.mark.slow  # servers, subprocesses or big inputs: not in `make test-quick`

DISEASE, RARE_DISEASE, GENETIC_DISEASE, RECESSIVE_DISEASE = (WD + q for q in ("Q12136", "Q929833", "Q200779",
                                                                              "Q15978631"))
WIKIDATA = WIKIDATA_PREFIXES + """
wd:Q929833 rdfs:label "rare disease"@en ; wdt:P279 wd:Q12136 .
wd:Q200779 rdfs:label "genetic disease"@en ; wdt:P279 wd:Q12136 .
wd:Q15978631 rdfs:label "autosomal recessive disease"@en ; wdt:P279 wd:Q200779 .
wd:C1 wdt:P279 wd:C2 . wd:C2 wdt:P279 wd:C3 . wd:C3 wdt:P279 wd:C4 . wd:C4 wdt:P279 wd:C5 .
wd:C5 wdt:P279 wd:Q12136 ; wdt:P279 wd:C1 .

wd:Q1 rdfs:label "fragile X syndrome"@en ; wdt:P31 wd:Q12136 .
wd:Q2 rdfs:label "Marfan syndrome"@en ; rdfs:label "Marfan-Syndrom"@de ; wdt:P31 wd:Q929833 .
wd:Q3 rdfs:label "Sjögren syndrome"@en ; wdt:P31 wd:Q12136 .
wd:Q4 rdfs:label "Crohn's disease"@en ; wdt:P31 wd:Q12136 .
wd:Q5 rdfs:label "trisomy 21"@en ; skos:altLabel "Down syndrome"@en ; wdt:P31 wd:Q200779 .
wd:Q6 rdfs:label "Huntington's chorea"@en ; wdt:P31 wd:Q12136 .
wd:Q7 rdfs:label "mucoviscidosis"@en ; wdt:P492 "219700" ; wdt:P31 wd:Q15978631 .
wd:Q8 rdfs:label "Rett syndrome"@en ; wdt:P31 wd:Q12136 .
wd:Q9 rdfs:label "Kawasaki disease"@en ; wdt:P31 wd:C1 .

wd:Q101 rdfs:label "Cystic fibrosis"@en ; wdt:P31 wd:Q215380 .
wd:Q102 rdfs:label "Alport syndrome"@en ; wdt:P31 wd:Q11424 .
wd:Q103 rdfs:label "MECP2"@en ; wdt:P492 "312750" ; wdt:P31 wd:Q7187 .
wd:Q104 rdfs:label "fragile X-associated tremor/ataxia syndrome"@en ; wdt:P31 wd:Q12136 .
"""

# Names as the KB writes them: another case (1, 2), a combining diaeresis (3), a curly apostrophe (4), a name
# that is the item's alias (5), an alias that is the item's label (6), only an OMIM id in common (7), an OMIM id
# that a gene item carries too (8), an item five subclass steps from disease (9), only a film of its name (10).
DISEASES = [
    ("fxs", "Fragile X syndrome", [], ["OMIM:300624"]),
    ("marfan", "Marfan Syndrome", [], ["OMIM:154700"]),
    ("sjogren", "Sjo\u0308gren syndrome", [], []),
    ("crohn", "Crohn\u2019s disease", [], []),
    ("down", "Down syndrome", [], []),
    ("huntington", "Huntington disease", ["Huntington's chorea"], []),
    ("cf", "Cystic fibrosis", [], ["OMIM:219700"]),
    ("rett", "Rett syndrome", [], ["OMIM:312750"]),
    ("kawasaki", "Kawasaki disease", [], []),
    ("alport", "Alport syndrome", [], []),
]
CURATED = {"Fragile X syndrome": "Q1", "Marfan Syndrome": "Q2", "Sjo\u0308gren syndrome": "Q3",
           "Crohn\u2019s disease": "Q4", "Down syndrome": "Q5", "Huntington disease": "Q6", "Cystic fibrosis": "Q7",
           "Rett syndrome": "Q8"}


@pytest.fixture(scope="module")
def wikidata(tmp_path_factory):
    with oxigraph_server(tmp_path_factory.mktemp("wikidata"), WIKIDATA) as url:
        yield url


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    folder = tmp_path_factory.mktemp("diseases")
    lines = [json.dumps({"kind": "node", "id": i, "type": "Disease", "name": name, "aliases": aliases,
                         "xrefs": xrefs}) for i, name, aliases, xrefs in DISEASES]
    (folder / "diseases.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    build_kb(JsonlImporter([folder / "diseases.jsonl"]), folder / "kb")
    return folder / "kb"


@pytest.fixture
def kb(built, tmp_path):
    """A private copy of the disease KB that a test may write links into."""
    import shutil

    shutil.copytree(built, tmp_path / "kb")
    return tmp_path / "kb"


def run(kb_path, endpoint, *args, env=None):
    result = CliRunner(env=env).invoke(cli, ["link", "--kb", str(kb_path), "--endpoint", endpoint, "--type", "Disease",
                                             "--rate", "100", *args])
    assert result.exit_code == 0, result.output
    return result


def linked(kb_path, endpoint, *args, env=None) -> dict[str, str]:
    """local name → Q-id of each accepted link, from `link --json`."""
    report = json.loads(run(kb_path, endpoint, "--json", *args, env=env).stdout)
    return {item["name"]: item["remote"].removeprefix(WD) for item in report["links"]}


CURATOR = ["--target-type", DISEASE, "--id-property", "P492=OMIM"]


def test_a_careful_curators_links_all_and_no_decoy(kb, wikidata):
    assert linked(kb, wikidata, *CURATOR) == CURATED
    assert linked(kb, wikidata, *CURATOR, "--match", "label+type", "--restart") == CURATED


def test_a_label_in_another_case_is_matched_on_its_normalised_form(kb, wikidata):
    found = linked(kb, wikidata, "--target-type", DISEASE)
    assert found["Fragile X syndrome"] == "Q1"  # "fragile X syndrome"@en
    assert found["Marfan Syndrome"] == "Q2"  # "Marfan syndrome"@en


def test_another_unicode_form_and_another_apostrophe_are_the_same_label(kb, wikidata):
    found = linked(kb, wikidata, "--target-type", DISEASE)
    assert found["Sjo\u0308gren syndrome"] == "Q3"  # precomposed ö at the endpoint
    assert found["Crohn\u2019s disease"] == "Q4"  # straight apostrophe at the endpoint


def test_normalised_keys_and_the_spellings_sent():
    assert label_key("Fragile X syndrome") == label_key("fragile  X-syndrome") == "fragile x syndrome"
    assert label_key("Sjo\u0308gren") == label_key("SJÖGREN")
    assert "fragile X syndrome" in spellings("Fragile X syndrome")
    assert "Crohn's disease" in spellings("Crohn\u2019s disease")
    assert label_key("fragile X-associated tremor/ataxia syndrome") != label_key("Fragile X syndrome")


def test_an_item_typed_by_a_subclass_of_the_target_type_is_of_that_type(kb, wikidata):
    report = json.loads(run(kb, wikidata, "--json", "--target-type", DISEASE, "--match", "label+type").stdout)
    by_name = {item["name"]: item for item in report["links"]}
    # P31 rare disease, which is P279 disease; P31 genetic disease, P279 disease.
    assert (by_name["Marfan Syndrome"]["remote"], by_name["Marfan Syndrome"]["target"]) == (WD + "Q2", DISEASE)
    assert by_name["Marfan Syndrome"]["classes"] == [RARE_DISEASE]
    assert by_name["Down syndrome"]["remote"] == WD + "Q5"


def test_subclass_steps_are_followed_to_a_bounded_depth(kb, wikidata):
    # Kawasaki disease is P31 C1, five P279 steps below disease (with a cycle back to C1 on the way).
    assert "Kawasaki disease" not in linked(kb, wikidata, "--target-type", DISEASE, "--match", "label+type")
    deeper = linked(kb, wikidata, "--target-type", DISEASE, "--match", "label+type", "--restart",
                    env={"KQE_LINK_CLASS_DEPTH": "5"})
    assert deeper["Kawasaki disease"] == "Q9"


def test_an_identifier_match_comes_first_and_scores_highest(kb, wikidata):
    report = json.loads(run(kb, wikidata, "--json", *CURATOR).stdout)
    cf = next(item for item in report["links"] if item["name"] == "Cystic fibrosis")
    # Its label is "mucoviscidosis"; the band named "Cystic fibrosis" is not even looked up.
    assert (cf["remote"], cf["how"], cf["label"], cf["confidence"]) == (WD + "Q7", "identifier", "219700", 1.0)
    with open(report["progress_file"], encoding="utf-8") as lines:
        records = {r["name"]: r["candidates"] for r in map(json.loads, list(lines)[1:])}
    assert [c["remote"] for c in records["Cystic fibrosis"]] == [WD + "Q7"]


def test_an_identifier_on_an_item_of_another_class_does_not_stop_the_name_lookup(kb, wikidata):
    report = json.loads(run(kb, wikidata, "--json", *CURATOR, "--no-write").stdout)
    with open(report["progress_file"], encoding="utf-8") as lines:
        records = {r["name"]: r["candidates"] for r in map(json.loads, list(lines)[1:])}
    # The gene MECP2 carries Rett syndrome's OMIM id: 1.0 × 0.6 for a gene, below the disease found by its label.
    assert [(c["remote"], c["how"], c["confidence"]) for c in records["Rett syndrome"]] == [
        (WD + "Q8", "label", 0.95), (WD + "Q103", "identifier", 0.6)]


def test_an_exact_alias_passes_the_default_threshold(kb, wikidata):
    report = json.loads(run(kb, wikidata, "--json").stdout)  # no --target-type: nothing to weigh classes by
    by_name = {item["name"]: item for item in report["links"]}
    assert (by_name["Down syndrome"]["remote"], by_name["Down syndrome"]["how"]) == (WD + "Q5", "alias")
    assert by_name["Down syndrome"]["confidence"] == 0.85  # the endpoint's skos:altLabel
    assert (by_name["Huntington disease"]["remote"], by_name["Huntington disease"]["confidence"]) == (WD + "Q6", 0.85)


def test_decoys_named_like_diseases_are_not_linked(kb, wikidata):
    found = linked(kb, wikidata, "--target-type", DISEASE)
    assert "Alport syndrome" not in found  # only a film of that name (0.95 × 0.6)
    assert "Cystic fibrosis" not in found  # a band (without --id-property the disease is not found by its name)
    assert "Q104" not in found.values()  # fragile X-associated tremor/ataxia syndrome


def test_json_lists_every_accepted_link(kb, wikidata):
    report = json.loads(run(kb, wikidata, "--json", *CURATOR).stdout)
    assert report["accepted"] == len(report["links"]) == len(CURATED) > 5


def test_the_table_shows_whole_item_iris_in_a_narrow_terminal(kb, wikidata):
    result = run(kb, wikidata, *CURATOR, env={"COLUMNS": "50"})
    for q in CURATED.values():
        assert f"{WD}{q} " in result.stdout
    assert "8 link(s) accepted" in result.stdout


def test_progress_is_shown_while_looking_up(kb, wikidata):
    result = run(kb, wikidata, "--target-type", DISEASE)
    assert f"linking to {wikidata}" in result.stderr
    assert "looking up: 10/10 nodes" in result.stderr


@pytest.fixture
def hanging_endpoint():
    """A listener that accepts connections and never answers."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    held, stop = [], threading.Event()

    def accept() -> None:
        server.settimeout(0.1)
        while not stop.is_set():
            try:
                held.append(server.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.getsockname()[1]}/sparql"
    stop.set()
    thread.join(5)
    for conn in held:
        conn.close()
    server.close()


def test_a_hung_endpoint_is_named_in_a_timeout_message_after_each_try_is_said(kb, hanging_endpoint):
    started = time.monotonic()
    result = CliRunner(env={"KQE_LINK_RETRIES": "1"}).invoke(
        cli, ["link", "--kb", str(kb), "--endpoint", hanging_endpoint, "--timeout", "0.5", "--rate", "100"])
    assert time.monotonic() - started < 10
    assert result.exit_code == 2
    assert f"the endpoint {hanging_endpoint} did not answer within 0.5 s (link_timeout, --timeout); trying again" \
        in result.stderr
    [error] = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert f"the endpoint {hanging_endpoint} did not answer within 0.5 s" in error and "2 tries" in error
    assert "could not be reached" not in result.stderr


def test_identifier_properties_are_written_property_equals_prefix():
    assert id_property("P492=OMIM") == ("http://www.wikidata.org/prop/direct/P492", "OMIM")
    assert id_property("wdt:P492=OMIM") == id_property("<http://www.wikidata.org/prop/direct/P492>=OMIM")
    with pytest.raises(KqeError, match="PROPERTY=PREFIX"):
        id_property("P492")


def test_the_python_api_links_as_the_command_does(kb, wikidata):
    knowledge = KnowledgeBase.open(kb)
    run = link(knowledge, wikidata, ["Disease"], targets=[DISEASE], id_properties=["P492=OMIM"])
    assert {item["name"]: item["remote"].removeprefix(WD) for item in run.links} == CURATED
    assert run.written
    with pytest.raises(KqeError, match="could not be reached"):
        Endpoint("http://127.0.0.1:9/sparql", rate=100, retries=0).select("ASK {}")
