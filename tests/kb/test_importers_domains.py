"""Domain importers (MetaQA, Amazon, CiteSeer, SciFact, passages): tiny inline fixtures in each
source's real format, the same records checked against the ontology by RecordWriter and queried
by SPARQL, bad input, and (marked slow) a capped import of the real shared files."""

from __future__ import annotations

import gzip
import re
from pathlib import Path

import pytest
from pyoxigraph import Quad, RdfFormat, Store

from kqe_rdf.core.errors import InputError, KqeError
from kqe_rdf.kb.importers import get_importer
from kqe_rdf.kb.importers.amazon import AmazonImporter
from kqe_rdf.kb.importers.citeseer import CiteSeerImporter, split_title
from kqe_rdf.kb.importers.metaqa import MetaQAImporter
from kqe_rdf.kb.importers.passages import PassagesImporter
from kqe_rdf.kb.importers.scifact import SciFactImporter
from kqe_rdf.kb.rdfize import RecordWriter
from kqe_rdf.kb.records import Edge, ImportReport, Node
from kqe_rdf.core.resources import ontology_path
from support.paths import SHARED_DATA

DATA = SHARED_DATA
needs_data = pytest.mark.skipif(not DATA.is_dir(), reason=f"shared data not found at {DATA}")
PREFIXES = """
PREFIX kqe: <https://w3id.org/kqe/core#>
PREFIX rdfs: <http://www.w3.org/2000/01/rdf-schema#>
PREFIX metaqa: <https://w3id.org/kqe/metaqa#>
PREFIX amazon: <https://w3id.org/kqe/amazon#>
PREFIX citeseer: <https://w3id.org/kqe/citeseer#>
PREFIX documents: <https://w3id.org/kqe/documents#>
"""
DOMAIN_IMPORTERS = {
    "metaqa": MetaQAImporter,
    "amazon": AmazonImporter,
    "citeseer": CiteSeerImporter,
    "scifact": SciFactImporter,
    "passages": PassagesImporter,
}


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix == ".gz":
        path.write_bytes(gzip.compress(text.encode("utf-8")))
    else:
        path.write_text(text, encoding="utf-8")
    return path


def build(importer) -> tuple[ImportReport, RecordWriter, Store]:
    """Every record through the shared writer (which checks it against the ontology) into a store."""
    report = ImportReport()
    writer = RecordWriter(importer.schema(), importer.domain, report)
    store = Store()
    store.extend(Quad(t.subject, t.predicate, t.object) for t in writer.triples(importer.records(report)))
    return report, writer, store


def column(store: Store, query: str) -> list[str]:
    return sorted(row[0].value for row in store.query(PREFIXES + query))


def by_kind(records) -> tuple[dict[str, Node], list[Edge]]:
    records = list(records)
    nodes = {r.id: r for r in records if isinstance(r, Node)}
    return nodes, [r for r in records if isinstance(r, Edge)]


# --------------------------------------------------------------- registry and ontologies


@pytest.mark.parametrize("name", sorted(DOMAIN_IMPORTERS))
def test_importer_is_registered_and_its_ontology_is_complete(name: str) -> None:
    cls = get_importer(name)
    assert cls is DOMAIN_IMPORTERS[name] and cls.name == name and cls.summary and "\n" not in cls.summary
    schema = cls().schema()
    assert schema.classes, f"{cls.domain}.ttl defines no class under kqe:Node"
    namespace = f"https://w3id.org/kqe/{cls.domain}#"
    relations = [r for r in schema.relations.values() if r.iri.startswith(namespace)]
    for rel in relations:
        assert rel.label and rel.comment and rel.domain and rel.range, rel.iri
        assert rel.inverse in schema.relations, f"{rel.iri} has no owl:inverseOf"
        assert schema.relations[rel.inverse].inverse == rel.iri
    store = Store()
    store.load(path=str(ontology_path(cls.domain)), format=RdfFormat.TURTLE)
    assert store.query(
        f"PREFIX owl: <http://www.w3.org/2002/07/owl#> ASK {{ <https://w3id.org/kqe/{cls.domain}> a owl:Ontology ; "
        "owl:imports <https://w3id.org/kqe/core> }"
    )


