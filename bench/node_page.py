"""A node's page (``/node?iri=…``, issue 71) on a real KB against reading the same node's facts whole over /sparql.

The bar: a node with 5,000 facts shows its first page in at most a second. Over the real app (its worker
processes, in-process HTTP through starlette's TestClient) this times the HTML page and the JSON page of the bio
KB's most connected nodes, and as the baseline, in the same process, one SPARQL query for all their facts either
way (``SELECT * { { <n> ?p ?o } UNION { ?s ?p <n> } }``, as JSON): what a page without groups and paging reads.

    python bench/node_page.py --kb /work/kbs/bio
"""

from __future__ import annotations

from pathlib import Path

import harness
from harness import ms, ratio, table

#: The bio KB's nodes with the most facts (Seizure: ~6,600; All, the root of the HPO: ~20,000).
NODES = ("http://purl.obolibrary.org/obo/HP_0001250", "http://purl.obolibrary.org/obo/HP_0000001")


def main() -> None:
    def extra(parser) -> None:
        parser.add_argument("--kb", type=Path, default=Path("/work/kbs/bio"), help="a built KB")

    args = harness.arguments(__doc__.split("\n")[0], extra, repeats=9)
    env = harness.Environment(["pyoxigraph", "starlette"])
    from starlette.testclient import TestClient

    from kqe_rdf.core.config import Settings
    from kqe_rdf.kb.knowledge_base import KnowledgeBase
    from kqe_rdf.service.app import create_app

    kb = KnowledgeBase.open(args.kb)
    rows = []
    with TestClient(create_app(kb, Settings(server_result_cache_mb=0))) as client:
        for iri in NODES:
            query = f"SELECT * WHERE {{ {{ <{iri}> ?p ?o }} UNION {{ ?s ?p <{iri}> }} }}"
            counted = client.get("/node", params={"iri": iri, "format": "json"}).json()
            facts = sum(g["count"] for g in counted["outgoing"] + counted["incoming"])

            def timed(get):
                get()  # once first: the worker's store and name index are open for the runs
                return harness.median_time(get, args.repeats)

            whole = timed(lambda: client.get("/sparql", params={"query": query},
                                             headers={"Accept": "application/sparql-results+json"}).raise_for_status())
            page_html = timed(lambda: client.get("/node", params={"iri": iri}).raise_for_status())
            page_json = timed(lambda: client.get("/node", params={"iri": iri, "format": "json"}).raise_for_status())
            label = counted["label"]
            rows.append([f"{label} ({facts:,} facts)", ms(whole.median), ms(page_html.median),
                         ratio(page_html.median, whole.median), ms(page_json.median), page_html.spread()])
    env.finish()
    body = (env.markdown(harness.command_line()) + "\n\n"
            + f"Medians of {args.repeats} requests each (in-process HTTP to the real app and its worker; result cache "
            "off), 20 values per relation group:\n\n"
            + table(["node", "all facts over /sparql ms", "/node HTML ms", "HTML / all facts", "/node JSON ms",
                     "HTML spread"], rows)
            + f"\n\nThe baseline is cut at the server's result cap ({Settings().server.result_cap:,} rows)."
            + "\n\nThe bar (issue 71): a node with 5,000 facts shows its first page in ≤ 1 s.")
    print(body)
    if args.doc:
        harness.update_doc("node_page", "A node's page against its facts read whole (`bench/node_page.py`)", body)


if __name__ == "__main__":
    main()
