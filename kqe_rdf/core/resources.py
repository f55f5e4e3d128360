"""Where the ontologies and SPARQL files live, in a checkout and in a wheel.

The wheel carries ``ontologies/`` and ``queries/`` inside the package; a source
checkout keeps them at the top level, where people read and edit them.
"""

from __future__ import annotations

from pathlib import Path

_HERE = Path(__file__).resolve().parent.parent  # the kqe_rdf package


def resource_dir(name: str) -> Path:
    for candidate in (_HERE / name, _HERE.parent / name):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(f"kqe-rdf resource folder {name!r} is missing; reinstall kqe-rdf")


def ontology_path(domain: str) -> Path:
    return resource_dir("ontologies") / f"{domain}.ttl"
