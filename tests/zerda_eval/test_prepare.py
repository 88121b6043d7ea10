"""``zerda-eval prepare``: after it, a cold run of the same experiment compiles no kernel and exports no model,
and prepare itself stores nothing of the run (no run directory, no cache_dir)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # two processes; numba compiles every kernel from an empty cache (~30 s)

EXPERIMENT = """
[experiment]
name = "prep"
measures = ["ndcg@10"]
cache_dir = "cache"

[[datasets]]
id = "xquad/ar"
max_queries = 20

[[systems]]
name = "bm25"
family = "zerda.keyword"
params = { engine = "fast" }

[[systems]]
name = "dense"
family = "pipeline.dense"
params = { embedder = "e5-small", precision = "int8" }

[[fusions]]
name = "rrf"
inputs = ["bm25", "dense"]
method = "rrf"
"""


def _cli(args: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    done = subprocess.run([sys.executable, "-m", "zerda_eval", *args], cwd=cwd, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    return done


def test_after_prepare_a_cold_run_compiles_and_exports_nothing(tmp_path):
    root = Path(__file__).resolve().parents[2]
    (tmp_path / "prep.toml").write_text(EXPERIMENT, encoding="utf-8")
    models, kernels = tmp_path / "models", tmp_path / "numba"
    env = {
        **os.environ,
        "PYTHONPATH": str(root),
        "ZERDA_MODEL_CACHE": str(models),
        "NUMBA_CACHE_DIR": str(kernels),
        "NUMBA_DEBUG_CACHE": "1",  # numba says each kernel it compiles and saves ("data saved to ...")
        "TQDM_DISABLE": "1",
    }
    prepared = _cli(["prepare", "prep.toml"], tmp_path, env)
    assert "prepared: datasets" in prepared.stdout and "data saved" in prepared.stdout
    assert [path.name for path in models.iterdir() if path.is_dir() and "int8w" in path.name]  # e5's int8 file
    assert not (tmp_path / "runs").exists() and not (tmp_path / "cache").exists()  # nothing of the run
    exports = sorted(path.name for path in models.iterdir())
    ran = _cli(["run", "prep.toml", "--no-report"], tmp_path, env)
    compiled = [line for line in (ran.stdout + ran.stderr).splitlines() if "data saved" in line]
    assert compiled == []  # every kernel the run called was in numba's cache already
    assert sorted(path.name for path in models.iterdir()) == exports  # and every model file stored
    assert "xquad/ar" in ran.stdout and "dense" in ran.stdout and "rrf" in ran.stdout  # the fusion kernel too
