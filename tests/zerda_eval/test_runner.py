"""The runner: files on disk, reuse by content hash, determinism, and resume after SIGKILL."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from tests.conftest import write_trec_folder
from zerda_eval.config.experiment import load_experiment
from zerda_eval.execution.runner import run_experiment
from zerda_eval.faults import FAULT_ENV
from zerda_eval.store.files import TMP_PREFIX
from zerda_eval.store.run_dir import RUN_FILE, read_trec

REPO = Path(__file__).resolve().parents[2]
DOCS = {
    "d1": "bm25 ranks documents by term frequency",
    "d2": "dense retrieval embeds queries and documents",
    "d3": "reciprocal rank fusion combines rankings",
    "d4": "term frequency saturation in bm25",
    "d5": "arabic normalisation of alef forms",
    "d6": "documents about nothing in particular",
}
QUERIES = {"q1": "bm25 term frequency", "q2": "rank fusion", "q3": "arabic alef", "q4": "zzz unknown"}
QRELS = [("q1", "d1", 2), ("q1", "d4", 1), ("q2", "d3", 1), ("q3", "d5", 1), ("q4", "d6", 1)]


def make_experiment(tmp_path: Path, n_b: int = 3) -> Path:
    data = write_trec_folder(tmp_path / "data", DOCS, QUERIES, QRELS)
    bs = ", ".join(str(round(0.1 * i, 2)) for i in range(n_b))
    config = f"""
[experiment]
name = "tiny"
output_dir = "{tmp_path / "runs"}"
cache_dir = "{tmp_path / "cache"}"
depth = 10
measures = ["ndcg@10", "mrr@10", "recall@10", "map@10", "precision@5"]

[[datasets]]
name = "tiny"
path = "{data}"
format = "trec"

[[systems]]
name = "bm25"
family = "zerda.keyword"
grid = {{ b = [{bs}] }}

[[systems]]
name = "fast"
family = "zerda.keyword"
params = {{ engine = "fast" }}

[[systems]]
name = "sparse"
family = "pipeline.sparse"

