"""Issue 65: a new user's own graph answered right — classes with no label named by their IRIs, conditions on
literal values (a year, a comparison, a boolean), counts over every answer whatever ``--k``, names written
without their disambiguation, IRI local names that hold a colon."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from kqe_rdf.cli import cli
from kqe_rdf.core.config import Settings
from kqe_rdf.kb.importers.rdf import name_from_iri
from kqe_rdf.methods.answering import QuestionAnswering
from support.fixtures_kb import ask, turtle_kb

# A made-up catalogue in DBpedia's shape: classes without labels, years and lengths as typed literals, a boolean,
# names with disambiguations and a colon in a local name.
CATALOGUE = """
@prefix dbo: <http://dbpedia.org/ontology/> .
@prefix dbr: <http://dbpedia.org/resource/> .
@prefix xsd: <http://www.w3.org/2001/XMLSchema#> .
@prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> .

<http://dbpedia.org/resource/Harbour_Lights_(band)> a dbo:Band ; rdfs:label "Harbour Lights (band)" .
dbr:Copper_Kettle a dbo:Band ; rdfs:label "Copper Kettle" .
<http://dbpedia.org/resource/Rumours_(album)> a dbo:Album ; rdfs:label "Rumours (album)" ; dbo:artist <http://dbpedia.org/resource/Harbour_Lights_(band)> ;
    dbo:releaseYear "1977"^^xsd:gYear ; dbo:live false .
<http://dbpedia.org/resource/Tusk_(album)> a dbo:Album ; rdfs:label "Tusk (album)" ; dbo:artist <http://dbpedia.org/resource/Harbour_Lights_(band)> ;
    dbo:releaseYear "1979"^^xsd:gYear ; dbo:live false .
<http://dbpedia.org/resource/Mirage_(album)> a dbo:Album ; rdfs:label "Mirage (album)" ; dbo:artist <http://dbpedia.org/resource/Harbour_Lights_(band)> ;
    dbo:releaseYear "1982"^^xsd:gYear ; dbo:live true .
dbr:Kettle_Songs a dbo:Album ; rdfs:label "Kettle Songs" ; dbo:artist dbr:Copper_Kettle ;
    dbo:releaseYear "1971"^^xsd:gYear ; dbo:live true .
dbr:ABBA:_The_Album a dbo:Album ; dbo:artist dbr:Copper_Kettle ; dbo:releaseYear "1977"^^xsd:gYear .
dbr:Dreams a dbo:Song ; rdfs:label "Dreams" ; dbo:album <http://dbpedia.org/resource/Rumours_(album)> ; dbo:runtime 257 .
dbr:Go_Your_Own_Way a dbo:Song ; rdfs:label "Go Your Own Way" ; dbo:album <http://dbpedia.org/resource/Rumours_(album)> ; dbo:runtime 223 .
dbr:The_Chain a dbo:Song ; rdfs:label "The Chain" ; dbo:album <http://dbpedia.org/resource/Rumours_(album)> ; dbo:runtime 270 .
dbr:Sara a dbo:Song ; rdfs:label "Sara" ; dbo:album <http://dbpedia.org/resource/Tusk_(album)> ; dbo:runtime 385 .
"""


@pytest.fixture(scope="module")
def catalogue(tmp_path_factory):
    return turtle_kb(tmp_path_factory.mktemp("catalogue"), CATALOGUE)


def answers(kb, question: str) -> set[str]:
    return {a.name for a in QuestionAnswering(kb, Settings())(question, ("kg",)).answers}


def test_a_class_without_a_label_is_asked_for_by_its_local_name(catalogue):
    assert ask(catalogue, "which albums did Copper Kettle make", 2)[0] in {"Kettle Songs", "ABBA: The Album"}
    assert answers(catalogue, "which albums did Copper Kettle make") == {"Kettle Songs", "ABBA: The Album"}


def test_a_name_is_linked_without_its_disambiguation(catalogue):
    assert ask(catalogue, "which songs are on Rumours", 3) and set(ask(catalogue, "which songs are on Rumours", 3)) \
        == {"Dreams", "Go Your Own Way", "The Chain"}
    assert answers(catalogue, "who made Tusk") == {"Harbour Lights (band)"}


def test_an_iri_local_name_keeps_its_colon(catalogue):
    assert name_from_iri("http://dbpedia.org/resource/ABBA:_The_Album") == "ABBA: The Album"
    assert answers(catalogue, "who made ABBA: The Album") == {"Copper Kettle"}


def test_a_year_condition_keeps_the_answers_of_that_year(catalogue):
    assert answers(catalogue, "which albums did Harbour Lights release in 1979") == {"Tusk (album)"}
    assert ask(catalogue, "which albums did Harbour Lights release in 1979", 1) == ["Tusk (album)"]


def test_a_comparison_on_a_year(catalogue):
    assert answers(catalogue, "which albums did Harbour Lights release after 1978") == {"Tusk (album)",
                                                                                        "Mirage (album)"}
    assert answers(catalogue, "which albums did Harbour Lights release before 1978") == {"Rumours (album)"}


def test_a_comparison_on_a_number(catalogue):
    assert answers(catalogue, "which songs on Rumours have a runtime longer than 250") == {"Dreams", "The Chain"}


def test_a_boolean_condition_and_its_negation(catalogue):
    assert answers(catalogue, "which live albums did Harbour Lights make") == {"Mirage (album)"}
    assert answers(catalogue, "which non-live albums did Harbour Lights make") == {"Rumours (album)", "Tusk (album)"}


def test_two_conditions_in_search_and_in_ask(catalogue):
    question = "which live albums did Harbour Lights release after 1978"
    top = ask(catalogue, question, 3)
    assert top[0] == "Mirage (album)"
    assert answers(catalogue, question) == {"Mirage (album)"}


def test_a_condition_no_answer_meets_is_dropped_and_said(catalogue):
    result = CliRunner().invoke(cli, ["search", "which albums did Harbour Lights release in 1990", "--kb",
                                      str(catalogue.path), "-m", "4step-offline", "--json", "--explain"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.output)
    assert {r["name"] for r in out["results"][:3]} == {"Rumours (album)", "Tusk (album)", "Mirage (album)"}
    assert any("no candidate meets it" in note for note in out["explain"]["value conditions"])


@pytest.mark.parametrize("k", [1, 2, 10])
def test_a_count_counts_every_answer_whatever_k(catalogue, k):
    result = CliRunner().invoke(cli, ["search", "how many songs are on Rumours", "--kb", str(catalogue.path),
                                      "-m", "4step-offline", "--k", str(k), "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["results"][0]["name"] == "3"
