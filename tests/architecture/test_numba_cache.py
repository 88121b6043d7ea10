"""A numba function cached on disk (``cache=True``) may call only numba functions of its own module.

Numba's disk cache is checked against the source file of the cached function alone: a callee changed in
another file leaves the cached machine code stale and it keeps running (seen in issue 35's work: an old
traversal was timed after its kernel moved). Keeping every cached kernel's callees in its own file makes
any edit invalidate the cache.
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

from numba.core.registry import CPUDispatcher

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("retrieval", "zerda_eval")


def _cached_kernel_modules() -> list[Path]:
    return sorted(
        path for package in PACKAGES for path in (ROOT / package).rglob("*.py") if "cache=True" in path.read_text()
    )


def _module_name(path: Path) -> str:
    return ".".join(path.relative_to(ROOT).with_suffix("").parts)


def foreign_numba_functions(module_name: str) -> list[str]:
    """Names a module imports from elsewhere that are numba-compiled functions."""
    module = importlib.import_module(module_name)
    tree = ast.parse(Path(module.__file__).read_text())
    imported = [
        alias.asname or alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
    ]
    return [name for name in imported if isinstance(getattr(module, name, None), CPUDispatcher)]


def test_the_project_has_disk_cached_kernels():
    names = {_module_name(path) for path in _cached_kernel_modules()}
    assert {"retrieval.core.bm25_fast", "zerda_eval.evaluation.kernel"} <= names


def test_no_disk_cached_kernel_module_imports_a_numba_function():
    found = {name: foreign_numba_functions(name) for name in map(_module_name, _cached_kernel_modules())}
    assert {name: funcs for name, funcs in found.items() if funcs} == {}


def test_the_check_sees_an_imported_numba_function(tmp_path, monkeypatch):
    (tmp_path / "kernels_a.py").write_text("import numba\n\n@numba.njit(cache=True)\ndef one():\n    return 1\n")
    (tmp_path / "kernels_b.py").write_text(
        "import numba\nfrom kernels_a import one\n\n@numba.njit(cache=True)\ndef two():\n    return one() + 1\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    assert foreign_numba_functions("kernels_b") == ["one"]
    assert foreign_numba_functions("kernels_a") == []
