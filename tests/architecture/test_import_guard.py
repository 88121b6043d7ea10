"""The import guard must be seen to fail: violations planted in a temporary tree are each caught."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from tests.architecture.import_graph import crossings, cycles, import_graph, upward_imports
from tests.architecture.test_imports import LAYERS, RETRIEVAL_LAYERS, SEED_APIS


def plant(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text), encoding="utf-8")
    return root


CLEAN = {
    "retrieval/__init__.py": "",
    "retrieval/core/__init__.py": (
        "from retrieval.core.rrf import rrf_scores\nfrom retrieval.core.tokenize import tokenize\n"
    ),
    "retrieval/core/rrf.py": "def rrf_scores(): ...\n",
    "retrieval/core/tokenize.py": "def tokenize(): ...\n",
    "retrieval/zerda/__init__.py": "from retrieval.zerda.retriever import Retriever\n",
    "retrieval/zerda/retriever.py": "from retrieval.core.tokenize import tokenize\n\nclass Retriever: ...\n",
    "retrieval/pipeline/__init__.py": "",
    "retrieval/pipeline/fusion.py": "from retrieval.core import rrf_scores\n",
    "zerda_eval/__init__.py": "",
    "zerda_eval/errors.py": "",
    "zerda_eval/config/__init__.py": "",
    "zerda_eval/checks.py": "from zerda_eval.errors import ConfigError\n",
    "zerda_eval/config/experiment.py": "from zerda_eval.systems import build_system\n",
    "zerda_eval/systems/__init__.py": "from zerda_eval.checks import check_keys\n",
}


def test_the_clean_planted_tree_passes(tmp_path):
    graph = import_graph(plant(tmp_path, CLEAN), ("retrieval", "zerda_eval"))
    assert cycles(graph) == []
    assert upward_imports(graph, LAYERS) == upward_imports(graph, RETRIEVAL_LAYERS) == []
    assert crossings(graph, SEED_APIS) == []


def test_a_cycle_through_a_package_init_fails(tmp_path):
    """Issue 33's leak: rrf.py imports a module that reads a name of ``retrieval.core`` (whose __init__
    imports rrf): ``import retrieval.core`` breaks, and the guard must say so."""
    planted = {
        "retrieval/core/rrf.py": "from retrieval.core.weights import weight\n\ndef rrf_scores(): ...\n",
        "retrieval/core/weights.py": "from retrieval.core import tokenize, rrf_scores\n\nweight = 1\n",
    }
    tree = plant(tmp_path, {**CLEAN, **planted})
    broken = subprocess.run([sys.executable, "-c", "import retrieval.core"], cwd=tree, capture_output=True, text=True)
    assert "ImportError" in broken.stderr  # the planted tree really is broken
    found = cycles(import_graph(tree, ("retrieval", "zerda_eval")))
    assert ["retrieval.core", "retrieval.core.rrf", "retrieval.core.weights"] in found


def test_a_cycle_through_another_package_init_fails(tmp_path):
    planted = {
        "retrieval/core/rrf.py": "from retrieval.pipeline.fusion import fuse\n\ndef rrf_scores(): ...\n",
        "retrieval/pipeline/fusion.py": "from retrieval.core import rrf_scores\n\nfuse = 1\n",
    }
    tree = plant(tmp_path, {**CLEAN, **planted})
    broken = subprocess.run([sys.executable, "-c", "import retrieval.core"], cwd=tree, capture_output=True, text=True)
    assert "ImportError" in broken.stderr
    found = cycles(import_graph(tree, ("retrieval",)))
    assert ["retrieval.core", "retrieval.core.rrf", "retrieval.pipeline.fusion"] in found


def test_a_cycle_through_import_module_fails(tmp_path):
    tree = plant(
        tmp_path,
        {**CLEAN, "zerda_eval/errors.py": "import importlib\n\nimportlib.import_module('zerda_eval.checks')\n"},
    )
    assert ["zerda_eval.checks", "zerda_eval.errors"] in cycles(import_graph(tree, ("zerda_eval",)))


def test_an_upward_import_fails(tmp_path):
    upward = "def f():\n    from zerda_eval.config import experiment\n"  # inside a function still counts
    tree = plant(tmp_path, {**CLEAN, "zerda_eval/checks.py": upward})
    assert ("zerda_eval.checks", "zerda_eval.config.experiment") in upward_imports(
        import_graph(tree, ("zerda_eval",)), LAYERS
    )


def test_core_importing_a_seed_api_fails(tmp_path):
    tree = plant(tmp_path, {**CLEAN, "retrieval/core/tokenize.py": "from retrieval.pipeline import fusion\n"})
    assert ("retrieval.core.tokenize", "retrieval.pipeline.fusion") in upward_imports(
        import_graph(tree, ("retrieval",)), RETRIEVAL_LAYERS
    )


def test_one_seed_api_importing_the_other_fails(tmp_path):
    tree = plant(tmp_path, {**CLEAN, "retrieval/pipeline/fusion.py": "from retrieval.zerda import Retriever\n"})
    assert ("retrieval.pipeline.fusion", "retrieval.zerda") in crossings(import_graph(tree, ("retrieval",)), SEED_APIS)