@pytest.mark.parametrize("name", sorted(DOMAIN_IMPORTERS))
def test_a_missing_source_folder_is_a_kqe_error(name: str, tmp_path: Path) -> None:
    with pytest.raises(KqeError, match="no such file or folder"):
        list(DOMAIN_IMPORTERS[name]([tmp_path / "absent"]).records(ImportReport()))
    with pytest.raises(KqeError, match="needs"):
        list(DOMAIN_IMPORTERS[name]([]).records(ImportReport()))


@pytest.mark.parametrize("name", sorted(DOMAIN_IMPORTERS))
def test_dataset_info_names_the_licence(name: str) -> None:
    info = DOMAIN_IMPORTERS[name](["x"]).dataset_info()
    assert info["name"] and info["licence"] and info["sources"] == "x"


# ------------------------------------------------------------------------------ MetaQA

METAQA_KB = """\
Kismet|directed_by|William Dieterle
Kismet|starred_actors|Ronald Colman
Kismet|release_year|1944
Kismet|has_tags|bd-r
Kismet|has_genre|War
War|directed_by|Sam Wood
Flags of Our Fathers|has_genre|War
Flags of Our Fathers|has_imdb_votes|famous
1984|directed_by|Michael Radford
Brazil|release_year|1984
"""


def metaqa_folder(tmp_path: Path, kb: str = METAQA_KB) -> Path:
    folder = tmp_path / "metaqa"
    write(folder / "kb_reconstructed.txt.gz", kb)
    write(folder / "relation2text.txt", "0\tdirected by\n1\tstarred actors\n2\thas genre\n")
    write(folder / "entity2text.txt.gz", "0\tKismet\n1\tWar\n2\tNever Used\n")
    return folder


def test_metaqa_types_every_name_once_by_its_roles(tmp_path: Path) -> None:
    importer = MetaQAImporter([metaqa_folder(tmp_path)])
    report = ImportReport()
    nodes, edges = by_kind(importer.records(report))
    assert {i: n.type for i, n in nodes.items()} == {
        "Kismet": "Movie", "William Dieterle": "Person", "Ronald Colman": "Person", "1944": "Year",
        "bd-r": "Tag", "War": "Genre",  # a genre in 2 edges, a movie in 1: the majority wins
        "Sam Wood": "Person", "Flags of Our Fathers": "Movie", "famous": "Votes",
        "1984": "Movie",  # a movie in 1 edge, a year in 1: ties go to Movie
        "Michael Radford": "Person", "Brazil": "Movie",
    }
    assert nodes["Kismet"].name == "Kismet" and nodes["Kismet"].where.endswith("kb_reconstructed.txt.gz:1")
    assert edges[0] == Edge("Kismet", "directed_by", "William Dieterle", where=edges[0].where)
    assert edges[-1].where.endswith(":10")
    assert set(importer.type_conflicts) == {"War", "1984"}
    assert importer.stats["off_range_edges"] == 2  # War directed_by ..., Brazil release_year 1984
    assert importer.stats["unused_entity_names"] == 1
    assert any("2 names are used in several roles" in w for w in report.warnings)


def test_metaqa_records_fit_the_ontology_and_answer_sparql(tmp_path: Path) -> None:
    report, writer, store = build(MetaQAImporter([metaqa_folder(tmp_path)]))
    assert (report.nodes, report.edges, report.skipped_edges) == (12, 10, 0)
    directors = column(store, """SELECT ?name WHERE {
        ?movie kqe:identifier "Kismet" ; metaqa:directed_by ?p . ?p rdfs:label ?name }""")
    assert directors == ["William Dieterle"]
    war_movies = column(store, """SELECT ?id WHERE { ?g a metaqa:Genre ; kqe:identifier "War" .
        ?m metaqa:has_genre ?g ; kqe:identifier ?id }""")
    assert war_movies == ["Flags of Our Fathers", "Kismet"]


