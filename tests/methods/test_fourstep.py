"""4StepFocus end to end on the tiny movie and disease KBs of ``fixtures_kb``.

``pipeline("4step", kb, Settings(), k)`` reads a question as triplets (offline:
names found in the question, relation paths that really leave them, ranked by the
relation words of the ontology — see ``test_reader.py``),
links their constants, runs one SPARQL SELECT and ranks what it finds above the
plain hybrid results it is topped up with. ``Reading`` below stands in for an
LLM generator where a test needs exact triplets.
"""

from __future__ import annotations

import pytest

from support.fixtures_kb import bio_kb, movie_kb, names, node  # noqa: F401 - fixtures
from kqe_rdf.core.config import Settings
from kqe_rdf.core.errors import KqeError
from kqe_rdf.methods.fourstep.pipeline import FourStep
from kqe_rdf.methods.reading import OfflineTriplets
from kqe_rdf.kb.ontology import local_name
from kqe_rdf.methods.retrieval import BM25
from kqe_rdf.methods.registry import pipeline
from kqe_rdf.methods.reading.triplets import End, Triplet, TripletQuery

M = "https://w3id.org/kqe/metaqa#"
K = 5


class Reading:
    """A fixed reading of any question, as an LLM triplet generator would return it."""

    name = "fixed"

    def __init__(self, *triplets: Triplet, answer: str = "?x", answer_type: str | None = None) -> None:
        self.triplets, self.answer, self.answer_type = list(triplets), answer, answer_type

    def __call__(self, query: str) -> TripletQuery:
        return TripletQuery(query, list(self.triplets), self.answer, self.answer_type, "fixed")


def t(head: str, relation: str, tail: str) -> Triplet:
    return Triplet(End(head), relation, End(tail))


@pytest.fixture(scope="module", params=["soft", "strict"])
def fourstep(request, movie_kb):
    """The ``4step`` pipeline as the CLI builds it, in each mode."""
    return pipeline("4step", movie_kb, Settings(fourstep_mode=request.param), K)


@pytest.fixture(scope="module")
def soft(movie_kb):
    return pipeline("4step", movie_kb, Settings(), K)


def relations(explain: dict) -> list[str]:
    return [local_name(x["relation"]) for x in explain["triplets"]["triplets"]]


# ------------------------------------------------------------ offline, 1 hop

CLINT_FILMS = {"Unforgiven", "Gran Torino", "The Bridges of Madison County"}
ONE_HOP = {
    "who directed Kismet": ("directed_by", {"William Dieterle"}),
    "what movies did Harrison Ford star in": ("starred_actors", {"Blade Runner", "Witness"}),
    "when was Unforgiven released": ("release_year", {"1992"}),
    "what language is Amélie in": ("in_language", {"French"}),
    "who is the writer of Taxi Driver": ("written_by", {"Paul Schrader"}),
    "which movies did Clint Eastwood direct": ("directed_by", CLINT_FILMS),
    "who acted in Heat": ("starred_actors", {"Al Pacino", "Robert De Niro"}),
    "what films were released in 1957": ("release_year", {"The Seventh Seal", "Wild Strawberries"}),
}


@pytest.mark.parametrize("question", ONE_HOP)
def test_a_one_hop_question_ranks_its_answers_first(movie_kb, fourstep, question):
    relation, gold = ONE_HOP[question]
    batch = fourstep.run(question)
    hits, explain = batch.ranked("q"), batch.explain["q"]
    assert relations(explain) == [relation]
    assert set(names(movie_kb, hits[: len(gold)])) == gold
    assert explain["candidates"] == len(gold)  # found by the query, not by the fallback
    assert [h.rank for h in hits] == list(range(1, len(hits) + 1)) and len(hits) <= K  # (the KB has 3 languages)


def test_the_explanation_says_where_the_time_went(fourstep):
    seconds = fourstep.run("who directed Kismet").explain["q"]["seconds"]
    assert list(seconds) == ["triplets", "linking", "sparql", "ranking"]
    assert all(s >= 0 for s in seconds.values())


