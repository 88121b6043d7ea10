"""The house has one direction: no import cycles, each layer imports only layers below it, and
``retrieval`` (the reference implementations) never imports the harness.

Every ``import`` statement counts, also inside functions and ``if TYPE_CHECKING:`` blocks: a cycle
hidden in a function is still a cycle in the design. ``from package import name`` is an edge to the
submodule ``name`` when there is one, else to the package. Importing a submodule runs its parent
packages' ``__init__`` too; those implicit edges are left out (a package may re-export its modules).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("retrieval", "zerda_eval")
# Bottom to top: a module may import its own layer and any layer below, never above. A module belongs
# to the layer of its longest matching name (``evaluation.ranking``, the run type and tie-break that the
# run store writes, sits at the bottom; the rest of ``evaluation`` above ``datasets``).
LAYERS = (
    ("zerda_eval.errors", "zerda_eval.hashing", "zerda_eval.evaluation.ranking"),
    ("zerda_eval.store",),
    ("zerda_eval.datasets",),
    ("zerda_eval.evaluation",),
    ("zerda_eval.systems",),
    ("zerda_eval.fusion",),
    ("zerda_eval.spec",),
    ("zerda_eval.execution",),
    ("zerda_eval.analysis",),
    ("zerda_eval.report",),
    ("zerda_eval.api", "zerda_eval.inmemory"),
    ("zerda_eval.cli", "zerda_eval.__main__", "zerda_eval"),
)


def module_files() -> dict[str, Path]:
    modules = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            modules[name] = path
    return modules


MODULES = module_files()


def is_package(name: str) -> bool:
    return MODULES.get(name, Path()).name == "__init__.py"


def edges_of(name: str) -> set[str]:
    """The modules of ours that module ``name`` imports, anywhere in its code."""
    tree = ast.parse(MODULES[name].read_text(encoding="utf-8"))
    package = name if is_package(name) else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1] + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            for alias in node.names:
                found.add(f"{base}.{alias.name}" if f"{base}.{alias.name}" in MODULES else base)
    return {module for module in found if module in MODULES and module != name}


GRAPH = {name: edges_of(name) for name in MODULES}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph[node]):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
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

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def layer_of(name: str) -> int:
    matches = [
        (len(prefix), level)
        for level, prefixes in enumerate(LAYERS)
        for prefix in prefixes
        if name == prefix or (prefix != "zerda_eval" and name.startswith(prefix + "."))
    ]
    assert matches, f"{name} belongs to no layer of LAYERS: add its package"
    return max(matches)[1]


def test_the_graph_sees_function_level_and_relative_imports():
    assert "zerda_eval.datasets" in GRAPH["zerda_eval.execution.cell"]  # in a function
    assert "zerda_eval.errors" in GRAPH["zerda_eval.spec.experiment"]


def test_cycle_finder_finds_a_planted_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_module_imports_a_module_that_imports_it_back():
    assert cycles(GRAPH) == []


def test_retrieval_never_imports_the_harness():
    offenders = [(m, t) for m, targets in GRAPH.items() if m.startswith("retrieval") for t in targets]
    assert [(m, t) for m, t in offenders if t.startswith("zerda_eval")] == []


@pytest.mark.parametrize("module", sorted(m for m in MODULES if m.startswith("zerda_eval")))
def test_each_module_imports_only_its_layer_and_below(module):
    upward = [t for t in GRAPH[module] if t.startswith("zerda_eval") and layer_of(t) > layer_of(module)]
    assert upward == [], f"{module} (layer {layer_of(module)}) imports a higher layer"
