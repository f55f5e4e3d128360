"""LKQE — knowledge-graph-guided expansion for text collections that come without a KG.

With an LLM (``lkqe``): BM25 top ``lkqe_docs`` passages → key sentences → triples
extracted from them → the graph completed for the query → a passage written
from the triples. The final query is ``lkqe_query_repeat`` × the query plus the
passage, capped at ``lkqe_max_ratio`` × the query's words, searched with BM25.
The triples are stored per query as a named graph in ``<kb>/expansions/`` (a
writable Oxigraph store beside the read-only main one), each with the passage
it came from, so they can be read back with SPARQL (``queries/lkqe_triples.rq``)
and reused: a query whose graph exists asks the LLM only for the expansion.

Offline (``lkqe-offline``) there are no triples: the key sentences are the
passages' sentences most similar to the query by embedding, and they are the
expansion (a sentence-level pseudo-relevance feedback, named for what it is).
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
from pyoxigraph import Literal, NamedNode, Store

from ...kb import queries
from ..retrieval import BM25
from .base import Expander, Expansion
from .prompts import (SENTENCES_SCHEMA, TRIPLES_SCHEMA, lkqe_complete_messages, lkqe_expand_messages,
                      lkqe_sentence_messages, lkqe_triple_messages)
from .text import body_sentences, clip, in_clauses, share

log = logging.getLogger(__name__)

XSD_DATETIME = NamedNode("http://www.w3.org/2001/XMLSchema#dateTime")
XSD_INTEGER = NamedNode("http://www.w3.org/2001/XMLSchema#integer")


class ExpansionStore:
    """The KB's writable store of per-query expansion graphs, ``<kb>/expansions/``.

    Created on first use by building it aside and renaming it into place, so a
    reader never sees half a store. If it cannot be opened (another process holds
    it, a read-only disk) expansions go on without storing, and say so.
    """

    def __init__(self, kb_path: Path) -> None:
        self.path = Path(kb_path) / "expansions"
        self._store: Store | None = None
        self.error: str | None = None

    @property
    def store(self) -> Store | None:
        if self._store is None and self.error is None:
            try:
                if not self.path.exists():
                    tmp = self.path.with_name(f".expansions.{os.getpid()}.tmp")
                    shutil.rmtree(tmp, ignore_errors=True)
                    Store(str(tmp)).flush()
                    try:
                        os.rename(tmp, self.path)
                    except OSError:  # another process created it first: use theirs
                        shutil.rmtree(tmp, ignore_errors=True)
                self._store = Store(str(self.path))
            except OSError as exc:
                self.error = f"the expansion store {self.path} cannot be opened ({exc}); triples are not stored"
        return self._store

    @staticmethod
    def graph_iri(query: str, model: str) -> str:
        digest = hashlib.sha256(f"{model}\n{query}".encode()).hexdigest()[:24]
        return f"urn:kqe:lkqe:{digest}"

    def save(self, graph: str, query: str, model: str, triples: list[dict]) -> None:
        store = self.store
        if store is None:
            return
        try:
            self._save(store, graph, query, model, triples)
        except (OSError, SyntaxError, ValueError) as exc:  # storing is a by-product: the expansion goes on
            self.error = f"the triples were not stored in {self.path} ({exc})"

    @staticmethod
    def _save(store: Store, graph: str, query: str, model: str, triples: list[dict]) -> None:
        g = NamedNode(graph)
        if g in store.named_graphs():
            store.remove_graph(g)
        now = Literal(datetime.now(timezone.utc).isoformat(timespec="seconds"), datatype=XSD_DATETIME)
        rows = [[NamedNode(f"{graph}/t{i}"), Literal(str(i), datatype=XSD_INTEGER), Literal(t["head"]),
                 Literal(t["relation"]), Literal(t["tail"]), Literal(t["origin"]),
                 NamedNode(t["passage"]) if t.get("passage") else None] for i, t in enumerate(triples)]
        update = queries.with_rows(queries.load_update("lkqe_insert"), ["graph", "query", "method", "model", "time"],
                           [[g, Literal(query), Literal("lkqe"), Literal(model), now]])
        update = queries.with_rows(update, ["triple", "position", "head", "relation", "tail", "origin", "passage"], rows)
        store.update(update)
        store.flush()

    def load(self, graph: str) -> list[dict]:
        store = self.store
        if store is None or NamedNode(graph) not in store.named_graphs():
            return []
        sparql = queries.with_values(queries.load("lkqe_triples"), graph=[NamedNode(graph)])
        out = []
        for row in store.query(sparql):
            triple = {k: row[k].value for k in ("head", "relation", "tail", "origin")}
            if row["passage"] is not None:
                triple["passage"] = row["passage"].value
            out.append(triple)
        return out


class LKQE(Expander):
    """KG-guided expansion for passages (see the module docstring); offline when ``llm`` is None."""

    def __init__(self, kb, settings, llm=None, types: Sequence[str] | None = None,
                 store: ExpansionStore | None = None) -> None:
        super().__init__(kb, settings, llm)
        self.name = "lkqe" if llm else "lkqe-offline"
        self.repeat = settings.lkqe.query_repeat
        self.counted = True  # "3 × query + expansion" as the paper's Lucene query counts it
        self.first = BM25(kb, settings.lkqe.docs, types)
        if llm is None:
            self.judge = BM25(kb, settings.expansion.weight_depth, types)
        self.store = store or (ExpansionStore(kb.path) if llm is not None and settings.lkqe.store else None)

    def cap(self, query: str, text: str) -> str:
        """The expansion cut to ``lkqe_max_ratio`` times the query's words."""
        words = text.split()
        limit = self.settings.lkqe.max_ratio * max(len(query.split()), 1)
        return " ".join(words[:limit])

    def read(self, exp: Expansion) -> list[str]:
        hits = self.first.search(exp.query, names=False)
        exp.passages = [h.iri for h in hits]
        texts = [self.kb.document(h.iri).text for h in hits]
        if self.llm is None:  # offline, every sentence of a passage may be a key sentence
            return texts
        per_doc = share(self.settings.expansion.context_tokens, len(hits))
        return [clip(t, per_doc) for t in texts]

    def build(self, exp: Expansion) -> None:
        passages = self.read(exp)
        if self.llm is None:
            scored = self.key_sentences(exp.query, passages)
            key = [sentence for sentence, _similarity in scored]
            self.set_context(exp, key)
            limit = self.settings.lkqe.max_ratio * max(len(exp.query.split()), 1)
            exp.expansions = [in_clauses(key, limit)] if key else []
            if scored:
                exp.evidence = {"key_sentences": len(scored), "best_cosine": round(scored[0][1], 4)}
            return
        graph = ExpansionStore.graph_iri(exp.query, self.llm.model) if self.store is not None else None
        triples = self.store.load(graph) if graph else []
        if triples:
            exp.notes.append(f"triples reused from the stored graph {graph}")
        else:
            triples = self.extract(exp, passages)
            if triples is None:
                exp.notes.append("the query is searched unexpanded")
                return
            if graph:
                self.store.save(graph, exp.query, self.llm.model, triples)
        if graph and self.store.error:
            exp.notes.append(self.store.error)
        elif graph:
            exp.graph = graph
        exp.triples = triples
        self.set_context(exp, [f"{t['head']} | {t['relation']} | {t['tail']}" for t in triples])
        text = self.ask_text(exp, "expansion", lkqe_expand_messages(exp.query, triples))
        exp.expansions = [self.cap(exp.query, text)] if text else []
        if not text:
            exp.notes.append("the query is searched unexpanded")

    def extract(self, exp: Expansion, passages: list[str]) -> list[dict] | None:
        """Key sentences → triples → completion; None when a step failed."""
        if not passages:
            exp.notes.append("BM25 found no passage to read")
            return None
        value = self.ask_json(exp, "key sentences", lkqe_sentence_messages(exp.query, passages), SENTENCES_SCHEMA)
        if value is None:
            return None
        key = [(int(s["passage"]), " ".join(str(s["sentence"]).split())) for s in value["sentences"]
               if isinstance(s.get("passage"), int) and 1 <= s["passage"] <= len(passages) and str(s["sentence"]).strip()]
        if not key:
            exp.notes.append("key sentences: the LLM named no sentence of a shown passage")
            return None
        value = self.ask_json(exp, "triple extraction", lkqe_triple_messages(exp.query, key), TRIPLES_SCHEMA)
        if value is None:
            return None
        triples = [self._triple(t, "extracted", exp.passages) for t in value["triples"]]
        triples = [t for t in triples if t]
        if not triples:
            exp.notes.append("triple extraction: no complete triple")
            return None
        value = self.ask_json(exp, "graph completion", lkqe_complete_messages(exp.query, triples), TRIPLES_SCHEMA)
        if value is not None:  # completion adds knowledge; without it the extracted triples still stand
            triples += [t for t in (self._triple(t, "completed", []) for t in value["triples"]) if t]
        return triples

    @staticmethod
    def _triple(item: dict, origin: str, passages: list[str]) -> dict | None:
        parts = {k: " ".join(str(item.get(k) or "").split())[:300] for k in ("head", "relation", "tail")}
        if not all(parts.values()):
            return None
        triple = {**parts, "origin": origin}
        number = item.get("passage")
        if isinstance(number, int) and 1 <= number <= len(passages):
            triple["passage"] = passages[number - 1]
        return triple

    def key_sentences(self, query: str, passages: list[str]) -> list[tuple[str, float]]:
        """The ``lkqe_sentences`` sentences of the passages nearest the query by embedding, best first, each with
        its cosine to the query."""
        labels = [f.label for f in self.kb.schema.fields.values()]
        pool = list(dict.fromkeys(s for p in passages for s in body_sentences(p, labels) if len(s.split()) >= 4))
        if not pool:
            return []
        sims = self.kb.encoder.encode(pool) @ self.kb.embed_query(query)
        order = np.argsort(-sims, kind="stable")[: self.settings.lkqe.sentences]
        return [(pool[i], float(sims[i])) for i in order]
