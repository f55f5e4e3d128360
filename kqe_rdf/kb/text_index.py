"""BM25 over node documents, with Tantivy.

Any user text works as a query: query-syntax characters are stripped, and the
words become one flat disjunction of term queries, the query Tantivy's lenient
parser means by them but without its nesting (``raw=True`` keeps Tantivy's
syntax for users who want phrases and boosts). Documents are keyed by node IRI;
node types are indexed so a type filter runs inside the index, not after it.

Each document also carries its node's number (a fast field), and the index folder
a table of the nodes by number (IRI, name, types): a hit's IRI is read from that
column, not from the stored document (decompressing a block of the document store
per hit was most of a deep search's cost), and a search over a type most nodes
have runs as Tantivy's fastest query, a flat disjunction, with the others
dropped after.
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import numpy as np

from ..core.caches import per_instance
from .documents import NodeDocument
from ..core.errors import KqeError

_SYNTAX = re.compile(r"[^\w\s]+", re.UNICODE)
_FIELDS = ["name", "body"]
#: Words the parser reads as operators (``a AND b`` requires both): text with one goes to the parser.
_OPERATORS = frozenset({"AND", "OR", "NOT"})
#: The table of the nodes by number, in the index folder (Tantivy leaves files it did not write alone).
NODES = "nodes.npz"
#: A type filter runs after a flat disjunction when at least this share of the nodes has the type (the
#: disjunction then fetches a few more hits than asked for); a rarer type is filtered inside the index.
AFTER_FILTER_SHARE = 0.5


_WORKERS: dict[int, ThreadPoolExecutor] = {}


def in_background(work: Callable, *args) -> Future:
    """``work(*args)`` in this process's worker thread (a forked child gets its own). One thread: a process
    serves one request at a time (the server's workers are processes), and a server worker's threads get its
    64 MiB job stack, which counts against its memory limit."""
    pid = os.getpid()
    if pid not in _WORKERS:
        _WORKERS[pid] = ThreadPoolExecutor(max_workers=1, thread_name_prefix="kqe-bm25")
    return _WORKERS[pid].submit(work, *args)


def first_fetch(k: int, share: float) -> int:
    """How many hits :meth:`TextIndex._top` fetches first for ``k`` of a class ``share`` of the nodes have (one most
    nodes have is filtered after the search): ``4k + 100`` for every such class."""
    return max(math.ceil(k / share * 1.05) + 10, 4 * k + 100)


def plain_query(text: str) -> str:
    """Words only: Tantivy would read ``HP:0001250`` as a field and ``-x`` as a negation."""
    return " ".join(_SYNTAX.sub(" ", text).split())


#: The analyzers an index's text fields may have, by the name its schema gives them. ``english`` is the one Lucene,
#: Anserini and Pyserini use by default: lower-case, Lucene's 33 English stop words (Tantivy's "english" list is
#: that list), an English stemmer (Tantivy's Snowball "english", as before). ``en_stem`` has no stop words: indexes
#: built before it keep it, and their requests are read with it.
ANALYZERS = {
    "english": "lower-case, Lucene's 33 English stop words, English (Snowball) stemmer",
    "en_stem": "lower-case, English (Snowball) stemmer, no stop words (built before the stop words: rebuild to upgrade)",
}
#: What a build writes into the index folder: which analyzer its text fields have.
ANALYZER_FILE = "analyzer.json"


def analyzer(name: str):
    """The Tantivy analyzer of that name (:data:`ANALYZERS`), as indexes and requests read text."""
    import tantivy

    builder = (tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.simple())
               .filter(tantivy.Filter.remove_long(40)).filter(tantivy.Filter.lowercase()))
    if name == "english":
        builder = builder.filter(tantivy.Filter.stopword("english"))
    return builder.filter(tantivy.Filter.stemmer("english")).build()


def _schema(text_analyzer: str = "english"):
    import tantivy

    builder = tantivy.SchemaBuilder()
    builder.add_text_field("iri", stored=True, tokenizer_name="raw")
    builder.add_text_field("identifier", stored=True, tokenizer_name="raw")
    builder.add_text_field("types", stored=True, tokenizer_name="raw")
    builder.add_text_field("name", stored=True, tokenizer_name=text_analyzer)
    builder.add_text_field("body", stored=True, tokenizer_name=text_analyzer)
    builder.add_integer_field("n", fast=True)  # the node's number in the folder's node table
    return builder.build()


def _packed(texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """Strings as one UTF-8 byte array and offsets (a fixed-width array would pad every one to the longest)."""
    encoded = [t.encode("utf-8") for t in texts]
    offsets = np.zeros(len(encoded) + 1, dtype=np.int64)
    np.cumsum([len(e) for e in encoded], out=offsets[1:])
    return np.frombuffer(b"".join(encoded), dtype=np.uint8), offsets


def build_text_index(path: Path, documents: Iterable[NodeDocument], heap_bytes: int = 1_500_000_000) -> int:
    """Write a fresh index at ``path`` (replacing what is there); returns the document count.

    One indexing thread: two builds of the same documents give the same index, documents numbered in their
    order, so equal scores rank by node number (with two threads their segments, and so tie orders, differed
    between builds). Its heap holds a KB of a million documents in one segment, which Tantivy searches fastest."""
    import tantivy

    if path.exists():
        shutil.rmtree(path)
    path.mkdir(parents=True)
    index = tantivy.Index(_schema(), path=str(path))
    index.register_tokenizer("english", analyzer("english"))
    writer = index.writer(heap_size=heap_bytes, num_threads=1)
    iris, names, type_set, sets = [], [], [], {}
    for doc in documents:
        writer.add_document(tantivy.Document(iri=doc.iri, identifier=doc.identifier, types=list(doc.types),
                                             name=doc.name, body=doc.text, n=len(iris)))
        iris.append(doc.iri)
        names.append(doc.name)
        type_set.append(sets.setdefault(tuple(sorted(set(doc.types))), len(sets)))
    writer.commit()
    writer.wait_merging_threads()
    types = sorted({t for members in sets for t in members})
    number = {t: i for i, t in enumerate(types)}
    set_members = [[number[t] for t in members] for members in sets]  # in the order of their ids
    iri_bytes, iri_offsets = _packed(iris)
    name_bytes, name_offsets = _packed(names)
    type_bytes, type_offsets = _packed(types)
    set_offsets = np.zeros(len(set_members) + 1, dtype=np.int64)
    np.cumsum([len(m) for m in set_members], out=set_offsets[1:])
    with open(path / NODES, "wb") as out:
        np.savez(out, iri_bytes=iri_bytes, iri_offsets=iri_offsets, name_bytes=name_bytes, name_offsets=name_offsets,
                 type_bytes=type_bytes, type_offsets=type_offsets, type_set=np.array(type_set, dtype=np.int32),
                 set_offsets=set_offsets, set_members=np.array([t for m in set_members for t in m], dtype=np.int32))
    (path / ANALYZER_FILE).write_text(json.dumps({"analyzer": "english"}))
    return len(iris)


class NodeTable:
    """The nodes of a text index by number: IRI, name, and which type set each has."""

    def __init__(self, path: Path) -> None:
        with np.load(path) as data:
            arrays = {k: data[k] for k in data.files}
        self._iri_bytes, self._iri_offsets = arrays["iri_bytes"].tobytes(), arrays["iri_offsets"]
        self._name_bytes, self._name_offsets = arrays["name_bytes"].tobytes(), arrays["name_offsets"]
        types_at, ptr = arrays["type_bytes"].tobytes(), arrays["type_offsets"].tolist()
        types = [types_at[ptr[i]:ptr[i + 1]].decode("utf-8") for i in range(len(ptr) - 1)]
        members, ptr = arrays["set_members"].tolist(), arrays["set_offsets"].tolist()
        #: Each type set, by id.
        self.sets = [frozenset(types[t] for t in members[ptr[i]:ptr[i + 1]]) for i in range(len(ptr) - 1)]
        self.type_set = arrays["type_set"]
        self._decoded: dict[int, str] = {}

    #: How many decoded IRIs are remembered (a deep search reads the same frequent hits request after request).
    REMEMBERED = 200_000

    def iri(self, n: int) -> str:
        found = self._decoded.get(n)
        if found is None:
            if len(self._decoded) >= self.REMEMBERED:
                self._decoded.clear()
            found = self._decoded[n] = self._iri_bytes[self._iri_offsets[n]:self._iri_offsets[n + 1]].decode("utf-8")
        return found

    def name(self, n: int) -> str:
        return self._name_bytes[self._name_offsets[n]:self._name_offsets[n + 1]].decode("utf-8")

    @per_instance(64)
    def of_types(self, types: frozenset[str]) -> tuple[np.ndarray, float]:
        """Which nodes have one of ``types`` (a boolean per number), and their share of all nodes."""
        wanted = np.array([bool(members & types) for members in self.sets] or [False], dtype=bool)
        mask = wanted[self.type_set] if len(self.type_set) else np.zeros(0, dtype=bool)
        return mask, float(mask.mean()) if len(mask) else 0.0


class TextIndex:
    """A read-only BM25 index over node documents."""

    def __init__(self, path: Path) -> None:
        import tantivy

        if not path.is_dir():
            raise KqeError(f"no BM25 index at {path}; rebuild the KB with `kqe-rdf kb build`")
        self.index = tantivy.Index.open(str(path))
        built = json.loads((path / ANALYZER_FILE).read_text()) if (path / ANALYZER_FILE).is_file() else {}
        #: The analyzer of the text fields (:data:`ANALYZERS`): an index built before the stop words keeps its own.
        self.analyzer_name = built.get("analyzer", "en_stem")
        # Tantivy knows its own analyzers by name (en_stem); one of ours is registered each time an index opens.
        self._analyzer = analyzer(self.analyzer_name)
        if self.analyzer_name != "en_stem":
            self.index.register_tokenizer(self.analyzer_name, self._analyzer)
        self.index.reload()
        self.searcher = self.index.searcher()
        self._tantivy = tantivy
        self._iris: dict[tuple[int, int], str] = {}
        #: The names of the nodes a search has found (read with their IRIs): what a result shows.
        self.names: dict[str, str] = {}
        #: The node table, for an index built with node numbers (an older one reads IRIs from stored documents).
        self.nodes = NodeTable(path / NODES) if (path / NODES).is_file() else None
        #: A search started ahead (:meth:`search_ahead`): the request's text, how many hits, and the hits to come.
        self._ahead: tuple[str, int, Future] | None = None

    def __len__(self) -> int:
        return self.searcher.num_docs

    def describe(self) -> dict:
        """The analyzer, segments and documents of the index (``kqe-rdf kb info``)."""
        return {"analyzer": self.analyzer_name, "analysis": ANALYZERS[self.analyzer_name],
                "segments": self.searcher.num_segments, "documents": self.searcher.num_docs}

    def only_stop_words(self, text: str) -> bool:
        """Whether a request has words but none the analyzer keeps ("the of in"): BM25 finds nothing for it."""
        words = plain_query(text).split()
        return bool(words) and not any(self._analyzer.analyze(w) for w in words)

    def parse(self, text: str, raw: bool = False):
        source = text if raw else plain_query(text)
        if not source.strip():
            return None
        words = source.split()
        if raw or _OPERATORS.intersection(words):
            query, _errors = self.index.parse_query_lenient(source, _FIELDS)
            return query
        return self._flat(words)

    def _flat(self, words: Sequence[str]):
        """The parser's query for plain ``words``, flattened: one SHOULD clause per (word, field).

        The parser nests each word's name and body matches in a boolean of their own, which keeps Tantivy
        from its block-max WAND top-k (a flat disjunction of term queries): about half the time at 8M edges
        (bench/scale.py). The clauses are the parser's: each distinct word once, in first-seen order, as a term
        (a word of several tokens, ``foo_bar``, is the parser's own phrase). Scores are the same sums, added
        in another order: equal but for the last float digits. ``Seizures fever`` becomes
        ``name:seizur body:seizur name:fever body:fever`` where the parser has
        ``(name:seizur body:seizur) (name:fever body:fever)``. Words without a token match nothing (the
        parser matches every node with score 0 when there are two or more of them and nothing else).
        """
        q, should = self._tantivy.Query, self._tantivy.Occur.Should
        clauses = [(should, clause) for word in dict.fromkeys(words) for clause in self._word(word)]
        return q.boolean_query(clauses) if clauses else q.empty_query()

    def _word(self, word: str) -> list:
        """The term query of one plain word in each text field (the parser's phrase for a word of several tokens)."""
        q, schema = self._tantivy.Query, self.index.schema
        tokens = self._analyzer.analyze(word)
        if len(tokens) == 1:
            return [q.term_query(schema, field, tokens[0], "freq") for field in _FIELDS]
        return [self.index.parse_query_lenient(word, [field])[0] for field in _FIELDS] if tokens else []

    def search_weighted(self, weights: Mapping[str, float], k: int = 10, types: Sequence[str] | None = None
                        ) -> list[tuple[str, float]]:
        """(node IRI, score) pairs, best first, where a document scores Σ weight × BM25 over the words of ``weights``:
        a bag of words that counts, as a Lucene query counts a word written three times (``{"aspirin": 3.0}``
        scores three times ``aspirin``'s BM25; the flat query of :meth:`search` counts each word once)."""
        q, should = self._tantivy.Query, self._tantivy.Occur.Should
        clauses = [(should, q.boost_query(clause, float(weight)))
                   for word, weight in weights.items() if weight > 0 for clause in self._word(plain_query(word))]
        if not clauses or k <= 0:
            return []
        return self._named(self._top(q.boolean_query(clauses), k, types))

    def _restricted(self, query, types: Sequence[str] | None):
        """Only nodes of ``types``, without changing scores (a zero-score filter clause)."""
        if not types:
            return query
        q, occur = self._tantivy.Query, self._tantivy.Occur
        only = q.const_score_query(q.term_set_query(self.index.schema, "types", list(types)), 0.0)
        return q.boolean_query([(occur.Must, query), (occur.Must, only)])

    def search(
        self, text: str, k: int = 10, types: Sequence[str] | None = None, raw: bool = False
    ) -> list[tuple[str, float]]:
        """(node IRI, BM25 score) pairs, best first; an empty list for text with no words."""
        query = self.parse(text, raw=raw)
        if query is None or k <= 0:
            return []
        return self._named(self._top(query, k, types))

    def search_later(self, text: str, k: int = 10, types: Sequence[str] | None = None) -> Future:
        """:meth:`search` in the worker thread: Tantivy lets go of the GIL, so a caller can encode and search the
        dense index meanwhile (a hybrid's two retrievers side by side); ``.result()`` gives the pairs."""
        return in_background(self.search, text, k, types)

    def _top(self, query, k: int, types: Sequence[str] | None, ahead: tuple[int, Future] | None = None) -> list:
        """The (score, address) hits of the top ``k`` nodes of ``types`` (any type without them).

        With the node table, a type most nodes have is filtered after a flat disjunction (Tantivy's block-max
        WAND) that fetches enough more hits for ``k`` of the type, and again with four times as many while it
        fetched too few (a hit outside the type is dropped; the order is the restricted search's: by score,
        ties by address). A rarer type is a filter inside the index: a disjunction would fetch too many.
        ``ahead``: the flat disjunction's top hits (how many, and the hits), searched already: a top ``n`` is the
        first ``n`` of any deeper top (ties by address), so a fetch of at most that many reads them."""

        def flat(limit: int) -> list:
            if ahead is not None and limit <= ahead[0]:
                return ahead[1].result()[:limit]
            return self.searcher.search(query, limit=limit, count=False).hits

        if not types:
            return flat(k)
        if self.nodes is not None:
            mask, share = self.nodes.of_types(frozenset(types))
            if share >= AFTER_FILTER_SHARE:
                # Generously: hits of other types crowd the top of some requests (a brand's name is the brand's
                # best match), and a second fetch costs a whole search while a deeper first one costs little.
                limit = first_fetch(k, share)
                while True:
                    hits = flat(limit)
                    numbers = self.searcher.fast_field_values("n", [a for _s, a in hits])
                    kept = [hit for hit, n in zip(hits, numbers) if mask[n]]
                    if len(kept) >= k or len(hits) < limit:
                        return kept[:k]
                    limit *= 4
        return self.searcher.search(self._restricted(query, types), limit=k, count=False).hits

    def scores_among(self, text: str, iris: Sequence[str], depth: int, types: Sequence[str] | None = None
                     ) -> tuple[dict[str, float], float]:
        """The BM25 scores of those of ``iris`` in the top ``depth`` of ``search(text, depth, types)``, and the
        top score (0 without hits): what ``search`` would say of them, without reading the stored documents
        of all ``depth`` hits (most of a deep search's cost).

        With the node table the hits' IRIs come from their numbers; an older index takes the nodes of ``iris``
        among the top ``depth`` by a second search restricted to ``iris`` (a zero-score filter, so scores are
        the same)."""
        return self.scores_among_later(text, depth, types, now=True)(iris)

    def search_ahead(self, text: str, depth: int, types: Sequence[str] | None = None) -> None:
        """Start, in the worker thread, the search a coming :meth:`scores_among_later` of ``text`` for ``depth``
        hits makes, so Tantivy searches while the caller does other work first (4StepFocus reads the request before
        hierarchy matching fuses BM25). ``types``: the classes that call will restrict to, None when not known yet.
        What is started is the flat disjunction, as deep as :meth:`_top` fetches first for a class most nodes have;
        a rarer class known now is searched inside the index later, as before. The next call of another text drops
        it."""
        self._ahead = None
        if self.nodes is None or depth <= 0 or (types and self.nodes.of_types(frozenset(types))[1] < AFTER_FILTER_SHARE):
            return
        query = self.parse(text)
        if query is not None:
            limit = first_fetch(depth, 1.0)
            self._ahead = (text, limit, in_background(self._top, query, limit, None))

    def scores_among_later(self, text: str, depth: int, types: Sequence[str] | None = None, now: bool = False
                           ) -> Callable[[Sequence[str]], tuple[dict[str, float], float]]:
        """:meth:`scores_among` for ``iris`` a caller knows only later: with the node table, Tantivy searches
        in a worker thread meanwhile (it lets go of the GIL), beside the caller's own work (hierarchy
        matching's arrays), or has searched already (:meth:`search_ahead`). Called with ``iris``, the function
        waits for the hits; ``now`` searches here."""
        ahead, self._ahead = self._ahead, None
        ahead = ahead[1:] if ahead is not None and ahead[0] == text else None
        query = self.parse(text)
        if query is None or depth <= 0:
            return lambda _iris: ({}, 0.0)
        if self.nodes is None:
            return lambda iris: self._among_top(query, iris, depth, types)
        top = self._top(query, depth, types, ahead) if now else in_background(self._top, query, depth, types, ahead)
        return lambda iris: self._numbered_among(top, iris)

    def _numbered_among(self, top: list | Future, iris: Sequence[str]) -> tuple[dict[str, float], float]:
        """``scores_among`` from the top hits (once the worker has them), named by the node table."""
        if isinstance(top, Future):
            top = top.result()
        if not top or not iris:
            return {}, float(top[0][0]) if top else 0.0
        wanted, table = set(iris), self.nodes
        numbers = self.searcher.fast_field_values("n", [a for _s, a in top])
        return {iri: float(s) for (s, _a), n in zip(top, numbers) if (iri := table.iri(n)) in wanted}, float(top[0][0])

    def _among_top(self, query, iris: Sequence[str], depth: int, types: Sequence[str] | None
                   ) -> tuple[dict[str, float], float]:
        """``scores_among`` on an index without the node table."""
        query = self._restricted(query, types)
        top = self.searcher.search(query, limit=depth, count=False).hits
        if not top or not iris:
            return {}, float(top[0][0]) if top else 0.0
        ranked = {(a.segment_ord, a.doc) for _s, a in top}
        return ({self._iri(a): float(s) for s, a in self._among(query, iris) if (a.segment_ord, a.doc) in ranked},
                float(top[0][0]))

    def scores_of(self, text: str, iris: Sequence[str]) -> dict[str, float]:
        """The BM25 scores of ``iris`` for ``text`` (those matching none of its words are absent): one search
        restricted to them by a zero-score filter, so the scores are ``search``'s."""
        query = self.parse(text)
        if query is None or not iris:
            return {}
        return dict(self._named(self._among(query, iris)))

    def _among(self, query, iris: Sequence[str]) -> list:
        """(score, address) hits of ``query`` among the nodes ``iris`` (a zero-score filter: ``search``'s scores)."""
        q, occur = self._tantivy.Query, self._tantivy.Occur
        only = q.const_score_query(q.term_set_query(self.index.schema, "iri", list(iris)), 0.0)
        return self.searcher.search(q.boolean_query([(occur.Must, query), (occur.Must, only)]), limit=len(iris),
                                    count=False).hits

    def _named(self, hits: list) -> list[tuple[str, float]]:
        """(node IRI, score) pairs of Tantivy's (score, address) hits, in their order."""
        return list(zip(self._iris_of([a for _s, a in hits]), (float(s) for s, _a in hits)))

    def _iris_of(self, addresses: list) -> list[str]:
        """The node IRIs of hits (their names remembered for the results): from their numbers with the node table."""
        if self.nodes is None:
            return [self._iri(a) for a in addresses]
        table, names, out = self.nodes, self.names, []
        for n in self.searcher.fast_field_values("n", addresses) if addresses else ():
            iri = table.iri(n)
            if iri not in names:
                names[iri] = table.name(n)
            out.append(iri)
        return out

    def _iri(self, address) -> str:
        """A hit's node IRI, remembered by address: loading the stored document (its whole text) for every hit
        is most of the cost of a deep search, and the index never changes under an open searcher."""
        key = (address.segment_ord, address.doc)
        iri = self._iris.get(key)
        if iri is None:
            stored = self.searcher.doc(address)
            iri = self._iris[key] = stored["iri"][0]
            self.names[iri] = stored.get_first("name") or ""
        return iri

    def search_names(self, text: str, k: int = 5, types: Sequence[str] | None = None) -> list[tuple[str, float]]:
        """BM25 over node names only (entity linking)."""
        source = plain_query(text)
        if not source:
            return []
        query, _errors = self.index.parse_query_lenient(source, ["name"])
        return self._named(self.searcher.search(self._restricted(query, types), limit=k, count=False).hits)

    def document(self, iri: str) -> dict[str, object] | None:
        """The stored fields of one node (name, types, body), or None."""
        q = self._tantivy.Query.term_query(self.index.schema, "iri", iri)
        hits = self.searcher.search(q, limit=1, count=False).hits
        if not hits:
            return None
        doc = self.searcher.doc(hits[0][1])
        return {
            "iri": doc["iri"][0],
            "identifier": (doc.get_first("identifier") or ""),
            "name": doc.get_first("name") or "",
            "types": list(doc["types"]) if "types" in doc.to_dict() else [],
            "text": doc.get_first("body") or "",
        }


class TextPool:
    """BM25 over a list of short texts, in memory (question answering's evidence and table rows); a search gives (position, score) pairs, best first."""

    def __init__(self, texts: Sequence[str]) -> None:
        import tantivy

        builder = tantivy.SchemaBuilder()
        builder.add_integer_field("n", stored=True)
        builder.add_text_field("text", stored=False, tokenizer_name="en_stem")
        self.index = tantivy.Index(builder.build())
        writer = self.index.writer(heap_size=15_000_000, num_threads=1)
        for n, text in enumerate(texts):
            writer.add_document(tantivy.Document(n=n, text=text))
        writer.commit()
        writer.wait_merging_threads()
        self.index.reload()
        self.searcher = self.index.searcher()
        self.size = len(texts)

    def search(self, query: str, k: int) -> list[tuple[int, float]]:
        source = plain_query(query)
        if not source or k <= 0 or not self.size:
            return []
        parsed, _errors = self.index.parse_query_lenient(source, ["text"])
        hits = self.searcher.search(parsed, limit=min(k, self.size), count=False).hits
        return [(int(self.searcher.doc(a)["n"][0]), float(s)) for s, a in hits]

    def scores(self, query: str) -> list[float]:
        """A BM25 score for every text (0 where no query word occurs)."""
        out = [0.0] * self.size
        for n, score in self.search(query, self.size):
            out[n] = score
        return out
