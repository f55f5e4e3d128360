"""Triplets → one SPARQL SELECT (4StepFocus's candidate substitution), run on real stores.

Read as usage: write the triplets an LLM (or the offline generator) would give,
map their names onto the ontology with ``normalise``, link each constant to
node IRIs, compile, run. The KBs are the tiny movie and disease KBs of
``fixtures_kb`` (real Oxigraph stores).
"""

from __future__ import annotations

import dataclasses

import pytest

from support.fixtures_kb import bio_kb, movie_kb, names, node  # noqa: F401 - fixtures
from kqe_rdf.methods.fourstep.compiler import Compiled, compile_query, relation_path, run
from kqe_rdf.core.errors import SparqlError
from kqe_rdf.kb.ontology import Schema
from kqe_rdf.methods.reading.triplets import End, Triplet, TripletQuery, normalise

M = "https://w3id.org/kqe/metaqa#"
CORE = "https://w3id.org/kqe/core#"
BIO = "https://w3id.org/kqe/bio#"


def end(text: str | End) -> End:
    return text if isinstance(text, End) else End(text)


def t(head, relation: str, tail, negated: bool = False) -> Triplet:
    """``t("?x", "directed_by", "Clint Eastwood")``: ``?``-names are variables, other strings constants."""
    return Triplet(end(head), relation, end(tail), negated)


def reading(kb, *triplets: Triplet, answer: str = "?x", answer_type: str | None = None) -> TripletQuery:
    """The triplets as a generator hands them over, mapped onto the KB's ontology."""
    return normalise(TripletQuery("test", list(triplets), answer, answer_type, "test"), kb.schema)


def linked_to(kb, **constants: list[str]) -> dict:
    """Linker output written by hand: constant text → source ids of the nodes it names."""
    return {(text.replace("_", " "), None): [node(kb, i) for i in ids] for text, ids in constants.items()}


def answers(kb, compiled: Compiled) -> set[str]:
    var = compiled.answer.lstrip("?")
    return set(names(kb, [row[var] for row in run(kb.store, compiled) if var in row]))


CLINT_FILMS = {"Unforgiven", "Gran Torino", "The Bridges of Madison County"}


# ----------------------------------------------------------------- strict mode


def test_strict_query_is_one_select_with_values_for_every_alternative_a_limit_and_types(movie_kb):
    tq = reading(movie_kb, t(End("?x", "Movie"), "directed_by", "Clint Eastwood"))
    # the linker keeps both nodes named so: the person and the user tag
    clint = [node(movie_kb, "Clint Eastwood"), node(movie_kb, "clint eastwood")]
    compiled = compile_query(movie_kb.schema, tq, {("Clint Eastwood", None): clint}, "strict", limit=50)

    sparql = compiled.sparql
    assert sparql.count("SELECT") == 1 and sparql.endswith("LIMIT 50")
    assert f"VALUES ?c0 {{ <{clint[0]}> <{clint[1]}> }}" in sparql
    assert f"?x <{M}directed_by> ?c0 ." in sparql  # the stored, forward relation
    assert f"VALUES ?type0 {{ <{M}Movie> }} ?x a ?type0 ." in sparql
    assert "*" not in sparql  # movies have no hierarchy to follow
    assert compiled.constants == {"?c0": clint}
    assert answers(movie_kb, compiled) == CLINT_FILMS
    # each solution says which alternative of the constant it came through
    assert {row["c0"] for row in run(movie_kb.store, compiled)} == {clint[0]}


def test_a_type_constraint_covers_the_class_and_its_subclasses(movie_kb, tmp_path):
    extra = tmp_path / "silent.ttl"
    extra.write_text(
        "@prefix metaqa: <https://w3id.org/kqe/metaqa#> .\n@prefix owl: <http://www.w3.org/2002/07/owl#> .\n"
        "@prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> .\n"
        "<urn:ex:SilentFilm> a owl:Class ; rdfs:subClassOf metaqa:Movie ; rdfs:label \"silent film\" .\n",
        encoding="utf-8",
    )
    schema = Schema.from_files(["kqe", "metaqa", extra])
    schema.stored_relations = set(movie_kb.schema.stored_relations)  # as KnowledgeBase.schema does
    tq = normalise(TripletQuery("q", [t("?x", "directed_by", "William Dieterle")], "?x", "movie"), schema)
    compiled = compile_query(schema, tq, linked_to(movie_kb, William_Dieterle=["William Dieterle"]), "strict")
    assert f"VALUES ?type0 {{ <{M}Movie> <urn:ex:SilentFilm> }} ?x a ?type0 ." in compiled.sparql
    assert answers(movie_kb, compiled) == {"Kismet", "The Hunchback of Notre Dame"}


