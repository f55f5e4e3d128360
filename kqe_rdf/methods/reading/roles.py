"""Role words: a noun that means a chain of relations and a quality of whoever holds it.

"Grandfather" is the father of a father or mother: two hops of ``parents``, to someone male. "Mom" is a parent
who is female; "the religion of X's husband" reads ``spouse``, a male, then his religion. WordNet says so in
its definitions, compounds and hypernyms (:func:`kqe_rdf.kb.lexicon.role`); this module keeps what this KB can
read of it:

- the chain, when every word of it names one of the KB's relations (:class:`~.words.RelationWords`);
- the qualities that are values of the KB: nodes named so ("Male") that an attribute-like relation (few values,
  many edges: ``gender``) points at.

The ranking reads a path's hops from a role's chain (:func:`.ranking.role_hops`); the reader adds one triplet per
value to the node the role names (:mod:`.offline`). Nothing here names a relation or a word of a KB.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from pyoxigraph import NamedNode

from ...core.caches import per_instance
from ...kb import queries
from ...kb.linking import normalise_name
from ...kb.words import FUNCTION_WORDS
from .words import RelationWords, stem

#: How a related word may name a relation in a role's chain: said otherwise, not a broader word or a kind.
CHAIN_KINDS = frozenset({"synonym", "derived", "narrower", "form", "similarity"})
#: A relation whose edges point at at most this many distinct nodes holds values (sexes, statuses), not things
#: (queries/reader_relation_values.rq stops at one more).
MAX_VALUES = 32


@dataclass(frozen=True)
class Role:
    """A role word of a request: its position, the stems of its chain of relation words (nearest the person
    first) and the KB's values its holder has, as (relation IRI, value node IRI, value name)."""

    position: int
    word: str
    chain: tuple[str, ...]
    values: tuple[tuple[str, str, str], ...] = ()


class RoleReader:
    """The role words of requests against one KB."""

    def __init__(self, kb, words: RelationWords) -> None:
        self.kb = kb
        self.words = words

    def read(self, surface: dict[int, str], positions) -> dict[int, Role]:
        """The role words among the request's word ``positions`` (outside its mentions): those whose chain is
        longer than one relation or whose holder has a value of the KB ("grandfather", "mom")."""
        out = {}
        for position in positions:
            word = surface.get(position, "")
            if len(word) < 3 or word in FUNCTION_WORDS or stem(word) in self.words.all_stems:
                continue
            found = self.role(word)
            if found is not None and (len(found.chain) > 1 or found.values):
                out[position] = Role(position, word, found.chain, found.values)
        return out

    @per_instance(4096)
    def role(self, word: str) -> Role | None:
        from ...kb.lexicon import role

        found = role(word, self.names)
        if found is None:
            return None
        chain, qualities = found
        values = tuple(v for quality in sorted(qualities) for v in self.values(quality))
        return Role(-1, word, tuple(stem(w) for w in chain), values)

    def names(self, word: str) -> dict[str, float]:
        """The relations a word names and how surely: 1 by their own phrases' words, else the weight of a word that
        is one of theirs said otherwise (a synonym, a derived form, a narrower word: not a broader or a kind, which
        a dozen relations share)."""
        s = stem(word)
        out = {rel: 1.0 for rel, stems in self.words.relation_stems.items() if s in stems}
        for rel, table in self.words.related.items():
            how, weight, _text = table.get(s, (None, 0.0, ""))
            if how in CHAIN_KINDS and rel not in out:
                out[rel] = weight
        return out

    @per_instance(1024)
    def values(self, quality: str) -> tuple[tuple[str, str, str], ...]:
        """(relation, node, name) for each node named ``quality`` that an attribute-like relation points at."""
        index = self.kb.names
        out = []
        for node in index.nodes(normalise_name(quality)):
            text = queries.with_values(queries.load("reader_value_relations"), value=[NamedNode(node)])
            rows = self.kb.store.query(text, use_default_graph_as_union=True)
            for row in rows:
                relation = row["relation"].value
                if relation in self.kb.schema.relations and self._holds_values(relation):
                    out.append((relation, node, index.labels.get(node) or quality))
        return tuple(out)

    def holders(self, nodes) -> list[tuple[str, int]]:
        """The relations that point at any of ``nodes``, with how many edges, most first: how a value ("Painter")
        is held ("which people born in X are painters": by ``profession``)."""
        text = queries.with_values(queries.load("reader_value_relations"), value=[NamedNode(n) for n in nodes])
        found = [(row["relation"].value, int(row["edges"].value))
                 for row in self.kb.store.query(text, use_default_graph_as_union=True)]
        return sorted((f for f in found if f[0] in self.kb.schema.relations), key=lambda f: (-f[1], f[0]))

    @functools.lru_cache(maxsize=256)  # noqa: B019
    def _holds_values(self, relation: str) -> bool:
        text = queries.with_values(queries.load("reader_relation_values"), relation=[NamedNode(relation)])
        return len(list(self.kb.store.query(text, use_default_graph_as_union=True))) <= MAX_VALUES
