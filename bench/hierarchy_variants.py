"""Hierarchy matching variants on the phenopacket dev split, from the matrices stored with the bio KB.

This isolates the scoring (kqe_rdf.hierarchy.HierarchyMatch) from reading and linking: each case's observed
and excluded HPO ids are resolved to nodes directly (the product reads them from the question's text, see
``kqe-rdf eval phenopackets ... -m 4step-offline`` for that end-to-end number). It answers "which scoring
rule?" for the settings fourstep_ic_power, fourstep_text_weight and fourstep_negated_weight, and shows how
much rank ties decide: every variant is scored with ties broken by IRI (what a sort gives) and at random.

    python bench/hierarchy_variants.py --kb data/kb/bio3
"""

from __future__ import annotations

import argparse
import gzip
import json
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
HAS_PHENOTYPE = "https://w3id.org/kqe/bio#hasPhenotype"
DISEASE = "https://w3id.org/kqe/bio#Disease"


def main() -> None:
    from kqe_rdf.kb import KnowledgeBase
    from kqe_rdf.querysets import _label, phenopacket_question

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--kb", type=Path, default=ROOT / "data" / "kb" / "bio")
    parser.add_argument("--cases", type=Path, default=ROOT.parent / "shared" / "data" / "phenopackets" / "dev.jsonl.gz")
    parser.add_argument("--only", default="", help="run only the variants whose name contains this text")
    args = parser.parse_args()
    kb = KnowledgeBase.open(args.kb)
    cases = [json.loads(line) for line in gzip.open(args.cases, "rt") if line.strip()]

    def nodes(pairs) -> list[str]:
        found = kb.resolve_identifiers([p[0] for p in pairs or []])
        return [found[p[0]][0] for p in pairs or [] if found.get(p[0])]

    prepared = []
    for case in cases:
        observed = nodes(case.get("observed"))
        if not case.get("observed"):
            continue
        gold = set(nodes(case.get("diseases")))
        text = phenopacket_question(case.get("sex"), [_label(t, "") for t in case["observed"]],
                                    [_label(t, "") for t in case.get("excluded") or []])
        prepared.append((observed, nodes(case.get("excluded")), gold, text))
    print(f"{len(prepared)} cases from {args.cases}", flush=True)

    matchers = {p: kb.hierarchies.matcher(HAS_PHENOTYPE, p) for p in (1.0, 3.0)}
    order = matchers[1.0].nodes
    index = {n: i for i, n in enumerate(order)}
    bm25_cache: dict[int, np.ndarray] = {}

    def bm25(i: int, text: str) -> np.ndarray:
        if i not in bm25_cache:
            v = np.zeros(len(order))
            hits = kb.text_index.search(text, 500, [DISEASE])
            best = max((s for _, s in hits), default=0.0) or 1.0
            for iri, s in hits:
                if iri in index:
                    v[index[iri]] = s / best
            bm25_cache[i] = v
        return bm25_cache[i]

    m3 = matchers[3.0]
    ancestors = [set(m3._anc_idx[m3._anc_ptr[t]:m3._anc_ptr[t + 1]].tolist()) for t in range(len(m3.terms))]

    def most_specific(observed: list[str]) -> list[str]:
        """Observed terms without those that are ancestors of another observed term."""
        cols = {m3.term_index[t] for t in observed if t in m3.term_index}
        return [t for t in observed if t not in m3.term_index
                or not any(m3.term_index[t] in ancestors[u] for u in cols if u != m3.term_index[t])]

    direct_rows = np.repeat(np.arange(len(order)), np.diff(m3._direct_ptr))
    annotation_counts = np.maximum(np.diff(m3._direct_ptr), 1)

    def reverse(observed: list[str]) -> np.ndarray:
        """Per disease: the mean over its own annotations of their best IC(MICA) with an observed term."""
        reached = np.zeros(len(m3.terms), dtype=bool)
        for t in observed:
            if t in m3.term_index:
                reached[list(ancestors[m3.term_index[t]])] = True
        # Per term: the largest IC among its ancestors that are also an observed term's ancestors.
        shared = np.where(reached[m3._anc_idx], m3.ic[m3._anc_idx], 0.0)
        best = np.maximum.reduceat(shared, m3._anc_ptr[:-1])
        total = np.zeros(len(order))
        np.add.at(total, direct_rows, best[m3._direct_idx])
        return total / annotation_counts

    genes = {r["d"].value for r in kb.store.query(
        "SELECT DISTINCT ?d WHERE { ?g <https://w3id.org/kqe/bio#associatedWith> ?d }", use_default_graph_as_union=True)}
    has_gene = np.array([n in genes for n in order], dtype=float)

    def evaluate(name: str, power: float, text_weight: float, negated_weight: float, terms=None, extra=None) -> None:
        if args.only not in name:
            return
        rng = np.random.default_rng(0)
        for ties in ("IRI", "random"):
            hit1 = hit5 = rr = 0.0
            for i, (observed, excluded, gold, text) in enumerate(prepared):
                m = matchers[power]
                s = m.score(terms(observed) if terms else observed)
                if extra is not None:
                    s = s + extra(observed)
                if negated_weight and excluded:
                    s = s - negated_weight * m.score(excluded)
                if text_weight:
                    s = s + text_weight * bm25(i, text)
                noise = rng.random(len(s)) * 1e-9 if ties == "random" else -np.arange(len(s)) * 1e-12
                ranking = np.argsort(-(s + noise), kind="stable")
                ranks = [r for r, k in enumerate(ranking[:1000]) if order[k] in gold]
                if ranks:
                    hit1 += ranks[0] == 0
                    hit5 += ranks[0] < 5
                    rr += 1 / (ranks[0] + 1)
            n = len(prepared)
            print(f"| {name} | {ties} | {100 * hit1 / n:.2f} | {100 * hit5 / n:.2f} | {100 * rr / n:.2f} |", flush=True)

    print("| variant | rank ties | Hit@1 | Hit@5 | MRR |\n|---|---|---|---|---|")
    evaluate("Resnik (power 1)", 1.0, 0.0, 0.0)
    evaluate("power 3", 3.0, 0.0, 0.0)
    evaluate("power 3 + 0.03 BM25 (default)", 3.0, 0.03, 0.0)
    evaluate("power 3 + 0.03 BM25, negated terms cost 0.1", 3.0, 0.03, 0.1)
    evaluate("power 3 + 0.03 BM25, negated terms cost 0.5", 3.0, 0.03, 0.5)
    evaluate("power 3 + 0.3 BM25", 3.0, 0.3, 0.0)
    evaluate("power 3 + 0.03 BM25, observed ancestors of observed terms dropped", 3.0, 0.03, 0.0, most_specific)
    evaluate("power 3 + 0.03 BM25 + 0.01 reverse best-match average", 3.0, 0.03, 0.0, None,
             lambda observed: 0.01 * reverse(observed))
    evaluate("power 3 + 0.01 reverse best-match average (no BM25)", 3.0, 0.0, 0.0, None,
             lambda observed: 0.01 * reverse(observed))
    # For reference only: every case here has a genetic diagnosis, so a prior for diseases with a known gene
    # rewards the case collection, not the request.
    evaluate("power 3 + 0.5 × has-a-known-gene prior", 3.0, 0.0, 0.0, None, lambda observed: 0.5 * has_gene)


if __name__ == "__main__":
    main()
