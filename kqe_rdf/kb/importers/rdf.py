"""Any RDF file Oxigraph can parse, as a knowledge base.

Every IRI a statement is about or points at becomes a node (its IRI is its identifier): its text is its
literals in the text properties, and one with none is named from its IRI's local name (``ex:Ann_Smith`` →
"Ann Smith", ``schema:Female`` → "Female"), as the ``triples`` importer names ids. Classes, properties and the
ontology's own terms are not nodes. The classes of the nodes become node classes and the properties between
them relations, so documents, type filters and SPARQL work as for the built-in domains. Named graphs are
merged into the default graph and statements about blank nodes stay in the store but make no edge (both
counted in the build report).

``.owl`` files are read as RDF/XML, a UTF-8 byte order mark is skipped, and an
RDF/XML file whose entities would expand without bound is refused before the
parser sees it (:mod:`.xml_entities`).
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Iterator
from pathlib import Path

from pyoxigraph import Literal, NamedNode, Quad, RdfFormat, Store, Triple, parse

from .. import queries
from ...core.errors import InputError
from ..ontology import CORE
from ..rdfize import MAX_LITERAL_BYTES, checked_literal
from ..records import ImportReport
from ...core.resources import ontology_path
from . import Importer
from .reading import open_binary
from .xml_entities import check_entity_expansion

DEFAULT_TEXT_PROPERTIES = ("rdfs:label", "rdfs:comment", "skos:prefLabel", "skos:altLabel", "skos:definition",
                           "schema:description")
RDF_TYPE = NamedNode("http://www.w3.org/1999/02/22-rdf-syntax-ns#type")
_RDF, _RDFS, _OWL = ("http://www.w3.org/1999/02/22-rdf-syntax-ns#", "http://www.w3.org/2000/01/rdf-schema#",
                     "http://www.w3.org/2002/07/owl#")
#: Statements that describe the schema, not the things in it: what they relate is never a node.
SCHEMA_PREDICATES = frozenset(NamedNode(ns + n) for ns, names in (
    (_RDFS, "subClassOf subPropertyOf domain range"),
    (_OWL, "inverseOf equivalentClass equivalentProperty disjointWith onProperty someValuesFrom allValuesFrom "
           "hasValue unionOf intersectionOf complementOf propertyChainAxiom imports"))
    for n in names.split())
#: What a class, a property or an ontology is declared as (``ex:parent a owl:ObjectProperty``): never a node.
SCHEMA_TYPES = frozenset(NamedNode(ns + n) for ns, names in (
    (_RDF, "Property"), (_RDFS, "Class Datatype"),
    (_OWL, "Class ObjectProperty DatatypeProperty AnnotationProperty Ontology TransitiveProperty SymmetricProperty "
           "FunctionalProperty InverseFunctionalProperty Restriction"))
    for n in names.split())
#: Links that say two IRIs name one thing: an IRI with no statement of its own beside them (a DBpedia or Wikidata
#: stub) is no node; its name becomes an alias of the node it stands for.
SAME_AS = frozenset(NamedNode(iri) for iri in ("http://www.w3.org/2002/07/owl#sameAs",
                                               "http://www.w3.org/2004/02/skos/core#exactMatch"))
#: Dataset descriptions (VoID, DCAT): what describes the file, not the things in it; neither end of their
#: statements is a node, nor is what is typed by them.
DESCRIPTION_NAMESPACES = ("http://rdfs.org/ns/void#", "http://www.w3.org/ns/dcat#")
#: Namespaces whose terms end in '#': a file whose prefix lacks it (``@prefix owl: <…/owl>``) writes ``owlsameAs``.
HASH_NAMESPACES = (_RDF, _RDFS, _OWL)
BOM = b"\xef\xbb\xbf"
#: Longest IRI of a node (it is stored again as the node's identifier literal).
MAX_NODE_IRI_CHARS = 65536


def rdf_format(path: Path) -> RdfFormat:
    name = path.name[:-3] if path.name.endswith(".gz") else path.name
    extension = name.rsplit(".", 1)[-1].lower() if "." in name else ""
    fmt = RdfFormat.RDF_XML if extension == "owl" else RdfFormat.from_extension(extension) if extension else None
    if fmt is None:
        raise InputError("unknown RDF format; use .ttl, .nt, .nq, .trig, .rdf/.owl (RDF/XML) or .jsonld", str(path))
    return fmt


class RdfImporter(Importer):
    name = "rdf"
    domain = "rdf"
    summary = "any RDF file Oxigraph parses (Turtle, N-Triples, N-Quads, TriG, RDF/XML); text properties by --text-property"

    def __init__(self, sources=(), limit=None, **options) -> None:
        super().__init__(sources, limit, **options)
        props = options.get("text_properties") or DEFAULT_TEXT_PROPERTIES
        if isinstance(props, str):
            props = [p for p in props.split(",") if p.strip()]
        expanded = []
        for prop in props:
            try:
                expanded.append(NamedNode(queries.expand_curie(prop)).value)
            except ValueError as exc:
                raise InputError(f"--text-property {prop!r} is not an IRI or a known CURIE ({exc})") from None
        self.text_properties = tuple(expanded)
        names = options.get("label_properties") or ()
        if isinstance(names, str):
            names = [p for p in names.split(",") if p.strip()]
        self.label_properties: tuple[str, ...] = ()
        for prop in names:
            try:
                self.label_properties += (NamedNode(queries.expand_curie(prop)).value,)
            except ValueError as exc:
                raise InputError(f"--label-property {prop!r} is not an IRI or a known CURIE ({exc})") from None
        label = queries.PREFIXES["rdfs"] + "label"
        self.extra_text_properties = tuple(p for p in self.text_properties if p != label)
        self.base = str(options["base"]) if options.get("base") else None
        #: The prefixes the files declare (``dbo:``, ``geof:``), in the manifest once they are read.
        self.prefixes: dict[str, str] = {}
        if self.base is not None:
            try:
                NamedNode(self.base)
            except ValueError as exc:
                raise InputError(f"--base {self.base!r} is not an absolute IRI ({exc})") from None

    def base_iri(self, path: Path) -> str:
        """What relative IRIs in ``path`` resolve against: ``--base``, else ``urn:kqe:<file name>/``, the same on
        every machine (the file's own location would make ``<#me>`` a ``file:///home/...`` IRI that differs
        wherever the file is, and leak the path into the KB).

        >>> RdfImporter().base_iri(Path("/home/ann/nobel.ttl.gz")), RdfImporter(base="http://x.org/").base_iri(Path("a.ttl"))
        ('urn:kqe:nobel/', 'http://x.org/')
        """
        return self.base or f"urn:kqe:{path.name.split('.')[0] or 'rdf'}/"

    def ontology_files(self) -> list[Path]:
        return [ontology_path("kqe")]

    def dataset_info(self) -> dict[str, str]:
        return {"name": "rdf", "sources": ", ".join(str(s) for s in self.sources),
                "text_properties": " ".join(self.text_properties),
                **({"label_properties": " ".join(self.label_properties)} if self.label_properties else {}),
                "base": self.base or " ".join(self.base_iri(s) for s in self.sources)}

    def _quads(self, path: Path) -> Iterator[Quad]:
        fmt = rdf_format(path)
        try:
            if fmt == RdfFormat.RDF_XML:
                with open_binary(path) as handle:
                    check_entity_expansion(path, handle)
            with open_binary(path) as handle:
                if handle.peek(len(BOM))[: len(BOM)] == BOM:
                    handle.read(len(BOM))
                parser = parse(handle, format=fmt, base_iri=self.base_iri(path))
                yield from parser
                for prefix, namespace in parser.prefixes.items():  # kept for SPARQL and for telling classes apart
                    self.prefixes.setdefault(prefix, namespace)
        except SyntaxError as exc:
            line = getattr(exc, "lineno", None)
            raise InputError(f"malformed {fmt.name} ({str(exc).split(' (')[0]})", f"{path}:{line}" if line else str(path)) from None
        except MemoryError:  # Oxigraph's readers hold one statement in at most 16 MiB
            line = _first_long_line(path)
            raise InputError("a statement longer than the 16 MiB Oxigraph's parser holds",
                             f"{path}:{line}" if line else str(path)) from None
        except EOFError as exc:
            raise InputError(f"the compressed file ends too early, it was probably cut short ({exc})", str(path)) from None
        except zlib.error as exc:
            raise InputError(f"corrupt compressed data ({exc})", str(path)) from None
        except OSError as exc:
            raise InputError(f"cannot read ({exc})", str(path)) from None

    def triples(self, report: ImportReport, writer_factory) -> Iterator[Triple]:
        text_props = {NamedNode(p) for p in self.text_properties}
        label = NamedNode(queries.PREFIXES["rdfs"] + "label")
        # A vocabulary's own name property (``dbo:name``): its literals are names, as rdfs:label's.
        label_props = {NamedNode(p) for p in self.label_properties}
        # Literal-valued properties by use: what a file whose nodes come out unnamed could name them by.
        literal_uses: dict[str, int] = {}
        # Pairs of IRIs said to be the same, and the IRIs that have a statement of their own (a name, a type, an
        # edge: anything but a same-as link): a stub has none.
        same: list[tuple] = []
        described: set = set()
        mended: dict[str, int] = {}
        # IRIs statements are about or point at, where first seen, and whether they have text: nodes, unless they
        # turn out to be schema terms (known only once every statement is read).
        things: dict = {}
        texted: set = set()
        schema: set = set()
        named_graph_quads = blank = 0
        for path in self.require_sources(1, "one or more RDF files"):
            read = 0
            for read, quad in enumerate(self._quads(path), start=1):
                if not quad.graph_name.__class__.__name__ == "DefaultGraph":
                    named_graph_quads += 1
                subject, predicate, obj = quad.subject, quad.predicate, quad.object
                if predicate.value.startswith("http://www.w3.org/"):
                    predicate = _mended(predicate, mended)
                if isinstance(obj, NamedNode) and obj.value.startswith("http://www.w3.org/"):
                    obj = _mended(obj, mended)
                if isinstance(obj, Literal) and len(obj.value) > MAX_LITERAL_BYTES // 6:
                    checked_literal(obj.value, f"the literal of <{subject.value[:200]}> "
                                    f"<{predicate.value[:200]}>", str(path))
                schema.add(predicate)
                if not isinstance(subject, NamedNode) or not isinstance(obj, NamedNode | Literal):
                    blank += 1
                elif predicate in SAME_AS:
                    if isinstance(obj, NamedNode):
                        same.append((subject, obj))
                elif predicate.value.startswith(DESCRIPTION_NAMESPACES):
                    schema.add(subject)
                    if isinstance(obj, NamedNode):
                        schema.add(obj)
                elif predicate == RDF_TYPE:
                    described.add(subject)
                    schema.add(obj)
                    if obj in SCHEMA_TYPES or obj.value.startswith(DESCRIPTION_NAMESPACES):
                        schema.add(subject)
                    else:
                        things.setdefault(subject, str(path))
                elif predicate in SCHEMA_PREDICATES:
                    schema.update((subject, obj))
                else:
                    for term in (subject, obj) if isinstance(obj, NamedNode) else (subject,):
                        things.setdefault(term, str(path))
                    if isinstance(obj, Literal):
                        literal_uses[predicate.value] = literal_uses.get(predicate.value, 0) + 1
                    if predicate in text_props and isinstance(obj, Literal):
                        texted.add(subject)
                    if predicate in label_props and isinstance(obj, Literal):
                        texted.add(subject)
                        yield Triple(subject, label, obj)
                    described.add(subject)
                    if isinstance(obj, NamedNode):
                        described.add(obj)
                yield Triple(subject, predicate, obj)
            if not read:  # an empty file, or one of prefixes and comments only: said so, not as a node problem
                raise InputError("the file holds no triples", str(path))
        for iri, count in sorted(mended.items()):
            report.warn(f"{count:,} statements use <{iri}> (the file's prefix lacks the namespace's '#'): read as "
                        f"<{_mended(NamedNode(iri), {}).value}>")
        aliases = self._stubs(same, things, described, schema, report)
        node_type, identifier = NamedNode(CORE + "Node"), NamedNode(CORE + "identifier")
        nodes = unnamed = 0
        for term, where in things.items():
            if term in schema or (self.limit is not None and nodes >= self.limit):
                continue
            if len(term.value) > MAX_NODE_IRI_CHARS:
                raise InputError(f"the IRI <{term.value[:80]}…> is {len(term.value):,} characters "
                                 f"long; a node's IRI may have at most {MAX_NODE_IRI_CHARS:,}", where)
            yield Triple(term, RDF_TYPE, node_type)
            yield Triple(term, identifier, Literal(term.value))
            for alias in aliases.get(term, ()):
                yield Triple(term, NamedNode(CORE + "alias"), Literal(alias))
            if term not in texted:
                yield Triple(term, label, Literal(name_from_iri(term.value)))
                unnamed += 1
            nodes += 1
        report.nodes = nodes
        if unnamed:
            shown = [p for p in sorted(literal_uses, key=lambda p: (-literal_uses[p], p))
                     if p not in {t.value for t in text_props | label_props}][:8]
            listed = ", ".join(f"<{p}> ({literal_uses[p]:,})" for p in shown)
            report.warn(f"{unnamed:,} nodes have no literal in a text property: named from their IRIs"
                        + (f"; the file's literal properties by use: {listed} (name nodes by one with "
                           "--label-property)" if listed else ""))
        if named_graph_quads:
            report.warn(f"{named_graph_quads} quads from named graphs were merged into the default graph")
        if blank:
            report.warn(f"{blank:,} statements about blank nodes are kept in the store but make no edge")
            report.skipped_edges += blank
        if not nodes:
            raise InputError("no statement is about a node (an IRI that is not a class or a property); the text of "
                             "nodes is read from " + ", ".join(self.text_properties) + " (--text-property)")

    @staticmethod
    def _stubs(same: list[tuple], things: dict, described: set, schema: set, report) -> dict:
        """Of each pair of IRIs said to be the same, one with no statement of its own beside the link (a stub: a
        DBpedia IRI the file only names in the link; one with its own type or label is a node) when the other has some: the stub is no node (``schema`` takes it) and
        its IRI's name is an alias of the other. Returns the aliases per node."""
        aliases: dict = {}
        stubs = set()
        for a, b in same:
            for node, stub in ((a, b), (b, a)):
                if node in described and stub not in described and stub not in schema:
                    stubs.add(stub)
                    name = name_from_iri(stub.value)
                    if name and name != stub.value:
                        aliases.setdefault(node, set()).add(name)
        schema.update(stubs)
        if stubs:
            report.warn(f"{len(stubs):,} IRIs only linked by owl:sameAs / skos:exactMatch to a node of the file are "
                        "not nodes: their names are aliases of the node they stand for")
        return {node: sorted(names) for node, names in aliases.items()}

    def after_load(self, store: Store) -> None:
        store.update(queries.load_update("rdf_declare_nodes"))


