"""Two tiny real KBs for the 4StepFocus tests: movies (MetaQA format) and diseases (HPO format).

Both go through the real importers, build (Oxigraph, Tantivy) and the packaged
ONNX encoder, once per session: the test modules that import these fixtures
share one build of each (``_built``). Tests use them read-only.

The movie KB has 2-hop chains (Ridley Scott → his films → their actors), people
who both direct and act (Clint Eastwood, Spike Lee), names shared by nodes of
two types (the movie "Heat" and the tag "heat"; the person "Clint Eastwood" and
the tag "clint eastwood"), a tag inside a longer title ("taxi" / "Taxi Driver")
and a tag that is a schema word ("director").

The disease KB has a small phenotype hierarchy (Focal-onset seizure and
Bilateral tonic-clonic seizure are kinds of Seizure) and diseases annotated
with the specific terms only, one of which explicitly lacks Seizure.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path

import pytest

from kqe_rdf.kb.build import build_kb, embed_kb
from kqe_rdf.kb.importers.bio import BioImporter
from kqe_rdf.kb.importers.metaqa import MetaQAImporter
from kqe_rdf.kb.knowledge_base import KnowledgeBase
from kqe_rdf.methods.retrieval import Hit

MOVIES = """\
Kismet|directed_by|William Dieterle
Kismet|written_by|Edward Knoblock
Kismet|starred_actors|Ronald Colman
Kismet|starred_actors|Marlene Dietrich
Kismet|release_year|1944
Kismet|in_language|English
Kismet|has_genre|Drama
Kismet|has_tags|bd-r
The Hunchback of Notre Dame|directed_by|William Dieterle
The Hunchback of Notre Dame|starred_actors|Charles Laughton
The Hunchback of Notre Dame|release_year|1939
The Hunchback of Notre Dame|in_language|English
The Hunchback of Notre Dame|has_genre|Drama
Unforgiven|directed_by|Clint Eastwood
Unforgiven|starred_actors|Clint Eastwood
Unforgiven|starred_actors|Gene Hackman
Unforgiven|written_by|David Webb Peoples
Unforgiven|release_year|1992
Unforgiven|in_language|English
Unforgiven|has_genre|Western
Unforgiven|has_tags|clint eastwood
Unforgiven|has_tags|director
Gran Torino|directed_by|Clint Eastwood
Gran Torino|starred_actors|Clint Eastwood
Gran Torino|release_year|2008
Gran Torino|in_language|English
Gran Torino|has_genre|Drama
The Bridges of Madison County|directed_by|Clint Eastwood
The Bridges of Madison County|starred_actors|Meryl Streep
The Bridges of Madison County|release_year|1995
The Bridges of Madison County|has_genre|Romance
Amélie|directed_by|Jean-Pierre Jeunet
Amélie|starred_actors|Audrey Tautou
Amélie|release_year|2001
Amélie|in_language|French
Amélie|has_genre|Comedy
Delicatessen|directed_by|Jean-Pierre Jeunet
Delicatessen|release_year|1991
Delicatessen|in_language|French
Delicatessen|has_genre|Comedy
The Seventh Seal|directed_by|Ingmar Bergman
The Seventh Seal|starred_actors|Max von Sydow
The Seventh Seal|release_year|1957
The Seventh Seal|in_language|Swedish
Wild Strawberries|directed_by|Ingmar Bergman
Wild Strawberries|release_year|1957
Wild Strawberries|in_language|Swedish
Blade Runner|directed_by|Ridley Scott
Blade Runner|starred_actors|Harrison Ford
Blade Runner|written_by|Philip K. Dick
Blade Runner|release_year|1982
Blade Runner|in_language|English
Blade Runner|has_genre|Science Fiction
Alien|directed_by|Ridley Scott
Alien|starred_actors|Sigourney Weaver
Alien|release_year|1979
Alien|has_genre|Horror
Witness|directed_by|Peter Weir
Witness|starred_actors|Harrison Ford
Witness|release_year|1985
Witness|has_genre|Thriller
Heat|directed_by|Michael Mann
Heat|starred_actors|Al Pacino
Heat|starred_actors|Robert De Niro
Heat|release_year|1995
Heat|has_genre|Crime
Do the Right Thing|directed_by|Spike Lee
Do the Right Thing|starred_actors|Spike Lee
Do the Right Thing|release_year|1989
Do the Right Thing|has_tags|heat
Taxi Driver|directed_by|Martin Scorsese
Taxi Driver|starred_actors|Robert De Niro
Taxi Driver|written_by|Paul Schrader
Taxi Driver|release_year|1976
Taxi Driver|has_genre|Crime
Taxi Driver|has_tags|taxi
"""

HP_OBO = """format-version: 1.2
data-version: hp/releases/2099-01-01

