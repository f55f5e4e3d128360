"""CiteSeer papers with titles and abstracts (TAPE's text release) → citation graph.

Source: a folder holding ``citeseer_texts.txt(.gz)`` and ``citeseer.cites``.
The texts file has three lines per paper: the paper id, the title followed by
the abstract on one line, and the research area (Agents, AI, DB, IR, ML,
HCI). The cites file has ``cited<TAB>citing`` lines; each becomes the edge
``citing --cites--> cited``. Self-citations (a paper listed as citing itself)
are skipped and counted; citations of papers without text are skipped and
counted by the writer.

Title and abstract are not separated in the source: :func:`split_title` cuts
where the abstract's first sentence starts (it is a heuristic, right for the
large majority of papers). When it finds no cut, the paper is named by its
first words and the whole line is its abstract; either way no text is lost.
"""

from __future__ import annotations

import re
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

from ...core.errors import InputError, KqeError
from ..records import Edge, ImportReport, Node
from . import Importer
from .reading import numbered_lines

EXAMPLES = 5
ALWAYS = sys.maxsize  # ImportReport.warn limit for summaries, which must never be dropped
AREAS = {
    "Agents": "agents",
    "AI": "artificial intelligence",
    "DB": "databases",
    "IR": "information retrieval",
    "ML": "machine learning",
    "HCI": "human-computer interaction",
}
TEXT_FILES = ("citeseer_texts.txt.gz", "citeseer_texts.txt")
CITES_FILE = "citeseer.cites"

_SMALL = frozenset(
    "a an and as at by for from in into of on or over per the to under via vs vs. versus with without within "
    "between through among toward towards using".split()
)
_DOC_NOUNS = frozenset("paper article chapter thesis report dissertation document work note".split())
_MAX_TITLE_WORDS = 25


def _titlelike(words: list[str]) -> bool:
    content = [w for w in words if w.lower() not in _SMALL and w[:1].isalpha()]
    return not content or sum(w[:1].isupper() for w in content) >= 0.75 * len(content)


def _cut(words: list[str]) -> int:
    """Index of the abstract's first word, or 0 if no cut is found."""
    for i in range(1, min(len(words) - 1, _MAX_TITLE_WORDS + 1)):
        word, prev = words[i], words[i - 1]
        # A standalone full stop or question mark, or "Abstract", after a title-like start.
        if prev in (".", "?", "!") or re.fullmatch(r"Abstract\W*", prev) or (prev.endswith("?") and word[:1].isupper()):
            if _titlelike(words[:i]):
                return i
        # "In this paper ...", or "this paper ..." with its "In" lost by the source.
        if i >= 2 and word in ("this", "This", "In") and i + 1 < len(words):
            if words[i + 1].lower().strip(",") in _DOC_NOUNS | {"this"} and (word == "In" or prev.lower() not in _SMALL):
                return i
        # A capitalised word starting a lower-case sentence: "... Systems Multi-agent systems research is".
        if i < 2 or not word[:1].isupper() or prev.lower() in _SMALL or prev.endswith((":", "-", "—")) or prev == "--":
            continue
        following = words[i + 1:i + 5]
        if len(following) < 2 or not following[0][:1].islower():
            continue
        if following[0] == "this" and following[1].lower().strip(",") in _DOC_NOUNS:
            continue
        if sum(w[:1].isupper() for w in following) <= 1 and any(
            w.lower().strip(",.;:()") not in _SMALL for w in following[:3]
        ):
            return i
    return 0


def split_title(text: str) -> tuple[str, str]:
    """(title, abstract) of a line holding both; ("", text) if no cut is found.

    >>> split_title("Argument in Multi-Agent Systems Multi-agent systems research is concerned with")
    ('Argument in Multi-Agent Systems', 'Multi-agent systems research is concerned with')
    >>> split_title("XM2VTSDB: The Extended M2VTS Database In this paper we describe")
    ('XM2VTSDB: The Extended M2VTS Database', 'In this paper we describe')
    >>> split_title("Error-Tolerant Agents . The use of agents is expanding")
    ('Error-Tolerant Agents', 'The use of agents is expanding')
    >>> split_title("no title here at all")
    ('', 'no title here at all')
    """
    words = text.split()
    i = _cut(words)
    if not i:
        return "", " ".join(words)
    title = " ".join(words[:i]).rstrip(" .:-—")
    abstract = re.sub(r"^Abstract\W*\s*", "", " ".join(words[i:]))
    return title, abstract


