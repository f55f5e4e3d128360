"""What a new user trips on with their own data (issue 51): a build that would replace another KB, relation
names real data has, Turtle with relative IRIs, filler results, explanations, confidence, small CLI edges.

Each test runs the ``kqe-rdf`` command as a user runs it (``CliRunner`` on :data:`kqe_rdf.cli.cli`), in an
empty working directory with no ``KQE_*`` variables, on small KBs built here for real.
"""

from __future__ import annotations

import json
import os

import pytest
from click.testing import CliRunner

from support.fixtures_kb import movie_kb  # noqa: F401 - fixture
from kqe_rdf.cli import cli
from kqe_rdf.kb.knowledge_base import KnowledgeBase
from support.paths import ROOT


@pytest.fixture(autouse=True)
def clean_environment(tmp_path, monkeypatch):
    for name in list(os.environ):
        if name.startswith(("KQE_", "OPENAI_")):
            monkeypatch.delenv(name)
    monkeypatch.setenv("COLUMNS", "250")
    monkeypatch.chdir(tmp_path)


def run(*args: object):
    return CliRunner().invoke(cli, [str(a) for a in args])


def ok(result):
    assert result.exit_code == 0, f"exit {result.exit_code}: {result.output}\n{result.exception!r}"
    return result


def refused(result, *words: str):
    """Status 2, one error line on stderr holding ``words``, no traceback."""
    assert result.exit_code == 2, f"exit {result.exit_code}: {result.output}\n{result.exception!r}"
    assert isinstance(result.exception, SystemExit) and "Traceback" not in result.output
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, result.stderr
    for word in words:
        assert word in errors[0], errors[0]
    return errors[0]


def write(path, text: str):
    path.write_text(text, encoding="utf-8")
    return path


FAMILY = "Ann\tparent_of\tBob\nBob\tparent_of\tCid\nAnn\tlives_in\tOslo\n"
MUSIC = "Abbey Road\tperformed_by\tThe Beatles\nLet It Be\tperformed_by\tThe Beatles\n"


# --------------------------------------------------------- 1. a build never silently replaces another KB


def test_a_build_into_a_folder_holding_another_source_refuses_and_keeps_it(tmp_path):
    family, music = write(tmp_path / "family.txt", FAMILY), write(tmp_path / "music.txt", MUSIC)
    ok(run("kb", "build", "triples", family, "--kb", tmp_path / "kb"))
    refused(run("kb", "build", "triples", music, "--kb", tmp_path / "kb"),
            str(tmp_path / "kb"), "triples (family.txt)", "--force")
    assert KnowledgeBase.open(tmp_path / "kb").manifest["counts"]["nodes"] == 4  # the family KB, untouched
    ok(run("kb", "build", "triples", family, "--kb", tmp_path / "kb"))  # the same source rebuilds
    ok(run("kb", "build", "triples", music, "--kb", tmp_path / "kb", "--force"))
    assert KnowledgeBase.open(tmp_path / "kb").manifest["counts"]["nodes"] == 3


def test_the_default_kb_folder_is_for_the_bio_kb(tmp_path):
    music = write(tmp_path / "music.ttl.txt", MUSIC)
    refused(run("kb", "build", "triples", music), "data/kb/bio is for the bio KB", "--kb data/kb/music")
    assert not (tmp_path / "data" / "kb" / "bio").exists()


# --------------------------------------------------------- 5. any relation name imports


RELATIONS = ["state/province", "portD'attache", "date of birth", "né à", "/people/person/nationality"]


