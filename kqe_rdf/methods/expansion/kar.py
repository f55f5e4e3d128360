"""KAR — knowledge-aware query expansion (Xia et al. 2024) over the RDF store.

1. *Entity parsing*: the LLM lists the entities the query names, given the
   ontology's document structure; offline, the name-index mention finder of the
   offline 4StepFocus. The query itself is always a pseudo-entity.
2. *Entity document retrieval*: each entity's candidate nodes (by name, then
   BM25 and embeddings over documents, :class:`~kqe_rdf.kb.linking.Linker`) are
   ranked by how similar their *documents* are to the query; the query resolves
   to the final retriever's top node(s).
3. *Relation propagation*: the 1- or 2-hop neighbourhood of every resolved node,
   with relation and direction, from ``queries/kar_neighbours.rq`` (a LIMIT per
   node and relation keeps hubs fast; hop 2 grows from the best hop-1 neighbours).
4. *Document-based relation filtering*: neighbours are scored by their documents'
   relevance to the query, keeping the top ``kar_neighbours``: the cosine of their
   document embeddings (stored, or encoded on the fly within a per-query cap) with
   the query embedding, fused by reciprocal rank with their documents' BM25 scores
   (``kar_filter = "hybrid"``, the default; ``"dense"``: the cosine alone, as in the
   paper). The ablation ``kar-namefilter`` scores their names instead.
5. *Document triples* ``(document of v_i, relation, document of v_j)`` are
   rendered within ``expansion_context_tokens``.
6. *Expansion*: the LLM writes ``kar_expansions`` passages from the query and
   the triples; offline (``kar-offline``), each of the top ``kar_passages`` (1)
   triples gives one passage — the relation and the neighbour document's sentence
   closest to the query — so the graph still shapes the final query. The final
   retriever is ``kar_final`` (hybrid: BM25 and dense fused). ``kar-nokg`` uses only
   the entity documents (no propagation).

Offline, steps 1 and 3 read the structural reader's *grounded reading* when it has one
(:mod:`kqe_rdf.methods.answering.grounded`): the entities are the constants it linked, and the
neighbours are the nodes at the end of its relation paths (4StepFocus's ranked answers), each with the
facts along its path — not every neighbour of every name in the request. Step 4 still filters them by
their documents (the ``kar_neighbours`` most similar of twice as many), kept in the reading's order; each
passage is the neighbour's facts, one sentence per head and relation (:func:`grouped`), then its document's
sentence nearest the query, and each neighbour says where its facts came from. Without a grounded reading, the steps run as above.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Sequence

import numpy as np
from pyoxigraph import NamedNode

from ...kb import queries
from ...core.errors import KqeError
from ...kb import context
from ...kb.linking import Candidate, Linker, singular
from ...kb.ontology import negates
from ...kb.words import STOPWORDS, terms
from ..answering.grounded import Grounded, GroundedReading
from ..reading import OfflineTriplets
from ..retrieval import Batch, Query, ranking, reciprocal_rank
from .base import Expander, Expansion, final_retriever
from .prompts import ENTITIES_SCHEMA, EXPANSIONS_SCHEMA, entity_messages, kar_messages
from .text import clip, salient, share, snippet, within

VARIANTS = ("kg", "nokg", "namefilter")


@functools.lru_cache(maxsize=4)
def _encoder(settings, max_tokens: int):
    """One ONNX session per model and length for every scorer (loading one takes a quarter of a second)."""
    from ...kb.embeddings import OnnxEncoder

    return OnnxEncoder.from_settings(settings, max_tokens=max_tokens)


class NodeScorer:
    """Cosine similarity of nodes' documents (or names) to a query, with the KB's ONNX encoder.

    Documents use the KB's stored embeddings where it has them. Others are
    encoded on the fly from their first ``encode_tokens`` tokens (a fraction of
    the cost of a full document on a CPU) — at most ``encode_limit`` new ones per
    query, among those whose documents are in BM25's top ``bm25_depth`` for the
    query, best first — and cached; nodes left unencoded get no score. Names are
    short: all are scored, unless there are more than ``hub`` (a hub's
    neighbours); then the ``name_limit`` whose names share most words with the
    query (then whose documents BM25 ranks first) are, whatever the cache holds.
    """

    bm25_depth = 500

    def __init__(self, kb, encode_limit: int = 32, by: str = "document", encode_tokens: int = 128,
                 cache_size: int = 200_000, name_limit: int = 128, hub: int = 400) -> None:
        if by not in ("document", "name"):
            raise ValueError("NodeScorer scores by 'document' or 'name'")
        self.kb = kb
        self.encode_limit = encode_limit
        self.name_limit, self.hub = name_limit, hub
        self.by = by
        self.encode_tokens = encode_tokens
        self.cache_size = cache_size
        self._vectors: dict[str, np.ndarray] = {}
        self._encoder = None
        #: Documents (or names) encoded on the fly so far.
        self.encoded = 0

    @property
    def encoder(self):
        if self._encoder is None:
            self._encoder = _encoder(self.kb.encoder_settings, self.encode_tokens)
        return self._encoder

    def _stored(self, iris: Sequence[str]) -> dict[str, np.ndarray]:
        if self.by != "document" or not self.kb.has_embeddings:
            return {}
        found, matrix = self.kb.dense.vectors_of(iris)
        return dict(zip(found, matrix))

    def _encode(self, iris: list[str]) -> None:
        if not iris:
            return
        if len(self._vectors) + len(iris) > self.cache_size:
            self._vectors.clear()
        texts = [self.kb.document(i).text if self.by == "document" else self._name(i) for i in iris]
        for iri, vector in zip(iris, self.encoder.encode(texts)):
            self._vectors[iri] = vector
        self.encoded += len(iris)

    def _name(self, iri: str) -> str:
        """A node's name from the name index (reading documents for thousands of names would read them all)."""
        return self.kb.names.labels.get(iri) or self.kb.document(iri).name

    def _likeliest_names(self, query: str, iris: list[str]) -> list[str]:
        """The ``name_limit`` nodes whose names share most words with the query, then ranked first by BM25."""
        words = {singular(w) for w in terms(query)}
        rank = {iri: r for r, (iri, _) in enumerate(self.kb.text_index.search(query, self.bm25_depth))}
        shared = {iri: len(words.intersection(map(singular, terms(self._name(iri))))) for iri in iris}
        return sorted(iris, key=lambda i: (-shared[i], rank.get(i, len(rank)), i))[: self.name_limit]

    def scores(self, query: str, iris: Iterable[str]) -> dict[str, float]:
        """Scores of the nodes that could be scored (see the class docstring for those that cannot)."""
        iris = list(dict.fromkeys(iris))
        if not iris:
            return {}
        if self.by == "name" and len(iris) > self.hub:
            iris = self._likeliest_names(query, iris)
        vectors = self._stored(iris)
        missing = [i for i in iris if i not in vectors and i not in self._vectors]
        if self.by == "document" and len(missing) > self.encode_limit:
            rank = {iri: r for r, (iri, _) in enumerate(self.kb.text_index.search(query, self.bm25_depth))}
            missing = sorted((i for i in missing if i in rank), key=rank.__getitem__)[: self.encode_limit]
        self._encode(missing)
        vectors.update({i: self._vectors[i] for i in iris if i not in vectors and i in self._vectors})
        if not vectors:
            return {}
        order = list(vectors)
        sims = np.stack([vectors[i] for i in order]) @ self.kb.embed_query(query)
        return {i: float(s) for i, s in zip(order, sims)}