def test_an_inverse_relation_is_compiled_as_the_reversed_forward_relation(movie_kb, bio_kb):
    # metaqa:directed is declared as the inverse of the stored metaqa:directed_by
    compiled = compile_query(movie_kb.schema, reading(movie_kb, t("Clint Eastwood", "directed", "?x")),
                             linked_to(movie_kb, Clint_Eastwood=["Clint Eastwood"]), "strict")
    assert f"?c0 ^(<{M}directed_by>) ?x ." in compiled.sparql
    assert f"<{M}directed>" not in compiled.sparql  # no edge is stored under the inverse
    assert answers(movie_kb, compiled) == CLINT_FILMS

    # bio:phenotypeOf → ^bio:hasPhenotype (and the phenotype end follows the is-a hierarchy)
    compiled = compile_query(bio_kb.schema, reading(bio_kb, t("Seizure", "phenotypeOf", "?d"), answer="?d"),
                             linked_to(bio_kb, Seizure=["HP:0001250"]), "strict")
    assert f"?c0 ^(<{BIO}hasPhenotype>/<{CORE}subsumedBy>) ?d ." in compiled.sparql
    assert answers(bio_kb, compiled) == {"OMIM:100001", "OMIM:100003"}


def test_a_triplet_whose_end_types_contradict_the_relation_is_matched_in_both_directions(movie_kb):
    # "?x, a person, directed_by Gran Torino": directed_by goes from a movie to a person, so the
    # generator wrote it backwards; both directions are tried instead of finding nothing.
    tq = reading(movie_kb, t(End("?x", "Person"), "directed_by", End("Gran Torino", "Movie")))
    compiled = compile_query(movie_kb.schema, tq, {("Gran Torino", f"{M}Movie"): [node(movie_kb, "Gran Torino")]},
                             "strict")
    assert f"?x (<{M}directed_by>)|^(<{M}directed_by>) ?c0 ." in compiled.sparql
    assert answers(movie_kb, compiled) == {"Clint Eastwood"}

    # types that agree with the domain and range: one direction only
    tq = reading(movie_kb, t(End("?x", "Movie"), "directed_by", End("Clint Eastwood", "Person")))
    compiled = compile_query(movie_kb.schema, tq,
                             {("Clint Eastwood", f"{M}Person"): [node(movie_kb, "Clint Eastwood")]}, "strict")
    assert "|" not in compiled.sparql
    assert answers(movie_kb, compiled) == CLINT_FILMS


def test_a_constant_whose_class_has_a_hierarchy_also_matches_its_subtypes(bio_kb):
    # No disease is annotated with "Seizure" itself: 100001 has Focal-onset seizure and 100003
    # Bilateral tonic-clonic seizure, both kinds of seizure. 100002 explicitly lacks seizure.
    tq = reading(bio_kb, t(End("?d", "Disease"), "hasPhenotype", "Seizure"), answer="?d")
    compiled = compile_query(bio_kb.schema, tq, linked_to(bio_kb, Seizure=["HP:0001250"]), "strict")
    # The KB stores the closure of is-a (kqe:subsumedBy), so the query looks it up instead of walking it.
    assert f"?d <{BIO}hasPhenotype>/<{CORE}subsumedBy> ?c0 ." in compiled.sparql
    assert answers(bio_kb, compiled) == {"OMIM:100001", "OMIM:100003"}
    # A KB without stored closures (built before them, or a remote store) walks the hierarchy: same answers.
    walking = dataclasses.replace(bio_kb.schema, closures={})
    compiled = compile_query(walking, tq, linked_to(bio_kb, Seizure=["HP:0001250"]), "strict")
    assert f"?d <{BIO}hasPhenotype>/<{BIO}isA>* ?c0 ." in compiled.sparql
    assert answers(bio_kb, compiled) == {"OMIM:100001", "OMIM:100003"}

    # the specific term finds only the disease annotated with it
    tq = reading(bio_kb, t("?d", "hasPhenotype", "Focal-onset seizure"), answer="?d")
    compiled = compile_query(bio_kb.schema, tq, {("Focal-onset seizure", None): [node(bio_kb, "HP:0007359")]}, "strict")
    assert answers(bio_kb, compiled) == {"OMIM:100001"}