def test_metaqa_limit_keeps_the_first_names(tmp_path: Path) -> None:
    report, writer, _ = build(MetaQAImporter([metaqa_folder(tmp_path)], limit=3))
    assert set(writer.nodes) == {"Kismet", "William Dieterle", "Ronald Colman"}
    assert report.edges == 2 and report.skipped_edges == 8


@pytest.mark.parametrize(
    ("line", "message"),
    [("Kismet|directed_by", "expected 'head|relation|tail'"), ("Kismet|produced_by|X", "unknown relation 'produced_by'")],
)
def test_metaqa_malformed_line_names_file_and_line(tmp_path: Path, line: str, message: str) -> None:
    folder = metaqa_folder(tmp_path, "Kismet|release_year|1944\n" + line + "\n")
    with pytest.raises(InputError, match=re.escape(message)) as info:
        list(MetaQAImporter([folder]).records(ImportReport()))
    assert info.value.where.endswith("kb_reconstructed.txt.gz:2")


def test_metaqa_folder_without_a_kb_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(KqeError, match="no MetaQA KB file"):
        list(MetaQAImporter([tmp_path]).records(ImportReport()))


def test_metaqa_incomplete_kb_keeps_a_seeded_half_of_the_edges_and_writes_the_rest_as_head_sentences(
        tmp_path: Path) -> None:
    """GRAFT-Net's incomplete KB: ``kb build metaqa SRC --option kg_fraction=0.5 --option seed=0``."""
    folder = metaqa_folder(tmp_path)
    full_nodes, full_edges = by_kind(MetaQAImporter([folder]).records(ImportReport()))
    importer = MetaQAImporter([folder], kg_fraction="0.5", seed="0")
    report = ImportReport()
    nodes, edges = by_kind(importer.records(report))

    assert len(edges) == 5 and importer.stats["text_only_edges"] == 5
    sentences = {text for n in nodes.values() for field, text in n.fields if field == "description"}
    left_out = [e for e in full_edges if e not in edges]
    label = MetaQAImporter().schema().relation
    assert sentences == {f"{e.head} {label(e.relation).label} {e.tail}." for e in left_out}
    for e in left_out:  # each in its head's document only
        assert any(e.tail in text for _f, text in nodes[e.head].fields)
    assert {i: n.type for i, n in nodes.items()} == {i: n.type for i, n in full_nodes.items()}  # every node stays
    assert "kg_fraction" not in str(MetaQAImporter([folder]).dataset_info())
    assert importer.dataset_info()["incomplete"].startswith("0.5 of the edges kept in the graph (seed 0)")
    assert any("5 edges written only as sentences" in w for w in report.warnings)

    again = by_kind(MetaQAImporter([folder], kg_fraction="0.5", seed="0").records(ImportReport()))[1]
    other = by_kind(MetaQAImporter([folder], kg_fraction="0.5", seed="1").records(ImportReport()))[1]
    assert again == edges and other != edges  # the seed decides, and only the seed


