"""Links from the KB's nodes to an external linked-data KG (``kqe-rdf link``, :func:`link`).

Each local node of the chosen classes is looked up in any SPARQL 1.1 endpoint
(Wikidata/DBpedia-style), identifiers first:

1. with ``--id-property P492=OMIM``, a node whose identifier or cross-reference
   is ``OMIM:154700`` finds the items with ``wdt:P492 "154700"``
   (``queries/link_identifiers.rq``); a node found so (in an expected class, when
   one is named) is not looked up by name;
2. its name and aliases find items by ``rdfs:label``, ``skos:prefLabel`` or
   ``skos:altLabel`` (``queries/link_candidates.rq``). An endpoint compares
   literals exactly (that is what its label index does), so each name is sent in
   the spellings a KG may give it (as written, lower case, first letter lowered
   or raised, sentence and title case, NFC, straight or curly apostrophes,
   hyphens as spaces: :func:`spellings`), and an item is kept only when its
   label and the name have the same :func:`label_key` (casefolded, NFKC,
   punctuation and white space collapsed), computed on both sides.

The confidence reads as the chance that the link is right, on the evidence
found:

==================================================  ==========
a shared identifier (``--id-property``)             1.00
the item's label is the node's name, as written     0.95
the same up to case, punctuation and Unicode form   0.90
through an alias on either side                     0.85
==================================================  ==========

times 1.0 when the item is of an expected class (``--target-type``, directly or
through at most ``link_class_depth`` subclass steps: ``P31/P279*``,
``rdf:type/rdfs:subClassOf*``) or when no class is expected, 0.9 when it has no
class, 0.6 when it has only other classes; ``--match label+type`` drops items
without an expected class. When several items tie for a node's best score, the
confidence is divided among them, so an ambiguous name is never linked with
confidence. The default threshold (``link_min_confidence``, 0.8) accepts an
identifier, a label or an alias match of an item of the expected class, and
rejects an alias match of an item with no class (0.765) and any item of another
class.

Work is resumable: every node's candidates are appended to
``KB/links/<endpoint>.jsonl`` as soon as its batch is answered, and a new run
skips nodes already there. Requests are rate-limited (``link_rate`` per second),
time out after ``link_timeout`` seconds and are retried with backoff
(``link_retries``) on timeouts, 429 and 5xx, saying so. The KB is served
read-only; writing is a separate, explicit step of the same command
(``--write``, the default) that takes the KB's build lock, opens the store
read-write and replaces the endpoint's named graph in one SPARQL Update, i.e.
in one transaction, together with its PROV-O provenance.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
import time
import unicodedata
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path

from pyoxigraph import Literal, NamedNode

from ..kb import queries
from ..core.errors import InputError, KqeError
from ..core.progress import Progress
from ..kb.queries import PREFIXES

LINKS_GRAPH = "https://w3id.org/kqe/links/"
LINK = "https://w3id.org/kqe/link#"
PREDICATES = {"exactMatch": PREFIXES["skos"] + "exactMatch", "sameAs": PREFIXES["owl"] + "sameAs"}
MATCH_MODES = ("label", "label+type")
USER_AGENT = "kqe-rdf/0.1 (kqe-rdf link; https://w3id.org/kqe)"
#: Written in a progress file's header: a file of another version (other scores) is not resumed.
PROGRESS_VERSION = 2


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
    """A remote SPARQL 1.1 endpoint: SELECT over HTTP, rate-limited, retried, with readable errors.

    ``notice`` hears of every retry (a hung endpoint is not waited on in silence)."""

    def __init__(self, url: str, rate: float = 2.0, timeout: float = 30.0, retries: int = 3,
                 limiter: RateLimiter | None = None, backoff: float = 1.0,
                 notice: Callable[[str], None] | None = None) -> None:
        import httpx

        if not url.startswith(("http://", "https://")):
            raise InputError(f"the endpoint must be an http(s) URL of a SPARQL 1.1 query service, got {url!r}")
        self.url = url
        self.limiter = limiter or RateLimiter(rate)
        self.timeout, self.retries, self.backoff = timeout, retries, backoff
        self.notice = notice or (lambda message: None)
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
            except httpx.TimeoutException:
                problem = f"did not answer within {self.timeout:g} s (link_timeout, --timeout)"
            except httpx.HTTPError as exc:
                problem = f"could not be reached ({exc or type(exc).__name__})"
            else:
                problem = None
                if response.status_code == 429 or response.status_code >= 500:
                    problem = f"answered {response.status_code}"
            if problem and attempt < self.retries:
                wait = response.headers.get("retry-after", "") if problem.startswith("answered") else ""
                pause = float(wait) if wait.isdigit() else self.backoff * 2 ** attempt
                self.notice(f"the endpoint {self.url} {problem}; trying again in {pause:g} s "
                            f"({attempt + 1} of {self.retries} retries)")
                time.sleep(pause)
                continue
            if problem and not problem.startswith("answered"):
                tries = f", {attempt + 1} tries" if attempt else ""
                raise KqeError(f"the endpoint {self.url} {problem}{tries}; check the URL, then run the same "
                               "command again to resume")
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
    """One external item found for a node: its IRI, the text it was found by (a label, or an identifier's
    value), how (``identifier``, ``label``, ``normalised label``, ``alias``), its direct classes, the expected
    class it is of (``target``, "" for none or none expected) and the confidence."""

    remote: str
    label: str
    how: str
    classes: list[str] = field(default_factory=list)
    confidence: float = 0.0
    target: str = ""


#: The confidence each kind of evidence gives (the module docstring's table).
EVIDENCE = {"identifier": 1.0, "label": 0.95, "normalised label": 0.9, "alias": 0.85}


@dataclass
class LocalNode:
    iri: str
    name: str
    aliases: list[str] = field(default_factory=list)
    identifiers: list[str] = field(default_factory=list)


def local_nodes(kb, types: Sequence[str] = ()) -> list[LocalNode]:
    """The nodes to link with their names, aliases and identifiers, in IRI order."""
    classes = sorted(kb.resolve_types(types)) if types else [PREFIXES["kqe"] + "Node"]
    query = queries.with_values(queries.load("link_local_names"), type=[NamedNode(c) for c in classes])
    nodes: dict[str, LocalNode] = {}
    for row in kb.store.query(query, use_default_graph_as_union=True):
        iri, text, kind = row["node"].value, row["name"].value, row["kind"].value
        node = nodes.setdefault(iri, LocalNode(iri, ""))
        if kind == "id":
            node.identifiers.append(text)
        elif kind == "name" and not node.name:
            node.name = text
        elif text not in node.aliases:
            node.aliases.append(text)
    for node in nodes.values():
        node.aliases = [a for a in node.aliases if a != node.name]
    return sorted((n for n in nodes.values() if n.name or n.aliases), key=lambda n: n.iri)


def label_key(text: str) -> str:
    """What two labels must share to match: NFKC, casefolded, runs of punctuation and space as one space.

    >>> label_key("Fragile X syndrome") == label_key("fragile-X  syndrome") == "fragile x syndrome"
    True
    """
    return " ".join(_KEY_WORD.findall(unicodedata.normalize("NFKC", text).casefold()))


_KEY_WORD = re.compile(r"[^\W_]+")


def spellings(name: str) -> list[str]:
    """The ways a KG may write ``name`` that share its :func:`label_key`, for an exact-literal lookup.

    >>> spellings("Marfan Syndrome")[:4]
    ['Marfan Syndrome', 'marfan syndrome', 'MARFAN SYNDROME', 'Marfan syndrome']
    """
    out: list[str] = []
    for form in dict.fromkeys((name, unicodedata.normalize("NFC", name), unicodedata.normalize("NFKC", name))):
        form = " ".join(form.split())
        for written in dict.fromkeys((form, form.replace("’", "'"), form.replace("'", "’"), form.replace("-", " "))):
            head, rest = written[:1], written[1:]
            out += [written, written.lower(), written.upper(), head.upper() + rest.lower(), head.lower() + rest,
                    head.upper() + rest, " ".join(w[:1].upper() + w[1:] for w in written.split(" "))]
    return [s for s in dict.fromkeys(out) if s and label_key(s) == label_key(name)]


def score(candidates: Iterable[Candidate], targets: set[str], mode: str) -> list[Candidate]:
    """Confidence for each candidate item of one node (see the module docstring); best first."""
    best: dict[str, Candidate] = {}
    for c in candidates:
        factor = 1.0
        if targets:
            if not c.target and mode == "label+type":
                continue
            factor = 1.0 if c.target else (0.6 if c.classes else 0.9)
        c = replace(c, classes=sorted(set(c.classes)), confidence=round(EVIDENCE[c.how] * factor, 4))
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


def _rows(endpoint: Endpoint, query: str) -> Iterable[tuple[dict, str, str | None]]:
    """(row, item IRI, class or None) of the rows that bind an item IRI."""
    for row in endpoint.select(query):
        if row.get("item", {}).get("type") == "uri":
            yield row, row["item"]["value"], row.get("class", {}).get("value")


def lookup(endpoint: Endpoint, batch: list[LocalNode], language: str) -> dict[str, list[Candidate]]:
    """Candidates by name and alias per local node IRI for one batch of nodes (one request)."""
    owners: dict[str, set[tuple[str, bool, str]]] = defaultdict(set)  # spelling → (node, written as, is alias)
    for node in batch:
        for text in [node.name, *node.aliases]:
            for spelling in spellings(text) if text else ():
                owners[spelling].add((node.iri, spelling == text, text != node.name))
    terms = [term for text in owners for term in ((Literal(text, language=language), Literal(text)) if language
                                                  else (Literal(text),))]
    query = queries.with_values(queries.load("link_candidates"), text=terms)
    found: dict[tuple[str, str, str, str], set[str]] = {}
    for row, item, cls in _rows(endpoint, query):
        text, remote_how = row["text"]["value"], row["how"]["value"]
        for iri, as_written, is_alias in owners.get(text, ()):
            how = ("alias" if is_alias or remote_how != "label" else "label" if as_written else "normalised label")
            classes = found.setdefault((iri, item, text, how), set())
            if cls:
                classes.add(cls)
    out: dict[str, list[Candidate]] = defaultdict(list)
    for (iri, item, text, how), classes in found.items():
        out[iri].append(Candidate(item, text, how, sorted(classes)))
    return out


def lookup_identifiers(endpoint: Endpoint, batch: list[LocalNode],
                       properties: Sequence[tuple[str, str]]) -> dict[str, list[Candidate]]:
    """Candidates by identifier per local node IRI (one request): ``properties`` are (property IRI, local
    prefix) pairs, e.g. (wdt:P492, "OMIM") looks up OMIM:154700 as ``wdt:P492 "154700"``."""
    owners: dict[tuple[str, str], set[str]] = defaultdict(set)
    for node in batch:
        for identifier in node.identifiers:
            prefix, sep, value = identifier.partition(":")
            for prop, wanted in properties:
                if sep and value.strip() and prefix.casefold() == wanted.casefold():
                    owners[(prop, value.strip())].add(node.iri)
    if not owners:
        return {}
    query = queries.with_rows(queries.load("link_identifiers"), ["property", "value"],
                              [[NamedNode(p), Literal(v)] for p, v in owners])
    found: dict[tuple[str, str, str], set[str]] = {}
    for row, item, cls in _rows(endpoint, query):
        key = (row["property"]["value"], row["value"]["value"])
        for iri in owners.get(key, ()):
            classes = found.setdefault((iri, item, key[1]), set())
            if cls:
                classes.add(cls)
    out: dict[str, list[Candidate]] = defaultdict(list)
    for (iri, item, value), classes in found.items():
        out[iri].append(Candidate(item, value, "identifier", sorted(classes)))
    return out


class ClassTree:
    """Superclasses of external classes, read one level a request up to ``depth`` steps and kept for the run,
    so that an item typed "rare disease" (a subclass of "disease") is a disease."""

    def __init__(self, endpoint: Endpoint, targets: Iterable[str], depth: int) -> None:
        self.endpoint, self.targets, self.depth = endpoint, set(targets), depth
        self.parents: dict[str, set[str]] = {}

    def mark(self, candidates: Iterable[Candidate]) -> None:
        """Set each candidate's ``target``: the expected class it is of ("" for none)."""
        candidates = list(candidates)
        frontier = {c for cand in candidates for c in cand.classes}
        for _ in range(self.depth):  # one request a level, for the classes not read yet
            self._read(sorted(frontier - self.parents.keys() - self.targets))
            frontier = self._up(frontier)
        for cand in candidates:
            reached, frontier = set(cand.classes), set(cand.classes)
            for _ in range(self.depth):
                frontier = self._up(frontier) - reached
                reached |= frontier
            cand.target = min(reached & self.targets, default="")

    def _up(self, classes: set[str]) -> set[str]:
        """The direct superclasses of ``classes`` (an expected class is not walked past)."""
        return {p for c in classes - self.targets for p in self.parents.get(c, ())}

    def _read(self, classes: list[str]) -> None:
        for start in range(0, len(classes), 200):
            chunk = classes[start:start + 200]
            query = queries.with_values(queries.load("link_superclasses"), **{"class": map(NamedNode, chunk)})
            self.parents.update((c, set()) for c in chunk)
            for row in self.endpoint.select(query):
                if row.get("super", {}).get("type") == "uri":
                    self.parents[row["class"]["value"]].add(row["super"]["value"])