def test_relation_names_with_slashes_quotes_spaces_and_accents_import(tmp_path):
    lines = "".join(f"Ann\t{relation}\tValue_{n}\n" for n, relation in enumerate(RELATIONS))
    ok(run("kb", "build", "triples", write(tmp_path / "odd.txt", lines), "--kb", tmp_path / "kb"))
    kb = KnowledgeBase.open(tmp_path / "kb")
    assert kb.manifest["counts"]["edges"] == len(RELATIONS)
    labels = {kb.query(f"SELECT ?n WHERE {{ <{iri}> skos:notation ?n }}").__next__()["n"].value: relation.label
              for iri, relation in kb.schema.relations.items() if iri.startswith("https://w3id.org/kqe/kg#")}
    assert labels == {"state/province": "province", "portD'attache": "port d'attache", "date of birth": "date of birth",
                      "né à": "né à", "/people/person/nationality": "nationality"}
    shown = json.loads(ok(run("kb", "info", "--kb", tmp_path / "kb", "--json")).stdout)
    assert sorted(name for name, _count in shown["relations"]) == sorted(RELATIONS)
    rows = ok(run("sparql", "SELECT ?v WHERE { ?a ?r ?v . ?r skos:notation \"né à\" }", "--kb", tmp_path / "kb",
                  "--format", "csv")).stdout
    assert "Value_3" in rows


# --------------------------------------------------------- 8. smaller edges


@pytest.fixture(scope="module")
def family(tmp_path_factory):
    """The new user's family KB, as `kb build triples family.txt --kb ...` makes it."""
    folder = tmp_path_factory.mktemp("family")
    source = write(folder / "family.txt", FAMILY)
    ok(run("kb", "build", "triples", source, "--kb", folder / "kb"))
    return folder / "kb"


@pytest.mark.parametrize("k", ["0", "-3"])
def test_a_count_of_results_below_one_is_refused_in_one_line(family, k):
    refused(run("search", "Ann", "--kb", family, "--k", k), f"--k must be at least 1, got {k}")
    refused(run("eval", "metaqa", write(family.parent / "q.txt", "who is [Ann]\tBob\n"), "--kb", family,
                "--depth", k), f"--depth must be at least 1, got {k}")


def test_sparql_takes_json_and_writes_tsv_in_a_pipe(family):
    query = "SELECT ?n WHERE { ?a rdfs:label ?n } ORDER BY ?n"
    as_json = json.loads(ok(run("sparql", query, "--kb", family, "--json")).stdout)
    assert as_json == json.loads(ok(run("sparql", query, "--kb", family, "--format", "json")).stdout)
    assert ok(run("sparql", query, "--kb", family)).stdout.splitlines()[:3] == ['?n', '"Ann"', '"Bob"']
    refused(run("sparql", query, "--kb", family, "--json", "--format", "csv"), "--json and --format csv disagree")


def test_kb_embed_prints_a_line_and_its_counts_with_json(family, tmp_path):
    said = ok(run("kb", "embed", "--kb", family)).stdout
    assert said.startswith(f"embedded {family}: 4 documents (") and len(said.splitlines()) == 1
    assert json.loads(ok(run("kb", "embed", "--kb", family, "--json")).stdout)["new"] == 0


def test_a_data_file_given_as_the_kb_gets_the_build_command_that_fits_it(tmp_path):
    nobel = write(tmp_path / "nobel.ttl", "<urn:a> <urn:b> <urn:c> .\n")
    refused(run("ask", "who won", "--kb", nobel),
            f"{nobel} is a data file", f"`kqe-rdf kb build rdf {nobel} --kb data/kb/nobel`")
    refused(run("kb", "info", "--kb", tmp_path / "music"), "kqe-rdf kb build IMPORTER SOURCE --kb", "rdf for RDF files")


def test_4step_with_no_llm_says_it_ran_the_offline_reader(family):
    said = ok(run("search", "who is the parent of Bob", "--kb", family, "-m", "4step")).stderr
    assert "no LLM is configured" in said and "offline reader" in said
    assert "no LLM" not in ok(run("search", "Bob", "--kb", family, "-m", "4step-offline")).stderr


# --------------------------------------------------------- 3. fillers are marked


