"""Issue 49: a query evaluated offline looks up no host name, and its answer does not tell whether a name exists.

The probe of the issue, run as it was: a fake nscd on a Unix socket in a private mount namespace
(tests/support/name_lookup_probe.py, under ``unshare --mount``). Before, a default server's worker asked it for
``probe5-leak.exfil.invalid`` (a DNS channel out through a query the guard's text check missed), and the answer
was 403 for a name that resolved and 400 for one that did not.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from support.fixtures_kb import bio_kb  # noqa: F401 - fixture
from support.canary import clean_env
from support.paths import ROOT

pytestmark = pytest.mark.slow  # servers, subprocesses or big inputs: not in `make test-quick`

PROBE = ROOT / "tests" / "support" / "name_lookup_probe.py"


def _private_mounts_allowed() -> str | None:
    """Why a private mount namespace cannot be made here, or None."""
    if sys.platform != "linux" or shutil.which("unshare") is None:
        return "needs Linux and unshare(1)"
    done = subprocess.run(["unshare", "--mount", "--propagation", "private", "mount", "-t", "tmpfs", "tmpfs", "/run"],
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        return f"unshare --mount is not permitted here ({done.stderr.strip()[:200]})"
    return None


@pytest.fixture(scope="module")
def probe(bio_kb):  # noqa: F811
    reason = _private_mounts_allowed()
    if reason is not None:
        pytest.skip(reason)
    done = subprocess.run(["unshare", "--mount", "--propagation", "private", sys.executable, str(PROBE),
                           str(bio_kb.path)], capture_output=True, text=True, timeout=300,
                          env=clean_env(), cwd=ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    if not out["asked"]:
        pytest.skip("glibc here does not ask nscd for host names (built without it?): the probe proves nothing")
    return out


def test_no_name_reaches_a_resolver_daemon(probe):
    assert probe["offline"].get("active") is True, probe["offline"]
    assert not [r for r in probe["heard"] if "exfil" in r or "localhost" in r], probe["heard"]


def test_a_name_that_resolves_and_one_that_does_not_are_answered_alike(probe):
    offline = probe["offline"]
    assert offline["localhost"][1] == offline["probe5-leak.exfil.invalid"][1] != "none", offline
    server = probe["server"]
    assert server["localhost"] == server["probe5-leak.exfil.invalid"], server
    assert server["localhost"][0] == 403, server


@pytest.mark.skipif(os.geteuid() != 0, reason="the probe mounts a tmpfs: needs root")
def test_the_guard_refuses_the_escape_trick_before_anything_runs(probe):
    """The text check reads what Oxigraph parses: the call is refused with its reason, not cut off by the wall."""
    for status, body in probe["server"].values():
        assert status == 403 and "not on this server's allow-list" in body, body
