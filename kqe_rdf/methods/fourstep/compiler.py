"""Triplets → one SPARQL SELECT over the KB (4StepFocus's candidate substitution).

Constants become variables bound by ``VALUES`` to their linked IRIs (a few
alternatives each); relations are oriented by the ontology (an inverse
property is rewritten to ``^forward``; a stored relation whose ends' types
contradict its domain/range is matched in both directions); where the
ontology declares a hierarchy (an ``owl:TransitiveProperty`` on the class at
a constant's end) the pattern follows it, so "seizure" also finds diseases
annotated with "focal seizure". Types become ``VALUES`` over the class and
its subclasses. The query always has a ``LIMIT``; :func:`run` adds a timeout.

A path never walks back through its own constant ("the films directed by the director of Kismet"
are his other films): its inner variables are filtered to differ from it.

*Strict* mode is the paper's substitution: one basic graph pattern, all
triplets must hold. *Soft* mode splits the triplets into paths from the answer
to each constant and returns which paths each candidate satisfies.
"""

from __future__ import annotations

import re
import threading
from string import Template
from dataclasses import dataclass, field

from pyoxigraph import NamedNode

from ...kb import queries
from ...core.errors import SparqlError
from ...kb.ontology import Schema
from ..reading.triplets import Triplet, TripletQuery


@dataclass
class Unit:
    """One path of triplets from the answer variable to a constant."""

    triplets: list[Triplet]
    constant: str
    negated: bool = False
    constant_type: str | None = None
    #: The request is unsure of the constant ("possible ..."): it counts for less (``fourstep_uncertain_weight``).
    uncertain: bool = False
    #: The IRIs the constant was linked to (filled in by :func:`compile_query`).
    values: list[str] = field(default_factory=list)


@dataclass
class Compiled:
    sparql: str
    mode: str
    answer: str
    units: list[Unit] = field(default_factory=list)
    constants: dict[str, list[str]] = field(default_factory=dict)
    #: The constants' variables that may be their own answer (:attr:`TripletQuery.returning`).
    returning: set[str] = field(default_factory=set)


def sparql_variable(name: str) -> str:
    """The SPARQL variable a triplet's variable is written as ("?x", "?film_1").

    >>> sparql_variable("?film 1")
    '?film_1'
    """
    return "?" + re.sub(r"\W", "_", name.lstrip("?"))


def constant_var(index: int) -> str:
    return f"?c{index}"


def relation_path(schema: Schema, relation_iri: str, head_type: str | None, tail_type: str | None,
                  tail_is_constant: bool, head_is_constant: bool) -> str:
    """The property path for one triplet, oriented and hierarchy-aware."""
    iri, reverse = stored_direction(schema, relation_iri)
    forward = schema.relations.get(iri)
    dom, rng = (forward.domain, forward.range) if forward else (None, None)
    h_type, t_type = (tail_type, head_type) if reverse else (head_type, tail_type)
    h_const, t_const = (tail_is_constant, head_is_constant) if reverse else (head_is_constant, tail_is_constant)
    path = f"<{iri}>"
    if forward is not None and forward.transitive and (h_const or t_const):
        # The hierarchy relation itself: its closure. Expanding the constant's end instead would
        # make "seizure is a ?x" answer seizure itself (the parent of its own subtypes).
        path = f"<{iri}>+"
    else:
        tail_h = schema.hierarchy_relation(rng) if t_const else None
        head_h = schema.hierarchy_relation(dom) if h_const else None
        if tail_h:
            path = f"{path}/{_closure(schema, tail_h)}"
        if head_h:
            path = f"^{_closure(schema, head_h)}/{path}"
    contradicts = (h_type and dom and not _compatible(schema, h_type, dom)) or (
        t_type and rng and not _compatible(schema, t_type, rng))
    if contradicts:
        path = f"({path})|^({path})"
    return f"^({path})" if reverse else path


def stored_direction(schema: Schema, relation_iri: str) -> tuple[str, bool]:
    """The relation the KB stores a triplet's edges under, and whether they run tail → head: an inverse
    relation ("directed", of a person) is read backwards along the stored one ("directed by")."""
    rel = schema.relations.get(relation_iri)
    if rel is not None and rel.inverse and rel.inverse in schema.relations and not _declared_forward(schema, rel):
        return rel.inverse, True
    return relation_iri, False


def _declared_forward(schema: Schema, rel) -> bool:
    """Of a relation and its inverse, the stored one: what the KB's edges use, else the one the ontology
    does not declare as ``owl:inverseOf`` the other."""
    return rel.iri in schema.stored_relations if schema.stored_relations else not rel.virtual


def _compatible(schema: Schema, a: str, b: str) -> bool:
    return a in schema.subclasses(b) or b in schema.subclasses(a)


def _closure(schema: Schema, hierarchy: str) -> str:
    """The path from a term to itself and its ancestors: the closure stored with the KB (one lookup), else
    the hierarchy walked at query time (``<isA>*``)."""
    stored = schema.closures.get(hierarchy)
    return f"<{stored}>" if stored else f"<{hierarchy}>*"


