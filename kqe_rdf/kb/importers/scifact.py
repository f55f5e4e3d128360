"""SciFact's corpus of scientific abstracts → Paper nodes (no relations).

Source: a folder holding ``corpus.csv.gz`` (or ``corpus.csv``), or that file:
CSV with the columns ``doc_id,title,abstract,structured``, where ``abstract``
is the printed form of a list of sentences (NumPy style, one quoted sentence
per line, no commas, or an ordinary Python list). Node id = ``doc_id`` as
written (SciFact qrels and claims use these ids), name = title, field
``abstract`` = the sentences joined with spaces.
"""

from __future__ import annotations

import ast
import csv
import io
import tokenize
from collections.abc import Iterator
from pathlib import Path

from ...core.errors import InputError, KqeError
from ..ontology import node_iri
from ..records import Edge, ImportReport, Node
from . import Importer
from .reading import numbered_lines

CORPUS_FILES = ("corpus.csv.gz", "corpus.csv")
REQUIRED = ("doc_id", "title", "abstract")
_SKIP = {tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.ENDMARKER}


def parse_sentences(value: str) -> list[str]:
    """The sentences of a printed list, with or without commas between items.

    >>> parse_sentences("['First sentence.'\\n 'Second \\"one\\".']")
    ['First sentence.', 'Second "one".']
    >>> parse_sentences('["A.", "B."]')
    ['A.', 'B.']
    """
    value = value.strip()
    if not (value.startswith("[") and value.endswith("]")):
        raise ValueError("not a bracketed list of quoted sentences")
    sentences: list[str] = []
    try:
        for token in tokenize.generate_tokens(io.StringIO(value).readline):
            if token.type == tokenize.STRING:
                sentences.append(ast.literal_eval(token.string))
            elif token.type == tokenize.OP and token.string in "[],":
                continue
            elif token.type not in _SKIP:
                raise ValueError(f"unexpected {token.string!r} between the quoted sentences")
    except (tokenize.TokenError, SyntaxError) as exc:
        raise ValueError(f"unreadable list ({exc.args[0]})") from None
    return sentences


class SciFactImporter(Importer):
    name = "scifact"
    domain = "documents"
    summary = "SciFact abstracts (corpus.csv.gz: doc_id,title,abstract as a list of sentences) as Paper nodes"

    def dataset_info(self) -> dict[str, str]:
        return {
            **super().dataset_info(),
            "name": "SciFact corpus",
            "version": "5,183 abstracts (Wadden et al., EMNLP 2020), BEIR release",
            "licence": "CC BY-NC 2.0",
            "origin": "SciFact (allenai/scifact), via BEIR",
        }

    def corpus_file(self) -> Path:
        sources = self.require_sources(1, "the SciFact folder (with corpus.csv.gz) or the corpus file")
        if len(sources) > 1:
            raise KqeError(f"the {self.name} importer reads one corpus; got {len(sources)} sources")
        source = sources[0]
        if source.is_file():
            return source
        found = next((source / n for n in CORPUS_FILES if (source / n).is_file()), None)
        if found is None:
            raise KqeError(f"{source}: no {CORPUS_FILES[0]} here")
        return found

    def records(self, report: ImportReport) -> Iterator[Node | Edge]:
        path = self.corpus_file()
        lines = numbered_lines(path, report)
        reader = csv.reader(text + "\n" for _, text in lines)
        header: list[str] | None = None
        columns: dict[str, int] = {}
        papers = 0
        end = 0
        while True:
            start = end + 1
            try:
                row = next(reader)
            except StopIteration:
                break
            except csv.Error as exc:
                raise InputError(f"malformed CSV ({exc})", f"{path}:{start}") from None
            end = reader.line_num
            where = f"{path}:{start}"
            if not row:
                continue
            if header is None:
                header = [c.strip() for c in row]
                missing = [c for c in REQUIRED if c not in header]
                if missing:
                    raise InputError(f"expected the columns {', '.join(REQUIRED)}; missing {', '.join(missing)}", where)
                columns = {c: header.index(c) for c in REQUIRED}
                continue
            if len(row) != len(header):
                raise InputError(f"expected {len(header)} columns ({','.join(header)}), got {len(row)}", where)
            if self.limit is not None and papers >= self.limit:
                break
            doc_id = row[columns["doc_id"]].strip()
            try:
                sentences = parse_sentences(row[columns["abstract"]])
            except ValueError as exc:
                raise InputError(f"abstract of document {doc_id}: {exc}", where) from None
            abstract = " ".join(s.strip() for s in sentences if s.strip())
            papers += 1
            yield Node(
                id=doc_id,
                type="Paper",
                name=row[columns["title"]],
                fields=(("abstract", abstract),),
                iri_hint=node_iri(self.name, doc_id) if doc_id else None,
                where=where,
            )
