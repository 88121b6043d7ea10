"""zerda-eval: an evaluation and benchmarking harness for hybrid retrieval, English and Arabic.

The public API (loaded on first use, so ``import zerda_eval`` stays light)::

    Experiment       an experiment from TOML or a dict; .run() -> Results
    Results          a run directory's tables, runs, comparisons and report
    describe_systems every system family and fusion method with its parameters
    list_datasets    the bundled datasets
    load_collection  a test collection by ir_datasets id or folder
    fuse_runs        fuse runs ({qid: [(doc_id, score), ...]}) with any fusion method

The in-memory calls of ranx and ir_measures users (``zerda_eval.inmemory``, the grid's own code)::

    evaluate         measures of a run against qrels (dicts or ranx objects), means or per query
    compare          runs against a baseline: tests, correction, tables (markdown, LaTeX, HTML)
    fuse             fuse runs with any fusion method
    optimize_fusion  a fusion's parameters by held-out grid search (k folds)
    read_run, write_run, read_qrels, write_qrels   TREC, ranx JSON and Parquet files
    ZerdaEvalError   the base of every one-line error the harness raises

After ``import zerda_eval``, ``ir_datasets.load("quranqa23/taskA/dev")`` works: our collections are
registered with ``ir_datasets`` when it is imported (at once if it already is), not by this import, which
stays light (numpy, pandas and ir_datasets load on first use). When ir_datasets' cache folder cannot be
used, the first use of ``zerda_eval.datasets`` raises its one-line ``DatasetError`` (the CLI shows it).

When this process is the ``zerda-eval`` command, a Ctrl-C during start-up (these imports take a
second or more) is held until ``cli.main`` asks ``startup_interrupted()``, which turns it into the
CLI's one-line "interrupted" exit instead of a traceback from inside an import.
"""

__version__ = "0.1.0"

import importlib
import importlib.abc
import importlib.util
import itertools
import os
import signal
import sys
import threading
from contextlib import suppress
from typing import Any

_startup_interrupts: list[int] = []


def _hold_interrupt(signum: int, frame: Any) -> None:
    _startup_interrupts.append(signum)


def _started_as_cli() -> bool:
    """True when this process is the ``zerda-eval`` console script or ``python -m zerda_eval``."""
    argv = getattr(sys, "orig_argv", sys.argv)
    return os.path.basename(sys.argv[0]).startswith("zerda-eval") or any(
        flag == "-m" and module == "zerda_eval" for flag, module in itertools.pairwise(argv)
    )


def startup_interrupted() -> bool:
    """Give Ctrl-C back to Python (``KeyboardInterrupt``) and say whether one came during start-up."""
    if signal.getsignal(signal.SIGINT) is _hold_interrupt:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    return bool(_startup_interrupts)


if _started_as_cli() and threading.current_thread() is threading.main_thread():
    signal.signal(signal.SIGINT, _hold_interrupt)

from zerda_eval.errors import DatasetError, ZerdaEvalError  # noqa: E402
from zerda_eval.faults import fault_point  # noqa: E402

fault_point("at-startup")  # tests: ZERDA_EVAL_FAULT=interrupt-at-startup


def _register_datasets() -> None:
    """Import ``zerda_eval.datasets``, which registers our ids with ``ir_datasets.registry``."""
    with suppress(DatasetError):
        importlib.import_module("zerda_eval.datasets")


class _RegisterAfterImport(importlib.abc.MetaPathFinder):
    """Registers our datasets right after the first ``import ir_datasets``, then leaves ``sys.meta_path``."""

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        if fullname != "ir_datasets":
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(fullname)
        if spec is None or spec.loader is None:
            return spec
        execute = spec.loader.exec_module

        def exec_module(module: Any) -> None:
            execute(module)
            sys.modules[fullname] = module  # the import system sets it after exec_module: registration needs it
            _register_datasets()

        spec.loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


if "ir_datasets" in sys.modules:
    _register_datasets()
elif not any(isinstance(finder, _RegisterAfterImport) for finder in sys.meta_path):
    sys.meta_path.insert(0, _RegisterAfterImport())

_PUBLIC = {
    "Experiment": "zerda_eval.api",
    "Results": "zerda_eval.api",
    "describe_systems": "zerda_eval.api",
    "list_datasets": "zerda_eval.datasets",
    "load_collection": "zerda_eval.datasets",
    "fuse_runs": "zerda_eval.fusion",
    **dict.fromkeys(
        ("evaluate", "compare", "fuse", "optimize_fusion", "read_run", "write_run", "read_qrels", "write_qrels"),
        "zerda_eval.inmemory",
    ),
}

__all__ = [*_PUBLIC, "ZerdaEvalError", "__version__"]


def __getattr__(name: str) -> Any:
    """``zerda_eval.Experiment`` and the rest of the public API, imported when first used (PEP 562)."""
    if name in _PUBLIC:
        return getattr(importlib.import_module(_PUBLIC[name]), name)
    raise AttributeError(f"module 'zerda_eval' has no attribute {name!r}")
