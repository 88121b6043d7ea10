"""Under CI a missing ``../shared`` stops the run at collection with one line (tests/conftest.py)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT, declared_distributions


def test_ci_without_the_shared_folder_fails_at_collection_with_one_line(tmp_path: Path) -> None:
    """A copy of the repo's conftest and pyproject in a tree with no ``../shared`` beside it."""
    repo = tmp_path / "clone"
    (repo / "tests").mkdir(parents=True)
    shutil.copy(ROOT / "pyproject.toml", repo / "pyproject.toml")
    shutil.copy(ROOT / "tests" / "conftest.py", repo / "tests" / "conftest.py")
    (repo / "tests" / "test_anything.py").write_text("def test_runs():\n    pass\n", encoding="utf-8")
    env = {**os.environ, "CI": "true"}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "tests"],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == pytest.ExitCode.USAGE_ERROR, done.stdout + done.stderr
    message = [line for line in (done.stdout + done.stderr).splitlines() if "CI=true" in line]
    assert len(message) == 1 and str((tmp_path / "shared").resolve()) in message[0], done.stdout + done.stderr
    assert "1 passed" not in done.stdout  # nothing ran


def test_the_declared_dependencies_come_from_pyproject_extras() -> None:
    names = declared_distributions()
    assert {"numpy", "faiss-cpu", "dask", "pytest", "bm25s", "torch"} <= set(names)
    assert "zerda-eval" not in names


def test_ci_draws_the_same_hypothesis_examples_every_time() -> None:
    from hypothesis import settings

    from tests.conftest import ON_CI

    profile = settings.get_profile("ci")
    assert profile.derandomize and profile.deadline is None
    assert settings.default.derandomize == ON_CI  # loaded exactly when CI=true
