"""The Gene Ontology and human genes, added to the ``bio`` KB (``--option go=yes``).

Read from the SQLite files of two Bioconductor annotation packages that Debian
ships (``r-bioc-go.db``: ``GO.sqlite``; ``r-bioc-org.hs.eg.db``:
``org.Hs.eg.sqlite``), so no R is needed:

- ``GO.sqlite``: GOTerm nodes (name, synonyms, definition, aspect) and the
  ``goIsA`` / ``partOf`` / ``regulates`` / ``positivelyRegulates`` /
  ``negativelyRegulates`` edges between them;
- ``org.Hs.eg.sqlite``: Gene nodes (NCBI Gene id, symbol, aliases, full name)
  and gene → GO annotations (``enables`` / ``involvedIn`` / ``locatedIn`` by
  aspect) with their evidence codes. HPO's genes are the same nodes: both are
  keyed by NCBI Gene id (``NCBIGene:2263``).

The option's value says where the files are: ``go=DIR`` (a folder holding both
files, or the tree ``dpkg-deb -x`` extracted), or ``go=yes`` to find them in
:data:`DEFAULT_CACHE`, then in an installed R library, and otherwise to fetch
the packages with ``apt-get download`` and extract them into the cache.

>>> ASPECT_RELATION["MF"], PARENT_RELATION["part of"]
('enables', 'partOf')
"""

from __future__ import annotations

import re
import shutil
import sqlite3
import subprocess
import tempfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from ...core.errors import InputError, KqeError
from ..records import Edge, ImportReport, Node

#: Debian package → the SQLite file it holds (under usr/lib/R/site-library/<R package>/extdata/).
PACKAGES = {"r-bioc-go.db": "GO.sqlite", "r-bioc-org.hs.eg.db": "org.Hs.eg.sqlite"}
#: Where ``go=yes`` keeps the extracted files (relative to the working directory, like the LLM cache).
DEFAULT_CACHE = Path("data") / "cache" / "bioc"
#: R libraries where installed packages (``apt-get install r-bioc-go.db``) keep the files.
R_LIBRARIES = (Path("/usr/lib/R/site-library"), Path("/usr/local/lib/R/site-library"), Path("/usr/lib/R/library"))
R_PACKAGE = {"GO.sqlite": "GO.db", "org.Hs.eg.sqlite": "org.Hs.eg.db"}

#: GO.db's relationship_type → relation of bio.ttl (go-basic has only these).
PARENT_RELATION = {
    "isa": "goIsA",
    "part of": "partOf",
    "regulates": "regulates",
    "positively regulates": "positivelyRegulates",
    "negatively regulates": "negativelyRegulates",
}
#: Annotation aspect → relation, as the GO annotation files name gene products' links to each aspect.
ASPECT_RELATION = {"MF": "enables", "BP": "involvedIn", "CC": "locatedIn"}
ASPECT_NAME = {"MF": "molecular function", "BP": "biological process", "CC": "cellular component"}
#: "No biological data available": an annotation to an aspect's root that says nothing is known.
NO_DATA = "ND"

LICENCE = (
    "Gene Ontology (http://geneontology.org, CC BY 4.0) and NCBI Gene (public domain), from the Bioconductor "
    "packages GO.db and org.Hs.eg.db (Artistic-2.0) as packaged by Debian (r-bioc-go.db, r-bioc-org.hs.eg.db)."
)


@dataclass(frozen=True)
class GoFiles:
    go: Path
    org: Path


# ------------------------------------------------------------ where the files are


def _find(folder: Path, name: str) -> Path | None:
    direct = folder / name
    if direct.is_file():
        return direct
    return next((p for p in sorted(folder.rglob(name)) if p.is_file()), None)


def _in_folder(folder: Path) -> GoFiles | None:
    found = {name: _find(folder, name) for name in PACKAGES.values()} if folder.is_dir() else {}
    if found and all(found.values()):
        return GoFiles(found["GO.sqlite"], found["org.Hs.eg.sqlite"])
    return None


def _in_r_library() -> GoFiles | None:
    for library in R_LIBRARIES:
        paths = [library / R_PACKAGE[name] / "extdata" / name for name in PACKAGES.values()]
        if all(p.is_file() for p in paths):
            return GoFiles(*paths)
    return None