[Term]
id: HP:0000001
name: All

[Term]
id: HP:0000118
name: Phenotypic abnormality
is_a: HP:0000001

[Term]
id: HP:0001250
name: Seizure
synonym: "Epileptic seizure" EXACT []
is_a: HP:0000118

[Term]
id: HP:0007359
name: Focal-onset seizure
is_a: HP:0001250

[Term]
id: HP:0002069
name: Bilateral tonic-clonic seizure
is_a: HP:0001250

[Term]
id: HP:0000348
name: High forehead
synonym: "Tall forehead" EXACT layperson []
is_a: HP:0000118

[Term]
id: HP:0001249
name: Intellectual disability
is_a: HP:0000118

[Term]
id: HP:0000006
name: Autosomal dominant inheritance
is_a: HP:0000001
"""

# disease, name, qualifier, hpo, reference, evidence, onset, frequency, sex, modifier, aspect, biocuration
HPOA_ROWS = [
    "OMIM:100001\tFocal epilepsy type 1\t\tHP:0007359\tPMID:1\tPCS\t\t\t\t\tP\tx",
    "OMIM:100001\tFocal epilepsy type 1\t\tHP:0001249\tPMID:1\tPCS\t\t\t\t\tP\tx",
    "OMIM:100002\tFrontal bossing syndrome\t\tHP:0000348\tPMID:2\tPCS\t\t\t\t\tP\tx",
    "OMIM:100002\tFrontal bossing syndrome\tNOT\tHP:0001250\tPMID:2\tPCS\t\t\t\t\tP\tx",
    "OMIM:100003\tGeneralized epilepsy with forehead anomaly\t\tHP:0002069\tPMID:3\tPCS\t\t\t\t\tP\tx",
    "OMIM:100003\tGeneralized epilepsy with forehead anomaly\t\tHP:0000348\tPMID:3\tPCS\t\t\t\t\tP\tx",
    "OMIM:100003\tGeneralized epilepsy with forehead anomaly\t\tHP:0000006\tPMID:3\tTAS\t\t\t\t\tI\tx",
]
G2P_ROWS = ["2113\tETS1\tHP:0000348\tHigh forehead\t-\tOMIM:100002"]

_built: dict[str, KnowledgeBase] = {}

#: The HPO annotation files' layout (phenotype.hpoa's header, genes_to_phenotype.txt).
HPOA_HEADER = (
    "#description: test\n#version: 2099-01-01\n"
    "database_id\tdisease_name\tqualifier\thpo_id\treference\tevidence\tonset\tfrequency\t"
    "sex\tmodifier\taspect\tbiocuration\n"
)
G2P = (
    "ncbi_gene_id\tgene_symbol\thpo_id\thpo_name\tfrequency\tdisease_id\n"
    "2113\tETS1\tHP:0000348\tHigh forehead\t3/7\tOMIM:147791\n"
    "2113\tETS1\tHP:0000348\tHigh forehead\t-\tORPHA:2308\n"
    "2113\tETS1\tHP:0001249\tIntellectual disability\t0/4\tORPHA:2308\n"
)



def _once(name: str, tmp_path_factory, write_and_import: Callable[[Path], object]) -> KnowledgeBase:
    if name not in _built:
        source = tmp_path_factory.mktemp(f"{name}-source")
        kb_dir = tmp_path_factory.mktemp("fourstep-kbs") / name
        build_kb(write_and_import(source), kb_dir)
        embed_kb(kb_dir)
        _built[name] = KnowledgeBase.open(kb_dir)
    return _built[name]


@pytest.fixture(scope="session")
def movie_kb(tmp_path_factory) -> KnowledgeBase:
    """The movie KB: ``kb.txt`` as MetaQA ships it, read by the metaqa importer."""

    def write(folder: Path) -> MetaQAImporter:
        (folder / "kb.txt").write_text(MOVIES, encoding="utf-8")
        return MetaQAImporter([folder])

    return _once("movies", tmp_path_factory, write)


@pytest.fixture(scope="session")
def bio_kb(tmp_path_factory) -> KnowledgeBase:
    """The disease KB: a folder of hp.obo, phenotype.hpoa and genes_to_phenotype.txt, read by the bio importer."""

    def write(folder: Path) -> BioImporter:
        write_hpo(folder)
        return BioImporter([folder], doid="none")

    return _once("diseases", tmp_path_factory, write)


def write_hpo(folder: Path) -> Path:
    """The disease KB's source files, as HPO ships them (hp.obo, phenotype.hpoa, genes_to_phenotype.txt)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "hp.obo").write_text(HP_OBO, encoding="utf-8")
    (folder / "phenotype.hpoa").write_text(HPOA_HEADER + "\n".join(HPOA_ROWS) + "\n", encoding="utf-8")
    g2p_header = G2P.splitlines()[0]
    (folder / "genes_to_phenotype.txt").write_text("\n".join([g2p_header, *G2P_ROWS]) + "\n", encoding="utf-8")
    return folder


