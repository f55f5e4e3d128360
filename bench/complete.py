"""Completion of names (``/complete?q=…``, issue 71) on a real KB against a plain SPARQL regex over labels.

The bar: p50 of at most 50 ms on the bio KB. Over the real app (its worker processes, in-process HTTP through
starlette's TestClient) this times ``/complete`` for what a person types on the way to a name (every start of a
few names, "s", "se", "sei", …), and as the baseline, in the same process and for the same texts, what a page
without completion would ask: ``/sparql`` with ``FILTER(REGEX(?name, "^…", "i"))`` over ``rdfs:label``, ``LIMIT 10``
(unordered, so it may stop at its tenth match; a ranked list would read every label).

    python bench/complete.py --kb /work/kbs/bio
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import harness
from harness import ms, percentile, ratio, table

#: Names typed letter by letter (their starts are the requests); a relation's and a phrase inside names too.
TYPED = ("seizure", "arachnodactyly", "intellectual disability", "microcephaly", "marfan", "has phenotype",
         "tonic", "forehead")


def main() -> None:
    def extra(parser) -> None:
        parser.add_argument("--kb", type=Path, default=Path("/work/kbs/bio"), help="a built KB")

    args = harness.arguments(__doc__.split("\n")[0], extra, repeats=3)
    env = harness.Environment(["pyoxigraph", "starlette"])
    from starlette.testclient import TestClient

    from kqe_rdf.core.config import Settings
    from kqe_rdf.kb.knowledge_base import KnowledgeBase
    from kqe_rdf.service.app import create_app

    kb = KnowledgeBase.open(args.kb)
    texts = [word[:n] for word in TYPED for n in range(1, len(word) + 1)]
    if args.quick:
        texts = texts[::5]
    settings = Settings(server_result_cache_mb=0, server_query_slots=1)  # one worker: every request the same one
    completed, regex, found = [], [], {}
    with TestClient(create_app(kb, settings)) as client:
        def complete(text):
            response = client.get("/complete", params={"q": text, "limit": 10})
            response.raise_for_status()
            return response.json()["completions"]

        def labels(text):
            pattern = json.dumps("^" + re.sub(r"([.*+?^${}()|\[\]\\])", r"\\\1", text))  # XPath's escapes
            query = f'SELECT ?s ?name WHERE {{ ?s rdfs:label ?name FILTER(REGEX(?name, {pattern}, "i")) }} LIMIT 10'
            response = client.get("/sparql", params={"query": query},
                                  headers={"Accept": "application/sparql-results+json"})
            response.raise_for_status()
            return response.json()["results"]["bindings"]

        complete("s"), labels("s")  # once first: the worker's store and name index are open for the runs
        for _ in range(args.repeats):
            for text in texts:
                completed.append(harness.median_time(lambda: complete(text), 1).median)
                regex.append(harness.median_time(lambda: labels(text), 1).median)
        for word in TYPED:
            found[word] = [c["name"] for c in complete(word[:4])][:3]
    env.finish()

    def row(name, seconds):
        return [name, ms(percentile(seconds, 50)), ms(percentile(seconds, 90)), ms(max(seconds))]

    p50, base = percentile(completed, 50), percentile(regex, 50)
    rows = [row("/complete (limit 10)", completed) + [ratio(p50, base)],
            row("baseline: /sparql REGEX over rdfs:label, LIMIT 10", regex) + ["1.00×"]]
    body = (env.markdown(harness.command_line()) + "\n\n"
            + f"{len(texts)} texts (every start of {len(TYPED)} names: {', '.join(TYPED)}), each requested "
            f"{args.repeats} times in turn with its baseline (in-process HTTP to the real app and its one worker; "
            "result cache off):\n\n"
            + table(["request", "p50 ms", "p90 ms", "max ms", "p50 / baseline"], rows)
            + "\n\nWhat the first four letters complete to: "
            + "; ".join(f"{w[:4]!r} → {', '.join(names) or '(none)'}" for w, names in found.items())
            + f".\n\nThe bar (issue 71): p50 ≤ 50 ms on the bio KB: {'met' if p50 <= 0.050 else 'NOT met'} "
            f"({ms(p50)} ms).")
    print(body)
    if args.doc:
        harness.update_doc("complete", "Completion of names against a regex over labels (`bench/complete.py`)", body)


if __name__ == "__main__":
    main()
