"""Running SPARQL against a KB with errors people can read.

pyoxigraph reports syntax errors as a position plus the grammar's expected
character classes; we turn that into the offending line with a caret and the
likely cause (unknown prefix, unbound SELECT variable, misspelt keyword).
Common prefixes (``rdfs:``, ``kqe:``, the KB's domain prefixes) are predeclared.
"""

from __future__ import annotations

import difflib
import re

from ..core.errors import SparqlError

_POSITION = re.compile(r"error at (\d+):(\d+): (.*)", re.S)
_FORMS = ["SELECT", "CONSTRUCT", "ASK", "DESCRIBE"]
_UPDATES = ["INSERT", "DELETE", "WITH", "LOAD", "CLEAR", "DROP", "CREATE", "ADD", "MOVE", "COPY"]
_QUOTED = re.compile(r'"([^"]+)"|\b([A-Z]{2,})\b')


def explain_syntax_error(query: str, message: str) -> str:
    match = _POSITION.match(message)
    if not match:
        return f"invalid SPARQL: {message}"
    line_no, col_no, detail = int(match[1]), int(match[2]), match[3]
    lines = query.splitlines() or [""]
    line = lines[min(line_no, len(lines)) - 1]
    caret = " " * max(col_no - 1, 0) + "^"
    word = re.match(r"[\w:.-]*", line[max(col_no - 1, 0):])
    near = word.group(0) if word else ""
    body = re.sub(r"(?is)^\s*((PREFIX\s+[\w-]*:\s*<[^>]*>|BASE\s*<[^>]*>)\s*)*", "", query)
    first = (re.match(r"\w+", body) or [""])[0]
    if first and first.upper() in _UPDATES:
        cause = "this is a SPARQL update; only queries (SELECT, CONSTRUCT, ASK, DESCRIBE) run here — the KB is read-only"
    elif first and first.upper() not in _FORMS:
        close = difflib.get_close_matches(first.upper(), _FORMS, n=1)
        hint = f" (did you mean {close[0]}?)" if close else ""
        cause = f"a query starts with SELECT, CONSTRUCT, ASK or DESCRIBE after its PREFIX lines, not {first!r}{hint}"
    elif "Prefix not found" in detail:
        before = line[: max(col_no - 1, 0)]
        prefix = re.search(r"([A-Za-z][\w-]*)?:[\w-]*$", before)
        name = prefix.group(1) if prefix and prefix.group(1) else ""
        cause = f"unknown prefix '{name}:' — declare it with PREFIX {name}: <...>"
    elif "variable that is unbound" in detail:
        # Reported at the end of the query, so it must be checked before the end-of-input guess below.
        cause = "a selected variable is not bound: with GROUP BY, select only grouped variables or aggregates"
    elif line_no >= len(lines) and col_no > len(line.rstrip()):
        cause = "the query ends before it is complete: check for a missing '}' or ')' or an unfinished expression"
    else:
        wanted = [a or b for a, b in _QUOTED.findall(detail) if (a or b) not in ("IF", "TZ")]
        cause = ("expected " + ", ".join(dict.fromkeys(wanted))) if wanted else "unexpected input"
        if near:
            cause += f" but found {near!r}"
    return f"SPARQL syntax error at line {line_no}, column {col_no}: {cause}\n  {line}\n  {caret}"


def run_query(store, query: str, prefixes: dict[str, str] | None = None, **options):
    """``store.query`` with readable errors; returns pyoxigraph's result object."""
    if not query.strip():
        raise SparqlError("empty SPARQL query")
    try:
        return store.query(query, prefixes=prefixes, use_default_graph_as_union=True, **options)
    except SyntaxError as exc:
        raise SparqlError(explain_syntax_error(query, str(exc))) from None
    except (OSError, ValueError, RuntimeError) as exc:  # pyoxigraph raises RuntimeError for bad substitutions
        raise SparqlError(f"SPARQL evaluation failed: {exc}") from None