class CiteSeerImporter(Importer):
    name = "citeseer"
    domain = "citeseer"
    summary = "CiteSeer papers (citeseer_texts.txt.gz: id / title+abstract / area) and citations (citeseer.cites)"

    def __init__(self, sources=(), limit=None, **options) -> None:
        super().__init__(sources, limit, **options)
        self.stats: Counter[str] = Counter()

    def dataset_info(self) -> dict[str, str]:
        return {
            **super().dataset_info(),
            "name": "CiteSeer with titles and abstracts",
            "version": "3,186 papers with text (of the 3,312 of the CiteSeer benchmark, Sen et al. 2008)",
            "licence": "research use",
            "origin": "CiteSeer via XiaoxinHe/TAPE",
        }

    def files(self) -> tuple[Path, Path | None]:
        sources = self.require_sources(1, "the CiteSeer folder (citeseer_texts.txt.gz and citeseer.cites)")
        if len(sources) > 1:
            raise KqeError(f"the {self.name} importer reads one folder; got {len(sources)} sources")
        source = sources[0]
        if source.is_file():
            texts, folder = source, source.parent
        else:
            folder = source
            texts = next((source / n for n in TEXT_FILES if (source / n).is_file()), None)
            if texts is None:
                raise KqeError(f"{source}: no {TEXT_FILES[0]} here")
        cites = folder / CITES_FILE
        return texts, cites if cites.is_file() else None

    def records(self, report: ImportReport) -> Iterator[Node | Edge]:
        self.stats.clear()
        texts, cites = self.files()
        if cites is None:
            report.warn(f"{texts.parent}: no {CITES_FILE}; papers are imported without citations", limit=ALWAYS)
        papers = 0
        for node in self._papers(texts, report):
            if self.limit is not None and papers >= self.limit:
                break
            papers += 1
            yield node
        if cites is not None:
            yield from self._citations(cites, report)
        if self.stats["untitled"]:
            report.warn(
                f"{texts}: {self.stats['untitled']} papers had no recognisable title/abstract boundary; "
                "named by their first words, whole text kept as abstract",
                limit=ALWAYS,
            )
        if self.stats["self_citations"]:
            report.warn(f"{cites}: {self.stats['self_citations']} self-citations skipped", limit=ALWAYS)

    def _papers(self, path: Path, report: ImportReport) -> Iterator[Node]:
        record: list[tuple[int, str]] = []
        for number, line in numbered_lines(path, report):
            if not record and not line.strip():
                continue  # blank lines between records
            record.append((number, line.strip()))
            if len(record) < 3:
                continue
            (id_line, paper_id), (_, text), (area_line, area) = record
            record = []
            if not paper_id or len(paper_id.split()) != 1:
                raise InputError(f"expected a paper id (one word), got {paper_id[:80]!r}", f"{path}:{id_line}")
            if area not in AREAS:
                raise InputError(
                    f"expected the research area of paper {paper_id} (one of {', '.join(AREAS)}), got {area[:80]!r}; "
                    "records are three lines: id, title and abstract, area",
                    f"{path}:{area_line}",
                )
            title, abstract = split_title(text)
            if not title:
                self.stats["untitled"] += 1
                words = abstract.split()
                title = " ".join(words[:12]) + ("…" if len(words) > 12 else "")
            fields = (("abstract", abstract), ("researchArea", AREAS[area]))
            yield Node(id=paper_id, type="Paper", name=title, fields=fields, where=f"{path}:{id_line}")
        if record:
            number, _ = record[0]
            raise InputError("incomplete record at the end of the file (expected id, text and area lines)",
                             f"{path}:{number}")

    def _citations(self, path: Path, report: ImportReport) -> Iterator[Edge]:
        for number, line in numbered_lines(path, report):
            if not line.strip():
                continue
            where = f"{path}:{number}"
            parts = line.split()
            if len(parts) != 2:
                raise InputError(f"expected 'cited<TAB>citing', got {line[:120]!r}", where)
            cited, citing = parts
            if cited == citing:
                self.stats["self_citations"] += 1
                if self.stats["self_citations"] <= EXAMPLES:
                    report.warn(f"{where}: paper {cited} is listed as citing itself; skipped")
                continue
            yield Edge(citing, "cites", cited, where=where)
