"""Evidence from every source, verbalised the same way: one short sentence that keeps where it came from.

* **kg** — facts around the question's entities, read by ``queries/qa_node_facts.rq``
  and rendered "<head> <relation label> <tail>" with both node IRIs kept. Multi-hop
  questions ("languages of the films directed by X") need facts two or three edges
  away, so the walk goes on from the nodes of the facts that best fit the question
  (a beam of ``qa_expand_nodes``), never from every neighbour. A question entity contributes at most
  ``qa_facts_per_node`` facts; a node further out with that many is a hub ("Drama",
  "English") and contributes none, so hubs cannot flood the pool.
* **text** — sentences (lines) of node documents: those of the question's entities,
  plus the best BM25 matches in a sentence index of the whole KB, built on first use
  in ``<kb>/sentences`` (written aside, then swapped in), or in memory for a served KB.
* **tables** — rows of the tables registered with the KB (:mod:`.tables`): those
  whose entity cell names a question entity or a node whose facts the KG walk read
  (a row is one more fact of that node, with the same hop); the best BM25 matches only
  when no row names a question entity.

Every piece names the entities it mentions (:class:`EntityRef`, with the KG nodes
they link to), which is what entity-overlap scoring and answer extraction read.
"""

from __future__ import annotations

import functools
import itertools
import json
import os
import re
import shutil
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pyoxigraph import NamedNode, Variable

from ...kb import queries
from ...core.errors import KqeError
from ...kb.layout import DOCUMENTS, kb_lock
from ...kb.linking import NameIndex, normalise_name
from ...kb.sentences import split_sentences
from .tables import Table, TableRow, load_tables

SOURCES = ("kg", "text", "tables")
SENTENCES = "sentences"
_TOKEN = re.compile(r"[\w'’-]+", re.UNICODE)
#: Document lines that say nothing a question asks about (the name is the sentence's prefix anyway).
_SKIPPED_LINES = ("name:", "type:")
_MAX_SENTENCE = 600


@dataclass(frozen=True)
class EntityRef:
    """A name an evidence piece mentions, the KG nodes it links to, and (tables) the column it sits in."""

    name: str
    iris: tuple[str, ...] = ()
    column: str | None = None


@dataclass
class Evidence:
    """One sentence of evidence; ``origin`` says exactly where it came from (triple, sentence or row)."""

    id: str
    source: str
    text: str
    entities: tuple[EntityRef, ...]
    origin: dict
    #: KG facts: edges away from a question entity (1 = touches one); 0 for text and tables.
    hop: int = 0
    #: A retriever's own weight for the piece (4StepFocus: the paths its node satisfies), which the reader counts
    #: instead of the piece's rank; None for plain facts, sentences and rows.
    prior: float | None = None
    nodes: frozenset[str] = field(init=False)

    def __post_init__(self) -> None:
        self.nodes = frozenset(i for e in self.entities for i in e.iris)

    def names(self, key: str) -> bool:
        """Whether one of the piece's entities (node, table value, listed name) is ``key`` (a normalised name)."""
        return any(normalise_name(e.name) == key for e in self.entities)

    def mentions(self, key: str) -> bool:
        """Whether the piece names ``key``: as an entity, or as words of its text (looser: for recall)."""
        return self.names(key) or f" {key} " in f" {normalise_name(self.text)} "

    def as_dict(self) -> dict:
        return {"id": self.id, "source": self.source, "text": self.text, "origin": self.origin,
                "entities": [{"name": e.name, "iris": list(e.iris), **({"column": e.column} if e.column else {})}
                             for e in self.entities]}


