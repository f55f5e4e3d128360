"""Every `kqe-rdf ...` command the front pages show parses: its subcommand exists, `--help` of it succeeds, and
each `--option` it uses is one that subcommand declares. The commands are read from the shell blocks of
README.md, docs/usage.md and docs/service.md, and from their inline code that starts with `kqe-rdf `; the
checker is the click command tree itself (no process per command). Made-up commands show it can fail.
"""

from __future__ import annotations

import json
import re
import shlex
from functools import cache
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from kqe_rdf.cli import cli
from support.paths import ROOT

PAGES = ("README.md", "docs/usage.md", "docs/service.md")
#: Fenced blocks read as shell: ```bash, ```sh, ```shell, ```console, or no language.
SHELL = {"", "bash", "sh", "shell", "console"}
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.M | re.S)
#: What ends one command of a shell line: `&&`, `||`, `;`, a pipe, a redirection.
SEPARATORS = {"&&", "||", ";", "|", "&", ">", ">>", "<", "2>", "(", ")"}


def shell_commands(block: str) -> list[list[str]]:
    """The `kqe-rdf` command lines of a shell block, each as its words after `kqe-rdf`."""
    commands = []
    for line in block.replace("\\\n", " ").splitlines():
        lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
        lexer.whitespace_split, lexer.commenters = True, "#"
        words, current = list(lexer), None
        for word in words:
            if word in SEPARATORS:
                current = None
            elif current is not None:
                current.append(word)
            elif word == "kqe-rdf":
                current = []
                commands.append(current)
    return commands


def inline_commands(text: str) -> list[list[str]]:
    """Inline code that starts with `kqe-rdf ` (outside fenced blocks), as words up to a pipe or redirection set
    apart by spaces (`label|label+type` is one word); `[--opt X]` reads as `--opt X`, and `...` is skipped."""
    spans = re.findall(r"`kqe-rdf ([^`]+)`", FENCE.sub("", text))
    heads = (re.split(r"\s(?:\||>)\s", span)[0] for span in spans)
    return [[w for w in re.sub(r"[\[\]]", " ", head).split() if w not in ("...", "…")] for head in heads]


def documented_commands() -> list[tuple[str, str]]:
    """``(page, command line)`` for every `kqe-rdf` command of the pages."""
    found = []
    for page in PAGES:
        text = (ROOT / page).read_text(encoding="utf-8")
        for language, block in FENCE.findall(text):
            if language in SHELL:
                found += [(page, " ".join(words)) for words in shell_commands(block)]
        found += [(page, " ".join(words)) for words in inline_commands(text)]
    return found


@cache
def help_succeeds(path: tuple[str, ...]) -> bool:
    return CliRunner().invoke(cli, [*path, "--help"]).exit_code == 0


def declared(command: click.Command) -> set[str]:
    names = {"--help", "-h"}
    for param in command.params:
        if isinstance(param, click.Option):
            names.update(param.opts, param.secondary_opts)
    return names


def problems(words: list[str]) -> list[str]:
    """What is wrong with `kqe-rdf WORDS`: an unknown subcommand, a failing --help, an undeclared option."""
    command, path, rest = cli, [], list(words)
    while isinstance(command, click.Group) and rest and not rest[0].startswith("-"):
        name = rest.pop(0)
        if name not in command.commands:
            return [f"no subcommand {' '.join(['kqe-rdf', *path, name])!r} (known: {', '.join(command.commands)})"]
        command = command.commands[name]
        path.append(name)
    found = []
    if isinstance(command, click.Group) and "--help" not in rest and "--version" not in rest:
        found.append(f"'kqe-rdf {' '.join(path)}' names a group, not a command (one of: {', '.join(command.commands)})")
    if not help_succeeds(tuple(path)):
        found.append(f"'kqe-rdf {' '.join([*path, '--help'])}' fails")
    options = declared(command)
    for word in rest:
        if word.startswith("-") and word != "-" and not word.startswith("--=") and word.split("=", 1)[0] not in options:
            found.append(f"'kqe-rdf {' '.join(path)}' has no option {word.split('=', 1)[0]} "
                         f"(it has {', '.join(sorted(options))})")
    return found


COMMANDS = documented_commands()


