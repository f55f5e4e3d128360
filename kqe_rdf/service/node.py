"""A node's own page (issue 71): what ``/node?iri=…`` and ``kqe-rdf describe IRI`` show of one IRI.

Its label, classes, document text, owl:sameAs links, and the facts leaving and reaching it grouped by relation,
each group counted and paged, from ``queries/node_*.rq``. A group's page is read from an unordered query and the
reading stops after it, so a node with thousands of facts costs its counts and one page, not a sort of every fact.
The HTML is made here, with every text escaped and no script (the page's Content-Security-Policy holds): a value
that is a node of the KB links to its own page, another http(s) IRI to itself, anything else is text.
"""

from __future__ import annotations

import html
import re
from urllib.parse import quote, urlencode

from pyoxigraph import Literal, NamedNode

from ..core.errors import KqeError
from ..kb.ontology import local_name
from ..kb.queries import load, with_values
from ..kb.sparql import run_query

#: Values shown per relation group on a first page, and the most a request may ask for.
PAGE, MAX_PAGE = 20, 500
DIRECTIONS = ("out", "in")


def node_iri(text: str, prefixes: dict[str, str]) -> str:
    """The IRI a user gave: ``<…>``, a full IRI, or a prefixed name of the KB's (``bio:Disease``)."""
    text = text.strip()
    if text.startswith("<") and text.endswith(">"):
        text = text[1:-1]
    prefix, _, rest = text.partition(":")
    if prefix in prefixes and not rest.startswith("//"):
        text = prefixes[prefix] + rest
    if not text or any(c in text for c in ' <>"{}|^`\\') or ":" not in text:
        raise KqeError(f"not an IRI: {text!r} (give a full IRI such as http://purl.obolibrary.org/obo/HP_0001250, "
                       "or a prefixed name of the KB's)")
    return text


def shown(iri: str, prefixes: dict[str, str]) -> str:
    """A relation or class as a person reads it: ``bio:hasPhenotype`` where a prefix fits, else its local name."""
    best = max((ns for ns in prefixes.values() if iri.startswith(ns) and len(iri) > len(ns)), key=len, default=None)
    if best is None:
        return local_name(iri) or iri
    return next(p for p, ns in prefixes.items() if ns == best) + ":" + iri[len(best):]


def _term(term, prefixes) -> dict:
    if isinstance(term, Literal):
        out = {"kind": "literal", "value": term.value}
        if term.language:
            out["lang"] = term.language
        elif term.datatype.value != "http://www.w3.org/2001/XMLSchema#string":
            out["datatype"] = shown(term.datatype.value, prefixes)
        return out
    if isinstance(term, NamedNode):
        return {"kind": "iri", "value": term.value}
    return {"kind": "blank", "value": str(term)}


def _query(kb, name: str, node: NamedNode, relation: NamedNode | None = None):
    values = {"node": [node]} if relation is None else {"node": [node], "relation": [relation]}
    return run_query(kb.store, with_values(load(name), **values))


def page_of(kb, node: NamedNode, relation: str, direction: str, offset: int, limit: int) -> list[dict]:
    """One page of a relation group: its values (label, whether a KB node), read no further than the page."""
    rows = _query(kb, f"node_facts_{direction}", node, NamedNode(relation))
    out, seen = [], set()
    for row in rows:  # a value with two labels comes twice: counted once
        key = str(row["value"])
        if key in seen:
            continue
        seen.add(key)
        if len(seen) <= offset:
            continue
        value = _term(row["value"], kb.prefixes)
        if row["label"] is not None:
            value["label"] = row["label"].value
        value["known"] = row["known"] is not None
        out.append(value)
        if len(out) == limit:
            break
    return out


