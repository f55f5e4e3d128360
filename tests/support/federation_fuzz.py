"""Generated SERVICE and LOAD calls hidden by every trick that made two SPARQL readers disagree (issue 37).

:func:`cases` draws queries and updates (seeded, so a failing case is reproduced by its number) that call a
canary endpoint, wrapped in what desynchronised the guard's lexer from Oxigraph's in three rounds of
bypasses: ``\\u`` and ``\\U`` escapes in keywords, IRIs, strings and prefixed names; comments ended by a line
feed, a carriage return or nothing; strings in the four quote kinds holding quotes, ``#``, ``<`` and escapes;
whitespace or none around the keywords, in any letter case; keywords glued to prefixed names whose prefix
stands for an allowed endpoint.

:func:`oxigraph_calls` is the oracle: an unguarded pyoxigraph store runs the text and the canary says whether
it was called. The guarded server and ``kqe-rdf sparql`` must never call it (tests/service/test_federation_fuzz.py
runs a few hundred cases, bench/federation_fuzz.py thousands).
"""

from __future__ import annotations

import random
from dataclasses import dataclass


@dataclass(frozen=True)
class Case:
    number: int
    kind: str  # "query" or "update"
    text: str


def _escape_char(rng: random.Random, ch: str) -> str:
    return f"\\u{ord(ch):04X}" if rng.random() < 0.7 else f"\\U{ord(ch):08x}"


def _keyword(rng: random.Random, word: str) -> str:
    """``word`` in a random letter case, some letters written as \\u or \\U escapes."""
    out = []
    for ch in word:
        ch = ch.upper() if rng.random() < 0.5 else ch.lower()
        out.append(_escape_char(rng, ch) if rng.random() < 0.03 else ch)
    return "".join(out)


def _ws(rng: random.Random, may_be_empty: bool = True) -> str:
    choices = [" ", "  ", "\t", "\n", "\r", "\r\n", " # a comment\n", " # c\r", ' #"\n', " #'\n", " #\u0022\n",
               " # SERVICE <urn:x> {\n"]
    if may_be_empty:
        choices += ["", ""]
    return rng.choice(choices)


def _iri(rng: random.Random, iri: str) -> str:
    """``<iri>``, some of its characters written as escapes."""
    return "<" + "".join(_escape_char(rng, ch) if rng.random() < 0.1 else ch for ch in iri) + ">"


_NOISE = [
    'BIND("p\\u0022q" AS ?z{n})',
    "BIND('p\\u0027q' AS ?z{n})",
    'BIND("""a " b "" c""" AS ?z{n})',
    "BIND('''a ' b '' c''' AS ?z{n})",
    'BIND("# not a comment" AS ?z{n})',
    "BIND('<' AS ?z{n})",
    'BIND("\\\\" AS ?z{n})',
    'BIND("\\"" AS ?z{n})',
    'BIND("SERVICE <{t}/in-a-string> {{ }}" AS ?z{n})',
    "VALUES ?v{n} {{ <urn:x\\u0041#> }}",
    "VALUES ?v{n} {{ <urn:x\\u0023y> }}",
    'VALUES ?v{n} {{ "a\\U00000022b" }}',
    "FILTER(?o{n} != <urn:a\\u003E)",
    "OPTIONAL {{ ?s{n} <urn:p> '''x''' }}",
]


def _noise(rng: random.Random, target: str) -> str:
    pieces = [rng.choice(_NOISE).format(n=rng.randrange(100), t=target) for _ in range(rng.randrange(3))]
    return "".join(p + _ws(rng, False) for p in pieces)