class FusedScorer:
    """A node document's relevance to a query by both of the product's retrievers: reciprocal rank fusion of
    its cosine (``NodeScorer``) and its BM25 score among the nodes scored. On requests the encoder reads
    poorly (a phenotype list: dense alone ranks the right disease first for 6% of cases, BM25 for 19%),
    the encoder alone would filter the best neighbours out."""

    def __init__(self, kb, documents: NodeScorer, constant: int = 60) -> None:
        self.kb = kb
        self.documents = documents
        self.constant = constant

    def scores(self, query: str, iris: Iterable[str]) -> dict[str, float]:
        iris = list(dict.fromkeys(iris))
        both = (self.documents.scores(query, iris), self.kb.text_index.scores_of(query, iris))
        return dict(reciprocal_rank([ranking(query, list(scores.items())) for scores in both], self.constant))


class Neighbourhood:
    """One hop around a node by SPARQL (``kar_neighbours.rq``): ``(relation, neighbour, direction)`` rows.

    Only relations the data stores are followed (the ontology's, with edges in
    the KB), each at most ``fanout`` rows per node; results are cached per node.
    """

    def __init__(self, kb, fanout: int = 1000, cache_size: int = 20_000) -> None:
        self.kb = kb
        self.fanout = fanout
        self.cache_size = cache_size
        counts = kb.relation_counts
        self.relations = [iri for iri, rel in kb.schema.relations.items() if not rel.virtual and counts.get(iri)]
        self.query = re.sub(r"LIMIT \d+\s*$", f"LIMIT {int(fanout)}", queries.load("kar_neighbours").rstrip())
        self._cache: dict[str, list[tuple[str, str, str]]] = {}

    def __call__(self, node: str) -> list[tuple[str, str, str]]:
        if node in self._cache:
            return self._cache[node]
        edges = []
        for relation in self.relations:
            sparql = queries.with_values(self.query, node=[NamedNode(node)], relation=[NamedNode(relation)])
            for row in self.kb.store.query(sparql, use_default_graph_as_union=True):
                edges.append((relation, row["neighbour"].value, row["direction"].value))
        if len(self._cache) >= self.cache_size:
            self._cache.clear()
        self._cache[node] = edges
        return edges


