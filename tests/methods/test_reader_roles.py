"""The reader on a graph it has never seen (issue 36): role and kinship words, chains of one relation repeated,
answers that are the question's own entity, a conjunction with a class-like noun, verbs read backwards.

The KB is a family as a user would write it: plain N-Triples, no classes, relation names as the only schema,
and half of its nodes without a label (named from their IRIs by ``kb build rdf``). WordNet (Debian's
``wordnet-base``) is the lexical resource: a developer's machine without it skips, CI fails.
"""

from __future__ import annotations


import pytest

from support.fixtures_kb import ask

from kqe_rdf.kb.build import build_kb
from kqe_rdf.kb.importers.rdf import RdfImporter
from kqe_rdf.kb.knowledge_base import KnowledgeBase

#: head, relation, tail; a name in LABELLED gets an rdfs:label, every other node is named from its IRI.
FAMILY = """\
Ann_Smith parents Bob_Smith
Ann_Smith parents Cora_Smith
Ann_Smith spouse Dan_Brown
Ann_Smith children Eve_Brown
Ann_Smith children Finn_Brown
Ann_Smith gender Female
Ann_Smith nationality France
Ann_Smith place_of_birth Lyon
Ann_Smith profession Painter
Bob_Smith children Ann_Smith
Bob_Smith spouse Cora_Smith
Bob_Smith parents George_Smith
Bob_Smith parents Hilda_Smith
Bob_Smith gender Male
Bob_Smith nationality United_Kingdom
Bob_Smith place_of_birth London
Bob_Smith profession Painter
Cora_Smith children Ann_Smith
Cora_Smith spouse Bob_Smith
Cora_Smith gender Female
Cora_Smith nationality France
Cora_Smith place_of_birth Paris
Cora_Smith profession Writer
Dan_Brown spouse Ann_Smith
Dan_Brown children Eve_Brown
Dan_Brown children Finn_Brown
Dan_Brown gender Male
Dan_Brown nationality Canada
Dan_Brown place_of_birth Paris
Dan_Brown profession Painter
Eve_Brown parents Ann_Smith
Eve_Brown parents Dan_Brown
Eve_Brown gender Female
Eve_Brown place_of_birth Lyon
Finn_Brown parents Ann_Smith
Finn_Brown parents Dan_Brown
Finn_Brown gender Male
Finn_Brown place_of_birth Toronto
George_Smith children Bob_Smith
George_Smith gender Male
George_Smith place_of_birth London
Hilda_Smith children Bob_Smith
Hilda_Smith gender Female
Ida_Roy place_of_birth Paris
Ida_Roy profession Painter
Ida_Roy gender Female
Jack_Roy place_of_birth Paris
Jack_Roy profession Writer
Jack_Roy gender Male
Lyon contained_by France
Paris contained_by France
London contained_by United_Kingdom
Toronto contained_by Canada
"""
LABELLED = {"Ann_Smith", "Bob_Smith", "Cora_Smith", "Dan_Brown", "Ida_Roy", "Paris", "London", "Painter"}


pytestmark = pytest.mark.usefixtures("wordnet_installed")  # conftest.py: CI fails without it


@pytest.fixture(scope="module")
def family(tmp_path_factory) -> KnowledgeBase:
    folder = tmp_path_factory.mktemp("family")
    lines = []
    for head, rel, tail in (line.split() for line in FAMILY.splitlines()):
        lines.append(f"<http://ex.org/{head}> <http://ex.org/rel/{rel}> <http://ex.org/{tail}> .")
    for name in sorted(LABELLED):
        lines.append(f"<http://ex.org/{name}> <http://www.w3.org/2000/01/rdf-schema#label> "
                     f"\"{name.replace('_', ' ')}\" .")
    (folder / "family.nt").write_text("\n".join(lines) + "\n")
    build_kb(RdfImporter([folder / "family.nt"]), folder / "kb")
    return KnowledgeBase.open(folder / "kb")


def test_half_the_family_has_no_label_and_is_named_from_its_iris(family):
    assert family.manifest["counts"]["nodes"] == 21
    assert ask(family, "Eve Brown", 1) == ["Eve Brown"]


def test_mom_and_dad_are_a_parent_of_one_gender(family):
    assert ask(family, "who is Ann Smith's mom", 1) == ["Cora Smith"]
    assert ask(family, "who is Ann Smith's dad", 1) == ["Bob Smith"]


def test_a_grandfather_is_a_parents_parent_and_a_grandson_a_childs_child(family):
    assert ask(family, "who is Eve Brown's grandfather", 1) == ["Bob Smith"]
    assert ask(family, "who is Bob Smith's grandson", 1) == ["Finn Brown"]
    assert set(ask(family, "who are the grandchildren of Bob Smith", 2)) == {"Eve Brown", "Finn Brown"}


def test_a_noun_of_a_relations_word_family_names_it(family):
    assert ask(family, "what is the nation of Ann Smith's husband", 1) == ["Canada"]


def test_the_answer_can_be_the_questions_own_entity_when_the_chain_returns_to_it(family):
    assert "Ann Smith" in ask(family, "who is the mother of Ann Smith's daughter", 2)


def test_a_verb_with_its_preposition_reads_the_relation_backwards(family):
    assert set(ask(family, "who was born in Lyon", 2)) == {"Ann Smith", "Eve Brown"}


def test_a_plural_noun_that_names_a_value_is_a_second_condition(family):
    assert set(ask(family, "which people born in Paris are painters", 2)) == {"Dan Brown", "Ida Roy"}


def test_a_relation_named_by_a_phrase_is_read_on_a_kb_whose_relation_is_profession(family):
    assert ask(family, "what does Eve Brown's mom do for a living", 1) == ["Painter"]
    assert ask(family, "what does Bob Smith's wife do for a living", 1) == ["Writer"]