def describe(kb, iri: str, relation: str | None = None, direction: str = "out", offset: int = 0,
             limit: int = PAGE) -> dict:
    """The node's page as data (what /node answers in JSON and renders as HTML). ``relation``, ``direction``
    and ``offset`` page one group; the others show their first ``limit`` values."""
    if direction not in DIRECTIONS:
        raise KqeError(f"direction must be 'out' or 'in', got {direction!r}")
    if not 1 <= limit <= MAX_PAGE:
        raise KqeError(f"limit must be between 1 and {MAX_PAGE}, got {limit}")
    if offset < 0:
        raise KqeError(f"offset must be 0 or more, got {offset}")
    prefixes = kb.prefixes
    node = NamedNode(iri)
    card: dict[str, list] = {"label": [], "alias": [], "type": [], "sameAs": []}
    for row in _query(kb, "node_card", node):
        card[row["key"].value].append(row["value"])
    known = any(t.value == "https://w3id.org/kqe/core#Node" for t in card["type"])
    text = ""
    if known:
        try:
            text = kb.document(iri).text
        except KqeError:
            text = ""
    groups = {}
    for way in DIRECTIONS:
        counted = sorted(((row["relation"].value, int(row["count"].value))
                          for row in _query(kb, f"node_relations_{way}", node)), key=lambda rc: (-rc[1], rc[0]))
        groups[way] = []
        for rel, count in counted:
            start = offset if (rel == relation and way == direction) else 0
            values = page_of(kb, node, rel, way, start, limit)
            groups[way].append({"relation": rel, "name": shown(rel, prefixes), "count": count, "offset": start,
                                "values": values,
                                "next": start + limit if start + limit < count else None,
                                "previous": max(0, start - limit) if start > 0 else None})
    label = next((t.value for t in card["label"]), None) or (kb.name(iri) if known else None) or local_name(iri)
    classes = [t.value for t in card["type"] if t.value != "https://w3id.org/kqe/core#Node"]
    return {"iri": iri, "known": known, "found": bool(groups["out"] or groups["in"]), "label": label,
            "aliases": [t.value for t in card["alias"]],
            "types": [{"iri": t, "name": kb.class_names.get(t) or shown(t, prefixes)} for t in classes],
            "text": text, "same_as": sorted({t.value for t in card["sameAs"] if isinstance(t, NamedNode)} - {iri}),
            "outgoing": groups["out"], "incoming": groups["in"], "limit": limit, "query": query_this(iri)}


def query_this(iri: str) -> str:
    """The SPARQL the page's "query this" button opens in the editor: the node's facts either way."""
    ref = str(NamedNode(iri))
    return (f"SELECT ?relation ?value ?direction WHERE {{\n  {{ {ref} ?relation ?value . BIND(\"out\" AS ?direction) }}"
            f"\n  UNION {{ ?value ?relation {ref} . BIND(\"in\" AS ?direction) }}\n}} LIMIT 1000")


# ---------------------------------------------------------------- HTML


def node_link(iri: str, **extra) -> str:
    """The address of a node's page (``extra``: a group's paging)."""
    return "/node?" + urlencode({"iri": iri, **extra}, quote_via=quote)


def _value_html(value: dict) -> str:
    if value["kind"] != "iri":
        text = html.escape(value["value"])
        note = value.get("datatype") or (("@" + value["lang"]) if value.get("lang") else "")
        return f'<span class="literal">{text}</span>' + (f' <span class="datatype">{html.escape(note)}</span>'
                                                           if note else "")
    shown_text = html.escape(value.get("label") or value["value"])
    title = html.escape(value["value"], quote=True)
    if value.get("known"):
        return f'<a class="node" href="{html.escape(node_link(value["value"]), quote=True)}" title="{title}">{shown_text}</a>'
    if value["value"].lower().startswith(("http://", "https://")):
        return f'<a class="outside" href="{title}" title="{title}">{shown_text}</a>'
    return f'<span class="iri" title="{title}">{shown_text}</span>'


