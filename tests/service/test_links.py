"""`kqe-rdf link` against a second real SPARQL server (`oxigraph serve` with a Wikidata-shaped sample).

The local KB is a copy of the tiny HPO KB (three diseases, a few phenotypes), so
writing links never touches the shared session KB.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from support.fixtures_kb import bio_kb, node  # noqa: F401 - fixtures
from kqe_rdf.cli import cli
from kqe_rdf.core.errors import KqeError
from kqe_rdf.kb.knowledge_base import KnowledgeBase
from kqe_rdf.service.links import Endpoint, RateLimiter, accepted_links, find_links, local_nodes
from support.live_servers import DISEASE, WD, free_port, oxigraph_endpoint  # noqa: F401 - fixture

pytestmark = pytest.mark.slow  # servers, subprocesses or big inputs: not in `make test-quick`

SKOS_EXACT = "http://www.w3.org/2004/02/skos/core#exactMatch"


@pytest.fixture
def kb_copy(bio_kb, tmp_path):  # noqa: F811
    """A private copy of the HPO KB that a test may write links into."""
    path = tmp_path / "kb"
    shutil.copytree(bio_kb.path, path)
    return KnowledgeBase.open(path)


def run_link(kb, *args):
    result = CliRunner().invoke(cli, ["link", "--kb", str(kb.path), "--json", *args])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def links_in(kb_path) -> dict[str, str]:
    """local name → linked external item, read back from the KB with SPARQL."""
    fresh = KnowledgeBase.open(kb_path)
    rows = fresh.query("SELECT ?name ?item WHERE { ?n skos:exactMatch ?item ; rdfs:label ?name }")
    return {r["name"].value: r["item"].value for r in rows}


def test_label_and_type_links_diseases_and_skips_a_film_of_the_same_name(kb_copy, oxigraph_endpoint):
    report = run_link(kb_copy, "--endpoint", oxigraph_endpoint, "--type", "Disease", "--match", "label+type",
                      "--target-type", DISEASE, "--rate", "50")
    assert report["nodes"] == 3 and report["looked_up"] == 3 and report["written"]
    assert links_in(kb_copy.path) == {"Focal epilepsy type 1": WD + "Q900001",
                                      "Frontal bossing syndrome": WD + "Q900002"}
    # The film "Generalized epilepsy with forehead anomaly" is not a disease: found, but not linked.
    assert report["with_candidates"] == 2


def test_links_carry_confidence_and_prov_o_provenance_in_their_named_graph(kb_copy, oxigraph_endpoint):
    report = run_link(kb_copy, "--endpoint", oxigraph_endpoint, "--type", "Disease", "--match", "label+type",
                      "--target-type", DISEASE, "--rate", "50")
    fresh = KnowledgeBase.open(kb_copy.path)
    query = ("PREFIX link: <https://w3id.org/kqe/link#> "
             "SELECT ?g ?item ?confidence ?endpoint WHERE { GRAPH ?g { ?st rdf:object ?item ; "
             "link:confidence ?confidence ; prov:wasGeneratedBy ?act . ?act a prov:Activity ; prov:used ?endpoint } }")
    found = {r["item"].value: (float(r["confidence"].value), r["g"].value, r["endpoint"].value)
             for r in fresh.query(query)}
    assert found == {WD + "Q900001": (0.95, report["graph"], oxigraph_endpoint),  # the label as written
                     WD + "Q900002": (0.9, report["graph"], oxigraph_endpoint)}  # up to case


def test_label_mode_penalises_wrong_types_and_splits_ambiguous_names(kb_copy, oxigraph_endpoint):
    report = run_link(kb_copy, "--endpoint", oxigraph_endpoint, "--type", "Phenotype", "--target-type",
                      WD + "Q169872", "--rate", "50", "--no-write")
    records = {}
    with open(report["progress_file"], encoding="utf-8") as lines:
        next(lines)
        for line in lines:
            record = json.loads(line)
            records[record["name"]] = record["candidates"]
    seizure = {c["remote"]: c["confidence"] for c in records["Seizure"]}
    # "seizure" (symptom, case differs) 0.9 beats the film "Seizure" (exact label, wrong type: 0.95 × 0.6).
    assert seizure == {WD + "Q900004": 0.9, WD + "Q900005": 0.57}
    # High forehead: exact label but no class at all → 0.95 × 0.9.
    assert [(c["remote"], c["confidence"]) for c in records["High forehead"]] == [(WD + "Q900006", 0.855)]
    assert records["Intellectual disability"] == []


def test_a_run_resumes_where_the_last_one_stopped(kb_copy, oxigraph_endpoint):
    args = ["--endpoint", oxigraph_endpoint, "--type", "Disease", "--rate", "50", "--no-write"]
    first = run_link(kb_copy, *args, "--limit", "1")
    assert (first["done_before"], first["looked_up"]) == (0, 1)
    second = run_link(kb_copy, *args)
    assert (second["done_before"], second["looked_up"], second["nodes"]) == (1, 2, 3)
    third = run_link(kb_copy, *args)
    assert (third["looked_up"], third["requests"]) == (0, 0)
    changed = CliRunner().invoke(cli, ["link", "--kb", str(kb_copy.path), *args, "--match", "label+type",
                                       "--target-type", DISEASE])
    assert changed.exit_code == 2 and "--restart" in changed.output


def test_a_run_killed_mid_line_is_resumed_without_losing_later_records(kb_copy, oxigraph_endpoint):
    args = ["--endpoint", oxigraph_endpoint, "--type", "Disease", "--match", "label+type", "--target-type", DISEASE,
            "--rate", "50"]
    first = run_link(kb_copy, *args, "--limit", "1", "--no-write")
    progress = Path(first["progress_file"])
    progress.write_bytes(progress.read_bytes() + b'{"node": "https://omim.org/entry/1000')  # half a record
    second = run_link(kb_copy, *args)
    assert (second["done_before"], second["looked_up"]) == (1, 2)
    assert links_in(kb_copy.path) == {"Focal epilepsy type 1": WD + "Q900001",
                                      "Frontal bossing syndrome": WD + "Q900002"}


def test_an_unreachable_endpoint_is_a_clear_error_and_keeps_earlier_progress(kb_copy, oxigraph_endpoint):
    first = run_link(kb_copy, "--endpoint", oxigraph_endpoint, "--type", "Disease", "--rate", "50", "--no-write",
                     "--limit", "1")
    dead = f"http://127.0.0.1:{free_port()}/query"
    endpoint = Endpoint(dead, rate=50, retries=0)
    with pytest.raises(KqeError, match="could not be reached"):
        find_links(kb_copy, dead, ["Disease"], endpoint=endpoint)
    assert len(accepted_links(Path(first["progress_file"]), 0.8)) == 1  # the other endpoint's work is intact


def test_a_run_that_fails_before_its_first_answer_leaves_no_progress_file(kb_copy):
    dead = f"http://127.0.0.1:{free_port()}/query"
    failed = CliRunner().invoke(cli, ["link", "--kb", str(kb_copy.path), "--endpoint", dead, "--type", "Disease",
                                      "--rate", "50", "--timeout", "2"])
    assert failed.exit_code == 2 and "could not be reached" in failed.stderr
    assert not (kb_copy.path / "links").exists()  # so a run with other options is not told to --restart


def test_an_endpoint_that_is_not_sparql_is_reported(kb_copy, oxigraph_endpoint):
    not_sparql = oxigraph_endpoint.rsplit("/", 1)[0] + "/"  # oxigraph's HTML page
    with pytest.raises(KqeError, match="endpoint"):
        find_links(kb_copy, not_sparql, ["Disease"], endpoint=Endpoint(not_sparql, rate=50, retries=0))


def test_label_and_type_needs_a_target_type(kb_copy):
    with pytest.raises(KqeError, match="--target-type"):
        find_links(kb_copy, "http://127.0.0.1:1/sparql", ["Disease"], mode="label+type")


def test_local_nodes_have_names_and_aliases(bio_kb):  # noqa: F811
    seizure = next(n for n in local_nodes(bio_kb, ["Phenotype"]) if n.name == "Seizure")
    assert seizure.aliases == ["Epileptic seizure"]


def test_rate_limiter_spaces_requests_without_sleeping_when_they_are_far_apart():
    now, slept = [0.0], []
    limiter = RateLimiter(4.0, clock=lambda: now[0], sleep=slept.append)
    limiter.wait()
    limiter.wait()
    now[0] = 10.0
    limiter.wait()
    assert slept == [0.25]
    with pytest.raises(KqeError, match="link_rate"):
        RateLimiter(0)