def test_the_pages_show_commands_to_check():
    pages = {page for page, _ in COMMANDS}
    assert pages == set(PAGES) and len(COMMANDS) >= 40, (pages, len(COMMANDS))
    # The shell blocks are read as shell: a pipe, a comment and `&&` end a command.
    assert shell_commands('kqe-rdf kb build bio --kb x && kqe-rdf kb embed --kb x   # dense\n'
                          'for h in 1 2; do kqe-rdf eval metaqa q --json | jq .; done') == [
        ["kb", "build", "bio", "--kb", "x"], ["kb", "embed", "--kb", "x"], ["eval", "metaqa", "q", "--json"]]


@pytest.mark.parametrize("page, line", COMMANDS, ids=[f"{p}: {c[:60]}" for p, c in COMMANDS])
def test_every_documented_command_parses(page, line):
    assert not problems(shlex.split(line)), f"{page}: kqe-rdf {line}"


@pytest.mark.parametrize("line, complaint", [
    ("serch 'long slender fingers'", "no subcommand 'kqe-rdf serch'"),
    ("kb bild bio --kb data/kb/bio", "no subcommand 'kqe-rdf kb bild'"),
    ("search 'long slender fingers' --methd bm25", "has no option --methd"),
    ("eval metaqa dev.txt.gz --sample 300 --per-query=out.jsonl --sed 1", "has no option --sed"),
    ("kb embed --kb data/kb/bio --type Disease --resume", "has no option --resume"),
    ("tables", "names a group, not a command"),
])
def test_a_made_up_command_or_option_is_rejected(line, complaint):
    said = problems(shlex.split(line))
    assert said and complaint in said[0], said


def test_real_commands_pass_the_same_checker():
    assert problems(shlex.split("search 'long slender fingers' -m bm25 -k 5 --type=Disease --json")) == []
    assert problems(["kb", "build", "bio", "--no-embed"]) == [] and problems(["--version"]) == []


def test_a_wrong_command_on_a_page_is_found_and_rejected():
    page = ("Run `kqe-rdf search x --methd bm25 | head` first, then:\n\n"
            "```bash\nkqe-rdf kb build bio && kqe-rdf kb embedd --kb data/kb/bio   # vectors\n```\n")
    blocks = [words for language, block in FENCE.findall(page) if language in SHELL for words in shell_commands(block)]
    found = [problems(words) for words in inline_commands(page) + blocks]
    assert [bool(p) for p in found] == [True, False, True], found


#: A folder of the machine a page was written on (`/tmp/...`, `/work/...`, `/root/...`, `/home/...`), not one a reader
#: has: the pages write `../shared/data`, `$KBS`, `$TMP` and relative paths instead.
MACHINE_FOLDER = re.compile(r"(?<![\w.$/~-])/(?:tmp|work|root|home)\b")


def test_no_page_names_a_folder_of_this_machine():
    pages = ["README.md", "data/README.md", *(str(p.relative_to(ROOT)) for p in sorted((ROOT / "docs").glob("*.md")))]
    named = [f"{page}:{n}: {line.strip()[:120]}" for page in pages
             for n, line in enumerate((ROOT / page).read_text(encoding="utf-8").splitlines(), 1)
             if MACHINE_FOLDER.search(line)]
    assert not named, "\n".join(named)
    assert MACHINE_FOLDER.search("kqe-rdf serve --kb /tmp/k/bio") and MACHINE_FOLDER.search("`/work/main`")
    assert not MACHINE_FOLDER.search("--kb $KBS/bio ../shared/data https://example.org/work/x /usr/share/wordnet")