def metaqa_kb(folder: Path, lines: str, **options: str) -> KnowledgeBase:
    """A MetaQA-format KB of ``lines`` built in ``folder`` (``src/kb.txt``, ``kb/``), without embeddings;
    ``options`` are the importer's (``kg_fraction="0.5", seed="3"``)."""
    (folder / "src").mkdir(parents=True)
    (folder / "src" / "kb.txt").write_text(lines, encoding="utf-8")
    build_kb(MetaQAImporter([folder / "src"], **options), folder / "kb")
    return KnowledgeBase.open(folder / "kb")


def turtle_kb(folder: Path, turtle: str) -> KnowledgeBase:
    """A KB of a Turtle text, read by the RDF importer and built in ``folder`` (``graph.ttl``, ``kb/``)."""
    from kqe_rdf.kb.importers.rdf import RdfImporter

    (folder / "graph.ttl").write_text(turtle, encoding="utf-8")
    build_kb(RdfImporter([folder / "graph.ttl"]), folder / "kb")
    return KnowledgeBase.open(folder / "kb")


def node(kb: KnowledgeBase, identifier: str) -> str:
    """The IRI of the node with this source id (MetaQA ids are the names; HPO ids like HP:0001250)."""
    [iri] = kb.resolve_identifiers([identifier])[identifier]
    return iri


def names(kb: KnowledgeBase, items: Iterable[Hit | str]) -> list[str]:
    """Source ids of hits or IRIs, in order, e.g. ``names(kb, stage.search("who directed Kismet"))``."""
    return [kb.document(i.iri if isinstance(i, Hit) else i).identifier for i in items]


def ask(kb: KnowledgeBase, question: str, k: int = 5) -> list[str]:
    """The names of the first ``k`` answers 4StepFocus (offline) ranks for ``question``."""
    from kqe_rdf.methods.registry import pipeline

    stage = pipeline("4step-offline", kb, kb.settings, k, None)
    return [kb.document(hit.iri).name for hit in stage.search(question, "q")]
