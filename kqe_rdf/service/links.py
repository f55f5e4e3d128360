"""Links from the KB's nodes to an external linked-data KG (``kqe-rdf link``).

For each local node of the chosen classes, its name and aliases are looked up
in any SPARQL 1.1 endpoint (Wikidata/DBpedia-style: ``rdfs:label``,
``skos:prefLabel``, ``skos:altLabel``, classes by ``wdt:P31`` or ``rdf:type``;
``queries/link_candidates.rq``) and each match gets a confidence:

=====================================  ==========
exact label = local name               1.00
label equal up to case                 0.95
through an alias on either side        0.85
=====================================  ==========

times 1.0 when the item has an expected class (``--target-type``), 0.6 when
it has only other classes, 0.9 when it has no class or none is expected;
``--match label+type`` drops items without an expected class. When several
items tie for a node's best score, the confidence is divided among them, so an
ambiguous name is never linked with confidence.

Work is resumable: every node's candidates are appended to
``KB/links/<endpoint>.jsonl`` as soon as its batch is answered, and a new run
skips nodes already there. Requests are rate-limited (``link_rate`` per second)
and retried with backoff on 429/5xx. The KB is served read-only; writing is a
separate, explicit step of the same command (``--write``, the default) that
takes the KB's build lock, opens the store read-write and replaces the
endpoint's named graph in one SPARQL Update, i.e. in one transaction, together
with its PROV-O provenance.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from pyoxigraph import Literal, NamedNode

from ..kb import queries
from ..core.errors import InputError, KqeError
from ..kb.queries import PREFIXES

LINKS_GRAPH = "https://w3id.org/kqe/links/"
LINK = "https://w3id.org/kqe/link#"
PREDICATES = {"exactMatch": PREFIXES["skos"] + "exactMatch", "sameAs": PREFIXES["owl"] + "sameAs"}
MATCH_MODES = ("label", "label+type")
USER_AGENT = "kqe-rdf/0.1 (kqe-rdf link; https://w3id.org/kqe)"


class RateLimiter:
    """At most ``rate`` calls per second: ``wait()`` sleeps until the next call may go.

    >>> now = [0.0]; slept = []
    >>> limiter = RateLimiter(2.0, clock=lambda: now[0], sleep=slept.append)
    >>> limiter.wait(); limiter.wait(); slept
    [0.5]
    """

    def __init__(self, rate: float, clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        if rate <= 0:
            raise KqeError(f"link_rate must be a positive number of requests per second, got {rate!r}")
        self.interval = 1.0 / rate
        self.clock, self.sleep = clock, sleep
        self.next = None

    def wait(self) -> None:
        now = self.clock()
        if self.next is not None and now < self.next:
            self.sleep(self.next - now)
            now = self.next
        self.next = now + self.interval


class Endpoint:
    """A remote SPARQL 1.1 endpoint: SELECT over HTTP, rate-limited, retried, with readable errors."""

    def __init__(self, url: str, rate: float = 2.0, timeout: float = 30.0, retries: int = 3,
                 limiter: RateLimiter | None = None, backoff: float = 1.0) -> None:
        import httpx

        if not url.startswith(("http://", "https://")):
            raise InputError(f"the endpoint must be an http(s) URL of a SPARQL 1.1 query service, got {url!r}")
        self.url = url
        self.limiter = limiter or RateLimiter(rate)
        self.retries, self.backoff = retries, backoff
        self.requests = 0
        self.client = httpx.Client(timeout=timeout, headers={"User-Agent": USER_AGENT,
                                                             "Accept": "application/sparql-results+json"})

    def select(self, query: str) -> list[dict[str, dict]]:
        """The bindings of a SELECT query (SPARQL JSON results)."""
        import httpx

        for attempt in range(self.retries + 1):
            self.limiter.wait()
            self.requests += 1
            try:
                response = self.client.post(self.url, data={"query": query})
            except httpx.HTTPError as exc:
                if attempt < self.retries:
                    time.sleep(self.backoff * 2 ** attempt)
                    continue
                raise KqeError(f"the endpoint {self.url} could not be reached ({exc}); check the URL, "
                               "then run the same command again to resume") from None
            if response.status_code == 429 or response.status_code >= 500:
                if attempt < self.retries:
                    wait = response.headers.get("retry-after", "")
                    time.sleep(float(wait) if wait.isdigit() else self.backoff * 2 ** attempt)
                    continue
            if response.status_code != 200:
                raise KqeError(f"the endpoint {self.url} answered {response.status_code}: {response.text[:300]}")
            try:
                return response.json()["results"]["bindings"]
            except (ValueError, KeyError, TypeError):
                raise KqeError(f"the endpoint {self.url} did not answer with SPARQL JSON results "
                               f"(content type {response.headers.get('content-type')!r})") from None
        raise AssertionError("unreachable")

    def close(self) -> None:
        self.client.close()


@dataclass
class Candidate:
    remote: str
    label: str
    how: str
    classes: list[str] = field(default_factory=list)
    confidence: float = 0.0


@dataclass
class LocalNode:
    iri: str
    name: str
    aliases: list[str] = field(default_factory=list)


def local_nodes(kb, types: Sequence[str] = ()) -> list[LocalNode]:
    """The nodes to link with their names and aliases, in IRI order."""
    classes = sorted(kb.resolve_types(types)) if types else [PREFIXES["kqe"] + "Node"]
    query = queries.with_values(queries.load("link_local_names"), type=[NamedNode(c) for c in classes])
    nodes: dict[str, LocalNode] = {}
    for row in kb.store.query(query, use_default_graph_as_union=True):  # labels come before aliases
        iri, name, is_alias = row["node"].value, row["name"].value, row["alias"].value == "true"
        node = nodes.setdefault(iri, LocalNode(iri, ""))
        if not is_alias and not node.name:
            node.name = name
        elif name != node.name and name not in node.aliases:
            node.aliases.append(name)
    return sorted((n for n in nodes.values() if n.name or n.aliases), key=lambda n: n.iri)


def score(node: LocalNode, candidates: Iterable[Candidate], targets: set[str], mode: str) -> list[Candidate]:
    """Confidence for each candidate item of one node (see the module docstring); best first."""
    best: dict[str, Candidate] = {}
    for c in candidates:
        exact_name = c.label == node.name
        if c.how == "label" and exact_name:
            base = 1.0
        elif c.how == "label" and c.label.casefold() == node.name.casefold():
            base = 0.95
        else:
            base = 0.85
        if targets:
            has_target = bool(targets.intersection(c.classes))
            if mode == "label+type" and not has_target:
                continue
            factor = 1.0 if has_target else (0.6 if c.classes else 0.9)
        else:
            factor = 0.9
        c = Candidate(c.remote, c.label, c.how, sorted(set(c.classes)), round(base * factor, 4))
        if c.remote not in best or c.confidence > best[c.remote].confidence:
            best[c.remote] = c
    ranked = sorted(best.values(), key=lambda c: (-c.confidence, c.remote))
    if ranked:
        top = ranked[0].confidence
        ties = sum(1 for c in ranked if c.confidence == top)
        for c in ranked:
            if c.confidence == top and ties > 1:
                c.confidence = round(c.confidence / ties, 4)
    return ranked


def _texts(node: LocalNode, language: str) -> list[str]:
    names = [n for n in [node.name, *node.aliases] if n]
    return list(dict.fromkeys(names + [n.lower() for n in names]))


def lookup(endpoint: Endpoint, batch: list[LocalNode], language: str) -> dict[str, list[Candidate]]:
    """Candidates per local node IRI for one batch of nodes (one request)."""
    owners: dict[str, set[str]] = defaultdict(set)
    terms = []
    for node in batch:
        for text in _texts(node, language):
            owners[text].add(node.iri)
            terms.append(Literal(text, language=language) if language else Literal(text))
            if language:
                terms.append(Literal(text))
    query = queries.with_values(queries.load("link_candidates"), text=terms)
    found: dict[tuple[str, str, str, str], set[str]] = defaultdict(set)
    for row in endpoint.select(query):
        try:
            text, item, how = row["text"]["value"], row["item"]["value"], row["how"]["value"]
        except KeyError:
            continue
        if row["item"].get("type") != "uri":
            continue
        cls = row.get("class", {}).get("value")
        for iri in owners.get(text, ()):
            key = (iri, item, text, how)
            if cls:
                found[key].add(cls)
            else:
                found.setdefault(key, set())
    out: dict[str, list[Candidate]] = defaultdict(list)
    for (iri, item, text, how), classes in found.items():
        out[iri].append(Candidate(item, text, how, sorted(classes)))
    return out


def slug(url: str) -> str:
    """A file and graph name for an endpoint: readable host plus a short hash."""
    host = re.sub(r"[^a-z0-9]+", "-", re.sub(r"^https?://", "", url.lower())).strip("-")[:40]
    return f"{host}-{hashlib.sha1(url.encode()).hexdigest()[:8]}"


@dataclass
class LinkRun:
    """What one ``kqe-rdf link`` run did (``as_dict`` for ``--json``)."""

    endpoint: str
    progress_file: str
    graph: str
    nodes: int = 0
    done_before: int = 0
    looked_up: int = 0
    requests: int = 0
    with_candidates: int = 0
    accepted: int = 0
    written: bool = False
    examples: list[dict] = field(default_factory=list)

    def as_dict(self) -> dict:
        return asdict(self)


def _read_progress(path: Path, header: dict) -> dict[str, list[dict]]:
    done: dict[str, list[dict]] = {}
    if not path.is_file():
        return done
    with open(path, encoding="utf-8") as lines:
        for number, line in enumerate(lines):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                break  # a line cut by an interruption: everything before it is kept
            if number == 0:
                if record != header:
                    raise KqeError(f"{path} was made with other options ({record}); run with --restart to "
                                   "start over, or with the same options to resume")
                continue
            done[record["node"]] = record["candidates"]
    return done


def _drop_cut_line(path: Path) -> None:
    """A run killed mid-write can leave half a line at the end; cut it off, or every later run would append
    after it and its records would never be read back."""
    if not path.is_file() or path.stat().st_size == 0:
        return
    with open(path, "rb+") as handle:
        handle.seek(-1, 2)
        if handle.read(1) != b"\n":
            handle.seek(0)
            handle.truncate(handle.read().rfind(b"\n") + 1)


def find_links(kb, url: str, types: Sequence[str] = (), mode: str = "label", targets: Sequence[str] = (),
               language: str = "en", limit: int | None = None, settings=None, restart: bool = False,
               batch_size: int = 20, endpoint: Endpoint | None = None, progress=None) -> LinkRun:
    """Look up candidates for the KB's nodes at ``url``; resumable (see the module docstring)."""
    settings = settings or kb.settings
    if mode not in MATCH_MODES:
        raise InputError(f"--match must be one of {', '.join(MATCH_MODES)}, got {mode!r}")
    if mode == "label+type" and not targets:
        raise InputError("--match label+type needs the external class to expect: --target-type IRI "
                         "(e.g. http://www.wikidata.org/entity/Q12136 for disease)")
    name = slug(url)
    path = kb.path / "links" / f"{name}.jsonl"
    header = {"endpoint": url, "types": sorted(types), "match": mode, "targets": sorted(targets),
              "language": language}
    if restart and path.exists():
        path.unlink()
    _drop_cut_line(path)
    done = _read_progress(path, header)
    nodes = local_nodes(kb, types)
    run = LinkRun(url, str(path), LINKS_GRAPH + name, nodes=len(nodes), done_before=len(done))
    todo = [n for n in nodes if n.iri not in done]
    if limit is not None:
        todo = todo[:limit]
    own = endpoint is None
    endpoint = endpoint or Endpoint(url, settings.link_rate, settings.link_timeout)
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        with open(path, "a", encoding="utf-8") as out:
            if path.stat().st_size == 0:
                out.write(json.dumps(header) + "\n")
            for start in range(0, len(todo), batch_size):
                batch = todo[start:start + batch_size]
                found = lookup(endpoint, batch, language)
                for node in batch:
                    ranked = score(node, found.get(node.iri, []), set(targets), mode)
                    record = {"node": node.iri, "name": node.name, "candidates": [asdict(c) for c in ranked]}
                    out.write(json.dumps(record, ensure_ascii=False) + "\n")
                    done[node.iri] = record["candidates"]
                out.flush()
                run.looked_up += len(batch)
                if progress:
                    progress(len(batch))
    finally:
        run.requests = endpoint.requests
        if own:
            endpoint.close()
    run.with_candidates = sum(1 for c in done.values() if c)
    return run


