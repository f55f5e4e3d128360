"""The walk of a question through the reader: how often reading it moves from one of the reader's modules to another.

A newcomer follows a question through the code call by call, reading each function once, where it is first called.
This script records that order for real requests (a profiler hook on 4step-offline's run; each function counted
at its first call in the request, later calls of it are code already read), keeps the functions of the reader's
modules (``kqe_rdf.methods.reading``, the *rooms*; ``--with-linker`` adds ``kqe_rdf.kb.linking``), and counts:

- *stays*: runs of consecutive functions in one module (reading moves to another file when a stay ends);
- *rooms*: the modules visited;
- *returns*: stays in a module already visited (stays − rooms).

Calls outside the rooms (the store, indexes, the encoder) neither end nor start a stay; nor do comprehensions and
lambdas (read with their function) or the methods dataclasses make. Each request is walked with the reader's caches
emptied (:func:`kqe_rdf.core.caches.forget`), after one warm-up request that opens the store and indexes. Requests
are spread evenly over a dev set of ``bench/devsets.py`` (its KB and options: phenopackets ``--type Disease``).

    python bench/walk.py --kbs $KBS --sets metaqa-1-hop metaqa-2-hop metaqa-3-hop phenopackets-template pq-2h pq-3h
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import harness

READER = "kqe_rdf.methods.reading"
LINKER = "kqe_rdf.kb.linking"


def walk(run, text: str, rooms: tuple[str, ...]) -> list[str]:
    """The modules of the reader's functions in the order each is first called while ``run(text)`` runs."""
    seen: set = set()
    order: list[str] = []

    def hook(frame, event, arg):
        if event != "call":
            return
        code = frame.f_code
        if code in seen or code.co_name.startswith("<") or not code.co_filename.endswith(".py"):
            return  # comprehensions and lambdas are read with their function; dataclasses' made methods are not code
        module = frame.f_globals.get("__name__", "")
        if module.startswith(rooms):
            seen.add(code)
            order.append(module)

    sys.setprofile(hook)
    try:
        run(text)
    finally:
        sys.setprofile(None)
    return order


def stays(order: list[str]) -> list[str]:
    """``order`` with consecutive repeats merged: one entry per stay."""
    return [m for i, m in enumerate(order) if i == 0 or order[i - 1] != m]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kbs", type=Path, required=True, help="the folder of bench/devsets.py's KBs")
    parser.add_argument("--sets", nargs="+", required=True, help="reader dev sets of bench/devsets.py")
    parser.add_argument("--queries", type=int, default=3, help="requests per set")
    parser.add_argument("--with-linker", action="store_true")
    parser.add_argument("--show", action="store_true", help="print each walk's stays")
    args = parser.parse_args()

    from devsets import DATA, SETS

    from kqe_rdf.core.caches import forget
    from kqe_rdf.core.config import Settings
    from kqe_rdf.evaluation import querysets
    from kqe_rdf.kb.knowledge_base import KnowledgeBase
    from kqe_rdf.methods.registry import pipeline

    settings = Settings()
    rooms = (READER, LINKER) if args.with_linker else (READER,)
    rows = []
    for dev in [s for s in SETS if s.name in args.sets]:
        options = dict(zip(dev.options[::2], dev.options[1::2]))
        loaded = querysets.load(dev.queryset, *(DATA / f for f in dev.files),
                                **({"wording": options["--wording"]} if "--wording" in options else {}))
        texts = [q.text for q in loaded]
        texts = texts[:: max(len(texts) // (args.queries + 1), 1)][: args.queries + 1]
        kb = KnowledgeBase.open(args.kbs / dev.kb, settings)
        fourstep = pipeline("4step-offline", kb, settings, 10, [options["--type"]] if "--type" in options else None)
        fourstep.run(texts[-1])  # opens the store, indexes, encoder and name index
        for text in texts[:-1]:
            forget(kb)
            kb.hierarchies.cache_clear()
            visited = stays(walk(fourstep.run, text, rooms))
            rows.append((dev.name, text, len(visited), len(set(visited)), len(visited) - len(set(visited))))
            if args.show:
                print(f"{text[:70]!r}: {' > '.join(m.rsplit('.', 1)[-1] for m in visited)}", flush=True)
    print(harness.table(["set", "request", "stays", "rooms", "returns"],
                        [[d, t[:50].replace("|", "/"), s, r, b] for d, t, s, r, b in rows]))
    print(f"most: {max(r[2] for r in rows)} stays, {max(r[4] for r in rows)} returns ({len(rows)} requests)")


if __name__ == "__main__":
    main()
