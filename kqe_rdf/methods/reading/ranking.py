"""Step 4 of reading: grounded paths ranked by how the request names their relations.

A path's score is the weighted sum of :data:`RULES` over what :func:`read_path` reads of it; the measures come
from the functions below, each saying what it reads:

- :func:`hop_support`: each hop should be named by a word of the request (exactly, by a related word, or by
  a word the encoder places near it); what is missing costs ``1 - support``;
- :func:`further_hop_cost`: a hop beyond the first costs ``hop_penalty``, less when a word of its own names it;
- :func:`unread_words`: a word that names a relation no hop of the path reads costs its weight, unless it is
  the noun an adjective read by the path modifies (:func:`modified_phrase`);
- :func:`preposition_cue`: the preposition right before a constant ("in X", "by X") supports a one-hop path whose
  phrase, read from the answer to the constant, has it ("?x starred in X"), weakly (on a longer path it may
  tie the constant to a thing between: "clubs of players in Mexico");
- :func:`hop_order`: the hop named nearest the constant comes first, the one nearest the wh-word last;
- :func:`path_similarity`: the embedding similarity of the hops' phrases with the request, a tie-breaker;
- :data:`AGAINST_LABEL`: a hop walked against a relation with no phrase of its own for that direction (a name read
  as words, "parents", whose backward reading is only "parents (inverse)") costs a little: a noun names the
  relation from its holder ("X's parents", "the birthplace of X");
- :func:`role_hops`: a role word names a chain of hops at once ("grandfather": parents, parents), and a role word
  a path does not read as its whole chain costs 1 ("X's grandfather" is not X's parent);
- :func:`says_absence`: a hop over a negative relation ("lacks phenotype") must be named by a word that states an
  absence ("lack", "absent", "without"), or the path is not read at all.

A path's :attr:`Scored.confidence` is how surely words name it: the mean support of its hops (0 when no word
names any). The reader does not impose a reading below its threshold (:mod:`.offline`).

The answer class the wh-phrase asks for ("which films", "who", "when") must be the path's end class when the
request names one. Nothing here names a relation or a class of a particular KB.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from ...kb.lexicon import is_noun
from ...kb.words import DETERMINERS, FUNCTION_WORDS, NEGATION_WORDS, PERSON_WH, PREPOSITIONS, stem
from .request import Request
from .words import RelationWords

#: What a word supports a hop with when a hop of another relation has read it already.
REUSED = 0.5
#: What the preposition before a constant supports a hop with: below every word that names the relation.
PREPOSITION = 0.4
#: What a hop walked against a relation that has no phrase for that direction costs ("X's parents" reads
#: ``parents`` from X; ``parents (inverse)`` from X is X's children): a tie-breaker between directions.
AGAINST_LABEL = 0.1


@dataclass
class Scored:
    """A path (:class:`.paths.Path`) with its score, its hops' phrases and why it scored so."""

    path: object
    score: float
    phrases: list[str]
    why: dict = field(default_factory=dict)
    #: How surely the request's words name the path: the mean support of its hops, 0 when no word names any.
    confidence: float = 0.0


@dataclass
class HopReading:
    """How one hop was named: its support (0-1), the word positions that named it, what the explanation shows."""

    support: float
    hits: list[int]
    shown: dict
    #: Every related word of the request that could name the hop, as the explanation writes it.
    related: list[str] = field(default_factory=list)