def fetch(cache: Path) -> GoFiles:
    """Download both Debian packages and extract their SQLite files into ``cache`` (no R, no root needed)."""
    apt, dpkg = shutil.which("apt-get"), shutil.which("dpkg-deb")
    if not apt or not dpkg:
        raise KqeError(_missing(f"apt-get and dpkg-deb are not available to fetch them into {cache}"))
    cache.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=cache, prefix=".fetch-") as tmp:
        work = Path(tmp)
        done = subprocess.run([apt, "download", *PACKAGES], cwd=work, capture_output=True, text=True)
        if done.returncode != 0:
            said = (done.stderr.strip().splitlines() or ["no message"])[-1]
            raise KqeError(_missing(f"`apt-get download {' '.join(PACKAGES)}` failed ({said}; try "
                                    "`apt-get update` first)"))
        for deb in sorted(work.glob("*.deb")):
            done = subprocess.run([dpkg, "-x", str(deb), str(work / "root")], capture_output=True, text=True)
            if done.returncode != 0:
                said = (done.stderr.strip().splitlines() or ["no message"])[-1]
                raise KqeError(_missing(f"`dpkg-deb -x {deb.name}` failed ({said})"))
        for name in PACKAGES.values():
            extracted = _find(work / "root", name)
            if extracted is None:
                raise KqeError(_missing(f"the downloaded packages hold no {name}"))
            extracted.replace(cache / name)  # a rename within the cache: a file is either whole or absent
    return GoFiles(cache / "GO.sqlite", cache / "org.Hs.eg.sqlite")


def _missing(why: str) -> str:
    return (f"cannot get the Gene Ontology files GO.sqlite and org.Hs.eg.sqlite: {why}. Extract them with "
            f"`apt-get download {' '.join(PACKAGES)}` and `dpkg-deb -x PACKAGE.deb DIR`, then pass --option go=DIR")


def locate(option: object, cache: Path = DEFAULT_CACHE) -> GoFiles | None:
    """The files the ``go`` option names; None when it is off (``no``, ``none``, empty)."""
    value = "" if option is None or option is False else str(option).strip()
    if value.lower() in ("", "no", "none", "off", "false", "0"):
        return None
    if value.lower() in ("yes", "true", "on", "1", "auto"):
        return _in_folder(cache) or _in_r_library() or fetch(cache)
    folder = Path(value)
    if not folder.is_dir():
        raise KqeError(f"{folder}: no such folder (option go: a folder holding GO.sqlite and org.Hs.eg.sqlite, "
                       "or yes to find or fetch them)")
    found = _in_folder(folder)
    if found is None:
        absent = [name for name in PACKAGES.values() if _find(folder, name) is None]
        raise KqeError(_missing(f"{folder} holds no {' and no '.join(absent)}"))
    return found


# ------------------------------------------------------------ reading SQLite


def _connect(path: Path, tables: Iterable[str], package: str) -> sqlite3.Connection:
    """A read-only connection; a file that is not the package's SQLite database is an error naming it."""
    try:
        con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        present = {row[0] for row in con.execute("SELECT name FROM sqlite_master WHERE type IN ('table', 'view')")}
    except sqlite3.DatabaseError as exc:
        raise InputError(f"not a readable SQLite database ({exc})", str(path)) from None
    absent = [t for t in tables if t not in present]
    if absent:
        con.close()
        raise InputError(f"no table {', '.join(absent)}; expected the SQLite file of the Debian package {package}",
                         str(path))
    return con


def _rows(con: sqlite3.Connection, path: Path, sql: str) -> list[tuple]:
    try:
        return con.execute(sql).fetchall()
    except sqlite3.DatabaseError as exc:
        raise InputError(f"cannot read ({exc}); is it the package's own file?", str(path)) from None


def metadata(files: GoFiles) -> dict[str, str]:
    """Release dates recorded in the files, for the KB's provenance."""
    out = {"go_file": str(files.go.resolve()), "org_file": str(files.org.resolve()), "go_licence": LICENCE}
    for path, keys in ((files.go, {"GOSOURCEDATE": "go_release"}),
                       (files.org, {"EGSOURCEDATE": "ncbi_gene_release", "GOSOURCEDATE": "go_annotations_release"})):
        con = _connect(path, ("metadata",), "r-bioc-go.db / r-bioc-org.hs.eg.db")
        for name, value in _rows(con, path, "SELECT name, value FROM metadata"):
            if name in keys:
                out[keys[name]] = value
        con.close()
    return out


