"""The grounded path reader on the tiny movie KB of ``fixtures_kb``.

``PathReader(kb).enumerate(nodes, classes)`` lists the relation paths that really leave some nodes;
``OfflineTriplets(kb)(question)`` reads a question with it; ``FourStep`` runs a reading and, when it finds
nothing, the reader's next one. The request's own constants are never its answers.
"""

from __future__ import annotations

import numpy as np
import pytest

from support.fixtures_kb import movie_kb, names, node  # noqa: F401 - fixtures
from kqe_rdf.core.config import Settings
from kqe_rdf.methods.answering.intent import OfflineIntent
from kqe_rdf.methods.expansion import expand
from kqe_rdf.methods.fourstep.pipeline import FourStep
from kqe_rdf.methods.reading import OfflineTriplets
from kqe_rdf.kb.ontology import local_name
from kqe_rdf.methods.reading import PathReader, stem
from kqe_rdf.methods.retrieval import BM25
from kqe_rdf.methods.registry import pipeline
from kqe_rdf.methods.reading.triplets import End, Triplet, TripletQuery
from kqe_rdf.kb.build import build_kb
from kqe_rdf.kb.importers.metaqa import MetaQAImporter
from kqe_rdf.kb.knowledge_base import KnowledgeBase
from kqe_rdf.kb.linking import Linker

M = "https://w3id.org/kqe/metaqa#"
K = 5


def small_kb(tmp_path, lines: str) -> KnowledgeBase:
    """A MetaQA-shaped KB from ``head|relation|tail`` lines."""
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "kb.txt").write_text(lines)
    build_kb(MetaQAImporter([tmp_path / "src"]), tmp_path / "kb")
    return KnowledgeBase.open(tmp_path / "kb")


def read(kb, question: str) -> list[tuple[str, str, str]]:
    return [(t.head.text, local_name(t.relation), t.tail.text) for t in OfflineTriplets(kb)(question).triplets]


def shown(path) -> str:
    return " / ".join(("" if forward else "^") + local_name(rel) for rel, forward in path.steps)


def test_only_paths_the_data_has_are_enumerated(movie_kb):
    reader = PathReader(movie_kb)
    eastwood = reader.enumerate([node(movie_kb, "Clint Eastwood")], [f"{M}Person"])
    first = {shown(p) for p in eastwood if len(p.steps) == 1}
    # he directs and acts in the KB, but wrote nothing: no path starts with "wrote"
    assert first == {"^directed_by", "^starred_actors"}
    assert all(p.start == f"{M}Person" for p in eastwood)
    two = {(shown(p), local_name(p.end)) for p in eastwood if len(p.steps) == 2}
    assert ("^directed_by / in_language", "Language") in two and ("^directed_by / directed_by", "Person") in two

    # The Bridges of Madison County has no language in the KB: the schema allows the path, the data does not
    bridges = reader.enumerate([node(movie_kb, "The Bridges of Madison County")], [f"{M}Movie"])
    assert "in_language" not in {shown(p) for p in bridges}
    assert {"directed_by", "starred_actors", "release_year", "has_genre"} <= {shown(p) for p in bridges}
    assert max(len(p.steps) for p in bridges) == 3


def test_relation_words_match_across_their_forms():
    assert stem("directed") == stem("director") == stem("directors") == stem("direct")
    assert stem("starred") == stem("starring") == stem("stars") == stem("star")
    assert stem("written") == stem("writer") == stem("write")
    assert stem("acted") != stem("action")


def test_the_wh_phrase_and_the_relation_words_pick_the_path(movie_kb):
    reader = OfflineTriplets(movie_kb)
    for question, path in [
        ("who wrote Blade Runner", ["written_by"]),
        ("who is the director of Blade Runner", ["directed_by"]),
        ("who directed the movies starred by Harrison Ford", ["starred_actors", "directed_by"]),
        ("who starred in the films directed by Ridley Scott", ["directed_by", "starred_actors"]),
        ("which films have the same director as Unforgiven", ["directed_by", "directed_by"]),
        ("what genres are the films directed by Ridley Scott", ["directed_by", "has_genre"]),
    ]:
        tq = reader(question)
        assert [local_name(t.relation) for t in tq.triplets] == path, question


