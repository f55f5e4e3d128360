"""An LLM's triplets as one candidate reading beside the offline reader's (issue 66).

A small model's reading is plausible and often wrong: it drops the request's entities and invents constants that
link exactly, keeps a guessed year, names the wrong answer variable, reverses a relation (after which linking
re-types a person as a film), copies the prompt's own example, links a class name as an instance. So the LLM is
asked only where the grounded reading may need help (:func:`why_ask`), its reading is checked before it competes
(:func:`check`), and :func:`contest` keeps the reading the graph supports, merging them where they agree: a
reading that loses never changes the answer.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace

from ...kb.ontology import local_name
from ..reading.triplets import End, Triplet, TripletQuery

_SANE_VARIABLE = re.compile(r"^\?[A-Za-z_][A-Za-z0-9_]*$")


@dataclass
class Check:
    """A checked LLM reading: ``reading`` None when it was rejected (``reasons`` say why); ``repairs`` name what
    was mended to keep it (a reversed relation turned round, a class name made the answer's class)."""

    reading: TripletQuery | None
    reasons: list[str] = field(default_factory=list)
    repairs: list[str] = field(default_factory=list)


#: How close (in the offline reader's path score) a beaten path must come to the chosen one for the reading to
#: count as a near-tie the LLM may break.
NEAR_TIE = 0.1


def _mentioned(name: str, text: str) -> bool:
    """Whether ``text`` writes ``name``: as it is, or with a small misspelling (a fuzzy partial match of 90)."""
    from rapidfuzz import fuzz

    name, text = " ".join(name.lower().split()), " ".join(text.lower().split())
    return bool(name) and (name in text or fuzz.partial_ratio(name, text) >= 90)


def why_ask(offline: TripletQuery, found: bool) -> str | None:
    """Why the LLM is asked about a request (None: the grounded reading is confident and costs no call). Unread
    words alone are no reason: the LLM's reading can change the answer only where the graph leaves a choice
    (:func:`contest`), so without a near-tie a call could only cost time."""
    if offline.value is not None:
        return None  # a value asked ("what year did X come out"): the LLM's triplets cannot express one
    if not offline.triplets:
        return "the offline reader abstains (" + ("; ".join(offline.notes[:1]) or "no triplet") + ")"
    if not found:
        return "the offline reading finds no candidate in the graph"
    ties = near_ties(offline)
    if ties:
        unread = f" (words unread: {', '.join(offline.unread)})" if offline.unread else ""
        return "the offline reader's path nearly ties with another: " + "; ".join(ties) + unread
    return None


def near_ties(offline: TripletQuery) -> list[str]:
    """The offline reader's unsure choices: per constant, a beaten path within :data:`NEAR_TIE` of the chosen."""
    out = []
    for entry in offline.reading:
        for other in entry.get("beat", []):
            if entry.get("confidence", 1.0) < 1.0 and other["score"] >= entry["score"] - NEAR_TIE:
                out.append(f"{entry['constant']!r}: {entry['path']!r} {entry['score']} against "
                           f"{other['path']!r} {other['score']}")
    return out


def path_from(schema, triplets: list[Triplet], start: str, answer: str) -> str | None:
    """The relation path from constant ``start`` to ``answer`` as the offline reader writes it (labels, a hop
    read backwards by its inverse label, " / " between hops); None without one."""
    phrases, at, used = [], start, set()
    while at != answer:
        step = next(((i, t) for i, t in enumerate(triplets) if i not in used and at in (t.head.text, t.tail.text)
                     and not t.constraint), None)
        if step is None:
            return None
        i, t = step
        used.add(i)
        rel = schema.relations.get(t.relation)
        forward = t.head.text == at
        phrases.append((rel.label if rel else local_name(t.relation)) if forward else schema.inverse_label(t.relation))
        at = t.tail.text if forward else t.head.text
    return " / ".join(phrases) or None


def raw_problems(obj: dict, repairs: list[str] | None = None) -> list[str]:
    """What is wrong with the model's JSON as written, before it is mapped onto the ontology: variables that are
    not names ("?the film"), an answer that is no variable of the triplets. A name written as the answer (the
    model's guess, "London") is mended in ``obj`` where it can be: the triplets' constant of that name becomes the
    answer variable, else their one variable is the answer (said in ``repairs``)."""
    problems, variables = [], []
    for item in obj.get("triplets") or []:
        for end in (str(item.get("head", "")).strip().strip('"'), str(item.get("tail", "")).strip().strip('"')):
            if end.startswith("?"):
                if not _SANE_VARIABLE.match(end):
                    problems.append(f"variable {end!r} is not a variable name")
                if end not in variables:
                    variables.append(end)
    answer = str(obj.get("answer") or "").strip().strip('"')
    if answer and not answer.startswith("?") and repairs is not None:
        answer = _guess_as_variable(obj, answer, variables, repairs)
    if not answer.startswith("?") or not _SANE_VARIABLE.match(answer):
        problems.append(f"answer {answer!r} is not a variable")
    elif variables and answer not in variables and not _guesses_answer(obj, answer):
        problems.append(f"answer {answer} appears in no triplet")
    return problems


def _guess_as_variable(obj: dict, guess: str, variables: list[str], repairs: list[str]) -> str:
    """The answer variable for a model that wrote its guess at the answer in its place (see :func:`raw_problems`)."""
    fresh = next(v for v in ("?x", "?answer", "?a0") if v not in variables)
    replaced = False
    for item in obj.get("triplets") or []:
        for key in ("head", "tail"):
            if str(item.get(key, "")).strip().strip('"').lower() == guess.lower():
                item[key], replaced = fresh, True
    if replaced:
        repairs.append(f"the answer {guess!r} (the model's guess) read as the variable {fresh}")
        obj["answer"] = fresh
        return fresh
    if len(variables) == 1:
        repairs.append(f"the answer {guess!r} (the model's guess) read as the triplets' one variable {variables[0]}")
        obj["answer"] = variables[0]
        return variables[0]
    return guess


def _guesses_answer(obj: dict, answer: str) -> bool:
    """Whether a triplet has two constants (a guess at the answer in the variable's place, read as ``answer``)."""
    return any(not str(t.get("head", "")).strip().startswith("?") and not str(t.get("tail", "")).strip().startswith("?")
               for t in obj.get("triplets") or [])


def check(kb, linker, offline_reader, tq: TripletQuery, offline: TripletQuery, prompt: str) -> Check:
    """``tq`` (normalised) checked against the request, the offline reading and the ontology; see the module."""
    schema, query = kb.schema, tq.query
    reasons: list[str] = []
    repairs: list[str] = []
    triplets, answer_type = [], tq.answer_type
    for guess in tq.guessed_answers:
        if cls := offline_reader.classes_named(guess.lower()):
            # "Laureate" as the answer: the class the model expects the answer to have, not a guess at it.
            answer_type = answer_type or sorted(cls)[0]
            repairs.append(f"the answer {guess!r} names a class: read as the answer's class")
        elif _mentioned(guess, prompt):
            reasons.append(f"its answer {guess!r} is the prompt's example")
    for t in tq.triplets:
        classes = {e: offline_reader.classes_named(e.text.lower()) for e in (t.head, t.tail) if not e.is_variable}
        named = {e: c for e, c in classes.items() if c}
        for end in (t.head, t.tail):
            if end.is_variable or end in named:
                continue
            if not _mentioned(end.text, query):
                where = "the prompt's example" if _mentioned(end.text, prompt) else "not in the request"
                reasons.append(f"constant {end.text!r} is {where}")
        if named:
            # "Disease" is a class the request names, not an instance: the answer's class, not a constant.
            for end, cls in named.items():
                other = t.tail if end == t.head else t.head
                if other.text == tq.answer and not answer_type:
                    answer_type = sorted(cls)[0]
                repairs.append(f"{end.text!r} names a class ({', '.join(sorted(local_name(c) for c in cls))}), "
                               f"not an entity: triplet {t} dropped")
            continue
        triplets.append(_turned(kb, linker, t, repairs))
    if reasons:
        return Check(None, reasons, repairs)
    offline_names = [c.text for c in offline.constants()]
    own = [c.text.lower() for t in triplets for c in (t.head, t.tail) if not c.is_variable]
    for name in offline_names:
        if not any(name.lower() in o or o in name.lower() for o in own):
            reasons.append(f"it drops the request's mention {name!r} (the offline reader linked it)")
    if not triplets:
        reasons.append("no triplet is left")
    variables = {v for t in triplets for v in t.variables()}
    if triplets and tq.answer not in variables:
        reasons.append(f"answer {tq.answer} appears in no triplet")
    if reasons:
        return Check(None, reasons, repairs)
    asked = offline_reader.answer_types(query, wh_only=True) or (
        set(schema.subclasses(offline.answer_type)) if offline.answer_type and offline.triplets else set())
    reachable = _answer_classes(schema, triplets, tq.answer)
    if asked and reachable and not asked & reachable:
        names = ", ".join(sorted(local_name(c) for c in asked))
        return Check(None, [f"its answer {tq.answer} cannot reach the class the request asks for ({names})"], repairs)
    checked = replace(tq, triplets=triplets, answer_type=answer_type, notes=[*tq.notes, *repairs])
    return Check(checked, [], repairs)


def _turned(kb, linker, t: Triplet, repairs: list[str]) -> Triplet:
    """``t``, turned round when its constant links as the class at the relation's other end and not at its own
    (``("William Dieterle", directed_by, ?x)``: a person is no film)."""
    schema = kb.schema
    rel = schema.relations.get(t.relation)
    if rel is None or not rel.domain or not rel.range or rel.domain == rel.range:
        return t
    const, at_head = (t.head, True) if not t.head.is_variable else (t.tail, False)
    if const.is_variable:
        return t
    here, there = (rel.domain, rel.range) if at_head else (rel.range, rel.domain)
    fits = linker.link(const.text, schema.subclasses(here))
    other = linker.link(const.text, schema.subclasses(there))
    best = max((c.score for c in fits), default=0.0)
    if other and other[0].score > best:
        repairs.append(f"{const.text!r} is a {local_name(there)}, not a {local_name(here)}: "
                       f"{local_name(t.relation)} turned round")
        return Triplet(End(t.tail.text, None), t.relation, End(t.head.text, None), t.negated, t.constraint)
    return t


def _answer_classes(schema, triplets: list[Triplet], answer: str) -> set[str]:
    """The classes the answer variable has at its ends of its relations, in their direction."""
    found = set()
    for t in triplets:
        rel = schema.relations.get(t.relation)
        if rel is None:
            continue
        for cls, end in ((rel.domain, t.head), (rel.range, t.tail)):
            if end.text == answer and cls:
                found |= set(schema.subclasses(cls))
    return found


def contest(schema, offline: TripletQuery, offline_attempt, llm: TripletQuery, llm_attempt) -> tuple[str, str]:
    """Which reading the graph supports: ("offline" | "llm" | "merged", why). The grounded reading keeps the
    answer unless it finds nothing, or the LLM chose the other path of one of its near-ties (the graph scored both
    alike, so the model's reading of the words decides); where their best candidates agree both count."""
    if not llm_attempt.scores:
        return "offline", "the LLM's reading finds no candidate in the graph"
    if not offline_attempt.scores:
        return "llm", "the offline reading finds no candidate; the LLM's does"
    best_offline = _best(offline_attempt.scores)
    best_llm = _best(llm_attempt.scores)
    # Only where their best agree: evidence added anywhere else could reorder the grounded answer.
    if best_offline & best_llm:
        return "merged", "the readings agree on their best candidates: both readings' evidence counts"
    for entry in offline.reading:
        if entry.get("confidence", 1.0) >= 1.0:
            continue
        theirs = path_from(schema, llm.triplets, entry["constant"], llm.answer)
        for other in entry.get("beat", []):
            if theirs == other["path"] and other["score"] >= entry["score"] - NEAR_TIE:
                return "llm", (f"a near-tie of the offline reader ({entry['path']!r} {entry['score']} against "
                               f"{other['path']!r} {other['score']} from {entry['constant']!r}): the LLM read it "
                               f"as {theirs!r}")
    return "offline", "the readings disagree and the graph does not favour the LLM's: the grounded reading is kept"


def _best(scores: dict[str, float]) -> set[str]:
    top = max(scores.values())
    return {i for i, s in scores.items() if s == top}


def merged_scores(offline: dict[str, float], llm: dict[str, float]) -> dict[str, float]:
    """The offline reading's candidates, each with the LLM reading's evidence for it added (none are added)."""
    return {i: s + llm.get(i, 0.0) for i, s in offline.items()}