def _groups_html(page: dict, way: str) -> str:
    groups = page["outgoing" if way == "out" else "incoming"]
    if not groups:
        return "<p class=\"none\">none</p>"
    parts = []
    for group in groups:
        rel = html.escape(group["relation"], quote=True)
        shown_values = "".join(f"<li>{_value_html(v)}</li>" for v in group["values"])
        first = group["offset"] + 1 if group["values"] else 0
        last = group["offset"] + len(group["values"])
        nav = []
        for word, at in (("previous", group["previous"]), ("next", group["next"])):
            if at is not None:
                href = node_link(page["iri"], relation=group["relation"], direction=way, offset=at,
                                 limit=page["limit"])
                nav.append(f'<a class="{word}" href="{html.escape(href, quote=True)}">{word}</a>')
        parts.append(f'<section class="group" data-relation="{rel}" data-direction="{way}">'
                     f'<h3><span class="relation" title="{rel}">{html.escape(group["name"])}</span> '
                     f'<span class="count">{group["count"]}</span></h3>'
                     f'<p class="shown">{first}–{last} of {group["count"]} {" ".join(nav)}</p>'
                     f'<ul>{shown_values}</ul></section>')
    return "".join(parts)


def render_html(page: dict, kb_name: str) -> str:
    """The node's page as a document of its own (no script; the page's stylesheet)."""
    label = html.escape(page["label"])
    iri = html.escape(page["iri"], quote=True)
    types = ", ".join(f'<a href="{html.escape(node_link(t["iri"]), quote=True)}">{html.escape(t["name"])}</a>'
                      for t in page["types"]) or "none"
    aliases = ", ".join(html.escape(a) for a in page["aliases"])
    same = "".join(f"<li>{_value_html({'kind': 'iri', 'value': s, 'known': False})}</li>" for s in page["same_as"])
    query = html.escape("/#" + urlencode({"query": page["query"]}, quote_via=quote), quote=True)
    note = "" if page["found"] else '<p class="none">The KB holds no fact about this IRI.</p>'
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>{label} · kqe-rdf</title><link rel="stylesheet" href="/static/style.css"></head>
<body class="node-page"><header><h1><a href="/">kqe-rdf</a></h1><p>KB {html.escape(kb_name)}</p></header>
<main class="node"><section id="node-card"><h2 id="node-label">{label}</h2>
<p class="iri" id="node-iri">{iri}</p>
<p id="node-types"><strong>types</strong> {types}</p>
{f'<p id="node-aliases"><strong>also called</strong> {aliases}</p>' if aliases else ""}
{f'<p id="node-text">{html.escape(page["text"])}</p>' if page["text"] else ""}
{f'<div id="node-same-as"><strong>owl:sameAs</strong><ul>{same}</ul></div>' if same else ""}
<p><a id="node-query" class="button" href="{query}">query this</a></p>{note}</section>
<section id="node-outgoing"><h2>outgoing facts</h2>{_groups_html(page, "out")}</section>
<section id="node-incoming"><h2>incoming facts</h2>{_groups_html(page, "in")}</section>
</main></body></html>"""


# ---------------------------------------------------------------- plain text (`kqe-rdf describe`)

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def _plain(text: str) -> str:
    """Text from the KB with its control characters shown escaped: a terminal never runs one."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


def describe_text(page: dict) -> str:
    """The node's page as the CLI prints it: its card, then each relation group with its count and page."""
    lines = [f"{_plain(page['label'])}  <{_plain(page['iri'])}>",
             "types: " + (", ".join(_plain(t["name"]) for t in page["types"]) or "none")]
    if page["aliases"]:
        lines.append("also called: " + "; ".join(_plain(a) for a in page["aliases"]))
    lines += [f"same as: <{_plain(s)}>" for s in page["same_as"]]
    if page["text"]:
        lines += ["", *("  " + _plain(line) for line in page["text"].splitlines())]
    if not page["found"]:
        lines.append("the KB holds no fact about this IRI")
    for title, groups in (("outgoing", page["outgoing"]), ("incoming", page["incoming"])):
        lines += ["", f"{title} facts:"]
        for group in groups:
            first = group["offset"] + 1 if group["values"] else 0
            lines.append(f"  {_plain(group['name'])} ({group['count']}; {first}-{group['offset'] + len(group['values'])})")
            for value in group["values"]:
                shown_value = value.get("label") or value["value"]
                extra = f"  <{value['value']}>" if value["kind"] == "iri" and value.get("label") else ""
                note = f"  ^^{value['datatype']}" if value.get("datatype") else ""
                lines.append(f"    {_plain(shown_value)}{_plain(extra)}{note}")
    lines += ["", "query this:", page["query"]]
    return "\n".join(lines)
