"""Structured output: the JSON value in a model's answer, repaired where it is broken, checked against a schema.

Libraries do the standard parts: ``json_repair`` mends a broken JSON span (single quotes, Python
literals, trailing commas, stray escapes) and ``jsonschema`` validates the value. Three parts stay
written here, because neither library does them:

- the balanced-bracket scanner (:func:`_balanced_end`), which finds the candidate spans in prose and
  fences within a work budget: ``json_repair`` reads only the first span, and on hostile input (deep
  brackets before pages of text) it takes seconds per kilobyte, so it only ever sees one closed span;
- closing a cut-off answer after its last *complete* element (:func:`_close_truncated`): ``json_repair``
  keeps the half-written last string (``"Homocyst``) as if it were an answer;
- naming what was repaired (:func:`_breakages`), which ``json_repair`` does not report.

>>> extract_json('Sure! ```json\\n{"ids": [1, 2,], "ok": True}\\n```')
{'ids': [1, 2], 'ok': True}
>>> validate_json({"ids": ["x"]}, {"type": "object", "required": ["ids"],
...                                "properties": {"ids": {"type": "array", "items": {"type": "integer"}}}})
["$.ids[0]: expected integer, got string 'x'"]
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

#: Characters of an answer that JSON extraction looks at.
MAX_PARSE_CHARS = 1_000_000
#: Longest span ``json_repair`` is given, and the deepest nesting (it is slow on deep, long garbage).
_MAX_REPAIR_CHARS = 64_000
_MAX_REPAIR_DEPTH = 64


@dataclass(frozen=True)
class StructuredResult:
    """The outcome of :meth:`~kqe_rdf.llm.client.LLM.json`; check ``ok`` — on failure ``value`` is None and
    ``error`` says why.

    ``raw`` is the (last) answer as the model gave it; ``repairs`` names what was fixed to parse it
    ("code fence", "trailing comma", "truncated" …); ``attempts`` is 2 when the model was re-asked.
    """

    ok: bool
    value: Any = None
    error: str | None = None
    raw: str | None = None
    repairs: tuple[str, ...] = ()
    attempts: int = 1
    cached: bool = False

    @property
    def truncated(self) -> bool:
        """The answer was cut off and brackets were closed after its last complete element."""
        return "truncated" in self.repairs


def interpret(content: str | None, finish_reason: str | None, schema: Mapping[str, Any] | None,
              validate: Callable[[Any], object] | None) -> tuple[Any, tuple[str, ...], str | None]:
    """(value, repairs, problem) of one answer: problem is None when the value is usable."""
    if content is None or not content.strip():
        why = f" (finish_reason {finish_reason})" if finish_reason not in (None, "stop") else ""
        return None, (), f"the answer was empty{why}"
    accept = (lambda v: not _schema_errors(v, schema)) if schema is not None else None
    try:
        value, repairs = _extract(content, accept)
    except ValueError as exc:
        cut = " (the answer was cut off: finish_reason length)" if finish_reason == "length" else ""
        return None, (), f"{exc}{cut}"
    if schema is not None and (errors := _schema_errors(value, schema)):
        more = f" (and {len(errors) - 5} more)" if len(errors) > 5 else ""
        return None, repairs, "it does not match the schema: " + "; ".join(errors[:5]) + more
    if validate is not None:
        try:
            verdict = validate(value)
        except Exception as exc:  # the caller's check, whatever it raises, is a verdict on the answer
            return None, repairs, f"it was rejected: {type(exc).__name__}: {exc}"
        if verdict is False:
            return None, repairs, "it was rejected by the validator"
        if isinstance(verdict, str) and verdict:
            return None, repairs, f"it was rejected: {verdict}"
    return value, repairs, None


# Validation (jsonschema), in messages that name the place: "$.diseases[0]: expected string, got integer 1".

def validate_json(value: Any, schema: Mapping[str, Any]) -> list[str]:
    """Where value breaks schema (JSON Schema 2020-12); an empty list when it conforms.

    >>> validate_json({"name": 3}, {"type": "object", "required": ["name", "ids"]})
    ['$: missing required property "ids"']
    """
    if not isinstance(schema, Mapping):
        return []
    errors = []
    for error in _validator(json.dumps(schema, sort_keys=True)).iter_errors(value):
        errors.append(_message(error))
        if len(errors) > 20:
            break
    return errors


@functools.lru_cache(maxsize=64)
def _validator(schema: str):
    from jsonschema import Draft202012Validator

    return Draft202012Validator(json.loads(schema))


def _message(error) -> str:
    path = "$" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error.absolute_path)
    if error.validator == "type":
        wanted = error.validator_value
        names = [wanted] if isinstance(wanted, str) else list(wanted)
        shown = repr(error.instance) if len(repr(error.instance)) <= 40 else repr(error.instance)[:37] + "..."
        return f"{path}: expected {' or '.join(names)}, got {_kind(error.instance)} {shown}"
    if error.validator == "required":
        missing = [n for n in error.validator_value if n not in error.instance and repr(n) in error.message]
        return f'{path}: missing required property "{missing[0] if missing else error.message}"'
    return f"{path}: {error.message}"


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int) or (isinstance(value, float) and value.is_integer()):
        return "integer"
    return {float: "number", str: "string", list: "array", dict: "object"}.get(type(value), type(value).__name__)


def _schema_errors(value: Any, schema: Mapping[str, Any]) -> list[str]:
    try:
        return validate_json(value, schema)
    except RecursionError:
        return ["$: nested too deeply to check"]


# Finding the JSON in an answer.

def _loads(text: str) -> Any:
    try:
        return json.loads(text, strict=False)
    except RecursionError:
        raise ValueError("nested too deeply") from None


def extract_json(text: str) -> Any:
    """The JSON value in a model's answer: fenced, wrapped in prose, or slightly broken; ValueError if none.

    >>> extract_json("The answer is {'name': 'Marfan syndrome', 'score': 0.9} as requested.")
    {'name': 'Marfan syndrome', 'score': 0.9}
    >>> extract_json('{"ids": ["a", "b", "c')  # cut off: closed after the last complete element
    {'ids': ['a', 'b']}
    """
    return _extract(text, None)[0]


def _extract(text: str, accept: Callable[[Any], bool] | None) -> tuple[Any, tuple[str, ...]]:
    if len(text) > MAX_PARSE_CHARS:
        text = text[:MAX_PARSE_CHARS]
    blocks = [m.group(1) for m in _FENCE.finditer(text)][:10]
    sources = [(block, ("code fence",)) for block in blocks] + [(text, ())]
    first: tuple[Any, tuple[str, ...]] | None = None
    first_error = ""
    work = [MAX_PARSE_CHARS]  # brackets and quotes the scanner may visit in all, against hostile input
    for source, repairs in sources:
        for value, fixes, error in _parses(source, work):
            if error:
                first_error = first_error or error
                continue
            found = (value, (*repairs, *fixes))
            if accept is None or accept(value):
                return found
            first = first or found
    if first is not None:
        return first
    raise ValueError(first_error or "the answer holds no JSON object or array")


def _parses(text: str, work: list[int]) -> Iterator[tuple[Any, tuple[str, ...], str]]:
    """Candidate values in text, best first: the whole text, then each bracketed span (repaired if need be).

    Yields (value, repairs, "") or (None, (), why-not).
    """
    stripped = text.strip()
    try:
        yield _loads(stripped), (), ""
    except ValueError:
        pass
    position = 0
    cut_off = False  # a span ran to the end: later spans lie inside it, and only whole ones are answers
    for _ in range(20):
        opening = _OPEN.search(text, position)
        if opening is None or work[0] <= 0:
            return
        start = opening.start()
        end, closed, depth = _balanced_end(text, start, work)
        position = start + 1
        if cut_off and not closed:
            continue
        cut_off = cut_off or not closed
        span = text[start:end]
        around = ("surrounding text",) if text[:start].strip() or text[end:].strip() else ()
        try:
            yield _loads(span), around, ""
            continue
        except ValueError as exc:
            error = f"the answer is not valid JSON ({exc})"
        if closed:
            repaired = _repair(span, depth, work)
            if repaired is not None:
                yield repaired[0], around + repaired[1], ""
                continue
        else:
            error = "the answer is cut-off JSON that cannot be closed safely"
            closed_text = _close_truncated(span)
            if closed_text is not None:
                value = _loads_or_repair(closed_text, depth, work)
                if value is not None:
                    if not _has_leaf(value[0]):
                        error = "the answer was cut off before its first complete element"
                    else:
                        yield value[0], around + value[1] + ("truncated",), ""
                        continue
        yield None, (), error


def _repair(span: str, depth: int, work: list[int]) -> tuple[Any, tuple[str, ...]] | None:
    """json_repair's reading of a closed span that has one of the breakages it mends, with their names."""
    fixes = _breakages(span)
    if not fixes or len(span) > _MAX_REPAIR_CHARS or depth > _MAX_REPAIR_DEPTH:
        return None
    from json_repair import repair_json

    work[0] -= len(span) * max(depth, 1)  # what json_repair costs, against the same budget
    try:
        return repair_json(span, return_objects=True, skip_json_loads=True), fixes
    except (ValueError, RecursionError):
        return None


