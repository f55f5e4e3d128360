"""One sentence splitter (``kqe_rdf.kb.sentences``) for KAR, LKQE and question answering: titles and names
with full stops stay whole."""

from __future__ import annotations

import pytest

from kqe_rdf.kb.sentences import split_sentences
from kqe_rdf.methods.answering.evidence import document_sentences
from kqe_rdf.methods.expansion.text import body_sentences, salient

TEXT = "Dr. Ehrlich's Magic Bullet was directed by William Dieterle. J. R. R. Tolkien wrote The Hobbit."


@pytest.mark.parametrize("text, expected", [
    (TEXT, ["Dr. Ehrlich's Magic Bullet was directed by William Dieterle.", "J. R. R. Tolkien wrote The Hobbit."]),
    ("Mr. Smith Goes to Washington is a film. It won prizes!", ["Mr. Smith Goes to Washington is a film.",
                                                              "It won prizes!"]),
    ("name: X\ntype: Movie\nOne fact.", ["name: X", "type: Movie", "One fact."]),
    ("Sentences start with a capital. not this one", ["Sentences start with a capital. not this one"]),
    ('Counted at day 1. Synthesis of NO. "Quoted" here. [1] Cited.', ["Counted at day 1.", "Synthesis of NO.",
                                                                    '"Quoted" here.', "[1] Cited."]),
    ("", []),
])
def test_a_full_stop_after_an_abbreviation_or_initial_ends_no_sentence(text, expected):
    assert split_sentences(text) == expected


def test_kar_lkqe_and_answering_read_the_same_sentences():
    doc = f"name: Magic Bullet\ntype: Movie\ndescription: {TEXT}"
    expected = split_sentences(TEXT)
    assert body_sentences(doc, ["description"]) == expected  # KAR and LKQE
    assert document_sentences("Magic Bullet", doc, prose={"description"}) == [f"Magic Bullet — {s}" for s in expected]
    assert salient(doc, "who wrote the hobbit") == "J. R. R. Tolkien wrote The Hobbit."