def _endpoint(rng: random.Random, target: str, allowed_prefix: str) -> tuple[str, str]:
    """A way to name the canary after SERVICE or LOAD: (prologue to declare first, the term)."""
    path = rng.choice(["sparql", "x", "data.ttl"])
    form = rng.randrange(6)
    if form == 0:
        return "", _iri(rng, f"{target}/{path}")
    if form == 1:
        name = rng.choice(["c", "x", "ex", "svc", ""])
        local = "".join(_escape_char(rng, ch) if rng.random() < 0.15 else ch for ch in path.replace(".", ""))
        return f"PREFIX {name}: {_iri(rng, target + '/')}\n", f"{name}:{local}"
    if form == 2:  # a keyword glued to a name whose prefix is allowed; Oxigraph may read keyword + x:...
        glued = rng.choice(["SILENTx", "silentx", "SERVICEx", "LOADx", "INTOx", "GRAPHx"])
        return (f"PREFIX {glued}: <{allowed_prefix}> PREFIX x: {_iri(rng, target + '/')}\n",
                f"{glued}:{path.replace('.', '')}")
    if form == 3:  # an empty prefix glued to the keyword before it
        return f"PREFIX : {_iri(rng, target + '/')}\n", f":{path.replace('.', '')}"
    if form == 4:  # the IRI's end hidden by an escape
        return "", "<" + target + "/" + path + _escape_char(rng, ">") + "x>"
    return f"BASE {_iri(rng, target + '/')}\n", f"<{path}>"


def _service(rng: random.Random, target: str, allowed_prefix: str) -> tuple[str, str]:
    prologue, term = _endpoint(rng, target, allowed_prefix)
    silent = _keyword(rng, "SILENT") + _ws(rng, False) if rng.random() < 0.3 else ""
    body = "{" + _ws(rng) + "?s ?p ?o" + _ws(rng) + "}"
    return prologue, _keyword(rng, "SERVICE") + _ws(rng) + silent + term + _ws(rng) + body


def _query(rng: random.Random, target: str, allowed_prefix: str) -> str:
    prologue, call = _service(rng, target, allowed_prefix)
    shape = rng.randrange(5)
    if shape == 1:
        call = "OPTIONAL {" + _ws(rng) + call + _ws(rng) + "}"
    elif shape == 2:
        call = "FILTER EXISTS {" + _ws(rng) + call + _ws(rng) + "}"
    elif shape == 3:
        call = "{ SELECT * {" + _ws(rng) + call + _ws(rng) + "} }"
    head = rng.choice([_keyword(rng, "SELECT") + " *", _keyword(rng, "ASK"),
                       _keyword(rng, "CONSTRUCT") + " { ?s ?p ?o } " + _keyword(rng, "WHERE")])
    where = "{" + _ws(rng) + _noise(rng, target) + call + _ws(rng) + _noise(rng, target) + "}"
    tail = rng.choice(["", " #\"", " #'", ' # """', " LIMIT 1", "\n"])
    return prologue + head + _ws(rng, False) + where + tail


def _update(rng: random.Random, target: str, allowed_prefix: str) -> str:
    before = rng.choice(["", 'INSERT DATA { <urn:a> <urn:b> "p\\u0022q" } ;\n',
                         "INSERT DATA { <urn:a> <urn:b> '#' } ;" + _ws(rng)])
    if rng.random() < 0.5:
        prologue, term = _endpoint(rng, target, allowed_prefix)
        silent = _keyword(rng, "SILENT") + _ws(rng, False) if rng.random() < 0.3 else ""
        into = " " + _keyword(rng, "INTO") + " " + _keyword(rng, "GRAPH") + " <urn:g>" if rng.random() < 0.3 else ""
        return prologue + before + _keyword(rng, "LOAD") + _ws(rng, False) + silent + term + into + \
            rng.choice(["", ' #"', "\n"])
    prologue, call = _service(rng, target, allowed_prefix)
    verb = rng.choice(["INSERT { ?s ?p ?o }", "DELETE { ?s ?p ?o }"])
    return prologue + before + _keyword(rng, verb.split()[0]) + verb[6:] + _ws(rng) + \
        _keyword(rng, "WHERE") + " {" + _ws(rng) + _noise(rng, target) + call + _ws(rng) + "}" + \
        rng.choice(["", ' #"'])


def cases(seed: int, count: int, target: str, allowed: str, updates: float = 0.3) -> list[Case]:
    """``count`` cases calling ``target`` (``http://127.0.0.1:PORT``); ``allowed`` is the allow-listed endpoint
    whose prefix glued names stand for. Case ``i`` of a seed is always the same text."""
    allowed_prefix = allowed.rsplit("/", 1)[0] + "/"
    out = []
    for number in range(count):
        rng = random.Random(seed * 1_000_003 + number)
        kind = "update" if rng.random() < updates else "query"
        text = (_update if kind == "update" else _query)(rng, target, allowed_prefix)
        out.append(Case(number, kind, text))
    return out