def _loads_or_repair(text: str, depth: int, work: list[int]) -> tuple[Any, tuple[str, ...]] | None:
    try:
        return _loads(text), ()
    except ValueError:
        return _repair(text, depth, work)


def _has_leaf(value: Any) -> bool:
    if isinstance(value, dict):
        return any(_has_leaf(v) for v in value.values())
    if isinstance(value, list):
        return any(_has_leaf(v) for v in value)
    return True


_FENCE = re.compile(r"```[ \t]*[A-Za-z0-9_+-]*[ \t]*\r?\n?(.*?)(?:```|\Z)", re.S)
_OPEN = re.compile(r"[\[{]")
_STRUCTURE = re.compile(r"[\[\]{}\"']")
_STRING_END = {'"': re.compile(r'\\.|"', re.S), "'": re.compile(r"\\.|'", re.S)}


def _balanced_end(text: str, start: int, work: list[int]) -> tuple[int, bool, int]:
    """End of the bracketed span opening at start, whether it closes (quotes of both kinds are strings), and
    its deepest nesting."""
    depth = deepest = 0
    position = start
    while True:
        match = _STRUCTURE.search(text, position)
        work[0] -= 1
        if match is None or work[0] <= 0:
            return len(text), False, deepest
        char, at = match.group(), match.start()
        if char in "\"'":
            finder = _STRING_END[char]
            position = at + 1
            while True:
                end = finder.search(text, position)
                if end is None:
                    return len(text), False, deepest
                position = end.end()
                if end.group() == char:
                    break
            continue
        depth += 1 if char in "[{" else -1
        deepest = max(deepest, depth)
        position = at + 1
        if depth == 0:
            return position, True, deepest