@pytest.mark.parametrize("question, gold", [
    ("who is the director of Kismet", {"William Dieterle"}),  # "director" is an altLabel of directed_by
    ("which movies are in French", {"Amélie", "Delicatessen"}),
])
def test_more_one_hop_phrasings(movie_kb, soft, question, gold):
    batch = soft.run(question)
    assert set(names(movie_kb, batch.ranked("q")[: len(gold)])) == gold
    assert batch.explain["q"]["candidates"] == len(gold)


# ------------------------------------------------------------ offline, 2 hops


def test_a_two_hop_question_becomes_a_two_triplet_path(movie_kb, soft):
    batch = soft.run("who starred in the films directed by Ridley Scott")
    explain = batch.explain["q"]
    first, second = explain["triplets"]["triplets"]
    assert relations(explain) == ["directed_by", "starred_actors"]
    assert (first["head"], first["tail"]) == (second["head"], "Ridley Scott")  # joined by the film variable
    assert second["tail"] == explain["triplets"]["answer"] == "?x"
    assert set(names(movie_kb, batch.ranked("q")[:2])) == {"Harrison Ford", "Sigourney Weaver"}
    assert explain["candidates"] == 2


def test_a_two_hop_question_read_from_the_answer_side(movie_kb, soft):
    hits = soft.search("who directed the movies starred by Harrison Ford")
    assert set(names(movie_kb, hits[:2])) == {"Ridley Scott", "Peter Weir"}


def test_two_constraints_of_the_same_type_get_their_own_relations(movie_kb):
    stage = pipeline("4step", movie_kb, Settings(fourstep_mode="strict"), K)
    batch = stage.run("movies starring Robert De Niro directed by Martin Scorsese")
    assert names(movie_kb, batch.ranked("q")[:1]) == ["Taxi Driver"]
    assert batch.explain["q"]["candidates"] == 1


# --------------------------------------------------------------- strict / soft

# Clint Eastwood films with Meryl Streep "in English": no such film has a language in the KB,
# so the last triplet is one too many.
OVER_SPECIFIC = Reading(t("?x", "directed_by", "Clint Eastwood"), t("?x", "starred_actors", "Meryl Streep"),
                        t("?x", "in_language", "English"), answer_type="Movie")


def test_an_over_specific_triplet_empties_strict_mode_but_soft_mode_still_ranks_the_answer_first(movie_kb):
    strict = FourStep(movie_kb, OVER_SPECIFIC, mode="strict", k=K, fallback=BM25(movie_kb, K))
    soft = FourStep(movie_kb, OVER_SPECIFIC, mode="soft", k=K, fallback=BM25(movie_kb, K))
    question = "Clint Eastwood films with Meryl Streep in English"

    batch = strict.run(question)
    assert batch.explain["q"]["candidates"] == 0
    # all from the fallback, and only what the reading asks for: the fallback's movies first, then more movies
    fallback = [h.iri for h in BM25(movie_kb, K).search(question)]
    movies = [i for i in fallback if f"{M}Movie" in movie_kb.document(i).types]
    hits = [h.iri for h in batch.ranked("q")]
    assert hits[: len(movies)] == movies and len(hits) == K
    assert all(f"{M}Movie" in movie_kb.document(i).types for i in hits)

    batch = soft.run(question)
    ranked = names(movie_kb, batch.ranked("q"))
    # The Bridges of Madison County satisfies two paths (director, actor); the other Eastwood
    # films two as well, but the Meryl Streep path is rarer, so it says more.
    assert ranked[0] == "The Bridges of Madison County"
    assert set(ranked[1:3]) == {"Unforgiven", "Gran Torino"}
    # every film on some path is a candidate: with the English ones, six
    assert batch.explain["q"]["candidates"] == 6