def accepted_links(progress_file: Path, min_confidence: float) -> list[tuple[str, dict]]:
    """(local IRI, best candidate) for every node whose best candidate reaches ``min_confidence``."""
    out = []
    with open(progress_file, encoding="utf-8") as lines:
        next(lines, None)
        for line in lines:
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                break
            best = record["candidates"][0] if record["candidates"] else None
            if best and best["confidence"] >= min_confidence:
                out.append((record["node"], best))
    return out


def link_quads(graph: str, url: str, links: list[tuple[str, dict]], predicate: str, started: datetime,
               command: str) -> list[list]:
    """The rows (graph, subject, predicate, object) written: each link, its reified statement with the
    confidence, and the PROV-O activity that made the graph."""
    rdf, rdfs, prov, xsd = PREFIXES["rdf"], PREFIXES["rdfs"], PREFIXES["prov"], PREFIXES["xsd"]
    g = NamedNode(graph)
    activity = NamedNode(f"{graph}#activity-{started.strftime('%Y%m%dT%H%M%SZ')}")
    now = Literal(datetime.now(timezone.utc).isoformat(timespec="seconds"), datatype=NamedNode(xsd + "dateTime"))
    begun = Literal(started.isoformat(timespec="seconds"), datatype=NamedNode(xsd + "dateTime"))
    a = NamedNode(rdf + "type")
    rows = [[g, g, a, NamedNode(prov + "Entity")], [g, g, NamedNode(prov + "wasGeneratedBy"), activity],
            [g, g, NamedNode(prov + "generatedAtTime"), now],
            [g, activity, a, NamedNode(prov + "Activity")], [g, activity, NamedNode(prov + "used"), NamedNode(url)],
            [g, activity, NamedNode(prov + "startedAtTime"), begun], [g, activity, NamedNode(prov + "endedAtTime"), now],
            [g, activity, NamedNode(prov + "wasAssociatedWith"), NamedNode(PREFIXES["kqe"] + "kqe-rdf")],
            [g, activity, NamedNode(rdfs + "comment"), Literal(command)]]
    p = NamedNode(predicate)
    for i, (local, best) in enumerate(links):
        s, o = NamedNode(local), NamedNode(best["remote"])
        statement = NamedNode(f"{graph}#link-{i}")
        rows += [[g, s, p, o], [g, statement, a, NamedNode(rdf + "Statement")],
                 [g, statement, NamedNode(rdf + "subject"), s], [g, statement, NamedNode(rdf + "predicate"), p],
                 [g, statement, NamedNode(rdf + "object"), o],
                 [g, statement, NamedNode(LINK + "confidence"),
                  Literal(f"{best['confidence']:.4f}", datatype=NamedNode(xsd + "decimal"))],
                 [g, statement, NamedNode(LINK + "matchedLabel"), Literal(best["label"])],
                 [g, statement, NamedNode(LINK + "matchedBy"), Literal(best["how"])],
                 [g, statement, NamedNode(prov + "wasGeneratedBy"), activity]]
    return rows


def write_links(kb_path: Path, graph: str, rows: list[list]) -> None:
    """Replace the links graph in the KB's store: one SPARQL Update (one transaction) under the build lock."""
    from pyoxigraph import Store

    from ..kb.layout import kb_lock

    update = queries.with_values(queries.load_update("link_write"), graph=[NamedNode(graph)])
    update = queries.with_rows(update, ["g", "s", "p", "o"], rows)
    with kb_lock(kb_path):
        try:
            store = Store(str(kb_path / "store"))
        except OSError as exc:
            raise KqeError(f"cannot open {kb_path / 'store'} for writing ({exc}); stop `kqe-rdf serve "
                           "--update-token` or any other writer of this KB, then run the command again") from None
        try:
            store.update(update)
            store.flush()
        finally:
            del store