def test_an_incomplete_kb_has_the_left_out_edges_as_sentences_of_the_head_document_only(tmp_path: Path) -> None:
    from kqe_rdf.kb.build import build_kb
    from kqe_rdf.kb.knowledge_base import KnowledgeBase
    from kqe_rdf.methods.answering.evidence import SentenceIndex

    folder = metaqa_folder(tmp_path, "Kismet|directed_by|William Dieterle\nKismet|release_year|1944\n"
                                     "Dr. Ehrlich's Magic Bullet|directed_by|William Dieterle\n"
                                     "Dr. Ehrlich's Magic Bullet|release_year|1940\n")
    build_kb(MetaQAImporter([folder], kg_fraction="0.5", seed="3"), tmp_path / "kb")
    kb = KnowledgeBase.open(tmp_path / "kb")
    in_graph = column(kb.store, "SELECT ?m WHERE { ?x metaqa:directed_by|metaqa:release_year ?y ; rdfs:label ?m }")
    text = {doc.name: doc.text for doc in kb.documents()}
    sentences = {(kb.document(iri).name, s) for iri, _n, s, _score in SentenceIndex(kb).search("directed", 10)}

    assert len(in_graph) == 2 and kb.manifest["counts"]["edges"] == 2
    assert "description: Dr. Ehrlich's Magic Bullet directed by William Dieterle." in text["Dr. Ehrlich's Magic Bullet"]
    assert "Magic Bullet" not in text["William Dieterle"]  # a sentence is not an edge: no inverse line
    assert sentences == {  # the edge kept in the graph reads from both ends; the one left out is one sentence
        ("Kismet", "Kismet — directed by: William Dieterle"), ("William Dieterle", "William Dieterle — directed: Kismet"),
        ("Dr. Ehrlich's Magic Bullet",
         "Dr. Ehrlich's Magic Bullet — Dr. Ehrlich's Magic Bullet directed by William Dieterle.")}


@pytest.mark.parametrize(("options", "message"), [
    ({"kg_fraction": "half"}, "kg_fraction must be a number"),
    ({"kg_fraction": "1.5"}, "between 0 and 1"),
    ({"kg_fraction": "0.5", "seed": "x"}, "seed must be an integer"),
    ({"seed": "1"}, "give kg_fraction too"),
])
def test_incomplete_kb_options_are_checked(options: dict, message: str) -> None:
    with pytest.raises(InputError, match=message):
        MetaQAImporter(["x"], **options)


# ------------------------------------------------------------------------------ Amazon

AMAZON_META = """\
{"asin": "A1", "title": "Wooden &amp; Puzzle Box", "brand": "by\\n    Acme", "category": ["Toys", "Puzzles", "No fees, ever."], "description": ["A <b>wooden</b> box.", "Ages 5+"], "feature": ["Solid oak", "Hand made"], "price": "$9.99", "also_buy": ["A2", "X9"], "also_view": ["A2", "A1"]}
{'asin': 'A2', 'title': '<span class="a-size-medium a-color-secondary"', 'brand': 'Acme', 'category': ['Toys'], 'description': ['Jigsaw for kids'], 'price': '.a-box-inner{background-color:#fff}'}
{"asin": "A1", "title": "Wooden &amp; Puzzle Box"}
"""


def amazon_folder(tmp_path: Path, meta: str = AMAZON_META) -> Path:
    folder = tmp_path / "amazon"
    write(folder / "meta_Toys.json.gz", meta)
    reviews = [
        f'{{"asin": "A1", "overall": {stars}, "vote": "{votes}", "summary": "S{i}", "reviewText": "review {i}"}}'
        for i, (stars, votes) in enumerate([(5, 3), (4, 1), (3, 0), (5, "1,200"), (1, 7), (2, 0), (5, 2)])
    ]
    reviews.append('{"asin": "A2", "overall": 4.0, "reviewText": "Nice"}')
    reviews.append('{"asin": "Z0", "overall": 4.0, "reviewText": "a product not in the meta file"}')
    write(folder / "Toys_5.json.gz", "\n".join(reviews) + "\n")
    return folder


