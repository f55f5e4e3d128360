"""A generic passage collection: ``id<TAB>text`` lines (gzip ok) → Passage nodes.

Sources: one or more TSV files, e.g. the MS MARCO passages of the TREC DL 2019
pool (``pool_passages.tsv.gz``). Lines with three columns are read as
``id<TAB>title<TAB>text`` and named by the title; otherwise a passage is named
by its first twelve words and its whole text is the field ``text``. A header
line (first column ``id``, ``_id``, ``pid``, ``docid``...) is skipped. Empty
and repeated ids are reported by the record writer.
"""

from __future__ import annotations

from collections.abc import Iterator

from ...core.errors import InputError
from ..ontology import node_iri
from ..records import Edge, ImportReport, Node
from . import Importer
from .reading import numbered_lines

NAME_WORDS = 12
HEADER_IDS = {"id", "_id", "pid", "docid", "doc_id", "passage_id", "qid"}
#: Provenance of collections known by file name; others name themselves by options.
KNOWN = {
    "pool_passages.tsv.gz": {
        "name": "MS MARCO passages pooled for TREC Deep Learning 2019",
        "version": "union of the top-100 lists of the published runs in castorini/rank_llm's history",
        "licence": "MS MARCO terms",
        "origin": "MS MARCO passage collection; TREC DL 2019; castorini/anserini-tools, castorini/rank_llm",
    },
}


def passage_name(text: str, words: int = NAME_WORDS) -> str:
    """The first words of a passage, as its name.

    >>> passage_name("one two three", 2)
    'one two…'
    """
    parts = text.split()
    return " ".join(parts[:words]) + ("…" if len(parts) > words else "")


class PassagesImporter(Importer):
    name = "passages"
    domain = "documents"
    summary = "a passage collection: TSV files of id<TAB>text (or id<TAB>title<TAB>text), gzip ok"

    def dataset_info(self) -> dict[str, str]:
        info = dict(super().dataset_info())
        for source in self.sources:
            info.update(KNOWN.get(source.name, {}))
        for key in ("name", "version", "licence", "origin"):
            if key in self.options:
                info[key] = str(self.options[key])
        info.setdefault("licence", "not stated (pass licence=... to record it)")
        return info

    def records(self, report: ImportReport) -> Iterator[Node | Edge]:
        passages = 0
        for path in self.require_sources(1, "one or more TSV files of id<TAB>text"):
            for number, line in numbered_lines(path, report):
                if not line.strip():
                    continue
                where = f"{path}:{number}"
                parts = line.split("\t")
                if len(parts) == 2:
                    passage_id, title, text = parts[0], "", parts[1]
                elif len(parts) == 3:
                    passage_id, title, text = parts
                else:
                    raise InputError(f"expected 'id<TAB>text' (or id<TAB>title<TAB>text), got {len(parts)} columns", where)
                passage_id = passage_id.strip()
                if number == 1 and passage_id.lower() in HEADER_IDS:
                    continue
                if self.limit is not None and passages >= self.limit:
                    return
                passages += 1
                yield Node(
                    id=passage_id,
                    type="Passage",
                    name=title.strip() or passage_name(text),
                    fields=(("text", text),),
                    iri_hint=node_iri(self.name, passage_id) if passage_id else None,
                    where=where,
                )
