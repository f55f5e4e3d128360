"""A built KB exported as plain N-Triples (names and edges, no rdf:type): the check that `kb build rdf` gives
an untyped graph the structure a typed one has (issue 23: MetaQA's KB without types, 1-hop dev within 2
points of the typed KB).

    python bench/export_plain_rdf.py data/kb/metaqa /tmp/metaqa-plain.nt
    kqe-rdf kb build rdf /tmp/metaqa-plain.nt --kb /tmp/metaqa-plain --no-embed
    kqe-rdf eval metaqa ../shared/data/metaqa/1-hop/dev.txt.gz --kb /tmp/metaqa-plain -m 4step-offline
"""

from __future__ import annotations

import argparse
from pathlib import Path

from pyoxigraph import RdfFormat, serialize

from kqe_rdf.kb import queries
from kqe_rdf.kb.knowledge_base import KnowledgeBase


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("kb", type=Path)
    ap.add_argument("out", type=Path)
    args = ap.parse_args()
    kb = KnowledgeBase.open(args.kb)
    triples = kb.store.query(queries.load("export_plain_rdf"), use_default_graph_as_union=True)
    with open(args.out, "wb") as handle:
        serialize(triples, handle, format=RdfFormat.N_TRIPLES)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
