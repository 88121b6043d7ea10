"""The house has one direction: no import cycles, each layer imports only layers below it, ``retrieval``
(the reference implementations) never imports the harness, and its two seed APIs never import each other.

What counts as an import (package ``__init__`` files, ``importlib.import_module`` with a literal name):
``tests/architecture/import_graph.py``. ``test_import_guard.py`` plants violations and sees these fail.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.architecture.import_graph import crossings, cycles, import_graph, unlayered, upward_imports

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("retrieval", "zerda_eval")
# Bottom to top: a module may import its own layer and any layer below, never above. A module belongs
# to the layer of its longest matching entry. On the floor, the package's top-level helper modules that every
# layer may call: ``errors``, ``hashing``, ``ranking`` (the run type and THE tie-break), ``columnar`` (the run as
# arrays), ``checks`` (the one key checker) and ``faults`` (the test fault hook); each imports only the floor.
LAYERS = (
    (
        "zerda_eval.errors",
        "zerda_eval.hashing",
        "zerda_eval.ranking",
        "zerda_eval.columnar",
        "zerda_eval.checks",
        "zerda_eval.faults",
    ),
    ("zerda_eval.store",),
    ("zerda_eval.datasets",),
    ("zerda_eval.evaluation",),
    ("zerda_eval.systems",),
    ("zerda_eval.fusion",),
    ("zerda_eval.config",),
    ("zerda_eval.execution",),
    ("zerda_eval.analysis",),
    ("zerda_eval.report",),
    ("zerda_eval.api", "zerda_eval.inmemory"),
    ("zerda_eval.cli", "zerda_eval.__main__", "zerda_eval"),
)
# The shared core below the embedders, the embedders below the two seed APIs (zerda's vector backends
# embed); the seed APIs side by side and apart (SEED_APIS).
RETRIEVAL_LAYERS = (
    ("retrieval", "retrieval.core"),
    ("retrieval.embeddings",),
    ("retrieval.zerda", "retrieval.pipeline"),
)
SEED_APIS = ("retrieval.zerda", "retrieval.pipeline")

GRAPH = import_graph(ROOT, PACKAGES)


def test_the_graph_sees_function_level_relative_and_package_imports():
    assert "zerda_eval.datasets" in GRAPH["zerda_eval.execution.cell"]  # in a function
    assert "zerda_eval.errors" in GRAPH["zerda_eval.config.experiment"]
    # ``from retrieval.core.bm25 import ...`` outside retrieval.core runs retrieval/core/__init__.py too
    assert {"retrieval.core", "retrieval.core.tokenize"} <= GRAPH["retrieval.pipeline.sparse"]


def test_no_module_imports_a_module_that_imports_it_back():
    assert cycles(GRAPH) == []


def test_retrieval_never_imports_the_harness():
    offenders = [(m, t) for m, targets in GRAPH.items() if m.startswith("retrieval") for t in targets]
    assert [(m, t) for m, t in offenders if t.startswith("zerda_eval")] == []


@pytest.mark.parametrize(("package", "layers"), [("zerda_eval", LAYERS), ("retrieval", RETRIEVAL_LAYERS)])
def test_each_module_imports_only_its_layer_and_below(package, layers):
    assert unlayered(GRAPH, layers, package) == [], "add these modules' package to a layer"
    assert upward_imports(GRAPH, layers) == []


def test_the_two_seed_apis_never_import_each_other():
    assert crossings(GRAPH, SEED_APIS) == []