#: What json_repair mends, by name: a single-quoted string, a Python literal, a trailing comma, and ``\\'``
#: inside a double-quoted string (JSON strings themselves are skipped).
_BREAKAGE = re.compile(r"""
    (?P<string>"[^"\\]*(?:\\.[^"\\]*)*"?)
  | (?P<single>'[^'\\]*(?:\\.[^'\\]*)*'?)
  | (?P<literal>\b(?:True|False|None)\b)
  | (?P<comma>,(?=\s*[\]}]))
""", re.S | re.X)
_NAMES = {"single": "single quotes", "literal": "Python literals", "comma": "trailing comma",
          "string": "escaped quote"}


def _breakages(text: str) -> tuple[str, ...]:
    """The names of the breakages in a JSON span, in the order they first occur."""
    found = []
    for match in _BREAKAGE.finditer(text):
        kind = match.lastgroup
        if kind != "string" or "\\'" in match.group():
            found.append(_NAMES[kind])
    return tuple(dict.fromkeys(found))


def _ends_escaped(text: str) -> bool:
    if not text.endswith("\\"):
        return False
    return (len(text) - len(text.rstrip("\\"))) % 2 == 1


_TOKEN = re.compile(r"""
    (?P<string>"[^"\\]*(?:\\.[^"\\]*)*(?:"|\\?\Z)|'[^'\\]*(?:\\.[^'\\]*)*(?:'|\\?\Z))
  | (?P<punct>[{}\[\]:,])
  | (?P<number>-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?)
  | (?P<literal>true|false|null|True|False|None)
  | (?P<space>\s+)
  | (?P<other>.)
""", re.S | re.X)