class NameFinder:
    """Names of KG nodes inside a sentence: list items first ("starred actors: A, B"), else exact n-grams."""

    def __init__(self, index: NameIndex, max_words: int = 6) -> None:
        self.index = index
        self.max_words = max_words

    def __call__(self, text: str) -> list[EntityRef]:
        _label, sep, rest = text.partition(": ")
        found: list[EntityRef] = []
        items = [i.strip() for i in re.split(r",\s+|;\s+", rest)] if sep else []
        for item in items:
            item = re.sub(r"\s*\(and \d+ more\)$", "", item)
            iris = self.index.nodes(normalise_name(item))
            if iris:
                found.append(EntityRef(item, tuple(iris)))
            else:
                found += self._ngrams(item)
        return found if sep else self._ngrams(text)

    def _ngrams(self, text: str) -> list[EntityRef]:
        tokens = [(m.start(), m.end()) for m in _TOKEN.finditer(text)]
        taken = [False] * len(tokens)
        found = []
        for n in range(min(self.max_words, len(tokens)), 0, -1):
            for i in range(len(tokens) - n + 1):
                if any(taken[i : i + n]):
                    continue
                span = text[tokens[i][0] : tokens[i + n - 1][1]]
                key = normalise_name(span)
                if n == 1 and (len(key) < 3 or key in _COMMON):
                    continue
                iris = self.index.nodes(key)
                if iris:
                    taken[i : i + n] = [True] * n
                    found.append(EntityRef(span, tuple(iris)))
        return found


_COMMON = frozenset("the and for with from that this was are has have not who what which".split())


# ------------------------------------------------------------------ KG facts


class KGFacts:
    """Facts around the question's entities, walked out ``hops`` edges along the best-fitting facts."""

    source = "kg"

    def __init__(self, kb, index: NameIndex, hops: int = 3, expand_nodes: int = 30, facts_per_node: int = 100) -> None:
        self.kb = kb
        self.index = index
        self.hops = hops
        self.expand_nodes = expand_nodes
        self.facts_per_node = facts_per_node
        self._query = queries.load("qa_node_facts")

    @functools.lru_cache(maxsize=20000)
    def facts(self, node: str) -> tuple[tuple[str, str, str], ...]:
        """At most ``facts_per_node`` (head, relation, tail) edges of one node."""
        rows = self.kb.store.query(self._query, use_default_graph_as_union=True,
                                   substitutions={Variable("node"): NamedNode(node)})
        return tuple((r["head"].value, r["relation"].value, r["tail"].value)
                     for r in itertools.islice(rows, self.facts_per_node))

    def name(self, iri: str) -> str:
        try:
            return self.kb.document(iri).name
        except KqeError:  # a node without a document (no text at all): its local name
            return iri.rsplit("/", 1)[-1]

    def evidence(self, fact: tuple[str, str, str], hop: int, number: int) -> Evidence:
        head, relation, tail = fact
        h, t = self.name(head), self.name(tail)
        text = f"{h} {self.kb.schema.label(relation)} {t}"
        return Evidence(f"kg-{number}", "kg", text, (EntityRef(h, (head,)), EntityRef(t, (tail,))),
                        {"head": head, "relation": relation, "tail": tail}, hop)

    def collect(self, seeds: Sequence[str], relevance: Callable[[list[str]], list[float]],
                walked: dict[str, int] | None = None) -> list[Evidence]:
        """Facts of the seeds, then of the ``expand_nodes`` best new nodes per hop (``relevance`` ranks facts).
        ``walked``, if given, gets each node whose facts were read, with the hop they were read at: table
        rows are facts of their entity node too, and are read for those nodes only (:class:`TableRows`)."""
        out: list[Evidence] = []
        seen_facts: set[tuple[str, str, str]] = set()
        visited = set(seeds)
        frontier = list(dict.fromkeys(seeds))
        for hop in range(1, self.hops + 1):
            new = []
            for node in frontier:
                facts = self.facts(node)
                if hop > 1 and len(facts) >= self.facts_per_node:
                    continue  # a hub ("Drama", "English") in the middle of a path says little about any one fact
                if walked is not None:
                    walked.setdefault(node, hop)
                for fact in facts:
                    if fact not in seen_facts:
                        seen_facts.add(fact)
                        new.append(self.evidence(fact, hop, len(out) + len(new)))
            out += new
            if hop == self.hops or not new:
                break
            scores = relevance([e.text for e in new])
            frontier = []
            for _score, ev in sorted(zip(scores, new), key=lambda p: -p[0]):
                for iri in (ev.origin["head"], ev.origin["tail"]):
                    if iri not in visited:
                        visited.add(iri)
                        frontier.append(iri)
                if len(frontier) >= self.expand_nodes:
                    break
        return out


# ------------------------------------------------------------------ text


