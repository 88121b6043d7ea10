"""``import zerda_eval`` stays light, and our ids still reach ``ir_datasets.registry`` whichever comes first."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _python(code: str) -> str:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True, env=env)
    return done.stdout.strip()


def test_import_loads_no_heavy_library():
    loaded = _python(
        "import sys, zerda_eval\n"
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'numpy', 'pandas', 'ir_datasets', 'scipy', 'numba'}))"
    )
    assert loaded == "[]"


@pytest.mark.parametrize("order", ["import zerda_eval, ir_datasets", "import ir_datasets, zerda_eval"])
def test_registered_ids_load_after_either_import_order(order, shared_dir):
    query_id = _python(f"{order}\nprint(next(iter(ir_datasets.load('quranqa23/taskA/dev').queries_iter())).query_id)")
    first_line = (shared_dir / "datasets" / "quranqa23-taskA" / "QQA23_TaskA_dev.tsv").read_text(encoding="utf-8")
    assert query_id == first_line.split("\t", 1)[0]