def _triplet_pattern(schema: Schema, t: Triplet, names: dict[tuple[str, str | None], str]) -> str:
    def term(end) -> str:
        return sparql_variable(end.text) if end.is_variable else names[(end.text, end.type)]

    path = relation_path(schema, t.relation, t.head.type, t.tail.type, not t.tail.is_variable, not t.head.is_variable)
    return f"  {term(t.head)} {path} {term(t.tail)} ."


def _types(schema: Schema, tq: TripletQuery, answer_only: bool = False) -> str:
    """Type constraints; soft mode constrains only the answer (other variables live inside one path)."""
    wanted: dict[str, tuple[str, ...]] = {}
    for t in [] if answer_only else tq.triplets:
        for end in (t.head, t.tail):
            if end.is_variable and end.type:
                wanted.setdefault(sparql_variable(end.text), (end.type,))
    if tq.answer_type:
        wanted[sparql_variable(tq.answer)] = (tq.answer_type, *tq.also_types)
    lines = []
    for i, (var, types) in enumerate(sorted(wanted.items())):
        classes = " ".join(str(NamedNode(c)) for c in sorted(set().union(*(schema.subclasses(t) for t in types))))
        lines.append(f"  VALUES ?type{i} {{ {classes} }} {var} a ?type{i} .")
    return "\n".join(lines)


def units(tq: TripletQuery) -> list[Unit]:
    """Paths from the answer variable to each constant through shared variables. A condition on a path's node
    (:attr:`Triplet.constraint`) is no path of its own: it joins every path through that node."""
    out = []
    conditions = [t for t in tq.triplets if t.constraint]
    for t in tq.triplets:
        for end in (t.head, t.tail):
            if end.is_variable or t.constraint:
                continue
            path = _path_to(tq, t, tq.answer, conditions)
            if path is not None:
                inner = {v for u in path for v in u.variables()}
                path += [c for c in conditions if set(c.variables()) & inner]
                out.append(Unit(path, end.text, t.negated, end.type, uncertain=t.uncertain))
    return out


def _path_to(tq: TripletQuery, start: Triplet, answer: str, skip: list[Triplet] = ()) -> list[Triplet] | None:
    """Breadth-first search over triplets sharing variables, from ``start`` to one mentioning ``answer``."""
    frontier = [[start]]
    seen = {id(start)} | {id(t) for t in skip}

    while frontier:
        path = frontier.pop(0)
        if answer in path[-1].variables():
            return path
        for t in tq.triplets:
            if id(t) not in seen and set(t.variables()) & set(path[-1].variables()):
                seen.add(id(t))
                frontier.append(path + [t])
    return None


def _anchored(triplets: list[Triplet]) -> list[Triplet]:
    """The triplets joined, through shared variables, to one that has a constant.

    When a constant links to nothing its triplet is dropped; the triplets it
    joined to must go too, or ``?m starred_actors ?x`` alone would make every
    actor an answer.
    """
    keep = [t for t in triplets if len(t.variables()) < 2]
    reached = {v for t in keep for v in t.variables()}
    rest = [t for t in triplets if len(t.variables()) == 2]
    grew = True
    while grew:
        grew = False
        for t in list(rest):
            if reached & set(t.variables()):
                rest.remove(t)
                keep.append(t)
                reached |= set(t.variables())
                grew = True
    return [t for t in triplets if any(t is k for k in keep)]


def _groups(negated: list[Triplet], bound: set[str]) -> list[list[Triplet]]:
    """Negated triplets joined by variables the positive patterns do not bind: one ``NOT EXISTS`` each.

    A negated path ("not directed by Kismet's director") must be negated as a
    whole; negating each of its triplets alone would test ``Kismet directed_by ?d``
    without the answer, which removes every answer.
    """
    groups: list[list[Triplet]] = []
    for t in negated:
        free = set(t.variables()) - bound
        joined = [g for g in groups if any(free & set(u.variables()) for u in g)]
        merged = [t] + [u for g in joined for u in g]
        groups = [g for g in groups if not any(g is j for j in joined)] + [merged]
    order = {id(t): i for i, t in enumerate(negated)}
    return sorted((sorted(g, key=lambda t: order[id(t)]) for g in groups), key=lambda g: order[id(g[0])])