WDT = PREFIXES["wdt"]


def id_property(text: str) -> tuple[str, str]:
    """``P492=OMIM`` → (the property's IRI, the local prefix whose ids it holds); also ``wdt:P492=OMIM`` or a
    full IRI before the ``=``.

    >>> id_property("P492=OMIM")
    ('http://www.wikidata.org/prop/direct/P492', 'OMIM')
    """
    prop, sep, prefix = (part.strip() for part in text.rpartition("=")) if "=" in text else ("", "", "")
    if not sep or not prop or not prefix:
        raise InputError(f"--id-property takes PROPERTY=PREFIX, e.g. P492=OMIM (the endpoint's property holds "
                         f"what follows the prefix in the KB's ids, 154700 of OMIM:154700); got {text!r}")
    if re.fullmatch(r"P\d+", prop):
        return WDT + prop, prefix
    if prop.startswith("wdt:"):
        return WDT + prop[4:], prefix
    try:
        return queries.expand_curie(prop), prefix
    except ValueError as exc:
        raise InputError(f"--id-property {text!r}: {exc}") from None


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
    #: Every accepted link: the node, its name and its best candidate (remote, label, how, confidence …).
    links: list[dict] = field(default_factory=list)

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
                    raise KqeError(f"{path} was made with other options or by an earlier version ({record}); run "
                                   "with --restart to start over, or with the same options to resume")
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
               batch_size: int = 20, endpoint: Endpoint | None = None, progress: Progress | None = None,
               id_properties: Sequence[tuple[str, str]] = ()) -> LinkRun:
    """Look up candidates for the KB's nodes at ``url``; resumable (see the module docstring)."""
    settings = settings or kb.settings
    progress = progress or Progress.quiet()
    if mode not in MATCH_MODES:
        raise InputError(f"--match must be one of {', '.join(MATCH_MODES)}, got {mode!r}")
    if mode == "label+type" and not targets:
        raise InputError("--match label+type needs the external class to expect: --target-type IRI "
                         "(e.g. http://www.wikidata.org/entity/Q12136 for disease)")
    name = slug(url)
    path = kb.path / "links" / f"{name}.jsonl"
    header = {"version": PROGRESS_VERSION, "endpoint": url, "types": sorted(types), "match": mode,
              "targets": sorted(targets), "language": language}
    if id_properties:
        header["ids"] = sorted(map(list, id_properties))
    if targets:
        header["class_depth"] = settings.link.class_depth
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
    endpoint = endpoint or Endpoint(url, settings.link.rate, settings.link.timeout, settings.link.retries,
                                    notice=progress.note)
    classes = ClassTree(endpoint, targets, settings.link.class_depth)
    fresh = not path.exists()
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        with open(path, "a", encoding="utf-8") as out, progress.task("looking up", len(todo), "nodes") as tick:
            if path.stat().st_size == 0:
                out.write(json.dumps(header) + "\n")
            for start in range(0, len(todo), batch_size):
                batch = todo[start:start + batch_size]
                found = _candidates(endpoint, batch, language, id_properties, classes if targets else None)
                for node in batch:
                    ranked = score(found.get(node.iri, []), set(targets), mode)
                    record = {"node": node.iri, "name": node.name, "candidates": [asdict(c) for c in ranked]}
                    out.write(json.dumps(record, ensure_ascii=False) + "\n")
                    done[node.iri] = record["candidates"]
                out.flush()
                run.looked_up += len(batch)
                tick(len(batch))
    except BaseException:
        if fresh and not run.looked_up:  # nothing to resume: no progress file (of these options) is left behind
            _remove_progress(path)
        raise
    finally:
        run.requests = endpoint.requests
        if own:
            endpoint.close()
    run.with_candidates = sum(1 for c in done.values() if c)
    return run


