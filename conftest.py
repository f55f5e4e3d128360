"""The namespace of the doctest examples in ``kqe_rdf/`` (``--doctest-modules``): ``example_kb()``, a tiny real KB
built on first use, once per session. Its nodes are the ones the reader's rules are shown on: a person written
short ("Niels Bohr"), a term with a broader name people use ("big head"), a name with no article ("Blood in
urine"), films whose titles are near-misses or common words ("Gran Torino", "Her"), who directed them and who
wrote one.
The tests' own fixtures are in tests/conftest.py and tests/support/."""

from __future__ import annotations

import functools

import pytest

EXAMPLE_KB = """\
{"kind": "node", "id": "bohr", "type": "Person", "name": "Niels Henrik David Bohr"}
{"kind": "node", "id": "eastwood", "type": "Person", "name": "Clint Eastwood"}
{"kind": "node", "id": "jonze", "type": "Person", "name": "Spike Jonze"}
{"kind": "node", "id": "macrocephaly", "type": "Phenotype", "name": "Macrocephaly", "broader_aliases": ["Big head"]}
{"kind": "node", "id": "hematuria", "type": "Phenotype", "name": "Blood in urine"}
{"kind": "node", "id": "torino", "type": "Film", "name": "Gran Torino"}
{"kind": "node", "id": "her", "type": "Film", "name": "Her"}
{"kind": "edge", "head": "torino", "relation": "directedBy", "tail": "eastwood"}
{"kind": "edge", "head": "her", "relation": "directedBy", "tail": "jonze"}
{"kind": "edge", "head": "her", "relation": "writtenBy", "tail": "jonze"}
"""


@pytest.fixture(autouse=True)
def _doctest_examples(doctest_namespace, tmp_path_factory):
    @functools.cache
    def example_kb():
        from kqe_rdf.kb.build import build_kb
        from kqe_rdf.kb.importers.jsonl import JsonlImporter
        from kqe_rdf.kb.knowledge_base import KnowledgeBase

        folder = tmp_path_factory.mktemp("example")
        (folder / "kb.jsonl").write_text(EXAMPLE_KB, encoding="utf-8")
        build_kb(JsonlImporter([folder / "kb.jsonl"]), folder / "kb")
        return KnowledgeBase.open(folder / "kb")

    doctest_namespace.setdefault("example_kb", example_kb)
