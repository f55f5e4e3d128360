"""MetaQA's WikiMovies knowledge base: ``head|relation|tail`` lines → movie graph.

Source: a folder holding ``kb.txt`` or ``kb_reconstructed.txt.gz`` (or that
file itself); ``relation2text.txt`` and ``entity2text.txt.gz`` beside it are
read when present, as checks only (they carry names, no descriptions).

Every entity is a bare name and its node id is that name, because MetaQA gold
answers are names. Names carry no type, so the importer gives each one:

* a name in the head position is a Movie; a name in the tail position gets the
  ``rdfs:range`` of the relation (``directed_by`` → Person, ``has_tags`` → Tag,
  ... read from ``ontologies/metaqa.ttl``);
* a name used in several roles ("2012" is a movie and a year, "War" a movie and
  a genre, "murder" a tag and, by a source error, a release year) gets the role
  of most of its edges (ties: Movie, else the role seen first). Each such name
  is counted in ``stats["type_conflicts"]`` and warned about, and edges whose
  ends then disagree with the relation's domain/range are kept and counted in
  ``stats["off_range_edges"]``. Majority beats "ever a head → Movie" here:
  on the reconstructed KB it leaves 177 such edges instead of 2,573.

Nodes are yielded in order of first appearance, so ``limit`` keeps the first
movies with their neighbours.

``--option kg_fraction=0.5 --option seed=0`` builds GRAFT-Net's *incomplete KB*: a seeded random half
of the edges stays in the graph and each other edge is only a sentence of its head movie's document
("Kismet directed by William Dieterle.", :mod:`.incomplete`); every name keeps the type it has in the
full KB. ``stats["text_only_edges"]`` counts the edges written as text.
"""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Iterator
from itertools import islice
from pathlib import Path

from ...core.errors import InputError, KqeError
from ..ontology import local_name
from ..records import Edge, ImportReport, Node
from . import Importer
from .incomplete import FIELD, TextOnlyEdges, sentence
from .reading import numbered_lines

KB_FILES = ("kb_reconstructed.txt.gz", "kb_reconstructed.txt", "kb.txt", "kb.txt.gz")
HEAD_TYPE = "Movie"
EXAMPLES = 10  # warnings per kind of repair; the rest are counted in one summary warning
ALWAYS = sys.maxsize  # ImportReport.warn limit for summaries, which must never be dropped