def _remove_progress(path: Path) -> None:
    """A progress file that holds no node, and the links folder if nothing else is in it."""
    path.unlink(missing_ok=True)
    with contextlib.suppress(OSError):
        path.parent.rmdir()


def _candidates(endpoint: Endpoint, batch: list[LocalNode], language: str, id_properties: Sequence[tuple[str, str]],
                classes: ClassTree | None) -> dict[str, list[Candidate]]:
    """Every candidate of a batch's nodes, identifiers first: a node with an identifier match (of an expected
    class, when one is named) is not looked up by name."""
    found = dict(lookup_identifiers(endpoint, batch, id_properties)) if id_properties else {}
    if classes:
        classes.mark(c for cands in found.values() for c in cands)
    by_name = [n for n in batch if not any(c.target or not classes for c in found.get(n.iri, ()))]
    if by_name:
        named = lookup(endpoint, by_name, language)
        if classes:
            classes.mark(c for cands in named.values() for c in cands)
        for iri, cands in named.items():
            found[iri] = found.get(iri, []) + cands
    return found


def accepted_links(progress_file: Path, min_confidence: float) -> list[tuple[str, dict]]:
    """(local IRI, best candidate with the node's ``name``) for every node whose best candidate reaches
    ``min_confidence``."""
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
                out.append((record["node"], {"name": record["name"], **best}))
    return out


