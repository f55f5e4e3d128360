"""How far the grounded path reader walks to list the kinds of edge leaving a path prefix.

A further hop's listing walks the prefix from the request's constants and reads which kinds of edge leave the
nodes it reaches. It stops after the first ``PathReader.WALKED`` solutions of the walk (``walked=``), so a walk
that comes back to a few nodes ("the writers of the films of director X", each film by the same writer) does not
read every edge on the way.
"""

from __future__ import annotations

from kqe_rdf.kb.build import build_kb
from kqe_rdf.kb.importers.metaqa import MetaQAImporter
from kqe_rdf.kb.knowledge_base import KnowledgeBase
from kqe_rdf.methods.reading import PathReader

M = "https://w3id.org/kqe/metaqa#"
FILMS = 30


def studio_kb(tmp_path) -> KnowledgeBase:
    """Director Ann Vale made 30 films, all written by Bo Reed but the last, written by Cy Moss, who also acts."""
    lines = [f"Film {i}|directed_by|Ann Vale" for i in range(FILMS)]
    lines += [f"Film {i}|written_by|Bo Reed" for i in range(FILMS - 1)]
    lines += [f"Film {FILMS - 1}|written_by|Cy Moss", "Other Film|starred_actors|Cy Moss"]
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "kb.txt").write_text("\n".join(lines) + "\n")
    build_kb(MetaQAImporter([tmp_path / "src"]), tmp_path / "kb")
    return KnowledgeBase.open(tmp_path / "kb")


def writers_of_her_films(kb: KnowledgeBase, reader: PathReader) -> list[str]:
    """The writers the listing of "Ann Vale's films' writers" reaches (the nodes whose kinds of edge it reads)."""
    [ann] = kb.resolve_identifiers(["Ann Vale"])["Ann Vale"]
    slots = {"constants": f"VALUES ?c {{ <{ann}> }}", "reached": f"<{M}Person>", "cap": reader.cap,
             "walk": f"?w1 <{M}directed_by> ?c . ?w1 <{M}written_by> ?n"}
    return [kb.document(iri).name for iri in reader._first_reached(slots, M + "Person")]


def test_a_listing_reads_at_most_walked_solutions_of_the_walk(tmp_path):
    kb = studio_kb(tmp_path)
    # Every film walked: both writers.
    assert sorted(writers_of_her_films(kb, PathReader(kb, walked=FILMS))) == ["Bo Reed", "Cy Moss"]
    # One solution walked: one film, so one writer, however many films come back to him.
    one = writers_of_her_films(kb, PathReader(kb, walked=1))
    assert len(one) == 1 and one[0] in {"Bo Reed", "Cy Moss"}


def test_the_kinds_of_edge_listed_come_from_the_nodes_walked(tmp_path):
    kb = studio_kb(tmp_path)
    [ann] = kb.resolve_identifiers(["Ann Vale"])["Ann Vale"]
    prefix = f"?w1 <{M}directed_by> ?c . ?w1 <{M}written_by> ?n"
    everything = PathReader(kb, walked=FILMS)._hops([ann], prefix, M + "Person")
    # Cy Moss also acts: walking every film lists the edge "starred in" beside "wrote".
    assert (M + "starred_actors", False, M + "Movie") in everything
    assert (M + "written_by", False, M + "Movie") in everything
    # A walk bounded at one solution reads one writer's edges: "wrote" always, "starred in" only from Cy Moss.
    one = PathReader(kb, walked=1)._hops([ann], prefix, M + "Person")
    assert (M + "written_by", False, M + "Movie") in one and set(one) <= set(everything)

