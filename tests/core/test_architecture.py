"""The package's layers, read from its own imports: no import cycles, and imports only point down.

Every ``import`` of every module under ``kqe_rdf/`` counts, including those inside functions (a lazy
import is still a dependency). The layers, bottom up (docs/architecture.md draws them):

    core  ←  kb, llm  ←  methods  ←  service, evaluation  ←  cli, demo

and inside ``methods/``:

    retrieval, registry  ←  reading  ←  fourstep  ←  answering  ←  expansion

(the registry names methods by strings and imports them only when one is asked for). No module imports
another module's ``_private`` name: what two modules share is public where it belongs.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from support.paths import ROOT

PACKAGE = ROOT / "kqe_rdf"

#: Layer → rank; a module may import its own layer and lower ranks, never a sibling or a higher one.
LAYERS = {"core": 0, "kb": 1, "llm": 1, "methods": 2, "service": 3, "evaluation": 3}
TOP = 4  # kqe_rdf/cli.py, demo.py, __main__.py
#: Part of ``methods/`` → rank, the same way: a part never imports a higher one.
METHOD_LAYERS = {"": 0, "retrieval": 0, "registry": 0, "reading": 1, "fourstep": 2, "answering": 3,
                 "expansion": 4}

def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_names(name: str, source: str, is_package: bool = False) -> list[tuple[str, str | None]]:
    """``(module, name)`` for every import in the source of module ``name``, relative ones resolved;
    ``name`` is None for ``import module``."""
    package = name.split(".") if is_package else name.split(".")[:-1]
    out: list[tuple[str, str | None]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            out.extend((a.name, None) for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            target = ".".join(base + ([node.module] if node.module else []))
            out.extend((target, a.name) for a in node.names)
    return out


def imports_of(path: Path, modules: set[str]) -> set[str]:
    """The kqe_rdf modules one file imports, anywhere in it."""
    name = module_name(path)
    found = set()
    for target, imported in imported_names(name, path.read_text(encoding="utf-8"), path.name == "__init__.py"):
        # `from . import queries` imports a module, `from .x import f` a name of x
        found.add(f"{target}.{imported}" if f"{target}.{imported}" in modules else target)
    return {m for m in found if m in modules and m != name}


def private_imports(name: str, source: str, is_package: bool = False) -> list[str]:
    """The ``_private`` names (or modules) module ``name`` imports from another module of the package."""
    out = []
    for target, imported in imported_names(name, source, is_package):
        if target.split(".")[0] != "kqe_rdf" or target == name:
            continue
        path = target.split(".") + ([imported] if imported else [])
        if any(part.startswith("_") and not part.startswith("__") for part in path):
            out.append(f"{name}: {target}{'.' + imported if imported else ''}")
    return out


def package_private_imports() -> list[str]:
    return [found for path in sorted(PACKAGE.rglob("*.py"))
            for found in private_imports(module_name(path), path.read_text(encoding="utf-8"),
                                         path.name == "__init__.py")]


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


def method_layer(module: str) -> str | None:
    """The part of ``methods/`` a module is in ("" for the package itself), None outside it."""
    parts = module.split(".")
    if parts[:2] != ["kqe_rdf", "methods"]:
        return None
    return parts[2] if len(parts) > 2 else ""


def upward_in_methods(graph: dict[str, set[str]]) -> list[tuple[str, str]]:
    """Imports inside ``methods/`` of a higher part (:data:`METHOD_LAYERS`); a part not listed there is one."""
    def rank_in_methods(module: str) -> int:
        return METHOD_LAYERS.get(method_layer(module), len(METHOD_LAYERS))

    return sorted((a, b) for a, targets in graph.items() for b in targets
                  if method_layer(a) is not None and method_layer(b) is not None
                  and rank_in_methods(b) > rank_in_methods(a))


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


def test_methods_import_down_their_order():
    assert upward_in_methods(import_graph()) == []


def test_every_part_of_methods_has_a_place_in_the_order():
    parts = {method_layer(m) for m in import_graph()} - {None}
    assert parts - set(METHOD_LAYERS) == set()


@pytest.mark.parametrize("graph, expected", [
    ({"kqe_rdf.methods.fourstep.pipeline": {"kqe_rdf.methods.answering.evidence"}},
     [("kqe_rdf.methods.fourstep.pipeline", "kqe_rdf.methods.answering.evidence")]),
    ({"kqe_rdf.methods.retrieval": {"kqe_rdf.methods.expansion.kar"}},
     [("kqe_rdf.methods.retrieval", "kqe_rdf.methods.expansion.kar")]),
    ({"kqe_rdf.methods.expansion.kar": {"kqe_rdf.methods.answering.grounded", "kqe_rdf.methods.retrieval"},
      "kqe_rdf.methods.registry": {"kqe_rdf.methods.retrieval"}}, []),
])
def test_an_import_up_the_methods_order_is_found(graph, expected):
    assert upward_in_methods(graph) == expected


def test_no_module_imports_a_private_name_of_another():
    assert package_private_imports() == []


@pytest.mark.parametrize("name, source, expected", [
    ("kqe_rdf.service.jobs", "from .protocol import _VOLATILE, render",
     ["kqe_rdf.service.jobs: kqe_rdf.service.protocol._VOLATILE"]),
    ("kqe_rdf.methods.expansion.kar", "def f():\n    from ...kb.linking import (Linker,\n        _NEGATION)",
     ["kqe_rdf.methods.expansion.kar: kqe_rdf.kb.linking._NEGATION"]),
    ("kqe_rdf.cli", "import kqe_rdf.kb._private", ["kqe_rdf.cli: kqe_rdf.kb._private"]),
    ("kqe_rdf.kb", "from ._hidden import thing", ["kqe_rdf.kb: kqe_rdf.kb._hidden.thing"]),
    ("kqe_rdf.service.protocol", "from json.encoder import encode_basestring as _quote\nfrom . import links", []),
    ("kqe_rdf.kb.store", "from __future__ import annotations\nfrom .ontology import Schema as _Schema", []),
])
def test_an_import_of_a_private_name_is_found(name, source, expected):
    assert private_imports(name, source, is_package=name == "kqe_rdf.kb") == expected


#: The longest function the reader and the linker may hold (issue 54): a rule is read in one screen.
LONGEST_FUNCTION = 60


def long_functions(paths) -> list[tuple[str, str, int]]:
    """(file, function, lines) of every function longer than :data:`LONGEST_FUNCTION` lines in ``paths``."""
    out = []
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = node.end_lineno - node.lineno + 1
                if lines > LONGEST_FUNCTION:
                    out.append((path.name, node.name, lines))
    return out


def test_no_function_of_the_reader_or_the_linker_is_over_sixty_lines():
    reader = sorted((PACKAGE / "methods" / "reading").glob("*.py")) + [PACKAGE / "kb" / "linking.py"]
    assert long_functions(reader) == []


def test_a_long_function_is_found(tmp_path):
    source = tmp_path / "long.py"
    source.write_text("def f():\n" + "    x = 1\n" * 61)
    assert long_functions([source]) == [("long.py", "f", 62)]


def test_every_reading_rule_shows_itself_in_a_doctest_example():
    """The rules a newcomer adds to (docs/architecture.md, "A reading rule"): each mention rule in run order, each
    measure of a path's score and each reading made where no word names a relation shows what it does on a KB
    (``example_kb()``, the doctests' tiny KB in conftest.py), as Quepy writes its rules."""
    from kqe_rdf.kb.linking import Linker
    from kqe_rdf.methods.reading import ranking
    from kqe_rdf.methods.reading.offline import OfflineTriplets
    from kqe_rdf.methods.reading.paths import PathReader

    rules = [getattr(Linker, name) for name, _after_names in Linker.MENTION_RULES]
    rules += [ranking.hop_support, ranking.unread_words, ranking.hop_order, ranking.further_hop_cost,
              ranking.path_similarity, ranking.score]
    rules += [PathReader.from_graph, OfflineTriplets._guessed, OfflineTriplets._abstained]
    assert [rule.__qualname__ for rule in rules if ">>>" not in (rule.__doc__ or "")] == []