def test_results_are_topped_up_from_the_fallback_below_the_structured_ones(movie_kb):
    question = "who directed Kismet"
    stage = FourStep(movie_kb, k=K, fallback=BM25(movie_kb, 50))
    batch = stage.run(question)
    hits, explain = batch.ranked("q"), batch.explain["q"]
    assert names(movie_kb, hits[:1]) == ["William Dieterle"] and explain["candidates"] == 1
    assert explain["topped_up"] == K - 1
    assert all(h.score < hits[0].score for h in hits[1:])
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    assert len({h.iri for h in hits}) == K
    # the fallback's own order, without what the query already found, and only of the type the reading
    # asks for (people: no film, year or tag), never the request's own constant
    people = [h.iri for h in stage.fallback.search(question)
              if h.iri != hits[0].iri and f"{M}Person" in movie_kb.document(h.iri).types]
    assert [h.iri for h in hits[1:]] == people[: K - 1]
    assert explain["top_up_type"] == "Person"


def test_the_top_up_never_contradicts_the_answer_type(movie_kb, soft):
    # a year is asked for; the plain results for these words are mostly films, tags and people
    batch = soft.run("when was Unforgiven released")
    hits = batch.ranked("q")
    assert names(movie_kb, hits[:1]) == ["1992"]
    assert all(f"{M}Year" in movie_kb.document(h.iri).types for h in hits)
    assert node(movie_kb, "Unforgiven") not in {h.iri for h in hits}


def test_explain_shows_triplets_linked_constants_sparql_and_bindings(movie_kb, fourstep):
    batch = fourstep.run("who directed Kismet")
    explain = batch.explain["q"]
    kismet, dieterle = node(movie_kb, "Kismet"), node(movie_kb, "William Dieterle")

    assert explain["mode"] == fourstep.mode
    reading = explain["triplets"]
    assert reading["source"] == "offline" and reading["answer"] == "?x" and reading["answer_type"] == f"{M}Person"
    assert [(x["head"], x["relation"], x["tail"]) for x in reading["triplets"]] == [("Kismet", f"{M}directed_by", "?x")]
    assert reading["notes"] and "directed by" in reading["notes"][0]
    assert explain["linked"] == {"Kismet": [{"iri": kismet, "name": "Kismet", "score": 1.0, "how": "exact"}]}
    assert f"VALUES ?c0 {{ <{kismet}> }}" in explain["sparql"] and f"<{M}directed_by>" in explain["sparql"]
    [binding] = explain["support"][dieterle]
    assert (binding["x"], binding["c0"]) == (dieterle, kismet)
    assert "error" not in explain


def test_a_question_without_a_known_name_gets_the_fallback_results(movie_kb, fourstep):
    question = "tell me something nice"
    batch = fourstep.run(question)
    hits, explain = batch.ranked("q"), batch.explain["q"]
    assert [h.iri for h in hits] == [h.iri for h in fourstep.fallback.search(question)]
    assert len(hits) == K
    assert explain["triplets"]["notes"] == ["no entity of the KB is named in the query"]
    assert "sparql" not in explain and explain["candidates"] == 0


def test_a_type_restriction_applies_to_structured_and_fallback_results(movie_kb):
    movies = pipeline("4step", movie_kb, Settings(), K, types=["Movie"])
    hits = movies.search("which movies did Clint Eastwood direct")
    assert set(names(movie_kb, hits[:3])) == CLINT_FILMS
    assert all(f"{M}Movie" in movie_kb.document(h.iri).types for h in hits)

    # the answer is a person, but only years are wanted: nothing structured is left
    years = pipeline("4step", movie_kb, Settings(), K, types=["Year"])
    batch = years.run("who directed Kismet")
    assert batch.explain["q"]["candidates"] == 0
    assert batch.ranked("q") and all(f"{M}Year" in movie_kb.document(h.iri).types for h in batch.ranked("q"))


# ------------------------------------------------------------- failure paths


def test_an_unknown_mode_is_refused(movie_kb):
    with pytest.raises(KqeError, match="mode must be soft or strict"):
        FourStep(movie_kb, mode="loose")


def test_a_reading_with_no_usable_triplet_falls_back_and_says_why(movie_kb):
    stage = FourStep(movie_kb, Reading(t("?x", "budget_of", "Kismet")), k=K, fallback=BM25(movie_kb, K))
    batch = stage.run("what was the budget of Kismet")
    explain = batch.explain["q"]
    assert explain["triplets"]["triplets"] == []
    assert "relation 'budget_of' is not in the ontology" in explain["triplets"]["notes"][0]
    assert "sparql" not in explain
    assert names(movie_kb, batch.ranked("q")[:1]) == ["Kismet"]  # BM25 still answers


