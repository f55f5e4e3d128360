"""Step 1 of reading: the request around its mentions — its words, the class it asks for, its wh-word.

The mentions (the longest n-grams that name nodes, :meth:`kqe_rdf.kb.linking.Linker.mentions`) are taken
out; what is left says which relations lead from them to the answer. :class:`RequestReader` reads:

- :meth:`~RequestReader.answer_types`: the class the wh-phrase asks for ("which films", "who", "when"; a
  wh-word no class cue names asks for what WordNet says it asks for: "whom" → the class labelled person);
- :meth:`~RequestReader.leading_class` / :meth:`~RequestReader.trailing_class`: the class a noun-phrase
  request starts or ends with ("movies starring X", "... also wrote movies");
- :meth:`~RequestReader.request`: the words (position, stem) outside the mentions, with a common word beside
  a proper name kept as a word ("who is the manager of Kismet", where "manager" is also a tag), and the words
  only the encoder can read (:meth:`.words.RelationWords.similar`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from pyoxigraph import NamedNode

from ...kb import queries
from ...kb.lexicon import base_forms, is_adjective, is_inflected_verb, is_noun
from ...kb.context import affirmed_sentences
from ...kb.linking import Linker, Mention, list_items, singular
from ...kb.sentences import split_sentences
from ...kb.words import ARTICLES, FUNCTION_WORDS, QUESTION_WORDS, WH_WORDS, stem
from ..retrieval import STOPWORDS
from .words import RelationWords, RoleReader

_LIST_GAP = re.compile(r"\x00(?:(?:\s*(?:,|;|\band\b|\bor\b))+\s*\x00)*")
#: A request that opens with one of these verbs asks for what follows, as a wh-word does ("can you name a film
#: directed by X", "you can name a film by X", "list the players of C"): the verb frames the request, it names
#: no relation.
_FRAME = re.compile(r"^\W*(?:(?:can|could|would|will)\s+you\s+|you\s+(?:can|could|may)\s+)?(?:please\s+)?"
                    r"(name|list|give|show|tell)\b", re.I)
#: How strongly a related word must name a relation to be read as one rather than as a name (a synonym: "players"
#: for actors; not "neck", a narrower word of "part").
RELATED_NAME = 0.8


@dataclass
class Request:
    """What the ranking reads from a request: its words (position, stem) outside the mentions, the word
    positions of the mentions, the wanted answer classes and the request's vector."""

    words: list[tuple[int, str]]
    mention_positions: list[tuple[int, int]]
    wanted: set[str]
    vector: np.ndarray | None
    #: Word spans of the wh-word that asks for the answer (none when the request has no wh-word).
    answer_at: list[tuple[int, int]] = field(default_factory=list)
    #: Words of this request that mean a relation by the encoder alone (:meth:`.RelationWords.similar`), in
    #: the shape of :attr:`.RelationWords.related`: ``{relation: {stem: [how, weight, word]}}``.
    similar: dict[str, dict[str, list]] = field(default_factory=dict)
    #: The request's words as written, by position (for explanations).
    surface: dict[int, str] = field(default_factory=dict)
    #: Positions of words that say what kind of thing the answer or a constant is ("which films", "the film X"):
    #: they may name a hop, and cost nothing when none does.
    kinds: set[int] = field(default_factory=set)
    #: Role words by position (:class:`.words.Role`): "grandfather" names two hops of parents and a male.
    roles: dict = field(default_factory=dict)
    #: Whether it asks how many answers there are (:func:`counting`).
    counting: bool = False


def counting(query: str) -> bool:
    """Whether a question asks how many of something there are ("how many albums did X produce"); a value that
    says how many ("how many tracks does X have", a number stored with X) is read first.

    >>> counting("How many albums did Nora Vale produce?"), counting("how much is it")
    (True, False)
    """
    words = query.lower().split()
    return any(a == "how" and b == "many" for a, b in zip(words, words[1:]))


