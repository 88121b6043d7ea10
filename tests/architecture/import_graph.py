"""The import graph of a source tree, and the house's rules on it (used by test_imports.py).

An edge ``a -> b`` means running module ``a`` may run module ``b``. Every ``import`` statement counts,
also inside functions and ``if TYPE_CHECKING:`` blocks: a cycle hidden in a function is still a cycle in
the design. ``from package import name`` is an edge to the submodule ``name`` when there is one, else to
the package. Importing ``a.b.c`` runs the ``__init__`` of ``a`` and ``a.b`` first: those are edges too,
except to the importer's own enclosing packages (already running when it runs), unless it reads a name
that package's ``__init__`` defines. A call ``importlib.import_module("a.b")`` with a string literal is an
edge to ``a.b``; a computed name (a registry of plug-ins) is not followed.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping
from pathlib import Path

Graph = dict[str, set[str]]


def module_files(root: Path, packages: Iterable[str]) -> dict[str, Path]:
    """Dotted module name -> file, for every ``.py`` file of ``packages`` under ``root``."""
    modules = {}
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            parts = path.relative_to(root).with_suffix("").parts
            modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return modules


def enclosing_packages(name: str) -> list[str]:
    """``a.b.c`` -> ``["a", "a.b"]``."""
    parts = name.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts))]


def is_import_module_call(node: ast.AST) -> bool:
    if not isinstance(node, ast.Call):
        return False
    func = node.func
    return (isinstance(func, ast.Attribute) and func.attr == "import_module") or (
        isinstance(func, ast.Name) and func.id == "import_module"
    )


def named_imports(name: str, modules: Mapping[str, Path]) -> set[str]:
    """The dotted names module ``name`` imports by statement or by ``import_module``."""
    tree = ast.parse(modules[name].read_text(encoding="utf-8"))
    package = name if modules[name].name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1] + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            submodules = {f"{base}.{alias.name}" for alias in node.names} & set(modules)
            found |= submodules
            if len(submodules) < len(node.names):  # a name defined by the module or package itself
                found.add(base)
        elif is_import_module_call(node) and node.args:
            argument = node.args[0]
            if isinstance(argument, ast.Constant) and isinstance(argument.value, str):
                found.add(argument.value)
    return found


def edges_of(name: str, modules: Mapping[str, Path]) -> set[str]:
    """The modules of ours that running module ``name`` may run, package ``__init__`` files included."""
    own_packages = set(enclosing_packages(name))
    found = set()
    for target in named_imports(name, modules):
        found |= {target, *(p for p in enclosing_packages(target) if p not in own_packages)}
    return {module for module in found if module in modules and module != name}


def import_graph(root: Path, packages: Iterable[str]) -> Graph:
    modules = module_files(root, packages)
    return {name: edges_of(name, modules) for name in modules}


def cycles(graph: Mapping[str, set[str]]) -> list[list[str]]:
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


def layer_of(name: str, layers: tuple[tuple[str, ...], ...]) -> int | None:
    """The index of the layer of ``name``'s longest matching entry; None when no layer names it.

    An entry ``a.b`` names ``a.b`` and every module below it; ``a.b.__init__`` names only the package's
    ``__init__`` (a package whose ``__init__`` imports nothing can sit below its modules); a top-level
    package's bare name names only its ``__init__``.
    """
    matches = [
        (len(entry), level)
        for level, entries in enumerate(layers)
        for entry in entries
        if name == entry.removesuffix(".__init__")
        or ("." in entry and not entry.endswith(".__init__") and name.startswith(entry + "."))
    ]
    return max(matches)[1] if matches else None


def upward_imports(graph: Mapping[str, set[str]], layers: tuple[tuple[str, ...], ...]) -> list[tuple[str, str]]:
    """(module, target) pairs where a module imports a module of a higher layer of ``layers``."""
    found = []
    for module, targets in sorted(graph.items()):
        own = layer_of(module, layers)
        if own is None:
            continue
        for target in sorted(targets):
            level = layer_of(target, layers)
            if level is not None and level > own:
                found.append((module, target))
    return found


def unlayered(graph: Mapping[str, set[str]], layers: tuple[tuple[str, ...], ...], package: str) -> list[str]:
    """Modules of ``package`` that no layer names (each must belong to one)."""
    return sorted(m for m in graph if (m == package or m.startswith(package + ".")) and layer_of(m, layers) is None)


def crossings(graph: Mapping[str, set[str]], apart: Iterable[str]) -> list[tuple[str, str]]:
    """(module, target) pairs where one package of ``apart`` imports another of them."""
    packages = list(apart)

    def owner(name: str) -> str | None:
        return next((p for p in packages if name == p or name.startswith(p + ".")), None)

    return [
        (module, target)
        for module, targets in sorted(graph.items())
        for target in sorted(targets)
        if owner(module) and owner(target) and owner(module) != owner(target)
    ]
