"""The sentences of a text: the one splitter KAR, LKQE and question answering read documents with.

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

#: A sentence ends at ., ! or ? followed by space and a capital, a digit, an opening bracket or a quote.
SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9(\[\"'“‘])")

#: Words after which a full stop ends no sentence ("Dr. Ehrlich's Magic Bullet", "Mr. Smith Goes to Washington").
ABBREVIATIONS = frozenset("mr mrs ms dr st jr sr mt vs prof gen col lt sgt capt fr rev no vol fig al etc ca".split())


def split_sentences(text: str) -> list[str]:
    """``text`` split at line breaks and at sentence ends, not after an abbreviation or an initial; stripped."""
    out = []
    for line in text.splitlines():
        start = 0
        for match in SENTENCE_END.finditer(line):
            before = line[start : match.start()].rstrip(".!?").rsplit(None, 1)
            word = before[-1].lstrip("([\"'“‘") if before else ""
            # an initial is one letter ("J. R. R. Tolkien"; "day 1." ends a sentence), an abbreviation is not
            # written in capitals ("Dr. Ehrlich", but "synthesis of NO. The")
            initial = len(word) <= 1 and not word.isdigit()
            if line[match.start() - 1] == "." and (initial or (word.lower() in ABBREVIATIONS and not word.isupper())):
                continue
            out.append(line[start : match.start()])
            start = match.end()
        out.append(line[start:])
    return [part.strip() for part in out if part.strip()]
