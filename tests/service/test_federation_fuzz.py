"""Differential fuzzing of the federation guard (issue 37, item 2): generated SERVICE and LOAD calls hidden by
escapes, comments, quotes, whitespace and letter case (tests/support/federation_fuzz.py) never reach a canary through
the guarded server or ``kqe-rdf sparql``, while an unguarded pyoxigraph store (the oracle) calls it for many of
them. A few hundred cases here; bench/federation_fuzz.py runs thousands (docs/benchmarks.md)."""

from __future__ import annotations

import os

import pytest

from support.federation_fuzz import CLI_TARGETS, TARGETS, cases, run_cases
from support.fixtures_kb import bio_kb  # noqa: F401 - fixture
from support.canary import Canary, canary  # noqa: F401 - fixture

pytestmark = pytest.mark.slow  # servers, subprocesses or big inputs: not in `make test-quick`

#: Cases per run (KQE_FUZZ_CASES to change it) and the seed (a failing case is reproduced by seed and number).
COUNT = int(os.environ.get("KQE_FUZZ_CASES", "200"))
SEED = 37


def test_no_generated_call_reaches_the_canary(bio_kb, canary, tmp_path):  # noqa: F811
    allowed = Canary()  # on the allow-list: calls to it are allowed, and its prefix is what glued names stand for
    try:
        generated = cases(SEED, COUNT, f"http://127.0.0.1:{canary.port}", f"http://127.0.0.1:{allowed.port}/sparql")
        report = run_cases(bio_kb.path, tmp_path, generated, canary, f"http://127.0.0.1:{allowed.port}/sparql",
                           cli_every=10)
    finally:
        allowed.close()
    # The oracle: the generator's calls are real, Oxigraph unguarded follows a good share of them.
    assert report.oxigraph_called >= COUNT // 10, report
    assert set(report.sent) == {name for name, _, _ in TARGETS} | {name for name, _ in CLI_TARGETS}
    assert report.called == dict.fromkeys(report.sent, 0), report.called
    for name, statuses in report.statuses.items():  # refused or failed cleanly, never a crash or a bug
        assert not {s for s in statuses if isinstance(s, int) and s >= 500 and s != 502}, (name, statuses)
        assert not {s for s in statuses if s not in (0, 1, 2, "exit 0", "exit 1", "exit 2") and isinstance(s, str)}, \
            (name, statuses)