def test_amazon_products_brands_categories_and_reviews(tmp_path: Path) -> None:
    importer = AmazonImporter([amazon_folder(tmp_path)])
    report = ImportReport()
    nodes, edges = by_kind(importer.records(report))
    assert {i: n.type for i, n in nodes.items()} == {
        "A1": "Product", "A2": "Product", "brand:Acme": "Brand", "category:Toys": "Category",
        "category:Puzzles": "Category",
    }
    a1 = dict(nodes["A1"].fields)
    assert nodes["A1"].name == "Wooden & Puzzle Box"
    assert a1["description"] == "A wooden box. Ages 5+" and a1["price"] == "$9.99"
    assert a1["features"] == "Solid oak; Hand made; No fees, ever."  # a sentence in the category list
    assert a1["averageRating"] == "3.6 out of 5 stars (7 reviews)"
    reviews = [v for f, v in nodes["A1"].fields if f == "review"]
    assert len(reviews) == 5 and reviews[0] == "5 out of 5 stars. S3: review 3"  # most helpful first
    assert not any("S2" in r or "S5" in r for r in reviews)  # no votes and shortest: cut
    assert nodes["A2"].name == "Acme: Jigsaw for kids"  # title was only markup
    assert "price" not in dict(nodes["A2"].fields)
    assert {(e.head, e.relation, e.tail) for e in edges} == {
        ("A1", "hasBrand", "brand:Acme"), ("A1", "hasCategory", "category:Toys"),
        ("A1", "hasCategory", "category:Puzzles"), ("category:Puzzles", "subcategoryOf", "category:Toys"),
        ("A1", "alsoBought", "A2"), ("A1", "alsoBought", "X9"), ("A1", "alsoViewed", "A2"),
        ("A2", "hasBrand", "brand:Acme"), ("A2", "hasCategory", "category:Toys"),
    }
    assert importer.stats == {
        "duplicate_products": 1, "untitled_products": 1, "categories_moved_to_features": 1, "bad_prices": 1,
        "reviews_of_unknown_products": 1,
    }
    assert report.duplicate_nodes == 1 and any("listed again" in w and ":3" in w for w in report.warnings)


def test_amazon_records_fit_the_ontology_and_answer_sparql(tmp_path: Path) -> None:
    report, _, store = build(AmazonImporter([amazon_folder(tmp_path)]))
    assert (report.nodes, report.edges, report.skipped_edges) == (5, 8, 1)  # A1 also bought X9: not in the KB
    assert any("'X9'" in w for w in report.warnings)
    acme = column(store, """SELECT ?id WHERE { ?b kqe:identifier "brand:Acme" . ?p amazon:hasBrand ?b ;
        kqe:identifier ?id }""")
    assert acme == ["A1", "A2"]
    assert column(store, "SELECT ?r WHERE { ?p kqe:identifier 'A1' ; amazon:review ?r } LIMIT 1")


def test_amazon_malformed_line_names_file_and_line(tmp_path: Path) -> None:
    folder = amazon_folder(tmp_path, AMAZON_META.splitlines()[0] + "\n{'asin': 'A3', 'title': \n")
    with pytest.raises(InputError, match="neither a JSON object nor a Python dict literal") as info:
        list(AmazonImporter([folder]).records(ImportReport()))
    assert info.value.where.endswith("meta_Toys.json.gz:2")


def test_amazon_folder_without_meta_files_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(KqeError, match="no meta_<Category>.json.gz"):
        list(AmazonImporter([tmp_path]).records(ImportReport()))


# ----------------------------------------------------------------------------- CiteSeer

CITESEER_TEXTS = """\
norman00argument
Argument in Multi-Agent Systems Multi-agent systems research is concerned with societies.
Agents
100157
Optimal External Memory Interval Management  In this paper we present the external interval tree.
DB
kusiak00decomposition
decomposition of data mining tasks without any capitalised title
ML"""
CITESEER_CITES = "100157\tnorman00argument\n100157\t100157\nnorman00argument\tkusiak00decomposition\nghost99\t100157\n"


def citeseer_folder(tmp_path: Path, texts: str = CITESEER_TEXTS, cites: str = CITESEER_CITES) -> Path:
    folder = tmp_path / "citeseer"
    write(folder / "citeseer_texts.txt.gz", texts)
    write(folder / "citeseer.cites", cites)
    return folder