def hop_support(words: list[tuple[int, str]], stems: set[str], related: dict[str, list], soft: dict[str, float],
                used: dict[int, frozenset], pair: frozenset, last: bool, phrase: str,
                surface: dict[int, str]) -> HopReading:
    """A hop is named by a word of its relation's phrases (support 1), else by the strongest related word
    (its weight: "dad" names ``parents`` at 0.7). A word a hop of another relation has read already counts
    :data:`REUSED` ("works" in "works at company" and "works in city" names one of them; "share directors"
    names both hops there and back, one relation). A wh-word asks for the answer: it names the last hop only.

    >>> words = [(0, "who"), (1, "is"), (2, "x"), (3, "dad")]
    >>> dad = {"dad": ["synonym", 0.7, "dad (synonym of parent)"]}
    >>> hop_support(words, {"parent"}, dad, {"dad": 0.7}, {}, frozenset({"p"}), True, "parents", {3: "dad"}).shown
    {'relation': 'parents', 'how': 'synonym of parent, 0.70', 'words': ['dad']}
    """
    hits = [pos for pos, s in words if s in stems]
    fresh = {p for p in hits if used.get(p, pair) == pair}
    support = (1.0 if fresh else REUSED) if hits else 0.0
    near = [(related[s][1] * (1.0 if used.get(pos, pair) == pair else REUSED), pos, s) for pos, s in words
            if s in related and s in soft and (last or related[s][0] != "wh")]
    weight = max((w for w, _p, _s in near), default=0.0)
    shown = {"relation": phrase, "how": "exact", "words": [surface.get(p, s) for p, s in words if p in hits]}
    if weight > support:
        hits = [pos for w, pos, _s in near if w == weight]
        support = weight
        at, best = next((p, s) for w, p, s in near if w == weight)
        how = related[best][2].partition(" (")[2].rstrip(")")  # "synonym of director"
        shown = {"relation": phrase, "how": f"{how}, {weight:.2f}", "words": [surface.get(at, best)]}
    if not hits:
        shown = {"relation": phrase, "how": "not named", "words": []}
    return HopReading(support, hits, shown, list(dict.fromkeys(related[s][2] for _w, _p, s in near)))


def preposition_cue(spans: Sequence[tuple[int, int]], surface: dict[int, str], kinds: set[int]) -> dict[int, str]:
    """The preposition right before a constant, over articles and words that say what kind of thing the constant
    is ("in the film X" → ``in``), by its position.

    >>> preposition_cue([(2, 4)], {0: "in", 1: "the", 2: "white", 3: "zombie"}, set())
    {0: 'in'}
    >>> preposition_cue([(2, 3)], {0: "director", 1: "of", 2: "heat"}, set())
    {}
    """
    out = {}
    for start, _end in spans:
        at = start - 1
        while at >= 0 and (surface.get(at) in DETERMINERS or at in kinds):
            at -= 1
        if surface.get(at) in PREPOSITIONS:
            out[at] = surface[at]
    return out


def further_hop_cost(hop_penalty: float, reading: HopReading, used: dict[int, frozenset]) -> float:
    """A hop beyond the first costs ``hop_penalty``, less the more a word no earlier hop read names it
    ("X's dad's offspring" is two hops because "offspring" names the second).

    >>> named, related = HopReading(1.0, [4], {}), HopReading(0.7, [4], {})
    >>> further_hop_cost(1.0, named, {}), round(further_hop_cost(1.0, related, {}), 2)
    (0.0, 0.3)
    >>> further_hop_cost(1.0, named, {4: frozenset({"parents"})})  # an earlier hop read the word
    1.0
    """
    named = reading.support if reading.hits and not set(reading.hits) & used.keys() else 0.0
    return hop_penalty * (1.0 - named)


def modified_phrase(words: Sequence[tuple[int, str]], adjectives: set[str], all_stems: set[str]) -> set[int]:
    """Positions of the words after an adjective the path reads as one of its relations (a pertainym: "national"
    to "country"), up to the next function word or relation word: the noun phrase it modifies.

    >>> sorted(modified_phrase([(0, "which"), (1, "national"), (2, "team"), (3, "play")], {"national"}, {"play"}))
    [2]
    """
    out, after = set(), False
    for pos, s in sorted(words):
        if s in FUNCTION_WORDS or s in all_stems:
            after = False
        elif after:
            out.add(pos)
        if s in adjectives:
            after = True
    return out


