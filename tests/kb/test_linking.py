"""Entity linking: names as users (or an LLM) write them → nodes of the tiny movie and disease KBs.

``Linker.link`` links one constant (exact name or alias, then fuzzy, then BM25
over names); ``Linker.mentions`` finds the names inside a whole question, for
the offline triplet generator.
"""

from __future__ import annotations

import pytest

from support.fixtures_kb import bio_kb, metaqa_kb, movie_kb, names, node  # noqa: F401 - fixtures
from kqe_rdf.kb.linking import Linker, _titled, normalise_name, sub_names

M = "https://w3id.org/kqe/metaqa#"


@pytest.fixture(scope="module")
def movies(movie_kb) -> Linker:
    return Linker(movie_kb)


@pytest.fixture(scope="module")
def diseases(bio_kb) -> Linker:
    return Linker(bio_kb)


def linked(kb, candidates) -> list[tuple[str, str]]:
    """(source id, how) of each candidate, best first."""
    return [(names(kb, [c.iri])[0], c.how) for c in candidates]


# ------------------------------------------------------------------- link()


def test_names_are_normalised_for_matching():
    assert normalise_name("Crohn's disease") == "crohn s disease"
    assert normalise_name("  AMÉLIE!! ") == "amelie"
    assert normalise_name("?!") == ""


@pytest.mark.parametrize("written", ["Kismet", "KISMET!", "kismet.", "  Kismet  "])
def test_an_exact_name_links_whatever_its_case_and_punctuation(movie_kb, movies, written):
    [candidate] = movies.link(written)
    assert candidate.iri == node(movie_kb, "Kismet")
    assert (candidate.name, candidate.score, candidate.how) == ("Kismet", 1.0, "exact")


def test_accents_are_folded(movie_kb, movies):
    assert linked(movie_kb, movies.link("amelie")) == [("Amélie", "exact")]
    assert linked(movie_kb, movies.link("AMÉLIE")) == [("Amélie", "exact")]


def test_an_alias_links_like_the_name(bio_kb, diseases):
    # HPO EXACT synonyms become aliases
    assert linked(bio_kb, diseases.link("tall forehead")) == [("HP:0000348", "exact")]
    [candidate] = diseases.link("Epileptic seizure")
    assert candidate.iri == node(bio_kb, "HP:0001250") and candidate.name == "Seizure"


@pytest.mark.parametrize("typo, name", [("Unforgivn", "Unforgiven"), ("Blade Runer", "Blade Runner")])
def test_a_typo_links_by_fuzzy_match(movie_kb, movies, typo, name):
    [candidate] = movies.link(typo)
    assert candidate.iri == node(movie_kb, name) and candidate.how == "fuzzy"
    assert 0.9 <= candidate.score < 1.0


@pytest.mark.parametrize("partial, name", [("Seventh Seal", "The Seventh Seal"),
                                           ("Hunchback", "The Hunchback of Notre Dame")])
def test_part_of_a_name_falls_back_to_bm25_over_names(movie_kb, movies, partial, name):
    candidates = movies.link(partial)
    assert linked(movie_kb, candidates)[0] == (name, "bm25")
    assert candidates[0].score == pytest.approx(0.8)  # BM25 is trusted less than a name match


@pytest.mark.parametrize("text", ["zzzz qqqq", "", "!!!"])
def test_text_that_names_nothing_links_to_nothing(movies, text):
    assert movies.link(text) == []


def test_a_type_restricts_the_candidates(movie_kb, movies):
    # "Heat" is a movie, "heat" a user tag: both kept as alternatives unless a type says which
    assert sorted(linked(movie_kb, movies.link("heat"))) == [("Heat", "exact"), ("heat", "exact")]
    assert linked(movie_kb, movies.link("heat", [f"{M}Movie"])) == [("Heat", "exact")]
    assert linked(movie_kb, movies.link("heat", [f"{M}Tag"])) == [("heat", "exact")]
    # the restriction holds in every step: no person found through BM25 when a movie is wanted
    assert linked(movie_kb, movies.link("Dieterle")) == [("William Dieterle", "bm25")]
    assert movies.link("Dieterle", [f"{M}Movie"]) == []
    assert movies.link("Unforgivn", [f"{M}Person"]) == []