def is_name(query: str, mention: Mention) -> bool:
    """Whether a mention is written as a proper name: capitalised ("Kismet", "Nikon D500"), and not only because
    it starts a sentence (at a sentence start a later word must be capitalised too: "Roberto Benigni")."""
    before = query[: mention.start].rstrip()
    if not mention.text[:1].isupper():
        return False
    return (bool(before) and before[-1] not in ".!?:;") or any(w[:1].isupper() for w in mention.text.split()[1:])


def is_common_word(mention: Mention) -> bool:
    """A single lower-case word ("together", "heat")."""
    return mention.text.islower() and " " not in mention.text.strip()



_ASKED = re.compile(r"\b(?:which|what)(?:\s+(?:is|are|was|were))?(?:\s+(?:a|an|the|some))?\s+$", re.I)
_BEFORE_NAME = re.compile(r"^\s+[A-Z0-9]")


def names_the_asked_kind(query: str, mention: Mention) -> bool:
    """Whether a lower-case noun is the kind of thing asked for or named, not a constant: the noun after
    "which"/"what" ("which films are about X", "what is a film directed by X") or a noun in apposition to a
    name right after it ("the film Dream Demon"), even when a node happens to be called so (a tag "film").

    >>> from kqe_rdf.kb.linking import Mention
    >>> names_the_asked_kind("which films are about war", Mention("films", 6, 11, ()))
    True
    >>> names_the_asked_kind("who directed the film Dream Demon", Mention("film", 17, 21, ()))
    True
    >>> names_the_asked_kind("which Nikon lenses fit", Mention("Nikon", 6, 11, ()))
    False
    >>> names_the_asked_kind("which people born in Paris are painters", Mention("people", 6, 12, ()))
    True
    >>> names_the_asked_kind("who is in Heat", Mention("in", 7, 9, ()))
    False
    >>> names_the_asked_kind("what is the primary language of X", Mention("primary", 12, 19, ()))
    False
    """
    word = mention.text.strip()
    if mention.text != mention.text.lower() or " " in word or word in STOPWORDS or not is_noun(word):
        return False  # "in" is a noun too (an inch), but "in Heat" names no kind
    if _BEFORE_NAME.match(query[mention.end:]):
        return True
    if not _ASKED.search(query[: mention.start]):
        return False
    # "what is the primary language": a word before a noun modifies it; the noun is what is asked for. Before an
    # inflected verb ("which people born in X", "which person directed X") it is the kind asked for.
    following = re.match(r"\s*([a-z]+)", query[mention.end:])
    return (following is None or following.group(1) in QUESTION_WORDS or not is_noun(following.group(1))
            or is_inflected_verb(following.group(1)))


_COPULA = re.compile(r"\b(?:is|are|was|were)\s+(?:an?\s+|the\s+)?$", re.I)


def is_complement(query: str, mention: Mention) -> bool:
    """Whether a mention ends the request as the complement of a copula ("which people born in Paris are painters"):
    a condition on the answer, not a constant a path starts from.

    >>> from kqe_rdf.kb.linking import Mention
    >>> is_complement("which people born in Paris are painters?", Mention("painters", 31, 39, ()))
    True
    >>> is_complement("who is Ann's dad", Mention("Ann", 7, 10, ()))
    False
    """
    return bool(_COPULA.search(query[: mention.start])) and not re.search(r"\w", query[mention.end:])


def modifies_a_noun(query: str, mention: Mention) -> bool:
    """Whether a lower-case single word is an adjective before a noun ("the primary language of X", "the main
    actor"): it says which one of a kind, it is not a constant, even when a node is so called (a film "Primary").

    >>> from kqe_rdf.kb.linking import Mention
    >>> modifies_a_noun("what is the primary language of Raffles", Mention("primary", 12, 19, ()))
    True
    >>> modifies_a_noun("films about heat starring Al Pacino", Mention("heat", 12, 16, ()))
    False
    """
    if not is_common_word(mention) or not is_adjective(mention.text.strip()):
        return False
    following = re.match(r"\s*([a-z]+)\b", query[mention.end:])
    return following is not None and following.group(1) not in STOPWORDS and is_noun(following.group(1))


#: Items a request needs to be read as a list: its items no name matched are then linked approximately
#: (:meth:`~kqe_rdf.kb.linking.Linker.phrases`).
LIST_ITEMS = 3


