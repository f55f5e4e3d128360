"""Facts the graph lacks, read from sentences: the relation the question names, in sentences beside its entity.

When the graph lacks the edge a question asks about (an incomplete KB: GRAFT-Net's setting, where half of
MetaQA's edges are only sentences of their head movies' documents), the structural reader still finds *a*
grounded path, but one that reads around the missing edge: it leaves the question's relation word unread
("who is the director of Nadine" read as *starred actors*) or walks hops no word names ("when was X released"
read as *directed by / directed / release year*: the release years of the director's other films). Then the
sentences are asked, the way the graph would have been:

1. the relations the question names: words of their labels and alternative labels (the structural reader's
   own vocabulary, :class:`~kqe_rdf.methods.reading.words.RelationWords`), outside its entities' names;
2. sentences that may state such a relation of a question entity: those of the entity's own document ("Nadine
   directed by Robert Benton.", the edge read from its head) and those of other documents that name the
   entity (best BM25 sentences for its name and the relation's words: "Kismet directed by William Dieterle."
   in Kismet's document answers "which films did William Dieterle direct");
3. a sentence supports the nodes it names, and the node whose document it is, other than the question's
   entities, when it names the relation and the node is of a class at the relation's other end from the
   entity (of those, of the class the question asks for, if it asks for one of them); each sentence is one
   vote, and the best-supported node answers, cited with its sentences.

A question that names several relations ("the directors of the films starring X") is a path, and one that
names more than three entities a list (a case's phenotypes), not one fact: this stage leaves them to the others.
"""

from __future__ import annotations

from collections.abc import Sequence

from ...core.errors import KqeError
from ...kb.linking import NameIndex, normalise_name
from ..fourstep.compiler import stored_direction
from ..reading import OfflineTriplets
from ..reading.words import RelationWords, phrase_stems
from .answer import CandidateAnswer, Reading
from .evidence import EntityRef, Evidence, NameFinder, TextSentences, document_sentences
from .intent import Intent

METHOD = "text facts (the graph lacks the edge the question names)"
#: Most entities a question may name to be read as one fact (a case's list of phenotypes is not).
MAX_ENTITIES = 3


