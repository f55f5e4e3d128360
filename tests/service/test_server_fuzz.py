"""The standing fuzz suite, server part (issue 15): a fixed-seed corpus of malformed requests (tests/support/fuzz_server.py).

Every request must get an answer below 500, without a trace, and every error must
name what was wrong: one of the parameters it sent (or the body, its content type,
or the Accept header). The default run sends a slice of the corpus; ``-m fuzz``
sends all of it (``pytest -m fuzz tests/service/test_server_fuzz.py``).
"""

from __future__ import annotations

import re
from collections import Counter

import httpx
import pytest

from support.fixtures_kb import bio_kb  # noqa: F401 - fixture
from support.fuzz_server import corpus
from kqe_rdf.core.config import Settings
from kqe_rdf.service.app import create_app
from support.live_servers import serving

pytestmark = pytest.mark.slow  # servers, subprocesses or big inputs: not in `make test-quick`

SLICE = 150
FULL = 1500
#: Words that name what was wrong when it is not a parameter.
NOT_A_PARAMETER = ("request body", "JSON", "content type", "Content-Type", "application/", "Accept", "UTF-8")


@pytest.fixture(scope="module")
def server(bio_kb):  # noqa: F811
    with serving(create_app(bio_kb, Settings(server_query_timeout=20))) as url:
        yield url


def problems(url: str, cases) -> tuple[Counter, list[str]]:
    """Status counts, and a line for every answer that breaks a rule."""
    statuses, found = Counter(), []
    with httpx.Client(base_url=url, timeout=60) as http:
        for case in cases:
            response = http.request(**case.request)
            statuses[response.status_code] += 1
            text = response.text
            if response.status_code >= 500:
                found.append(f"{case.name}: {response.status_code} {text[:200]!r}")
            elif "Traceback" in text or 'File "' in text:
                found.append(f"{case.name}: a trace in {text[:200]!r}")
            elif response.status_code >= 400:
                named = "parameter '" in text \
                    or any(re.search(rf"'{re.escape(p)}'", text) for p in case.parameters if p.strip()) \
                    or any(word.lower() in text.lower() for word in NOT_A_PARAMETER)
                if not named:
                    found.append(f"{case.name}: {response.status_code} names no parameter: {text[:200]!r}")
    return statuses, found


def test_a_slice_of_the_corpus_gets_readable_answers(server):
    statuses, found = problems(server, corpus(SLICE))
    assert not found, "\n".join(found)
    assert sum(statuses.values()) == SLICE and statuses[200] and sum(n for s, n in statuses.items() if s >= 400)


@pytest.mark.fuzz  # run only with -m fuzz (tests/conftest.py)
def test_the_whole_corpus_gets_readable_answers(server):
    statuses, found = problems(server, corpus(FULL))
    print(f"\nserver fuzz corpus: {FULL} requests, statuses {dict(sorted(statuses.items()))}, problems {len(found)}")
    assert not found, "\n".join(found[:50])