def test_several_alternatives_are_kept_up_to_the_limit(movie_kb):
    both = Linker(movie_kb).link("Clint Eastwood")
    assert sorted(linked(movie_kb, both)) == [("Clint Eastwood", "exact"), ("clint eastwood", "exact")]
    assert len(Linker(movie_kb, alternatives=1).link("Clint Eastwood")) == 1
    # BM25 keeps its runners-up too, scored below the best
    scores = [c.score for c in Linker(movie_kb, alternatives=3).link("the seventh thing")]
    assert len(scores) > 1 and scores == sorted(scores, reverse=True)


# --------------------------------------------------------------- mentions()


def test_mentions_are_the_longest_names_in_the_question(movie_kb, movies):
    query = "who wrote Taxi Driver"
    [mention] = movies.mentions(query)
    assert (mention.text, query[mention.start : mention.end]) == ("Taxi Driver", "Taxi Driver")
    assert linked(movie_kb, mention.candidates) == [("Taxi Driver", "exact")]  # not the tag "taxi"
    assert [m.text for m in movies.mentions("movies tagged taxi")] == ["taxi"]
    # stopwords inside a name are part of it
    assert [m.text for m in movies.mentions("when was the hunchback of notre dame released")] == [
        "the hunchback of notre dame"
    ]


def test_mentions_come_in_the_order_of_the_question(movies):
    query = "movies with Al Pacino and Robert De Niro"
    found = movies.mentions(query)
    assert [m.text for m in found] == ["Al Pacino", "Robert De Niro"]
    assert [query[m.start : m.end] for m in found] == ["Al Pacino", "Robert De Niro"]
    assert not any(m.negated for m in found)


def test_a_mention_keeps_every_node_of_its_name(movie_kb, movies):
    [mention] = movies.mentions("what genre is Heat")
    assert sorted(linked(movie_kb, mention.candidates)) == [("Heat", "exact"), ("heat", "exact")]


def test_schema_words_alone_are_not_mentions(movie_kb, movies):
    words = movie_kb.schema.words  # class cues and relation phrases of the ontology
    assert {"director", "movies", "who", "directed"} <= words
    query = "who is the director of Kismet"
    assert [m.text for m in movies.mentions(query)] == ["director", "Kismet"]  # the tag "director"
    assert [m.text for m in movies.mentions(query, skip_words=words)] == ["Kismet"]


def test_a_mistyped_name_of_several_words_is_found_by_fuzzy_match(movie_kb, movies):
    [mention] = movies.mentions("who directed Blade Runer")
    assert mention.text == "Blade Runer"
    assert linked(movie_kb, mention.candidates) == [("Blade Runner", "fuzzy")]


def test_a_negation_cue_marks_the_mentions_of_its_sentence_negated(diseases):
    found = diseases.mentions("High forehead. Seizure and intellectual disability were not observed.")
    assert [(m.text, m.negated) for m in found] == [
        ("High forehead", False), ("Seizure", True), ("intellectual disability", True)]
    assert [(m.text, m.negated) for m in diseases.mentions("No seizure. Tall forehead.")] == [
        ("seizure", True), ("Tall forehead", False)]
    assert [m.negated for m in diseases.mentions("Seen without intellectual disability")] == [True]