@pytest.mark.parametrize(
    "triplet, expected",
    [
        (t("Focal-onset seizure", "isA", "?p"), {"HP:0001250", "HP:0000118", "HP:0000001"}),  # every ancestor
        (t("Seizure", "isA", "?p"), {"HP:0000118", "HP:0000001"}),  # never seizure itself
        (t("?p", "isA", "Seizure"), {"HP:0007359", "HP:0002069"}),  # every kind of seizure
        (t("Seizure", "hasSubtype", "?p"), {"HP:0007359", "HP:0002069"}),  # the inverse, the same way down
    ],
    ids=["up-from-leaf", "up-from-inner", "down", "inverse-down"],
)
def test_the_hierarchy_relation_itself_is_followed_as_its_closure(bio_kb, triplet, expected):
    ids = {"Focal-onset seizure": "HP:0007359", "Seizure": "HP:0001250"}
    constant = triplet.tail.text if triplet.head.is_variable else triplet.head.text
    compiled = compile_query(bio_kb.schema, reading(bio_kb, triplet, answer="?p"),
                             {(constant, None): [node(bio_kb, ids[constant])]}, "strict")
    assert answers(bio_kb, compiled) == expected


def test_negated_triplets_become_filter_not_exists_in_strict_mode(movie_kb):
    # Robert De Niro films not directed by Martin Scorsese
    tq = reading(movie_kb, t("?x", "starred_actors", "Robert De Niro"),
                 t("?x", "directed_by", "Martin Scorsese", negated=True))
    linked = linked_to(movie_kb, Robert_De_Niro=["Robert De Niro"], Martin_Scorsese=["Martin Scorsese"])
    compiled = compile_query(movie_kb.schema, tq, linked, "strict")
    assert "FILTER NOT EXISTS {" in compiled.sparql
    assert f"?x <{M}directed_by> ?c0 ." in compiled.sparql.split("FILTER NOT EXISTS", 1)[1]
    assert answers(movie_kb, compiled) == {"Heat"}

    positive = compile_query(movie_kb.schema, reading(movie_kb, t("?x", "starred_actors", "Robert De Niro")),
                             linked, "strict")
    assert answers(movie_kb, positive) == {"Heat", "Taxi Driver"}


def test_a_negated_path_is_negated_as_a_whole(movie_kb):
    # De Niro films not made by the director of Taxi Driver: ?d is bound only inside the negation,
    # so both negated triplets share one NOT EXISTS (apart, the first would hold for any answer).
    tq = reading(movie_kb, t("?x", "starred_actors", "Robert De Niro"),
                 t("Taxi Driver", "directed_by", "?d", negated=True), t("?x", "directed_by", "?d", negated=True))
    linked = linked_to(movie_kb, Robert_De_Niro=["Robert De Niro"], Taxi_Driver=["Taxi Driver"])
    compiled = compile_query(movie_kb.schema, tq, linked, "strict")
    assert compiled.sparql.count("FILTER NOT EXISTS") == 1
    assert answers(movie_kb, compiled) == {"Heat"}


def test_constants_that_linked_to_nothing_are_dropped_never_sent_as_empty_values(movie_kb):
    tq = reading(movie_kb, t("?x", "starred_actors", "Robert De Niro"), t("?x", "directed_by", "Nobody We Know"))
    linked = {**linked_to(movie_kb, Robert_De_Niro=["Robert De Niro"]), ("Nobody We Know", None): []}
    for mode in ("strict", "soft"):
        compiled = compile_query(movie_kb.schema, tq, linked, mode)
        assert compiled.sparql.count("VALUES") == 1 and "{  }" not in compiled.sparql
        assert list(compiled.constants.values()) == [[node(movie_kb, "Robert De Niro")]]
        assert answers(movie_kb, compiled) == {"Heat", "Taxi Driver"}


