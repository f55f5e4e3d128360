"""The ``kqe-rdf`` command line.

Heavy libraries (pyoxigraph, tantivy, onnxruntime) are imported inside the
commands, so ``--help`` is instant. Errors a user can act on are printed as
one message, without a traceback, and exit with status 2.
"""

from __future__ import annotations

import functools
import io
import json
import sys
from pathlib import Path

import click

from .methods.registry import EXPANSION, method_help

KB_OPTION = click.option("--kb", "kb_path", type=click.Path(path_type=Path), envvar="KQE_KB", default=None,
                         help="Knowledge-base directory [default: data/kb/bio, or $KQE_KB].")
WORDING_OPTION = click.option(
    # (querysets.WORDINGS, written out: importing the query sets costs a one-request command 0.13 s)
    "--wording", type=click.Choice(["template", "list", "which", "child", "semicolon", "but", "without", "denies",
                                    "negative", "ruled", "first"]), default=None,
    help="phenopackets: how each case is worded. template (the default): 'A female patient presents with a and b. C "
         "was not observed. Which disease explains this?'; list: 'a and b'; which: 'which disease causes a and b?'; "
         "child: 'child with a and b' (those three: observed phenotypes only); observed and excluded in one line: "
         "semicolon 'a and b; no c or d', but 'a and b but no c or d', without 'a and b, without c or d', denies "
         "'a and b; denies c or d', negative 'a and b, negative for c and d', ruled 'a and b; c and d ruled out', "
         "first 'no c or d, but has a and b'.")
HALF_OPTION = click.option(
    "--half", type=click.Choice(["1", "2"]), default=None,
    help="Only half 1 or 2 of the queries, split by the parity of each query id's sha256 (fit on one half with "
         "`kb tune-fusion --half 1`, measure on the other with `eval --half 2`).")


VECTORS_OPTION = click.option(
    "--vectors", "index_vectors", default=None, metavar="URI",
    help="Where the vectors are searched: milvus://HOST:PORT/COLLECTION, milvus-lite (a file in the KB folder) or "
         "milvus-lite:PATH [default: in this process, usearch] (docs/scale.md).")
WORKERS_OPTION = click.option(
    "--workers", default=None, metavar="local|ray://HOST:PORT",
    help="Encode in shards on Ray: 'local' (Ray's local mode, this machine's cores) or a Ray cluster "
         "[default: this process] (needs pip install 'kqe-rdf[scale]').")
#: What `search` and `eval` name in their help: the methods of the registry (which imports nothing heavy).
METHOD_NAMES = method_help()


def _settings(**overrides):
    from .core.config import Settings

    return Settings.load(**{k: v for k, v in overrides.items() if v is not None})


def _console():
    from rich.console import Console

    # Messages and progress lines are never broken by rich (a long path stays whole, to copy or to grep);
    # the terminal wraps them as it shows them.
    return Console(stderr=True, soft_wrap=True)


def _stdout(*tables):
    """The console a command prints its output on. On a terminal, as wide as the terminal. To a pipe or a file,
    lines are never wrapped and ``tables`` are laid out as wide as their contents need, so nothing is cut
    ("Recal…", "0.23…") and no IRI is broken in the middle (rich would lay everything out in 80 columns).
    Either way the text it prints shows control characters as escapes (:func:`~kqe_rdf.core.inert.visible`):
    a KB's names and literals cannot drive the terminal; table cells are made so by :func:`_cells`."""
    from rich.console import Console

    from .core.inert import visible

    class Inert(Console):
        def print(self, *objects, **kwargs) -> None:
            super().print(*(visible(o) if isinstance(o, str) else o for o in objects), **kwargs)

    console = Inert()
    if console.is_terminal:
        return console
    from rich.measure import Measurement

    wide = console.options.update_width(1 << 16)
    need = max((Measurement.get(console, wide, table).maximum for table in tables), default=0)
    return Inert(width=max(need, console.width), soft_wrap=True)


def _cells(*values) -> list[str]:
    """A table row's cells with their control characters shown, as :func:`_stdout` prints text."""
    from .core.inert import visible

    return [visible(str(v)) for v in values]


def _progress():
    from .core.progress import Progress

    return Progress(_console())


class _UserError(click.ClickException):
    """A :class:`~kqe_rdf.core.errors.KqeError`: one line on stderr, no traceback, exit status 2."""

    exit_code = 2

    def show(self, file=None) -> None:
        click.echo(f"error: {self.format_message()}", err=True)


def _at_least_one(ctx, param, value):
    """A count of results: 0 or less is a mistake, said in one line (click's own message is a usage block)."""
    if value is not None and value < 1:
        raise _UserError(f"--{param.name.replace('_', '-')} must be at least 1, got {value}")
    return value


def _one_request(command):
    """For a command that answers one request and exits: Python's cyclic collector is paused while it runs (the
    process ends before the few cycles it makes matter, and the collector, run by allocation counts, walked the
    modules' objects, the name index and the reader's tables again and again: tens of ms of a first request)."""

    @functools.wraps(command)
    def run(*args, **kwargs):
        from .core.resources import cyclic_gc_paused

        with cyclic_gc_paused():
            return command(*args, **kwargs)

    return run


class _Commands(click.Group):
    # Here rather than only in main(), so that every way of running the group (the console script,
    # CliRunner, cli() from Python) reports errors a user can act on the same way.
    def invoke(self, ctx):
        from .core.errors import KqeError

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
    from .kb.importers import IMPORTERS

    return ", ".join(IMPORTERS)


@kb.command("build")
@click.argument("importer")
@click.argument("sources", nargs=-1, type=click.Path(path_type=Path))
@KB_OPTION
@click.option("--limit", type=int, default=None,
              help="Quick trial: import only the first N records the importer reads (bio: N diseases, with the "
                   "phenotypes and genes they name; the others: N nodes); the build says how many nodes that made.")
@click.option("--option", "options", multiple=True, metavar="KEY=VALUE", help="Importer-specific option.")
@click.option("--text-property", "text_properties", multiple=True, metavar="IRI|CURIE",
              help="rdf importer: a property whose literals go into node documents (repeatable).")
@click.option("--label-property", "label_properties", multiple=True, metavar="IRI|CURIE",
              help="rdf importer: a property whose literals are node names, as rdfs:label's are (repeatable; a "
                   "vocabulary's own name property, e.g. dbo:name or foaf:name).")
@click.option("--base", default=None, metavar="IRI",
              help="rdf importer: the IRI relative IRIs in the files resolve against [default: urn:kqe:<file name>/].")
@click.option("--on-unknown-edge", type=click.Choice(["skip", "fail"]), default=None,
              help="Edges to nodes that do not exist: skip and count them, or fail.")
@click.option("--embed/--no-embed", default=False, show_default=True,
              help="Embed documents for dense search after the build (long on large KBs: `kb embed` later resumes).")
@click.option("--embed-type", "embed_types", multiple=True, help="Embed only nodes of this class (repeatable).")
@click.option("--force", is_flag=True,
              help="Replace a KB of another source (another importer or other files) in the --kb folder.")
@click.option("--text", "index_text", default=None, metavar="URI",
              help="Where the BM25 index goes: milvus://HOST:PORT/COLLECTION, milvus-lite (a file in the KB folder) "
                   "or milvus-lite:PATH [default: Tantivy, in the KB folder] (docs/scale.md).")