@pytest.fixture(scope="module")
def signs(tmp_path_factory) -> Linker:
    """A few clinical signs as a JSON Lines KB, one of them named the way term lists name things."""
    import json

    from kqe_rdf.kb.build import build_kb
    from kqe_rdf.kb.importers.jsonl import JsonlImporter
    from kqe_rdf.kb.knowledge_base import KnowledgeBase

    folder = tmp_path_factory.mktemp("signs")
    rows = [{"kind": "node", "id": i, "type": "Sign", "name": name} for i, name in
            (("s1", "Absent speech"), ("s2", "Seizure"), ("s3", "Intellectual disability, mild"),
             ("s4", "Intellectual disability"))]
    (folder / "signs.jsonl").write_text("\n".join(json.dumps(r) for r in rows))
    build_kb(JsonlImporter([folder / "signs.jsonl"]), folder / "kb")
    return Linker(KnowledgeBase.open(folder / "kb"))


def test_a_name_that_holds_a_negation_cue_negates_nothing(signs):
    # "absent" in "Absent speech" is the sign's name; only the second sentence is negated.
    found = signs.mentions("The child presents with absent speech and seizure. Intellectual disability was not observed.")
    assert [(m.text, m.negated) for m in found] == [
        ("absent speech", False), ("seizure", False), ("Intellectual disability", True)]


def test_a_name_written_inverted_at_a_comma_is_found_written_straight(signs):
    [mention] = signs.mentions("A boy with mild intellectual disability")
    assert [c.name for c in mention.candidates] == ["Intellectual disability, mild"]


@pytest.mark.parametrize("kb_name", ["movie_kb", "bio_kb"])
def test_the_name_index_stored_with_the_kb_is_the_one_read_from_the_store(request, kb_name):
    from kqe_rdf.kb.linking import NameIndex, _name_shapes

    kb = request.getfixturevalue(kb_name)  # the build wrote it from its record tables, without a store scan
    stored = kb.names
    assert (kb.path / NameIndex.FILE).is_file()
    read = NameIndex.__new__(NameIndex)
    read._read(kb.store, {d.iri: d.name for d in kb.documents()})

    def named(index, table):  # names map to node numbers, each index numbering its own nodes
        return {k: {index.iris[n] for n in v} for k, v in table.items()}

    assert named(stored, stored.by_name) == named(read, read.by_name)
    assert named(stored, stored.inverted) == named(read, read.inverted)
    assert stored.types == read.types and stored.labels == read.labels and stored.labels
    # the shapes of the names written with the index are the ones made from its names
    assert (stored.last_words, stored.lengths) == _name_shapes(read.by_name, read.inverted)


def test_a_question_naming_nothing_has_no_mentions(movies):
    assert movies.mentions("tell me something nice") == []
    assert movies.mentions("") == []


def test_a_negation_cue_negates_only_what_follows_it(diseases):
    found = diseases.mentions("High forehead but no seizure")
    assert [(m.text, m.negated, m.trigger) for m in found] == [("High forehead", False, ""), ("seizure", True, "no")]


# ------------------------------------------------ known weaknesses (offline)


def test_a_plural_names_the_node(diseases):
    assert [m.text for m in diseases.mentions("Seizures were not observed.")] == ["Seizures"]


@pytest.mark.xfail(strict=True, reason="fuzzy mentions need two words, and are only tried when no name matched exactly")
@pytest.mark.parametrize("query", ["who directed Unforgivn", "Kismet and Blade Runer"])
def test_every_mistyped_name_is_found(movies, query):
    assert len(movies.mentions(query)) == len(query.split(" and "))


def test_bm25_linking_ignores_stopwords(movies):
    # The BM25 analyzer leaves stop words out (issue 38): "the", "with" and "a" match no name.
    assert movies.link("the one with a pilot") == []


# ---------------------------------------------------- titles that look like anything but a name