@pytest.mark.parametrize("mode", ["strict", "soft"])
def test_a_path_through_an_unlinked_constant_is_dropped_whole(movie_kb, mode):
    # Without its constant, "?m starred_actors ?x" alone would make every actor an answer.
    tq = reading(movie_kb, t("?m", "directed_by", "Nobody We Know"), t("?m", "starred_actors", "?x"))
    compiled = compile_query(movie_kb.schema, tq, {("Nobody We Know", None): []}, mode)
    assert "VALUES" not in compiled.sparql
    assert run(movie_kb.store, compiled) == []


# ------------------------------------------------------------------- soft mode


def test_soft_mode_returns_one_unit_per_path_from_the_answer_to_a_constant(movie_kb):
    tq = reading(movie_kb, t("?x", "starred_actors", "Robert De Niro"), t("?x", "directed_by", "Martin Scorsese"))
    linked = linked_to(movie_kb, Robert_De_Niro=["Robert De Niro"], Martin_Scorsese=["Martin Scorsese"])
    compiled = compile_query(movie_kb.schema, tq, linked, "soft", limit=100)

    assert compiled.sparql.count("SELECT") == 1 and compiled.sparql.count("UNION") == 1
    assert "BIND(0 AS ?unit)" in compiled.sparql and "BIND(1 AS ?unit)" in compiled.sparql
    assert compiled.sparql.endswith("LIMIT 100")
    assert [u.constant for u in compiled.units] == ["Robert De Niro", "Martin Scorsese"]
    by_unit: dict[int, set[str]] = {}
    for row in run(movie_kb.store, compiled):
        by_unit.setdefault(int(row["unit"]), set()).update(names(movie_kb, [row["x"]]))
    # Heat satisfies one path, Taxi Driver both: the ranking counts them
    assert by_unit == {0: {"Heat", "Taxi Driver"}, 1: {"Taxi Driver"}}


def test_a_two_hop_path_is_one_unit(movie_kb):
    # actors of the films Ridley Scott directed
    tq = reading(movie_kb, t("?m", "directed_by", "Ridley Scott"), t("?m", "starred_actors", "?x"))
    compiled = compile_query(movie_kb.schema, tq, linked_to(movie_kb, Ridley_Scott=["Ridley Scott"]), "soft")
    [unit] = compiled.units
    assert unit.constant == "Ridley Scott" and len(unit.triplets) == 2
    assert answers(movie_kb, compiled) == {"Harrison Ford", "Sigourney Weaver"}


@pytest.mark.parametrize("mode", ["strict", "soft"])
def test_no_solution_gives_an_empty_list(movie_kb, mode):
    # Gene Hackman acted, but directed nothing
    tq = reading(movie_kb, t("?x", "directed_by", "Gene Hackman"))
    compiled = compile_query(movie_kb.schema, tq, linked_to(movie_kb, Gene_Hackman=["Gene Hackman"]), mode)
    assert run(movie_kb.store, compiled) == []


def test_an_unknown_mode_is_refused(movie_kb):
    with pytest.raises(ValueError, match="mode must be 'strict' or 'soft'"):
        compile_query(movie_kb.schema, reading(movie_kb, t("?x", "directed_by", "Kismet")), {}, "loose")


# ------------------------------------------------------------- running queries


def test_a_query_the_store_rejects_is_a_sparql_error_that_shows_the_query(movie_kb):
    broken = Compiled("SELECT ?x WHERE { ?x ", "strict", "?x")
    with pytest.raises(SparqlError, match=r"the compiled query failed(.|\n)*SELECT \?x WHERE \{ \?x"):
        run(movie_kb.store, broken)


def test_a_query_still_running_after_the_timeout_is_a_sparql_error(movie_kb):
    # ~2.8 million joined rows to count: a few tenths of a second, far beyond 10 ms
    heavy = Compiled("SELECT (COUNT(*) AS ?n) WHERE { ?a ?b ?c . ?d ?e ?f . ?a ?h ?i }", "strict", "?n")
    with pytest.raises(SparqlError, match="did not finish within 0.01 s"):
        run(movie_kb.store, heavy, timeout=0.01)


# ------------------------------------------------- normalise: names → ontology


@pytest.fixture(scope="module")
def metaqa_schema() -> Schema:
    return Schema.from_files(["kqe", "metaqa"])


