"""``kqe-rdf demo``: what kqe-rdf does, on the embedded biomedical KB, each answer with its provenance.

In order: a phenotype list answered by the structural method (``4step-offline``:
the triplets it read, the SPARQL they compile to, why the first answers were
chosen); a SPARQL query with a search inside it; a KAR expansion with the KG
facts it came from; a hybrid search (BM25 + dense, fused by reciprocal rank).

The first run builds the KB (about two and a half minutes on two cores, with a progress line
per stage). Dense vectors for all 12,000 diseases take minutes, so
unless the KB already has them the hybrid section embeds only the candidates it
ranks (the BM25 top :data:`DENSE_CANDIDATES`), in a background thread while
sections 2 and 3 run, and says so.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence

import numpy as np

from .kb.build import build_kb
from .methods.fourstep.explanations import names_in, summary
from .kb.knowledge_base import KnowledgeBase
from .methods.retrieval import BM25, Batch, RRFusion, Stage, ranking
from .methods.registry import pipeline

PHENOTYPES = ("A child presents with seizures, microcephaly, global developmental delay and hypotonia. "
              "Which disease explains this?")
#: The same phenotypes as a user types them, a bare list: no word names the relation, the graph does.
BARE_LIST = "seizures, microcephaly, global developmental delay and hypotonia"
SEARCH_IN_SPARQL = """\
# Diseases a BM25 search finds for the words, that are inherited autosomal recessively,
# with how many phenotypes HPO annotates them with.
SELECT ?disease ?name ?score (COUNT(?phenotype) AS ?phenotypes) WHERE {
  SERVICE <urn:kqe:search> {
    ?disease kqe:query "progressive muscle weakness" ; kqe:type bio:Disease ; kqe:k 50 ; kqe:score ?score .
  }
  ?disease bio:hasInheritance/rdfs:label "Autosomal recessive inheritance" ;
           rdfs:label ?name ;
           bio:hasPhenotype ?phenotype .
} GROUP BY ?disease ?name ?score ORDER BY DESC(?score) LIMIT 5"""
EXPANSION = ("genes associated with hypertrophic cardiomyopathy", ["Gene"])
HYBRID = ("daytime sleep attacks and sudden muscle weakness triggered by laughter", ["Disease"])
#: Documents the hybrid section embeds when the KB has no dense index: the BM25 top this many.
DENSE_CANDIDATES = 100
SHOWN = 5


class CandidateDense(Stage):
    """Dense search over a few embedded documents (cosine to the query), for a KB without a dense index."""

    def __init__(self, kb, iris: Sequence[str], vectors: np.ndarray, k: int) -> None:
        self.kb, self.iris, self.vectors, self.k = kb, list(iris), vectors, k

    def transform(self, batch: Batch) -> Batch:
        out = {}
        for q in batch.queries:
            scores = self.vectors @ self.kb.embed_query(q.text)
            out[q.qid] = ranking(q.qid, list(zip(self.iris, scores.tolist())))[: self.k]
        return Batch(batch.queries, out)

    def __repr__(self) -> str:
        return f"Dense(over {len(self.iris)} candidates)"


class Demo:
    def __init__(self, settings, console, progress, started: float | None = None) -> None:
        self.kb_path, self.settings, self.console, self.progress = settings.kb, settings, console, progress
        self.started = time.perf_counter() if started is None else started

    def seconds(self) -> float:
        return time.perf_counter() - self.started

    def heading(self, number: int, title: str) -> None:
        self.console.rule(f"[bold]{number}. {title}[/]", align="left")

    def run(self) -> None:
        from .kb.importers import get_importer

        if not (self.kb_path / "manifest.json").is_file():
            self.console.print(f"no KB at {self.kb_path}: building the biomedical KB from the installed HPO files "
                               "(import, store, documents, BM25, hierarchy closures, the phenotypes' names "
                               "encoded; about two and a half minutes on two cores) …")
            manifest = build_kb(get_importer("bio")(), self.kb_path, self.settings, self.progress)
            c = manifest["counts"]
            self.console.print(f"built: {c['nodes']:,} nodes, {c['edges']:,} edges, {c['triples']:,} triples "
                               f"in {self.seconds():.0f} s")
        kb = KnowledgeBase.open(self.kb_path, self.settings)
        self.name = names_in(kb)
        self.structural(kb)
        embedding = threading.Thread(target=self.embed_candidates, args=(kb,), daemon=True)
        if not kb.has_embeddings:
            embedding.start()  # the hybrid section's vectors, while sections 2 and 3 run
        self.search_in_sparql(kb)
        self.expansion(kb)
        if embedding.is_alive():
            self.console.print("(waiting for the hybrid section's vectors)")
            embedding.join()
        self.hybrid(kb)
        self.console.rule()
        self.console.print(f"demo done in {self.seconds():.0f} s. Next: `kqe-rdf serve` and open "
                           "http://127.0.0.1:7878/ for the web page (a result's provenance drawn as a graph), "
                           "`kqe-rdf search TEXT --method 4step-offline --explain`, `kqe-rdf eval ... --report`.")

    def results(self, kb, hits, extra=None) -> None:
        from rich.table import Table

        table = Table(title_justify="left", show_edge=False)
        for column in ("#", "name", "id", "score", *(extra or {})):
            table.add_column(column, justify="right" if column in ("#", "score") else "left")
        for hit in hits[:SHOWN]:
            doc = kb.document(hit.iri)
            more = [values.get(hit.iri, "") for values in (extra or {}).values()]
            table.add_row(str(hit.rank), doc.name, doc.identifier, f"{hit.score:.3f}", *more)
        self.console.print(table)

    def structural(self, kb) -> None:
        self.heading(1, "A phenotype list, answered by the structural method (4step-offline)")
        self.console.print(f"request: {PHENOTYPES}", highlight=False)
        batch = pipeline("4step-offline", kb, self.settings, 10, ["Disease"]).run(PHENOTYPES, names=False)
        hits = batch.ranked("q")
        why = summary(batch.explain.get("q"), self.name)
        # The first `candidates` hits satisfy the triplets' paths; the rest topped the list up from BM25.
        self.results(kb, hits, {"how": {h.iri: "paths" if h.rank <= why["candidates"] else "top-up" for h in hits}})
        self.console.print(f"[bold]first answer {self.seconds():.1f} s after start[/]")
        self.console.print(f"[bold]triplets[/] (read {why['reader']}, answer type {why['answer_type']}): "
                           + "; ".join(why["triplets"]), highlight=False)
        for mention, found in why["linked"].items():
            self.console.print(f"  linked {mention!r} → {'; '.join(found) or 'nothing'}", highlight=False)
        self.console.print("[bold]the SPARQL they compile to[/] (the exact reading: diseases annotated with every "
                           "term or a more specific one; `kqe-rdf sparql FILE.rq` runs it):")
        self.console.print(why.get("sparql") or "(none)", highlight=False, markup=False)
        self.console.print(f"{why['candidates']:,} candidate(s), ranked in the soft mode: each term scores the "
                           "information content (IC) of its most informative common ancestor with the disease's "
                           "annotations, read from the hierarchy stored with the KB. Why the first were chosen:",
                           highlight=False)
        for answer in why.get("why", []):
            self.console.print(f"  [bold]{answer['name']}[/] because", highlight=False)
            for reason in answer["because"]:
                self.console.print(f"    {reason}", highlight=False, markup=False)
        self.console.print(f"[bold]the same as a bare list[/], as a user types it: {BARE_LIST}", highlight=False)
        bare = pipeline("4step-offline", kb, self.settings, 10, ["Disease"]).run(BARE_LIST, names=False)
        read = summary(bare.explain.get("q"), self.name)
        self.console.print("  read: " + "; ".join(read["triplets"]) + " (" + "; ".join(read.get("notes", [])[:1])
                           + ")", highlight=False, markup=False)
        self.results(kb, bare.ranked("q")[:3])

    def search_in_sparql(self, kb) -> None:
        from .service.sparql_search import SearchFunctions, execute, prepare

        self.heading(2, "SPARQL with a search inside it (SERVICE <urn:kqe:search>)")
        self.console.print(SEARCH_IN_SPARQL, highlight=False, markup=False)
        prepared = prepare(kb, SEARCH_IN_SPARQL, self.settings)
        rows = list(execute(kb, prepared, SearchFunctions(kb)))
        from rich.table import Table

        table = Table(show_edge=False)
        for column in ("name", "score", "phenotypes"):
            table.add_column(column, justify="left" if column == "name" else "right")
        for row in rows:
            table.add_row(row["name"].value, f"{float(row['score'].value):.3f}", row["phenotypes"].value)
        self.console.print(table)
        for call in prepared.searches:
            self.console.print(f"provenance: the search block ran {call['method']} for {call['query']!r} "
                               f"({call['results']} hits), was replaced by VALUES, and Oxigraph joined them with the "
                               "graph patterns (`kqe-rdf sparql FILE.rq` runs the same)", highlight=False)

    def expansion(self, kb) -> None:
        text, types = EXPANSION
        self.heading(3, "Query expansion with KG knowledge (kar-offline)")
        self.console.print(f"request: {text} (type {', '.join(types)})", highlight=False)
        batch = pipeline("kar-offline", kb, self.settings, 10, types).run(text, names=False)
        self.results(kb, batch.ranked("q"))
        exp = batch.explain["q"]["expansion"]
        for entity in exp["entities"]:
            nodes = "; ".join(f"{n['name']} ({n['link']})" for n in entity["nodes"]) or "nothing"
            self.console.print(f"entity {entity['text']!r} → {nodes}", highlight=False, markup=False)
        self.console.print("[bold]KG facts it came from[/] (the structural reading's answers, or the named nodes' "
                           "neighbours, kept by similarity to the request):")
        for n in exp["neighbours"][:8]:
            head, tail = (n["from_name"], n["name"]) if n["direction"] == "out" else (n["name"], n["from_name"])
            self.console.print(f"  ({head}) --{n['relation']}--> ({tail})  {n['score']:.3f}", highlight=False,
                               markup=False)
            if n.get("facts"):  # a node the grounded reading reached: the facts along its path
                self.console.print(f"    {n['source']}: " + "; ".join(n["facts"][:3]), highlight=False, markup=False)
        expanded = exp["expanded_query"]
        shown = expanded if len(expanded) <= 300 else expanded[:300] + f"… ({len(expanded):,} characters)"
        self.console.print(f"[bold]expanded query[/] (what BM25 searches): {shown}", highlight=False)
        if exp.get("evidence"):  # how much the expansion counted, and why
            self.console.print(f"weight {exp['weight']:g}: {exp['evidence']['reason']}", highlight=False, markup=False)

    def embed_candidates(self, kb) -> None:
        """Vectors of the hybrid request's BM25 candidates (run in a thread; the KB has no dense index)."""
        text, types = HYBRID
        started = time.perf_counter()
        try:
            candidates = [h.iri for h in BM25(kb, DENSE_CANDIDATES, types).search(text, names=False)]
            vectors = kb.encoder.encode([kb.document(i).text for i in candidates]) if candidates else \
                np.zeros((0, kb.encoder.dimension), dtype=np.float32)
            self.candidates = (candidates, vectors, time.perf_counter() - started)
        except Exception as exc:  # noqa: BLE001 - raised again in the hybrid section, on the main thread
            self.candidates = exc

    def hybrid(self, kb) -> None:
        text, types = HYBRID
        self.heading(4, "Hybrid search: BM25 + dense vectors, fused by reciprocal rank")
        self.console.print(f"request: {text}", highlight=False)
        depth = self.settings.hybrid.depth
        bm25 = BM25(kb, depth, types)
        if kb.has_embeddings:
            dense: Stage = pipeline("dense", kb, self.settings, depth, types)
        else:
            if isinstance(self.candidates, Exception):
                raise self.candidates
            candidates, vectors, seconds = self.candidates
            self.console.print(f"the KB has no dense index yet (all 12,000 diseases take minutes: `kqe-rdf kb embed "
                               f"--type Disease`, resumable), so the dense side ranks the {len(candidates)} BM25 "
                               f"candidates of this request, embedded in the background in {seconds:.0f} s",
                               highlight=False)
            dense = CandidateDense(kb, candidates, vectors, depth)
        fused = RRFusion([bm25, dense], self.settings.hybrid.rrf_k, depth) % 10
        hits = fused.search(text, names=False)
        ranks = {name: {h.iri: f"#{h.rank}" for h in stage.search(text, names=False)} for name, stage in
                 (("bm25 rank", bm25), ("dense rank", dense))}
        self.results(kb, hits, ranks)
        self.console.print("provenance: each result's score is the sum of 1/(60 + rank) over the two rankings "
                           f"({fused!r})", highlight=False, markup=False)