def link(kb, endpoint: str, types: Sequence[str] = (), match: str = "label", targets: Sequence[str] = (),
         id_properties: Sequence[str] = (), predicate: str = "exactMatch", language: str = "en",
         limit: int | None = None, restart: bool = False, write: bool = True,
         progress: Progress | None = None) -> LinkRun:
    """Link ``kb``'s nodes to the items of a SPARQL endpoint, as ``kqe-rdf link`` does: look them up
    (resumably), accept the candidates that reach ``link_min_confidence`` and, with ``write``, store them in
    the KB's links graph. The KB's settings give the rate, timeout and threshold.

    ``run = link(kb, "https://query.wikidata.org/sparql", ["Disease"], targets=[WD + "Q12136"],
    id_properties=["P492=OMIM"])``; then ``run.links`` lists every accepted link."""
    if predicate not in PREDICATES:
        raise InputError(f"the predicate must be one of {', '.join(PREDICATES)}, got {predicate!r}")
    started = datetime.now(timezone.utc)
    properties = [id_property(p) for p in id_properties]
    run = find_links(kb, endpoint, types, match, targets, language, limit, kb.settings, restart, progress=progress,
                     id_properties=properties)
    accepted = accepted_links(Path(run.progress_file), kb.settings.link.min_confidence)
    run.accepted = len(accepted)
    run.links = [{"node": iri, **best} for iri, best in accepted]
    if write and accepted:
        command = " ".join(["kqe-rdf link --endpoint", endpoint, "--match", match, *(f"--type {t}" for t in types),
                            *(f"--target-type {t}" for t in targets), *(f"--id-property {p}" for p in id_properties),
                            "--predicate", predicate])
        write_links(kb.path, run.graph, link_quads(run.graph, endpoint, accepted, PREDICATES[predicate], started,
                                                   command))
        run.written = True
    return run


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