@VECTORS_OPTION
@WORKERS_OPTION
def kb_build(importer, sources, kb_path, limit, options, text_properties, label_properties, base, on_unknown_edge,
             embed, embed_types, force, index_text, index_vectors, workers):
    """Build a KB with IMPORTER from SOURCES (atomic: the old KB stays until the new one is complete).

    Importers: jsonl, triples (head<TAB>relation<TAB>tail lines), rdf, bio (the embedded default; --option go=yes adds the Gene Ontology), metaqa, amazon,
    citeseer, scifact, passages, primekg.
    """
    from .kb.build import build_kb, embed_kb
    from .kb.importers import get_importer

    settings = _settings(kb=kb_path, on_unknown_edge=on_unknown_edge, index_text=index_text,
                         index_vectors=index_vectors, embedding_workers=workers)
    default = type(settings)().kb
    if kb_path is None and settings.kb == default and importer != "bio" and not force:
        from .core.errors import KqeError

        # The default folder is the bio KB's, which every other command opens when no --kb is given.
        name = Path(sources[0]).name.split(".")[0] if sources else importer
        raise KqeError(f"the default --kb {default} is for the bio KB; name a folder for the {importer} KB, "
                       f"e.g. --kb {default.parent / name}")
    opts = {}
    for item in options:
        key, sep, value = item.partition("=")
        if not sep:
            raise click.BadParameter(f"expected KEY=VALUE, got {item!r}", param_hint="--option")
        opts[key.strip()] = value
    if text_properties:
        opts["text_properties"] = list(text_properties)
    if label_properties:
        if importer != "rdf":
            raise click.BadParameter(f"applies to the rdf importer only, not {importer}", param_hint="--label-property")
        opts["label_properties"] = list(label_properties)
    if base is not None:
        if importer != "rdf":
            raise click.BadParameter(f"applies to the rdf importer only, not {importer}", param_hint="--base")
        opts["base"] = base
    imp = get_importer(importer)(sources, limit=limit, **opts)
    console = _console()
    console.print(f"building [bold]{importer}[/] KB at {settings.kb} …")
    manifest = build_kb(imp, settings.kb, settings, _progress(), replace_other_source=force)
    counts = manifest["counts"]
    console.print(f"built {settings.kb}: {counts['nodes']:,} nodes, {counts['edges']:,} edges, "
                  f"{counts['triples']:,} triples; {counts['skipped_edges']:,} edges skipped, "
                  f"{counts['empty_nodes']:,} empty nodes skipped")
    if limit is not None:
        kept = manifest.get("dataset", {}).get("limit") or f"the first {limit} records of the source"
        console.print(f"--limit {limit}: imported {kept}, {counts['nodes']:,} nodes with what they name")
    for warning in manifest["warnings"][:5]:
        console.print(f"  warning: {warning}")
    if embed:
        info = embed_kb(settings.kb, settings, embed_types or None, _progress())
        console.print(f"embedded {info['count']:,} documents ({info['new']:,} new, {info['reused']:,} re-used)")


@kb.command("embed")
@KB_OPTION
@click.option("--type", "types", multiple=True, help="Embed only nodes of this class (repeatable).")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output (counts, model, index).")
@VECTORS_OPTION
@WORKERS_OPTION
def kb_embed(kb_path, types, as_json, index_vectors, workers):
    """Embed node documents for dense search (resumable: interrupt and run again)."""
    from .kb.build import embed_kb

    settings = _settings(kb=kb_path, index_vectors=index_vectors, embedding_workers=workers)
    try:
        info = embed_kb(settings.kb, settings, types or None, _progress())
    except KeyboardInterrupt:
        _console().print("interrupted: the work so far is saved; run the same command to resume")
        sys.exit(130)
    _say_if_the_fit_is_stale(settings)
    if as_json:
        click.echo(json.dumps(info, indent=2))
        return
    ann = info.get("ann") or {}
    held = info.get("vectors") or {}
    click.echo(f"embedded {settings.kb}: {info['count']:,} documents ({info['new']:,} new, {info['reused']:,} "
               f"re-used)" + (f"; approximate index ({ann['library']})" if ann.get("library") else "")
               + (f"; searched in Milvus ({held.get('uri') or held.get('file')}, collection {held['collection']})"
                  if held.get("backend") == "milvus" else ""))


def _say_if_the_fit_is_stale(settings) -> None:
    """After embedding with another encoder, the fusion weight `kb tune-fusion` fitted on the old vectors is no
    longer used and hybrid weighs each request: on MetaQA that cost 10 points of Hit@1 (issue 52), so it is said."""
    from .kb.knowledge_base import KnowledgeBase
    from .methods.retrieval import fusion_weight

    weight = fusion_weight(KnowledgeBase.open(settings.kb, settings), settings)
    if weight.note:
        click.echo(f"note: {weight.note} (until then hybrid weighs each request)", err=True)


@kb.command("tune-fusion")
@click.argument("queryset")
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path, exists=True))
@KB_OPTION
@click.option("--measure", default="nDCG@10", show_default=True,
              help="The measure the weight is fitted for: Hit@1, Hit@5, Recall@20, MRR or nDCG@10.")
@click.option("--type", "types", multiple=True, help="Only rank nodes of this class (e.g. Disease), as `eval --type`.")
@click.option("--depth", type=int, default=100, show_default=True, callback=_at_least_one,
              help="Results ranked per query, as `eval --depth`.")
@click.option("--rel", type=int, default=1, show_default=True, help="Minimum relevance grade counted as relevant.")
@WORDING_OPTION
@HALF_OPTION
@click.option("--limit", type=int, default=None, callback=_at_least_one, help="Fit on the first N queries only.")
@click.option("--sample", type=int, default=None, callback=_at_least_one,
              help="Fit on N queries drawn at random (reproducible with --seed).")
@click.option("--seed", type=int, default=0, show_default=True, help="Random seed for --sample.")
@click.option("--dry-run", is_flag=True, help="Show the fitted weight without keeping it in the KB.")
@click.option("--forget", is_flag=True, help="Remove the KB's fitted weight instead (hybrid weighs each request again); "
                                             "QUERYSET and PATHS are not read.")
def kb_tune_fusion(queryset, paths, kb_path, measure, types, depth, rel, wording, half, limit, sample, seed, dry_run,
                   forget):
    """Fit the hybrid's weight of BM25 against dense on QUERYSET (as `eval` reads it) and keep it in the KB.

    \b
    Every share of BM25 from 0 to 1 by 0.05, with min-max and z-score normalisation, fuses the two rankings as
    `hybrid` does; the best mean MEASURE wins (ties: the middle of the weights that tie). `search -m hybrid` and
    `eval -m hybrid` then use it (the setting hybrid_weight overrides it). Prints the fit and its grid as JSON.
    """
    from .evaluation.fusion import MEASURES, fit_fusion
    from .kb.build import record_fusion

    if forget:
        settings = _settings(kb=kb_path)
        record_fusion(settings.kb, None)
        _console().print(f"forgot the fitted weight of {settings.kb}: hybrid weighs each request", highlight=False)
        return
    if measure not in MEASURES:
        raise click.BadParameter(f"choose one of {', '.join(MEASURES)}", param_hint="--measure")
    qs = _queryset(queryset, paths, limit, sample, seed, rel, wording, half)
    kb, settings = _open_kb(kb_path)
    fit = fit_fusion(kb, qs, settings, measure, list(types) or None, rel, depth, _progress())
    if not dry_run:
        record_fusion(kb.path, fit)
    click.echo(json.dumps({**fit, "kept": not dry_run}, indent=2))
    _console().print(f"BM25 {fit['bm25_weight']:.2f}, dense {1 - fit['bm25_weight']:.2f} ({fit['normalisation']}): "
                     f"{measure} {fit['fitted']:.4f} (BM25 alone {fit['bm25']:.4f}, dense alone {fit['dense']:.4f}) "
                     f"on {fit['queries']} queries" + ("" if dry_run else f"; kept in {kb.path}"), highlight=False)


