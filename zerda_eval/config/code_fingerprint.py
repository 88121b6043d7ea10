"""What a cell's numbers depend on in our own code: a hash of the source of the modules it executes.

A cell id covers the package version and this fingerprint (``config``), so a change to a scorer,
tokenizer or measure invalidates the cells computed with it, and only those (issue 16; PyTerrier's
issue 304 is the failure it prevents). The modules of a cell are found statically: starting from its
family's module (``zerda_eval.systems.<...>``) or ``zerda_eval.fusion.methods``, plus the modules every cell
runs (``EVERY_CELL``: loading, protocol rules, evaluation), every ``import`` / ``from ... import``
into ``retrieval`` or ``zerda_eval`` is followed, including imports inside functions (heavy libraries
are imported there) and leaving out ``if TYPE_CHECKING:`` blocks. ``from package import name`` is
followed to the module that defines ``name``, not to the whole package. The granularity is the
module: editing one family's module invalidates every family defined in it.

Computed once per process (memoised per root module and per module source).
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
from functools import cache
from pathlib import Path

from zerda_eval.hashing import bytes_sha256, content_hash

OURS = ("retrieval", "zerda_eval")
# Run by every cell besides its family or fusion: the cell's own steps (its imports of families and of
# the run store are not followed: they do not change numbers), loading, protocol rules, measures.
EVERY_CELL = (
    "zerda_eval.ranking",
    "zerda_eval.evaluation.measures",
    "zerda_eval.evaluation.tie_aware",
    "zerda_eval.datasets.loader",
    "zerda_eval.datasets.protocols",
)
LEAVES = ("zerda_eval.execution.cell",)
# Never followed nor hashed: they compute no number (file writing, validation, messages); what the
# config resolves (defaults, conventions) is in the cell config itself.
NOT_FOLLOWED = (
    "zerda_eval.store.files",
    "zerda_eval.config.experiment",
    "zerda_eval.errors",
    "zerda_eval.config.code_fingerprint",
    *LEAVES,
)


def code_fingerprint(root: str) -> str:
    """SHA-256 of the sources of every module a cell rooted at module ``root`` executes."""
    return _fingerprint(root)


@cache
def _fingerprint(root: str) -> str:
    modules = set(LEAVES)
    for start in (root, *EVERY_CELL):
        modules |= modules_of(start)
    return content_hash({name: bytes_sha256(module_source(name)) for name in sorted(modules)})


def clear_memo() -> None:
    """Forget the fingerprints and sources computed so far (tests that edit a source in memory)."""
    _fingerprint.cache_clear()
    modules_of.cache_clear()
    _source.cache_clear()


@cache
def modules_of(root: str) -> frozenset[str]:
    """``root`` and every module of ``OURS`` it imports, transitively."""
    seen: set[str] = set()
    stack = [root]
    while stack:
        name = stack.pop()
        if name in seen or not _ours(name) or (name in NOT_FOLLOWED and name != root):
            continue
        seen.add(name)
        stack.extend(_imports(name))
    return frozenset(seen)


def module_source(name: str) -> bytes:
    """The source bytes of module ``name`` (read once per process)."""
    return _source(name)


@cache
def _source(name: str) -> bytes:
    spec = importlib.util.find_spec(name)
    if spec is None or spec.origin is None:
        return b""
    return Path(spec.origin).read_bytes()


def _ours(name: str) -> bool:
    return name.split(".")[0] in OURS


def _imports(name: str) -> list[str]:
    """The modules of ``OURS`` that module ``name`` imports (at any depth of its code, but TYPE_CHECKING)."""
    tree = ast.parse(module_source(name))
    package = name if _is_package(name) else name.rpartition(".")[0]
    found: list[str] = []
    for node in _walk(tree):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = _absolute(node, package)
            if _ours(base):
                found += [_defining_module(base, alias.name) for alias in node.names]
    return found


def _walk(node: ast.AST):
    """``ast.walk`` without the bodies of ``if TYPE_CHECKING:`` (imports that never run)."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
            yield from (n for orelse in child.orelse for n in [orelse, *_walk(orelse)])
            continue
        yield child
        yield from _walk(child)


def _absolute(node: ast.ImportFrom, package: str) -> str:
    if not node.level:
        return node.module or ""
    parts = package.split(".")
    base = ".".join(parts[: len(parts) - node.level + 1])
    return f"{base}.{node.module}" if node.module else base


def _defining_module(base: str, attribute: str) -> str:
    """The module ``from base import attribute`` really reads: a submodule, or where the object is defined."""
    candidate = f"{base}.{attribute}"
    if importlib.util.find_spec(base) is not None and _is_package(base) and importlib.util.find_spec(candidate):
        return candidate
    value = getattr(importlib.import_module(base), attribute, None)
    defined_in = getattr(value, "__module__", None)
    return defined_in if isinstance(defined_in, str) and _ours(defined_in) else base


def _is_package(name: str) -> bool:
    spec = importlib.util.find_spec(name)
    return spec is not None and spec.submodule_search_locations is not None
