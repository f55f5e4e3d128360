"""The reader follows meaning, not a label's spelling, on a KB it was never told about (issue 23).

A tiny people-and-clubs KB as JSON Lines, one class for every node, relation names as the only schema: the
reader must read "dad" as ``parents``, "offspring" as ``children``, chain them, read "where" as the relation
that reaches a place, and intersect two constants on one answer. WordNet (Debian's ``wordnet-base``) is the
lexical resource; a developer's machine without it skips, CI fails.
"""

from __future__ import annotations

import json
import weakref

import pytest

from kqe_rdf.kb.build import build_kb
from kqe_rdf.kb.importers.jsonl import JsonlImporter
from kqe_rdf.kb.knowledge_base import KnowledgeBase
from kqe_rdf.kb.lexicon import build_lexicon, related_words, wh_words
from kqe_rdf.methods.reading import OfflineTriplets
from kqe_rdf.kb.words import FUNCTION_WORDS
from kqe_rdf.methods.reading import stem
from kqe_rdf.methods.registry import pipeline


pytestmark = pytest.mark.usefixtures("wordnet_installed")  # conftest.py: CI fails without it


PEOPLE = {"Ann_SMITH": [("parents", "Bob_SMITH"), ("spouse", "Carl_JONES"), ("place_of_birth", "Lyon")],
          "Bob_SMITH": [("children", "Dora_SMITH"), ("children", "Ann_SMITH"), ("place_of_birth", "Paris"),
                        ("cause_of_death", "cancer"), ("place_of_death", "Nice"), ("gender", "male")],
          "Dora_SMITH": [("parents", "Bob_SMITH"), ("place_of_birth", "Lyon")],
          "Carl_JONES": [("place_of_birth", "Nice"), ("cause_of_death", "heart_attack"), ("religion", "Buddhism")],
          "Eve_KLEIN": [("plays_in_club", "FC_Lyon"), ("plays_position", "Defender")],
          "Finn_BERG": [("plays_in_club", "FC_Lyon"), ("plays_position", "Forward")],
          "Gus_HOLM": [("plays_in_club", "FC_Nice"), ("plays_position", "Defender")]}


@pytest.fixture(scope="module")
def people_kb(tmp_path_factory):
    folder = tmp_path_factory.mktemp("people")
    names = set(PEOPLE) | {t for edges in PEOPLE.values() for _r, t in edges}
    lines = [{"kind": "node", "id": n, "type": "Entity", "name": n.replace("_", " "), "aliases": [n]}
             for n in sorted(names)]
    lines += [{"kind": "edge", "head": h, "relation": r, "tail": t} for h, edges in PEOPLE.items() for r, t in edges]
    source = folder / "people.jsonl"
    source.write_text("".join(json.dumps(line) + "\n" for line in lines))
    build_kb(JsonlImporter([source]), folder / "kb")
    return KnowledgeBase.open(folder / "kb")


def relations(kb, question: str) -> list[str]:
    return [t.relation.rsplit("#", 1)[-1] for t in OfflineTriplets(kb)(question).triplets]


def test_wordnet_relates_everyday_words_to_a_relation_word():
    assert related_words("director")["manager"] == ("synonym", 0.8)
    assert related_words("parents")["dad"][0] == "narrower"
    assert related_words("children")["offspring"] == ("broader", 0.7)
    assert related_words("country")["national"][0] == "pertainym"  # an adjective that pertains to a sense
    assert wh_words("country") == {"where"} and wh_words("year") == {"when"}
    assert related_words("be") == {}  # a light verb names no relation


def test_the_lexicon_keeps_what_the_label_does_not_spell_and_irregular_forms():
    table = build_lexicon({"dir": ["directed by", "director"]}, stem, FUNCTION_WORDS)["dir"]
    assert stem("director") not in table  # the label's own word is matched exactly, not as a related word
    assert table[stem("manager")][0] == "synonym"
    assert table[stem("led")][2] == "led (synonym of directed)"  # "led" is an irregular form of "lead"


def test_a_paraphrase_reads_as_the_relation(people_kb):
    assert relations(people_kb, "who is Ann_SMITH's dad") == ["parents"]
    assert relations(people_kb, "who is the other half of Ann_SMITH") == ["spouse"]