@kb.command("info")
@KB_OPTION
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def kb_info(kb_path, as_json):
    """Show what a KB holds: counts per type and relation, sources, indexes."""
    from .kb.knowledge_base import KnowledgeBase

    kb = KnowledgeBase.open(_settings(kb=kb_path).kb)
    info = kb.info()
    if as_json:
        click.echo(json.dumps(info, indent=2))
        return
    from rich.table import Table

    m = info["manifest"]
    tables = []
    for title, rows in (("node type", info["types"]), ("relation", info["relations"])):
        table = Table(title_justify="left")
        table.add_column(title)
        table.add_column("count", justify="right")
        for name, count in rows:
            table.add_row(*_cells(name, f"{count:,}"))
        tables.append(table)
    console = _stdout(*tables)
    console.print(f"[bold]{info['path']}[/] — importer {m['importer']}, built {m['created']}")
    dataset = m["dataset"] if isinstance(m["dataset"], dict) else {"name": m["dataset"]}
    console.print("dataset:")
    for key, value in dataset.items():  # one field a line, as written (not a Python dict wrapped at 80 columns)
        if value not in (None, ""):
            console.print(f"  {key}: {value}", markup=False, highlight=False)
    emb = m.get("embeddings")
    console.print("embeddings: " + (f"{emb['count']:,} documents, {emb['model_id']}" if emb else
                                    "none yet (run `kqe-rdf kb embed`)")
                  + (f", approximate index ({emb['ann']['library']})" if emb and emb.get("ann") else ""))
    bm25 = info["bm25"]
    where = (f"in Milvus ({bm25['where']})" if bm25.get("backend") == "milvus"
             else f"in Tantivy, {bm25['segments']} segment(s)")
    console.print(f"BM25: analyzer {bm25['analyzer']} ({bm25['analysis']}); {bm25['documents']:,} documents "
                  f"{where}", highlight=False)
    vectors = info["indexes"]["vectors"]
    if vectors:
        console.print("vectors: " + (f"searched in Milvus ({vectors.get('uri') or vectors.get('file')}, collection "
                                     f"{vectors['collection']}, {vectors['index']} index)"
                                     if vectors["backend"] == "milvus" else "searched in this process (usearch)"),
                      highlight=False)
    for table in tables:
        console.print(table)


def _open_kb(kb_path, **overrides):
    from .kb.knowledge_base import KnowledgeBase

    settings = _settings(kb=kb_path, **overrides)
    return KnowledgeBase.open(settings.kb, settings), settings


@cli.command()
@click.argument("text")
@KB_OPTION
@click.option("--method", "-m", default="bm25", show_default=True,
              help=f"{METHOD_NAMES}.")
@click.option("--type", "types", multiple=True, help="Only nodes of this class (repeatable).")
@click.option("--k", "-k", "k", type=int, default=10, show_default=True, callback=_at_least_one,
              help="Number of results.")
@click.option("--strict/--soft", "strict", default=None,
              help="4step: every triplet must hold (strict) or rank by satisfied triplets (soft, default).")
@click.option("--explain", is_flag=True, help="Show how the results were reached (triplets, SPARQL, bindings).")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@_one_request
def search(text, kb_path, method, types, k, strict, explain, as_json):
    """Search the KB for nodes matching TEXT (methods: bm25, dense, hybrid, prf, 4step)."""
    from .methods.registry import pipeline
    from .methods.retrieval import result_rows

    mode = None if strict is None else ("strict" if strict else "soft")
    kb, settings = _open_kb(kb_path, fourstep_mode=mode)
    if method == "4step" and not (settings.llm.base_url or settings.llm.model):
        click.echo("note: no LLM is configured (llm_base_url, llm_model): 4step ran the offline reader, as "
                   "-m 4step-offline does", err=True)
    stage = pipeline(method, kb, settings, k, list(types) or None)
    batch = stage.run(text, names=False)  # (the rows read the names)
    how = batch.explain.get("q")
    rows = result_rows(kb, batch.ranked("q"), how)
    notes = (how or {}).get("expansion", {}).get("notes", [])
    if as_json:
        # As the server's /search answers: the results and how they were reached (an expansion with its knowledge).
        out = {"query": text, "method": method, "results": rows, "provenance": {"pipeline": repr(stage), "explain": how}}
        if explain:
            out["explain"] = how
        click.echo(json.dumps(out, indent=2))
        return
    if not rows and kb.text_index.only_stop_words(text):
        notes = [*notes, f"every word of {text!r} is a stop word, which the BM25 analyzer "
                         f"({kb.text_index.analyzer_name}) leaves out"]
    for note in notes:
        click.echo(f"note: {_cells(note)[0]}", err=True)
    _print_results(text, method, rows)
    if explain:
        _print_explain(how, kb)


def _namer(kb):
    """``named(value)``: what a person reads for an IRI in an explanation: a relation's label, a class's name, a
    node's name; anything else as it is."""
    from .core.errors import KqeError
    from .kb.ontology import shown_names

    classes = shown_names(kb.schema.classes, kb.prefixes)
    known: dict[str, str] = {}

    def named(value) -> str:
        if isinstance(value, (list, tuple)):
            return ", ".join(named(v) for v in value)
        value = str(value)
        if not value.startswith(("http://", "https://", "urn:")):
            return value
        if value not in known:
            if value in kb.schema.relations:
                known[value] = kb.schema.relations[value].label or classes.get(value, value)
            elif value in classes:
                known[value] = classes[value]
            else:
                try:
                    known[value] = kb.name(value) or value
                except KqeError:  # not a node of this KB (a literal's datatype, an external IRI)
                    known[value] = value
        return known[value]

    return named


def _print_readings(how, named):
    """4step with an LLM: whether it was asked and why, both readings, which won and why."""
    record, readings = how.get("llm_reading"), how.get("readings", {})
    if not record:
        return
    console = _stdout()
    asked = f"asked: {record['why_asked']}" if record.get("asked") else "not asked"
    console.print(f"llm reading: {record['outcome']} ({asked}); {record['why']}", markup=False, highlight=False)
    for item in record.get("repairs") or []:
        console.print(f"  repaired: {item}", markup=False, highlight=False)
    if record.get("reasked"):
        console.print("  the model was re-asked once (its first answer was unusable)", markup=False, highlight=False)
    for side in ("offline", "llm"):
        if side in readings:
            shown = "; ".join(f"({named(x['head'])}, {named(x['relation'])}, {named(x['tail'])})"
                              for x in readings[side]["triplets"].get("triplets", []))
            console.print(f"  {side} reading: {shown or '(none)'}; {readings[side]['candidates']} candidates",
                          markup=False, highlight=False)
    if readings.get("winner"):
        console.print(f"  kept: {readings['winner']} ({readings['why']})", markup=False, highlight=False)