def compile_query(schema: Schema, tq: TripletQuery, linked: dict[tuple[str, str | None], list[str]],
                  mode: str = "soft", limit: int = 10000) -> Compiled:
    """One SELECT for ``tq``; ``linked`` maps each constant (text, type) to candidate IRIs."""
    if mode not in ("strict", "soft"):
        raise ValueError("mode must be 'strict' or 'soft'")
    names = {key: constant_var(i) for i, key in enumerate(sorted(linked, key=lambda k: (k[0], k[1] or "")))}
    usable = _anchored([t for t in tq.triplets
                        if all(e.is_variable or linked.get((e.text, e.type)) for e in (t.head, t.tail))])
    used_keys = {(e.text, e.type) for t in usable for e in (t.head, t.tail) if not e.is_variable}
    # Each constant's VALUES sits right before the first pattern that uses it, inside that pattern's
    # group: top-level VALUES for many constants would be joined as a cartesian product first.
    def with_values(triplets: list[Triplet], declared: set) -> str:
        lines = []
        for t in triplets:
            for e in (t.head, t.tail):
                key = (e.text, e.type)
                if not e.is_variable and key not in declared:
                    declared.add(key)
                    lines.append(f"  VALUES {names[key]} {{ {' '.join(str(NamedNode(i)) for i in linked[key])} }}")
            lines.append(_triplet_pattern(schema, t, names))
        return "\n".join(lines)

    # A condition's value may be the answer ("X's husband's sex": male), as a constant a path comes back to may.
    conditions = {(e.text, e.type) for t in usable if t.constraint for e in (t.head, t.tail) if not e.is_variable}
    returning = {names[k] for k in used_keys if k[0] in tq.returning or k in conditions}
    revisiting = {names[k] for k in used_keys if k[0] in tq.revisiting}

    def no_return(triplets: list[Triplet]) -> str:
        """A path does not walk back through its own constants: in "the films directed by the director of
        Kismet" the films are the director's other films (the answer itself is left to the caller). A path whose
        first hops come back to the constant by structure may ("the release of X's track", X its own track)."""
        consts = sorted({names[(e.text, e.type)] for t in triplets for e in (t.head, t.tail) if not e.is_variable}
                        - revisiting)
        inner = sorted({sparql_variable(v) for t in triplets for v in t.variables()} - {sparql_variable(tq.answer)})
        return "\n".join(f"  FILTER({v} != {c})" for v in inner for c in consts)

    values = ""
    answer = sparql_variable(tq.answer)
    select = " ".join([answer] + [names[k] for k in sorted(used_keys, key=lambda k: names[k])])
    sub = TripletQuery(tq.query, usable, tq.answer, tq.answer_type, tq.source, also_types=tq.also_types)
    constants = {names[k]: linked[k] for k in used_keys}
    if mode == "strict":
        declared: set = set()
        positive = [t for t in usable if not t.negated]
        patterns = with_values(positive, declared)
        if no_return(positive):
            patterns += "\n" + no_return(positive)
        if not usable:
            patterns = "  FILTER(false)"
        bound = {v for t in usable if not t.negated for v in t.variables()} | {tq.answer}
        negations = "\n".join(
            "  FILTER NOT EXISTS {\n" + with_values(group, set(declared)) + "\n  }"
            for group in _groups([t for t in usable if t.negated], bound))
        text = Template(queries.strip_comments(queries.load("fourstep_strict"))).substitute(select=select, values=values, patterns=patterns + ("\n" + negations if negations else ""),
                                                      types=_types(schema, sub), limit=limit)
        return Compiled(text.strip(), mode, answer, units(sub), constants, returning)
    unit_list = units(sub)
    for unit in unit_list:
        unit.values = list(linked.get((unit.constant, unit.constant_type), []))
    answer_types = _types(schema, sub, answer_only=True)
    blocks = []
    for i, unit in enumerate(unit_list):
        body = with_values(unit.triplets, set())
        if no_return(unit.triplets):
            body += "\n" + no_return(unit.triplets)
        if answer_types:  # inside each path: outside, the type join would drive the paths from every node
            body += "\n" + answer_types
        blocks.append(f"  {{\n{body}\n    BIND({i} AS ?unit)\n  }}")
    text = Template(queries.strip_comments(queries.load("fourstep_soft"))).substitute(select=select, values=values, units="\n  UNION\n".join(blocks) or "  FILTER(false)",
                                                types="", limit=limit)
    return Compiled(text.strip(), mode, answer, unit_list, constants, returning)


def run(store, compiled: Compiled, timeout: float = 10.0) -> list[dict[str, str]]:
    """Solutions as dicts of variable → IRI; a query still running after ``timeout`` seconds is an error.

    pyoxigraph cannot cancel a running query, so it runs in a worker thread and
    we stop waiting for it; the LIMIT keeps such a query bounded.
    """
    rows: list[dict[str, str]] = []
    error: list[BaseException] = []

    def work() -> None:
        try:
            result = store.query(compiled.sparql, use_default_graph_as_union=True)
            names = [v.value for v in result.variables]
            for solution in result:
                rows.append({n: solution[n].value for n in names if solution[n] is not None})
        except BaseException as exc:  # noqa: BLE001 - reported below
            error.append(exc)

    worker = threading.Thread(target=work, daemon=True)
    worker.start()
    worker.join(timeout)
    if worker.is_alive():
        raise SparqlError(f"the compiled query did not finish within {timeout:g} s (LIMIT is still applied)")
    if error:
        raise SparqlError(f"the compiled query failed: {error[0]}\n{compiled.sparql}")
    return rows