def test_a_chain_of_paraphrases_is_composed(people_kb):
    # two hops: parents then children, or the same walk through their inverses (the data holds both)
    assert sorted(relations(people_kb, "who is Ann_SMITH's dad's offspring")) == ["children", "parents"]
    top = pipeline("4step-offline", people_kb, people_kb.settings, 3).search("who is Ann_SMITH's dad's offspring")
    # Ann is one of her dad's offspring too: a chain that comes back without retracing a step may answer with
    # the constant itself (issue 36; "X's director's films", which retraces directed by, never answers X)
    assert {people_kb.document(hit.iri).name for hit in top[:2]} == {"Dora SMITH", "Ann SMITH"}


@pytest.mark.parametrize("question, path", [
    ("what killed Ann_SMITH's other half", ["spouse", "cause_of_death"]),   # a verb names the relation
    ("how did Ann_SMITH's dad die", ["parents", "cause_of_death"]),
    ("where was Ann_SMITH's husband born", ["spouse", "place_of_birth"]),  # a wh-frame and a verb
    ("where did Ann_SMITH's dad pass away", ["parents", "place_of_death"]),
    ("what faith did Ann_SMITH's husband follow", ["spouse", "religion"]),  # the encoder: faith ~ religion
    ("is Ann_SMITH's dad a man or a woman", ["parents", "gender"]),  # the encoder reads the phrase whole
])
def test_verbs_and_wh_frames_name_relations(people_kb, question, path):
    assert relations(people_kb, question) == path


def test_two_constants_on_one_answer_meet_in_the_data(people_kb):
    stage = pipeline("4step-offline", people_kb, people_kb.settings, 3)
    top = stage.search("name a player who plays at Defender position at the club FC_Lyon")
    assert people_kb.document(top[0].iri).name == "Eve KLEIN"
    # each constant one hop to the same answer, not a second hop through the club's players' positions
    assert sorted(relations(people_kb, "name a player who plays at Defender position at the club FC_Lyon")) == \
        ["plays_in_club", "plays_position"]


def test_the_ranking_says_which_related_word_it_read(people_kb):
    reader = OfflineTriplets(people_kb)
    mentions = reader.linker.mentions("who is Ann_SMITH's dad", skip_words=people_kb.schema.words)
    request = reader.requests.read("who is Ann_SMITH's dad", mentions)
    groups = reader.reader.groups(mentions, reader.linker.index)
    best = reader.reader.ranked(groups, mentions, request, reader.linker.index)[next(iter(groups))][0]
    assert "dad (narrower of parents)" in best.why["related words"]


def test_the_reader_names_no_dataset_words():
    """Rules follow from the ontology, the graph and WordNet: no relation name or paraphrase of an evaluation
    set is written into the reader (WC2014's relations, the family KB's paraphrases)."""
    from pathlib import Path

    import kqe_rdf

    root = Path(kqe_rdf.__file__).parent
    sources = [*sorted((root / "methods").rglob("*.py")), root / "kb" / "linking.py", root / "kb" / "lexicon.py"]
    text = "\n".join(p.read_text() for p in sources).lower()
    for word in ["plays_in_club", "plays in club", "plays_for_country", "is_in_country", "plays_position",
                 "wears_number", "is_aged", "other half", "darling", "footballer", "nationality", "wc2014",
                 "cause_of_death", "place_of_birth"]:
        assert word not in text, word


def test_the_explanation_shows_each_phrase_the_relation_it_was_read_as_how_and_what_it_beat(people_kb):
    explain = pipeline("4step-offline", people_kb, people_kb.settings, 3).run("who is Ann_SMITH's dad").explain["q"]
    [read] = explain["triplets"]["reading"]
    assert read["constant"] == "Ann_SMITH" and read["path"] == "parents"
    assert read["hops"] == [{"relation": "parents", "how": "narrower of parents, 0.70", "words": ["dad"]}]
    assert read["beat"] and all(other["score"] < read["score"] for other in read["beat"])