def _print_explain(how, kb):
    from rich.markup import escape

    console = _stdout()
    piped = not console.is_terminal
    named = _namer(kb)
    rules = (how or {}).get("result rules", {})
    for rule, iris in rules.items():  # what every method's results obey (methods.retrieval.ResultRules)
        console.print(f"[bold]{rule}[/]: {escape(', '.join(named(i) for i in iris))}", highlight=False)
    how = {key: value for key, value in (how or {}).items() if key != "result rules"}
    if not how:
        console.print("(this method keeps no explanation beyond the scores)")
        return
    if "expansion" in how:
        _print_expansion(how["expansion"])
        return
    if "fusion" in how:
        _print_fusion(how["fusion"])
        return
    t = how.get("triplets", {})
    console.print(f"[bold]triplets[/] ({t.get('source')}; answer {t.get('answer')}"
                  f"{', type ' + escape(named(t['answer_type'])) if t.get('answer_type') else ''}):", highlight=False)
    for tr in t.get("triplets", []):
        neg = "NOT " if tr.get("negated") else ""
        unsure = " [uncertain]" if tr.get("uncertain") else ""
        console.print(f"  {neg}({named(tr['head'])}, {named(tr['relation'])}, {named(tr['tail'])}){unsure}",
                      markup=False, highlight=False)
    if any(term["state"] != "present" for term in t.get("terms", [])):
        console.print("  terms: " + "; ".join(
            f"{term['text']}: {term['state']}" + (f" ({term['trigger']!r})" if term.get("trigger") else "")
            for term in t["terms"]), markup=False, highlight=False)
    for note in t.get("notes", []):
        console.print(f"  note: {note}", markup=False, highlight=False)
    if t.get("unread"):
        console.print(f"  left unread: {', '.join(t['unread'])}", markup=False, highlight=False)
    _print_readings(how, named)
    for read in t.get("reading", []):
        sure = f"score {read['score']}, confidence {read.get('confidence', '?')}"
        if read.get("read from"):
            sure += f", read from the {read['read from']}"
        if read.get("used", True):
            console.print(f"[bold]read[/] {escape(repr(read['constant']))} as {escape(repr(read['path']))} "
                          f"({escape(sure)}; used)", highlight=False)
        else:
            console.print(f"[bold]abstained[/]: best path {escape(repr(read['path']))} ({escape(sure)}) not used",
                          highlight=False)
        for hop in read["hops"]:
            console.print(f"  {hop['relation']}: {', '.join(hop['words']) or '-'} ({hop['how']})", markup=False,
                          highlight=False)
        for other in read["beat"]:
            console.print(f"  beat '{other['path']}' ({other['score']})", markup=False, highlight=False)
    linked = how.get("linked", {})
    for mention, cands in linked.items():
        shown = "; ".join(f"{c['name']} <{c['iri']}> {c['score']} ({c['how']})" for c in cands) or "nothing"
        console.print(f"[bold]linked[/] {escape(repr(mention))} → {escape(shown)}", highlight=False)
    if linked:
        found = sum(1 for cands in linked.values() if cands)
        console.print(f"{found} of {len(linked)} mention(s) linked to a node", highlight=False)
    if how.get("sparql"):
        console.print("[bold]SPARQL[/]")
        if piped:  # to a pipe or a file: the query as it runs, one statement a line, to copy or to run again
            console.print(how["sparql"].strip(), markup=False, highlight=False)
        else:
            from rich.syntax import Syntax

            console.print(Syntax(how["sparql"], "sparql", word_wrap=True))
    if "candidates" in how:  # `triplets` only compiles the query; it does not run it
        console.print(f"{how['candidates']} candidate(s) from SPARQL; {how.get('topped_up', 0)} topped up from the "
                      "fallback", highlight=False)
    if "value" in how:  # a request that asks for a value: the values of the answers (or of its own constant)
        value = how["value"]
        holders = sorted({v["of"] for v in value["values"].values()})
        console.print(f"[bold]value asked[/]: '{escape(value['phrase'])}' ({escape(value['how'])}), of "
                      f"{escape(named(holders[:5]))}{' …' if len(holders) > 5 else ''}", highlight=False)
    for iri, rows in list(how.get("support", {}).items())[:5]:
        because = "; ".join(", ".join(f"{key} = {named(value)}" for key, value in row.items() if key != "unit")
                            for row in rows) or "-"
        console.print(f"  {named(iri)}: {because}", markup=False, highlight=False)
    if how.get("error"):
        console.print(f"[red]error[/]: {escape(str(how['error']))}")
    if how.get("seconds"):
        console.print("time: " + ", ".join(f"{step} {sec * 1000:.1f} ms" for step, sec in how["seconds"].items()),
                      highlight=False)


def _print_fusion(how):
    """A score fusion's weights and where they came from (methods.retrieval.ScoreFusion)."""
    console = _stdout()
    weights = ", ".join(f"{side} {w:.2f}" for side, w in how["weights"].items())
    console.print(f"[bold]fusion[/]: {weights} ({how['normalisation']} scores; weighed by {how['weighed by']})",
                  highlight=False)
    for side, c in how.get("confidence", {}).items():
        margin = how.get("margins", {}).get(side)
        shown = f"; best match z {margin['z']} against chance {margin['chance']}" if margin else ""
        console.print(f"  {side}: confidence {c:.2f}{shown}", highlight=False)
    console.print(f"  agreement of the two top 10s: {how['agreement']:.0%}", highlight=False)
    if how.get("note"):
        console.print(f"  note: {how['note']}", highlight=False)