def test_fillers_are_marked_in_the_table_and_the_json(movie_kb):  # noqa: F811
    found = json.loads(ok(run("search", "who directed Kismet", "--kb", movie_kb.path, "-m", "4step-offline",
                              "--json")).stdout)["results"]
    assert [r["filler"] for r in found] == [False] + [True] * 9  # "1 candidate(s); 9 topped up"
    assert found[0]["name"] == "William Dieterle"
    table = ok(run("search", "who directed Kismet", "--kb", movie_kb.path, "-m", "4step-offline")).stdout
    lines = [line for line in table.splitlines() if "│" in line]
    assert "the reading" in next(line for line in lines if "William Dieterle" in line)
    assert sum("filler (fallback search)" in line for line in lines) == 9
    plain = json.loads(ok(run("search", "Kismet", "--kb", movie_kb.path, "--json")).stdout)["results"]
    assert all("filler" not in r for r in plain)  # BM25 reads nothing: nothing to mark


# --------------------------------------------------------- 4. --explain reads like an explanation


def test_explain_names_things_and_writes_the_sparql_whole_in_a_pipe(movie_kb):  # noqa: F811
    out = ok(run("search", "who directed Kismet", "--kb", movie_kb.path, "-m", "4step-offline", "--explain")).stdout
    assert "(Kismet, directed by, ?x)" in out and "type Person" in out  # labels and class names, not IRIs
    assert "William Dieterle: x = William Dieterle, c0 = Kismet" in out  # the support, not a Python dict
    assert "{'" not in out and "1 of 1 mention(s) linked to a node" in out
    sparql = out[out.index("SPARQL\n") + 7:out.index("LIMIT")]
    assert "  ?c0 <https://w3id.org/kqe/metaqa#directed_by> ?x ." in sparql.splitlines()  # one statement a line
    assert all(line == line.rstrip() for line in sparql.splitlines())  # not padded to 80 columns


# --------------------------------------------------------- 6. real files: relative IRIs, classes of one name

#: The new user's Nobel file, in small: a VoID header, relative IRIs, owl:sameAs, two classes named Country.
NOBEL = """\
@prefix void: <http://rdfs.org/ns/void#> .
@prefix dcterms: <http://purl.org/dc/terms/> .
@prefix owl: <http://www.w3.org/2002/07/owl#> .
@prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> .
@prefix foaf: <http://xmlns.com/foaf/0.1/> .
@prefix dbo: <http://dbpedia.org/ontology/> .
@prefix geof: <http://www.geonames.org/ontology#> .
@prefix nobel: <http://data.nobelprize.org/terms/> .

<> a void:Dataset ; dcterms:title "Nobel laureates (sample)" ; void:triples 40 .

<laureate/26> a nobel:Laureate , foaf:Person ; rdfs:label "Albert Einstein" ; foaf:name "Albert Einstein" ;
    owl:sameAs <http://dbpedia.org/resource/Albert_Einstein> ; nobel:laureateAward <award/1921-physics> ;
    dbo:birthPlace <country/germany> .
<laureate/6> a nobel:Laureate , foaf:Person ; rdfs:label "Marie Curie" ;
    nobel:laureateAward <award/1903-physics> , <award/1911-chemistry> ; dbo:birthPlace <country/poland> .
<laureate/1> a nobel:Laureate , foaf:Person ; rdfs:label "Wilhelm Conrad Röntgen" ;
    nobel:laureateAward <award/1901-physics> ; dbo:birthPlace <country/germany> .
<award/1921-physics> a nobel:LaureateAward ; rdfs:label "Nobel Prize in Physics 1921" ; nobel:year 1921 ;
    nobel:category <category/physics> .
<award/1903-physics> a nobel:LaureateAward ; rdfs:label "Nobel Prize in Physics 1903" ; nobel:year 1903 ;
    nobel:category <category/physics> .
<award/1901-physics> a nobel:LaureateAward ; rdfs:label "Nobel Prize in Physics 1901" ; nobel:year 1901 ;
    nobel:category <category/physics> .
<award/1911-chemistry> a nobel:LaureateAward ; rdfs:label "Nobel Prize in Chemistry 1911" ; nobel:year 1911 ;
    nobel:category <category/chemistry> .
<category/physics> a nobel:Category ; rdfs:label "Physics" .
<category/chemistry> a nobel:Category ; rdfs:label "Chemistry" .
<country/germany> a dbo:Country ; rdfs:label "Germany" ; owl:sameAs <http://sws.geonames.org/2921044/> .
<country/poland> a dbo:Country ; rdfs:label "Poland" .
<http://sws.geonames.org/2921044/> a geof:Country ; rdfs:label "Deutschland" .
<http://sws.geonames.org/798544/> a geof:Country ; rdfs:label "Polska" .
"""


