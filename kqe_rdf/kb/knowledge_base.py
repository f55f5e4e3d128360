"""A knowledge base on disk: the factory for everything built on it.

``KnowledgeBase.open(path)`` reads the manifest and opens the parts lazily —
the Oxigraph store (read-only), the schema, the BM25 index, the dense index
and the encoder — so a command pays only for what it uses.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable, Sequence
from pathlib import Path

from pyoxigraph import Literal, Store

from ..core.caches import per_instance
from . import queries
from .layout import DOCUMENTS, MANIFEST, kb_lock, read_documents, recover, relation_signatures
from ..core.config import Settings
from .documents import NodeDocument
from ..core.errors import KBNotFound, KqeError, SchemaError
from .ontology import CORE, Schema, shown_names
from .sparql import run_query
from .sparql_guard import allowed_endpoints, guarded


class KnowledgeBase:
    #: True for a served KB: nothing may write into its folder (what it lacks is built in memory instead).
    read_only = False

    def __init__(self, path: Path, manifest: dict, settings: Settings) -> None:
        self.path = path
        self.manifest = manifest
        self.settings = settings

    @classmethod
    def open(cls, path: Path | str | None = None, settings: Settings | None = None) -> KnowledgeBase:
        """The KB at ``path``; without one, where ``$KQE_KB`` (or ``kqe-rdf.toml``) says, else at the default
        ``data/kb/bio``, with the settings read as the command line reads them."""
        if path is None:
            settings = settings or Settings.load()
            path = settings.kb
        path = Path(path)
        if (not path.exists() and (path.parent / f".{path.name}.old").is_dir()) \
                or any(path.parent.glob(f".{path.name}.build-*")):
            # Finish a swap cut short by a crash, and remove the folder of a build that was killed (issue 49: up
            # to 356 MB stayed until the next build), unless a build holds the lock right now.
            try:
                with kb_lock(path):
                    recover(path)
            except KqeError:
                pass
        manifest_path = path / MANIFEST
        if not manifest_path.is_file():
            raise KBNotFound(_missing(path))
        try:
            manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as exc:
            raise KqeError(f"{manifest_path} is damaged ({exc}); rebuild the KB") from None
        return cls(path, manifest, settings or Settings())

    @functools.cached_property
    def store(self) -> Store:
        if self.settings.store.endpoint:  # the triples live in a remote SPARQL server; the indexes stay here
            from .store import RemoteStore

            return RemoteStore(self.settings.store.endpoint, self.settings.store.timeout)
        return Store.read_only(str(self.path / "store"))

    @functools.cached_property
    def schema(self) -> Schema:
        schema = Schema.from_store(self.store)
        schema.stored_relations = {iri for iri, count in self.relation_counts.items() if count}
        schema.closures = {rel: self.hierarchies.closure_of(rel) for rel in self.hierarchies.summary}
        return schema

    @functools.cached_property
    def hierarchies(self):
        """Closures, annotation matrices and IC stored with the KB (empty for KBs built before them)."""
        from .hierarchy import Hierarchies

        return Hierarchies(self.path, self.manifest)

    @functools.cached_property
    def names(self):
        """The name index entity linking and the mention finder read (stored with the KB)."""
        from .linking import NameIndex

        return NameIndex(self)

    @functools.cached_property
    def relation_counts(self) -> dict[str, int]:
        """Edges per relation IRI (recorded at build time; counted now for older KBs)."""
        if "relation_counts" in self.manifest:
            return self.manifest["relation_counts"]
        rows = self.store.query(queries.load("count_edges_by_relation"), use_default_graph_as_union=True)
        return {r["relation"].value: int(r["count"].value) for r in rows}

    @functools.cached_property
    def text_index(self):
        """The BM25 index where the build put it (the manifest's ``text_index``): Tantivy here, or Milvus."""
        record = self.manifest.get("text_index") or {"backend": "tantivy"}
        if record["backend"] == "milvus":
            from .milvus import Location, MilvusTextIndex

            return MilvusTextIndex(Location.from_record(record), self.path)
        from .text_index import TextIndex

        return TextIndex(self.path / "bm25")

    @functools.cached_property
    def dense(self):
        """The dense index; its searches run where `kb embed` put the vectors (the manifest's ``vectors``)."""
        s = self.settings
        options = {"ann_threshold": s.dense.threshold, "ef_search": s.dense.ef_search,
                   "writable": not self.read_only, "build_threads": s.dense.build_threads}
        record = (self.manifest.get("embeddings") or {}).get("vectors") or {"backend": "usearch"}
        if record["backend"] == "milvus":
            from .milvus import Location, MilvusDenseIndex

            return MilvusDenseIndex(self.path / "embeddings", Location.from_record(record), self.path, **options)
        from .embeddings import DenseIndex

        return DenseIndex(self.path / "embeddings", **options)

    @functools.cached_property
    def encoder(self):
        from .embeddings import OnnxEncoder, check_encoder

        encoder = OnnxEncoder.from_settings(self.encoder_settings)
        if self.has_embeddings:
            check_encoder(self.dense.encoder, encoder)
        return encoder

    @functools.cached_property
    def encoder_settings(self) -> Settings:
        """The settings this KB's requests are encoded with: the configured encoder, except that a KB whose vectors
        (or, without dense vectors, relation phrase vectors) another packaged encoder made keeps that one until
        ``kqe-rdf kb embed`` re-embeds it (the packaged encoders' vectors do not mix: issue 52).

        >>> KnowledgeBase(Path("kb"), {"embeddings": {"model_id": "all-MiniLM-L6-v2-onnx-int8-matmul@256"}},
        ...               Settings()).encoder_settings.embedding.model
        'minilm-int8-matmul'
        """
        import dataclasses

        from .embeddings import PACKAGED, packaged_setting

        made_by = packaged_setting(self.recorded_encoder)
        if self.settings.embedding.model not in PACKAGED or made_by in (None, self.settings.embedding.model):
            return self.settings
        return dataclasses.replace(self.settings, embedding=dataclasses.replace(self.settings.embedding, model=made_by))

    @property
    def recorded_encoder(self) -> dict | None:
        """What the KB records of the encoder of its vectors: the dense vectors' (the manifest says when they are
        done), else the relation phrase vectors' (their model id), else None."""
        embedded = self.manifest.get("embeddings") or {}
        if embedded:
            return embedded.get("encoder") or {"model_id": embedded.get("model_id")}
        if self.has_embeddings:
            return self.dense.encoder
        from .phrases import phrase_encoder

        made_by = phrase_encoder(self.path)
        return {"model_id": made_by} if made_by else None

    @per_instance(4096)
    def embed_query(self, text: str):
        """One query's vector, cached: several stages of one pipeline embed the same text.

        The cached array is read-only, so no caller can change what the next one gets."""
        vector = self.encoder.encode([text])[0]
        vector.setflags(write=False)
        return vector

    @property
    def has_embeddings(self) -> bool:
        return (self.path / "embeddings" / "index.json").is_file()

    @functools.cached_property
    def prefixes(self) -> dict[str, str]:
        """Default SPARQL prefixes: the common ones plus one per domain namespace."""
        out = dict(queries.PREFIXES)
        for iri in list(self.schema.classes) + list(self.schema.relations):
            ns = iri.rsplit("#", 1)[0] + "#" if "#" in iri else None
            if ns and ns.startswith("https://w3id.org/kqe/"):
                out.setdefault(ns.rstrip("#").rsplit("/", 1)[-1], ns)
        for prefix, ns in (self.manifest.get("prefixes") or {}).items():  # those the source files declare
            if prefix and ns not in out.values():
                out.setdefault(prefix, ns)
        return out

    @functools.cached_property
    def class_names(self) -> dict[str, str]:
        """Class IRI → the name a user reads and gives ``--type``: the local name, prefixed where two classes
        share it (``dbo:Country``, ``geof:Country``)."""
        return shown_names(self.schema.classes, self.prefixes)

    @functools.cached_property
    def relation_signatures(self) -> list[tuple[str, str, str]]:
        """(head class, relation, tail class) combinations the data holds, most used first.

        Recorded at build time. Combinations with under 2% of their relation's
        edges are left out: they are typing noise in the source, not schema.
        """
        totals: dict[str, int] = {}
        for (_d, rel, _r), n in self.relation_edges.items():
            totals[rel] = totals.get(rel, 0) + n
        return [(d, rel, rng) for (d, rel, rng), n in self.relation_edges.items() if n >= 0.02 * totals[rel]]

    @functools.cached_property
    def relation_edges(self) -> dict[tuple[str, str, str], int]:
        """How many edges link each (head class, relation, tail class), most used first: what the data says a
        relation between two classes usually is when no word names it."""
        found = self.manifest.get("relation_signatures")
        if found is None:
            found = relation_signatures(self.store)
        return {(d, rel, rng): int(n) for d, rel, rng, n in found}

    def query(self, sparql: str, allow_service: str | Iterable[str] | None = None, **options):
        """SPARQL over the KB's store, held to the server's SERVICE/LOAD policy (issue 49: it called anywhere): a
        text that mentions SERVICE or LOAD is verified and run in its plain form (:func:`.sparql_guard.guarded`),
        and may call only endpoints on ``allow_service`` (URLs; default: the settings' ``server_service_allow``,
        empty, so none). ``allow_service=["https://query.wikidata.org/sparql"]`` opens it to those."""
        allowed = allowed_endpoints(self.settings.server.service_allow if allow_service is None else allow_service)
        return run_query(self.store, guarded(sparql, allowed, self.prefixes), prefixes=self.prefixes, **options)

    def documents(self) -> Iterable[NodeDocument]:
        return read_documents(self.path / DOCUMENTS)

    @functools.cached_property
    def _documents_by_iri(self) -> dict[str, NodeDocument]:
        return {d.iri: d for d in self.documents()}

    def document(self, iri: str) -> NodeDocument:
        if "_documents_by_iri" not in self.__dict__:
            # A few documents (a command's results) are read from the BM25 index's stored fields; reading every
            # document to show three would be most of a first request's time.
            self._looked_up = getattr(self, "_looked_up", 0) + 1
            if self._looked_up <= 100:
                stored = self.text_index.document(iri)
                if stored is None:
                    raise KqeError(f"no node {iri} in this KB")
                return NodeDocument(stored["iri"], stored["identifier"], stored["name"], tuple(stored["types"]),
                                    stored["text"])
        try:
            return self._documents_by_iri[iri]
        except KeyError:
            raise KqeError(f"no node {iri} in this KB") from None

    def name(self, iri: str) -> str:
        """A node's display name, as cheaply as it is at hand: read already with a BM25 hit, or from the name
        index when a reader has opened it, else from the BM25 index's stored fields (never by reading every
        document, as :meth:`document` does for callers that read many: a result list shows ten names)."""
        if "text_index" in self.__dict__ and (found := self.text_index.names.get(iri)) is not None:
            return found
        if "names" in self.__dict__ and (found := self.names.labels.get(iri)) is not None:
            return found
        if "_documents_by_iri" in self.__dict__:
            return self.document(iri).name
        stored = self.text_index.document(iri)
        if stored is None:
            raise KqeError(f"no node {iri} in this KB")
        return str(stored["name"])

    def resolve_types(self, names: Sequence[str]) -> set[str]:
        """Class IRIs (with their subclasses) for local names like ``Disease`` or full IRIs."""
        out: set[str] = set()
        for name in names:
            out |= self.schema.subclasses(self.class_named(name))
        return out

    def class_named(self, name: str) -> str:
        """The IRI of the class a user names: its local name or IRI as written, else the one class whose local
        name or label it is up to case (``--type disease`` is ``Disease``); an unknown name is a SchemaError that
        says which names are close."""
        prefix, colon, local = name.partition(":")
        if colon and prefix in self.prefixes and not local.startswith("//"):  # dbo:Country, as `kb info` shows it
            name = self.prefixes[prefix] + local
        try:
            return self.schema.node_class(name).iri
        except SchemaError:
            folded = name.strip().casefold()
            found = {iri for iri, term in self.schema.classes.items()
                     if folded in (term.name.casefold(), term.label.casefold())}
            if len(found) > 1:  # a domain class overrides a core class of the same name, as in the schema
                found = {iri for iri in found if not iri.startswith(CORE)} or found
            if len(found) == 1:
                return found.pop()
            raise

    def resolve_identifiers(self, identifiers: Iterable[str], by_name: bool = False) -> dict[str, list[str]]:
        """Source ids (or cross-references) → node IRIs; unknown ids are absent from the result. With ``by_name``
        an id no node has is looked up as a node's exact name (QA sets that write answers as names)."""
        out = self._nodes_by("nodes_by_identifier", identifiers)
        if by_name:
            out.update(self._nodes_by("nodes_by_name", set(identifiers) - out.keys()))
        return out

    def _nodes_by(self, query: str, keys: Iterable[str]) -> dict[str, list[str]]:
        ids = sorted(set(keys))
        out: dict[str, list[str]] = {}
        for start in range(0, len(ids), 5000):
            q = queries.with_values(queries.load(query), id=[Literal(i) for i in ids[start:start + 5000]])
            for row in self.store.query(q, use_default_graph_as_union=True):
                out.setdefault(row["id"].value, []).append(row["node"].value)
        return out

    def info(self) -> dict:
        # Classes by the name `--type` takes ("Disease"); relations of the ontology only (a qualifier's reification
        # statement links nodes through rdf:subject and rdf:object, which are no relations of the KB).
        counted = [(r["type"].value, int(r["count"].value))
                   for r in self.store.query(queries.load("count_nodes_by_type"), use_default_graph_as_union=True)]
        named = shown_names([iri for iri, _n in counted], self.prefixes)
        types = [(named[iri], n) for iri, n in counted]
        kept = {iri: n for iri, n in self.relation_counts.items() if iri in self.schema.relations}
        named = shown_names(kept, self.prefixes)
        relations = sorted(((named[iri], n) for iri, n in kept.items()), key=lambda x: -x[1])
        embedded = self.manifest.get("embeddings")
        held = {"text": self.manifest.get("text_index") or {"backend": "tantivy"},
                "vectors": (embedded.get("vectors") or {"backend": "usearch"}) if embedded else None}
        return {"path": str(self.path), "manifest": self.manifest, "types": types, "relations": relations,
                "bm25": self.text_index.describe(), "indexes": held}


def _missing(path: Path) -> str:
    """Why there is no KB at ``path``, with the build command that fits it: a data file given as ``--kb`` is
    built with the importer of its kind into a folder of its name; a folder named ``bio`` with ``bio``."""
    from .importers import importer_for

    kind = importer_for(path)
    if path.is_file() and kind:
        folder = Path("data/kb") / path.name.split(".")[0]
        return (f"{path} is a data file, not a knowledge base: build one from it with `kqe-rdf kb build {kind} "
                f"{path} --kb {folder}`, then pass --kb {folder}")
    how = "bio" if path.name == "bio" else "IMPORTER SOURCE"
    return (f"no knowledge base at {path} (no {MANIFEST}); build one with `kqe-rdf kb build {how} --kb {path}` "
            "(importers: rdf for RDF files, triples for head<TAB>relation<TAB>tail lines, jsonl for JSON Lines, "
            "bio for the bio KB) or point --kb / KQE_KB at an existing one")