[[fusions]]
name = "rrf"
inputs = ["fast", "sparse"]
method = "rrf"
"""
    path = tmp_path / "tiny.toml"
    path.write_text(config, encoding="utf-8")
    return path


def run_files(output_dir: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(output_dir)): p.read_bytes()
        for p in sorted((output_dir / "cells").rglob("*"))
        if p.is_file() and p.name != "result.json"
    }


def by_label(output_dir: Path) -> dict[str, tuple[bytes, bytes]]:
    cells = {}
    for result in (output_dir / "cells").glob("*/result.json"):
        label = json.loads(result.read_text())["system"]
        cells[label] = (
            (result.parent / RUN_FILE).read_bytes(),
            (result.parent / "per_query.csv").read_bytes(),
        )
    return cells


def test_run_writes_cells_reuses_them_and_is_deterministic(tmp_path):
    experiment = load_experiment(make_experiment(tmp_path))
    table = run_experiment(experiment, progress=False)
    out = experiment.output_dir
    assert len(table) == len(experiment.cells) == 6
    for cell in experiment.cells:
        assert {p.name for p in (out / "cells" / cell.cell_id).iterdir()} == {
            RUN_FILE,
            "per_query.csv",
            "result.json",
        }
    assert (out / "results.parquet").is_file() and (out / "per_query.parquet").is_file()
    # q1's relevant docs d1 (grade 2) and d4 are the only docs with both query terms: BM25 puts them first.
    fast = next(c for c in experiment.cells if c.label == "fast")
    assert [d for d, _ in read_trec(out / "cells" / fast.cell_id / RUN_FILE)["q1"][:2]] in (
        ["d1", "d4"],
        ["d4", "d1"],
    )
    # pipeline.sparse returns nothing for q4 (no shared term): it still counts in the mean, with 0.
    assert table.loc[table.system == "sparse", "recall@10"].item() == pytest.approx(3 / 4)
    before = run_files(out)
    reused = []
    run_experiment(experiment, progress=False, on_cell=lambda r: reused.append(r.reused))
    assert all(reused)
    forced = []
    run_experiment(experiment, force=True, progress=False, on_cell=lambda r: forced.append(r.reused))
    assert not any(forced)
    assert run_files(out) == before


def test_each_system_cell_records_the_cpu_it_ran_on(tmp_path):
    """Model name and the kernel-choosing features (AMX, AVX-512 bf16, VNNI, ...), as ``lscpu`` reports them."""
    from zerda_eval.execution.machine import KERNEL_FEATURES
    from zerda_eval.store.run_dir import load_result

    lines = dict(
        line.split(":", 1)
        for line in subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout.splitlines()
    )
    flags = set(lines["Flags"].split())
    experiment = load_experiment(make_experiment(tmp_path, n_b=1))
    run_experiment(experiment, progress=False)
    for cell in experiment.cells:
        if cell.kind == "system":
            recorded = load_result(experiment.output_dir, cell.cell_id)["stats"]["cpu"]
            assert recorded["model"] == lines["Model name"].strip()
            assert recorded["features"] == [name for name in KERNEL_FEATURES if name in flags]


def test_changed_config_never_reuses_a_stale_run(tmp_path):
    path = make_experiment(tmp_path)
    first = load_experiment(path)
    run_experiment(first, progress=False)
    path.write_text(path.read_text().replace('params = { engine = "fast" }', 'params = { engine = "fast", k1 = 0.9 }'))
    second = load_experiment(path)
    reused = {}
    run_experiment(second, progress=False, on_cell=lambda r: reused.__setitem__(r.cell_id, r.reused))
    changed = {c.cell_id for c in second.cells} - {c.cell_id for c in first.cells}
    assert changed and not any(reused[c] for c in changed)  # fast and the fusion of it are recomputed


def test_a_run_dir_is_held_by_one_grid_at_a_time_and_another_started_meanwhile_is_refused(tmp_path):
    """Two files of one experiment name and output_dir, started together: the second may not rewrite
    experiment.json and the tables under the first (they listed 1 cell and held 6); once the first ends it may."""
    from zerda_eval.errors import ConfigError

    first = load_experiment(make_experiment(tmp_path, n_b=3))
    other = tmp_path / "other.toml"
    other.write_text((tmp_path / "tiny.toml").read_text().replace("b = [0.0, 0.1, 0.2]", "b = [0.5]"))
    second = load_experiment(other)
    assert second.output_dir == first.output_dir and second.config_hash != first.config_hash
    refused: list[str] = []

    def start_the_second(outcome) -> None:
        if not refused:
            with pytest.raises(ConfigError) as error:
                run_experiment(second, progress=False)
            refused.append(str(error.value))

    run_experiment(first, progress=False, on_cell=start_the_second)
    assert "is in use by a run of another grid (running-" in refused[0] and "\n" not in refused[0]
    assert "experiment 'tiny' would rewrite its experiment.json" in refused[0]
    out = first.output_dir
    listed = json.loads((out / "experiment.json").read_text(encoding="utf-8"))["cells"]
    held = pd.read_csv(out / "results.csv")["cell_id"].astype(str).tolist()
    assert listed == [c.cell_id for c in first.every_cell] and sorted(held) == sorted(listed)
    run_experiment(second, progress=False)  # the first has finished: the directory is free
    listed = json.loads((out / "experiment.json").read_text(encoding="utf-8"))["cells"]
    assert listed == [c.cell_id for c in second.every_cell]
    assert sorted(pd.read_csv(out / "results.csv")["cell_id"].astype(str)) == sorted(listed)


def test_concurrent_runs_of_one_grid_share_its_run_dir(tmp_path):
    experiment = load_experiment(make_experiment(tmp_path))
    inner: list[pd.DataFrame] = []

    def run_it_again(outcome) -> None:
        if not inner:
            inner.append(run_experiment(experiment, progress=False))

    run_experiment(experiment, progress=False, on_cell=run_it_again)
    assert len(inner[0]) == len(experiment.cells)


@pytest.mark.slow
def test_sigkill_mid_grid_then_resume_equals_an_uninterrupted_run(tmp_path):
    killed_dir, clean_dir = tmp_path / "killed", tmp_path / "clean"
    killed_dir.mkdir(), clean_dir.mkdir()
    killed_cfg, clean_cfg = make_experiment(killed_dir, n_b=10), make_experiment(clean_dir, n_b=10)
    command = [sys.executable, "-m", "zerda_eval", "run", "--no-report"]
    env = {key: value for key, value in os.environ.items() if key != FAULT_ENV} | {"PYTHONPATH": str(REPO)}
    # SIGKILL from the process itself once its fifth cell (of 13) is written: mid-grid, every time.
    killed = subprocess.run(
        [*command, str(killed_cfg)], cwd=killed_dir, env={**env, FAULT_ENV: "kill-after-cell:5"}, capture_output=True
    )
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    assert len(list((killed_dir / "runs" / "cells").glob("*/result.json"))) == 5
    assert not (killed_dir / "runs" / "results.csv").exists()  # killed before the grid's tables
    for cfg, cwd in ((killed_cfg, killed_dir), (clean_cfg, clean_dir)):
        subprocess.run([*command, str(cfg)], cwd=cwd, env=env, check=True, capture_output=True)
    # The two data folders differ by path, hence by cell id: compare cells by their label.
    killed, clean = by_label(killed_dir / "runs"), by_label(clean_dir / "runs")
    assert killed.keys() == clean.keys() and len(killed) == 13
    assert sum(1 for _ in (killed_dir / "runs" / "cells").rglob("*")) == 13 * 4  # 13 dirs, 3 files each
    assert killed == clean
    assert not list((killed_dir / "runs").rglob(f"{TMP_PREFIX}*"))
    tables = [pd.read_csv(d / "runs" / "results.csv") for d in (killed_dir, clean_dir)]
    columns = [
        "dataset",
        "system",
        "family",
        "params",
        "ndcg@10",
        "mrr@10",
        "recall@10",
        "map@10",
        "precision@5",
    ]
    pd.testing.assert_frame_equal(tables[0][columns], tables[1][columns])


RERUN = """
import json, sys
from zerda_eval.execution.runner import run_experiment
from zerda_eval.config.experiment import load_experiment
reused = []
run_experiment(load_experiment(sys.argv[1]), progress=False, on_cell=lambda r: reused.append(r.reused))
loaded = [m for m in ("ranx", "zerda_eval.evaluation.kernel") if m in sys.modules]
print(json.dumps({"reused": reused, "loaded": loaded}))
"""


@pytest.mark.slow
def test_a_fully_cached_rerun_loads_no_evaluation_code(tmp_path):
    """A rerun that reuses every cell evaluates nothing: neither ranx nor the measure kernel is loaded."""
    path = make_experiment(tmp_path)
    run_experiment(load_experiment(path), progress=False)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-c", RERUN, str(path)], env=env, capture_output=True, text=True, check=True)
    outcome = json.loads(done.stdout.strip().splitlines()[-1])
    assert outcome["reused"] and all(outcome["reused"])
    assert outcome["loaded"] == []
