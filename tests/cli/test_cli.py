"""The ``kqe-rdf`` command line, run as a user runs it.

Most tests go through ``click.testing.CliRunner`` on :data:`kqe_rdf.cli.cli` against the
session's real KBs (the product KB of ``conftest``, the movie KB of ``fixtures_kb``); a few run
the installed console script in a subprocess. Every test runs in an empty working directory
with no ``KQE_*``/``OPENAI_*`` variables, so a developer's own configuration cannot leak in.
Errors a user can act on exit with status 2 and one readable message, never a traceback.
"""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from pyoxigraph import RdfFormat, parse

from support.chat_server import chat_server, error  # noqa: F401 (fixture)
from support.fixtures_kb import bio_kb, movie_kb  # noqa: F401 - fixture
from support.live_servers import oxigraph_endpoint  # noqa: F401 - fixture
from kqe_rdf.cli import cli

SKB = "https://w3id.org/kqe/skb#"
M = "https://w3id.org/kqe/metaqa#"
METHODS = ["bm25", "dense", "hybrid", "hybrid-rrf", "prf", "4step", "4step-offline"]
HEAVY = ("pyoxigraph", "tantivy", "onnxruntime", "numpy", "openai", "ir_measures")


@pytest.fixture(autouse=True)
def clean_environment(tmp_path, monkeypatch):
    """No kqe-rdf.toml in the working directory and no configuration from the environment; a terminal
    wide enough that rich does not wrap the long temporary paths in messages."""
    for name in list(os.environ):
        if name.startswith(("KQE_", "OPENAI_")):
            monkeypatch.delenv(name)
    monkeypatch.setenv("COLUMNS", "250")
    monkeypatch.chdir(tmp_path)


@pytest.fixture
def run():
    """``run(*args)``: the CLI's result; stdout and stderr are kept apart."""
    runner = CliRunner()

    def invoke(*args: object):
        return runner.invoke(cli, [str(a) for a in args])

    return invoke


def ok(result):
    assert result.exit_code == 0, f"exit {result.exit_code}: {result.output}\n{result.exception!r}"
    return result


def refused(result, *words: str):
    """The result of a command a user got wrong: status 2, the words on stderr, no traceback."""
    assert result.exit_code == 2, f"exit {result.exit_code}: {result.output}\n{result.exception!r}"
    assert isinstance(result.exception, SystemExit)  # not an uncaught exception
    assert "Traceback" not in result.output
    for word in words:
        assert word in result.stderr
    return result


def search(run, kb_path, text, *options):
    return json.loads(ok(run("search", text, "--kb", kb_path, "--json", *options)).stdout)


def script(name: str) -> str:
    """The installed console script next to this Python (``pip install -e .`` puts it there), never one on PATH."""
    path = Path(sys.executable).with_name(name)
    if not path.exists():
        pytest.fail(f"{name} is not installed beside {sys.executable}: pip install -e '.[test]'")
    return str(path)


# --------------------------------------------------------------- start-up cost