def unread_words(words: Sequence[tuple[int, str]], evidence: set[str], soft: dict[str, float], covered: set[str],
                 excused: set[int], asking: frozenset[str] = frozenset(), kinds: set[int] = frozenset()) -> float:
    """What the request says that the path does not read: 1 for each word of a relation's own phrases, the
    weight of each related word (never a word in the noun phrase an adjective the path reads modifies; half
    for a word that says what kind of thing is asked for, ``kinds``: "what faith" may name the relation, "what
    film" need not), and 1 for a wh-word (``asking``) that asks for what no hop of the path is ("where" after a
    path to a club).

    >>> words = [(0, "who"), (1, "direct"), (2, "film")]
    >>> unread_words(words, {"direct"}, {"film": 0.6}, set(), set())  # "direct" and, at 0.6, "film" unread
    1.6
    >>> unread_words(words, {"direct"}, {}, {"direct"}, set())
    0
    """
    unread = {s: (1.0 if s in asking else soft[s] / 2 if p in kinds else soft[s]) for p, s in words
              if s in soft and s not in evidence and s not in covered and p not in excused}
    return len(evidence - covered) + sum(unread.values())


def hop_order(places: list[tuple[frozenset, list[int]]]) -> int:
    """Hops named out of order: a hop all of whose words lie answer-side of all words of a later (different)
    hop ("who directed the films starred by X" starts with starring).

    >>> hop_order([(frozenset({"direct"}), [3]), (frozenset({"star"}), [-2])])
    1
    """
    return sum(1 for i in range(len(places)) for j in range(i + 1, len(places))
               if places[i][0] != places[j][0] and min(places[i][1]) > max(places[j][1]))


def role_hops(steps: Sequence[tuple[str, bool]], roles: dict, vocabulary: RelationWords) -> dict[int, tuple]:
    """The hops each role word names: a run of consecutive hops whose relations the role's chain names in order
    (by their own words, 1, or related ones, their weight), as ``{hop index: (role, weight)}``; where a role fits
    several runs, the best named one nearest the constant.

    >>> class Words: relation_stems = {"p": {"parent"}}; related = {}
    >>> class Grandfather: chain = ("parent", "parent")
    >>> role_hops([("p", True), ("p", True)], {3: Grandfather}, Words) == {0: (Grandfather, 1.0), 1: (Grandfather, 1.0)}
    True
    >>> role_hops([("p", True)], {3: Grandfather}, Words)
    {}
    """
    out: dict[int, tuple] = {}
    for role in roles.values():
        best, at = 0.0, None
        for start in range(len(steps) - len(role.chain) + 1):
            weights = [1.0 if word in vocabulary.relation_stems.get(rel, ()) else
                       vocabulary.related.get(rel, {}).get(word, (None, 0.0))[1]
                       for word, (rel, _f) in zip(role.chain, steps[start:])]
            if min(weights) > 0 and sum(weights) > best and not any(start + i in out for i in range(len(weights))):
                best, at = sum(weights), (start, weights)
        if at is not None:
            start, weights = at
            out.update({start + i: (role, w) for i, w in enumerate(weights)})
    return out


_ABSENCE = frozenset(stem(w) for w in NEGATION_WORDS)


def says_absence(rel: str, negative: set[str], hits: Sequence[int], surface: dict[int, str]) -> bool:
    """Whether a hop may be read: a relation that states an absence only where a word naming it states one too
    ("which diseases lack seizures"); a bare list of phenotypes never reads ``lacks phenotype``.

    >>> says_absence("lacks", {"lacks"}, [2], {0: "diseases", 1: "that", 2: "lack"})
    True
    >>> says_absence("lacks", {"lacks"}, [], {0: "seizures"})
    False
    >>> says_absence("has", {"lacks"}, [], {})
    True
    """
    return rel not in negative or any(stem(surface.get(p, "")) in _ABSENCE for p in hits)


def path_similarity(sims: dict[str, float], phrases: list[str]) -> float:
    """The request's embedding similarity with the path: its least similar hop and the hops' joint phrase.

    >>> path_similarity({"directed by": 0.6, "starred": 0.4, "directed by starred": 0.5}, ["directed by", "starred"])
    0.45
    """
    if not sims:
        return 0.0
    return (min(sims[p] for p in phrases) + sims[" ".join(phrases)]) / 2