def test_a_constant_that_links_to_nothing_leaves_the_fallback_results(movie_kb):
    stage = FourStep(movie_kb, Reading(t("?x", "directed_by", "Zyxwv Qwrtp")), k=K, fallback=BM25(movie_kb, K))
    batch = stage.run("films directed by Zyxwv Qwrtp")
    explain = batch.explain["q"]
    assert explain["linked"] == {"Zyxwv Qwrtp": []}
    assert explain["candidates"] == 0 and "error" not in explain
    assert names(movie_kb, batch.ranked("q")) == names(movie_kb, BM25(movie_kb, K).search("films directed by Zyxwv Qwrtp"))


def test_a_query_the_store_refuses_is_explained_and_the_fallback_still_answers(movie_kb):
    # LIMIT -1 is not SPARQL: the store refuses the compiled query
    stage = FourStep(movie_kb, Reading(t("Kismet", "directed_by", "?x")), k=K, fallback=BM25(movie_kb, K),
                     sparql_limit=-1)
    batch = stage.run("who directed Kismet")
    assert "the compiled query failed" in batch.explain["q"]["error"]
    # the fallback's results, less Kismet itself: the request's own constant is not its answer
    fallback = [h.iri for h in BM25(movie_kb, K).search("who directed Kismet")]
    hits = [h.iri for h in batch.ranked("q")]
    assert hits[: K - 1] == [i for i in fallback if i != node(movie_kb, "Kismet")] and len(hits) == K
    assert node(movie_kb, "Kismet") not in hits


def test_without_a_fallback_only_structured_results_are_returned(movie_kb):
    stage = FourStep(movie_kb, Reading(t("Kismet", "directed_by", "?x")), k=K)
    assert names(movie_kb, stage.search("who directed Kismet")) == ["William Dieterle"]
    # Gene Hackman acted, but directed nothing
    nothing = FourStep(movie_kb, Reading(t("?x", "directed_by", "Gene Hackman")), k=K)
    assert nothing.search("films directed by Gene Hackman") == []


# ---------------------------------------------------------------- hierarchy


def test_a_general_phenotype_finds_diseases_annotated_with_its_subtypes(bio_kb):
    # No disease is annotated with "Seizure" itself: 100001 has Focal-onset seizure, 100003
    # Bilateral tonic-clonic seizure. 100002 explicitly lacks seizure.
    reading = Reading(Triplet(End("?x", "Disease"), "hasPhenotype", End("seizure", "Phenotype")))
    stage = FourStep(bio_kb, reading, k=5, fallback=BM25(bio_kb, 5))
    batch = stage.run("which disease has seizures")
    hits = batch.ranked("q")
    assert set(names(bio_kb, hits[:2])) == {"OMIM:100001", "OMIM:100003"}
    assert batch.explain["q"]["candidates"] == 2
    assert "OMIM:100002" not in names(bio_kb, hits[:2])


def test_offline_reading_of_a_phenotype_question(bio_kb):
    batch = pipeline("4step", bio_kb, Settings(), 5).run("Which diseases have a tall forehead?")
    explain = batch.explain["q"]
    assert relations(explain) == ["hasPhenotype"]
    assert explain["linked"]["tall forehead"][0]["iri"] == node(bio_kb, "HP:0000348")
    assert set(names(bio_kb, batch.ranked("q")[:2])) == {"OMIM:100002", "OMIM:100003"}


def test_offline_reading_of_a_general_phenotype_question(bio_kb):
    batch = pipeline("4step", bio_kb, Settings(), 5).run("Which disease has seizure?")
    assert set(names(bio_kb, batch.ranked("q")[:2])) == {"OMIM:100001", "OMIM:100003"}
    assert relations(batch.explain["q"]) == ["hasPhenotype"]


def test_offline_generator_reads_no_triplets_from_a_question_without_names(movie_kb):
    reading = OfflineTriplets(movie_kb)("what is a good film for tonight")
    assert reading.triplets == [] and reading.notes == ["no entity of the KB is named in the query"]