def test_the_request_s_own_constants_are_not_its_answers(movie_kb):
    stage = pipeline("4step-offline", movie_kb, Settings(), K)
    batch = stage.run("which films have the same director as Unforgiven")
    hits, explain = batch.ranked("q"), batch.explain["q"]
    assert set(names(movie_kb, hits[:2])) == {"Gran Torino", "The Bridges of Madison County"}
    assert explain["candidates"] == 2 and explain["excluded"] == [node(movie_kb, "Unforgiven")]
    assert "Unforgiven" not in names(movie_kb, hits)  # nor in the top-up

    batch = stage.run("who acted together with Al Pacino")
    hits = batch.ranked("q")
    assert names(movie_kb, hits[:1]) == ["Robert De Niro"] and batch.explain["q"]["candidates"] == 1
    assert "Al Pacino" not in names(movie_kb, hits)


def test_a_path_that_comes_back_by_a_self_loop_returns_to_its_constants(tmp_path):
    # "The director of X's director" is X where X directed itself; a hop that links no constant to itself, or
    # only another node, does not come back.
    kb = small_kb(tmp_path, "X|directed_by|X\nX|directed_by|Y\nY|directed_by|Z\nZ|written_by|W\n")
    reader = PathReader(kb)
    x, y, z = (node(kb, n) for n in "XYZ")
    directed, written = (M + "directed_by", True), (M + "written_by", True)
    assert reader.returns([x], [directed, directed]) and reader.returns([z, x], [directed])
    assert not reader.returns([y], [directed]) and not reader.returns([x], [written])
    assert not reader.returns([z], [written])


class WithAlternatives:
    """A reading whose first path finds nothing (Gene Hackman directed no film), then one that does."""

    name = "fixed"

    def __call__(self, query: str) -> TripletQuery:
        first = TripletQuery(query, [Triplet(End("?x"), "directed_by", End("Gene Hackman"))], "?x", "Movie", "fixed")
        first.alternatives.append(TripletQuery(query, [Triplet(End("?x"), "starred_actors", End("Gene Hackman"))],
                                               "?x", "Movie", "fixed"))
        return first


def test_a_reading_that_finds_nothing_gives_way_to_the_next_path(movie_kb):
    stage = FourStep(movie_kb, WithAlternatives(), k=K, fallback=BM25(movie_kb, K))
    batch = stage.run("films with Gene Hackman")
    explain = batch.explain["q"]
    assert names(movie_kb, batch.ranked("q")[:1]) == ["Unforgiven"] and explain["candidates"] == 1
    assert explain["tried"] == ["directed_by"]
    assert [local_name(t["relation"]) for t in explain["triplets"]["triplets"]] == ["starred_actors"]


def test_the_offline_reading_keeps_its_next_paths(movie_kb):
    tq = OfflineTriplets(movie_kb)("who directed Kismet")
    assert [local_name(t.relation) for t in tq.triplets] == ["directed_by"]
    assert tq.alternatives and all(a.triplets and a.answer_type == f"{M}Person" for a in tq.alternatives[:1])


def test_the_hop_summary_stored_with_the_kb_agrees_with_the_store(movie_kb):
    # Which kinds of edges leave a node is read from the KB's name index, not asked of the store per request.
    reader = PathReader(movie_kb)
    constants = [node(movie_kb, "Taxi Driver"), node(movie_kb, "Martin Scorsese")]
    films = f"^<{M}directed_by>"
    summary = [reader._hops(constants, None, None), reader._hops(constants, films, M + "Movie")]
    index = movie_kb.names
    kept, index._hop_numbers = index._hop_numbers, None  # as a KB built without the summary: the store answers
    try:
        asked = [reader._hops(constants, None, None), reader._hops(constants, films, M + "Movie")]
    finally:
        index._hop_numbers = kept
    assert summary == asked and all(summary)


