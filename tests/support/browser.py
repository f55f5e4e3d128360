"""Debian's chromium driven by Playwright, for the web page's and the evaluation report's tests; screenshots go
to tests/artifacts/ (gitignored)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

#: Debian's chromium (what `make test` installs), at its packaged path rather than whatever PATH holds.
CHROMIUM = next((p for p in ("/usr/bin/chromium", "/usr/lib/chromium/chromium") if Path(p).exists()), None)
ARTIFACTS = Path(__file__).parents[1] / "artifacts"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]
#: How long one browser step (a click, a selector, a screenshot, a ``wait_until``) may wait, in seconds. Playwright's
#: 30 s was not enough under load: a full-page screenshot timed out in a fresh clone's `make test` that took 43 min
#: on the shared machine (8 min idle). It bounds the waiting only; what a step must find is unchanged.
STEP_SECONDS = 180


def new_tab(browser, width: int = 1400, height: int = 900):
    """A page of ``browser`` whose every step may wait up to :data:`STEP_SECONDS`."""
    tab = browser.new_page(viewport={"width": width, "height": height})
    tab.set_default_timeout(STEP_SECONDS * 1000)
    return tab



def browser_or_skip():
    """Chromium, or a skip on a developer's machine without it; under CI a missing browser fails the run."""
    if CHROMIUM is None:
        message = "Debian chromium is not installed (`make test` installs it when it can: apt-get install chromium)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return CHROMIUM