def name_from_iri(iri: str) -> str:
    """A node's name where the source gives it no text: its IRI's local name as words.

    >>> name_from_iri("http://ex.org/people/Ann_Smith"), name_from_iri("https://schema.org/Female")
    ('Ann Smith', 'Female')
    >>> name_from_iri("http://ex.org/p#Jos%C3%A9_Mar%C3%ADa"), name_from_iri("urn:isbn:0451450523")
    ('José María', '0451450523')
    >>> name_from_iri("http://dbpedia.org/resource/ABBA:_The_Album")
    'ABBA: The Album'
    """
    from urllib.parse import unquote

    # After the last '/' or '#', where there is one: a colon inside a local name is part of it (DBpedia's
    # ``ABBA:_The_Album``); a URN's last part is after its last colon.
    trimmed = iri.rstrip("/#")
    local = re.split(r"[#/]" if re.search(r"[#/]", trimmed) else ":", trimmed)[-1] or iri
    return " ".join(unquote(local).replace("_", " ").split()) or iri


def _mended(term: NamedNode, mended: dict[str, int]) -> NamedNode:
    """An IRI of the RDF, RDFS or OWL namespace written without its '#' (``…/owl`` + ``sameAs``), as meant; counted
    in ``mended``.

    >>> _mended(NamedNode("http://www.w3.org/2002/07/owlsameAs"), {}).value
    'http://www.w3.org/2002/07/owl#sameAs'
    """
    for namespace in HASH_NAMESPACES:
        bare = namespace[:-1]
        if term.value.startswith(bare) and len(term.value) > len(bare) and term.value[len(bare)].isalpha():
            mended[term.value] = mended.get(term.value, 0) + 1
            return NamedNode(namespace + term.value[len(bare):])
    return term


def _first_long_line(path: Path, longest: int = 1 << 20) -> int | None:
    """The number of the first line longer than ``longest`` bytes (where an over-long statement is)."""
    try:
        with open_binary(path) as handle:
            number, length = 1, 0
            while block := handle.read(1 << 20):
                *ended, rest = block.split(b"\n")
                for piece in ended:
                    if length + len(piece) > longest:
                        return number
                    number, length = number + 1, 0
                length += len(rest)
                if length > longest:
                    return number
    except (OSError, EOFError, zlib.error):
        return None
    return None