TITLES = """\
Moulin Rouge|directed_by|John Huston
Moulin Rouge!|directed_by|Baz Luhrmann
Her|directed_by|Spike Jonze
360|directed_by|Fernando Meirelles
In Time|directed_by|Andrew Niccol
Time Changer|directed_by|Rich Christiano
Love|directed_by|Guillaume Nicloux
The Incredibly True Adventure of Two Girls in Love|directed_by|Maria Maggenti
The American|directed_by|Anton Corbijn
American Gangster|directed_by|Ridley Scott
The Apartment|directed_by|Billy Wilder
Apartment Zero|directed_by|Martin Donovan
Paris|has_tags|Apartment
The Eye|has_tags|absent foveal reflex
Reflexes|has_tags|reflex
Ocean's Eleven|directed_by|Lewis Milestone
Don't Look Now|directed_by|Nicolas Roeg
"""


@pytest.fixture(scope="module")
def titles(tmp_path_factory) -> Linker:
    return Linker(metaqa_kb(tmp_path_factory.mktemp("titles"), TITLES))


@pytest.mark.parametrize("query, title", [
    # punctuation written in the request picks the node whose name has it, and only then
    ("who directed Moulin Rouge!", "Moulin Rouge!"),
    ("who directed Moulin Rouge in 1952", "Moulin Rouge"),
    # a name longer than eight words
    ("who was The Incredibly True Adventure of Two Girls in Love directed by", 
     "The Incredibly True Adventure of Two Girls in Love"),
    # a span that starts with a lower-case stopword yields to an overlapping name without one
    ("who directed Time Changer", "Time Changer"),
    ("who stars in Time Changer", "Time Changer"),
    ("American Gangster was directed by who", "American Gangster"),
    # ... and so does one that opens the sentence with a capital: the capital says nothing there
    ("The Apartment Zero film was directed by who", "Apartment Zero"),
    ("The Apartment was directed by who", "The Apartment"),  # not the tag "Apartment" inside it
    # a title made of a stopword or a number, when nothing else in the request names a node
    ("who directed Her", "Her"),
    ("who was 360 directed by", "360"),
    # ... but a lower-case name inside it does not win: one term, not the shorter term "reflex" in it
    ("films about absent foveal reflex", "absent foveal reflex"),
    # a token that folds to two words, or a possessive that is a word of its own in the folded name
    ("who directed Don't Look Now", "Don't Look Now"),
    ("who directed Ocean's Eleven", "Ocean's Eleven"),
])
def test_titles_are_found_as_written(titles, query, title):
    found = titles.mentions(query, skip_words={"directed", "stars", "absent"})
    assert [(m.text, [c.name for c in m.candidates]) for m in found] == [(title, [title])]


def test_a_stopword_is_a_mention_only_when_written_as_a_name(titles):
    assert titles.mentions("who directed her first film") == []  # lower case: a pronoun, not the film "Her"
    assert titles.mentions("Her first film was directed by who") == []  # capitalised only as a sentence start


@pytest.mark.parametrize("query", ["who directed Don't Look Now", "who directed Ocean's Eleven"])
def test_a_name_whose_tokens_fold_to_more_words_is_found_exactly(titles, query):
    """The spans looked up are those as long, in folded words, as some name with their first word ("don't" is
    two, "don t"): an exact match, not the fuzzy one that would otherwise rescue it."""
    [mention] = titles.mentions(query, skip_words={"directed"})
    assert {c.how for c in mention.candidates} == {"exact"}


@pytest.fixture(scope="module")
def symbols(tmp_path_factory) -> Linker:
    """Genes known by symbols that are also English words, beside signs."""
    import json

    from kqe_rdf.kb.build import build_kb
    from kqe_rdf.kb.importers.jsonl import JsonlImporter
    from kqe_rdf.kb.knowledge_base import KnowledgeBase

    folder = tmp_path_factory.mktemp("symbols")
    rows = [{"kind": "node", "id": i, "type": kind, "name": name} for i, kind, name in
            (("g1", "Gene", "SON"), ("g2", "Gene", "SET"), ("g3", "Gene", "BRCA1"), ("s1", "Sign", "Seizure"),
             ("s2", "Sign", "Hypotonia"))]
    (folder / "genes.jsonl").write_text("\n".join(json.dumps(r) for r in rows))
    build_kb(JsonlImporter([folder / "genes.jsonl"]), folder / "kb")
    return Linker(KnowledgeBase.open(folder / "kb"))