def document_sentences(name: str, text: str, prose: Collection[str] = ()) -> list[str]:
    """A node document as sentences, each prefixed by the name: each line; a line of a prose field (``prose``:
    the labels of the KB's text fields, such as "description") is split at its sentence ends and read without
    its label; other long lines without a label are split at sentence ends too. Lines listing a node's
    neighbours ("starred actors: A, B") stay whole.

    >>> document_sentences("Kismet", "description: Kismet directed by W. Dieterle. Kismet has genre Drama.",
    ...                    prose={"description"})
    ['Kismet — Kismet directed by W. Dieterle.', 'Kismet — Kismet has genre Drama.']
    """
    out = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith(_SKIPPED_LINES):
            continue
        label, sep, body = line.partition(": ")
        if sep and label in prose:
            parts = split_sentences(body)
        else:
            parts = split_sentences(line) if len(line) > 200 and ": " not in line[:40] else [line]
        for part in parts:
            part = part.strip()
            if part:
                out.append(f"{name} — {part[:_MAX_SENTENCE]}")
    return out


def prose_labels(schema) -> frozenset[str]:
    """The labels of a KB's text fields ("description", "definition"), as its documents write them."""
    return frozenset(schema.label(f) for f in schema.fields)


class SentenceIndex:
    """BM25 over every sentence of the KB's node documents (Tantivy), built once into ``<kb>/sentences``.

    A served KB (``kb.read_only``) is never written: without a current index on disk
    the index is built in memory, once per process (about 5 s for the 128k sentences
    of the bio KB).
    """

    #: How documents are cut into sentences (:func:`document_sentences`); an index of another format is rebuilt.
    FORMAT = 2

    def __init__(self, kb) -> None:
        import tantivy

        self.kb = kb
        self.prose = prose_labels(kb.schema)
        self.path = Path(kb.path) / SENTENCES
        stamp = kb.manifest.get("documents_sha256", "")
        if self._current(stamp):
            self.index = tantivy.Index.open(str(self.path))
        elif getattr(kb, "read_only", False):
            self.index = tantivy.Index(self._schema())
            self._fill(self.index)
        else:
            self._build(stamp)
            self.index = tantivy.Index.open(str(self.path))
        self.index.reload()
        self.searcher = self.index.searcher()

    @staticmethod
    def _schema():
        import tantivy

        builder = tantivy.SchemaBuilder()
        builder.add_text_field("iri", stored=True, tokenizer_name="raw")
        builder.add_integer_field("n", stored=True)
        builder.add_text_field("text", stored=True, tokenizer_name="en_stem")
        return builder.build()

    def _fill(self, index) -> int:
        import tantivy

        writer = index.writer(heap_size=100_000_000, num_threads=1)
        count = 0
        for doc in self.kb.documents():
            for n, sentence in enumerate(document_sentences(doc.name, doc.text, self.prose)):
                writer.add_document(tantivy.Document(iri=doc.iri, n=n, text=sentence))
                count += 1
        writer.commit()
        writer.wait_merging_threads()
        return count

    def _current(self, stamp: str) -> bool:
        info = self.path / "sentences.json"
        if not info.is_file():
            return False
        built = json.loads(info.read_text(encoding="utf-8"))
        return built.get("documents_sha256") == stamp and built.get("format", 1) == self.FORMAT

    def _build(self, stamp: str) -> None:
        import tantivy

        with kb_lock(Path(self.kb.path)):
            if self._current(stamp):  # another process built it while we waited
                return
            work = self.path.parent / f".{SENTENCES}.build-{os.getpid()}"
            shutil.rmtree(work, ignore_errors=True)
            work.mkdir()
            try:
                count = self._fill(tantivy.Index(self._schema(), path=str(work)))
                (work / "sentences.json").write_text(json.dumps(
                    {"documents_sha256": stamp, "format": self.FORMAT, "sentences": count, "source": DOCUMENTS}), encoding="utf-8")
                old = self.path.parent / f".{SENTENCES}.old-{os.getpid()}"
                if self.path.exists():
                    os.rename(self.path, old)
                os.rename(work, self.path)
                shutil.rmtree(old, ignore_errors=True)
            except BaseException:
                shutil.rmtree(work, ignore_errors=True)
                raise

    def search(self, text: str, k: int) -> list[tuple[str, int, str, float]]:
        """(document IRI, sentence number, sentence, BM25 score), best first."""
        from ...kb.text_index import plain_query

        source = plain_query(text)
        if not source or k <= 0:
            return []
        query, _errors = self.index.parse_query_lenient(source, ["text"])
        out = []
        for score, address in self.searcher.search(query, limit=k, count=False).hits:
            doc = self.searcher.doc(address)
            out.append((doc["iri"][0], int(doc["n"][0]), doc["text"][0], float(score)))
        return out