class MetaQAImporter(Importer):
    name = "metaqa"
    domain = "metaqa"
    summary = "MetaQA WikiMovies KB: folder with kb.txt or kb_reconstructed.txt.gz (head|relation|tail lines)"

    def __init__(self, sources=(), limit=None, **options) -> None:
        super().__init__(sources, limit, **options)
        #: The incomplete-KB setting (``kg_fraction``, ``seed``), or None for the whole graph.
        self.text_only = TextOnlyEdges.from_options(options)
        self.stats: Counter[str] = Counter()
        #: name -> Counter of the roles it is used in, for names used in more than one.
        self.type_conflicts: dict[str, Counter[str]] = {}

    def dataset_info(self) -> dict[str, str]:
        info = {
            **super().dataset_info(),
            "name": "MetaQA WikiMovies knowledge base",
            "version": "MetaQA (Zhang et al. 2018); kb_reconstructed.txt holds 96% of the 134,741 original triples",
            "licence": "BSD-3 (repository) / CC (data)",
            "origin": "MetaQA (Zhang et al., AAAI 2018), via vaijsc/keallm",
        }
        if self.text_only is not None:
            info["incomplete"] = self.text_only.describe()
        return info

    def kb_file(self) -> Path:
        sources = self.require_sources(1, "the MetaQA folder (with kb.txt or kb_reconstructed.txt.gz)")
        if len(sources) > 1:
            raise KqeError(f"the {self.name} importer reads one KB; got {len(sources)} sources")
        source = sources[0]
        if source.is_file():
            return source
        for name in KB_FILES:
            if (source / name).is_file():
                return source / name
        raise KqeError(f"{source}: no MetaQA KB file here (expected one of {', '.join(KB_FILES)})")

    def records(self, report: ImportReport) -> Iterator[Node | Edge]:
        self.stats.clear()
        self.type_conflicts.clear()
        kb = self.kb_file()
        schema = self.schema()
        # The KB relations are the forward ones (domain Movie); their ranges type the tails.
        ranges = {
            rel.name: local_name(rel.range)
            for rel in schema.relations.values()
            if rel.iri.startswith("https://w3id.org/kqe/metaqa#") and rel.domain and local_name(rel.domain) == HEAD_TYPE
        }
        self._check_relation_texts(kb.parent / "relation2text.txt", schema, ranges, report)

        edges: list[Edge] = []
        roles: dict[str, dict[str, int]] = {}
        first_seen: dict[str, str] = {}
        prefix = f"{kb}:"
        for number, line in numbered_lines(kb, report):
            where = prefix + str(number)
            try:
                head, relation, tail = line.split("|")
            except ValueError:
                if not line.strip():
                    continue
                raise InputError(f"expected 'head|relation|tail', got {line[:120]!r}", where) from None
            head, relation, tail = head.strip(), relation.strip(), tail.strip()
            if not (head and relation and tail):
                raise InputError(f"expected 'head|relation|tail', got {line[:120]!r}", where)
            tail_role = ranges.get(relation)
            if tail_role is None:
                raise InputError(
                    f"unknown relation {relation!r}; ontologies/metaqa.ttl defines {', '.join(sorted(ranges))}", where
                )
            for name, role in ((head, HEAD_TYPE), (tail, tail_role)):
                used = roles.get(name)
                if used is None:  # a plain dict: a Counter per name took a tenth of the import
                    used = roles[name] = {}
                    first_seen[name] = where
                used[role] = used.get(role, 0) + 1
            edges.append(Edge(head, relation, tail, (), where))

        types = {name: self._choose_type(name, used, first_seen[name], report) for name, used in roles.items()}
        if self.type_conflicts:
            report.warn(
                f"{kb}: {len(self.type_conflicts)} names are used in several roles (e.g. a movie and a year); "
                f"each was typed by the role of most of its edges (first {EXAMPLES} listed)",
                limit=ALWAYS,
            )
        self._check_entity_names(kb.parent / "entity2text.txt.gz", roles, report)

        texts: dict[str, list[str]] = {}
        if self.text_only is not None:
            left_out = self.text_only.left_out(len(edges))
            for i in sorted(left_out):
                head, relation, tail, _, _ = edges[i]
                texts.setdefault(head, []).append(sentence(head, schema.relation(relation).label, tail))
            edges = [edge for i, edge in enumerate(edges) if i not in left_out]
            self.stats["text_only_edges"] = len(left_out)
            report.warn(f"{kb}: {len(left_out):,} edges written only as sentences of their head nodes' documents "
                        f"({self.text_only.describe()})", limit=ALWAYS)
        nodes = [Node(name, types[name], name, fields=tuple((FIELD, text) for text in texts.get(name, ())),
                      where=where)
                 for name, where in islice(first_seen.items(), self.limit)]
        emitted = {node.id for node in nodes}
        self.stats["off_range_edges"] = sum(
            1 for head, relation, tail, _, _ in edges
            if (types[head] != HEAD_TYPE or types[tail] != ranges[relation]) and head in emitted and tail in emitted
        )
        yield from nodes
        yield from edges
        if self.stats["off_range_edges"]:
            report.warn(
                f"{kb}: {self.stats['off_range_edges']} edges link names whose chosen type differs from the "
                "relation's domain or range (see type conflicts); kept",
                limit=ALWAYS,
            )

    def _choose_type(self, name: str, roles: dict[str, int], where: str, report: ImportReport) -> str:
        if len(roles) == 1:
            return next(iter(roles))
        used = Counter(roles)
        best = max(used.values())
        candidates = [role for role, count in used.items() if count == best]  # in order first seen
        chosen = HEAD_TYPE if HEAD_TYPE in candidates else candidates[0]
        self.type_conflicts[name] = used
        self.stats["type_conflicts"] += 1
        if self.stats["type_conflicts"] <= EXAMPLES:
            roles = ", ".join(f"{role} in {count} edge{'s' * (count > 1)}" for role, count in used.most_common())
            report.warn(f"{where}: {name!r} is used as {roles}; typed {chosen}")
        return chosen

    def _check_relation_texts(self, path: Path, schema, ranges: dict[str, str], report: ImportReport) -> None:
        """relation2text.txt (``index<TAB>text``) must name the ontology's relations by their labels."""
        if not path.is_file():
            return
        labels = {schema.relation(name).label.lower() for name in ranges}
        for number, line in numbered_lines(path, report):
            if not line.strip():
                continue
            index, tab, text = line.partition("\t")
            if not tab or not text.strip():
                raise InputError(f"expected 'index<TAB>relation text', got {line[:120]!r}", f"{path}:{number}")
            if text.strip().lower() not in labels:
                self.stats["unknown_relation_texts"] += 1
                report.warn(f"{path}:{number}: relation text {text.strip()!r} is no relation label of ontologies/metaqa.ttl")

    def _check_entity_names(self, path: Path, roles: dict[str, dict[str, int]], report: ImportReport) -> None:
        """entity2text (``index<TAB>name``): count the names that no KB line uses (they cannot be typed)."""
        if not path.is_file():
            return
        unused = total = 0
        for number, line in numbered_lines(path, report):
            if not line.strip():
                continue
            index, tab, name = line.partition("\t")
            if not tab:
                raise InputError(f"expected 'index<TAB>entity name', got {line[:120]!r}", f"{path}:{number}")
            total += 1
            unused += name.strip() not in roles
        self.stats["unused_entity_names"] = unused
        if unused:
            report.warn(
                f"{path}: {unused} of {total} entity names appear in no KB line; not imported (no type or edge)",
                limit=ALWAYS,
            )
