"""The words of a text as search sees them: the stop list and the term splitter shared by name linking,
RM3 feedback and query expansion.

>>> terms("The films directed by Jeff Nichols in 2016")
['films', 'directed', 'jeff', 'nichols']
"""

from __future__ import annotations

import re

_WORD = re.compile(r"[^\W_]{2,}", re.UNICODE)
STOPWORDS = frozenset(
    "a an and are as at be but by for from has have he her his i if in into is it its of on or she such that the "
    "their them then there these they this to was were which will with what who whom how why when where not no "
    "name type aliases more also can may".split()
)


def terms(text: str) -> list[str]:
    return [w for w in (m.lower() for m in _WORD.findall(text)) if w not in STOPWORDS and not w.isdigit()]
