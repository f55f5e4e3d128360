"""Hierarchy matching variants on the phenopacket dev split, from the matrices stored with the bio KB.

This isolates the scoring (kqe_rdf.hierarchy.HierarchyMatch) from reading and linking: each case's observed
and excluded HPO ids are resolved to nodes directly (the product reads them from the question's text, see
``kqe-rdf eval phenopackets ... -m 4step-offline`` for that end-to-end number). It answers "which scoring
rule?" for the settings fourstep_ic_power, fourstep_text_weight and fourstep_negated_weight, and shows how
much rank ties decide: every variant is scored with ties broken by IRI (what a sort gives) and at random.

    python bench/hierarchy_variants.py --kb data/kb/bio2
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

    def evaluate(name: str, power: float, text_weight: float, negated_weight: float) -> None:
        rng = np.random.default_rng(0)
        for ties in ("IRI", "random"):
            hit1 = hit5 = rr = 0.0
            for i, (observed, excluded, gold, text) in enumerate(prepared):
                m = matchers[power]
                s = m.score(observed)
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


if __name__ == "__main__":
    main()
