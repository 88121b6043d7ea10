"""The data a cell read is the data its id names (issue 32, items 4 and 5).

A cell id covers the SHA-256 of the dataset's files as they were when the experiment was read. A file
edited after that (between cells of one grid, or while it is being read) must never give a cell
computed from the edited bytes under the old id: the run stops with one line naming the file, keeps
the cells already finished, and the next run computes on the new data under new ids. An ir_datasets
cache copy seeded from the bundled files is checked against them before use.
"""

from __future__ import annotations

import pytest

from tests.reliability.harness import assert_one_line_error, experiment_toml, write_beir
from zerda_eval import Experiment
from zerda_eval.errors import DatasetError
from zerda_eval.execution.runner import run_experiment
from zerda_eval.store.run_dir import cell_dir, load_result

TWO_SYSTEMS = [
    {"name": "bm25", "family": "zerda.keyword"},
    {"name": "bm25_b", "family": "zerda.keyword", "params": {"b": 0.3}},
]


def _edit_qrels(folder):
    qrels = folder / "qrels" / "test.tsv"
    qrels.write_text(qrels.read_text(encoding="utf-8").replace("q3\td5\t2", "q3\td8\t2"), encoding="utf-8")


def test_qrels_edited_after_the_experiment_was_read_are_refused_not_stored_under_the_old_id(cli, tmp_path):
    folder = write_beir(tmp_path / "collection")
    config = experiment_toml(tmp_path, datasets=[{"path": str(folder), "name": "tiny"}])
    experiment = Experiment.from_toml(config)
    old_id = experiment.spec.cells[0].cell_id
    _edit_qrels(folder)
    with pytest.raises(DatasetError, match=r"qrels.*changed since the experiment was read"):
        experiment.run(progress=False)
    assert not cell_dir(experiment.output_dir, old_id).exists()
    # a new run reads the new file: a new id, numbers of the edited judgements
    result = cli("run", config, "--no-report")
    assert result.code == 0, result.err
    new_id = Experiment.from_toml(config).spec.cells[0].cell_id
    assert new_id != old_id and load_result(tmp_path / "out", new_id) is not None


def test_a_file_edited_between_two_cells_stops_the_grid_and_keeps_the_finished_cell(tmp_path):
    folder = write_beir(tmp_path / "collection")
    config = experiment_toml(tmp_path, datasets=[{"path": str(folder), "name": "tiny"}], systems=TWO_SYSTEMS)
    spec = Experiment.from_toml(config).spec
    first, second = (cell.cell_id for cell in spec.cells)
    with pytest.raises(DatasetError, match=r"test\.tsv.*changed since the experiment was read"):
        run_experiment(spec, progress=False, on_cell=lambda outcome: _edit_qrels(folder))
    assert load_result(spec.output_dir, first) is not None  # computed on the original data: kept
    assert not cell_dir(spec.output_dir, second).exists()  # never computed on the edited data


def test_a_file_edited_while_it_is_read_is_not_used(tmp_path, monkeypatch):
    from zerda_eval.datasets import loader

    folder = write_beir(tmp_path / "collection")
    config = experiment_toml(tmp_path, datasets=[{"path": str(folder), "name": "tiny"}])
    experiment = Experiment.from_toml(config)
    original = loader.load_user_collection

    def read_then_edit(*args, **kwargs):  # the edit lands after the bytes were read, before they are used
        collection = original(*args, **kwargs)
        _edit_qrels(folder)
        return collection

    monkeypatch.setattr(loader, "load_user_collection", read_then_edit)
    with pytest.raises(DatasetError, match=r"test\.tsv.*changed while"):
        experiment.run(progress=False)
    assert not (experiment.output_dir / "cells").exists() or not any((experiment.output_dir / "cells").iterdir())


def test_the_cli_says_it_in_one_line(cli, tmp_path, monkeypatch):
    folder = write_beir(tmp_path / "collection")
    config = experiment_toml(tmp_path, datasets=[{"path": str(folder), "name": "tiny"}])
    from zerda_eval import api

    loaded = api.Experiment.from_toml

    def load_then_edit(path):
        experiment = loaded(path)
        _edit_qrels(folder)
        return experiment

    monkeypatch.setattr(api.Experiment, "from_toml", staticmethod(load_then_edit))
    assert_one_line_error(cli("run", config, "--no-report"), "test.tsv", "changed", "rerun")


# --- 5. the ir_datasets cache copy of a bundled dataset ---------------------------------------------


def _cranfield_run(tmp_path, *extra: str):
    import subprocess
    import sys
    from pathlib import Path

    from tests.reliability.harness import CliResult

    repo = Path(__file__).resolve().parents[2]
    config = experiment_toml(tmp_path, datasets=[{"id": "cranfield", "max_queries": 20}])
    env = {**__import__("os").environ, "IR_DATASETS_HOME": str(tmp_path / "irds"), "PYTHONPATH": str(repo)}
    done = subprocess.run(
        [sys.executable, "-m", "zerda_eval", "run", str(config), "--no-report", *extra],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    return CliResult(done.returncode, done.stdout, done.stderr)


@pytest.mark.slow
@pytest.mark.parametrize("damaged", ["qrels.txt", "docs.pklz4/bin"])
def test_a_damaged_ir_datasets_cache_copy_is_rebuilt_from_the_bundled_files_and_said(tmp_path, damaged):
    from tests.reliability.harness import cell_files

    first = _cranfield_run(tmp_path)
    assert first.code == 0, first.err
    reference = cell_files(tmp_path / "out")
    path = tmp_path / "irds" / "cranfield" / damaged
    data = bytearray(path.read_bytes())
    if damaged == "qrels.txt":  # every judgement of query 1 becomes a judgement of query 2
        data = bytearray(bytes(data).replace(b"\n1 ", b"\n2 "))
    else:
        data[len(data) // 2 : len(data) // 2 + 64] = b"\0" * 64
    path.write_bytes(bytes(data))
    again = _cranfield_run(tmp_path, "--force")
    assert again.code == 0, again.err
    warnings = [line for line in again.messages if "warning" in line]
    assert len(warnings) == 1 and "cranfield" in warnings[0] and "rebuilt" in warnings[0], again.err
    assert damaged.split("/")[0] in warnings[0]
    assert cell_files(tmp_path / "out") == reference  # the same numbers, from the bundled data