@cli.command()
@click.argument("text")
@KB_OPTION
@click.option("--strict/--soft", "strict", default=False, help="Compile for strict or soft substitution.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@_one_request
def triplets(text, kb_path, strict, as_json):
    """Show the triplets read from TEXT, their linked constants and the SPARQL they compile to."""
    from .methods.registry import pipeline

    if not text.strip():
        raise _UserError("TEXT is empty: give the request to read, e.g. kqe-rdf triplets \"who directed Kismet\"")
    kb, settings = _open_kb(kb_path, fourstep_mode="strict" if strict else "soft")
    stage = pipeline("4step", kb, settings, settings.k)  # the reader `search --method 4step` uses (LLM or offline)
    how = stage.reading(text)
    if as_json:
        click.echo(json.dumps(how, indent=2))
    else:
        _print_explain(how, kb)


@cli.command()
@click.argument("iri")
@KB_OPTION
@click.option("--relation", default=None, metavar="IRI", help="Page this relation's group (with --offset).")
@click.option("--direction", type=click.Choice(["out", "in"]), default="out", show_default=True,
              help="Which way the paged relation goes.")
@click.option("--offset", type=int, default=0, show_default=True, help="Where the paged group's page starts.")
@click.option("--limit", type=int, default=20, show_default=True, help="Values shown per relation.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output (what /node answers).")
@_one_request
def describe(iri, kb_path, relation, direction, offset, limit, as_json):
    """Show one node: label, types, text, owl:sameAs, facts leaving and reaching it by relation (IRI or bio:x)."""
    from .service.node import describe as describing, describe_text, node_iri

    kb, _settings = _open_kb(kb_path)
    page = describing(kb, node_iri(iri, kb.prefixes), relation and node_iri(relation, kb.prefixes), direction,
                      offset, limit)
    click.echo(json.dumps(page, indent=2, ensure_ascii=False) if as_json else describe_text(page))


def _print_results(text, method, rows):
    from rich.table import Table

    table = Table(title=_cells(f"{method}: {text}")[0], title_justify="left")
    marked = any("filler" in r for r in rows)  # a structural method: answers of its reading, then fillers
    for col in ("#", "name", "type", "id", "score", *(("from",) if marked else ())):
        table.add_column(col, justify="right" if col in ("#", "score") else "left")
    for r in rows:
        table.add_row(*_cells(r["rank"], r["name"], ", ".join(r["types"]), r["id"], f"{r['score']:.3f}",
                              *((("filler (fallback search)" if r["filler"] else "the reading"),) if marked else ())))
    _stdout(table).print(table if rows else f"no results for {text!r}")


@cli.command()
@click.argument("query")
@KB_OPTION
@click.option("--format", "fmt", type=click.Choice(["table", "json", "csv", "tsv"]), default=None,
              help="SPARQL results as a table, JSON, CSV or TSV [default: a table on a terminal, TSV in a pipe or a "
                   "file, written as the rows come].")
@click.option("--json", "as_json", is_flag=True, help="The same as --format json.")
@click.option("--service-allow", default=None, metavar="URLS",
              help="SERVICE endpoints the query may call, space- or comma-separated (none by default; as "
                   "`serve --service-allow`, setting server_service_allow).")
def sparql(query, kb_path, fmt, as_json, service_allow):
    """Run a SPARQL query (text, or a .rq file) against the KB. Common prefixes are predeclared.

    Search works inside it as on the server: SERVICE <urn:kqe:search> { ?n kqe:query "..." ; kqe:k 50 ;
    kqe:score ?s }, kqe:bm25(?n, "...") and kqe:similarity(?n, "...").
    """
    from pyoxigraph import QueryBoolean, QueryResultsFormat, QuerySolutions, RdfFormat, serialize

    path = Path(query)
    if query.endswith((".rq", ".sparql")) or (len(query) < 256 and "\n" not in query and path.is_file()):
        if not path.is_file():
            raise click.BadParameter(f"no such file: {query}", param_hint="QUERY")
        query = path.read_text(encoding="utf-8")
    from .service.isolation import OfflineThread, enter_user_namespace, not_wanted

    # Not root: the user namespace that lets a thread make its network namespace, entered now, while this process
    # has one thread (opening the KB starts the store's: issue 49, it never ran isolated so). Harmless when unused.
    no_user_namespace = enter_user_namespace()
    kb, settings = _open_kb(kb_path, server_service_allow=service_allow)
    from .service.federation import consume
    from .service.sparql_search import SearchFunctions, prepare

    formats = {"json": QueryResultsFormat.JSON, "csv": QueryResultsFormat.CSV, "tsv": QueryResultsFormat.TSV}
    if as_json and fmt not in (None, "json"):
        raise _UserError(f"--json and --format {fmt} disagree; give one")
    fmt = "json" if as_json else fmt or ("table" if sys.stdout.isatty() else "tsv")

    def read(result, _again):
        """The whole answer, read before anything is printed (a failing SERVICE stops it with one error); with no
        SERVICE to fail, JSON, CSV and TSV go to standard output as Oxigraph writes them (200,000 rows in a pipe
        without waiting for the last)."""
        if isinstance(result, QueryBoolean):
            return "boolean", bool(result)
        if not isinstance(result, QuerySolutions):  # CONSTRUCT / DESCRIBE
            return "graph", (serialize(result, format=RdfFormat.TURTLE) or b"").decode()
        if fmt == "csv":  # written by us, each cell a spreadsheet will not run as a formula
            if prepared.services:
                return "results", _csv(result, io.StringIO()).getvalue()
            _csv(result, sys.stdout).flush()
            return "streamed", None
        if fmt != "table" and not prepared.services:
            sys.stdout.flush()
            result.serialize(sys.stdout.buffer, format=formats[fmt])
            return "streamed", None
        if fmt != "table":
            return "results", result.serialize(format=formats[fmt]).decode()
        variables = [v.value for v in result.variables]
        rows = ([(s[v].value if s[v] is not None else "") for v in variables] for s in result)
        if prepared.services:
            return "table", (variables, list(rows))
        return "shown", _table_stream(variables, rows)

    # What the server's /sparql does: size limits, SERVICE <urn:kqe:search> run here, other SERVICE/LOAD only to
    # allow-listed endpoints (a failing one is named in one error; SILENT ones answer nothing), and kqe:bm25 /
    # kqe:similarity as functions. Oxigraph evaluates it on a thread in a network namespace of its own when the
    # kernel allows it (as a server worker's job thread), else the text that runs is the verifier's (the verified
    # path); the searches run here, where an LLM can be reached.
    offline = OfflineThread(not_wanted(settings) or no_user_namespace)
    prepared = prepare(kb, query, settings, strict=not offline.active)
    kind, answer = offline.run(consume, kb, prepared, SearchFunctions(kb), settings, read)
    if kind == "boolean":
        click.echo(json.dumps({"boolean": answer}) if fmt == "json" else str(answer).lower())
    elif kind == "graph":
        click.echo(answer)
    elif kind == "results":
        sys.stdout.write(answer)
    elif kind == "streamed":
        sys.stdout.buffer.flush()
    elif kind == "shown":
        click.echo(f"{answer:,} result(s)" if answer >= 0 else "output closed before the last row", err=True)
    else:
        variables, rows = answer
        click.echo(f"{_table_stream(variables, iter(rows)):,} result(s)", err=True)
    click.echo(f"SERVICE and LOAD: {offline.how}", err=True)  # which of the two protections this run had


#: The first rows of a ``sparql`` table: all of them when a result is this short (laid out by rich as a whole),
#: else the first block of a table that streams; and the seconds to wait for them before the first row shows.
_TABLE_BLOCK, _TABLE_WAIT = 1000, 0.2


def _table_stream(variables: list[str], rows) -> int:
    """A ``sparql`` result as a table, written as its rows come: the count of rows, or -1 when the reader of a
    pipe went away (``| head``), which ends the command quietly.

    A short result is one rich table, as wide as its contents. A longer one (more than ``_TABLE_BLOCK`` rows, or
    rows still coming after ``_TABLE_WAIT`` s) is drawn in rich's borders block by block, each flushed as it is
    written, so a pipe gets its first rows at once and 100,000 rows never wait on one layout. Its columns are
    as wide as the widest cell written so far (they widen between blocks); on a terminal they are folded to fit
    its width, never cut; to a pipe or a file each cell is whole on its line."""
    import time

    first, deadline = [], time.perf_counter() + _TABLE_WAIT
    for row in rows:
        first.append(_cells(*row))
        if len(first) >= _TABLE_BLOCK or time.perf_counter() > deadline:
            break
    else:
        from rich.table import Table

        table = Table()
        for v in variables:
            table.add_column(v, overflow="fold")  # on a narrow terminal long IRIs wrap in their cell, never cut
        for row in first:
            table.add_row(*row)
        _stdout(table).print(table)  # to a file or a pipe: each IRI whole on its line
        return len(first)
    try:
        return _BlockTable(variables).write(first, rows)
    except BrokenPipeError:
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # nothing more to write at exit either
        return -1


class _BlockTable:
    """The streamed table of :func:`_table_stream`, in the heavy-headed borders of rich's default table."""

    def __init__(self, variables: list[str]):
        from rich.cells import cell_len

        self.variables, self.length = variables, cell_len
        self.widths = [cell_len(v) for v in variables]
        self.room = _stdout().width if sys.stdout.isatty() else None  # the terminal's columns; a pipe: no limit

    def write(self, first: list[list[str]], rows) -> int:
        out, count, block = sys.stdout, 0, first
        while block:
            self.widen(block)
            text = [self.rule("┏━┳┓"), self.line(self.variables, "┃"), self.rule("┡━╇┩")] if count == 0 else []
            text.extend(self.line(row, "│") for row in block)
            out.write("\n".join(text) + "\n")
            out.flush()
            count += len(block)
            block = [_cells(*row) for _, row in zip(range(_TABLE_BLOCK), rows)]
        out.write(self.rule("└─┴┘") + "\n")
        out.flush()
        return count

    def widen(self, block: list[list[str]]) -> None:
        for row in block:
            self.widths = [max(w, self.length(cell)) for w, cell in zip(self.widths, row)]
        if self.room is not None:  # fold to the terminal: the widest columns give up room first
            while sum(self.widths) + 3 * len(self.widths) + 1 > self.room and max(self.widths) > 8:
                widest = self.widths.index(max(self.widths))
                self.widths[widest] -= 1

    def rule(self, box: str) -> str:
        left, bar, cross, right = box
        return left + cross.join(bar * (w + 2) for w in self.widths) + right

    def line(self, cells: list[str], bar: str) -> str:
        pieces = [[cell[i:i + w] for i in range(0, len(cell), w)] or [""] for cell, w in zip(cells, self.widths)]
        lines = []
        for n in range(max(map(len, pieces))):
            parts = [(p[n] if n < len(p) else "") for p in pieces]
            lines.append(bar + bar.join(f" {t}{' ' * (w - self.length(t))} " for t, w in zip(parts, self.widths))
                         + bar)
        return "\n".join(lines)


def _csv(solutions, out):
    """SPARQL results as CSV (the W3C form Oxigraph writes: IRIs bare, blank nodes ``_:id``, literals' values),
    row by row to ``out``, with every cell neutralised (:func:`~kqe_rdf.core.inert.csv_cell`): a literal
    ``=HYPERLINK(...)`` opens in a spreadsheet as text."""
    import csv

    from pyoxigraph import BlankNode

    from .core.inert import csv_cell

    variables = solutions.variables
    writer = csv.writer(out, lineterminator="\r\n")
    writer.writerow([v.value for v in variables])
    for row in solutions:
        writer.writerow([
            "" if (term := row[v]) is None else csv_cell(f"_:{term.value}" if isinstance(term, BlankNode) else term.value)
            for v in variables])
    return out


def _queryset(name, paths, limit, sample, seed, rel, wording, half):
    """The query set ``eval`` and ``kb tune-fusion`` read: loaded, halved, sampled, and refused when nothing in it
    has an answer of relevance ``rel``."""
    from .core.errors import InputError
    from .evaluation.querysets import load

    if wording is not None and name != "phenopackets":
        raise click.BadParameter(f"applies to phenopackets only; {name} questions keep their own text",
                                 param_hint="--wording")
    qs = load(name, *paths, limit=limit, **({} if wording is None else {"wording": wording}))
    if half is not None:
        qs = qs.half(int(half))
    if not any(grade >= rel for q in qs for grade in q.answers.values()):
        raise InputError(f"nothing to evaluate in {', '.join(str(p) for p in paths)}: {qs.summary()}; none with an "
                         f"answer of relevance >= {rel} (--rel)")
    if sample is not None and sample < len(qs):
        import random

        picked = sorted(random.Random(seed).sample(range(len(qs)), sample))
        qs.queries = [qs.queries[i] for i in picked]
        qs.name += f" (random sample of {sample}, seed {seed})"
    return qs


@cli.command("eval")
@click.argument("queryset")
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path, exists=True))
@KB_OPTION
@click.option("--method", "-m", "methods", multiple=True, default=["bm25"], show_default=True,
              help=f"Retrieval method (repeatable): {METHOD_NAMES}; question answering: ask (its answers, then its "
                   "other candidates, as its ranking; also answer-set precision, recall and F1, and accuracy by "
                   "confidence).")