def test_each_ranking_rule_reads_what_its_docstring_says():
    from kqe_rdf.methods.reading.ranking import REUSED, further_hop_cost, hop_support, unread_words

    words = [(0, "who"), (1, "is"), (3, "dad"), (4, "play")]
    related = {"dad": ["narrower", 0.7, "dad (narrower of parents)"], "who": ["wh", 0.6, "who (wh of parents)"]}
    soft = {"dad": 0.7, "who": 0.6}
    pair = frozenset({"parents"})
    # a word of the relation's own phrases names the hop fully; a related word by its weight
    assert hop_support(words, {"play"}, {}, soft, {}, pair, True, "plays", {}).support == 1.0
    reading = hop_support(words, set(), related, soft, {}, pair, False, "parents", {3: "dad"})
    assert (reading.support, reading.hits, reading.shown["how"]) == (0.7, [3], "narrower of parents, 0.70")
    # a word another relation's hop has read counts REUSED; a wh-word names only the last hop
    assert hop_support(words, {"play"}, {}, soft, {4: frozenset({"x"})}, pair, True, "p", {}).support == REUSED
    assert hop_support([(0, "who")], set(), related, soft, {}, pair, False, "p", {}).support == 0.0
    # a second hop named by a word of its own costs less than an unnamed one
    assert further_hop_cost(0.25, reading, {}) < further_hop_cost(0.25, reading, {3: pair})
    # an unread relation word costs 1, an unread related word its weight, an excused one nothing
    assert unread_words(words, {"play"}, soft, set(), set()) == 1 + 0.7 + 0.6
    assert unread_words(words, {"play"}, soft, {"play", "who"}, {3}) == 0.0


def test_an_irregular_form_comes_only_with_its_part_of_speech():
    # "lead" is a synonym of the noun "star" (the lead of a film) and of the verb "direct"; "led" is the verb's
    # past tense, so it names directing and not starring.
    table = build_lexicon({"dir": ["directed by"], "star": ["starred actors", "stars"]}, stem, FUNCTION_WORDS)
    assert table["dir"][stem("led")][0] == "synonym"
    assert stem("led") not in table["star"] and table["star"][stem("lead")][0] == "synonym"


def test_a_new_process_reads_the_phrases_an_earlier_one_encoded(people_kb, tmp_path, monkeypatch):
    from kqe_rdf.kb.phrases import remembered_phrase_vectors
    from kqe_rdf.methods.reading import words
    from kqe_rdf.methods.reading.words import RelationWords

    monkeypatch.setenv("KQE_CACHE_DIR", str(tmp_path))
    first = RelationWords(people_kb)
    monkeypatch.setattr(words, "_UNWRITTEN", weakref.WeakSet())  # (this process's readers only)
    encoded = first.vectors(["parents place of birth", "children"])
    words._write_unwritten()  # (what the process runs as it exits)
    # The two-hop phrase is not stored with the KB: it is encoded, and kept for the next process ...
    assert set(remembered_phrase_vectors(people_kb)) == {"parents place of birth"}
    # ... which reads it instead of encoding it (its vectors are those the encoder gave).
    later = RelationWords(people_kb)
    later.vectors(["children"])
    assert (later._phrase_vectors["parents place of birth"] == encoded[0]).all()


def test_request_time_phrases_are_written_once_when_the_process_exits(people_kb, tmp_path, monkeypatch):
    # A long-running server meets new paths request after request: none of them rewrites the cache file (up to
    # 3 MB); the process writes what it encoded once, as it exits.
    from kqe_rdf.kb.phrases import remembered_phrase_vectors
    from kqe_rdf.methods.reading import words
    from kqe_rdf.methods.reading.words import RelationWords

    monkeypatch.setenv("KQE_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(words, "_UNWRITTEN", weakref.WeakSet())  # (this process's readers only)
    server = RelationWords(people_kb)
    for who in ("parents", "spouse", "children"):
        for what in ("place of birth", "gender", "name"):
            server.vectors([f"{who} {what}"])  # one request, one new two-hop phrase
            assert remembered_phrase_vectors(people_kb) == {}
    words._write_unwritten()
    written = list(tmp_path.glob("phrases-*"))
    assert len(written) == 1 and len(remembered_phrase_vectors(people_kb)) == 9
    stamp = written[0].stat().st_mtime_ns
    words._write_unwritten()  # nothing new since: not written again
    assert written[0].stat().st_mtime_ns == stamp
    # Another reader of the KB writing its own phrases later keeps these.
    other = RelationWords(people_kb)
    other._remembered, other._written = {}, 0
    other.vectors(["spouse spouse"])
    words._write_unwritten()
    assert {"children gender", "spouse spouse", "parents name"} <= set(remembered_phrase_vectors(people_kb))