@dataclass
class _Gene:
    symbol: str
    full_name: str
    aliases: list[str]
    where: str


def _genes(files: GoFiles, report: ImportReport) -> tuple[dict[str, _Gene], dict[tuple[str, str, str], set[str]]]:
    """(NCBI gene number → gene, (gene number, GO id, aspect) → evidence codes), ND annotations left out."""
    path = files.org
    con = _connect(path, ("genes", "gene_info", "alias", "go_bp", "go_mf", "go_cc"), "r-bioc-org.hs.eg.db")
    genes: dict[str, _Gene] = {}
    by_row: dict[int, str] = {}
    for row, number, name, symbol in _rows(con, path, "SELECT g._id, g.gene_id, i.gene_name, i.symbol FROM genes g "
                                                      "JOIN gene_info i ON i._id = g._id ORDER BY g._id"):
        number = str(number).strip()
        if not number.isdigit():
            raise InputError(f"NCBI gene id {number!r} is not a number", f"{path}:genes:{row}")
        genes[number] = _Gene(symbol, name, [], f"{path}:genes:{row}")
        by_row[row] = number
    for row, alias in _rows(con, path, "SELECT _id, alias_symbol FROM alias ORDER BY _id"):
        if row in by_row:
            genes[by_row[row]].aliases.append(alias)
    annotations: dict[tuple[str, str, str], set[str]] = {}
    no_data = 0
    for aspect in ASPECT_RELATION:
        for row, go_id, evidence in _rows(con, path, f"SELECT _id, go_id, evidence FROM go_{aspect.lower()}"):
            if row not in by_row:
                continue
            if evidence == NO_DATA:
                no_data += 1
                continue
            annotations.setdefault((by_row[row], go_id, aspect), set()).add(evidence)
    con.close()
    if no_data:
        report.warn(f"{path}: {no_data} gene annotations with evidence ND (no biological data) not imported")
    return genes, annotations


@dataclass
class _Term:
    id: str
    name: str
    aspect: str
    definition: str
    synonyms: list[str]
    secondary: list[str]
    parents: list[tuple[str, str]]  # (relation, parent GO id)
    where: str


def _terms(files: GoFiles, report: ImportReport) -> dict[str, _Term]:
    path = files.go
    tables = ("go_term", "go_synonym", "go_bp_parents", "go_mf_parents", "go_cc_parents")
    con = _connect(path, tables, "r-bioc-go.db")
    terms: dict[str, _Term] = {}
    by_row: dict[int, str] = {}
    for row, go_id, name, aspect, definition in _rows(
            con, path, "SELECT _id, go_id, term, ontology, definition FROM go_term ORDER BY _id"):
        if aspect not in ASPECT_NAME:  # the root 'all' of GO.db, above the three aspects
            continue
        terms[go_id] = _Term(go_id, name, aspect, definition or "", [], [], [], f"{path}:go_term:{row}")
        by_row[row] = go_id
    for row, synonym, _secondary, like_go_id in _rows(
            con, path, "SELECT _id, synonym, secondary, like_go_id FROM go_synonym ORDER BY _id"):
        if row in by_row:
            term = terms[by_row[row]]
            (term.secondary if like_go_id else term.synonyms).append(synonym)
    unknown: dict[str, int] = {}
    for aspect in ASPECT_NAME:
        for row, parent, kind in _rows(con, path, f"SELECT _id, _parent_id, relationship_type "
                                                  f"FROM go_{aspect.lower()}_parents"):
            if row not in by_row or parent not in by_row:
                continue
            relation = PARENT_RELATION.get(kind)
            if relation is None:
                unknown[kind] = unknown.get(kind, 0) + 1
                continue
            terms[by_row[row]].parents.append((relation, by_row[parent]))
    con.close()
    for kind, n in sorted(unknown.items()):
        report.warn(f"{path}: {n} GO relations of type {kind!r} not imported (bio.ttl has no relation for it)")
    return terms


# ------------------------------------------------------------ records