class RequestReader:
    """Reads a request around its mentions against one KB's schema (see the module docstring)."""

    def __init__(self, kb, words: RelationWords, linker: Linker | None = None) -> None:
        self.kb = kb
        self.words = words
        self.linker = linker or Linker(kb)
        #: Role words ("grandfather", "mom"): a chain of relations and a value of who holds it.
        self.roles = RoleReader(kb, words)
        #: The classes a wh-word asks for by WordNet ("whom" → the class labelled "person"), where no cue says;
        #: read from class labels only (an alt label such as "type" has a sense that is a person).
        self.wh_classes: dict[str, set[str]] = {}
        #: The classes each relation reaches (:meth:`range_asked`), read once.
        self._ranges: dict[str, set[str]] = {}
        from ...kb.lexicon import wh_words

        for cls, term in kb.schema.classes.items():
            for wh in wh_words(term.label.lower()) if " " not in term.label.strip() else ():
                self.wh_classes.setdefault(wh, set()).add(cls)

    def mentions(self, query: str) -> tuple[list[Mention], list[Mention]]:
        """The request's constants, and its conditions on the answer: the one mention finder of the package
        (``search``, ``ask`` and ``expand`` link the same constants). Words of the schema
        (:attr:`~kqe_rdf.kb.ontology.Schema.words`) are never a mention alone; then the mention rules of
        this module run in this order:

        1. a word that names a relation is not a mention ("the star in X" is no film "The Star"), unless the
           request has no other ("which films can be described by play": a tag) —
           :meth:`relation_words`;
        2. the kind of thing asked for is not a constant ("which films are about X") —
           :func:`names_the_asked_kind`;
        3. beside a name, an adjective before a noun is not a constant ("the primary language of X" is no film
           "Primary") — :func:`modifies_a_noun`;
        4. the complement of a copula that ends the request is a condition on the answer, not a constant ("which
           people born in X are painters") — :func:`is_complement`.

        Then :meth:`.paths.PathReader.groups` (a lone lower-case word beside a name of its type) and
        :meth:`.offline.OfflineTriplets.__call__` (a common word beside a proper name) keep the names a reading
        starts from."""
        schema_words = self.kb.schema.words
        relation_words = self.relation_words(query)
        mentions = [m for m in self.linker.mentions(query, skip_words=schema_words | relation_words)
                    or self.linker.mentions(query, skip_words=schema_words)
                    if not names_the_asked_kind(query, m)]
        if any(is_name(query, m) for m in mentions):
            mentions = [m for m in mentions if not modifies_a_noun(query, m)]
        if mentions and len(list_items(query)) >= LIST_ITEMS:
            # A list's items that no name matched, linked approximately within the class its other items name.
            mentions = self.linker.phrases(query, mentions)
        conditions = mentions[-1:] if len(mentions) > 1 and is_complement(query, mentions[-1]) else []
        return [m for m in mentions if m not in conditions], conditions

    def read(self, query: str, mentions: Sequence[Mention], given: set[str] = frozenset()) -> Request:
        """The request around its mentions: the relation is read from what the query says about its positive
        mentions, so mentions and what it says is absent or a relative's ("D and E were not observed") are taken out. ``given``: the
        caller's classes (``--type``), the answer's where the request asks for none ("a, b and c"); where it does
        ("who directed X" with --type Year) they only filter the answers."""
        stripped = query
        for m in sorted(mentions, key=lambda m: -m.start):
            stripped = stripped[: m.start] + "\x00" + stripped[m.end :]
        marked = stripped
        # A list of mentions leaves one gap: requests that differ only in what they list read (and embed) alike.
        stripped = " ".join(_LIST_GAP.sub("", stripped).split())
        # With its mentions taken out, a sentence of the request may start with a gap or in lower case ("High
        # forehead. Seizure was not observed."): cut as a typed request is.
        positive = " ".join(affirmed_sentences(stripped)) or stripped
        # Only a wh-phrase ("which films", "who") or a request that starts or ends with a class ("films starring
        # X", "... also wrote movies") says which class is asked for; a class merely named ("describe movie X")
        # does not.
        wanted = (self.answer_types(_LIST_GAP.sub("\x00", marked), wh_only=True) or self.leading_class(marked)
                  or self.trailing_class(marked))
        by_range = not wanted and bool(wanted := self.range_asked(marked))
        gap = self.stranded_range(marked)
        if gap and wanted and not wanted & gap:
            wanted, by_range = gap, False
        request = self.request(query, mentions, wanted, self.kb.embed_query(positive))
        if by_range:
            # The wh-noun that asked for the relation's range ("which artists") types the answer: no hop reads it.
            wh = min((i for i, w in request.surface.items() if w in WH_WORDS), default=None)
            noun = next((i for i in sorted(request.surface) if wh is not None and wh < i <= wh + 3
                         and is_noun(request.surface[i]) and request.surface[i] not in FUNCTION_WORDS), None)
            request.words = [(i, w) for i, w in request.words if i != noun]
        if given and not request.wanted:
            request.wanted = {c for t in given for c in self.kb.schema.subclasses(t)}
        return request

    def answer_types(self, query: str, wh_only: bool = False) -> set[str]:
        """The class a question asks for: the class word right after its wh-word ("which years",
        "what genre"), or the wh-word itself ("who", "when"); else (unless ``wh_only``) every class it names.
        A mention taken out of ``query`` (NUL) ends the wh-phrase."""
        words = re.findall(r"[a-z0-9]+|\x00", query.lower())
        frame = _FRAME.match(query)
        for i, w in enumerate(words):
            if w in WH_WORDS or (frame and w == frame.group(1).lower()):
                frame = None
                found = ((self._cue_at(words, i)[0] and self._complement_class(words, i))
                         or self._classes_at(words, i, 4))
                if found:
                    return found
        if wh_only:
            return set()
        everywhere = set()
        for i in range(len(words)):
            everywhere |= self._classes_at(words, i, 1)
        return everywhere

    def _cue_at(self, words: list[str], j: int) -> tuple[set[str], int]:
        """The classes the words at ``j`` name (three, two or one of them) and how many words named them."""
        for n in (3, 2, 1):
            found = self.classes_named(" ".join(words[j : j + n]))
            if found:
                return found, n
        return set(), 1

    def _adjective_before_cue(self, words: list[str], j: int, depth: int = 2) -> bool:
        """A pre-modifier of a class cue — an adjective or a noun, up to two ("the primary language", "which
        Nobel laureates", "which famous Nobel laureates"): the noun phrase's head is its last noun, the cue."""
        w = words[j]
        if w == "\x00" or not (is_adjective(w) or (is_noun(w) and not is_inflected_verb(w))) \
                or w in QUESTION_WORDS or w in FUNCTION_WORDS:
            return False
        return j + 1 < len(words) and (bool(self._cue_at(words, j + 1)[0])
                                       or (depth > 1 and self._adjective_before_cue(words, j + 1, depth - 1)))

    def _classes_at(self, words: list[str], i: int, span: int = 3) -> set[str]:
        """The classes of the last cue in the first run of cue words within ``span`` words of ``i``
        ("what film genre" → genre, "what kind of film" → genre, "which movies have" → movie)."""
        found, j, end = set(), i, i + span
        while j < len(words) and (found or j < end):
            here, n = self._cue_at(words, j)
            if here and 0 < j and words[j - 1] in ARTICLES and words[j + n :] == ["of"]:
                # A relation's noun before a stranded "of" names the relation, not the class asked for
                # ("what was E the director of" asks for films; "the genres of the films ..." for genres).
                break
            if here and words[j + n : j + n + 1] == ["\x00"]:
                break  # in apposition to a name, the cue says what the constant is: "the genre film X"
            if not here:
                # Only function words may stand between the wh-word and its class ("what are the films");
                # another word ends the wh-phrase ("which words describe movie X" asks for no movie).
                if found or (j > i and words[j] not in QUESTION_WORDS and not self._adjective_before_cue(words, j)):
                    break
                end += words[j] not in QUESTION_WORDS  # "which is the primary language": one more word
                j += 1
                continue
            found = here
            j += n
        return found

    def _complement_class(self, words: list[str], i: int) -> set[str]:
        """After a wh-word and a copula, a class noun before "of" is what is asked, whatever the wh-word
        asks for by itself: "who is the main language of X" asks for a language ("when did the films of X
        come out" still for a year)."""
        if words[i + 1 : i + 2] not in (["is"], ["are"], ["was"], ["were"]):
            return set()
        for j in range(i + 2, min(len(words), i + 6)):
            here, n = self._cue_at(words, j)
            if here:
                return here if words[j + n : j + n + 1] == ["of"] else set()
            if words[j] not in QUESTION_WORDS and not is_adjective(words[j]):
                break
        return set()

    def _modifiers_of_the_asked_class(self, tokens: list, spans: list, wanted: set[str]) -> set[int]:
        """The positions of the nouns that modify the class a wh-phrase asks for ("which Nobel laureates"): with
        the class noun they name the type of the answer, not a hop ("Nobel" is no relation to walk)."""
        if not wanted:
            return set()
        wh = next((i for i, (w, _a, _b) in enumerate(tokens) if w in WH_WORDS), None)
        if wh is None:
            return set()
        run = []
        for j in range(wh + 1, min(len(tokens), wh + 4)):
            w = tokens[j][0]
            if any(a <= j < b for a, b in spans) or w in FUNCTION_WORDS or w in QUESTION_WORDS:
                return set()
            if self.classes_named(w) & wanted:
                return set(run)
            if not is_noun(w) or is_inflected_verb(w) or is_adjective(w):
                return set()
            run.append(j)
        return set()

    def _class_phrases(self, tokens: list, spans: list) -> set[int]:
        """The positions of class names of two or three words anywhere in the request ("win the Nobel prize"): a
        type constraint on a node the reading passes, never a hop ("Nobel" is no relation to walk)."""
        out: set[int] = set()
        for n in (3, 2):
            for i in range(len(tokens) - n + 1):
                at = range(i, i + n)
                if out.isdisjoint(at) and not any(a <= j < b for a, b in spans for j in at) \
                        and self.classes_named(" ".join(tokens[j][0] for j in at)):
                    out.update(at)
        return out

    def range_asked(self, marked: str) -> set[str]:
        """The classes a wh-phrase's noun asks for when it names no class but names a relation ("which artists",
        where the KB has bands and musicians and a relation 'by artist'): what that relation reaches, as its
        range would say (a user's graph seldom declares one). The answer is of that kind; the noun is no hop."""
        words = re.findall(r"[a-z0-9]+|\x00", marked.lower())
        wh = next((i for i, w in enumerate(words) if w in WH_WORDS), None)
        if wh is None:
            return set()
        for w in words[wh + 1 : wh + 4]:
            if w == "\x00" or w in FUNCTION_WORDS or w in QUESTION_WORDS or is_inflected_verb(w):
                return set()
            if not is_noun(w):
                continue
            found = set()
            for iri, rel in self.kb.schema.relations.items():
                named = [x for x in re.findall(r"[a-z]+", rel.label.lower()) if x not in FUNCTION_WORDS
                         and x not in ("has", "have")]
                if rel.range is None and len(named) == 1 and stem(named[0]) == stem(singular(w)):
                    found |= self._reached(iri)
            if found:
                return found
        return set()

    def _reached(self, relation: str) -> set[str]:
        if relation not in self._ranges:
            text = queries.with_values(queries.load("reader_relation_range"), relation=[NamedNode(relation)])
            self._ranges[relation] = {row["class"].value for row in
                                      self.kb.store.query(text, use_default_graph_as_union=True)
                                      if row["class"].value in self.kb.schema.classes}
        return self._ranges[relation]

    def stranded_range(self, marked: str) -> set[str]:
        """A request that ends on a preposition whose verb spells, with it, a relation's phrase ("what did X
        star in", "who was X directed by") asks for what that relation reaches: the preposition's missing object
        is the answer. Where a wh-word says otherwise ("who makes X star in"), the relation's range wins."""
        words = re.findall(r"[a-z0-9]+|\x00", marked.lower())
        if len(words) < 3 or words[-1] not in FUNCTION_WORDS or words[-2] == "\x00":
            return set()
        end = (stem(words[-2]), words[-1])
        found = set()
        for iri, rel in self.kb.schema.relations.items():
            for phrase in self.words.relation_phrases.get(iri, set()) | {rel.label}:
                last = re.findall(r"[a-z0-9]+", phrase.lower())[-2:]
                if len(last) == 2 and (stem(last[0]), last[1]) == end and rel.range:
                    found.add(rel.range)
        return found

    def relation_words(self, query: str) -> set[str]:
        """The request's lower-case words that name a relation, by its phrases or a related word ("star",
        "players"): the linker passes over them unless nothing else is a mention, so "which is the star in
        Heat" reads "star" as a relation, not a film "The Star"."""
        vocabulary = self.words
        out = set()
        for w in set(re.findall(r"\b[a-z][a-z0-9]*\b", query)) - STOPWORDS - FUNCTION_WORDS:  # "Players" is a name
            s = stem(w)
            if s in vocabulary.all_stems:
                out.add(w)
            elif vocabulary.related_weight.get(s, 0.0) >= RELATED_NAME:
                # the related word or a form of it ("players", "observed"), not another that stems alike
                lemmas = {w, singular(w)} | set(base_forms(w))
                for table in vocabulary.related.values():
                    related = table.get(s, (None, 0.0, ""))
                    word = related[2].split(" (", 1)[0]
                    if related[1] >= RELATED_NAME and (word in lemmas or w.startswith(word)):
                        out.add(w)
                        break
        return out

    def unread_phrases(self, tokens: Sequence[tuple[str, int, int]], spans: Sequence[tuple[int, int]]
                       ) -> dict[str, str]:
        """Runs of two or more words between the mentions and the words that name relations, with a word that
        is neither a function word nor a class cue ("is X's mother a man or a woman", "what does X's dad do for a
        living"), each mapped to its last such word: the encoder reads them whole (:meth:`.RelationWords.similar`)."""
        from ...kb.lexicon import LIGHT_WORDS

        vocabulary = self.words
        out: dict[str, str] = {}
        run: list[str] = []
        for i, (w, _a, _b) in enumerate([*tokens, ("", 0, 0)]):
            s = stem(w) if w else ""
            if w and not any(a <= i < b for a, b in spans) and s not in vocabulary.all_stems \
                    and s not in vocabulary.related_weight and w not in self.kb.schema.words:
                run.append(w)
                continue
            content = [x for x in run if x not in QUESTION_WORDS and x not in FUNCTION_WORDS
                       and x not in LIGHT_WORDS and not self.classes_named(x)]
            if len(run) >= 2 and content:
                out[" ".join(run)] = content[-1]
            run = []
        return out

    def classes_named(self, phrase: str) -> set[str]:
        """The classes a phrase is a cue of ("movies" → Movie), written in the plural or not; a wh-word no cue
        names asks for the classes WordNet says it asks for ("whom" → person)."""
        found = {c for c, cs in self.kb.schema.class_cues.items() if phrase in cs or singular(phrase) in cs}
        return found or set(self.wh_classes.get(phrase, ()))

    def _class_at_edge(self, words: Sequence[str], last: bool) -> set[str]:
        """The classes the first (or last) one to three of ``words`` name, when other words follow (precede)."""
        for n in (3, 2, 1):
            edge = words[-n:] if last else words[:n]
            if len(words) > n and "\x00" not in edge and (found := self.classes_named(" ".join(edge))):
                return found
        return set()

    def leading_class(self, marked: str) -> set[str]:
        """The classes named by the first words of a request that is a noun phrase ("movies starring X");
        ``marked`` has its mentions replaced by NUL, so "X film was written by whom" starts with no class."""
        words = re.findall(r"[a-z0-9]+|\x00", marked.lower())
        start = 0  # "the principal language of X": an adjective (and articles) before the class
        while start < len(words) - 1 and (words[start] in ARTICLES or is_adjective(words[start])):
            start += 1
        modified = any(is_adjective(w) for w in words[:start])
        return self._class_at_edge(words, last=False) or (
            self._class_at_edge(words[start:], last=False) if modified else set())

    def trailing_class(self, marked: str) -> set[str]:
        """The classes named by the last words of a request with no wh-word ("the scriptwriter of X also wrote
        movies"); ``marked`` has its mentions replaced by NUL, so "describe movie X" ends with no class."""
        words = re.findall(r"[a-z0-9]+|\x00", marked.lower())
        if any(w in WH_WORDS for w in words):
            return set()  # "what were the release dates of X directed films" asks for dates, not films
        return self._class_at_edge(words, last=True)

    def request(self, query: str, mentions: Sequence[Mention], wanted: set[str], vector) -> Request:
        """The request's words outside the mentions (word position, stem) and the mentions' word spans."""
        asks_count = counting(query)
        tokens = [(m.group(0), m.start(), m.end()) for m in re.finditer(r"[a-z0-9]+", query.lower())]
        spans, words = [], []
        for m in mentions:
            inside = [i for i, (_w, a, b) in enumerate(tokens) if a >= m.start and b <= m.end]
            if inside:
                spans.append((inside[0], inside[-1] + 1))
        # Beside a proper name, a common word that names a node may still be a relation word ("who is the
        # manager of Kismet", where "manager" is also a tag): it stays among the words the paths are read from.
        common = {spans[n] for n, m in enumerate(mentions) if n < len(spans) and is_common_word(m)} \
            if any(is_name(query, m) for m in mentions) else set()
        frame = _FRAME.match(query)
        framing = next((i for i, (_w, a, _b) in enumerate(tokens) if frame and a == frame.start(1)), None)
        for i, (w, _a, _b) in enumerate(tokens):
            if i != framing and not any(a <= i < b for a, b in spans if (a, b) not in common):
                words.append((i, stem(w)))
        wh = next(([(i, i + 1)] for i, (w, _a, _b) in enumerate(tokens) if w in WH_WORDS
                   and not any(a <= i < b for a, b in spans)), [] if framing is None else [(framing, framing + 1)])
        vocabulary = self.words
        unknown = [tokens[i][0] for i, s in words if s not in vocabulary.all_stems
                   and s not in vocabulary.related_weight and s not in FUNCTION_WORDS
                   and tokens[i][0] not in self.kb.schema.words and tokens[i][0] not in QUESTION_WORDS
                   and not self.classes_named(tokens[i][0])]
        phrases = self.unread_phrases(tokens, spans)
        # Words that say what kind of thing the answer or a constant is ("what is a film directed by X", "the
        # film X") may name a relation ("what type of film") but cost nothing when no hop reads them.
        query_tokens = [(query[a:b], a, b) for _w, a, b in tokens]
        kinds = {i for i, (w, a, b) in enumerate(query_tokens) if names_the_asked_kind(query, Mention(w, a, b, ()))}
        # The nouns that modify the class asked for ("which Nobel laureates") type the answer with it: no hop reads
        # them.
        modifiers = self._modifiers_of_the_asked_class(tokens, spans, wanted) | self._class_phrases(tokens, spans)
        # A wh-word right after a noun is a relative one ("the studio where X was recorded"): it asks for nothing.
        modifiers |= {i for i, (w, _a, _b) in enumerate(tokens) if w in WH_WORDS and i > 1
                      and tokens[i - 1][0] not in FUNCTION_WORDS and tokens[i - 1][0] not in QUESTION_WORDS
                      and not any(a <= i - 1 < b for a, b in spans) and is_noun(tokens[i - 1][0])
                      and not is_inflected_verb(tokens[i - 1][0])}
        words = [(i, s) for i, s in words if i not in modifiers]
        surface = {i: w for i, (w, _a, _b) in enumerate(tokens)}
        return Request(words, spans, wanted, vector, wh, vocabulary.similar(unknown, phrases), surface, kinds,
                       self.roles.read(surface, [i for i, _s in words]), asks_count)

