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


# ---------------------------------------------------------------- a user's JSON Lines: numbers and booleans typed

COUNTRIES = [
    {"kind": "node", "id": "iceland", "type": "Country", "name": "Iceland",
     "fields": {"area": 103000, "landlocked": False, "population": 0.37}},
    {"kind": "node", "id": "austria", "type": "Country", "name": "Austria",
     "fields": {"area": 83879, "landlocked": True, "population": 9.1}},
    {"kind": "node", "id": "hungary", "type": "Country", "name": "Hungary",
     "fields": {"area": 93030, "landlocked": True, "population": 9.6}},
    {"kind": "node", "id": "europe", "type": "Continent", "name": "Europe"},
    {"kind": "edge", "head": "iceland", "relation": "continent", "tail": "europe"},
    {"kind": "edge", "head": "austria", "relation": "continent", "tail": "europe"},
    {"kind": "edge", "head": "hungary", "relation": "continent", "tail": "europe"},
    {"kind": "edge", "head": "austria", "relation": "borders", "tail": "hungary"},
    {"kind": "edge", "head": "hungary", "relation": "borders", "tail": "austria"},
]


@pytest.fixture(scope="module")
def countries(tmp_path_factory):
    folder = tmp_path_factory.mktemp("countries")
    (folder / "countries.jsonl").write_text("".join(json.dumps(r) + "\n" for r in COUNTRIES), encoding="utf-8")
    result = CliRunner().invoke(cli, ["kb", "build", "jsonl", str(folder / "countries.jsonl"), "--kb",
                                      str(folder / "kb")])
    assert result.exit_code == 0, result.output
    from kqe_rdf.kb.knowledge_base import KnowledgeBase

    return KnowledgeBase.open(folder / "kb")


def test_json_numbers_and_booleans_are_typed_literals(countries):
    rows = countries.store.query('SELECT ?v WHERE { ?c ?p ?v FILTER(DATATYPE(?v) = '
                                 '<http://www.w3.org/2001/XMLSchema#boolean>) }')
    assert sorted(r["v"].value for r in rows) == ["false", "true", "true"]
    assert "area: 103000" in countries.document(next(i for i in countries.resolve_identifiers(["iceland"])["iceland"])).text


def test_a_boolean_field_and_a_comparison_on_a_number_field(countries):
    assert answers(countries, "which countries in Europe are landlocked") == {"Austria", "Hungary"}
    assert answers(countries, "which countries in Europe have an area of more than 90000") == {"Iceland", "Hungary"}


def test_a_landlocked_country_that_borders_another(countries):
    assert answers(countries, "which landlocked country borders Hungary") == {"Austria"}


# ---------------------------------------------------------------- names by the vocabulary's own property

NAMED_BY_DBO = """
@prefix dbo: <http://dbpedia.org/ontology/> .
@prefix dbr: <http://dbpedia.org/resource/> .
dbr:Abbey_Road a dbo:Album ; dbo:name "Abbey Road" ; dbo:artist dbr:The_Beatles .
dbr:The_Beatles a dbo:Band ; dbo:name "The Beatles" .
dbr:Something a dbo:Song ; dbo:name "Something" ; dbo:album dbr:Abbey_Road .
"""


def test_label_property_names_the_nodes_and_the_warning_lists_literal_properties(tmp_path):
    (tmp_path / "music.ttl").write_text(NAMED_BY_DBO, encoding="utf-8")
    plain = CliRunner().invoke(cli, ["kb", "build", "rdf", str(tmp_path / "music.ttl"), "--kb", str(tmp_path / "a")])
    assert plain.exit_code == 0, plain.output
    assert "<http://dbpedia.org/ontology/name> (3)" in plain.output and "--label-property" in plain.output
    named = CliRunner().invoke(cli, ["kb", "build", "rdf", str(tmp_path / "music.ttl"), "--kb", str(tmp_path / "b"),
                                     "--label-property", "http://dbpedia.org/ontology/name"])
    assert named.exit_code == 0, named.output
    assert "named from their IRIs" not in named.output
    from kqe_rdf.kb.knowledge_base import KnowledgeBase

    kb = KnowledgeBase.open(tmp_path / "b")
    assert answers(kb, "which album is Something on") == {"Abbey Road"}
    refused = CliRunner().invoke(cli, ["kb", "build", "rdf", str(tmp_path / "music.ttl"), "--kb", str(tmp_path / "c"),
                                       "--label-property", "nosuch:name"])
    assert refused.exit_code != 0 and "--label-property 'nosuch:name'" in refused.output


# ---------------------------------------------------------------- a relation named in another language

FRENCH = """
@prefix : <http://example.org/geo/> .
@prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> .
:est rdfs:label "est"@fr , "east"@en .
:Lille a :Ville ; rdfs:label "Lille" ; :est :Roubaix .
:Roubaix a :Ville ; rdfs:label "Roubaix" .
:Lens a :Ville ; rdfs:label "Lens" ; :nord :Lille .
"""


def test_a_relation_labelled_in_french_and_english_is_read_by_its_english_label(tmp_path):
    kb = turtle_kb(tmp_path, FRENCH)
    assert kb.schema.relations["http://example.org/geo/est"].label == "east"
    assert answers(kb, "which city is east of Lille") == {"Roubaix"}