@pytest.mark.parametrize("written", ["directed_by", "directed by", "Directed By", "directed-by", "drected by"])
def test_relation_names_map_by_local_name_label_or_close_spelling(metaqa_schema, written):
    tq = normalise(TripletQuery("q", [t("?x", written, "Kismet")], "?x"), metaqa_schema)
    assert [x.relation for x in tq.triplets] == [f"{M}directed_by"]
    assert tq.notes == []


@pytest.mark.parametrize("written", ["Movie", "movie", "MOVIE", "Moive"])
def test_type_names_map_by_local_name_label_or_close_spelling(metaqa_schema, written):
    tq = normalise(TripletQuery("q", [t(End("?x", written), "directed_by", "Kismet")], "?x", written), metaqa_schema)
    assert tq.triplets[0].head.type == f"{M}Movie" and tq.answer_type == f"{M}Movie"
    assert tq.notes == []


def test_an_unknown_relation_drops_its_triplet_with_a_note(metaqa_schema):
    tq = normalise(TripletQuery("q", [t("?x", "budget", "Kismet"), t("?x", "release_year", "1944")], "?x"),
                   metaqa_schema)
    assert [x.relation for x in tq.triplets] == [f"{M}release_year"]
    assert tq.notes == ["relation 'budget' is not in the ontology; triplet (?x, budget, \"Kismet\") dropped"]


def test_an_unknown_type_is_dropped_with_a_note_and_the_triplet_kept(metaqa_schema):
    tq = normalise(TripletQuery("q", [t(End("?x", "Spaceship"), "directed_by", "Kismet")], "?x", "Spaceship"),
                   metaqa_schema)
    assert tq.triplets[0].head.type is None and tq.answer_type is None
    assert tq.notes == ["type 'Spaceship' is not in the ontology; dropped",
                        "answer type 'Spaceship' is not in the ontology; ignored"]


def test_a_triplet_without_variables_is_dropped_with_a_note(metaqa_schema):
    tq = normalise(TripletQuery("q", [t("Kismet", "directed_by", "William Dieterle"), t("?x", "directed_by", "?p")],
                                "?x"), metaqa_schema)
    assert len(tq.triplets) == 1 and tq.triplets[0].head.text == "?x"
    assert len(tq.notes) == 1 and "has no variable; dropped" in tq.notes[0]


def test_a_constant_the_request_never_mentions_is_read_as_the_answer_variable(metaqa_schema):
    # What qwen2.5-coder-1.5b answered for this request: its guess at the answer in place of the variable.
    tq = normalise(TripletQuery("what was Jeff Nichols the director of",
                                [t("Jeff Nichols", "directed_by", "Kismet")], "?x"), metaqa_schema)
    [triplet] = tq.triplets
    assert (triplet.head.text, triplet.tail.text, tq.answer) == ("Jeff Nichols", "?x", "?x")
    assert tq.notes == ["'Kismet' is not in the request: read as the answer ?x"]
    assert tq.guessed_answers == ["Kismet"]


def test_a_triplet_of_two_mentioned_constants_is_still_dropped(metaqa_schema):
    tq = normalise(TripletQuery("did William Dieterle direct Kismet",
                                [t("Kismet", "directed_by", "William Dieterle")], "?x"), metaqa_schema)
    assert tq.triplets == [] and "has no variable; dropped" in tq.notes[0]
    assert tq.guessed_answers == []


def test_an_answer_variable_in_no_triplet_is_repaired_with_a_note(metaqa_schema):
    tq = normalise(TripletQuery("q", [t("Kismet", "directed_by", "?director")], "?film"), metaqa_schema)
    assert tq.answer == "?director"
    assert tq.notes == ["answer ?film appears in no triplet; using ?director"]


def test_nothing_usable_leaves_no_triplets_and_the_answer_as_given(metaqa_schema):
    tq = normalise(TripletQuery("q", [t("?x", "budget", "Kismet")], "?x"), metaqa_schema)
    assert tq.triplets == [] and tq.answer == "?x" and len(tq.notes) == 1


def test_orientation_without_edge_counts_follows_the_ontology(metaqa_schema):
    assert relation_path(metaqa_schema, f"{M}directed_by", None, None, True, False) == f"<{M}directed_by>"