def test_a_lower_case_common_word_does_not_link_to_a_symbol(symbols):
    assert [m.text for m in symbols.mentions("my son has seizures and hypotonia")] == ["seizures", "hypotonia"]
    assert [m.text for m in symbols.mentions("a set of signs: seizures")] == ["seizures"]


def test_a_symbol_links_when_written_so_or_beside_its_class(symbols):
    assert [m.text for m in symbols.mentions("which diseases involve SON")] == ["SON"]
    assert [m.text for m in symbols.mentions("diseases of the son gene")] == ["son"]
    assert [m.text for m in symbols.mentions("variants in brca1")] == ["brca1"]  # no English word: a symbol


LAUREATES = """\
@prefix ex: <http://prizes.example/> .
@prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> .
ex:Laureate a rdfs:Class ; rdfs:label "Laureate" .
ex:City a rdfs:Class ; rdfs:label "City" .
ex:bohr a ex:Laureate ; rdfs:label "Niels Henrik David Bohr" ; ex:deathPlace ex:copenhagen .
ex:harald a ex:Laureate ; rdfs:label "Harald Bohr" ; ex:deathPlace ex:copenhagen .
ex:fleming a ex:Laureate ; rdfs:label "Sir Alexander Fleming" ; ex:deathPlace ex:london .
ex:curie a ex:Laureate ; rdfs:label "Marie Curie, née Sklodowska" ; ex:deathPlace ex:passy .
ex:copenhagen a ex:City ; rdfs:label "Copenhagen" .
ex:london a ex:City ; rdfs:label "London" .
ex:passy a ex:City ; rdfs:label "Passy" .
"""


@pytest.fixture(scope="module")
def laureates(tmp_path_factory):
    from kqe_rdf.kb.build import build_kb
    from kqe_rdf.kb.importers.rdf import RdfImporter
    from kqe_rdf.kb.knowledge_base import KnowledgeBase

    folder = tmp_path_factory.mktemp("laureates")
    (folder / "laureates.ttl").write_text(LAUREATES)
    build_kb(RdfImporter([folder / "laureates.ttl"]), folder / "kb")
    return KnowledgeBase.open(folder / "kb")


@pytest.mark.parametrize("question,answer", [("where did Niels Bohr die", "Copenhagen"),
                                             ("where did Alexander Fleming die", "London"),
                                             ("where did Marie Curie die", "Passy")])
def test_a_person_named_short_is_linked_and_answered(laureates, question, answer):
    from kqe_rdf.methods.registry import pipeline

    [mention] = Linker(laureates).mentions(question)
    assert mention.candidates[0].how == "short name"
    stage = pipeline("4step-offline", laureates, laureates.settings, 1, None)
    assert [laureates.document(h.iri).name for h in stage.search(question, "q")] == [answer]


def test_an_exact_name_wins_over_a_short_one(laureates):
    [mention] = Linker(laureates).mentions("where did Harald Bohr die")
    assert [c.name for c in mention.candidates] == ["Harald Bohr"] and mention.candidates[0].how == "exact"


NOBEL_WITH_STUBS = """\
@prefix ex: <http://prizes.example/> .
@prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> .
@prefix owl: <http://www.w3.org/2002/07/owl> .
@prefix void: <http://rdfs.org/ns/void#> .
<http://prizes.example/> a void:Dataset ; rdfs:label "Nobel prizes" ; void:vocabulary <http://prizes.example/terms/> .
ex:Laureate a rdfs:Class ; rdfs:label "Laureate" .
ex:curie a ex:Laureate ; rdfs:label "Marie Curie, née Sklodowska" ; ex:deathPlace ex:passy ;
    owl:sameAs <http://dbpedia.org/resource/Marie_Curie> .
ex:passy rdfs:label "Passy" .
"""