@click.option("--limit", type=int, default=None, callback=_at_least_one, help="Evaluate the first N queries only.")
@click.option("--sample", type=int, default=None, callback=_at_least_one,
              help="Evaluate N queries drawn at random (reproducible with --seed).")
@click.option("--seed", type=int, default=0, show_default=True, help="Random seed for --sample.")
@click.option("--type", "types", multiple=True, help="Only rank nodes of this class (e.g. Disease).")
@click.option("--depth", type=int, default=100, show_default=True, callback=_at_least_one,
              help="Results ranked per query.")
@click.option("--rel", type=int, default=1, show_default=True, help="Minimum relevance grade counted as relevant.")
@WORDING_OPTION
@HALF_OPTION
@click.option("--run-dir", type=click.Path(path_type=Path), default=None, help="Write TREC run files here.")
@click.option("--per-query", "per_query_path", type=click.Path(path_type=Path), default=None,
              help="Write one JSON Lines record per method and query here: text, metrics, gold and top 10 "
                   "with names, the method's explanation.")
@click.option("--report", "report_path", type=click.Path(path_type=Path), default=None,
              help="Write a self-contained HTML report here: metrics, chart, scores by query type, worst queries.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def eval_command(queryset, paths, kb_path, methods, limit, sample, seed, types, depth, rel, wording, half, run_dir,
                 per_query_path, report_path, as_json):
    """Evaluate retrieval methods on a QUERYSET read from PATHS (STaRK and TREC metrics).

    \b
    Query sets: stark CSV [SPLIT_INDEX]; trec TOPICS QRELS; metaqa QUESTIONS; irn QUESTIONS (IRN: question, answer, path, answers);
    phenopackets CASES.jsonl[.gz]; scifact CLAIMS QRELS.
    """
    from .evaluation.runner import evaluate

    for option, path in (("--per-query", per_query_path), ("--report", report_path)):
        # Checked before the evaluation, which can take hours, rather than after it.
        if path is not None and not path.resolve().parent.is_dir():
            raise click.BadParameter(f"cannot write {path}: folder {path.resolve().parent} does not exist",
                                     param_hint=option)
    qs = _queryset(queryset, paths, limit, sample, seed, rel, wording, half)
    kb, settings = _open_kb(kb_path)
    result = evaluate(kb, qs, methods, settings, depth, list(types) or None, rel, progress=_progress(),
                      run_dir=run_dir)
    if per_query_path is not None:
        from .evaluation.runner import query_records

        with open(per_query_path, "w", encoding="utf-8") as out:
            for record in query_records(result, kb):
                out.write(json.dumps(record) + "\n")
    if report_path is not None:
        from .evaluation.report import write_report

        write_report(report_path, result, kb, qs.summary())
    summary = {"queryset": qs.summary(), "kb": str(kb.path), "queries": result.queries,
               "answerable": result.answerable, "gold_ids_not_in_kb": result.unresolved_answers,
               "results": result.table()}
    if result.reliability():
        summary["reliability"] = result.reliability()
    if as_json:
        click.echo(json.dumps(summary, indent=2))
        return
    _print_evaluation(qs, result)


def _print_evaluation(qs, result) -> None:
    from rich.table import Table

    def cell(column, value) -> str:
        if value is None:
            return ""
        return f"{value:.4f}" if isinstance(value, float) and column != "queries/s" else str(value)

    tables = []
    for title, columns, rows in [(None, result.columns(), result.table()),
                                 *((f"{method}: accuracy by confidence (is the first answer right?)", list(rows[0]), rows)
                                   for method, rows in result.reliability().items())]:
        table = Table(title=title, title_justify="left")
        for col in columns:
            table.add_column(col, justify="left" if col in ("method", "confidence") else "right")
        for row in rows:
            table.add_row(*[cell(k, row.get(k)) for k in columns])
        tables.append(table)
    console = _stdout(*tables)
    console.print(qs.summary())
    console.print(f"{result.queries} queries, {result.answerable} with a gold answer in the KB "
                  f"({result.unresolved_answers} gold ids not in the KB; those queries count as misses)")
    for table in tables:
        console.print(table)


@cli.command()
@KB_OPTION
def demo(kb_path):
    """Build the biomedical KB if absent (HPO + Disease Ontology), then show what kqe-rdf does with provenance.

    \b
    1. a phenotype list answered by the structural method (4step-offline): triplets, SPARQL, why
    2. SPARQL with a search inside it (SERVICE <urn:kqe:search>)
    3. a KAR expansion (kar-offline) with the KG facts it came from
    4. a hybrid search (BM25 + dense), embedding only its candidates when the KB has no dense index
    """
    import time

    started = time.perf_counter()  # before the heavy imports: the first-answer time a user waits
    from rich.console import Console

    from .demo import Demo

    settings = _settings(kb=kb_path)
    Demo(settings, Console(soft_wrap=True), _progress(), started).run()


# ---------------------------------------------------------------- question answering (kqe_rdf.methods.answering)


@cli.command()
@click.argument("question")
@KB_OPTION
@click.option("--sources", default=None, metavar="kg,text,tables",
              help="Evidence sources, comma-separated [default: qa_sources, i.e. kg,text,tables].")