def with_go(records: Iterable[Node | Edge], files: GoFiles, report: ImportReport,
            limit: int | None = None) -> Iterator[Node | Edge]:
    """The bio records with GO and human genes added; HPO's genes gain their full names and aliases.

    Without a limit every GO term and every gene with a GO annotation is added;
    with one, only HPO's (limited) genes, their annotations' terms and those
    terms' ancestors. Genes come after every other node, so that their aliases
    can be checked against the words of all other names (see :class:`_Words`).
    """
    terms = _terms(files, report)
    genes, annotations = _genes(files, report)
    words = _Words()
    hpo_genes: dict[str, Node] = {}
    for record in records:
        if isinstance(record, Node) and record.type == "Gene":
            hpo_genes[record.id.partition(":")[2]] = record
            continue
        if isinstance(record, Node):
            words.add(record.name, *record.aliases)
        yield record
    if limit is None:
        kept_genes = set(hpo_genes) | {number for number, _, _ in annotations}
        kept_terms = list(terms)
    else:
        kept_genes = set(hpo_genes)
        needed = {go_id for number, go_id, _ in annotations if number in hpo_genes and go_id in terms}
        stack = list(needed)
        while stack:
            for _, parent in terms[stack.pop()].parents:
                if parent not in needed:
                    needed.add(parent)
                    stack.append(parent)
        kept_terms = [t for t in terms if t in needed]

    for go_id in kept_terms:
        term = terms[go_id]
        words.add(term.name, *term.synonyms)
        fields = (("definition", term.definition), ("aspect", ASPECT_NAME[term.aspect]))
        yield Node(id=go_id, type="GOTerm", name=term.name,
                   aliases=tuple(dict.fromkeys(s for s in term.synonyms if s != term.name)),
                   fields=tuple((k, v) for k, v in fields if v), xrefs=tuple(dict.fromkeys(term.secondary)),
                   iri_hint="http://purl.obolibrary.org/obo/" + go_id.replace(":", "_"), where=term.where)
    as_text = 0
    for number in sorted(kept_genes, key=int):
        gene, node = genes.get(number), hpo_genes.get(number)
        if node is None:
            node = Node(id=f"NCBIGene:{number}", type="Gene", name=gene.symbol,
                        iri_hint=f"http://identifiers.org/ncbigene/{number}", where=gene.where)
        if gene is not None:
            aliases = [a for a in dict.fromkeys([gene.symbol, *gene.aliases]) if a and a != node.name]
            names = tuple(a for a in aliases if not words.covers(a))
            others = "; ".join(a for a in aliases if a not in names)
            as_text += len(aliases) - len(names)
            fields = (("fullName", gene.full_name), ("otherSymbols", others))
            node = node._replace(aliases=tuple(dict.fromkeys(node.aliases + names)),
                                 fields=node.fields + tuple((k, v) for k, v in fields if v))
        yield node
    if as_text:
        report.warn(f"{files.org}: {as_text} gene aliases are words of other names (such as T, CELL, KILLER); "
                    "kept as the genes' 'other symbols' text, not as names a request's words link to")

    kept = set(kept_terms)
    for go_id in kept_terms:
        term = terms[go_id]
        for relation, parent in dict.fromkeys(term.parents):
            if parent in kept:
                yield Edge(go_id, relation, parent, where=term.where)
    unknown_terms = 0
    for (number, go_id, aspect), evidence in annotations.items():
        if number not in kept_genes:
            continue
        if go_id not in kept:
            unknown_terms += go_id not in terms
            continue
        yield Edge(f"NCBIGene:{number}", ASPECT_RELATION[aspect], go_id, (("evidence", ", ".join(sorted(evidence))),),
                   where=genes[number].where)
    if unknown_terms:
        report.warn(f"{files.org}: {unknown_terms} gene annotations name GO ids absent from {files.go.name}; skipped")


class _Words:
    """The words of the KB's other names: a gene alias made only of them (NCBI lists T, CELL, KILLER, II, MHC,
    CD8) would turn those words of a phenotype ("CD8-positive T cells") into gene mentions when requests are linked.

    >>> words = _Words(); words.add("Decreased proportion of CD8-positive T cells")
    >>> words.covers("CD8"), words.covers("T"), words.covers("P53")
    (True, True, False)
    """

    def __init__(self) -> None:
        self.words: set[str] = set()

    def add(self, *texts: str) -> None:
        for text in texts:
            self.words.update(_WORD.findall(text.lower()))

    def covers(self, alias: str) -> bool:
        return all(w in self.words for w in _WORD.findall(alias.lower()))


_WORD = re.compile(r"[a-z0-9]+")