def test_a_same_as_stub_is_no_node_and_its_name_finds_the_real_one(tmp_path):
    """The public Nobel file's owl: prefix lacks its '#' (its links arrive as ``owlsameAs``) and each laureate is
    linked to a DBpedia IRI that nothing else describes; its VoID header describes the file."""
    from kqe_rdf.kb.build import build_kb
    from kqe_rdf.kb.importers.rdf import RdfImporter
    from kqe_rdf.kb.knowledge_base import KnowledgeBase
    from kqe_rdf.methods.registry import pipeline

    (tmp_path / "nobel.ttl").write_text(NOBEL_WITH_STUBS)
    report = build_kb(RdfImporter([tmp_path / "nobel.ttl"]), tmp_path / "kb")
    assert any("owlsameAs" in w and "owl#sameAs" in w for w in report["warnings"])
    kb = KnowledgeBase.open(tmp_path / "kb")
    assert sorted(d.name for d in kb.documents()) == ["Marie Curie, née Sklodowska", "Passy"]  # no stub, no VoID
    assert [h.name for h in pipeline("bm25", kb, kb.settings, 3, None).search("Marie Curie")][:1] == [
        "Marie Curie, née Sklodowska"]
    # the link stays in the store, as the file wrote it meant
    rows = list(kb.query("SELECT ?o WHERE { <http://prizes.example/curie> <http://www.w3.org/2002/07/owl#sameAs> ?o }"))
    assert [r["o"].value for r in rows] == ["http://dbpedia.org/resource/Marie_Curie"]


def test_a_list_item_no_name_matches_whole_is_linked_approximately_within_the_lists_class(bio_kb):
    from kqe_rdf.methods.registry import pipeline

    reader = pipeline("4step-offline", bio_kb, bio_kb.settings, 3, ["Disease"]).generator
    mentions, _conditions = reader.mentions("focal seizures, high forehead and intellectual disability")
    assert [(m.text, m.candidates[0].name, m.candidates[0].how) for m in mentions] == [
        ("focal seizures", "Focal-onset seizure", "approximate"),  # every word of the item, not "seizures" alone
        ("high forehead", "High forehead", "exact"), ("intellectual disability", "Intellectual disability", "exact")]
    assert mentions[0].candidates[0].score < 1.0  # below an exact name
    # not a list: the words are read as they are
    mentions, _conditions = reader.mentions("which disease has focal seizures")
    assert [(m.text, m.candidates[0].how) for m in mentions] == [("seizures", "exact")]


def test_a_sentence_ending_in_an_exclamation_mark_keeps_its_words_out_of_the_next_ones_negation(symbols):
    mentions = symbols.mentions("Seizures! Hypotonia was not observed.")
    assert [(m.text, m.negated) for m in mentions] == [("Seizures", False), ("Hypotonia", True)]
    # typed in lower case, a full stop still ends the sentence the negation is in
    mentions = symbols.mentions("seizures. no hypotonia")
    assert [(m.text, m.negated) for m in mentions] == [("seizures", False), ("hypotonia", True)]


def test_short_names_are_made_only_of_names_written_as_a_persons():
    """Every name of a KB goes through sub_names at build time, so most are turned down on their first or last
    word; accented and non-ASCII words are read as before."""
    words = ["Bohr", "Curie", "DNA", "of", "Émile", "Zoë", "Łukasz", "W3", "Ab1", "A", "Jean-Paul", "Straße"]
    assert [_titled(w) for w in words] == [True, True, False, False, True, True, True, False, False, False, False,
                                           True]
    assert sorted(sub_names("Niels Henrik David Bohr")) == ["Niels Bohr"]
    assert sorted(sub_names("Émile Zola Français")) == ["Émile Français"]
    assert sorted(sub_names("Paris (France) Capital")) == ["Paris Capital"]
    assert [sub_names(n) for n in ("Product 12 w4", "Maker102", "Category 3 w1 w2", "Jean-Paul Sartre")] == [set()] * 4