@click.option("--offline", is_flag=True, help="Read the intent and the answer without the LLM even if one is set.")
@click.option("--evidence", "shown", type=int, default=5, show_default=True, help="Top evidence pieces to print.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output (what the /answer endpoint returns).")
@_one_request
def ask(question, kb_path, sources, offline, shown, as_json):
    """Answer QUESTION from the KG, node text and registered tables, with the evidence it rests on."""
    from .methods.answering import answer

    kb, settings = _open_kb(kb_path, qa_sources=sources)
    result = answer(kb, settings, question, settings.qa.sources, offline=offline)
    if as_json:
        click.echo(json.dumps(result.as_dict(), indent=2))
        return
    from rich.markup import escape

    console = _stdout()
    if len(result.answers) > 1:  # a list question: every answer, best first
        console.print(f"[bold]answers[/] ({len(result.answers)}): "
                      + escape("; ".join(a.name for a in result.answers)) + f"  [dim]({escape(result.method)})[/]")
    else:
        console.print(f"[bold]answer[/]: {escape(result.answer) if result.answer is not None else '(none found)'}"
                      + (f"  <{result.nodes[0]}>" if result.nodes else "") + f"  [dim]({escape(result.method)})[/]")
    if result.answer is not None:
        console.print(f"[bold]confidence[/] {result.confidence:.2f}" + escape(_because(result.confidence_because)))
    for piece in result.evidence:
        console.print(f"  because [{piece.id}] {piece.text}", markup=False)
    for flag in result.flags:
        console.print(f"[yellow]flag[/]: {flag}")
    intent = result.as_dict()["intent"]
    console.print(f"[bold]intent[/] ({intent['source']}): answer type {', '.join(intent['answer_types']) or '?'}; "
                  f"entities {', '.join(e['text'] for e in intent['entities']) or 'none'}; "
                  f"relation {intent['relation']!r}"
                  + (f"; time {', '.join(intent['time'])}" if intent["time"] else "")
                  + (f"; location {', '.join(intent['location'])}" if intent["location"] else ""))
    for note in intent["notes"]:
        console.print(f"  note: {note}", markup=False)
    if result.path is not None:
        # Constants read the same way (a phenotype list) share one line.
        readings: dict[tuple[str, str], list[str]] = {}
        for part in result.path["reading"] or [{"constant": "", "path": " / ".join(result.path["relations"])}]:
            words = "; ".join(f"{hop['relation']}: {', '.join(hop['words']) or '-'} ({hop['how']})"
                              for hop in part.get("hops", ()))
            readings.setdefault((part["path"], words), []).append(part["constant"])
        for (path, words), constants in readings.items():
            shown_constants = ", ".join(constants[:3]) + (f" and {len(constants) - 3} more" if len(constants) > 3 else "")
            console.print("[bold]path[/] " + escape(f"{shown_constants}: {path}" + (f"  ({words})" if words else "")))
    else:
        stages = " → ".join(f"{name} {n}" for name, n in result.pruning.sizes().items()) if result.pruning else ""
        console.print(f"[bold]evidence[/] ({', '.join(result.sources)}): {stages or escape(result.method)}")
        for rank, r in enumerate(result.top[:shown], start=1):
            console.print(f"  {rank}. [{r.evidence.id}] {r.evidence.text}  ({r.score:.3f})", markup=False)
    answered = {i for a in result.answers for i in a.iris} | {a.value["term"] for a in result.answers if a.value}
    others = [c for c in result.candidates
              if not answered.intersection(c.iris) and not (c.value and c.value["term"] in answered)][:4]
    if others:
        others = ", ".join(f"{c.name} ({c.score:.2f})" for c in others)
        console.print(f"other candidates: {others}", markup=False)


def _because(because: dict) -> str:
    """`` (the first answer is right with this probability; raw 0.95: linking 1.00, ...; 378 answers)``."""
    if not because:
        return ""
    factors = ", ".join(f"{k} {because[k]:.2f}" for k in ("linking", "reading", "answer") if k in because)
    said = [f"raw {because['raw']:.2f}" + (f": {factors}" if factors else "")] if "raw" in because else [factors]
    if because.get("answers", 1) > 1:
        said.append(f"{because['answers']:,} answers")
    said += [f"{because[k]} {what}" for k, what in (("unread", "relation word(s) unread"),
                                                    ("unnamed", "hop(s) no word names")) if because.get(k)]
    return " (the probability that the first answer is right, calibrated on the dev sets; " + "; ".join(said) + ")"


@cli.group()
def tables() -> None:
    """Register CSV/TSV tables with a KB as evidence for `kqe-rdf ask`."""


@tables.command("add")
@click.argument("file", type=click.Path(path_type=Path))
@KB_OPTION
@click.option("--entity-column", required=True, help="The column whose cells name KG nodes (by id or name).")
@click.option("--name", default=None, help="Name to register the table under [default: the file name].")
@click.option("--delimiter", default=None, help="Cell separator [default: tab for .tsv/.tab, else comma].")
@click.option("--replace", is_flag=True, help="Replace a table registered under the same name.")
def tables_add(file, kb_path, entity_column, name, delimiter, replace):
    """Register FILE (atomic: a failed add leaves the registered tables as they were)."""
    from .methods.answering.tables import register_table

    kb, _settings = _open_kb(kb_path)
    info = register_table(kb, file, entity_column, name, delimiter, replace)
    click.echo(f"registered table {info['name']!r}: {info['rows']:,} rows, {info['linked_rows']:,} linked to KG "
               f"nodes through {info['entity_column']!r}")
    if info["unlinked_examples"]:
        click.echo(f"  not linked (first {len(info['unlinked_examples'])}): {', '.join(info['unlinked_examples'])}")


@tables.command("list")
@KB_OPTION
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def tables_list(kb_path, as_json):
    """List the tables registered with the KB."""
    from .methods.answering.tables import list_tables

    kb, _settings = _open_kb(kb_path)
    found = list_tables(kb.path)
    if as_json:
        click.echo(json.dumps(found, indent=2))
        return
    if not found:
        click.echo("no tables registered; add one with `kqe-rdf tables add FILE --entity-column C`")
    for info in found:
        click.echo(f"{info['name']}: {info['rows']:,} rows ({info['linked_rows']:,} linked), columns "
                   f"{', '.join(info['columns'])}; entity column {info['entity_column']!r}; from {info['source']}")


# ---------------------------------------------------------------- the knowledge service and external links


@cli.command()
@KB_OPTION
@click.option("--host", default=None, help="Address to listen on [default: server_host, 127.0.0.1].")
@click.option("--port", type=int, default=None, help="Port [default: server_port, 7878].")
@click.option("--query-timeout", type=float, default=None, help="Seconds per query before a 503 [default: 30].")
@click.option("--result-cap", type=int, default=None, help="Most rows per SPARQL response [default: 10000].")
@click.option("--update-token", default=None, envvar="KQE_SERVER_UPDATE_TOKEN",
              help="Enable /update for requests sending `Authorization: Bearer TOKEN` (off without it).")
@click.option("--service-allow", default=None, metavar="URLS",
              help="SERVICE endpoints queries may call, space- or comma-separated (none by default).")
@click.option("--cors", "cors_origins", default=None, metavar="ORIGINS", help="CORS origins to allow (off by default).")
def serve(kb_path, host, port, query_timeout, result_cap, update_token, service_allow, cors_origins):
    """Serve the KB: SPARQL 1.1 endpoint (/sparql), REST API (/search, /triplets, ...) and a web page (/)."""
    from .service.app import serve as run_server

    kb, settings = _open_kb(kb_path, server_host=host, server_port=port, server_query_timeout=query_timeout,
                            server_result_cap=result_cap, server_update_token=update_token,
                            server_service_allow=service_allow, server_cors_origins=cors_origins)
    _console().print(f"serving {kb.path} on http://{settings.server.host}:{settings.server.port}/ "
                     f"(SPARQL at /sparql; updates {'on' if settings.server.update_token else 'off'})")
    run_server(kb, settings)


@cli.command()
@KB_OPTION
@click.option("--endpoint", required=True, help="SPARQL 1.1 query URL of the external KG.")
@click.option("--type", "types", multiple=True, help="Link only nodes of this local class (repeatable).")
@click.option("--match", type=click.Choice(["label", "label+type"]), default="label", show_default=True,
              help="Match by label alone, or require the external item to have a --target-type class.")
@click.option("--target-type", "targets", multiple=True, metavar="IRI",
              help="External class a good match is of, directly or through subclasses (P31/P279*), e.g. "
                   "http://www.wikidata.org/entity/Q12136 (repeatable).")
@click.option("--predicate", type=click.Choice(["exactMatch", "sameAs"]), default="exactMatch", show_default=True,
              help="Write links as skos:exactMatch or owl:sameAs.")
@click.option("--language", default="en", show_default=True, help="Language tag of external labels ('' for none).")
@click.option("--id-property", "id_properties", multiple=True, metavar="PROPERTY=PREFIX",
              help="Match identifiers first: the endpoint's PROPERTY holds the KB's PREFIX ids, e.g. P492=OMIM "
                   "(wdt:P492 \"154700\" for OMIM:154700); repeatable.")
@click.option("--min-confidence", type=float, default=None,
              help="Confidence a link needs [default: 0.8, which accepts an identifier, label or alias match].")
