"""Conditions on values: "born in 1921", "released after 1975", "longer than 300", "landlocked".

A request's relations lead to nodes; its conditions on *values* constrain the answers by a literal they (or a node
one edge from them: the prize a laureate won) hold. Read as linguistics reads them: a comparative or temporal
preposition before a number ("after", "before", "more than", "at least", "over") gives the comparison, a year
alone ("in 1921", "the 1921 prize") an equality, and an adjective or noun that is a value relation's own name
with boolean values ("landlocked") a boolean, negated by the context reader's scope ("not landlocked"). The
words before the value name the relation ("born in 1921": birth date) by the reader's slot matching
(:meth:`.chains.ValueRelations.named`: the label's words, else the encoder); a value no word names is matched
against every value relation of its kind.

:class:`ValueConditions` holds them to the candidate answers: an answer meeting every condition ranks above
every answer that misses one by a stated margin (the candidates' score spread plus one), so ``search`` ranks
and ``ask`` lists (its answers are the best-scored set) only answers that meet them all. A condition no
candidate meets is dropped and said so: never fewer answers than without it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from pyoxigraph import Literal, NamedNode

from ...kb import queries
from ...kb.context import ABSENT, read as read_context
from ...kb.linking import normalise_name
from ...kb.ontology import CORE
from ...kb.words import FUNCTION_WORDS, QUESTION_WORDS, stem

#: Comparison cues before a number, longest first; what they compare with.
COMPARISONS = (
    ("no later than", "<="), ("no earlier than", ">="), ("at least", ">="), ("at most", "<="),
    ("not more than", "<="), ("not less than", ">="), ("more than", ">"), ("greater than", ">"),
    ("larger than", ">"), ("longer than", ">"), ("higher than", ">"), ("bigger than", ">"), ("older than", "<"),
    ("less than", "<"), ("fewer than", "<"), ("smaller than", "<"), ("shorter than", "<"), ("lower than", "<"),
    ("later than", ">"), ("earlier than", "<"), ("after", ">"), ("since", ">="), ("before", "<"), ("prior to", "<"),
    ("over", ">"), ("above", ">"), ("exceeding", ">"), ("under", "<"), ("below", "<"), ("until", "<="),
)
_SCALE = {"thousand": 1e3, "million": 1e6, "billion": 1e9}
_NUMBER = re.compile(r"(?<![\w.-])(\d{1,3}(?:,\d{3})+|\d+(?:\.\d+)?)(?:\s+(thousand|million|billion))?(?![\w-])")
_CUE = re.compile(r"\b(" + "|".join(re.escape(c) for c, _op in COMPARISONS) + r")\s+(?:the\s+year\s+)?$", re.I)
_YEAR = re.compile(r"^\s*(-?\d{4})(?:-|$)")
_BOOLEAN_TYPE = "http://www.w3.org/2001/XMLSchema#boolean"
_TYPED = frozenset("http://www.w3.org/2001/XMLSchema#" + t for t in
                   "boolean integer decimal double float int long gYear date dateTime".split())
#: How many candidates (best first) the conditions are checked on.
CHECKED = 5000
#: Words before a value that may name its relation.
NAMING_WORDS = 4


@dataclass(frozen=True)
class ValueCondition:
    """One condition: where it is written, the comparison, the value and the words that name its relation."""

    text: str
    op: str  # = > < >= <=
    value: float | bool
    kind: str  # year | number | boolean
    words: str = ""

    def holds(self, literal: Literal) -> bool:
        """Whether a literal meets the condition (a year read from a date, a number from its lexical form)."""
        if self.kind == "boolean":
            lexical = literal.value.strip().lower()
            return lexical in ("true", "1", "yes") if self.value else lexical in ("false", "0", "no")
        if self.kind == "year":
            found = _YEAR.match(literal.value)
            if found is None:
                return False
            number = float(found.group(1))
        else:
            try:
                number = float(literal.value.replace(",", ""))
            except ValueError:
                return False
        target = float(self.value)
        return {"=": number == target, ">": number > target, "<": number < target,
                ">=": number >= target, "<=": number <= target}[self.op]

    def shown(self) -> str:
        value = ("true" if self.value else "false") if self.kind == "boolean" else f"{self.value:g}"
        return f"'{self.text}': {self.kind} {self.op} {value}"


def read_conditions(query: str, named: callable, booleans: dict[str, str]) -> list[ValueCondition]:
    """The value conditions of a request. ``named(text)``: whether a text names a node (a year that is a node,
    as MetaQA's are, is a constant, not a value); ``booleans``: the words that are a boolean value relation's
    name, by stem, with the relation.

    >>> [c.shown() for c in read_conditions("albums released after 1975 by X", lambda t: False, {})]
    ["'after 1975': year > 1975"]
    >>> [c.shown() for c in read_conditions("which countries are not landlocked", lambda t: False, {"landlock": "p"})]
    ["'not landlocked': boolean = false"]
    >>> read_conditions("films of 1995", lambda t: t == "1995", {})
    []
    """
    out = []
    for match in _NUMBER.finditer(query):
        number_text = match.group(1)
        if named(number_text):
            continue
        before = query[: match.start()]
        cue = _CUE.search(before)
        number = float(number_text.replace(",", "")) * _SCALE.get((match.group(2) or "").lower(), 1.0)
        is_year = re.fullmatch(r"1\d{3}|20\d{2}", number_text) is not None and not match.group(2)
        if cue is None and not is_year:
            continue  # a bare count ("a 5 year old", "3 seizures") compares nothing
        op = dict(COMPARISONS)[cue.group(1).lower()] if cue else "="
        start = cue.start() if cue else match.start()
        # "in 1921", "the 1921 prize": the preposition or article before a year is part of how it is written.
        lead = re.search(r"\b(in|of|from|during|the)\s+$", before[:start], re.I)
        shown_from = lead.start() if lead and not cue else start
        words = [w for w in re.findall(r"[A-Za-z]+", before[:shown_from])[-NAMING_WORDS:]
                 if w.lower() not in FUNCTION_WORDS and w.lower() not in QUESTION_WORDS]
        out.append(ValueCondition(query[shown_from: match.end()].strip(), op, number, "year" if is_year else "number",
                                  " ".join(words)))
    if booleans:
        for word in re.finditer(r"[A-Za-z][a-z]+", query):
            if stem(word.group(0).lower()) in booleans:
                negated = read_context(query, [(word.start(), word.end())])[0].state == ABSENT
                before = re.search(r"\b(not|no|non)[\s-]+$", query[: word.start()], re.I)
                start = before.start() if before else word.start()
                out.append(ValueCondition(query[start: word.end()], "=", not (negated or before), "boolean",
                                          word.group(0)))
    return out


class ValueConditions:
    """The value conditions of a request held to its candidate answers (see the module docstring)."""

    def __init__(self, kb, values) -> None:
        self.kb = kb
        #: :class:`.chains.ValueRelations`: which predicates are value relations, their phrases, slot matching.
        self.values = values
        self._booleans: dict[str, str] | None = None

    def booleans(self, query: str, unread: list[str] | None = None) -> dict[str, str]:
        """The KB's boolean value relations named by a word of the request (or of ``unread``), by the stem of
        their one-word names (``isLandlocked`` → "landlock"); the relations are read once per KB."""
        if self._booleans is None:
            self._booleans = {}
            for row in self.kb.store.query(queries.load("reader_boolean_relations"), use_default_graph_as_union=True):
                relation = row["relation"].value
                if relation.startswith(CORE) or relation in self.kb.schema.relations:
                    continue
                named = [w for w in re.findall(r"[a-z]+", self.values.phrase(relation).lower())
                         if w not in ("is", "has", "was", "are")]
                if len(named) == 1:
                    self._booleans[stem(named[0])] = relation
        if not self._booleans:
            return {}
        words = re.findall(r"[a-z]+", query.lower() if unread is None else " ".join(unread).lower())
        said = {stem(w) for w in words if w not in FUNCTION_WORDS and w not in QUESTION_WORDS}
        return {s: r for s, r in self._booleans.items() if s in said}

    def read(self, query: str, unread: list[str] | None = None) -> list[ValueCondition]:
        index = self.kb.names
        return read_conditions(query, lambda text: bool(index.nodes(normalise_name(text))),
                               self.booleans(query, unread))

    def apply(self, query: str, scores: dict[str, float], unread: list[str] | None = None
              ) -> tuple[dict[str, float], list[str]]:
        """The scores with the answers meeting every condition raised above the rest, and what was done.
        ``unread``: the words the reading left unread, the only ones a boolean condition may be written in (a word
        the reading read as a relation or a name is not one); None: every word of the request."""
        if not scores or (not _NUMBER.search(query) and unread is not None and not unread):
            return scores, []
        conditions = self.read(query, unread)
        if not conditions:
            return scores, []
        ranked = sorted(scores, key=lambda i: -scores[i])[:CHECKED]
        nodes = [NamedNode(i) for i in ranked]
        notes, met_all = [], None
        relations = self._relations(nodes)
        for condition in conditions:
            chosen = self._choose(condition, relations)
            if not chosen:
                notes.append(f"value condition {condition.shown()}: no value relation of its kind; not held")
                continue
            met = self._meeting(condition, nodes, chosen)
            names = ", ".join(sorted(self.values.phrase(r) for r in chosen)[:3])
            if not met:
                notes.append(f"value condition {condition.shown()} by {names}: no candidate meets it; not held")
                continue
            notes.append(f"value condition {condition.shown()} by {names}: {len(met)} of {len(ranked)} "
                         "candidates meet it")
            met_all = met if met_all is None else met_all & met
        if met_all is None:
            return scores, notes
        if not met_all:
            notes.append("no candidate meets every value condition: ranked as read")
            return scores, notes
        margin = max(scores.values()) - min(scores.values()) + 1.0
        notes.append(f"the {len(met_all)} answers meeting every value condition rank above the rest (+{margin:.3g})")
        return {i: s + margin if i in met_all else s for i, s in scores.items()}, notes

    def _relations(self, nodes: list[NamedNode]) -> dict[str, Literal]:
        text = queries.with_values(queries.load("reader_condition_relations"), x=nodes)
        return {row["relation"].value: row["example"] for row in self.kb.store.query(text, use_default_graph_as_union=True)
                if isinstance(row["example"], Literal) and self._valued(row["relation"].value, row["example"])}

    def _valued(self, relation: str, example: Literal) -> bool:
        """A value relation, or a document field whose values are typed (a JSON Lines number or boolean: the
        documents show it, and a condition compares it)."""
        if self.values.is_value_relation(relation):
            return True
        return (relation not in self.kb.schema.relations and not relation.startswith(CORE)
                and example.datatype is not None and example.datatype.value in _TYPED)

    def _choose(self, condition: ValueCondition, relations: dict[str, Literal]) -> list[str]:
        """The value relations a condition is on: those its words name, else every one holding its kind."""
        fitting = [r for r, example in relations.items() if self._fits(condition, example)]
        if condition.kind == "boolean":
            return [r for r in fitting if stem(condition.words.lower()) in
                    {stem(w) for w in re.findall(r"[a-z]+", self.values.phrase(r).lower())}]
        if condition.words:
            named = [r for r in fitting if self.values.named(condition.words, r, set(), None) is not None]
            if named:
                return named
        # No word names it: the relation named by the value's kind itself ("year") where there is one, before
        # every relation that merely holds such values (birth date, death date).
        plain = [r for r in fitting if self.values.phrase(r).lower().strip() == condition.kind]
        return plain or fitting

    @staticmethod
    def _fits(condition: ValueCondition, example: Literal) -> bool:
        if condition.kind == "boolean":
            return (example.datatype is not None and example.datatype.value == _BOOLEAN_TYPE) or \
                example.value.lower() in ("true", "false")
        if condition.kind == "year":
            return _YEAR.match(example.value) is not None
        try:
            float(example.value.replace(",", ""))
            return True
        except ValueError:
            return False

    def _meeting(self, condition: ValueCondition, nodes: list[NamedNode], chosen: list[str]) -> set[str]:
        text = queries.with_values(queries.load("reader_condition_values"), x=nodes,
                                   relation=[NamedNode(r) for r in chosen])
        own: dict[str, bool] = {}
        near: dict[str, bool] = {}
        for row in self.kb.store.query(text, use_default_graph_as_union=True):
            table = own if row["hop"].value == "0" else near
            x = row["x"].value
            table[x] = table.get(x, False) or condition.holds(row["value"])
        # An answer that holds the value itself is judged by its own (Austria's area, not its neighbour's); one
        # that does not, by the nodes next to it (a laureate by the year of the prize it won).
        return {x for x in own.keys() | near.keys() if (own[x] if x in own else near[x])}