def test_citeseer_papers_and_citations(tmp_path: Path) -> None:
    importer = CiteSeerImporter([citeseer_folder(tmp_path)])
    report = ImportReport()
    nodes, edges = by_kind(importer.records(report))
    assert nodes["norman00argument"].name == "Argument in Multi-Agent Systems"
    assert dict(nodes["norman00argument"].fields) == {
        "abstract": "Multi-agent systems research is concerned with societies.", "researchArea": "agents",
    }
    assert nodes["100157"].name == "Optimal External Memory Interval Management"
    assert nodes["100157"].where.endswith("citeseer_texts.txt.gz:4")
    # No title boundary: named by its first words, whole text kept as the abstract.
    assert nodes["kusiak00decomposition"].name.startswith("decomposition of data mining")
    assert dict(nodes["kusiak00decomposition"].fields)["abstract"].startswith("decomposition of data mining")
    assert [(e.head, e.tail) for e in edges] == [
        ("norman00argument", "100157"), ("kusiak00decomposition", "norman00argument"), ("100157", "ghost99"),
    ]
    assert all(e.relation == "cites" for e in edges)
    assert importer.stats == {"self_citations": 1, "untitled": 1}


def test_citeseer_records_fit_the_ontology_and_answer_sparql(tmp_path: Path) -> None:
    report, _, store = build(CiteSeerImporter([citeseer_folder(tmp_path)]))
    assert (report.nodes, report.edges, report.skipped_edges) == (3, 2, 1)  # ghost99 has no text
    citing = column(store, """SELECT ?id WHERE { ?cited kqe:identifier "norman00argument" .
        ?p citeseer:cites ?cited ; kqe:identifier ?id }""")
    assert citing == ["kusiak00decomposition"]


def test_citeseer_misaligned_record_names_file_and_line(tmp_path: Path) -> None:
    texts = CITESEER_TEXTS.replace("\nAgents\n", "\n")  # the area line of the first paper is lost
    with pytest.raises(InputError, match="expected the research area") as info:
        list(CiteSeerImporter([citeseer_folder(tmp_path, texts)]).records(ImportReport()))
    assert info.value.where.endswith("citeseer_texts.txt.gz:3")
    with pytest.raises(InputError, match="expected 'cited<TAB>citing'") as info:
        list(CiteSeerImporter([citeseer_folder(tmp_path, cites="a\tb\tc\n")]).records(ImportReport()))
    assert info.value.where.endswith("citeseer.cites:1")


def test_citeseer_title_split_keeps_every_word() -> None:
    text = "Actor-Critic Algorithms We propose and analyze a class of actor-critic algorithms"
    title, abstract = split_title(text)
    assert (title, abstract) == ("Actor-Critic Algorithms", "We propose and analyze a class of actor-critic algorithms")


# ------------------------------------------------------------------------------ SciFact

SCIFACT_CSV = '''\
doc_id,title,abstract,structured
4983,Microstructural development of human newborn cerebral white matter.,"['Alterations of the architecture can affect development.'
 'A line scan was applied (n = 17).'
 ""Preterm infants' values differed.""]",False
5836,"Induction of myelodysplasia, a study.","['One sentence only.']",True
'''


def test_scifact_papers_from_the_csv(tmp_path: Path) -> None:
    write(tmp_path / "scifact" / "corpus.csv.gz", SCIFACT_CSV)
    nodes, edges = by_kind(SciFactImporter([tmp_path / "scifact"]).records(ImportReport()))
    assert not edges and list(nodes) == ["4983", "5836"]
    assert dict(nodes["4983"].fields)["abstract"] == (
        "Alterations of the architecture can affect development. A line scan was applied (n = 17). "
        "Preterm infants' values differed."
    )
    assert nodes["5836"].name == "Induction of myelodysplasia, a study."
    assert nodes["5836"].where.endswith("corpus.csv.gz:5")  # the first record spans lines 2-4


def test_scifact_records_fit_the_ontology_and_answer_sparql(tmp_path: Path) -> None:
    write(tmp_path / "corpus.csv", SCIFACT_CSV)
    report, _, store = build(SciFactImporter([tmp_path / "corpus.csv"], limit=1))
    assert report.nodes == 1
    assert column(store, "SELECT ?a WHERE { ?p a documents:Paper ; kqe:identifier '4983' ; documents:abstract ?a }")


