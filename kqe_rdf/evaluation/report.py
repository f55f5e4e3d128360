"""An evaluation as one self-contained HTML page (``kqe-rdf eval ... --report report.html``).

The page needs nothing but itself: styles are inline, the chart is inline SVG,
there is no script and nothing is fetched, so it can be mailed, attached to an
issue or opened from an archive years later. It holds the metric table, a bar
chart of the methods, the scores broken down by query type where the query set
has types (MetaQA: hops and question template; phenopackets: how many
phenotypes a case lists), and each method's worst queries with what the method
read, ran and returned for them.
"""

from __future__ import annotations

import html
import os
from collections import defaultdict
from datetime import datetime, timezone
from pathlib import Path

from .runner import Evaluation, query_records

#: The metrics drawn in the chart (those the evaluation has), in this order.
CHARTED = ("Hit@1", "Hit@5", "Recall@20", "MRR", "nDCG@10")
#: Metrics shown per query type.
BY_TYPE = ("Hit@1", "MRR")
#: Worst queries shown per method, and query-type rows shown per facet.
WORST = 10
TYPE_ROWS = 40
#: Bar colours, one per method (cycled), readable on white and by most colour-blind readers.
COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f")

STYLE = """
body { font: 14px/1.45 system-ui, sans-serif; margin: 2rem auto; max-width: 1200px; padding: 0 1rem; color: #222; }
h1 { font-size: 1.5rem; } h2 { font-size: 1.2rem; margin-top: 2rem; border-bottom: 1px solid #ddd; }
table { border-collapse: collapse; margin: .5rem 0; } th, td { padding: .25rem .6rem; border-bottom: 1px solid #eee; }
th { text-align: left; background: #f6f6f6; } td.num { text-align: right; font-variant-numeric: tabular-nums; }
.muted { color: #666; } .gold { color: #1a7f37; font-weight: 600; }
.query { border: 1px solid #ddd; border-radius: 6px; padding: .6rem .8rem; margin: .6rem 0; }
.query h4 { margin: 0 0 .3rem; font-size: 1rem; } .query ol { margin: .2rem 0; }
pre { background: #f6f8fa; padding: .5rem; overflow-x: auto; font-size: 12px; }
code { font-size: 12px; } svg text { font: 12px system-ui, sans-serif; }
"""


def write_report(path: Path, evaluation: Evaluation, kb, heading: str) -> None:
    """Write the report (atomically: a reader never sees half a page)."""
    page = render(evaluation, list(query_records(evaluation, kb)), heading, str(kb.path))
    path = Path(path)
    partial = path.with_name(f".{path.name}.partial")
    partial.write_text(page, encoding="utf-8")
    os.replace(partial, path)


def render(evaluation: Evaluation, records: list[dict], heading: str, kb_path: str) -> str:
    """The page for ``evaluation`` and its per-query ``records`` (:func:`~kqe_rdf.evaluation.runner.query_records`)."""
    from importlib.metadata import version

    e = html.escape
    rows = evaluation.table()
    columns = evaluation.columns()
    parts = [
        "<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
        f"<title>kqe-rdf evaluation: {e(evaluation.queryset)}</title><style>{STYLE}</style></head><body>",
        f"<h1>Evaluation: {e(evaluation.queryset)}</h1>",
        f"<p>{e(heading)}<br>KB <code>{e(kb_path)}</code>; {evaluation.queries} queries, {evaluation.answerable} "
        f"with a gold answer in the KB ({evaluation.unresolved_answers} gold ids not in the KB; those queries count "
        "as misses).</p>",
        '<h2 id="metrics">Metrics</h2>', _metric_table(rows, columns),
        '<h2 id="chart">Methods compared</h2>', _chart(rows),
    ]
    parts += _breakdowns(evaluation, records)
    parts += _worst(evaluation, records)
    parts.append(f'<p class="muted">kqe-rdf {e(version("kqe-rdf"))}, '
                 f"{datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC.</p></body></html>")
    return "\n".join(parts)


def _number(value: object, per_second: bool = False) -> str:
    if isinstance(value, float):
        return f"{value:,.2f}" if per_second else f"{value:.4f}"
    return "" if value is None else html.escape(str(value))


def _metric_table(rows: list[dict], columns: list[str]) -> str:
    columns = columns or ["method"]
    out = ['<table id="metric-table"><thead><tr>' + "".join(f"<th>{html.escape(c)}</th>" for c in columns)
           + "</tr></thead><tbody>"]
    for row in rows:
        cells = [f"<td>{html.escape(str(row['method']))}</td>"]
        cells += [f'<td class="num">{_number(row.get(c), per_second=c == "queries/s")}</td>' for c in columns[1:]]
        out.append("<tr>" + "".join(cells) + "</tr>")
    return "\n".join(out) + "</tbody></table>"