class TextFacts:
    """The relation a question names, read from the sentences of its entities' documents and those naming them."""

    def __init__(self, kb, index: NameIndex, reader: OfflineTriplets, text: TextSentences, hits: int = 50,
                 max_candidates: int = 10) -> None:
        self.kb = kb
        self.index = index
        self.reader = reader
        #: The structural reader's vocabulary: which words name which relation.
        self.words: RelationWords = reader.reader.words
        self.text = text
        self.finder = NameFinder(index)
        self.hits = hits
        self.max_candidates = max_candidates

    def relations(self, question: str, intent: Intent) -> dict[str, set[str]]:
        """The relations the question's words name (outside its entities' names), with the stems that name them.

        Both a relation and its inverse are named by the same words; the stored one is kept."""
        names = {s for e in self._entities(intent) for s in phrase_stems(e.text)}
        stems = phrase_stems(question) - names
        schema = self.kb.schema
        out: dict[str, set[str]] = {}
        for rel, named in self.words.relation_stems.items():
            if rel in schema.relations and named & stems:
                out.setdefault(stored_direction(schema, rel)[0], set()).update(named)
        return out

    def __call__(self, question: str, intent: Intent, constants: Sequence[str] = ()) -> tuple[Reading, list[Evidence]] | None:
        """The best-supported answer with the sentences that support it, or None when no sentence states a
        relation the question names about one of its entities (``constants``: those the structural reader read
        the question's entities as, when it has a reading)."""
        relations = self.relations(question, intent)
        if len(relations) != 1 or len([e for e in intent.entities if e.iris]) > MAX_ENTITIES:
            return None  # one sentence states one fact: not a path of several relations, nor a list (phenotypes)
        read = self._entities(intent, constants)
        found = self._read(relations, read, intent) if read else None
        if found is None:
            others = [e for e in self._entities(intent) if e not in read]
            found = self._read(relations, others, intent) if others else None
        return found

    def _read(self, relations: dict[str, set[str]], entities: list, intent: Intent
              ) -> tuple[Reading, list[Evidence]] | None:
        """What the sentences about ``entities`` say of the relation (see :meth:`__call__`); none of the
        question's entities is an answer."""
        seeds = {i for e in intent.entities for i in e.iris}
        (relation, _stems), = relations.items()
        support: dict[str, dict] = {}
        pieces: dict[tuple[str, int], Evidence] = {}
        for entity in entities:
            wanted = self._other_end(relation, entity.iris, intent.answer_types)
            for iri, n, sentence in self._sentences(entity.text, entity.iris, relations):
                body = sentence.partition(" — ")[2]
                found = [EntityRef(self.kb.document(iri).name, (iri,)), *self._names(body, relation)]
                if not any(set(e.iris) & set(entity.iris) for e in found):
                    continue  # "Nadine Labaki" in a sentence names someone else than the film "Nadine"
                own = {s for e in found if not self._relation_word(e.name) for s in phrase_stems(e.name)}
                named = [rel for rel, stems in relations.items() if stems & (phrase_stems(body) - own)]
                if not named:
                    continue
                key = (iri, n)
                if key not in pieces:
                    pieces[key] = Evidence(f"text-fact-{len(pieces)}", "text", sentence, tuple(found),
                                           {"document": iri, "sentence": n, "relation": named[0],
                                            "method": METHOD})
                for ref in found:
                    nodes = [i for i in ref.iris if i not in seeds and self.index.types.get(i, frozenset()) & wanted]
                    if not nodes or normalise_name(ref.name) == normalise_name(entity.text):
                        continue
                    s = support.setdefault(nodes[0], {"name": ref.name, "iris": tuple(nodes), "evidence": []})
                    if pieces[key].id not in s["evidence"]:
                        s["evidence"].append(pieces[key].id)
        if not support:
            return None
        ranked = sorted(support.values(), key=lambda s: (-len(s["evidence"]), s["evidence"][0]))
        # Every node as many sentences support as the best one answers ("which films did X direct": each film
        # has its own sentence); the first is cited.
        answered = sum(1 for s in ranked if len(s["evidence"]) == len(ranked[0]["evidence"]))
        candidates = [CandidateAnswer(s["name"], s["iris"], float(len(s["evidence"])), s["evidence"], True)
                      for s in ranked[: max(self.max_candidates, answered)]]
        answers = candidates[:answered]
        cited = set(candidates[0].evidence)
        return Reading(candidates[0], candidates, METHOD, answers=answers), \
            [p for p in pieces.values() if p.id in cited]

    def _names(self, body: str, relation: str) -> list[EntityRef]:
        """The names a sentence gives, read on each side of the relation's label when the sentence writes it
        as "<head> <label> <tail>" ("Straight Shooting directed by John Ford.": not the film "Directed by John
        Ford"); else the names of the whole sentence."""
        schema = self.kb.schema
        for label in sorted({schema.label(relation), schema.inverse_label(relation)}, key=len, reverse=True):
            before, sep, after = f" {body} ".partition(f" {label} ")
            if sep and before.strip() and after.strip(" ."):
                return [*self.finder(before.strip()), *self.finder(after.strip().rstrip("."))]
        return self.finder(body)

    def _relation_word(self, name: str) -> bool:
        """A one-word name that is a relation's word ("star" names the film "Star!", "tags" the tag "tag")."""
        stems = phrase_stems(name)
        return len(name.split()) == 1 and bool(stems) and stems <= self.words.all_stems

    def _entities(self, intent: Intent, constants: Sequence[str] = ()) -> list:
        """The question's entities: those the structural reader read as its constants (``constants``); else without
        one-word names that are relation words, or lower-case words beside a capitalised name ("the creator of
        the film script for Bully": "Creator" is a film too), when it names others."""
        linked = [e for e in intent.entities if e.iris]
        if constants:
            return [e for e in linked if e.text in constants]
        named = [e for e in linked if not self._relation_word(e.text)] or linked
        if any(not e.text.islower() for e in named):
            named = [e for e in named if " " in e.text or not e.text.islower()]
        return named

    def _sentences(self, name: str, iris: Sequence[str], relations: dict[str, set[str]]):
        """(document IRI, sentence number, sentence) that may state a relation of the entity: its documents'
        sentences, then the best BM25 sentences for its name and the relations' words that name it."""
        prose = self.text.index.prose
        for iri in iris:
            try:
                doc = self.kb.document(iri)
            except KqeError:
                continue
            for n, sentence in enumerate(document_sentences(doc.name, doc.text, prose)):
                yield iri, n, sentence
        labels = " ".join(sorted({self.kb.schema.label(rel) for rel in relations}))
        key = f" {normalise_name(name)} "
        for iri, n, sentence, _score in self.text.index.search(f"{name} {labels}", self.hits):
            if iri not in iris and key in f" {normalise_name(sentence.partition(' — ')[2])} ":
                yield iri, n, sentence  # the caller checks that the name in it is the entity's

    def _other_end(self, relation: str, iris: Sequence[str], asked: Sequence[str]) -> set[str]:
        """The classes an answer can have: those at the relation's other end from the entity's class (a film's
        "release year" is a year, a year's is a film), and among them the ones the question asks for if any (a
        class word may sit in a title: "the movie X" does not ask for a movie)."""
        schema = self.kb.schema
        rel = schema.relations[relation]
        domain = schema.subclasses(rel.domain) if rel.domain else set(schema.classes)
        range_ = schema.subclasses(rel.range) if rel.range else set(schema.classes)
        types = {t for i in iris for t in self.index.types.get(i, ())}
        ends = (range_ if types & domain else set()) | (domain if types & range_ else set())
        return (ends & set(asked)) or ends