@dataclass
class PathReading:
    """What :func:`read_path` reads of one path against a request: the measures :data:`RULES` weigh, and what the
    explanation shows."""

    #: Σ over hops of ``1 - support`` (:func:`hop_support`, a role word's chain: :func:`role_hops`).
    unsupported: float
    #: What the request says that the path does not read (:func:`unread_words`, role words not read whole).
    uncovered: float
    #: Hops named out of order (:func:`hop_order`).
    inversions: int
    #: Hops beyond the first (:func:`further_hop_cost`) and hops walked against their label (:data:`AGAINST_LABEL`).
    hop_costs: float
    #: The encoder's similarity of the path with the request (:func:`path_similarity`).
    similarity: float
    why: dict
    #: 1 when the path starts at the class a constant's name is spelt exactly as ("Parents", the film, not the tag
    #: "parents"), among the classes of its group's other nodes.
    written: float = 0.0


@dataclass(frozen=True)
class Rule:
    """One term of a path's score: a :class:`PathReading` measure and its weight."""

    name: str
    weight: float
    measure: str


#: A path's score, in the order its terms are added: where to add a reading rule (a measure that
#: :func:`read_path` computes, and one line here).
RULES: tuple[Rule, ...] = (
    Rule("hops no word names", -1.0, "unsupported"),
    Rule("words no hop reads", -1.0, "uncovered"),
    Rule("hops named out of order", -0.3, "inversions"),
    Rule("further hops, hops against their label", -1.0, "hop_costs"),
    Rule("similarity with the request", 0.5, "similarity"),
    Rule("starts at the class a name is spelt as", 0.2, "written"),
)


def score(reading: PathReading) -> float:
    """The sum of :data:`RULES` over a path's reading.

    >>> round(score(PathReading(unsupported=0.0, uncovered=1.0, inversions=0, hop_costs=0.0, similarity=0.6, why={},
    ...                         written=1.0)), 2)  # -1 × 1 word unread + 0.5 × 0.6 + 0.2 for the name's class
    -0.5
    """
    total = 0.0
    for rule in RULES:
        total += rule.weight * getattr(reading, rule.measure)
    return total


@dataclass
class _Context:
    """What ranking reads of a request once for all its paths."""

    request: Request
    spans: list
    prepositions: dict[int, str]
    weights: dict[str, float]
    asking: frozenset[str]
    sims: dict[str, float]
    prefix: bool
    written: frozenset[str] = frozenset()


def rank(reader, paths: Sequence, phrase_lists: list[list[str]], sims: dict[str, float],
         label_stems: dict[str, set[str]], request: Request, positions: Sequence[tuple[int, int]] = (),
         prefix: bool = False, written: frozenset[str] = frozenset()) -> list[Scored]:
    """``paths`` (:class:`.paths.Path`) best first, for ``reader`` (:class:`.paths.PathReader`), which gives each
    path's phrases, the encoder's similarity of every phrase (and each path's phrases joined) to the request, and
    the stems of each answer class's label (unread for prefixes). ``positions``: the word spans of the constant(s)
    the paths leave (for the hop order); ``prefix``: the paths are beginnings, so neither the answer class nor
    unread words count; ``written``: the classes the constants' names are spelt as exactly, where they are not all
    of the group's."""
    if not paths:
        return []
    vocabulary: RelationWords = reader.words
    spans = list(positions) or request.mention_positions
    # The strongest weight of each related word of the request, by WordNet or by the encoder.
    weights = {s: vocabulary.related_weight[s] for _p, s in request.words if s in vocabulary.related_weight}
    for table in request.similar.values():
        for st, (_how, weight, _word) in table.items():
            weights[st] = max(weight, weights.get(st, 0.0))
    # The request's wh-words that WordNet relates to some relation's kind ("where" to a relation of places).
    context = _Context(request, spans, preposition_cue(spans, request.surface, request.kinds), weights,
                       frozenset(s for _p, s in request.words if s in vocabulary.wh_stems), sims, prefix, written)
    out = []
    for path, phrases in zip(paths, phrase_lists):
        reading = read_path(reader, path, phrases, set() if prefix else label_stems[path.end], context)
        if reading is not None:
            out.append(Scored(path, score(reading), phrases, reading.why,
                              1.0 - reading.unsupported / len(path.steps)))
    out.sort(key=lambda s: (-s.score, len(s.path.steps), s.phrases))
    if not prefix and request.wanted:
        typed = [s for s in out if s.path.end in request.wanted]
        if typed:
            return typed
    return out


