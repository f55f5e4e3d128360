"""The English word lists, in one place: the stop list and the term splitter shared by name linking, RM3 feedback
and query expansion, and the closed classes of words the reader, the linker and the sentence splitter read
requests by (function words, prepositions, wh-words, articles, titles, negations); and the light stemmer the
reader matches relation words with (:func:`stem`). General English only: no list names a word of one KB
(``tests/methods/test_reader_meaning.py``).

>>> terms("The films directed by Jeff Nichols in 2016")
['films', 'directed', 'jeff', 'nichols']
"""

from __future__ import annotations

import functools
import re

_WORD = re.compile(r"[^\W_]{2,}", re.UNICODE)
STOPWORDS = frozenset(
    "a an and are as at be but by for from has have he her his i if in into is it its of on or she such that the "
    "their them then there these they this to was were which will with what who whom how why when where not no "
    "name type aliases more also can may".split()
)


def terms(text: str) -> list[str]:
    return [w for w in (m.lower() for m in _WORD.findall(text)) if w not in STOPWORDS and not w.isdigit()]


#: Words of relation phrases and requests that say nothing about which relation is meant.
FUNCTION_WORDS = frozenset("a an the of by in on at to for with from has have had is are was were be been "
                           "its it this that which who what s do does did doe".split())
#: Prepositions that say how the answer stands to the constant after them. Not "of": the genitive says nothing
#: of which relation ("the director of X", "the language of X").
PREPOSITIONS = frozenset("in on at by for with from to into about under over after before during against among "
                         "between through within without".split())
ARTICLES = frozenset({"the", "a", "an"})
#: Words that may stand between a preposition and its constant ("in the X").
DETERMINERS = frozenset("the a an this that these those".split())
WH_WORDS = ("what", "which", "who", "whom", "whose", "when", "where", "how")
#: Wh-words that ask for a person: a path that walks back to a holder answers them ("who was born in X" is the
#: one born there, "who are painters" those whose profession it is).
PERSON_WH = frozenset({"who", "whom"})
#: Wh-words that say something about the relation asked for ("where" a place, "why" a cause); "what", "which" and
#: "who" only ask.
TELLING_WH = frozenset("where when why how".split())
ASKING_WH = frozenset("what which who whom whose".split())
#: Words that may stand between a wh-word and the class it asks for ("what are the films").
QUESTION_WORDS = STOPWORDS | {"do", "does", "did", "been", "being", "some", "all", "many", "much"}
#: Nouns that introduce the noun after them ("the name of the spouse of X", "the type of religion of X"): no hop.
CLASSIFIERS = frozenset("name names type types kind kinds sort sorts".split())
#: Words that may end a question without naming a link ("what is X's child's ethnicity about / like").
QUESTION_PARTICLES = PREPOSITIONS | {"like", "up", "out", "off", "down", "away", "back"}
#: Words around a question's slots that name nothing: auxiliaries, copulas, articles.
FRAME_WORDS = FUNCTION_WORDS | frozenset("be been being am can could would will shall should may might must please "
                                         "tell me us give list show".split())
#: Words after "how" that ask for a number ("how many", "how long", "how tall").
HOW_MUCH = frozenset("many much long tall old big large far high heavy wide deep often short small".split())
#: Nouns after "what"/"which" that ask for a date or time ("what year", "which day").
WHEN_NOUNS = frozenset("year years date dates day days month months time".split())
#: Words of a relation's label that say it states an absence ("lacks phenotype", "excluded").
NEGATION_WORDS = frozenset("lacks lack lacking absent absence not no without excluded excludes never negative "
                           "non".split())
#: Verbs so general that their senses reach half the dictionary: never read as naming a relation.
LIGHT_WORDS = frozenset("be is are was were been have has had do does did get make take give go put set come "
                        "let keep seem become use one thing entity object whole".split())
#: Titles written before a person's name ("Sir Alexander Fleming"): people write the name without them.
HONORIFICS = frozenset("sir dame lord lady dr prof professor mr mrs ms miss saint st".split())
#: Particles inside a person's name ("Ludwig van Beethoven", "Charles de Gaulle").
NAME_PARTICLES = frozenset("van von de der den da di du del della la le ten ter bin ibn".split())
#: Words after which a full stop ends no sentence ("Dr. Ehrlich's Magic Bullet", "Mr. Smith Goes to Washington").
ABBREVIATIONS = frozenset("mr mrs ms dr st jr sr mt vs prof gen col lt sgt capt fr rev no vol fig al etc ca".split())


_RELATION_WORD = re.compile(r"[a-z0-9]+")
_SUFFIXES = ("ings", "ing", "ers", "ors", "er", "or", "ed", "en", "es", "s")


@functools.lru_cache(maxsize=65536)  # (a request's words are stemmed once per path it ranks)
def stem(word: str) -> str:
    """A light English stemmer, enough to match relation words across forms: "directed", "director",
    "directors" → "direct"; "starred", "starring", "stars" → "star"; "written", "writer" → "writ".

    >>> stem("directed") == stem("director") == stem("directs")
    True
    """
    w = word.lower()
    for suffix in _SUFFIXES:
        if w.endswith(suffix) and len(w) - len(suffix) >= 3:
            w = w[: -len(suffix)]
            break
    if len(w) >= 4 and w[-1] == w[-2] and w[-1] not in "lsz":
        w = w[:-1]
    if len(w) >= 4 and w.endswith("e"):
        w = w[:-1]
    return w


def phrase_stems(phrase: str) -> set[str]:
    """The stems of a phrase's words that can name a relation.

    >>> sorted(phrase_stems("directed by"))
    ['direct']
    """
    return {stem(w) for w in _RELATION_WORD.findall(phrase.lower()) if w not in FUNCTION_WORDS}
