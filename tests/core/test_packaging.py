"""The built wheel works where there is no checkout: it carries the ontologies and SPARQL files.

The wheel is built from this checkout (``pip wheel``, with hatchling from the package index, a
few seconds) and installed into a new virtualenv in a temporary folder, run from a folder outside
the checkout with a minimal environment. The virtualenv borrows the dependencies already installed
for the tests (a ``.pth`` line naming this interpreter's site-packages, whose own ``.pth`` files,
among them the editable install, are not read), so the whole module takes about 15 s; a full
``pip install`` with dependencies and ``kqe-rdf demo`` (minutes, network) is in docs/benchmarks.md.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

from support.products import PRODUCTS
from support.paths import ROOT

pytestmark = pytest.mark.slow  # servers, subprocesses or big inputs: not in `make test-quick`



def clean_env(home: Path) -> dict[str, str]:
    """System directories only on PATH, no PYTHONPATH, no user site, no kqe-rdf settings from the caller."""
    keep = {k: v for k, v in os.environ.items()
            if not k.startswith(("KQE_", "OPENAI_", "PYTHON", "VIRTUAL_ENV")) and k != "PATH"}
    return {**keep, "PATH": "/usr/local/bin:/usr/bin:/bin", "PYTHONNOUSERSITE": "1", "HOME": str(home)}


def run(args: list, cwd: Path, env: dict[str, str], timeout: float = 600) -> str:
    done = subprocess.run([str(a) for a in args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, f"{args} exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
    return done.stdout


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", out, ROOT], ROOT, dict(os.environ))
    (found,) = out.glob("kqe_rdf-*.whl")
    return found


def test_the_wheel_carries_every_ontology_and_sparql_file(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    for folder in ("ontologies", "queries"):
        shipped = sorted(p.name for p in (ROOT / folder).iterdir() if p.suffix in (".ttl", ".rq", ".ru"))
        assert shipped, folder
        assert [n for n in shipped if f"kqe_rdf/{folder}/{n}" not in names] == []
    assert {"kqe_rdf/service/web/index.html", "kqe_rdf/service/web/app.js"} <= names
    assert not any(n.startswith(("tests/", "data/", "kqe_rdf/data/")) for n in names)


def new_virtualenv(folder: Path, env: dict[str, str], borrow_dependencies: bool) -> Path:
    run([sys.executable, "-m", "venv", "--without-pip", folder], folder.parent, env)
    python = folder / "bin" / "python"
    if borrow_dependencies:
        purelib = run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], folder, env).strip()
        (Path(purelib) / "borrowed-test-dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return python


def test_an_installed_wheel_runs_outside_the_checkout(wheel, tmp_path):
    env = clean_env(tmp_path)
    python = new_virtualenv(tmp_path / "venv", env, borrow_dependencies=True)
    run([sys.executable, "-m", "pip", "--python", python, "install", "--no-deps", "--quiet", wheel], tmp_path, env)
    kqe = tmp_path / "venv" / "bin" / "kqe-rdf"
    work = tmp_path / "elsewhere"
    work.mkdir()

    assert run([kqe, "--version"], work, env).strip() == "kqe-rdf, version 0.1.0"
    where = run([python, "-c", "import kqe_rdf, kqe_rdf.core.resources as r; print(kqe_rdf.__file__); "
                               "print(r.resource_dir('queries'))"], work, env).split()
    assert all(Path(p).is_relative_to(tmp_path / "venv") for p in where), where  # not the checkout

    (work / "products.jsonl").write_text(PRODUCTS, encoding="utf-8")
    run([kqe, "kb", "build", "jsonl", "products.jsonl", "--kb", "kb"], work, env)
    found = json.loads(run([kqe, "search", "travel tripod", "--kb", "kb", "--json"], work, env))
    assert found["results"][0]["name"] == "Manfrotto Befree Travel Tripod"
    # 4StepFocus reads the ontology and the reader's SPARQL files from the installed package
    found = json.loads(run([kqe, "search", "which lenses are compatible with the Nikon D500", "--kb", "kb", "--json",
                            "-m", "4step-offline", "--explain"], work, env))
    assert found["results"][0]["name"] == "Nikon AF-S 200-500mm f/5.6E Telephoto Zoom Lens"
    assert "compatibleWith" in found["explain"]["sparql"]