def reach(exp: Expansion, names: Iterable[str] = ()) -> tuple[float, list[str], list[str]]:
    """The share of the request's words (stop words aside) that the expansion's evidence reaches, the words and
    those reached: a word is reached when it is in the text of an entity linked from the request (not the
    request's own best hit) or of ``names`` (the KG's names the request mentions), or names a relation of a kept
    neighbour ("act" reaches "starred actors": the same first four letters, or one word the start of the other).

    >>> exp = Expansion("what does Stephen Rea act in", "kar-offline", entities=[{"text": "Stephen Rea"}],
    ...                 neighbours=[{"relation": "starred actors"}])
    >>> reach(exp)
    (0.75, ['does', 'stephen', 'rea', 'act'], ['stephen', 'rea', 'act'])
    """
    texts = [e["text"] for e in exp.entities if e.get("found_by") != "query"] + list(names)
    named = {w for text in texts for w in _REACH_WORD.findall(text.lower())}
    # Every word of a name counts, one letter or a number too ("M", "1900"); elsewhere stop words do not.
    words = list(dict.fromkeys(w for w in _REACH_WORD.findall(exp.query.lower()) if w in named or w not in STOPWORDS))
    relations = {w for n in exp.neighbours for w in terms(n.get("relation", ""))}
    reached = [w for w in words if w in named or any(_stem_match(w, r) for r in relations)]
    return (len(reached) / len(words) if words else 0.0), words, reached


_REACH_WORD = re.compile(r"[^\W_]+", re.UNICODE)


def _stem_match(a: str, b: str) -> bool:
    if len(a) >= 4 and len(b) >= 4:
        return a[:4] == b[:4]
    return a.startswith(b) or b.startswith(a)


def grouped(facts: Sequence, label) -> str:
    """Facts as sentences, one per head and relation, the tails listed once each: a passage of the expansion.

    A reading of a list of terms cites a node with one fact per term it matches ("X has phenotype Frontal
    bossing (shares Abnormal forehead morphology with Broad forehead)", eight times over); written one by one they
    fill the passage's budget with the node's name and the request's own terms, and leave out the neighbour's
    document, which is what the final retriever matches (on a sample of 200 phenopacket cases, Hit@1 22.5 before,
    28.5 after). The facts as cited stay in the neighbour's ``facts``.

    ``facts`` are :class:`~kqe_rdf.methods.answering.evidence.Evidence` with their two entities and an origin.
    """
    tails: dict[tuple[str, str], list[str]] = {}
    for e in facts:
        head, tail = e.entities[0].name, e.entities[-1].name
        names = tails.setdefault((head, label(e.origin["relation"])), [])
        if tail not in names:
            names.append(tail)
    return "; ".join(f"{head} {relation} {', '.join(names)}" for (head, relation), names in tails.items()) + "."