def test_a_walk_is_typed_by_the_name_index_as_the_store_types_it(movie_kb):
    # A further hop lists the first nodes of the path's class the walk reaches: the walk streams from the store
    # and each node's classes come from the name index, which gives the very nodes, in the very order, that the
    # walk with its type pattern (queries/reader_reached.rq) gives, however few are kept.
    from string import Template

    from kqe_rdf.methods.reading.paths import _body

    constants = [node(movie_kb, "Clint Eastwood"), node(movie_kb, "Martin Scorsese")]
    walks = [(f"?c ^<{M}directed_by> ?n", M + "Movie"), (f"?c ^<{M}starred_actors> ?n", M + "Movie"),
             (f"?c ^<{M}directed_by> ?w1 . ?w1 <{M}starred_actors> ?n", M + "Person"),
             (f"?c ^<{M}directed_by> ?w1 . ?w1 <{M}in_language> ?n", M + "Language"),
             (f"?c ^<{M}directed_by> ?n", M + "Person")]  # (nothing of that class)
    values = "VALUES ?c { " + " ".join(f"<{c}>" for c in constants) + " }"
    for cap in (1, 2, 40):
        reader = PathReader(movie_kb, cap=cap)
        for walk, reached in walks:
            slots = {"constants": values, "walk": walk, "reached": f"<{reached}>", "cap": cap}
            typed = Template(_body("reader_reached")).substitute(slots)
            expected = [r["n"].value for r in movie_kb.store.query(typed, use_default_graph_as_union=True)]
            assert reader._first_reached(slots, reached) == expected, (walk, cap)
    # A node the name index does not know is typed by the store.
    walk, reached = walks[2]
    slots = {"constants": values, "walk": walk, "reached": f"<{reached}>", "cap": 40}
    everyone = PathReader(movie_kb)._first_reached(slots, reached)
    index = movie_kb.names
    kept = index.types
    index.types = {iri: types for iri, types in kept.items() if iri != everyone[0]}
    try:
        assert PathReader(movie_kb)._first_reached(slots, reached) == everyone
    finally:
        index.types = kept


def test_the_relation_phrases_are_embedded_with_the_kb(movie_kb):
    from kqe_rdf.kb.phrases import relation_phrases, stored_phrase_vectors

    stored = stored_phrase_vectors(movie_kb)
    phrases = relation_phrases(movie_kb.schema)
    assert sorted(stored) == phrases and "directed by" in phrases
    fresh = movie_kb.encoder.encode(phrases)
    assert all(np.allclose(stored[p], v, atol=1e-5) for p, v in zip(phrases, fresh))


def test_a_proper_name_is_the_constant_sooner_than_a_common_word_that_names_a_node(movie_kb):
    # "heat" is also a film; the request is about Al Pacino's co-stars.
    reading = OfflineTriplets(movie_kb)("who starred together with Al Pacino in the heat")
    assert [(t.head.text, local_name(t.relation), t.tail.text) for t in reading.triplets] == [
        ("?m0_0", "starred_actors", "Al Pacino"), ("?m0_0", "starred_actors", "?x")]


def test_the_noun_of_a_relation_is_not_the_class_a_question_asks_for(movie_kb):
    reader = OfflineTriplets(movie_kb)
    # "the director of" names the relation: "what was E the director of" asks for films, not a person.
    assert reader.answer_types("what was the director of", wh_only=True) == set()
    assert reader.answer_types("which director made", wh_only=True) == {M + "Person"}
    # With an object after "of" the noun is what is asked for: "what are the genres of the films ...".
    assert reader.answer_types("what are the genres of the films directed by", wh_only=True) == {M + "Genre"}


def test_a_proper_name_that_starts_the_request_is_still_a_name(movie_kb):
    # Capitalised at a sentence start, but "Pacino" is capitalised too: a name, not the common word "heat".
    reading = OfflineTriplets(movie_kb)("Al Pacino starred together with who in the heat")
    assert [(t.head.text, local_name(t.relation), t.tail.text) for t in reading.triplets] == [
        ("?m0_0", "starred_actors", "Al Pacino"), ("?m0_0", "starred_actors", "?x")]


def test_a_request_without_a_wh_word_that_ends_with_a_class_asks_for_it(movie_kb):
    reader = OfflineTriplets(movie_kb)
    # "... also wrote movies": films, reached through the writer of Taxi Driver.
    reading = reader("the writer of Taxi Driver also wrote movies")
    assert reading.answer_type == M + "Movie"
    assert [local_name(t.relation) for t in reading.triplets] == ["written_by", "written_by"]
    # A class named before the request's last name is not what it asks for ("describe movie X"), nor is the last
    # class of a request with a wh-word ("what were the release dates of X directed films").
    assert reader.requests.trailing_class("describe movie \x00") == set()
    assert reader.requests.trailing_class("what were the release dates of \x00 directed films") == set()