@pytest.fixture(scope="module")
def nobel(tmp_path_factory):
    folder = tmp_path_factory.mktemp("nobel")
    ok(run("kb", "build", "rdf", write(folder / "nobel.ttl", NOBEL), "--kb", folder / "kb"))
    return folder / "kb"


def test_relative_iris_resolve_against_a_stable_base_not_the_file_s_path(nobel, tmp_path):
    kb = KnowledgeBase.open(nobel)
    iris = {d.iri for d in kb.documents()}
    assert "urn:kqe:nobel/laureate/26" in iris and not [i for i in iris if i.startswith("file:")]
    given = write(tmp_path / "elsewhere.ttl", NOBEL)
    ok(run("kb", "build", "rdf", given, "--kb", tmp_path / "kb", "--base", "http://data.nobelprize.org/resource/"))
    assert "http://data.nobelprize.org/resource/laureate/26" in {d.iri for d in KnowledgeBase.open(tmp_path / "kb").documents()}
    refused(run("kb", "build", "rdf", given, "--kb", tmp_path / "kb2", "--base", "not an iri"), "--base 'not an iri'")


def test_two_classes_of_one_local_name_are_told_apart(nobel):
    shown = json.loads(ok(run("kb", "info", "--kb", nobel, "--json")).stdout)
    assert {"dbo:Country": 2, "geof:Country": 2}.items() <= dict(shown["types"]).items()
    found = json.loads(ok(run("search", "Germany", "--kb", nobel, "--type", "dbo:Country", "--json")).stdout)
    assert [(r["name"], r["types"]) for r in found["results"]] == [("Germany", ["dbo:Country"])]


# --------------------------------------------------------- 2. confidence: a calibrated probability


def test_ask_json_lists_every_answer_s_nodes(movie_kb):  # noqa: F811
    out = json.loads(ok(run("ask", "which films did Clint Eastwood direct", "--kb", movie_kb.path, "--json")).stdout)
    assert len(out["answers"]) == 3
    assert out["nodes"] == [i for a in out["answers"] for i in a["iris"]]  # not the first answer's alone


def test_confidence_is_lowered_for_many_answers_unread_words_and_approximate_links():
    from kqe_rdf.methods.answering.confidence import calibrated

    sure = {"raw": 0.99, "linking": 1.0, "reading": 0.99, "answer": 1.0, "answers": 1, "stage": "grounded"}
    assert calibrated({**sure, "answers": 378}) < calibrated(sure)
    assert calibrated({**sure, "unread": 1}) < calibrated(sure)
    assert calibrated({**sure, "linking": 0.8, "raw": 0.79}) < calibrated(sure)
    assert 0 < calibrated({**sure, "answers": 378, "unread": 1}) < 0.9


def test_the_calibration_is_refitted_by_a_command(tmp_path):
    import subprocess
    import sys
    from pathlib import Path

    records = [{"set": "s", "qid": str(n), "hit": n % 3 != 0, "answered": True, "confidence": 0.9,
                "because": {"raw": 0.5 + n % 5 / 10, "answers": 1 + n % 4, "stage": "grounded"}} for n in range(60)]
    write(tmp_path / "records.jsonl", "".join(json.dumps(r) + "\n" for r in records))
    script = ROOT / "bench" / "calibrate.py"
    done = subprocess.run([sys.executable, str(script), "--fit", str(tmp_path / "records.jsonl"), "--no-write"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "60 answered questions" in done.stdout and "ECE" in done.stdout and "| [0.9, 1.0] |" in done.stdout
