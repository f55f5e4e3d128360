"""How well 4step-offline reads a phenotype list: the HPO terms it links against each case's own ids.

For a seeded sample of phenopacket dev cases, the question's text is read as ``kqe-rdf search -m
4step-offline`` reads it (``FourStep.plan``: mentions, negation, linking) and the terms of the hierarchy
matching's positive reading are compared with the case's observed HPO ids: recall and precision over all
observed terms, and the terms missed or added most often (by name).

    python bench/phenotype_linking.py --kb data/kb/bio3 --sample 300 --seed 3
"""

from __future__ import annotations

import argparse
import collections
import gzip
import json
import random
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    from kqe_rdf.evaluation import querysets
    from kqe_rdf.core.config import Settings
    from kqe_rdf.methods.fourstep.pipeline import FourStep
    from kqe_rdf.kb.hierarchy import hierarchical_units
    from kqe_rdf.kb.knowledge_base import KnowledgeBase

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--kb", type=Path, default=ROOT / "data" / "kb" / "bio")
    parser.add_argument("--cases", type=Path, default=ROOT.parent / "shared" / "data" / "phenopackets" / "dev.jsonl.gz")
    parser.add_argument("--sample", type=int, default=300)
    parser.add_argument("--seed", type=int, default=3)
    args = parser.parse_args()
    kb = KnowledgeBase.open(args.kb, Settings())
    stage = FourStep(kb, k=10, types=["https://w3id.org/kqe/bio#Disease"])
    texts = {q.qid: q.text for q in querysets.load("phenopackets", args.cases)}
    cases = [json.loads(line) for line in gzip.open(args.cases, "rt") if line.strip()]
    sample = random.Random(args.seed).sample(cases, min(args.sample, len(cases)))
    missed, added = collections.Counter(), collections.Counter()
    observed_total = linked_total = correct = unread = 0
    for case in sample:
        if case["id"] not in texts:
            continue
        _tq, _shown, compiled = stage.plan(texts[case["id"]])
        found = hierarchical_units(kb, compiled) if compiled else None
        linked = set(found[1]) if found else set()
        unread += found is None
        resolved = kb.resolve_identifiers([o[0] for o in case["observed"]])
        observed = {resolved[o[0]][0]: o[1] if len(o) > 1 else o[0] for o in case["observed"] if resolved.get(o[0])}
        observed_total += len(observed)
        linked_total += len(linked)
        correct += len(linked & set(observed))
        missed.update(observed[i] for i in set(observed) - linked)
        added.update(kb.document(i).name for i in linked - set(observed))
    print(f"{len(sample)} cases (seed {args.seed}); {unread} not read as a phenotype list")
    print(f"observed terms {observed_total}, linked {linked_total}, correct {correct}: "
          f"recall {correct / max(observed_total, 1):.3f}, precision {correct / max(linked_total, 1):.3f}")
    print("missed most often:", missed.most_common(10))
    print("added most often:", added.most_common(10))


if __name__ == "__main__":
    main()
