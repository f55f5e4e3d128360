"""The sentences of a text: the one splitter KAR, LKQE and question answering read documents with, and the one
place a request's sentence edges are drawn (the scope of a negation: "Seizures! Microcephaly was not observed.").

A full stop after an abbreviation or an initial ends no sentence, so titles and names such as
"Dr. Ehrlich's Magic Bullet" or "J. R. R. Tolkien" stay whole; a line break always ends one (node
documents write one fact a line).

>>> split_sentences("Dr. Ehrlich's Magic Bullet directed by William Dieterle. J. R. R. Tolkien wrote it.")
["Dr. Ehrlich's Magic Bullet directed by William Dieterle.", 'J. R. R. Tolkien wrote it.']
>>> split_sentences("name: p1\\ntext: One. Two!  Three?")
['name: p1', 'text: One.', 'Two!', 'Three?']
>>> split_sentences("Cells were counted at day 1. The synthesis of NO. Its source (Fig. 2) is unclear.")
['Cells were counted at day 1.', 'The synthesis of NO.', 'Its source (Fig. 2) is unclear.']
"""

from __future__ import annotations

import re

from .words import ABBREVIATIONS

#: A sentence ends at ., ! or ? followed by space and a capital, a digit, an opening bracket or a quote.
SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9(\[\"'“‘])")
#: A request typed in lower case ends a sentence at ., ! or ? and space whatever follows ("seizures. no fever").
TYPED_END = re.compile(r"(?<=[.!?])\s+")



def sentence_spans(text: str, typed: bool = False) -> list[tuple[int, int]]:
    """Where each sentence of ``text`` starts and ends: the one place sentence edges are drawn (at line breaks and
    sentence ends, not after an abbreviation or an initial), for splitting a text and for finding a word's sentence.
    ``typed``: a request as people type it, whose sentences may start in lower case (:data:`TYPED_END`).

    >>> [(a, b) for a, b in sentence_spans("Seizures and hypotonia! Microcephaly was not observed.")]
    [(0, 23), (24, 54)]
    """
    out, offset = [], 0
    for line in text.splitlines(keepends=True):
        start = 0
        for match in (TYPED_END if typed else SENTENCE_END).finditer(line):
            before = line[start : match.start()].rstrip(".!?").rsplit(None, 1)
            word = before[-1].lstrip("([\"'“‘") if before else ""
            # an initial is one letter ("J. R. R. Tolkien"; "day 1." ends a sentence), an abbreviation is not
            # written in capitals ("Dr. Ehrlich", but "synthesis of NO. The")
            initial = len(word) == 1 and not word.isdigit()
            abbreviation = not typed and word.lower() in ABBREVIATIONS and not word.isupper()  # (typed: "No. Seizure")
            if line[match.start() - 1] == "." and (initial or abbreviation):
                continue
            out.append((offset + start, offset + match.start()))
            start = match.end()
        out.append((offset + start, offset + len(line.rstrip("\r\n"))))
        offset += len(line)
    return [(a, b) for a, b in out if text[a:b].strip()]


def split_sentences(text: str, typed: bool = False) -> list[str]:
    """``text`` split at line breaks and at sentence ends, not after an abbreviation or an initial; stripped."""
    return [text[a:b].strip() for a, b in sentence_spans(text, typed)]


def sentence_at(text: str, position: int, typed: bool = True) -> str:
    """The sentence of a request that holds the character at ``position`` (space between two sentences belongs to
    the next: a mention blanked out of a request is read with the words after it).

    >>> sentence_at("Seizures and hypotonia! Microcephaly was not observed.", 0)
    'Seizures and hypotonia!'
    >>> sentence_at("child with seizures. no microcephaly", 12)
    'child with seizures.'
    """
    return next((text[a:b] for a, b in sentence_spans(text, typed) if position < b), "")