def test_a_common_word_beside_a_name_is_a_constant_only_with_words_of_its_own(tmp_path):
    # "creator" is also a film; the request's relation words ("creator of the film script") are Brazil's.
    kb = small_kb(tmp_path, "Creator|written_by|Jeremy Leven\nBrazil|written_by|Charles McKeown\n"
                            "Brazil|has_tags|brazil\nBrazil|directed_by|Terry Gilliam\n")
    assert read(kb, "who is the creator of the film script for Brazil") == [("Brazil", "written_by", "?x")]


def test_constants_of_two_classes_each_read_their_own_words(movie_kb):
    # "heat" is a tag (and a film) and Spike Lee a person: "about" names the tag's relation, "starring" his.
    reading = OfflineTriplets(movie_kb)("films about heat starring Spike Lee")
    assert [(t.head.text, local_name(t.relation), t.tail.text) for t in reading.triplets] == [
        ("?x", "has_tags", "heat"), ("?x", "starred_actors", "Spike Lee")]
    hits = FourStep(movie_kb, OfflineTriplets(movie_kb), k=K).search("films about heat starring Spike Lee")
    assert names(movie_kb, hits)[0] == "Do the Right Thing"
    # Read alone, Al Pacino's path names every relation word: "together" adds nothing and is no constant.
    reading = OfflineTriplets(movie_kb)("the actor Al Pacino starred together with who in the heat")
    assert [(t.head.text, local_name(t.relation), t.tail.text) for t in reading.triplets] == [
        ("?m0_0", "starred_actors", "Al Pacino"), ("?m0_0", "starred_actors", "?x")]


def test_a_preposition_before_the_constant_says_how_the_answer_stands_to_it(movie_kb):
    # No word names a relation: "in Alien" asks for who is in the film ("?x starred in Alien"), not its director.
    reader = OfflineTriplets(movie_kb)
    reading = reader("in Alien")
    assert [local_name(t.relation) for t in reading.triplets] == ["starred_actors"]
    assert reading.reading[0]["hops"][0]["how"] == "preposition of starred in, 0.40"
    assert [local_name(t.relation) for t in reader("what films are in Swedish").triplets] == ["in_language"]
    # "of" is the genitive and says nothing; a word that names a relation wins over the preposition.
    assert [local_name(t.relation) for t in reader("who directed in Alien").triplets] == ["directed_by"]


def test_a_relation_word_is_read_as_the_relation_not_as_a_node_so_named(tmp_path):
    # "The Star" is a film, but in "which is the star in Heat" "star" says who is asked for.
    kb = small_kb(tmp_path, "The Star|directed_by|Stuart Heisler\nHeat|directed_by|Michael Mann\n"
                            "Heat|starred_actors|Al Pacino\nHeat|written_by|Michael Mann\n")
    assert read(kb, "which is the star in Heat") == [("Heat", "starred_actors", "?x")]
    # a relation's word or a synonym of it, in any form; not a function word, nor a word a mere relative names
    assert OfflineTriplets(kb).requests.relation_words("who are the players with the star in Heat") == {
        "players", "star"}


def test_search_ask_and_expand_find_the_same_mentions(tmp_path):
    # one mention finder: `ask` and `expand` no more link "star" to the film "The Star" where 4StepFocus does not
    kb = small_kb(tmp_path, "The Star|directed_by|Stuart Heisler\nHeat|directed_by|Michael Mann\n"
                            "Heat|starred_actors|Al Pacino\n")
    query = "which is the star in Heat"
    constants, conditions = OfflineTriplets(kb).mentions(query)
    assert ([m.text for m in constants], conditions) == (["Heat"], [])
    assert [e.text for e in OfflineIntent(kb)(query).entities] == ["Heat"]
    found = expand(kb, Settings(kar_grounded=False), query, "kar-offline").entities
    assert [e["text"] for e in found if e["found_by"] == "mention"] == ["Heat"]


def test_an_adjective_before_the_class_asked_for_still_asks_for_it(movie_kb):
    # "the principal language": the adjective modifies the class, it names no relation and no film
    reader = OfflineTriplets(movie_kb)
    for question in ["the principal language of Blade Runner", "which is the main language of Amélie"]:
        reading = reader(question)
        assert [local_name(t.relation) for t in reading.triplets] == ["in_language"], question
        assert reading.answer_type == M + "Language"