def oxigraph_calls(case: Case, canary) -> bool:
    """Whether an unguarded pyoxigraph store, running the case, connects to ``canary`` (the oracle)."""
    import pyoxigraph

    before = canary.connections
    store = pyoxigraph.Store()
    try:
        if case.kind == "update":
            store.update(case.text)
        else:
            result = store.query(case.text)
            if not isinstance(result, pyoxigraph.QueryBoolean):
                list(result)
    except (SyntaxError, OSError, ValueError, RuntimeError):
        pass
    return canary.connections > before  # counted before the canary answers, so before Oxigraph returns


#: The guarded endpoints every case goes to: (name, settings, whether it takes updates). ``{allowed}`` is the
#: allow-listed endpoint (not the canary).
TARGETS = (
    ("default (isolated)", {}, False),
    ("isolation off (verified path)", {"server_network_isolation": False}, False),
    ("allow-listed (verified path)", {"server_service_allow": "{allowed}"}, False),
    ("update token (isolated)", {"server_update_token": "fuzz"}, True),
    ("update token, allow-listed (verified path)", {"server_update_token": "fuzz", "server_service_allow": "{allowed}"},
     True),
)
CLI_TARGETS = (("kqe-rdf sparql (isolated)", {}),
               ("kqe-rdf sparql (verified path)", {"KQE_SERVER_NETWORK_ISOLATION": "false"}))


@dataclass
class Report:
    cases: int = 0
    oxigraph_called: int = 0  # cases whose text makes an unguarded store call the canary
    sent: dict = None  # target -> requests sent
    called: dict = None  # target -> canary connections during its requests
    statuses: dict = None  # target -> {status: count}

    def __post_init__(self) -> None:
        self.sent, self.called, self.statuses = {}, {}, {}

    def record(self, target: str, calls: int, status) -> None:
        self.sent[target] = self.sent.get(target, 0) + 1
        self.called[target] = self.called.get(target, 0) + calls
        counts = self.statuses.setdefault(target, {})
        counts[status] = counts.get(status, 0) + 1


def run_cases(kb_path, work, all_cases: list[Case], canary, allowed: str, cli_every: int = 1) -> Report:
    """Every case through the oracle and each guarded endpoint (a real server on loopback, over a copy of the KB
    at ``kb_path`` made in ``work``), and every ``cli_every``-th query through ``kqe-rdf sparql`` (in process);
    the canary's connections are counted per target."""
    import contextlib
    import shutil
    from pathlib import Path

    import httpx
    from click.testing import CliRunner

    from kqe_rdf.cli import cli
    from kqe_rdf.core.config import Settings
    from kqe_rdf.kb.knowledge_base import KnowledgeBase
    from kqe_rdf.service.app import create_app
    from support.live_servers import serving

    report = Report(cases=len(all_cases))
    with contextlib.ExitStack() as stack:
        urls = {}
        for number, (name, fields, takes_updates) in enumerate(TARGETS):
            folder = Path(work) / f"kb-{number}"
            if not folder.exists():
                shutil.copytree(kb_path, folder)
            settings = Settings(**{k: v.format(allowed=allowed) if isinstance(v, str) else v for k, v in fields.items()})
            urls[name] = (stack.enter_context(serving(create_app(KnowledgeBase.open(folder), settings))),
                          takes_updates)
        for case in all_cases:
            report.oxigraph_called += oxigraph_calls(case, canary)
            for name, (url, takes_updates) in urls.items():
                if case.kind == "update" and not takes_updates:
                    continue
                before = canary.connections
                if case.kind == "update":
                    response = httpx.post(url + "/update", content=case.text.encode("utf-8"), timeout=60,
                                          headers={"Content-Type": "application/sparql-update",
                                                   "Authorization": "Bearer fuzz"})
                else:
                    response = httpx.post(url + "/sparql", content=case.text.encode("utf-8"), timeout=60,
                                          headers={"Content-Type": "application/sparql-query"})
                report.record(name, canary.connections - before, response.status_code)
            if case.kind == "query" and case.number % cli_every == 0:
                for name, env in CLI_TARGETS:
                    before = canary.connections
                    result = CliRunner(env=env).invoke(cli, ["sparql", case.text, "--kb", str(kb_path),
                                                             "--format", "json"])
                    report.record(name, canary.connections - before, f"exit {result.exit_code}")
    return report