class KAR(Expander):
    """Knowledge-aware expansion; ``variant`` "kg" (KAR), "nokg" (w/o KG) or "namefilter" (w/o DRF)."""

    def __init__(self, kb, settings, llm=None, variant: str = "kg", types: Sequence[str] | None = None) -> None:
        if variant not in VARIANTS:
            raise ValueError(f"KAR variant must be one of {VARIANTS}")
        super().__init__(kb, settings, llm)
        self.variant = variant
        self.name = "kar" + {"kg": "", "nokg": "-nokg", "namefilter": "-namefilter"}[variant] + (
            "" if llm else "-offline")
        self.linker = Linker(kb)
        self.documents = NodeScorer(kb, settings.kar.encode, "document", settings.kar.encode_tokens)
        self.filter = (NodeScorer(kb, settings.kar.encode, "name", settings.kar.encode_tokens,
                                  name_limit=settings.kar.encode_names, hub=settings.kar.name_hub)
                       if variant == "namefilter" else self.documents if settings.kar.filter == "dense"
                       else FusedScorer(kb, self.documents, settings.hybrid.rrf_k))
        self.neighbourhood = Neighbourhood(kb, settings.kar.fanout)
        self.query_retriever = final_retriever(kb, settings, max(settings.kar.query_nodes, 1), types)
        #: Offline, the structural reader's grounded reading gives the entities and the facts (module docstring).
        depth = 2 * settings.kar.neighbours
        #: The reader's mention finder (as 4StepFocus and ``ask`` link the query).
        self.reader = OfflineTriplets(kb, self.linker)
        self.reading = None if llm is not None or not settings.kar.grounded else \
            GroundedReading(kb, self.linker, self.reader, depth, max_answers=depth)
        self._read: tuple[str, Grounded | None] | None = None

    @property
    def weighs(self) -> bool:
        """Offline, the expansion is weighed by how much of the request its KG evidence reaches (:meth:`weigh`)."""
        return self.llm is None and self.settings.kar.weight_full > 0

    def weigh(self, exp: Expansion) -> None:
        """Weight the expansion by the share of the request's words that its evidence reaches (:func:`reach`):
        the KG's names the request mentions and the relations read from them.

        The KG adds to a request that names an entity and asks for its relation ("what does Stephen Rea act in":
        the linked name and the relation read cover the request): its passage holds the answer, and BM25 on the
        request alone does not find it. It adds little to a long request in exact words (a SciFact claim) that
        one name or none of the KG's touches: there the passage mostly reorders what BM25 already ranks. The
        share over ``kar_weight_full``, at most 1, is the weight; at 0 the request is searched as it is.
        """
        # The grounded reading cites the constants of the path it chose; the request may name more of the KG
        # (a phenotype list names every term, the reading may follow one): every mention counts.
        constants, conditions = self.reader.mentions(exp.query)
        share, words, reached = reach(exp, [m.text for m in constants + conditions])
        full = self.settings.kar.weight_full
        exp.weight = round(min(1.0, share / full), 4)
        if exp.weight == 0:
            reason = ("no word of the request is a linked entity's name or a relation read from it: the KG adds "
                      "nothing the request says, so it is searched as it is")
        else:
            reason = (f"{len(reached)} of the request's {len(words)} words are linked entities' names or the "
                      f"relations read from them (full weight from {full:.0%})")
        exp.evidence = {"reason": reason, "reached": " ".join(reached), **exp.evidence}
        exp.finish(self.repeat, self.counted)

    # 1. Entity parsing.

    def entities(self, exp: Expansion) -> list[tuple[str, list[Candidate], str]]:
        """``(text, candidate nodes, how found)`` per entity the query names."""
        found = self._llm_entities(exp) if self.llm is not None else None
        grounded = self.grounded(exp.query) if found is None else None
        if grounded is not None:
            found = [(text, [Candidate(c["iri"], c["name"], c["score"], c["how"]) for c in linked], "grounded reading")
                     for text, linked in grounded.path["linked"].items() if linked]
        if not found:
            constants, conditions = self.reader.mentions(exp.query)
            found = [(m.text, list(m.candidates), "mention") for m in constants + conditions if not m.negated]
        return found[: self.settings.kar.max_entities]

    def grounded(self, query: str) -> Grounded | None:
        """The structural reader's grounded reading of ``query`` (offline only), its first answers cited; read
        once per query."""
        if self.reading is None:
            return None
        if self._read is None or self._read[0] != query:
            self._read = (query, self.reading(query, cite=2 * self.settings.kar.neighbours))
        return self._read[1]

    def _llm_entities(self, exp: Expansion):
        value = self.ask_json(exp, "entity parsing", entity_messages(self.kb.schema.describe_for_prompt(), exp.query),
                              ENTITIES_SCHEMA)
        if value is None:
            exp.notes.append("entities from the offline mention finder instead")
            return None
        out = []
        for item in value["entities"]:
            name = " ".join(str(item.get("name") or "").split())[:200]
            if not name:
                continue
            types = None
            if item.get("type"):
                try:
                    types = self.kb.resolve_types([str(item["type"])])
                except KqeError:  # a type the ontology does not have: link without a type
                    types = None
            candidates = self.linker.link(name, types) or (self.linker.link(name) if types else [])
            if candidates:
                out.append((name, candidates, "llm"))
        if not out:
            exp.notes.append("the LLM named no entity of the KB; entities from the offline mention finder instead")
            return None
        return out

    # 2. Entity document retrieval.

    def resolve(self, exp: Expansion) -> list[str]:
        """Resolved node IRIs (entities first, then the query's own), recorded in ``exp.entities``."""
        nodes: list[str] = []
        # The query's own search (a hybrid's BM25) starts now, beside the entity parsing's reading.
        own = self.query_retriever.later(Batch([Query("q", exp.query)])) if self.settings.kar.query_nodes else None
        for text, candidates, how in self.entities(exp):
            scores = self.documents.scores(exp.query, [c.iri for c in candidates])
            ranked = sorted(candidates, key=lambda c: (-scores.get(c.iri, -1.0), -c.score, c.iri))
            chosen = ranked[: self.settings.kar.entity_nodes]
            exp.entities.append({"text": text, "found_by": how, "nodes": [
                {"iri": c.iri, "name": c.name, "link": c.how, "score": round(scores.get(c.iri, c.score), 4)}
                for c in chosen]})
            nodes += [c.iri for c in chosen if c.iri not in nodes]
        if own is not None:
            hits = own().ranked("q")[: self.settings.kar.query_nodes]
            exp.entities.append({"text": exp.query, "found_by": "query", "nodes": [
                {"iri": h.iri, "name": self.kb.document(h.iri).name, "link": "retrieval", "score": round(h.score, 4)}
                for h in hits]})
            nodes += [h.iri for h in hits if h.iri not in nodes]
        return nodes

    # 3-4. Relation propagation and filtering.

    def propagate(self, query: str, nodes: Sequence[str]) -> list[dict]:
        """The top ``kar_neighbours`` neighbours (within ``kar_hops``) of ``nodes``, best first; offline, those
        the grounded reading reaches (:meth:`reached`) when it reaches any."""
        keep = self.settings.kar.neighbours
        # A fact that something is absent contradicts a request that names it as present ("... with seizures"
        # is no place for "X lacks phenotype Seizure"): such relations are followed only when the request negates.
        schema = self.kb.schema
        skip = set() if context.negates(query) else {iri for iri in schema.relations
                                                       if negates(schema.label(iri))}
        grounded = self.grounded(query)
        reached = self.reached(query, grounded, skip) if grounded is not None else []
        if reached:
            return reached
        seen = set(nodes)
        kept: list[dict] = []
        frontier = list(nodes)
        for hop in range(1, self.settings.kar.hops + 1):
            found: dict[str, dict] = {}
            for node in frontier:
                for relation, neighbour, direction in self.neighbourhood(node):
                    if relation not in skip and neighbour not in seen and neighbour not in found:
                        found[neighbour] = {"iri": neighbour, "relation_iri": relation, "direction": direction,
                                            "from": node, "hop": hop}
            scores = self.filter.scores(query, found)
            for iri, edge in found.items():
                if iri in scores:
                    edge["score"] = round(scores[iri], 4)
            scored = sorted((e for e in found.values() if "score" in e), key=lambda e: (-e["score"], e["iri"]))
            seen.update(found)
            kept = sorted(kept + scored[:keep], key=lambda e: (-e["score"], e["iri"]))[:keep]
            frontier = [e["iri"] for e in scored[:keep]]
        for edge in kept:
            edge["name"] = self.kb.document(edge["iri"]).name
            edge["from_name"] = self.kb.document(edge["from"]).name
            edge["relation"] = schema.label(edge["relation_iri"])
        return kept

    def reached(self, query: str, grounded: Grounded, skip: set[str]) -> list[dict]:
        """The reading's answers as neighbours: the ``kar_neighbours`` whose documents are most similar to the
        query (of twice as many), in the reading's order, each with the facts along its path (none whose
        relation ``skip`` holds)."""
        answers = [c for c in grounded.reading.candidates if grounded.cited.get(c.iris[0])]
        scores = self.filter.scores(query, [c.iris[0] for c in answers])
        kept = sorted(answers, key=lambda c: (-scores.get(c.iris[0], -1.0), c.name))[: self.settings.kar.neighbours]
        out = []
        for rank, candidate in enumerate(answers):
            iri = candidate.iris[0]
            facts = [e for e in grounded.cited[iri] if e.origin["relation"] not in skip]
            if candidate not in kept or not facts:
                continue
            last = facts[-1].origin
            other = last["head"] if last["tail"] == iri else last["tail"]
            out.append({"iri": iri, "relation_iri": last["relation"], "direction": "out" if last["head"] == other
                        else "in", "from": other, "hop": len(grounded.path["relations"]),
                        "score": round(scores.get(iri, 0.0), 4), "name": candidate.name,
                        "from_name": self.kb.document(other).name, "relation": self.kb.schema.label(last["relation"]),
                        "facts": [e.text for e in facts], "fact": grouped(facts, self.kb.schema.label),
                        "source": f"grounded reading: answer {rank + 1} of 4step-offline, path "
                                  f"{' / '.join(grounded.path['relations'])}"})
        return out

    # 5. Document triples.

    def triples(self, neighbours: list[dict], budget: int) -> list[str]:
        """``(head document) --relation--> (tail document)`` lines, best first, within ``budget`` tokens."""
        if not neighbours:
            return []
        per_doc = share(budget, 2 * len(neighbours), 4)
        shown = set()

        def doc(iri: str) -> str:  # a document shown once; later triples name it
            text = self.kb.document(iri).name if iri in shown else snippet(self.kb.document(iri), per_doc)
            shown.add(iri)
            return text

        def line(edge: dict) -> str:
            head, tail = (edge["from"], edge["iri"]) if edge["direction"] == "out" else (edge["iri"], edge["from"])
            return f"({doc(head)}) --{edge['relation']}--> ({doc(tail)})"

        return within(map(line, neighbours), budget)

    def entity_documents(self, nodes: Sequence[str], budget: int) -> list[str]:
        """The resolved nodes' documents (KAR without KG), within ``budget`` tokens."""
        if not nodes:
            return []
        per_doc = share(budget, len(nodes))
        return within((snippet(self.kb.document(iri), per_doc) for iri in nodes), budget)

    # 6. Expansion.

    def build(self, exp: Expansion) -> None:
        s = self.settings
        nodes = self.resolve(exp)
        if self.variant == "nokg":
            knowledge = self.entity_documents(nodes, s.expansion.context_tokens)
        else:
            exp.neighbours = self.propagate(exp.query, nodes)
            knowledge = self.triples(exp.neighbours, s.expansion.context_tokens)
        text = self.set_context(exp, knowledge)
        if not nodes:
            exp.notes.append("no entity of the KB found for the query")
        if self.llm is not None:
            value = self.ask_json(exp, "expansion", kar_messages(exp.query, text, s.kar.expansions),
                                  EXPANSIONS_SCHEMA)
            if value is None:
                exp.notes.append("the query is searched unexpanded")
                return
            per = max(s.expansion.max_tokens // s.kar.expansions, 16)
            exp.expansions = [clip(str(e), per) for e in value["expansions"] if str(e).strip()][: s.kar.expansions]
            if not exp.expansions:
                exp.notes.append("expansion: the LLM wrote no passage; the query is searched unexpanded")
            return
        exp.expansions = self._offline(exp, nodes)

    def _offline(self, exp: Expansion, nodes: Sequence[str]) -> list[str]:
        """One passage per top triple (or entity document): the fact, then the sentence nearest the query."""
        s = self.settings
        per = max(s.expansion.context_tokens // s.kar.passages, 16)
        out = []
        if self.variant == "nokg":
            for iri in nodes[: s.kar.passages]:
                doc = self.kb.document(iri)
                out.append(clip(f"{doc.name}. {salient(doc.text, exp.query)}", per))
            return out
        for edge in exp.neighbours[: s.kar.passages]:
            head, tail = (edge["from_name"], edge["name"]) if edge["direction"] == "out" else (
                edge["name"], edge["from_name"])
            fact = edge.get("fact") or f"{head} {edge['relation']} {tail}."
            detail = salient(self.kb.document(edge["iri"]).text, exp.query, avoid=edge["from_name"])
            out.append(clip(f"{fact} {detail}", per))
        return out