def results_script():
    """bench/results.py as a module (bench/ is a folder of scripts, not a package)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("bench_results", ROOT / "bench" / "results.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_results_page_is_written_from_run_folders_with_each_set_s_measure(tmp_path):
    """bench/results.py on a run of two sets: each is judged by its own measure (bench/devsets.py's SETS), a set
    where 4step-offline falls below bm25 is marked, the commit is the one given, no folder of the run is named."""
    def summary(scores):
        return {"queries": 10, "command": f"kqe-rdf eval ... --per-query {tmp_path}/x.jsonl",
                "results": [{"method": m, "Hit@1": h, "nDCG@10": n} for m, (h, n) in scores.items()]}
    (tmp_path / "pql-2h.json").write_text(json.dumps(summary({"bm25": (0.3, 0.4), "4step-offline": (0.9, 0.2)})))
    (tmp_path / "dl19.json").write_text(json.dumps(summary({"bm25": (0.1, 0.5), "4step-offline": (0.9, 0.4)})))
    script, argv = results_script(), ["--run", str(tmp_path), "--label", "now", "--commit", "abc1234"]
    runs, _ = script.parse(argv)
    page = script.document(runs, argv)
    assert "## now: commit `abc1234`" in page and str(tmp_path) not in page and "--per-query $RUN/x.jsonl" in page
    assert "| pql-2h | Hit@1 | 10 | 30.00 | 90.00 | yes |" in page
    assert "| dl19 | nDCG@10 | 10 | 50.00 | 40.00 | **no** |" in page


def test_two_runs_are_compared_per_query_by_any_measure_they_recorded(tmp_path, capsys, monkeypatch):
    """bench/devsets.py --compare OLD NEW --measure MRR: how two backends of one index are compared (docs/scale.md)
    by a measure other than the set's own (MetaQA's Hit@1 of BM25 is near 0, its MRR is not)."""
    import importlib.util
    import sys

    spec = importlib.util.spec_from_file_location("bench_devsets", ROOT / "bench" / "devsets.py")
    script = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "bench_devsets", script)  # its dataclasses look their module up there
    spec.loader.exec_module(script)
    for run, mrr in (("old", [0.5, 1.0]), ("new", [1.0, 1.0])):
        (tmp_path / run).mkdir()
        (tmp_path / run / "metaqa-1-hop.jsonl").write_text("".join(json.dumps(
            {"method": "bm25", "qid": f"q{i}", "Hit@1": 0.0, "MRR": m, "ranked": [{"iri": f"n{i}"}]}) + "\n"
            for i, m in enumerate(mrr)))
    script.compare(tmp_path / "old", tmp_path / "new", "MRR")
    shown = capsys.readouterr().out
    assert "metaqa-1-hop" in shown and "MRR" in shown and "75.00 -> 100.00  won    1 lost    0" in shown
    script.compare(tmp_path / "old", tmp_path / "new")
    assert "Hit@1     n=    2    0.00 ->   0.00" in capsys.readouterr().out


def test_the_results_page_opens_with_a_run_and_its_commit():
    text = (ROOT / "docs" / "results.md").read_text(encoding="utf-8")
    first = re.search(r"^## .*$", text, re.M).group(0)
    assert re.search(r"commit `[0-9a-f]{7,40}`", first), first
    assert "python bench/results.py --run $RUN" in text and "4step-offline ≥ bm25" in text


def test_fusion_tables_say_why_when_the_fitted_hybrid_loses_nowhere(tmp_path):
    """bench/fusion.py --table on a large set where the fitted hybrid (BM25 alone) is never below BM25: instead of
    an empty table, the queries where a hybrid differs from BM25, those the per-request hybrid loses first."""
    import importlib.util
    import sys

    sys.path.insert(0, str(ROOT / "bench"))  # bench/fusion.py imports bench/devsets.py as its neighbour
    try:
        spec = importlib.util.spec_from_file_location("bench_fusion", ROOT / "bench" / "fusion.py")
        script = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(script)
    finally:
        sys.path.remove(str(ROOT / "bench"))
    qids = [f"q{i}" for i in range(80)]
    hit = {"bm25": {q: 1.0 for q in qids}, "dense": {q: 0.0 for q in qids}, "hybrid-rrf": {q: 1.0 for q in qids},
           "hybrid": {q: 1.0 for q in qids}}
    hit["hybrid-rrf"]["q3"] = 0.0
    hit["hybrid"]["q7"] = 0.0
    name = "phenopackets-template"
    (tmp_path / f"{name}.json").write_text(json.dumps({
        "queries": 80, "means": {"bm25": 100.0, "dense": 0.0, "hybrid-rrf": 98.75, "hybrid": 98.75, "fitted": 100.0},
        "weight": 1.0, "normalisation": "minmax", "fit_queries": 80}))
    (tmp_path / f"{name}.request.jsonl").write_text("".join(
        json.dumps({"method": m, "qid": q, "Hit@1": v}) + "\n" for m, by in hit.items() for q, v in by.items()))
    (tmp_path / f"{name}.fitted.jsonl").write_text("".join(
        json.dumps({"method": "hybrid", "qid": q, "Hit@1": 1.0}) + "\n" for q in qids))
    text = script.tables(tmp_path)
    assert "| phenopackets-template | Hit@1 | 80 | 100.00 | 0.00 | 98.75 | 98.75 | 1.00 (minmax, 80 queries) | " \
           "100.00 | 99.50 | yes |" in text
    assert "below bm25 on no query of half 2; 2 queries where a hybrid differs from bm25" in text
    rows = [line for line in text.splitlines() if re.match(r"\| q\d", line)]
    assert rows == ["| q7 | 1.000 | 0.000 | 1.000 | 0.000 | 1.000 |", "| q3 | 1.000 | 0.000 | 0.000 | 1.000 | 1.000 |"]


# ------------------------------------------------------------- the code docs/architecture.md cites
CODE = ROOT / "kqe_rdf"
#: A file or folder cited in backticks (`kb/linking.py`, `methods/reading/`, `service/jobs.py:search_job`).
CITED_FILE = re.compile(r"^((?:[\w-]+/)*[\w-]+\.py|(?:[\w-]+/)+)(?::(\w+))?$")
#: A name cited in backticks: a module's (`ranking.read_path`, `base.Expander.weigh`), a class's
#: (`OfflineTriplets.mentions`), or a private function's (`_guessed`).
CITED_NAME = re.compile(r"^(?:[\w/]+/)?([A-Za-z_]\w*)((?:\.\w+)+)(?:\(\w*\))?$|^(_[a-z]\w*)$")


def cited(text: str) -> list[str]:
    """The code a page cites: every backticked file, folder or dotted name that is no command, URL or pattern."""
    return [t for t in re.findall(r"`([^`\n]+)`", text)
            if not re.search(r"[\s*<>?=$\[{]|^\.|^kqe-rdf|^/", t) and (CITED_FILE.match(t) or CITED_NAME.match(t))]


def missing_code(token: str) -> str | None:
    """Why a cited file or name does not exist in the code, or None when it does."""
    files = [str(p.relative_to(ROOT))
             for p in (*CODE.rglob("*.py"), *ROOT.glob("tests/**/*.py"), *ROOT.glob("bench/*.py"))]
    folders = {str(p.relative_to(ROOT)) + "/" for p in (*CODE.rglob("*"), *ROOT.glob("*"), *ROOT.glob("tests/*"))
               if p.is_dir()}
    if match := CITED_FILE.match(token):
        path, name = match.groups()
        found = [f for f in (files if path.endswith(".py") else folders) if f == path or f.endswith("/" + path)]
        if not found:
            return f"no file or folder {path}"
        if name and not any(re.search(rf"^(?:def|class)? ?{name}\b", (ROOT / f).read_text(), re.M) for f in found):
            return f"{path} defines no {name}"
        return None
    module, attributes, private = CITED_NAME.match(token).groups()
    if private:
        return None if any(re.search(rf"def {private}\b", (ROOT / f).read_text()) for f in files) else \
            f"no function {private}"
    for f in files:
        source = (ROOT / f).read_text()
        if Path(f).stem == module or re.search(rf"^class {module}\b", source, re.M):
            last = attributes.rsplit(".", 1)[-1]
            if re.search(rf"\b(?:def|class) {last}\b|^\s*{last}\s*[:=]|\b{last} = ", source, re.M):
                return None
    return f"nothing defines {token}"


def test_every_module_and_function_the_architecture_page_cites_exists():
    tokens = cited((ROOT / "docs" / "architecture.md").read_text())
    assert len(tokens) > 60  # the page's citations are read, not skipped
    assert [(t, why) for t in tokens if (why := missing_code(t))] == []


@pytest.mark.parametrize("token", ["methods/fourstep/reading/", "ranking.read_paths", "OfflineTriplets._from_wordnet",
                                   "kb/nowhere.py", "service/jobs.py:search_jobs", "_abstains"])
def test_a_citation_of_code_that_is_gone_is_found(token):
    assert cited(f"see `{token}`") == [token] and missing_code(token)
