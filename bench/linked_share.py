"""How many of a phenopacket case's observed phenotypes the offline reader links (issue 48's figure).

For each dev case, in each wording, the reader's mentions (``OfflineTriplets.mentions``, what 4step-offline reads
before any path) are taken, and an observed term counts as linked when one of its mentions' candidates is that
term's node. The share is over all observed terms of the cases read, per wording; the links not made by a name are
counted apart: approximate (list items no name matches whole, linked by BM25 within the list's class), broader names
(OBO BROAD synonyms) and links by meaning (the encoder's clearly nearest name).

    python bench/linked_share.py --kb $KBS/bio --sample 300            # prints the table
"""

from __future__ import annotations

import argparse
import gzip
import json
import random
from pathlib import Path

import harness


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--kb", type=Path, required=True)
    parser.add_argument("--sample", type=int, default=None, help="a seeded sample of the dev cases")
    args = parser.parse_args()
    from kqe_rdf.evaluation.querysets import WORDINGS, phenopacket_question
    from kqe_rdf.kb.knowledge_base import KnowledgeBase
    from kqe_rdf.methods.registry import pipeline

    kb = KnowledgeBase.open(args.kb)
    reader = pipeline("4step-offline", kb, kb.settings, 10, ["Disease"]).generator
    with gzip.open(harness.shared("phenopackets", "dev.jsonl.gz"), "rt") as handle:
        cases = [json.loads(line) for line in handle if line.strip()]
    cases = [c for c in cases if c.get("observed") and c.get("diseases")]
    if args.sample:
        cases = random.Random(0).sample(cases, min(args.sample, len(cases)))
    kinds = ("approximate", "broader name", "meaning")
    print("| wording | cases | observed terms | linked | share | of them " + " / ".join(kinds) + " |")
    print("|---|---:|---:|---:|---:|---:|")
    for wording in WORDINGS:
        terms = linked = 0
        made = dict.fromkeys(kinds, 0)
        for case in cases:
            observed = [label for _id, label in case["observed"]]
            excluded = [label for _id, label in case.get("excluded") or []]
            question = phenopacket_question(case.get("sex"), observed, excluded, "disease", wording)
            mentions, _conditions = reader.mentions(question)
            found = {c.iri: c.how for m in mentions if not m.negated for c in m.candidates}
            for term, _label in case["observed"]:
                iri = "http://purl.obolibrary.org/obo/" + term.replace(":", "_")
                terms += 1
                if iri in found:
                    linked += 1
                    if found[iri] in made:
                        made[found[iri]] += 1
        print(f"| {wording} | {len(cases)} | {terms} | {linked} | {100 * linked / max(terms, 1):.2f} | "
              + " / ".join(str(made[k]) for k in kinds) + " |")


if __name__ == "__main__":
    main()