@click.option("--rate", type=float, default=None, help="Requests per second to the endpoint [default: 2].")
@click.option("--timeout", type=float, default=None, help="Seconds a request may take [default: 30].")
@click.option("--limit", type=int, default=None, help="Look up at most N more nodes in this run.")
@click.option("--restart", is_flag=True, help="Forget earlier progress for this endpoint and start over.")
@click.option("--write/--no-write", default=True, show_default=True,
              help="Write the accepted links into the KB's links graph (one transaction).")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output (every accepted link).")
def link(kb_path, endpoint, types, match, targets, predicate, language, id_properties, min_confidence, rate, timeout,
         limit, restart, write, as_json):
    """Find owl:sameAs / skos:exactMatch links from KB nodes to an external SPARQL endpoint (resumable).

    Confidence: shared identifier 1.0, label as written 0.95, label up to case/punctuation/Unicode 0.9, alias
    0.85; times 0.9 for an item with no class and 0.6 for one of another class than --target-type (followed
    through subclasses); ties share it.
    """
    from .service.links import link as run_link

    kb, settings = _open_kb(kb_path, link_rate=rate, link_min_confidence=min_confidence, link_timeout=timeout)
    progress = _progress()
    progress.note(f"linking to {endpoint}")
    run = run_link(kb, endpoint, types, match, targets, id_properties, predicate, language, limit, restart, write,
                   progress)
    if as_json:
        click.echo(json.dumps(run.as_dict(), indent=2, ensure_ascii=False))
        return
    _print_links(run.links)
    click.echo(f"{run.looked_up} node(s) looked up in {run.requests} request(s) ({run.done_before} done earlier, "
               f"{run.nodes} in all); {run.with_candidates} with candidates; {run.accepted} link(s) accepted"
               + (f", written to graph <{run.graph}>" if run.written else ""))
    click.echo(f"progress (resumable): {run.progress_file}")


def _print_links(links: list[dict]) -> None:
    """The accepted links as a table whose IRIs are never cut (a narrow terminal wraps the names instead)."""
    if not links:
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(title="accepted links", title_justify="left")
    table.add_column("node")
    table.add_column("item", no_wrap=True, min_width=max(len(link["remote"]) for link in links))
    table.add_column("confidence", justify="right", no_wrap=True)
    table.add_column("matched by")
    for link in links:
        table.add_row(*_cells(link["name"], link["remote"], f"{link['confidence']:.2f}", f"{link['how']}: {link['label']}"))
    Console().print(table, crop=False)


# ---------------------------------------------------------------- query expansion (kqe_rdf.methods.expansion)


@cli.command()
@click.argument("text")
@KB_OPTION
@click.option("--method", "-m", default="kar", show_default=True,
              help=f"{', '.join(EXPANSION)}, prf (the words RM3 adds, as search -m prf uses them); "
                   "the -offline ones run without the LLM.")
@click.option("--type", "types", multiple=True, help="Node class the query asks for (the query pseudo-entity's).")
@click.option("--hops", type=int, default=None, help="KAR: hops of relation propagation, 1 or 2 [default: 1].")
@click.option("--neighbours", type=int, default=None, help="KAR: neighbours kept by filtering [default: 10].")
@click.option("--expansions", type=int, default=None, help="KAR: expansions the LLM writes [default: 3].")
@click.option("--passages", type=int, default=None, help="KAR offline: passages appended, one per best neighbour "
              "[default: 1].")
@click.option("--grounded/--no-grounded", default=None,
              help="KAR offline: facts from the structural reader's grounded reading [default: kar_grounded, on].")
@click.option("--show-context", is_flag=True, help="Also print the knowledge the expansion came from.")
@click.option("--plain", is_flag=True, help="Print only the expanded query, on one line (the default in a pipe).")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output (the whole expansion).")
@_one_request
def expand(text, kb_path, method, types, hops, neighbours, expansions, passages, grounded, show_context, plain,
           as_json):
    """Expand TEXT with METHOD (TEXT '-' reads it from standard input) and print the query and its expansions,
    one a line (with --plain or in a pipe: the expanded query alone; with --show-context also its knowledge)."""
    from .methods.expansion import expand as run_expansion

    if text == "-":
        text = sys.stdin.read().strip()  # (not the newline that ends what was piped in)
    kb, settings = _open_kb(kb_path, kar_hops=hops, kar_neighbours=neighbours, kar_expansions=expansions,
                            kar_passages=passages, kar_grounded=grounded)
    exp = run_expansion(kb, settings, text, method, list(types) or None)
    if as_json:
        click.echo(json.dumps(exp.as_dict(), indent=2))
        return
    for note in exp.notes if exp.ran_offline else ():
        click.echo(f"note: {note}", err=True)
    if plain or not sys.stdout.isatty():
        click.echo(_cells(exp.expanded)[0])
    else:
        click.echo(_cells(f"query ({exp.method}, {exp.llm}): {exp.query}")[0])
        for number, piece in enumerate(exp.expansions, start=1):
            click.echo(_cells(f"  {'+' if exp.weight > 0 else '-'} {number}. {piece}")[0])
        if not exp.expansions:
            click.echo("  (nothing added: the query is searched as it is)")
        elif exp.evidence:
            click.echo(f"  {_weight_line(exp.as_dict())}")
    if show_context:
        _print_expansion(exp.as_dict())


def _weight_line(exp: dict) -> str:
    """How much an expansion counted and why: ``weight 0.5: the expansion replaces 2 of ... (key sentences 5, ...)``."""
    evidence = {k: v for k, v in exp["evidence"].items() if k not in ("reason", "new", "of")}
    shown = ", ".join(f"{key.replace('_', ' ')} {value}" for key, value in evidence.items())
    more = f" ({shown})" if shown else ""
    return f"weight {exp['weight']:g}: {exp['evidence'].get('reason', '')}{more}"


def _print_expansion(exp: dict) -> None:
    """The knowledge behind an expansion, for `expand --show-context` and `search --explain`."""
    console = _stdout()
    console.print(f"[bold]{exp['method']}[/] ({exp['llm']})", highlight=False)
    for entity in exp["entities"]:
        nodes = "; ".join(f"{n['name']} <{n['iri']}> {n['score']} ({n['link']})" for n in entity["nodes"]) or "nothing"
        console.print(f"[bold]entity[/] {entity['text']!r} ({entity['found_by']}) → {nodes}", markup=True, highlight=False)
    for n in exp["neighbours"]:
        head, tail = (n["from_name"], n["name"]) if n["direction"] == "out" else (n["name"], n["from_name"])
        console.print(f"[bold]neighbour[/] {n['score']:.3f} hop {n['hop']}: ({head}) --{n['relation']}--> ({tail})",
                      highlight=False)
        if n.get("source"):  # a node the grounded reading reached: where it came from and the facts along its path
            console.print(f"  from the {n['source']}: " + "; ".join(n["facts"]), markup=False, highlight=False)
    if exp["passages"]:
        console.print(f"[bold]passages[/]: {', '.join(exp['passages'])}", highlight=False)
    for t in exp["triples"]:
        console.print(f"[bold]triple[/] ({t['origin']}) {t['head']} | {t['relation']} | {t['tail']}"
                      + (f"  ← {t['passage']}" if t.get("passage") else ""), markup=True, highlight=False)
    if exp["graph"]:
        console.print(f"triples stored in graph <{exp['graph']}> (KB/expansions)", highlight=False)
    if exp["context"]:
        console.print(f"[bold]context[/] ({exp['context_tokens']} tokens):", highlight=False)
        for line in exp["context"]:
            console.print(f"  {line}", markup=False, highlight=False)
    for i, e in enumerate(exp["expansions"], start=1):
        console.print(f"[bold]expansion {i}[/]: {e}", highlight=False)
    if exp.get("evidence"):
        console.print(_weight_line(exp), markup=False, highlight=False)
    if exp["llm_usage"]:
        u = exp["llm_usage"]
        console.print(f"LLM: {u['calls']} call(s), {u['cache_hits']} cached, {u['total_tokens']} tokens")
    for note in exp["notes"]:
        console.print(f"note: {note}", markup=False, highlight=False)


def main() -> None:
    from .core.errors import KqeError

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