def _wh_may_name(path, hop: int, wanted: set[str]) -> bool:
    """A wh-word names the last hop only, and not where the hop before already reached what it asks for ("where is
    X based": the city it is based in, not that city's country)."""
    return hop == len(path.steps) and not (hop > 1 and path.classes[hop - 1] in wanted)


def read_path(reader, path, phrases: list[str], own: set[str], context: _Context) -> PathReading | None:
    """How the request reads one path, hop by hop: the measures :data:`RULES` weigh; None for a path the request
    does not allow (:func:`says_absence`). ``own``: the stems of the answer class's label."""
    request, vocabulary, relations = context.request, reader.words, reader.kb.schema.relations
    prepositions = context.prepositions
    # The word naming the answer's class names the answer, not a relation: it need not be read, and where the
    # wh-phrase asks for that class it supports no hop ("which disease" does not support "associated with
    # disease").
    asked = own if path.end in request.wanted else set()
    words = [(pos, s) for pos, s in request.words if s not in asked]
    evidence = {s for _, s in words if s in vocabulary.all_stems and s not in own}
    # Words that name no relation but are related to one ("dad" to parents) are weaker evidence.
    soft = {s: context.weights[s] for _, s in words if s in context.weights and s not in own}
    unsupported, extra, places, covered, read, hops = 0.0, 0.0, [], set(), [], []
    used: dict[int, frozenset] = {}  # word position → the relation (with its inverse) that read it
    licensed = True
    by_role = role_hops(path.steps, request.roles, vocabulary) if request.roles else {}
    reading = None
    for hop, (rel, forward) in enumerate(path.steps, 1):
        stems = vocabulary.relation_stems.get(rel, set())
        related = _related_words(reader, rel, forward, len(path.steps) == 1, request, prepositions, soft)
        covered |= (stems & evidence) | (soft.keys() & related.keys())
        pair = frozenset({rel, relations[rel].inverse or rel}) if rel in relations else frozenset({rel})
        reading = hop_support(_naming(words, request.kinds, related), stems, related, soft, used, pair,
                              _wh_may_name(path, hop, request.wanted), reader.phrase(rel, forward), request.surface)
        licensed = licensed and says_absence(rel, vocabulary.negative, reading.hits, request.surface)
        read += [text for text in reading.related if text not in read]
        role = by_role.get(hop - 1)
        if role is not None and role[1] >= reading.support:
            # The role word names this hop as one of its chain: a further hop of it costs no more than it reads.
            held, weight = role
            shown = {"relation": reader.phrase(rel, forward), "words": [held.word],
                     "how": f"role {'/'.join(held.chain)}, {weight:.2f}"}
            reading = HopReading(weight, [held.position], shown)
            covered.add(stem(held.word))
            extra += reader.hop_penalty * (1.0 - weight) if hop > 1 else 0.0
        elif hop > 1:
            extra += further_hop_cost(reader.hop_penalty, reading, used)
        hops.append(reading.shown)
        if not forward and reader.phrase(rel, False).endswith("(inverse)") \
                and all(is_noun(request.surface.get(p, ""), unknown=True) for p in reading.hits):
            extra += AGAINST_LABEL  # a verb reads either way ("who was born in X"), a noun from its holder
        used.update((p, pair) for p in reading.hits if p not in used)
        unsupported += 1.0 - reading.support if reading.hits else 1
        if reading.hits:  # where the request names the hop: towards the constant (negative) or the answer's wh-word
            places.append((frozenset(stems) or frozenset([rel]),
                           [_distance(p, context.spans) - _distance(p, request.answer_at) for p in reading.hits]))
    if not licensed:
        return None
    uncovered = 0.0 if context.prefix else _uncovered(reader, path, words, evidence, soft, covered, reading, by_role,
                                                      context)
    inversions = hop_order(places)
    similarity = path_similarity(context.sims, phrases)
    why = _why(unsupported, uncovered, inversions, similarity, by_role, read, hops)
    if not context.prefix and evidence - covered:
        # Words that name a relation exactly which no hop of the path reads ("released" beside a path that never
        # reaches a year), as written: where the graph lacks the edge, the best path left reads around them.
        why["unread"] = list(dict.fromkeys(request.surface.get(p, st) for p, st in words if st in evidence - covered))
    return PathReading(unsupported, uncovered, inversions, extra, similarity, why,
                       1.0 if path.classes[0] in context.written else 0.0)