def test_importing_the_cli_and_showing_help_loads_no_heavy_library():
    code = (
        "import json, sys\n"
        "from kqe_rdf.cli import cli\n"
        "for args in (['--help'], ['search', '--help'], ['eval', '--help'], ['kb', 'build', '--help'],\n"
        "             ['sparql', '--help'], ['triplets', '--help']):\n"
        "    try:\n"
        "        cli(args, standalone_mode=False)\n"
        "    except SystemExit:\n"
        "        pass\n"
        f"print(json.dumps(sorted({{m.split('.')[0] for m in sys.modules}} & set({list(HEAVY)!r}))))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "Usage:" in done.stdout
    assert json.loads(done.stdout.splitlines()[-1]) == []


def test_the_console_script_shows_help():
    done = subprocess.run([script("kqe-rdf"), "--help"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("Usage: kqe-rdf")
    for command in ("kb", "search", "triplets", "sparql", "eval"):
        assert f"  {command} " in done.stdout


def test_the_console_script_reports_a_missing_kb_in_one_line(tmp_path):
    done = subprocess.run([script("kqe-rdf"), "kb", "info", "--kb", str(tmp_path / "nowhere")],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert done.stderr.startswith(f"error: no knowledge base at {tmp_path / 'nowhere'}")
    assert "kqe-rdf kb build" in done.stderr and "Traceback" not in done.stderr
    assert done.stdout == ""


# ----------------------------------------------------------------------- kb


def test_kb_build_then_info(run, products_file, tmp_path):
    target = tmp_path / "products"
    built = ok(run("kb", "build", "jsonl", products_file, "--kb", target))
    assert "built" in built.stderr and "17 nodes, 16 edges" in built.stderr
    assert "1 edges skipped" in built.stderr and "B999" in built.stderr  # the warning names the bad edge
    assert built.stdout == ""

    info = json.loads(ok(run("kb", "info", "--kb", target, "--json")).stdout)
    assert info["path"] == str(target)
    assert info["manifest"]["importer"] == "jsonl"
    assert info["manifest"]["counts"]["nodes"] == 17
    assert dict(info["types"]) == {"Brand": 4, "Category": 4, "Product": 9}  # as --type takes them
    assert dict(info["relations"]) == {"hasBrand": 7, "inCategory": 7, "compatibleWith": 2}

    table = ok(run("kb", "info", "--kb", target)).stdout
    assert "importer jsonl" in table and "embeddings: none yet" in table and "hasBrand" in table
    # The dataset's fields one a line as "key: value", not a Python dict wrapped where the terminal ends.
    assert f"\n  sources: {products_file}\n" in table and "{'" not in table


def test_a_build_s_progress_counts_every_document_and_says_what_ran_alongside(run, products_file, tmp_path):
    said = ok(run("kb", "build", "jsonl", products_file, "--kb", tmp_path / "products")).stderr

    assert "rendering documents: 17/17 documents" in said and "0/17" not in said
    assert "built alongside: BM25 index (" in said  # with the seconds each took, not an empty "(0 s)" step
    assert "BM25 index, documents file and relation phrase vectors: (" not in said


def test_kb_build_with_limit_and_an_unknown_importer_or_bad_option(run, products_file, tmp_path):
    small = tmp_path / "small"
    ok(run("kb", "build", "jsonl", products_file, "--kb", small, "--limit", "5"))
    assert json.loads(ok(run("kb", "info", "--kb", small, "--json")).stdout)["manifest"]["counts"]["nodes"] == 5

    refused(run("kb", "build", "nosuch", products_file, "--kb", tmp_path / "x"),
            "error: no importer named 'nosuch'", "available:", "jsonl")
    refused(run("kb", "build", "jsonl", products_file, "--kb", tmp_path / "y", "--option", "novalue"),
            "expected KEY=VALUE")
    refused(run("kb", "build", "jsonl", tmp_path / "missing.jsonl", "--kb", tmp_path / "z"), "missing.jsonl")
    assert not (tmp_path / "x").exists() and not (tmp_path / "z" / "manifest.json").exists()


def test_kb_build_help_shows_the_embed_default_and_what_limit_limits(run):
    text = " ".join(ok(run("kb", "build", "--help")).stdout.split())
    assert "--embed / --no-embed" in text and "[default: no-embed]" in text
    assert "import only the first N records the importer reads (bio: N diseases, with the phenotypes" in text


def test_a_limited_bio_build_says_what_it_kept_and_how_many_nodes_that_made(run, tmp_path):
    from support.fixtures_kb import write_hpo

    source = write_hpo(tmp_path / "hpo")
    built = ok(run("kb", "build", "bio", source, "--kb", tmp_path / "kb", "--limit", "1", "--option", "doid=none"))
    nodes = json.loads(ok(run("kb", "info", "--kb", tmp_path / "kb", "--json")).stdout)["manifest"]["counts"]["nodes"]
    assert nodes > 1  # the disease, and the phenotypes (with their ancestors) it names
    assert f"--limit 1: imported first 1 diseases of phenotype.hpoa, {nodes} nodes with what they name" in built.stderr


def test_messages_with_long_paths_are_not_broken_across_lines(run, products_file, tmp_path, monkeypatch):
    monkeypatch.setenv("COLUMNS", "40")
    target = tmp_path / ("a-rather-long-folder-name-for-the-knowledge-base-" * 2) / "products"
    built = ok(run("kb", "build", "jsonl", products_file, "--kb", target))
    lines = built.stderr.splitlines()
    assert f"building jsonl KB at {target} …" in lines
    assert any(line.startswith(f"built {target}: 17 nodes") for line in lines)


def test_search_with_an_expansion_on_a_kb_without_vectors_says_so_and_keeps_the_expansion(run, products_file,
                                                                                          tmp_path):
    ok(run("kb", "build", "jsonl", products_file, "--kb", tmp_path / "kb"))  # no vectors
    shown = ok(run("search", "camera for wildlife photography", "-m", "kar-offline", "--kb", tmp_path / "kb"))
    assert "note: the KB has no vectors (`kqe-rdf kb embed`): the expanded query was searched with BM25" \
        in shown.stderr
    data = search(run, tmp_path / "kb", "camera for wildlife photography", "-m", "kar-offline")
    expansion = data["provenance"]["explain"]["expansion"]
    assert data["provenance"]["pipeline"].startswith("Expand(kar-offline, offline) >> BM25")
    assert expansion["method"] == "kar-offline" and expansion["expanded_query"] and expansion["entities"]
    assert any("no vectors" in note for note in expansion["notes"])


def test_a_missing_kb_is_refused_with_the_build_hint(run, tmp_path):
    for args in (["kb", "info"], ["search", "tripod"], ["sparql", "ASK {}"], ["triplets", "who directed Kismet"]):
        refused(run(*args, "--kb", tmp_path / "nowhere"), f"no knowledge base at {tmp_path / 'nowhere'}",
                "kqe-rdf kb build")


def test_the_kb_comes_from_KQE_KB_when_no_option_is_given(run, kb, monkeypatch):
    monkeypatch.setenv("KQE_KB", str(kb.path))
    assert json.loads(ok(run("kb", "info", "--json")).stdout)["path"] == str(kb.path)


# ------------------------------------------------------------------- search


@pytest.mark.parametrize("method", METHODS)
def test_search_json_for_each_method(run, kb, method):
    out = search(run, kb.path, "Manfrotto travel tripod", "--method", method, "--k", "3")
    assert (out["query"], out["method"]) == ("Manfrotto travel tripod", method)
    rows = out["results"]
    assert [r["rank"] for r in rows] == [1, 2, 3]
    assert rows[0]["id"] == "B007" and rows[0]["name"] == "Manfrotto Befree Travel Tripod"
    assert rows[0]["types"] == ["Product"] and rows[0]["iri"] == f"https://w3id.org/kqe/skb/node/B007"
    assert rows[0]["snippet"].startswith("name: Manfrotto Befree Travel Tripod")
    assert [r["score"] for r in rows] == sorted((r["score"] for r in rows), reverse=True)
    assert "explain" not in out


def test_search_restricted_to_a_type(run, kb):
    rows = search(run, kb.path, "Manfrotto travel tripod", "--type", "Brand")["results"]
    assert rows and all(r["types"] == ["Brand"] for r in rows)  # the class as --type and `kb info` name it
    assert rows[0]["id"] == "manfrotto"
    # --type takes a class's name in any case, as a user may write it after reading a label ("brand").
    assert search(run, kb.path, "Manfrotto travel tripod", "--type", "brand")["results"] == rows
    refused(run("search", "tripod", "--kb", kb.path, "--type", "brnd"), "did you mean Brand?")


def test_search_takes_k_as_a_short_option_too(run, kb):
    assert len(search(run, kb.path, "camera", "-k", "2")["results"]) == 2


def test_a_search_runs_with_the_cyclic_collector_paused_and_leaves_it_on(run, kb, monkeypatch):
    import gc

    from kqe_rdf.methods import registry

    seen = []
    made = registry.pipeline
    monkeypatch.setattr(registry, "pipeline", lambda *a, **k: seen.append(gc.isenabled()) or made(*a, **k))
    assert gc.isenabled()
    ok(run("search", "camera", "--kb", kb.path, "--json"))
    assert seen == [False] and gc.isenabled()


def test_search_as_a_table(run, kb):
    out = ok(run("search", "travel tripod", "--kb", kb.path)).stdout
    assert "bm25: travel tripod" in out and "Manfrotto Befree Travel Tripod" in out and "B007" in out


def test_search_4step_explain_shows_triplets_links_and_sparql(run, movie_kb):
    out = ok(run("search", "who directed Kismet", "--kb", movie_kb.path, "--method", "4step", "--explain")).stdout
    assert "triplets (offline; answer ?x" in out
    assert "(Kismet, directed by, ?x)" in out  # the relation's label, not its IRI
    assert "linked 'Kismet' → Kismet <https://w3id.org/kqe/metaqa/node/Kismet> 1.0 (exact)" in out
    assert "SPARQL" in out and "VALUES ?c0" in out
    assert "1 candidate(s) from SPARQL; 9 topped up from the fallback" in out
    assert out.index("William Dieterle") < out.index("triplets (")  # the results come first


@pytest.mark.parametrize("flag, mode", [("--strict", "strict"), ("--soft", "soft")])
def test_search_4step_json_explain_in_each_mode(run, movie_kb, flag, mode):
    out = search(run, movie_kb.path, "who directed Kismet", "--method", "4step", "--explain", flag, "--k", "3")
    assert out["results"][0]["id"] == "William Dieterle"
    explain = out["explain"]
    assert explain["mode"] == mode and explain["candidates"] == 1
    assert ("?unit" in explain["sparql"]) == (mode == "soft")
    assert explain["triplets"]["source"] == "offline"


def test_search_4step_uses_the_llm_configured_in_the_environment(run, movie_kb, chat_server, monkeypatch):
    monkeypatch.setenv("OPENAI_BASE_URL", chat_server.url)
    monkeypatch.setenv("KQE_LLM_MODEL", "scripted")
    monkeypatch.setenv("KQE_LLM_CACHE", "off")
    monkeypatch.setenv("KQE_FOURSTEP_LLM_READING", "always")  # asked even where the offline reading is confident
    chat_server.script('{"answer": "?x", "triplets": [{"head": "Kismet", "relation": "written_by", "tail": "?x"}]}')
    out = search(run, movie_kb.path, "who wrote Kismet", "--method", "4step", "--explain", "--k", "3")
    assert out["results"][0]["id"] == "Edward Knoblock"
    assert out["explain"]["readings"]["llm"]["triplets"]["source"] == "llm:scripted"
    assert out["explain"]["llm_reading"]["outcome"] == "merged"
    assert chat_server.requests[0]["model"] == "scripted"


def test_search_4step_with_a_failing_llm_still_answers(run, movie_kb, chat_server, monkeypatch):
    for name, value in (("OPENAI_BASE_URL", chat_server.url), ("KQE_LLM_MODEL", "scripted"),
                        ("KQE_LLM_CACHE", "off"), ("KQE_LLM_MAX_RETRIES", "0"), ("KQE_LLM_TIMEOUT", "0.5"),
                        ("KQE_FOURSTEP_LLM_READING", "always")):
        monkeypatch.setenv(name, value)
    chat_server.script(error(503))
    out = search(run, movie_kb.path, "who directed Kismet", "--method", "4step", "--explain", "--k", "3")
    assert out["results"][0]["id"] == "William Dieterle"
    assert out["explain"]["triplets"]["source"] == "offline (after LLM failure)"
    assert "HTTP 503" in out["explain"]["triplets"]["notes"][0]


def test_search_refuses_an_unknown_method_an_empty_query_and_an_unknown_type(run, kb):
    refused(run("search", "tripod", "--kb", kb.path, "--method", "bm26"),
            "error: no retrieval method 'bm26'; available: bm25, dense, hybrid, hybrid-rrf, prf, 4step, 4step-offline")
    refused(run("search", "  ", "--kb", kb.path), "the query is empty")
    refused(run("search", "tripod", "--kb", kb.path, "--type", "Spaceship"), "Spaceship")


def test_dense_search_on_a_kb_without_embeddings_says_how_to_embed(run, products_file, tmp_path):
    target = tmp_path / "plain"
    ok(run("kb", "build", "jsonl", products_file, "--kb", target))
    refused(run("search", "tripod", "--kb", target, "--method", "dense"), "kqe-rdf kb embed")


# ----------------------------------------------------------------- triplets


def test_triplets_shows_the_reading_links_and_sparql(run, movie_kb):
    out = json.loads(ok(run("triplets", "who directed Kismet", "--kb", movie_kb.path, "--json")).stdout)
    assert out["triplets"]["source"] == "offline"
    assert [(t["head"], t["relation"], t["tail"]) for t in out["triplets"]["triplets"]] == [
        ("Kismet", f"{M}directed_by", "?x")]
    assert out["linked"]["Kismet"][0]["iri"] == "https://w3id.org/kqe/metaqa/node/Kismet"
    assert "?unit" in out["sparql"] and f"<{M}directed_by>" in out["sparql"]

    strict = json.loads(ok(run("triplets", "who directed Kismet", "--kb", movie_kb.path, "--strict",
                               "--json")).stdout)
    assert "?unit" not in strict["sparql"] and f"<{M}directed_by>" in strict["sparql"]

    text = ok(run("triplets", "who directed Kismet", "--kb", movie_kb.path)).stdout
    assert "(Kismet, directed by, ?x)" in text and "SPARQL" in text
    assert "candidate(s)" not in text  # the query is compiled, not run: no count to claim


def test_triplets_of_a_question_naming_nothing(run, movie_kb):
    out = json.loads(ok(run("triplets", "what is a good film tonight", "--kb", movie_kb.path, "--json")).stdout)
    assert out["triplets"]["triplets"] == [] and out["sparql"] is None
    assert out["triplets"]["notes"] == ["no entity of the KB is named in the query"]


def test_triplets_reads_with_the_configured_llm_like_search_does(run, movie_kb, chat_server, monkeypatch):
    monkeypatch.setenv("OPENAI_BASE_URL", chat_server.url)
    monkeypatch.setenv("KQE_LLM_MODEL", "scripted")
    monkeypatch.setenv("KQE_LLM_CACHE", "off")
    chat_server.script('{"answer": "?x", "triplets": [{"head": "Kismet", "relation": "starred actors", "tail": "?x"}]}')
    out = json.loads(ok(run("triplets", "who is in Kismet", "--kb", movie_kb.path, "--json")).stdout)
    assert out["triplets"]["source"] == "llm:scripted"
    assert [t["relation"] for t in out["triplets"]["triplets"]] == [f"{M}starred_actors"]
    assert len(chat_server.requests) == 1


# ------------------------------------------------------------------- sparql

NIKON = 'SELECT ?id WHERE { ?p skb:hasBrand ?b . ?b kqe:identifier "nikon" . ?p kqe:identifier ?id } ORDER BY ?id'
NIKON_IDS = ["B001", "B004", "B005"]


def test_sparql_select_in_every_format(run, kb):
    as_json = json.loads(ok(run("sparql", NIKON, "--kb", kb.path, "--format", "json")).stdout)
    assert as_json["head"]["vars"] == ["id"]
    assert [b["id"]["value"] for b in as_json["results"]["bindings"]] == NIKON_IDS

    as_csv = list(csv.reader(io.StringIO(ok(run("sparql", NIKON, "--kb", kb.path, "--format", "csv")).stdout)))
    assert as_csv == [["id"], *[[i] for i in NIKON_IDS]]

    as_tsv = ok(run("sparql", NIKON, "--kb", kb.path, "--format", "tsv")).stdout.splitlines()
    assert as_tsv == ["?id", *[f'"{i}"' for i in NIKON_IDS]]

    table = ok(run("sparql", NIKON, "--kb", kb.path, "--format", "table"))
    assert all(i in table.stdout for i in NIKON_IDS)
    # the count, then which protection the query ran under (issue 49)
    assert table.stderr.splitlines()[0] == "3 result(s)" and "SERVICE and LOAD:" in table.stderr


def test_sparql_ask(run, kb):
    sony = 'ASK { ?p skb:hasBrand ?b . ?b kqe:identifier "sony" }'
    nobody = 'ASK { ?p skb:hasBrand ?b . ?b kqe:identifier "leica" }'
    assert ok(run("sparql", sony, "--kb", kb.path)).stdout.strip() == "true"
    assert ok(run("sparql", nobody, "--kb", kb.path)).stdout.strip() == "false"
    assert json.loads(ok(run("sparql", sony, "--kb", kb.path, "--format", "json")).stdout) == {"boolean": True}


def test_sparql_construct_gives_turtle(run, kb):
    query = 'CONSTRUCT { ?p skb:hasBrand ?b } WHERE { ?p skb:hasBrand ?b . ?b kqe:identifier "canon" }'
    turtle = ok(run("sparql", query, "--kb", kb.path)).stdout
    triples = {(t.subject.value, t.predicate.value, t.object.value) for t in parse(turtle, format=RdfFormat.TURTLE)}
    canon = "https://w3id.org/kqe/skb/node/canon"
    assert triples == {(f"https://w3id.org/kqe/skb/node/{p}", f"{SKB}hasBrand", canon) for p in ("B002", "B006")}


def test_sparql_from_an_rq_file(run, kb, tmp_path):
    path = tmp_path / "nikon.rq"
    path.write_text("# Products of Nikon, by id.\n" + NIKON.replace(" WHERE", "\nWHERE") + "\n", encoding="utf-8")
    as_json = json.loads(ok(run("sparql", path, "--kb", kb.path, "--format", "json")).stdout)
    assert [b["id"]["value"] for b in as_json["results"]["bindings"]] == NIKON_IDS
    refused(run("sparql", tmp_path / "missing.rq", "--kb", kb.path), "no such file")


def test_sparql_with_a_search_inside_it_as_on_the_server(run, kb):
    query = """SELECT ?name ?score ?bm25 WHERE {
      SERVICE <urn:kqe:search> { ?node kqe:query "travel tripod" ; kqe:k 3 ; kqe:score ?score . }
      ?node rdfs:label ?name .
      BIND(kqe:bm25(?node, "aluminium") AS ?bm25)
    } ORDER BY DESC(?score)"""
    rows = list(csv.DictReader(io.StringIO(ok(run("sparql", query, "--kb", kb.path, "--format", "csv")).stdout)))
    assert rows[0]["name"] == "Manfrotto Befree Travel Tripod"
    assert float(rows[0]["bm25"]) > 0 and len(rows) <= 3  # its description says aluminium
    refused(run("sparql", "SELECT * WHERE { SERVICE <http://example.org/sparql> { ?s ?p ?o } }", "--kb", kb.path),
            "not on this server's allow-list")


def test_invalid_sparql_is_refused_with_a_readable_message(run, kb):
    result = refused(run("sparql", "SELEC ?s WHERE { ?s ?p ?o }", "--kb", kb.path),
                     "error: SPARQL syntax error at line 1", "did you mean SELECT?")
    assert "SELEC ?s WHERE { ?s ?p ?o }\n" in result.stderr and "^" in result.stderr
    assert result.stdout == ""
    refused(run("sparql", "SELECT ?s WHERE { ?s nope:x ?o }", "--kb", kb.path), "unknown prefix 'nope:'")


def test_sparql_may_call_the_service_endpoints_its_option_allows(run, kb, oxigraph_endpoint):  # noqa: F811
    query = f"SELECT ?item WHERE {{ SERVICE <{oxigraph_endpoint}> {{ ?item ?p ?o }} }} LIMIT 2"
    refused(run("sparql", query, "--kb", kb.path), "not on this server's allow-list")
    rows = json.loads(ok(run("sparql", query, "--kb", kb.path, "--format", "json",
                             "--service-allow", oxigraph_endpoint)).stdout)["results"]["bindings"]
    assert len(rows) == 2 and all(r["item"]["value"].startswith("http") for r in rows)


def plain_env() -> dict[str, str]:
    """The environment of a user's shell, without the wide terminal this module's tests pretend to have."""
    return {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES") and not k.startswith("KQE_")}


def test_sparql_s_table_written_to_a_file_keeps_every_iri_whole(kb, tmp_path):
    query = "SELECT ?s ?p ?o WHERE { ?s ?p ?o FILTER(isIRI(?o)) } ORDER BY ?s ?p ?o LIMIT 30"
    shown = tmp_path / "table.txt"
    with open(shown, "w", encoding="utf-8") as out:  # `kqe-rdf sparql ... > table.txt`
        done = subprocess.run([script("kqe-rdf"), "sparql", query, "--kb", str(kb.path)], stdout=out,
                              stderr=subprocess.PIPE, text=True, env=plain_env(), timeout=120)
    assert done.returncode == 0, done.stderr
    text = shown.read_text(encoding="utf-8")
    rows = json.loads(subprocess.run([script("kqe-rdf"), "sparql", query, "--kb", str(kb.path), "--format", "json"],
                                     capture_output=True, text=True, env=plain_env(), timeout=120).stdout)
    iris = {b[v]["value"] for b in rows["results"]["bindings"] for v in ("s", "p", "o")}
    assert max(map(len, iris)) * 3 > 80  # the rows are wider than the 80 columns rich assumes for a file
    assert [iri for iri in iris if iri not in text] == []


def test_sparql_cannot_change_the_kb(run, kb):
    count = "SELECT (COUNT(*) AS ?n) WHERE { ?s ?p ?o }"
    before = ok(run("sparql", count, "--kb", kb.path, "--format", "csv")).stdout
    for update in ("DELETE WHERE { ?s ?p ?o }", "INSERT DATA { <urn:a> <urn:b> <urn:c> }", "DROP ALL"):
        refused(run("sparql", update, "--kb", kb.path), "error: SPARQL syntax error")
    assert ok(run("sparql", count, "--kb", kb.path, "--format", "csv")).stdout == before
    assert int(before.split()[-1]) > 0


# --------------------------------------------------------------------- eval

STARK_CSV = """\
id,query,answer_ids
1,aluminium travel tripod,"['B007']"
2,prime lens for portraits,"['B006']"
3,a camera bag the shop does not sell,"['B404']"
"""


@pytest.fixture
def stark_csv(tmp_path) -> Path:
    path = tmp_path / "stark.csv"
    path.write_text(STARK_CSV, encoding="utf-8")
    return path


def test_eval_json_with_run_files_and_per_query_metrics(run, kb, stark_csv, tmp_path):
    runs, per_query = tmp_path / "runs", tmp_path / "per-query.jsonl"
    out = json.loads(ok(run("eval", "stark", stark_csv, "--kb", kb.path, "-m", "bm25", "-m", "4step-offline",
                            "--json", "--run-dir", runs, "--per-query", per_query, "--depth", "20")).stdout)
    assert out["queryset"] == "stark: 3 queries loaded; skipped: none"
    assert (out["queries"], out["answerable"], out["gold_ids_not_in_kb"]) == (3, 2, 1)
    bm25, fourstep = out["results"]
    assert (bm25["method"], fourstep["method"]) == ("bm25", "4step-offline")
    # both answerable queries are answered first; the third counts as a miss
    assert bm25["Hit@1"] == fourstep["Hit@1"] == round(2 / 3, 4)
    assert {"Hit@5", "Recall@20", "MRR", "nDCG@10", "AP", "R@100", "queries/s"} <= set(bm25)
    assert "llm calls/query" not in fourstep  # no LLM configured

    assert sorted(p.name for p in runs.iterdir()) == ["stark.4step-offline.run", "stark.bm25.run"]
    lines = (runs / "stark.bm25.run").read_text(encoding="utf-8").splitlines()
    qid, q0, doc, rank, score, tag = lines[0].split()
    assert (qid, q0, doc, rank, tag) == ("1", "Q0", "https://w3id.org/kqe/skb/node/B007", "1", "kqe-bm25")
    assert {line.split()[0] for line in lines} == {"1", "2", "3"}
    assert all(len(line.split()) == 6 for line in lines)

    rows = [json.loads(line) for line in per_query.read_text(encoding="utf-8").splitlines()]
    assert sorted((r["method"], r["qid"]) for r in rows) == sorted(
        (m, q) for m in ("bm25", "4step-offline") for q in ("1", "2", "3"))
    by_query = {r["qid"]: r for r in rows if r["method"] == "bm25"}
    assert (by_query["1"]["Hit@1"], by_query["3"]["Hit@1"], by_query["3"]["nDCG@10"]) == (1.0, 0.0, 0.0)


def test_eval_prints_a_table_and_honours_limit(run, kb, stark_csv):
    result = ok(run("eval", "stark", stark_csv, "--kb", kb.path, "--limit", "2"))
    assert "stark: 2 queries loaded" in result.stdout
    assert "2 queries, 2 with a gold answer in the KB" in result.stdout
    assert "bm25" in result.stdout and "1.0000" in result.stdout


def test_eval_piped_to_another_program_prints_whole_headers_and_numbers(kb, stark_csv):
    # `kqe-rdf eval ... | cat`: stdout is a pipe, and the table has more columns than fit in 80.
    done = subprocess.run([script("kqe-rdf"), "eval", "stark", str(stark_csv), "--kb", str(kb.path), "-m", "bm25",
                           "-m", "4step-offline"], capture_output=True, text=True, env=plain_env(), timeout=300)
    assert done.returncode == 0, done.stderr
    header = next(line for line in done.stdout.splitlines() if "method" in line)
    assert [c for c in ("Hit@1", "Hit@5", "Recall@20", "MRR", "nDCG@10", "AP", "R@100", "queries/s")
            if c not in header] == []
    assert "…" not in done.stdout and "0.6667" in done.stdout and len(header) > 80


def test_eval_refuses_malformed_input(run, kb, tmp_path, stark_csv):
    bad = tmp_path / "bad.csv"
    bad.write_text("id,query,answer_ids\n1,tripod,B007\n", encoding="utf-8")
    refused(run("eval", "stark", bad, "--kb", kb.path), "bad.csv:2", "not a list literal")
    refused(run("eval", "stark", tmp_path / "absent.csv", "--kb", kb.path), "absent.csv")
    refused(run("eval", "stark", stark_csv, "--kb", kb.path, "-m", "nosuch"), "no retrieval method 'nosuch'")


@pytest.mark.parametrize("command", [["search"], ["eval"]])
def test_the_method_help_names_every_registered_method(command):
    from kqe_rdf.methods.registry import METHODS

    text = "".join(CliRunner().invoke(cli, [*command, "--help"]).output.split())  # help wraps at hyphens
    assert [name for name in METHODS if name not in text] == []


def test_the_build_and_eval_help_name_every_registered_importer_and_query_set():
    from kqe_rdf.evaluation.querysets import LOADERS
    from kqe_rdf.kb.importers import IMPORTERS

    build = CliRunner().invoke(cli, ["kb", "build", "--help"]).output
    evaluate = CliRunner().invoke(cli, ["eval", "--help"]).output
    assert [name for name in IMPORTERS if f" {name}" not in build] == []
    assert [name for name in LOADERS if f" {name} " not in evaluate] == []


def test_kb_info_lists_types_as_type_takes_them_and_no_reification_helpers(run, bio_kb):  # noqa: F811
    info = json.loads(ok(run("kb", "info", "--kb", bio_kb.path, "--json")).stdout)
    types = dict(info["types"])
    assert "Disease" in types and "disease" not in types
    assert not {"subject", "object"} & set(dict(info["relations"]))
    assert ok(run("search", "seizure", "--type", "Disease", "--kb", bio_kb.path, "--json"))
