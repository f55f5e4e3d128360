"""bench/scale.py keeps the KBs it builds, and times requests on them again, stage by stage, without a build."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from support.paths import ROOT

pytestmark = pytest.mark.slow  # servers, subprocesses or big inputs: not in `make test-quick`



def scale(*options: str) -> str:
    """``python bench/scale.py --sizes 1000 --no-doc OPTIONS``'s output (a KB of about 1,000 edges)."""
    return subprocess.run([sys.executable, str(ROOT / "bench" / "scale.py"), "--sizes", "1000", "--no-doc", *options],
                          capture_output=True, text=True, cwd=ROOT, check=True).stdout


@pytest.mark.slow
def test_kept_kbs_are_timed_again_stage_by_stage_without_a_build(tmp_path):
    kept = tmp_path / "kbs"
    built = scale("--keep", str(kept))
    manifest = kept / "kb-1000" / "manifest.json"
    assert manifest.is_file() and (kept / "kb-1000" / "embeddings" / "index.json").is_file()
    assert "build_kb s" in built
    stamp = manifest.stat().st_mtime_ns

    again = scale("--reuse", str(kept), "--stages", "--rankings", str(tmp_path / "top"))
    assert manifest.stat().st_mtime_ns == stamp and "build_kb s" not in again
    assert "4step-offline p50 / p95 ms" in again
    for line in ("reading (mentions, relation paths)", "result rendering (names)",
                 "floor: tantivy search (bm25 requests)", "floor: ONNX encoder alone"):
        assert line in again
    tops = json.loads((tmp_path / "top" / "1000.json").read_text())
    assert len(tops["top10"]["bm25"]) == len(tops["requests"]["bm25"]) == 200
    assert all(len(top) <= 10 for top in tops["top10"]["4step-offline"])


def test_reusing_kbs_that_were_never_kept_says_how_to_keep_them(tmp_path):
    with pytest.raises(subprocess.CalledProcessError) as failed:
        scale("--reuse", str(tmp_path))
    assert "--keep" in failed.value.stderr
