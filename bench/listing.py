"""The reader's hop listings with their walks bounded (``PathReader.WALKED`` solutions) against unbounded walks.

A further hop's listing walks a path prefix from the request's constants to read which kinds of edge leave the
nodes it reaches (``queries/reader_walked.rq``). On `bench/scale.py`'s kept KBs (``--keep``) this times the
4step-offline requests of ``scale.py`` in one process, each request run with the walk bounded and unbounded (a
bound no walk reaches) in turns (ABBA: each first as often), the reader's listings forgotten before every run:
the time inside its hop listings (``PathReader._list_hops``), and the whole request (the second run of a request
finds the caches of the rest warm, its new words encoded: ABBA shares that between the two). It also says
whether the two give each request the same top 10 (IRIs and scores). kar-offline keeps too much per node between
runs of one request to be timed this way: `bench/scale.py --reuse` times it in fresh processes.

    python bench/listing.py --kb /tmp/kbs/kb-8000000 --no-doc
"""

from __future__ import annotations

import gc
import statistics
import time
from pathlib import Path

import harness
from harness import ms, table
from scale import requests

UNBOUNDED = 10**12
METHODS = ("4step-offline",)


def readers():
    from kqe_rdf.methods.reading.paths import PathReader

    return [o for o in gc.get_objects() if isinstance(o, PathReader)]


def measure(kb_path: Path, rounds: int) -> dict:
    """Per method and variant: the request times and the hop-listing times (seconds), and the top 10s."""
    from kqe_rdf.core.config import Settings
    from kqe_rdf.kb.knowledge_base import KnowledgeBase
    from kqe_rdf.methods.reading import paths
    from kqe_rdf.methods.registry import pipeline

    kb = KnowledgeBase.open(kb_path)
    texts = requests(kb)
    listing = {"spent": 0.0}
    original = paths.PathReader._list_hops

    def timed(self, *args):
        t0 = time.perf_counter()
        try:
            return original(self, *args)
        finally:
            listing["spent"] += time.perf_counter() - t0

    paths.PathReader._list_hops = timed
    out: dict = {}
    try:
        for method in METHODS:
            stage = pipeline(method, kb, Settings(), 10, None)
            stage.run(texts[method][0])  # open the indexes, the encoder and the name index first
            mine = readers()
            results = {"bounded": {"request": [], "listing": [], "top": []},
                       "unbounded": {"request": [], "listing": [], "top": []}}
            for turn in range(rounds):
                for i, text in enumerate(texts[method]):
                    order = ("bounded", "unbounded") if (i + turn) % 2 == 0 else ("unbounded", "bounded")
                    for variant in order:
                        for reader in mine:
                            reader.walked = paths.PathReader.WALKED if variant == "bounded" else UNBOUNDED
                            reader._listed.clear()
                        kb.embed_query.cache_clear()
                        listing["spent"] = 0.0
                        t0 = time.perf_counter()
                        result = stage.run(text)
                        results[variant]["request"].append(time.perf_counter() - t0)
                        results[variant]["listing"].append(listing["spent"])
                        if turn == 0:
                            results[variant]["top"].append([(h.iri, round(h.score, 9)) for h in result.ranked("q")])
            out[method] = results
    finally:
        paths.PathReader._list_hops = original
    return out


def main() -> None:
    def extra(parser) -> None:
        parser.add_argument("--kb", type=Path, required=True, help="a KB kept by bench/scale.py --keep")

    args = harness.arguments(__doc__.split("\n")[0], extra, repeats=3)
    env = harness.Environment(["pyoxigraph", "tantivy"])
    from kqe_rdf.methods.reading.paths import PathReader

    found = measure(args.kb, args.repeats)
    env.finish()
    rows = []
    for method, results in found.items():
        b, u = results["bounded"], results["unbounded"]
        same = sum(x == y for x, y in zip(b["top"], u["top"]))
        for part in ("request", "listing"):
            pb, pu = statistics.median(b[part]), statistics.median(u[part])
            rows.append([method, "whole request" if part == "request" else "hop listings in it",
                         ms(pu), ms(pb), f"{pb / pu:.2f}×" if pu else "", f"{same} of {len(b['top'])}"])
    body = (env.markdown(harness.command_line()) + "\n\n"
            + f"{args.repeats} rounds of each request, each with the walk bounded at {PathReader.WALKED} solutions "
            "and unbounded in turns; p50 per request:\n\n"
            + table(["method", "what", "unbounded p50 ms", "bounded p50 ms", "bounded / unbounded",
                     "same top 10"], rows))
    print(body)
    if args.doc:
        harness.update_doc("listing", "Hop listings with bounded walks (`bench/listing.py`)", body)


if __name__ == "__main__":
    main()
