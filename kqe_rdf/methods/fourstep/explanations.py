"""A ranking's explanation, summarised for a person reading why a method failed.

Stages keep their full explanation in :attr:`~kqe_rdf.methods.retrieval.Batch.explain`
(4StepFocus: the triplets, linked constants, SPARQL, candidates and the
bindings or hierarchy matches behind each answer; expansions: the entities,
neighbours and facts behind the expanded query). That is too much to read
per query in an evaluation of thousands, so :func:`summary` keeps what answers
"why this ranking?": what the method read, what it ran, how much came back and
why the first answers were chosen, with node names beside the IRIs.

>>> summary({"triplets": {"source": "offline", "answer_type": "https://x/o#Disease", "triplets": [
...     {"head": "?x", "relation": "https://x/o#hasPhenotype", "tail": "seizures", "negated": False}]},
...     "candidates": 3, "topped_up": 7}, name=lambda iri: iri)["triplets"]
['(?x, hasPhenotype, seizures)']
"""

from __future__ import annotations

from collections.abc import Callable

from ...core.errors import KqeError
from ...kb.ontology import local_name

#: How many of the first answers keep the reason they were chosen.
WHY_TOP = 3


def names_in(kb) -> Callable[[str], str]:
    """``name(iri)``: a node's name in ``kb``, or the IRI's local name for what is not a node."""

    def name(iri: str) -> str:
        try:
            return kb.document(iri).name
        except KqeError:  # not a node document: a class, a literal
            return local_name(iri)

    return name


def summary(explain: dict | None, name: Callable[[str], str]) -> dict:
    """The part of ``explain`` a person reads first; ``{}`` for methods that keep none (BM25, dense)."""
    if not explain:
        return {}
    if "expansion" in explain:
        return _expansion(explain["expansion"])
    if "triplets" in explain:
        return _structured(explain, name)
    return {}


def _triplet(t: dict) -> str:
    return f"{'NOT ' if t.get('negated') else ''}({t['head']}, {local_name(t['relation'])}, {t['tail']})"


def _structured(explain: dict, name: Callable[[str], str]) -> dict:
    reading = explain.get("triplets") or {}
    out: dict = {
        "reader": reading.get("source"),
        "answer_type": local_name(reading["answer_type"]) if reading.get("answer_type") else None,
        "triplets": [_triplet(t) for t in reading.get("triplets", [])],
        "linked": {mention: [f"{c['name']} ({c['how']} {c['score']})" for c in found[:3]]
                   for mention, found in explain.get("linked", {}).items()},
        "candidates": explain.get("candidates", 0),
        "topped_up": explain.get("topped_up", 0),
    }
    for key in ("tried", "error", "rerank"):
        if explain.get(key):
            out[key] = explain[key]
    if explain.get("excluded"):
        out["excluded"] = [name(iri) for iri in explain["excluded"]]
    if reading.get("notes"):
        out["notes"] = reading["notes"]
    if reading.get("reading"):
        out["reading"] = reading["reading"]
    if reading.get("unread"):
        out["unread"] = reading["unread"]
    if explain.get("llm_reading"):
        # 4step with an LLM: whether it was asked, what became of its reading (used, merged, lost, rejected,
        # failed, not asked) and why, and both readings with the winner.
        out["llm_reading"] = explain["llm_reading"]
        readings = explain.get("readings", {})
        out["readings"] = {"winner": readings.get("winner"), "why": readings.get("why"),
                           **{k: [_triplet(t) for t in v["triplets"].get("triplets", [])] for k, v in readings.items()
                              if isinstance(v, dict) and "triplets" in v}}
    out["why"] = [{"iri": iri, "name": name(iri), "because": [_reason(row, name) for row in rows]}
                  for iri, rows in list(explain.get("support", {}).items())[:WHY_TOP]]
    if explain.get("sparql"):
        out["sparql"] = explain["sparql"]
    if explain.get("seconds"):
        out["seconds"] = {step: round(s, 3) for step, s in explain["seconds"].items()}
    return out


def _reason(row: dict, name: Callable[[str], str]) -> str:
    """One piece of support: a hierarchy match (term ← common ancestor, its IC) or a row of SPARQL bindings."""
    if "ancestor" in row:
        via = "" if row["ancestor"] == row["term"] else f" via {name(row['ancestor'])}"
        held = ", ".join(name(a) for a in row.get("annotations", [])[:3])
        return f"{name(row['term'])}{via} (IC {row['ic']}): annotated with {held}"
    bound = ", ".join(f"?{var} = {name(value)}" for var, value in sorted(row.items()) if var != "unit")
    return f"path {row['unit']}: {bound}" if "unit" in row else bound


def _expansion(exp: dict) -> dict:
    facts = []
    for n in exp.get("neighbours", []):  # KAR: the KG edges its neighbours were reached by
        head, tail = (n["from_name"], n["name"]) if n["direction"] == "out" else (n["name"], n["from_name"])
        facts.append(f"({head}) --{n['relation']}--> ({tail})")
    facts += [f"{t['head']} | {t['relation']} | {t['tail']}" for t in exp.get("triples", [])]  # LKQE
    out = {
        "expansion": exp.get("method"),
        "expanded_query": exp.get("expanded_query"),
        "entities": {e["text"]: [n["name"] for n in e["nodes"][:3]] for e in exp.get("entities", [])},
        "facts": facts[:10],
        "facts_total": len(facts),
    }
    if exp.get("evidence"):  # an offline expansion weighed by what it adds: how much it counted, and why
        out["weight"], out["evidence"] = exp["weight"], exp["evidence"]
    if exp.get("notes"):
        out["notes"] = exp["notes"]
    return out