def _close_truncated(text: str) -> str | None:
    """Cut-off JSON made whole: the text up to its last complete element, brackets closed; None if unsafe.

    Only whole elements are kept: a string, number or object cut short inside a list is dropped (an object cut
    short is kept only outside lists, with the members it has, which the schema then judges). Single-quoted
    strings and Python literals count as elements (json_repair mends them afterwards)."""
    stack: list[list[Any]] = []  # [bracket, what comes next (key, colon, value, comma), inside a list?]
    halves = 0  # objects open inside a list: no safe point until they close
    safe: tuple[int, int] | None = None  # (end of the last complete element, brackets open there)

    def push(bracket: str, end: int) -> None:
        nonlocal halves, safe
        in_list = bracket == "{" and any(frame[0] == "[" for frame in stack)
        stack.append([bracket, "key" if bracket == "{" else "value", in_list])
        halves += in_list
        if not halves:
            safe = (end, len(stack))

    def complete(end: int) -> None:
        nonlocal safe
        stack[-1][1] = "comma"
        if not halves:
            safe = (end, len(stack))

    for match in _TOKEN.finditer(text):
        kind, token = match.lastgroup, match.group()
        if kind == "space":
            continue
        if not stack:
            if kind != "punct" or token not in "{[":
                return None
            push(token, match.end())
            continue
        frame = stack[-1]
        if kind == "string":
            if not (len(token) > 1 and token[-1] == token[0] and not _ends_escaped(token[:-1])):
                break  # cut off inside a string
            if frame[0] == "{" and frame[1] == "key":
                frame[1] = "colon"
            elif frame[1] == "value":
                complete(match.end())
            else:
                return None
        elif kind == "punct":
            if token in "{[":
                if frame[1] != "value" or len(stack) >= 200:
                    return None
                push(token, match.end())
            elif token in "}]":
                if frame[0] != ("{" if token == "}" else "[") or frame[1] == "colon":
                    return None
                halves -= stack.pop()[2]
                if not stack:
                    return text[:match.end()]
                complete(match.end())
            elif token == ":":
                if frame[0] != "{" or frame[1] != "colon":
                    return None
                frame[1] = "value"
            else:
                if frame[1] != "comma":
                    return None
                frame[1] = "key" if frame[0] == "{" else "value"
        elif kind in ("number", "literal"):
            if frame[1] != "value":
                return None
            if match.end() >= len(text.rstrip()):
                break  # a number at the very end may be cut short
            complete(match.end())
        else:
            rest = text[match.start():].strip()
            if rest and any(word.startswith(rest) for word in ("true", "false", "null", "True", "False", "None")):
                break
            return None
    if safe is None or not stack:
        return None
    end, depth = safe
    head = text[:end].rstrip().rstrip(",")
    return head + "".join("}" if frame[0] == "{" else "]" for frame in reversed(stack[:depth]))
