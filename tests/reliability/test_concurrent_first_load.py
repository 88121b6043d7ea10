"""Several processes loading one dataset into an EMPTY ir_datasets cache at once (a fresh machine, Dask
workers, two `zerda-eval run` side by side) must all get the whole collection.

Seen on a fresh machine: two quickstarts started together both built ir_datasets' SciFact docstore in
the same folder, leaving one that repeats documents (`duplicate doc id '4983'`) for every later run.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

LOAD = (
    "from zerda_eval.datasets import load_collection;"
    "c = load_collection('beir/scifact/test');"
    "print(len(c.doc_ids), len(set(c.doc_ids)), len(c.queries))"
)


@pytest.mark.slow  # four processes build SciFact's docstore: about 10 s on 2 cores
def test_processes_building_one_cache_at_once_all_load_the_whole_collection(tmp_path, shared_dir):
    env = {**os.environ, "IR_DATASETS_HOME": str(tmp_path / "irds")}
    processes = [
        subprocess.Popen(
            [sys.executable, "-c", LOAD], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        for _ in range(4)
    ]
    outcomes = [process.communicate(timeout=300) for process in processes]
    for process, (out, err) in zip(processes, outcomes, strict=True):
        assert process.returncode == 0, err[-2000:]
        assert out.split() == ["5183", "5183", "300"]
    rerun = subprocess.run([sys.executable, "-c", LOAD], env=env, capture_output=True, text=True, timeout=300)
    assert rerun.stdout.split() == ["5183", "5183", "300"], rerun.stderr[-2000:]