def _naming(words: list[tuple[int, str]], kinds: set[int], related: dict[str, list]) -> list[tuple[int, str]]:
    """The words that may name a hop: a word that says what kind of thing is asked ("which people") names one by
    its own sense only, not as a broader word ("people" is above "nation")."""
    return [(p, w) for p, w in words if p not in kinds or related.get(w, ("",))[0] not in ("broader", "kind")]


def _why(unsupported: float, uncovered: float, inversions: int, similarity: float, by_role: dict, read: list[str],
         hops: list[dict]) -> dict:
    """What the explanation shows of a path's reading: its measures, role words, related words and hops."""
    why = {"unsupported": round(unsupported, 2), "uncovered": round(uncovered, 2), "inversions": inversions,
           "similarity": round(similarity, 3)}
    if by_role:
        why["roles"] = {hop: held for hop, (held, _w) in by_role.items()}  # for the values the reader adds
    if read:
        why["related words"] = read
    why["hops"] = hops
    return why


def _related_words(reader, rel: str, forward: bool, one_hop: bool, request: Request, prepositions: dict[int, str],
                   soft: dict[str, float]) -> dict[str, list]:
    """The words related to a hop's relation: WordNet's and the encoder's for this request, and on a one-hop path
    the preposition before the constant where the relation's phrase toward it has it ("?x starred in X"), which
    joins ``soft`` at :data:`PREPOSITION`."""
    related = reader.words.related.get(rel, {})
    if rel in request.similar or (one_hop and prepositions):
        related = {**related, **request.similar.get(rel, {})}  # a copy: the request's own words join it
    if one_hop and prepositions:
        toward = reader.phrase(rel, not forward).lower().split()
        for word in prepositions.values():
            if word in toward and stem(word) not in related:
                related[stem(word)] = ["preposition", PREPOSITION, f"{word} (preposition of {' '.join(toward)})"]
                soft.setdefault(stem(word), PREPOSITION)
    return related


def _uncovered(reader, path, words: list[tuple[int, str]], evidence: set[str], soft: dict[str, float],
               covered: set[str], last: HopReading, by_role: dict, context: _Context) -> float:
    """What the request says that the path does not read (:func:`unread_words`), excusing the words a modifier,
    a preposition or a wh-word answered by the holder accounts for, and role words not read as their whole chain
    ("X's grandfather" is no parent)."""
    request, vocabulary = context.request, reader.words
    adjectives = {s for rel, _f in path.steps for s in vocabulary.pertainyms.get(rel, ()) if s in covered}
    excused = modified_phrase(words, adjectives, vocabulary.all_stems) | context.prepositions.keys()
    # "Who was born in X": a named hop walked back to its holder answers who (the one born), no further hop.
    if not path.steps[-1][1] and (len(path.steps) == 1
                                  or any(request.surface.get(p) not in PERSON_WH for p in last.hits)):
        excused |= {p for p, w in words if w in PERSON_WH}
    uncovered = unread_words(words, evidence, soft, covered, excused, context.asking, request.kinds)
    read_as_roles = {held.position for held, _w in by_role.values()}
    return uncovered + sum(1.0 for at, held in request.roles.items() if at not in read_as_roles
                           and (len(held.chain) > 1 or stem(held.word) not in covered | soft.keys()))


def _distance(position: int, spans: Sequence[tuple[int, int]]) -> int:
    """Words between ``position`` and the nearest span (0 inside one, or without spans)."""
    if not spans:
        return 0
    return min(start - position if position < start else position - end + 1 if position >= end else 0
               for start, end in spans)