class TextSentences:
    """Sentences of the question entities' documents, and the best BM25 sentences of the whole KB."""

    source = "text"

    def __init__(self, kb, finder: NameFinder, hits: int = 100) -> None:
        self.kb = kb
        self.finder = finder
        self.hits = hits

    @functools.cached_property
    def index(self) -> SentenceIndex:
        return SentenceIndex(self.kb)

    def collect(self, question: str, seeds: Iterable[str]) -> list[Evidence]:
        found: dict[tuple[str, int], str] = {}
        for iri in seeds:
            try:
                doc = self.kb.document(iri)
            except KqeError:
                continue
            for n, sentence in enumerate(document_sentences(doc.name, doc.text, self.index.prose)):
                found[(iri, n)] = sentence
        for iri, n, sentence, _score in self.index.search(question, self.hits):
            found.setdefault((iri, n), sentence)
        out = []
        for number, ((iri, n), sentence) in enumerate(found.items()):
            name, _, body = sentence.partition(" — ")
            entities = (EntityRef(name, (iri,)), *self.finder(body))
            out.append(Evidence(f"text-{number}", "text", sentence, entities, {"document": iri, "sentence": n}))
        return out


# ------------------------------------------------------------------ tables


class TableRows:
    """Rows of the registered tables linked to nodes already in the evidence, and the best BM25 rows."""

    source = "tables"

    def __init__(self, kb, index: NameIndex, hits: int = 100) -> None:
        self.kb = kb
        self.index = index
        self.hits = hits

    def collect(self, question: str, seeds: Iterable[str], walked: Mapping[str, int] | None = None) -> list[Evidence]:
        """Rows linked to the question's ``seeds`` (hop 1) and to the nodes whose facts the KG walk read
        (``walked``: node → hop) — a row is one more fact of its entity node, so it is read exactly when the
        graph's facts of that node are, and other films' rows cannot outvote the asked film's own row. Only
        when no row names a seed, the best BM25 rows too (a topic the graph does not have, e.g. a year kept
        only in a table) — otherwise rows that merely share a word ("language") with the question drown the
        right one."""
        tables = load_tables(self.kb.path)
        if not tables:
            return []
        rows, by_node, search = _table_lookup(tuple(tables))
        picked: dict[int, int] = {}
        seeds = list(seeds)
        for node, hop in [*((s, 1) for s in seeds), *(walked or {}).items()]:
            for i in by_node.get(node, ()):
                picked.setdefault(i, hop)
        if not any(by_node.get(s) for s in seeds):
            for i, _score in search(question, self.hits):
                picked.setdefault(i, 0)
        return [self.evidence(*rows[i], number, hop) for number, (i, hop) in enumerate(picked.items())]

    def evidence(self, table: Table, row: TableRow, number: int, hop: int = 0) -> Evidence:
        """``hop``: as for a KG fact, edges from a question entity (1: the row of one); 0 when found by BM25."""
        entities = []
        for column, value in zip(table.columns, row.values):
            if not value:
                continue
            iris = row.nodes if column == table.entity_column else tuple(self.index.nodes(normalise_name(value)))
            entities.append(EntityRef(value, iris, column))
        return Evidence(f"table-{number}", "tables", table.text(row), tuple(entities),
                        {"table": table.name, "row": row.number}, hop)


@functools.lru_cache(maxsize=4)
def _table_lookup(tables: tuple[Table, ...]):
    """All rows, node → row positions, and a BM25 search over the rendered rows (built once per table set)."""
    from ...kb.text_index import TextPool

    rows = [(t, r) for t in tables for r in t.rows]
    by_node: dict[str, list[int]] = {}
    for i, (_t, r) in enumerate(rows):
        for node in r.nodes:
            by_node.setdefault(node, []).append(i)
    pool = TextPool([t.text(r) for t, r in rows])
    return rows, by_node, pool.search