def test_a_class_word_in_apposition_to_the_name_is_not_what_is_asked(movie_kb):
    # "the genre film Heat": "film" says what Heat is; the question asks for the genre
    reading = OfflineTriplets(movie_kb)("what is the genre film Heat")
    assert [local_name(t.relation) for t in reading.triplets] == ["has_genre"]


@pytest.mark.parametrize("request_", ["can you name a film directed by Clint Eastwood",
                                      "you can name a film directed by Clint Eastwood"])
def test_a_request_framed_by_a_verb_asks_for_what_the_verb_names(movie_kb, request_):
    # "can you name a film ...": "name" frames the request like a wh-word; it is not the tags' "describe"
    reading = OfflineTriplets(movie_kb)(request_)
    assert [local_name(t.relation) for t in reading.triplets] == ["directed_by"]
    assert reading.answer_type == M + "Movie"


def test_a_possessive_is_never_a_mention(tmp_path):
    kb = small_kb(tmp_path, "Heat|has_tags|s\nHeat|directed_by|Michael Mann\nHeat|starred_actors|Al Pacino\n")
    assert [m.text for m in Linker(kb).mentions("who's the director of Heat")] == ["Heat"]  # not the tag "s"
    assert read(kb, "who's the director of Heat") == [("Heat", "directed_by", "?x")]


def test_a_class_named_after_who_outweighs_who(tmp_path):
    # "who" asks for a person unless the question names what it asks for: a language here
    kb = small_kb(tmp_path, "Heat|in_language|English\nHeat|written_by|Michael Mann\nHeat|release_year|1995\n"
                            "Ronin|written_by|Michael Mann\nRonin|in_language|French\nRonin|release_year|1998\n")
    assert read(kb, "who is the main language of Heat") == [("Heat", "in_language", "?x")]
    assert read(kb, "who wrote Heat") == [("Heat", "written_by", "?x")]
    # only a copula makes the noun the thing asked: here the films are what the question is about
    assert read(kb, "when did the films written by Michael Mann release") == \
        [("?m0_0", "written_by", "Michael Mann"), ("?m0_0", "release_year", "?x")]


def test_a_path_asked_for_again_is_listed_without_asking_the_store(movie_kb):
    reader = PathReader(movie_kb)
    eastwood = [node(movie_kb, "Clint Eastwood")]
    first = reader.enumerate(eastwood, [f"{M}Person"])
    asked = []

    class Counting:
        def __init__(self, store):
            self.store = store

        def query(self, *args, **kwargs):
            asked.append(args[0])
            return self.store.query(*args, **kwargs)

    store = movie_kb.store
    movie_kb.__dict__["store"] = Counting(store)
    try:
        again = reader.enumerate(eastwood, [f"{M}Person"])
        assert again == first and not asked
        PathReader(movie_kb).enumerate(eastwood, [f"{M}Person"])  # a new reader asks again
        assert asked
    finally:
        movie_kb.__dict__["store"] = store


def test_the_encoder_reads_a_word_for_a_relation_that_has_an_inverse(movie_kb):
    # "penned" is nearest "wrote" by the encoder; "written by" (its inverse, with the same phrases) is the same
    # fact read the other way, not a rival that leaves no margin
    words = OfflineTriplets(movie_kb).requests.words
    found = words.similar(["penned"])
    assert set(found) == {M + "wrote", M + "written_by"}
    assert [local_name(t.relation) for t in OfflineTriplets(movie_kb)("who penned Taxi Driver").triplets] == ["written_by"]


def test_a_stranded_preposition_asks_for_what_its_relation_reaches(movie_kb):
    # the preposition's missing object is the answer: films, though the (machine-translated) question says "who"
    reading = OfflineTriplets(movie_kb)("who makes Clint Eastwood star in")
    assert [local_name(t.relation) for t in reading.triplets] == ["starred_actors"]
    assert reading.answer_type == M + "Movie"
    # where the wh-word agrees, nothing changes
    assert OfflineTriplets(movie_kb)("who was Heat directed by").answer_type == M + "Person"
