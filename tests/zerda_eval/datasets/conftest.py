"""Fixtures for the dataset tests: the shared data folder, and a private ir_datasets cache.

ir_datasets fixes its cache folder when it is imported, so the private ``IR_DATASETS_HOME`` is set
here, before any test module imports it (when another test already did, the seeding still follows
ir_datasets' own folder: ``paths.ir_datasets_home`` asks it).
"""

from __future__ import annotations

import atexit
import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

if "ir_datasets" not in sys.modules:
    _home = tempfile.mkdtemp(prefix="zerda-irds-home-")
    atexit.register(shutil.rmtree, _home, True)
    os.environ["IR_DATASETS_HOME"] = _home


@pytest.fixture(scope="session")
def shared(shared_dir: Path) -> Path:
    """The bundled original files, ``<repo>/../shared/datasets`` (``shared_dir``: tests/conftest.py)."""
    return (shared_dir / "datasets").resolve()
