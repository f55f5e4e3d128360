"""The package's layers, read from its own imports: no import cycles, and imports only point down.

Every ``import`` of every module under ``kqe_rdf/`` counts, including those inside functions (a lazy
import is still a dependency). The layers, bottom up (docs/architecture.md draws them):

    core  ←  kb, llm  ←  methods  ←  service, evaluation  ←  cli, demo
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "kqe_rdf"

#: Layer → rank; a module may import its own layer and lower ranks, never a sibling or a higher one.
LAYERS = {"core": 0, "kb": 1, "llm": 1, "methods": 2, "service": 3, "evaluation": 3}
TOP = 4  # kqe_rdf/cli.py, demo.py, __main__.py

def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(path: Path, modules: set[str]) -> set[str]:
    """The kqe_rdf modules one file imports, anywhere in it."""
    name = module_name(path)
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name in modules)
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            target = ".".join(base + ([node.module] if node.module else []))
            for alias in node.names:  # `from . import queries` imports a module, `from .x import f` a name of x
                found.add(f"{target}.{alias.name}" if f"{target}.{alias.name}" in modules else target)
    return {m for m in found if m in modules and m != name}


def import_graph() -> dict[str, set[str]]:
    files = sorted(PACKAGE.rglob("*.py"))
    modules = {module_name(f) for f in files}
    return {module_name(f): imports_of(f, modules) - {"kqe_rdf"} for f in files}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def layer(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in LAYERS else "top"


def rank(module: str) -> int:
    return LAYERS.get(layer(module), TOP)


def upward(graph: dict[str, set[str]]) -> list[tuple[str, str]]:
    """Imports of a sibling layer or a higher one."""
    return sorted((a, b) for a, targets in graph.items() for b in targets
                  if layer(a) != layer(b) and rank(b) >= rank(a))


def test_the_package_has_no_import_cycle():
    assert cycles(import_graph()) == []


def test_imports_point_down_the_layers():
    assert upward(import_graph()) == []


def test_the_walk_sees_relative_lazy_and_module_imports():
    graph = import_graph()
    assert "kqe_rdf.kb.layout" in graph["kqe_rdf.kb.knowledge_base"]  # from .layout import ...
    assert "kqe_rdf.kb.queries" in graph["kqe_rdf.kb.build"]  # from . import queries
    assert "kqe_rdf.methods.fourstep.pipeline" in graph["kqe_rdf.methods.fourstep.factory"]
    assert "kqe_rdf.service.app" in graph["kqe_rdf.cli"]  # imported inside the `serve` command


@pytest.mark.parametrize("graph, expected", [
    ({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}, [["a", "b", "c"]]),
    ({"a": {"b"}, "b": set(), "c": {"b"}}, []),
])
def test_a_cycle_is_found(graph, expected):
    assert cycles(graph) == expected


def test_an_upward_import_is_found():
    assert upward({"kqe_rdf.kb.store": {"kqe_rdf.service.app"}, "kqe_rdf.service.app": {"kqe_rdf.kb.store"},
                   "kqe_rdf.llm.client": {"kqe_rdf.kb.store"}}) == [
        ("kqe_rdf.kb.store", "kqe_rdf.service.app"), ("kqe_rdf.llm.client", "kqe_rdf.kb.store")]