def test_scifact_malformed_abstract_names_file_and_line(tmp_path: Path) -> None:
    bad = SCIFACT_CSV + "77,Title,\"['unterminated]\",False\n"
    write(tmp_path / "corpus.csv", bad)
    with pytest.raises(InputError, match="abstract of document 77") as info:
        list(SciFactImporter([tmp_path / "corpus.csv"]).records(ImportReport()))
    assert info.value.where.endswith("corpus.csv:6")
    write(tmp_path / "wrong.csv", "id,text\n1,a\n")
    with pytest.raises(InputError, match="missing doc_id, title, abstract"):
        list(SciFactImporter([tmp_path / "wrong.csv"]).records(ImportReport()))


# ----------------------------------------------------------------------------- passages

PASSAGES_TSV = (
    "id\ttext\n"
    "3620986\tRobert Grey (born 21 April 1951 in Marefield, Leicestershire) is an English musician best known as the drummer.\n"
    "8760866\tRobert Gray was the Democratic candidate.\n"
)


def test_passages_named_by_their_first_words(tmp_path: Path) -> None:
    path = write(tmp_path / "pool_passages.tsv.gz", PASSAGES_TSV)
    importer = PassagesImporter([path])
    nodes, edges = by_kind(importer.records(ImportReport()))
    assert not edges and list(nodes) == ["3620986", "8760866"]
    assert nodes["3620986"].name == "Robert Grey (born 21 April 1951 in Marefield, Leicestershire) is an English…"
    assert dict(nodes["3620986"].fields)["text"].endswith("best known as the drummer.")
    assert nodes["8760866"].where.endswith("pool_passages.tsv.gz:3")
    assert importer.dataset_info()["licence"] == "MS MARCO terms"


def test_passages_records_fit_the_ontology_and_answer_sparql(tmp_path: Path) -> None:
    path = write(tmp_path / "p.tsv", PASSAGES_TSV + "d1\tA title\tText with a title column.\n")
    report, _, store = build(PassagesImporter([path]))
    assert report.nodes == 3
    assert column(store, "SELECT ?n WHERE { ?p a documents:Passage ; kqe:identifier 'd1' ; rdfs:label ?n }") == [
        "A title"
    ]


def test_passages_malformed_line_names_file_and_line(tmp_path: Path) -> None:
    path = write(tmp_path / "p.tsv", PASSAGES_TSV + "only-an-id\n")
    with pytest.raises(InputError, match="expected 'id<TAB>text'") as info:
        list(PassagesImporter([path]).records(ImportReport()))
    assert info.value.where.endswith("p.tsv:4")


# ------------------------------------------------------------------- real shared data


@pytest.mark.slow
@needs_data
@pytest.mark.parametrize(
    ("name", "source", "limit", "min_edges"),
    [
        ("metaqa", "metaqa", 2000, 1000),
        ("amazon", "amazon", 2000, 1000),
        ("citeseer", "citeseer", 2000, 1000),
        ("scifact", "scifact", 2000, 0),
        ("passages", "trec_dl19/pool_passages.tsv.gz", 2000, 0),
    ],
)
def test_real_shared_data_imports_with_a_limit(name: str, source: str, limit: int, min_edges: int) -> None:
    importer = get_importer(name)([DATA / source], limit=limit)
    report, writer, store = build(importer)
    assert report.nodes == limit and len(writer.nodes) == limit
    assert report.edges >= min_edges
    assert report.empty_nodes == 0
    labelled = column(store, "SELECT (COUNT(?n) AS ?c) WHERE { ?n a kqe:Node ; rdfs:label ?l }")
    assert int(labelled[0]) == limit
    for seen in list(writer.nodes.values())[:50]:
        assert re.search(r":\d+$", seen.where), seen.where
