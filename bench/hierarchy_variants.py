"""Hierarchy matching variants on the phenopacket dev split, from the matrices stored with the bio KB.

This isolates the scoring (kqe_rdf.kb.hierarchy.HierarchyMatch) from reading and linking: each case's observed
and excluded HPO ids are resolved to nodes directly (the product reads them from the question's text, see
``kqe-rdf eval phenopackets ... -m 4step-offline`` for that end-to-end number). It answers "which scoring
rule?" for the settings fourstep_ic_power, fourstep_text_weight and fourstep_negated(_weight), and shows how
much rank ties decide: every variant is scored with ties broken by IRI (what a sort gives) and at random.

    python bench/hierarchy_variants.py --kb data/kb/bio3
"""

from __future__ import annotations

import argparse
import re
import gzip
import json
from pathlib import Path

import numpy as np
from pyoxigraph import NamedNode

ROOT = Path(__file__).resolve().parent.parent
HAS_PHENOTYPE = "https://w3id.org/kqe/bio#hasPhenotype"
DISEASE = "https://w3id.org/kqe/bio#Disease"


def main() -> None:
    from kqe_rdf.kb import queries
    from kqe_rdf.kb.hierarchy import gather
    from kqe_rdf.kb.knowledge_base import KnowledgeBase
    from kqe_rdf.evaluation.querysets import _label, phenopacket_question

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

    def frequency(label: str) -> float | None:
        """An annotation's frequency as a share of patients: category midpoints, ratios, percentages."""
        bands = {"Obligate": 1.0, "Very frequent": 0.895, "Frequent": 0.545, "Occasional": 0.17, "Very rare": 0.025}
        for band, share in bands.items():
            if label.startswith(band + " "):
                return share
        ratio = re.fullmatch(r"(\d+)/(\d+)", label)
        if ratio:
            return int(ratio[1]) / max(int(ratio[2]), 1)
        percent = re.fullmatch(r"([\d.]+)%", label)
        return float(percent[1]) / 100 if percent else None

    def frequency_weighted(alpha: float, unknown: float = 0.5):
        """Per-term scores where each annotation's match counts IC x (alpha + (1 - alpha) x its frequency)."""
        share = {}
        text = queries.with_values(queries.load("annotation_frequencies"), relation=[NamedNode(HAS_PHENOTYPE)])
        for r in kb.store.query(text, use_default_graph_as_union=True):
            share[(r["node"].value, r["term"].value)] = frequency(r["frequency"].value)
        rows = np.repeat(np.arange(len(order)), np.diff(m3._direct_ptr))
        weight = np.array([share.get((order[r], m3.terms[t])) for r, t in zip(rows, m3._direct_idx)], dtype=object)
        weight = np.array([unknown if w is None else w for w in weight], dtype=float)
        # Per (ancestor, node) cell of the stored column matrix: the largest weight among the node's annotations
        # at or below the ancestor.
        above, sizes = gather(m3._anc_ptr, m3._anc_idx, m3._direct_idx)
        key = above.astype(np.int64) * len(order) + np.repeat(rows, sizes)
        heaviest = np.lexsort((-np.repeat(weight, sizes), key))
        key, value = key[heaviest], np.repeat(weight, sizes)[heaviest]
        first = np.r_[True, key[1:] != key[:-1]]
        key, value = key[first], value[first]
        columns = np.repeat(np.arange(len(m3.terms)), np.diff(m3._ptr)).astype(np.int64) * len(order) + m3._idx
        factor = alpha + (1 - alpha) * value[np.searchsorted(key, columns)]

        def score(observed: list[str]) -> np.ndarray:
            total = np.zeros(len(order))
            known = [m3.term_index[t] for t in observed if t in m3.term_index]
            for t in known:
                best = np.zeros(len(order))
                for a in m3._anc_idx[m3._anc_ptr[t]:m3._anc_ptr[t + 1]]:
                    part = slice(m3._ptr[a], m3._ptr[a + 1])
                    np.maximum.at(best, m3._idx[part], m3.ic[a] * factor[part])
                total += best ** 3
            return (total / max(len(known), 1)) ** (1 / 3)
        return score

    genes = {r["d"].value for r in kb.store.query(
        "SELECT DISTINCT ?d WHERE { ?g <https://w3id.org/kqe/bio#associatedWith> ?d }", use_default_graph_as_union=True)}
    has_gene = np.array([n in genes for n in order], dtype=float)

    def evaluate(name: str, power: float, text_weight: float, negated_weight: float, terms=None, extra=None,
                 scorer=None) -> None:
        if args.only not in name:
            return
        rng = np.random.default_rng(0)
        for ties in ("IRI", "random"):
            hit1 = hit5 = rr = 0.0
            for i, (observed, excluded, gold, text) in enumerate(prepared):
                m = matchers[power]
                s = (scorer or m.score)(terms(observed) if terms else observed)
                if extra is not None:
                    s = s + extra(observed, excluded)
                if negated_weight and excluded:  # > 0: a cost; < 0: context (the product's fourstep_negated)
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
    evaluate("power 3 + 0.03 BM25, negated terms ignored", 3.0, 0.03, 0.0)
    evaluate("power 3 + 0.03 BM25, negated terms cost 0.1", 3.0, 0.03, 0.1)
    evaluate("power 3 + 0.03 BM25, negated terms cost 0.5", 3.0, 0.03, 0.5)
    for weight in (0.01, 0.03, 0.05, 0.1):
        evaluate(f"power 3 + 0.03 BM25, negated terms as context {weight}" + (" (default)" if weight == 0.05 else ""),
                 3.0, 0.03, -weight)

    def contradicted(excluded: list[str]) -> np.ndarray:
        """How many excluded terms a disease is annotated with, at or below (a logical contradiction)."""
        count = np.zeros(len(order))
        for t in excluded:
            if t in m3.term_index:
                col = m3.term_index[t]
                count[m3._idx[m3._ptr[col]:m3._ptr[col + 1]]] += 1
        return count
    for weight in (0.02, 0.1):
        evaluate(f"power 3 + 0.03 BM25, each excluded term the disease has (at or below) costs {weight}", 3.0, 0.03,
                 0.0, None, lambda _observed, excluded, w=weight: -w * contradicted(excluded))
    if "frequency" in args.only or not args.only:
        for alpha in (0.5, 0.8):
            evaluate(f"power 3 + 0.03 BM25, matches weighted by annotation frequency (alpha {alpha})", 3.0, 0.03,
                     0.0, scorer=frequency_weighted(alpha))
    evaluate("power 3 + 0.3 BM25", 3.0, 0.3, 0.0)
    evaluate("power 3 + 0.03 BM25, observed ancestors of observed terms dropped", 3.0, 0.03, 0.0, most_specific)
    evaluate("power 3 + 0.03 BM25 + 0.01 reverse best-match average", 3.0, 0.03, 0.0, None,
             lambda observed, _excluded: 0.01 * reverse(observed))
    evaluate("power 3 + 0.01 reverse best-match average (no BM25)", 3.0, 0.0, 0.0, None,
             lambda observed, _excluded: 0.01 * reverse(observed))
    # For reference only: every case here has a genetic diagnosis, so a prior for diseases with a known gene
    # rewards the case collection, not the request.
    evaluate("power 3 + 0.5 × has-a-known-gene prior", 3.0, 0.0, 0.0, None, lambda _observed, _excluded: 0.5 * has_gene)


if __name__ == "__main__":
    main()
