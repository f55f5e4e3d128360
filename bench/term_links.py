"""How sure a link by meaning is: HPO's own synonyms as phrases no name matches (issue 48).

The offline reader links a list item that no name matches, and no name is near in words, to the node of the
list's class whose name the encoder places nearest (:meth:`kqe_rdf.kb.linking.Linker.meant`). Its thresholds are
chosen here, on data no evaluation set holds: each synonym of an HPO term that differs from the term's name is
taken as a request's phrase and linked against the primary names of every Phenotype node (the synonyms
themselves are left out of the vectors, as a phrase that matched one would have been linked as a name). A link
is right when it is the synonym's own term. The rule kept is the one that links the most synonyms with at least
80% of its links right, among: the encoder alone (cosine, lead over the second nearest), or the encoder agreeing
with BM25's first name (a lower cosine, a lead). Links whose name holds a word opposite to one of the phrase's
("increased" / "decreased") are never made, nor links of one word alone: both count as not linked.

    python bench/term_links.py --kb $KBS/bio [--sample 3000]
"""

from __future__ import annotations

import argparse
import random
import re
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kqe_rdf.kb.importers.bio import hpo_data_dir, parse_obo_text  # noqa: E402
from kqe_rdf.kb.knowledge_base import KnowledgeBase  # noqa: E402
from kqe_rdf.kb.lexicon import opposites  # noqa: E402
from kqe_rdf.kb.linking import MEANT, Linker  # noqa: E402
from kqe_rdf.kb.words import STOPWORDS  # noqa: E402

PHENOTYPE = "https://w3id.org/kqe/bio#Phenotype"
PRECISION = 0.80


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kb", required=True, type=Path, help="a bio KB (kqe-rdf kb build bio)")
    parser.add_argument("--sample", type=int, default=3000, help="synonyms drawn (seeded)")
    args = parser.parse_args()
    kb = KnowledgeBase.open(args.kb)
    linker = Linker(kb)
    linker.meant("warm-up", PHENOTYPE, None)  # the names' vectors, encoded once and kept
    iris, vectors = linker._terms[PHENOTYPE]
    number = {iri.rsplit("/", 1)[1].replace("_", ":"): n for n, iri in enumerate(iris)}
    terms = parse_obo_text((hpo_data_dir() / "hp.obo").read_text())
    pairs = [(s, number[t.id]) for t in terms if t.id in number for s, _scope in t.synonyms
             if s.lower() != t.name.lower()]
    random.Random(7).shuffle(pairs)
    pairs = pairs[: args.sample]
    scores = kb.encoder.encode([p[0] for p in pairs]) @ vectors.T
    top = np.argsort(-scores, axis=1)[:, :2]
    rows = np.arange(len(pairs))
    near, clear = scores[rows, top[:, 0]], scores[rows, top[:, 0]] - scores[rows, top[:, 1]]
    right = top[:, 0] == np.array([p[1] for p in pairs])
    first = []
    for phrase, _n in pairs:
        words = [w for w in re.findall(r"[a-z]+", phrase.lower()) if w not in STOPWORDS and len(w) > 2]
        hits = kb.text_index.search_names(" ".join(words), 1, [PHENOTYPE]) if words else []
        first.append(iris.index(hits[0][0]) if hits and hits[0][0] in iris else -1)
    agree = np.array(first) == top[:, 0]
    names = [linker._name(i) for i in iris]
    opposed = np.array([any(opposites(w) & set(re.findall(r"[a-z0-9]+", p.lower()))
                            for w in set(re.findall(r"[a-z0-9]+", names[top[i, 0]].lower())))
                        for i, (p, _n) in enumerate(pairs)])
    print(f"{len(pairs)} synonyms of {len(iris)} Phenotype names; nearest name right for {right.mean():.3f}; "
          f"BM25's first name agrees for {agree.mean():.3f}; opposite words in {opposed.mean():.3f}")

    multi = np.array([len([w for w in re.findall(r"[a-z]+", p.lower()) if w not in STOPWORDS and len(w) > 2]) > 1
                      for p, _n in pairs])

    def linked(alone, agreeing) -> np.ndarray:
        return ~opposed & multi & (((near >= alone[0]) & (clear >= alone[1]))
                           | (agree & (near >= agreeing[0]) & (clear >= agreeing[1])))

    grid = np.round(np.arange(0.60, 0.951, 0.01), 2), np.round(np.arange(0.0, 0.151, 0.01), 2)
    best_alone = max(((float(linked((t, m), (9, 9)).mean()), t, m) for t in grid[0] for m in grid[1]
                      if right[linked((t, m), (9, 9))].mean() >= PRECISION), default=None)
    print(f"encoder alone, most links at >= {PRECISION:.0%} right: cosine {best_alone[1]}, lead {best_alone[2]} "
          f"({best_alone[0]:.3f} linked)")
    alone = best_alone[1:]
    best = max(((float(linked(alone, (t, m)).mean()), t, m) for t in grid[0] for m in grid[1]
                if right[linked(alone, (t, m))].mean() >= PRECISION), default=None)
    print(f"or where BM25 agrees, most links at >= {PRECISION:.0%} right: cosine {best[1]}, lead {best[2]}")
    chosen = linked(*MEANT)
    print(f"the rule in kqe_rdf.kb.linking.MEANT = {MEANT}: {chosen.mean():.3f} of the synonyms linked, "
          f"{right[chosen].mean():.3f} of those right")


if __name__ == "__main__":
    main()