def _chart(rows: list[dict]) -> str:
    """Grouped bars: one group per metric, one bar per method, the value written above each bar."""
    metrics = [m for m in CHARTED if rows and m in rows[0]]
    if not metrics:
        return "<p>No metrics to draw.</p>"
    bar, gap, height, top, left = 30, 30, 240, 20, 40
    group = bar * len(rows) + gap
    width = left + group * len(metrics) + 10
    e = html.escape
    out = [f'<svg id="chart" role="img" aria-label="metrics by method" xmlns="http://www.w3.org/2000/svg" '
           f'width="{width}" height="{height + top + 60}" viewBox="0 0 {width} {height + top + 60}">']
    for tick in (0, 0.25, 0.5, 0.75, 1.0):
        y = top + height * (1 - tick)
        out.append(f'<line x1="{left}" x2="{width}" y1="{y:.1f}" y2="{y:.1f}" stroke="#ddd"/>'
                   f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end">{tick:g}</text>')
    for g, metric in enumerate(metrics):
        x0 = left + g * group + gap / 2
        for i, row in enumerate(rows):
            value = float(row[metric] or 0.0)
            h = height * max(0.0, min(value, 1.0))
            x, y = x0 + i * bar, top + height - h
            out.append(f'<rect class="bar" data-method="{e(str(row["method"]))}" data-metric="{e(metric)}" '
                       f'data-value="{value:.4f}" x="{x:.1f}" y="{y:.1f}" width="{bar - 3}" height="{h:.1f}" '
                       f'fill="{COLOURS[i % len(COLOURS)]}"><title>{e(str(row["method"]))} {e(metric)} '
                       f"{value:.4f}</title></rect>"
                       f'<text x="{x + (bar - 3) / 2:.1f}" y="{y - 3:.1f}" text-anchor="middle" '
                       f'font-size="9">{value:.2f}</text>')
        out.append(f'<text x="{x0 + bar * len(rows) / 2:.1f}" y="{top + height + 16}" text-anchor="middle">'
                   f"{e(metric)}</text>")
    for i, row in enumerate(rows):  # the legend
        x = left + i * 150
        out.append(f'<rect x="{x}" y="{top + height + 32}" width="12" height="12" '
                   f'fill="{COLOURS[i % len(COLOURS)]}"/><text x="{x + 16}" y="{top + height + 42}">'
                   f"{e(str(row['method']))}</text>")
    return "\n".join(out) + "</svg>"


def _shade(value: float) -> str:
    """A cell background as long as the value, so a column reads like a bar chart."""
    pct = round(100 * max(0.0, min(value, 1.0)))
    return f"background: linear-gradient(90deg, #cfe3f6 {pct}%, transparent {pct}%)"


def _breakdowns(evaluation: Evaluation, records: list[dict]) -> list[str]:
    facets: list[str] = []
    for q in evaluation.evaluated:
        facets += [f for f in (q.facets or {}) if f not in facets]
    if not facets:
        return []
    methods = [r.method for r in evaluation.results]
    shown = [m for m in BY_TYPE if evaluation.results and m in evaluation.results[0].metrics]
    # facet → kind → method → metric → values
    values: dict = defaultdict(lambda: defaultdict(lambda: defaultdict(lambda: defaultdict(list))))
    for r in records:
        for facet, kind in r["facets"].items():
            for metric in shown:
                values[facet][kind][r["method"]][metric].append(r.get(metric, 0.0))
    out = ['<h2 id="by-type">By query type</h2>']
    for facet in facets:
        kinds = sorted(values[facet].items(), key=lambda kv: (-len(kv[1][methods[0]][shown[0]]), kv[0]))
        head = "".join(f"<th>{html.escape(m)}<br>{html.escape(metric)}</th>" for m in methods for metric in shown)
        out.append(f'<h3>{html.escape(facet)}</h3><table class="by-type" data-facet="{html.escape(facet)}">'
                   f"<thead><tr><th>{html.escape(facet)}</th><th>queries</th>{head}</tr></thead><tbody>")
        for kind, by_method in kinds[:TYPE_ROWS]:
            n = len(by_method[methods[0]][shown[0]])
            cells = []
            for m in methods:
                for metric in shown:
                    xs = by_method[m][metric]
                    mean = sum(xs) / len(xs) if xs else 0.0
                    cells.append(f'<td class="num" style="{_shade(mean)}">{mean:.3f}</td>')
            out.append(f"<tr><td>{html.escape(kind)}</td><td class=\"num\">{n}</td>{''.join(cells)}</tr>")
        out.append("</tbody></table>")
        if len(kinds) > TYPE_ROWS:
            out.append(f'<p class="muted">{len(kinds) - TYPE_ROWS} less frequent {html.escape(facet)} values not '
                       "shown (every query is in the `--per-query` JSON Lines).</p>")
    return out


def _worst(evaluation: Evaluation, records: list[dict]) -> list[str]:
    """Each method's worst queries: lowest MRR first, queries the KB can answer before those it cannot."""
    out = ['<h2 id="worst">Worst queries</h2>',
           f'<p class="muted">Per method, the {WORST} queries with the lowest MRR (those with a gold answer in '
           "the KB first), with what the method read, ran and returned.</p>"]
    by_method: dict[str, list[dict]] = defaultdict(list)
    for r in records:
        by_method[r["method"]].append(r)
    for method, rs in by_method.items():
        def badness(r: dict) -> tuple:
            answerable = any(g["iris"] for g in r["gold"])
            return (not answerable, r.get("MRR", 0.0), r.get("nDCG@10", 0.0))

        out.append(f'<h3>{html.escape(method)}</h3><div class="worst" data-method="{html.escape(method)}">')
        out += [_query_card(r) for r in sorted(rs, key=badness)[:WORST]]
        out.append("</div>")
    return out


GOLD = ' class="gold" title="a gold answer"'


def _query_card(r: dict) -> str:
    e = html.escape
    facets = "; ".join(f"{k}: {v}" for k, v in r["facets"].items())
    gold = ", ".join(e(g["name"] or "(not in the KB)")
                     + ("" if g["id"] == g["name"] else f" <span class=\"muted\">{e(g['id'])}</span>")
                     for g in r["gold"][:10])
    ranked = "".join(f"<li{GOLD if h['gold'] else ''}>{e(h['name'])} <span class=\"muted\">"
                     + ("" if h["id"] == h["name"] else f"{e(h['id'] or h['iri'])} · ")
                     + f"{h['score']:.4f}</span></li>" for h in r["ranked"][:5])
    parts = [f'<div class="query" data-qid="{e(r["qid"])}"><h4>{e(r["query"])}</h4>',
             f'<div class="muted">{e(r["qid"])}{" · " + e(facets) if facets else ""} · MRR '
             f'{r.get("MRR", 0.0):.3f}</div>', f"<div>gold: {gold or '(none)'}</div>",
             f"<div>ranked:</div><ol>{ranked or '<li>(nothing)</li>'}</ol>"]
    parts.append(_explanation(r["explanation"]))
    return "\n".join(parts) + "</div>"


def _explanation(x: dict) -> str:
    if not x:
        return '<div class="muted">(this method keeps no explanation beyond its scores)</div>'
    e = html.escape
    lines = []
    if "expanded_query" in x:
        lines.append(f"<div>expanded ({e(str(x['expansion']))}): {e(x['expanded_query'] or '')}</div>")
        if "weight" in x:
            lines.append(f"<div>weight {x['weight']:g}: {e(x['evidence'].get('reason', ''))}</div>")
        for text, nodes in x["entities"].items():
            lines.append(f"<div>entity {e(text)} → {e(', '.join(nodes) or 'nothing')}</div>")
        if x["facts"]:
            lines.append(f"<div>{x['facts_total']} KG fact(s), e.g.:</div><ul>"
                         + "".join(f"<li><code>{e(f)}</code></li>" for f in x["facts"][:5]) + "</ul>")
    else:
        lines.append(f"<div>triplets ({e(str(x['reader']))}, answer type {e(str(x['answer_type']))}): "
                     + (e("; ".join(x["triplets"])) or "none") + "</div>")
        for mention, found in x["linked"].items():
            lines.append(f"<div>linked {e(mention)} → {e('; '.join(found) or 'nothing')}</div>")
        lines.append(f"<div>{x['candidates']} candidate(s) from SPARQL, {x['topped_up']} topped up from the "
                     "fallback</div>")
        if x.get("tried"):
            lines.append(f"<div>readings that found nothing: {e('; '.join(x['tried']))}</div>")
        if x.get("error"):
            lines.append(f"<div>error: {e(x['error'])}</div>")
        for why in x.get("why", []):
            if why["because"]:
                lines.append(f"<div>{e(why['name'])} because: {e(' | '.join(why['because'][:3]))}</div>")
        if x.get("sparql"):
            lines.append(f"<details><summary>SPARQL</summary><pre>{e(x['sparql'])}</pre></details>")
    for note in x.get("notes", []):
        lines.append(f'<div class="muted">note: {e(note)}</div>')
    return "\n".join(lines)
