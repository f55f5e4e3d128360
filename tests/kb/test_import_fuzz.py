"""The standing fuzz suite of the importers and the CLI: a generated corpus of malformed files.

Every case runs through the command line in-process (``CliRunner``, as a user runs it) against
a small real KB and must end in one of two ways: accepted (status 0), or refused with status 2
and one line naming the file (with ``:line`` where the fault is on a line) or the option at
fault. Never a traceback, an uncaught exception or a crash; and a refused command leaves the KB
byte for byte as it was. A slice (every 15th case) runs by default; the whole corpus with
``pytest -m fuzz`` (it prints its counts)::

    .venv/bin/python -m pytest -q -m fuzz tests/kb/test_import_fuzz.py -s
"""

from __future__ import annotations

import collections
import re
import time

import pytest
from click.testing import CliRunner

from support.fuzz_corpus import COUNTS, Case, corpus
from support.hostile_inputs import kb_digest, outcome
from kqe_rdf.kb.build import build_kb
from kqe_rdf.cli import cli
from kqe_rdf.kb.importers.jsonl import JsonlImporter

pytestmark = pytest.mark.slow  # servers, subprocesses or big inputs: not in `make test-quick`

CASES = corpus()
SLICE = CASES[::15]


@pytest.fixture(scope="module")
def target(tmp_path_factory, products_file):
    """A small real KB the cases run against (builds that are accepted replace it, as they would)."""
    path = tmp_path_factory.mktemp("fuzz") / "kb"
    build_kb(JsonlImporter([products_file]), path)
    return path


def run_case(case: Case, folder, kb) -> tuple[str, bool]:
    """Write the case's files, run its command; → (outcome, whether a refusal named a line)."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, data in case.files.items():
        (folder / name).write_bytes(data)
        paths.append(str(folder / name))
    # Bad input, not another source: accepted builds replace the KB, as they would with --force.
    args = [a.format(*paths) for a in case.args] + ["--kb", str(kb)]
    args += ["--force"] if args[:2] == ["kb", "build"] else []
    before = kb_digest(kb)
    result = CliRunner().invoke(cli, args)
    try:
        verdict = outcome(result, [folder / name for name in case.files])
    except AssertionError as exc:
        raise AssertionError(f"{case.id}: {' '.join(args)}\n{exc}") from None
    if verdict == "refused":
        assert kb_digest(kb) == before, f"{case.id}: a refused command changed the KB"
    return verdict, verdict == "refused" and re.search(r":\d+: ", result.stderr) is not None


def test_the_corpus_is_reproducible_and_large_enough():
    again = corpus()
    assert [c.id for c in again] == [c.id for c in CASES]
    assert [c.files for c in again[:50]] == [c.files for c in CASES[:50]]
    assert len(CASES) == sum(COUNTS.values()) >= 1000
    assert 50 <= len(SLICE) <= 100


@pytest.mark.parametrize("case", SLICE, ids=[c.id for c in SLICE])
def test_a_slice_of_the_corpus(case, target, tmp_path):
    run_case(case, tmp_path, target)


@pytest.mark.fuzz
def test_the_whole_corpus(target, tmp_path):
    started = time.perf_counter()
    counts: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    failures = []
    for case in CASES:
        try:
            verdict, with_line = run_case(case, tmp_path / case.id[:60], target)
        except AssertionError as exc:
            failures.append(str(exc))
            counts[case.family]["failed"] += 1
            continue
        counts[case.family][verdict] += 1
        counts[case.family]["refused naming a line"] += with_line
    total = collections.Counter()
    for family, counter in counts.items():
        total.update(counter)
        print(f"{family:13} {dict(counter)}")
    print(f"{'all':13} {dict(total)} — {len(CASES)} cases in {time.perf_counter() - started:.0f} s")
    assert not failures, f"{len(failures)} of {len(CASES)} cases failed:\n" + "\n\n".join(failures[:10])
