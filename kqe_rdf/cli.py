"""The ``kqe-rdf`` command line.

Heavy libraries (pyoxigraph, tantivy, onnxruntime) are imported inside the
commands, so ``--help`` is instant. Errors a user can act on are printed as
one message, without a traceback, and exit with status 2.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

KB_OPTION = click.option("--kb", "kb_path", type=click.Path(path_type=Path), envvar="KQE_KB", default=None,
                         help="Knowledge-base directory [default: data/kb/bio, or $KQE_KB].")


def _settings(**overrides):
    from .config import Settings

    return Settings.load(**{k: v for k, v in overrides.items() if v is not None})


def _console():
    from rich.console import Console

    return Console(stderr=True)


def _progress():
    from .progress import Progress

    return Progress(_console())


class _UserError(click.ClickException):
    """A :class:`~kqe_rdf.errors.KqeError`: one line on stderr, no traceback, exit status 2."""

    exit_code = 2

    def show(self, file=None) -> None:
        click.echo(f"error: {self.format_message()}", err=True)


class _Commands(click.Group):
    # Here rather than only in main(), so that every way of running the group (the console script,
    # CliRunner, cli() from Python) reports errors a user can act on the same way.
    def invoke(self, ctx):
        from .errors import KqeError

        try:
            return super().invoke(ctx)
        except KqeError as exc:
            raise _UserError(str(exc)) from None


@click.group(cls=_Commands, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="kqe-rdf")
def cli() -> None:
    """Semi-structured retrieval over RDF knowledge graphs (Oxigraph + Tantivy + ONNX)."""


@cli.group()
def kb() -> None:
    """Build, embed and inspect knowledge bases."""


def _importer_help() -> str:
    from .importers import IMPORTERS

    return ", ".join(IMPORTERS)


@kb.command("build")
@click.argument("importer")
@click.argument("sources", nargs=-1, type=click.Path(path_type=Path))
@KB_OPTION
@click.option("--limit", type=int, default=None, help="Import at most this many nodes (quick trials).")
@click.option("--option", "options", multiple=True, metavar="KEY=VALUE", help="Importer-specific option.")
@click.option("--text-property", "text_properties", multiple=True, metavar="IRI|CURIE",
              help="rdf importer: a property whose literals go into node documents (repeatable).")
@click.option("--on-unknown-edge", type=click.Choice(["skip", "fail"]), default=None,
              help="Edges to nodes that do not exist: skip and count them, or fail.")
@click.option("--embed/--no-embed", default=False, help="Embed documents for dense search after the build.")
@click.option("--embed-type", "embed_types", multiple=True, help="Embed only nodes of this class (repeatable).")
def kb_build(importer, sources, kb_path, limit, options, text_properties, on_unknown_edge, embed, embed_types):
    """Build a KB with IMPORTER from SOURCES (atomic: the old KB stays until the new one is complete).

    Importers: jsonl, rdf, bio (the embedded default), metaqa, amazon, citeseer, scifact, passages.
    """
    from .build import build_kb, embed_kb
    from .importers import get_importer

    settings = _settings(kb=kb_path, on_unknown_edge=on_unknown_edge)
    opts = {}
    for item in options:
        key, sep, value = item.partition("=")
        if not sep:
            raise click.BadParameter(f"expected KEY=VALUE, got {item!r}", param_hint="--option")
        opts[key.strip()] = value
    if text_properties:
        opts["text_properties"] = list(text_properties)
    imp = get_importer(importer)(sources, limit=limit, **opts)
    console = _console()
    console.print(f"building [bold]{importer}[/] KB at {settings.kb} …")
    manifest = build_kb(imp, settings.kb, settings, _progress())
    counts = manifest["counts"]
    console.print(f"built {settings.kb}: {counts['nodes']:,} nodes, {counts['edges']:,} edges, "
                  f"{counts['triples']:,} triples; {counts['skipped_edges']:,} edges skipped, "
                  f"{counts['empty_nodes']:,} empty nodes skipped")
    for warning in manifest["warnings"][:5]:
        console.print(f"  warning: {warning}")
    if embed:
        info = embed_kb(settings.kb, settings, embed_types or None, _progress())
        console.print(f"embedded {info['count']:,} documents ({info['new']:,} new, {info['reused']:,} re-used)")


@kb.command("embed")
@KB_OPTION
@click.option("--type", "types", multiple=True, help="Embed only nodes of this class (repeatable).")
def kb_embed(kb_path, types):
    """Embed node documents for dense search (resumable: interrupt and run again)."""
    from .build import embed_kb

    settings = _settings(kb=kb_path)
    try:
        info = embed_kb(settings.kb, settings, types or None, _progress())
    except KeyboardInterrupt:
        _console().print("interrupted: the work so far is saved; run the same command to resume")
        sys.exit(130)
    click.echo(json.dumps(info, indent=2))


@kb.command("info")
@KB_OPTION
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def kb_info(kb_path, as_json):
    """Show what a KB holds: counts per type and relation, sources, indexes."""
    from .kb import KnowledgeBase

    kb = KnowledgeBase.open(_settings(kb=kb_path).kb)
    info = kb.info()
    if as_json:
        click.echo(json.dumps(info, indent=2))
        return
    from rich.console import Console
    from rich.table import Table

    m = info["manifest"]
    console = Console()
    console.print(f"[bold]{info['path']}[/] — importer {m['importer']}, built {m['created']}")
    console.print(f"dataset: {m['dataset']}")
    emb = m.get("embeddings")
    console.print("embeddings: " + (f"{emb['count']:,} documents, {emb['model_id']}" if emb else
                                    "none yet (run `kqe-rdf kb embed`)"))
    for title, rows in (("node type", info["types"]), ("relation", info["relations"])):
        table = Table(title_justify="left")
        table.add_column(title)
        table.add_column("count", justify="right")
        for name, count in rows:
            table.add_row(name, f"{count:,}")
        console.print(table)


def _open_kb(kb_path, **overrides):
    from .kb import KnowledgeBase

    settings = _settings(kb=kb_path, **overrides)
    return KnowledgeBase.open(settings.kb, settings), settings


@cli.command()
@click.argument("text")
@KB_OPTION
@click.option("--method", "-m", default="bm25", show_default=True,
              help="bm25, dense, hybrid, prf, 4step or 4step-offline.")
@click.option("--type", "types", multiple=True, help="Only nodes of this class (repeatable).")
@click.option("--k", "k", type=int, default=10, show_default=True, help="Number of results.")
@click.option("--strict/--soft", "strict", default=None,
              help="4step: every triplet must hold (strict) or rank by satisfied triplets (soft, default).")
@click.option("--explain", is_flag=True, help="Show how the results were reached (triplets, SPARQL, bindings).")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def search(text, kb_path, method, types, k, strict, explain, as_json):
    """Search the KB for nodes matching TEXT (methods: bm25, dense, hybrid, prf, 4step)."""
    from .retrieval import pipeline

    mode = None if strict is None else ("strict" if strict else "soft")
    kb, settings = _open_kb(kb_path, fourstep_mode=mode)
    batch = pipeline(method, kb, settings, k, list(types) or None).run(text)
    how = batch.explain.get("q")
    rows = _result_rows(kb, batch.ranked("q"))
    if as_json:
        out = {"query": text, "method": method, "results": rows}
        if explain:
            out["explain"] = how
        click.echo(json.dumps(out, indent=2))
        return
    _print_results(text, method, rows)
    if explain:
        _print_explain(how)


def _result_rows(kb, hits) -> list[dict]:
    """What a person or a program needs to know of each hit."""
    rows = []
    for hit in hits:
        doc = kb.document(hit.iri)
        rows.append({"rank": hit.rank + 1, "iri": hit.iri, "id": doc.identifier, "name": doc.name,
                     "types": [kb.schema.label(t) for t in doc.types], "score": round(hit.score, 4),
                     "snippet": doc.text[:200]})
    return rows


def _print_explain(how):
    from rich.console import Console
    from rich.syntax import Syntax

    console = Console()
    if not how:
        console.print("(this method keeps no explanation beyond the scores)")
        return
    t = how.get("triplets", {})
    console.print(f"[bold]triplets[/] ({t.get('source')}; answer {t.get('answer')}"
                  f"{', type ' + t['answer_type'] if t.get('answer_type') else ''}):")
    for tr in t.get("triplets", []):
        neg = "NOT " if tr.get("negated") else ""
        console.print(f"  {neg}({tr['head']}, {tr['relation']}, {tr['tail']})")
    for note in t.get("notes", []):
        console.print(f"  note: {note}")
    for mention, cands in how.get("linked", {}).items():
        shown = "; ".join(f"{c['name']} <{c['iri']}> {c['score']} ({c['how']})" for c in cands) or "nothing"
        console.print(f"[bold]linked[/] {mention!r} → {shown}")
    if how.get("sparql"):
        console.print("[bold]SPARQL[/]")
        console.print(Syntax(how["sparql"], "sparql", word_wrap=True))
    if "candidates" in how:  # `triplets` only compiles the query; it does not run it
        console.print(f"{how['candidates']} candidate(s) from SPARQL; {how.get('topped_up', 0)} topped up from the fallback")
    for iri, rows in list(how.get("support", {}).items())[:5]:
        console.print(f"  {iri}: {rows}")
    if how.get("error"):
        console.print(f"[red]error[/]: {how['error']}")


@cli.command()
@click.argument("text")
@KB_OPTION
@click.option("--strict/--soft", "strict", default=False, help="Compile for strict or soft substitution.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def triplets(text, kb_path, strict, as_json):
    """Show the triplets read from TEXT, their linked constants and the SPARQL they compile to."""
    from .compiler import compile_query
    from .retrieval import pipeline
    from .triplets import normalise

    kb, settings = _open_kb(kb_path, fourstep_mode="strict" if strict else "soft")
    stage = pipeline("4step", kb, settings, settings.k)  # the reader `search --method 4step` uses (LLM or offline)
    tq = normalise(stage.generator(text), kb.schema)
    linked, shown = stage.link(tq)
    compiled = compile_query(kb.schema, tq, linked, stage.mode, stage.sparql_limit)
    how = {"triplets": tq.to_json(), "linked": shown, "sparql": compiled.sparql if tq.triplets else None}
    if as_json:
        click.echo(json.dumps(how, indent=2))
    else:
        _print_explain(how)


def _print_results(text, method, rows):
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"{method}: {text}", title_justify="left")
    for col in ("#", "name", "type", "id", "score"):
        table.add_column(col, justify="right" if col in ("#", "score") else "left")
    for r in rows:
        table.add_row(str(r["rank"]), r["name"], ", ".join(r["types"]), r["id"], f"{r['score']:.3f}")
    Console().print(table if rows else f"no results for {text!r}")


@cli.command()
@click.argument("query")
@KB_OPTION
@click.option("--format", "fmt", type=click.Choice(["table", "json", "csv", "tsv"]), default="table", show_default=True)
def sparql(query, kb_path, fmt):
    """Run a SPARQL query (text, or a .rq file) against the KB. Common prefixes are predeclared."""
    from pyoxigraph import QueryBoolean, QueryResultsFormat, QuerySolutions, RdfFormat, serialize

    path = Path(query)
    if query.endswith((".rq", ".sparql")) or (len(query) < 256 and "\n" not in query and path.is_file()):
        if not path.is_file():
            raise click.BadParameter(f"no such file: {query}", param_hint="QUERY")
        query = path.read_text(encoding="utf-8")
    kb, _ = _open_kb(kb_path)
    result = kb.query(query)
    if isinstance(result, QueryBoolean):
        click.echo(json.dumps({"boolean": bool(result)}) if fmt == "json" else str(bool(result)).lower())
        return
    if not isinstance(result, QuerySolutions):  # CONSTRUCT / DESCRIBE
        click.echo((serialize(result, format=RdfFormat.TURTLE) or b"").decode())
        return
    if fmt != "table":
        formats = {"json": QueryResultsFormat.JSON, "csv": QueryResultsFormat.CSV, "tsv": QueryResultsFormat.TSV}
        sys.stdout.write(result.serialize(format=formats[fmt]).decode())
        return
    from rich.console import Console
    from rich.table import Table

    variables = [v.value for v in result.variables]
    table = Table()
    for v in variables:
        table.add_column(v)
    count = 0
    for solution in result:
        table.add_row(*[(solution[v].value if solution[v] is not None else "") for v in variables])
        count += 1
    Console().print(table)
    click.echo(f"{count} result(s)", err=True)


@cli.command("eval")
@click.argument("queryset")
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path, exists=True))
@KB_OPTION
@click.option("--method", "-m", "methods", multiple=True, default=["bm25"], show_default=True,
              help="Retrieval method (repeatable): bm25, dense, hybrid, prf, 4step, 4step-offline.")
@click.option("--limit", type=int, default=None, help="Evaluate the first N queries only.")
@click.option("--sample", type=int, default=None, help="Evaluate N queries drawn at random (reproducible with --seed).")
@click.option("--seed", type=int, default=0, show_default=True, help="Random seed for --sample.")
@click.option("--type", "types", multiple=True, help="Only rank nodes of this class (e.g. Disease).")
@click.option("--depth", type=int, default=100, show_default=True, help="Results ranked per query.")
@click.option("--rel", type=int, default=1, show_default=True, help="Minimum relevance grade counted as relevant.")
@click.option("--run-dir", type=click.Path(path_type=Path), default=None, help="Write TREC run files here.")
@click.option("--per-query", "per_query_path", type=click.Path(path_type=Path), default=None,
              help="Write per-query metrics as JSON Lines here.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def eval_command(queryset, paths, kb_path, methods, limit, sample, seed, types, depth, rel, run_dir, per_query_path,
                 as_json):
    """Evaluate retrieval methods on a QUERYSET read from PATHS (STaRK and TREC metrics).

    \b
    Query sets: stark CSV [SPLIT_INDEX]; trec TOPICS QRELS; metaqa QUESTIONS;
    phenopackets CASES.jsonl[.gz]; scifact CLAIMS QRELS.
    """
    from .evaluation import evaluate
    from .querysets import load

    kb, settings = _open_kb(kb_path)
    qs = load(queryset, *paths, limit=limit)
    if sample is not None and sample < len(qs):
        import random

        picked = sorted(random.Random(seed).sample(range(len(qs)), sample))
        qs.queries = [qs.queries[i] for i in picked]
        qs.name += f" (random sample of {sample}, seed {seed})"
    result = evaluate(kb, qs, methods, settings, depth, list(types) or None, rel, progress=_progress(),
                      run_dir=run_dir)
    if per_query_path is not None:
        with open(per_query_path, "w", encoding="utf-8") as out:
            for r in result.results:
                for qid, values in r.per_query.items():
                    out.write(json.dumps({"method": r.method, "qid": qid, **values}) + "\n")
    summary = {"queryset": qs.summary(), "kb": str(kb.path), "queries": result.queries,
               "answerable": result.answerable, "gold_ids_not_in_kb": result.unresolved_answers,
               "results": result.table()}
    if as_json:
        click.echo(json.dumps(summary, indent=2))
        return
    from rich.console import Console
    from rich.table import Table

    console = Console()
    console.print(qs.summary())
    console.print(f"{result.queries} queries, {result.answerable} with a gold answer in the KB "
                  f"({result.unresolved_answers} gold ids not in the KB; those queries count as misses)")
    rows = result.table()
    table = Table(title_justify="left")
    for col in rows[0]:
        table.add_column(col, justify="left" if col == "method" else "right")
    for row in rows:
        table.add_row(*[f"{v:.4f}" if isinstance(v, float) and k != "queries/s" else str(v) for k, v in row.items()])
    console.print(table)


DEMO_QUERIES = [
    ("Which disease explains seizures, intellectual disability and a small head in a child?", ["Disease"]),
    ("a phenotype meaning abnormally long and slender fingers", ["Phenotype"]),
    ("genes associated with hypertrophic cardiomyopathy", ["Gene"]),
]


@cli.command()
@KB_OPTION
@click.option("--dense/--no-dense", default=False,
              help="Also embed Disease documents (about 15 min on 2 cores; resumable) and show dense/hybrid results.")
def demo(kb_path, dense):
    """Build the biomedical KB if absent (HPO + Disease Ontology) and run a few searches."""
    import time

    from .build import build_kb, embed_kb
    from .importers import get_importer
    from .retrieval import pipeline

    started = time.perf_counter()
    settings = _settings(kb=kb_path)
    console = _console()
    from .kb import KnowledgeBase

    if not (settings.kb / "manifest.json").is_file():
        console.print(f"no KB at {settings.kb}: building the biomedical KB from the installed HPO files …")
        manifest = build_kb(get_importer("bio")(), settings.kb, settings, _progress())
        c = manifest["counts"]
        console.print(f"built: {c['nodes']:,} nodes, {c['edges']:,} edges, {c['triples']:,} triples "
                      f"in {time.perf_counter() - started:.0f} s")
    kb = KnowledgeBase.open(settings.kb, settings)
    methods = ["bm25", "prf"]
    if dense:
        if not kb.has_embeddings:
            embed_kb(settings.kb, settings, ["Disease"], _progress())
            kb = KnowledgeBase.open(settings.kb, settings)
        methods += ["dense", "hybrid"]
    for i, (text, types) in enumerate(DEMO_QUERIES):
        for method in methods:
            if method in ("dense", "hybrid") and types != ["Disease"]:
                continue
            _print_results(text, method, _result_rows(kb, pipeline(method, kb, settings, 5, types).search(text)))
        if i == 0:
            console.print(f"first answer {time.perf_counter() - started:.1f} s after start")
    if not dense:
        console.print("dense and hybrid search need embeddings: `kqe-rdf demo --dense` or "
                      "`kqe-rdf kb embed --type Disease` (resumable)")


def main() -> None:
    from .errors import KqeError

    try:
        cli(standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        sys.exit(130)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except KqeError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(2)
    except KeyboardInterrupt:
        click.echo("interrupted", err=True)
        sys.exit(130)
