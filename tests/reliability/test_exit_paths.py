"""Every way a run can end says so in one line with a non-zero exit code, never a traceback (issue 32):
non-finite numbers anywhere in the experiment, a non-mapping given to ``Experiment.from_dict``,
Ctrl-C at any moment (start-up included), a stdout that cannot encode a label, a grid too large to
expand, and a stdout whose reader went away (``| head``)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from tests.reliability.harness import (
    RUN_AND_PER_QUERY,
    assert_no_partial_output,
    assert_one_line_error,
    experiment_toml,
    write_beir,
)
from zerda_eval import Experiment
from zerda_eval.errors import ConfigError

TWO = [{"name": "a", "family": "zerda.keyword"}, {"name": "b", "family": "zerda.keyword", "params": {"b": 0.3}}]
NON_FINITE = {
    # case: (systems, fusions, experiment overrides, extra TOML, fragments of the line)
    "grid-nan": (
        [{"name": "bm25", "family": "zerda.keyword", "grid": {"b": ["nan", 0.5]}}],
        None,
        None,
        "",
        ["b", "nan"],
    ),
    "grid-inf": ([{"name": "bm25", "family": "zerda.keyword", "grid": {"k1": ["inf"]}}], None, None, "", ["k1", "inf"]),
    "grid-list-nan": ([{"name": "bm25", "family": "zerda.keyword", "grid": [{"b": "nan"}]}], None, None, "", ["b"]),
    "fusion-grid-nan": (
        TWO,
        [{"name": "f", "inputs": ["a", "b"], "method": "rrf", "grid": {"k": ["nan"]}}],
        None,
        "",
        ["k"],
    ),
    "python-options-inf": (
        [
            {
                "name": "x",
                "family": "python",
                "params": {"object": "collections:Counter", "version": "1", "options": {"a": "-inf"}},
            }
        ],
        None,
        None,
        "",
        ["options", "-inf"],
    ),
    "compare-alpha-nan": (None, None, None, '\n[compare]\nbaseline = "bm25"\nalpha = nan\n', ["alpha", "nan"]),
    "study-nan": (None, None, None, "\n[study.rrf_order]\nsystem = nan\n", ["system", "nan"]),
}


@pytest.mark.parametrize("case", list(NON_FINITE))
def test_a_non_finite_number_anywhere_is_one_line_naming_its_key(case, cli, tmp_path):
    systems, fusions, experiment, extra, fragments = NON_FINITE[case]
    config = experiment_toml(tmp_path, systems=systems, fusions=fusions, experiment=experiment)
    text = config.read_text(encoding="utf-8") + extra
    for value in ("-inf", "inf", "nan"):
        text = text.replace(f'"{value}"', value)
    config.write_text(text, encoding="utf-8")
    line = assert_one_line_error(cli("run", config), "experiment.toml", *fragments)
    assert "finite" in line
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("mapping", [None, [1, 2], "experiment.toml", 3.5, math.nan])
def test_from_dict_of_a_non_mapping_is_a_config_error(mapping):
    with pytest.raises(ConfigError, match=r"Experiment\.from_dict: .*mapping"):
        Experiment.from_dict(mapping)


def test_from_dict_with_systems_not_a_mapping_is_a_config_error():
    with pytest.raises(ConfigError, match=r"Experiment\.from_dict: systems= takes a mapping"):
        Experiment.from_dict({"experiment": {"name": "x"}}, systems=[object()])


def test_from_dict_with_nan_names_the_key(tmp_path):
    folder = write_beir(tmp_path / "c")
    mapping = {
        "experiment": {"name": "p", "output_dir": str(tmp_path / "out")},
        "datasets": [{"path": str(folder)}],
        "systems": [{"name": "bm25", "family": "zerda.keyword", "grid": {"b": [0.5, math.inf]}}],
    }
    with pytest.raises(ConfigError, match=r"systems\[0\]\.grid\.b\[1\].*inf.*finite"):
        Experiment.from_dict(mapping)
    assert_no_partial_output(tmp_path / "out")


# --- Ctrl-C at any moment, and a crash: driven by the fault hook ZERDA_EVAL_FAULT ---------------------

GRID = [{"name": "bm25", "family": "zerda.keyword", "grid": {"b": [0.2, 0.4, 0.6, 0.8]}}]


def files_by_label(output_dir) -> dict[str, bytes]:
    """Each cell's run and per-query files keyed by its system label (cell ids cover the data's path)."""
    import json

    files = {}
    for cell in (output_dir / "cells").iterdir():
        label = json.loads((cell / "result.json").read_text(encoding="utf-8"))["system"]
        files.update({f"{label}/{name}": (cell / name).read_bytes() for name in RUN_AND_PER_QUERY})
    return files


def zerda_eval_process(tmp_path, *args: str, fault: str | None = None, **env_extra: str):
    """``python -m zerda_eval ARGS`` in ``tmp_path`` (private ir_datasets cache), with a fault hook."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    from tests.reliability.harness import CliResult

    repo = Path(__file__).resolve().parents[2]
    env = {**os.environ, "IR_DATASETS_HOME": str(tmp_path / "irds"), "PYTHONPATH": str(repo), **env_extra}
    env.pop("ZERDA_EVAL_FAULT", None)
    if fault:
        env["ZERDA_EVAL_FAULT"] = fault
    done = subprocess.run(
        [sys.executable, "-m", "zerda_eval", *args], cwd=tmp_path, env=env, capture_output=True, timeout=600
    )
    return CliResult(done.returncode, done.stdout.decode("utf-8", "replace"), done.stderr.decode("utf-8", "replace"))


def test_ctrl_c_during_start_up_is_exit_130_in_one_line(tmp_path):
    config = experiment_toml(tmp_path, systems=GRID)
    result = zerda_eval_process(tmp_path, "run", str(config), fault="interrupt-at-startup")
    assert result.code == 130, result.err
    assert "Traceback" not in result.err and len(result.messages) == 1, result.err
    assert "interrupted" in result.messages[0] and "rerun to resume" in result.messages[0]
    assert not (tmp_path / "out").exists()


def run_reference(folder: Path) -> None:
    """The grid run to the end, uninterrupted, in ``folder`` (what a resumed run must equal)."""
    folder.mkdir()
    reference = zerda_eval_process(folder, "run", str(experiment_toml(folder, systems=GRID)))
    assert reference.code == 0, reference.err


@pytest.mark.slow
def test_ctrl_c_after_two_cells_keeps_them_and_the_rerun_resumes(tmp_path):
    from tests.reliability.harness import results_without_timing

    run_reference(tmp_path / "ref")
    config = experiment_toml(tmp_path, systems=GRID)
    result = zerda_eval_process(tmp_path, "run", str(config), fault="interrupt-after-cell:2")
    assert result.code == 130, result.err
    assert "Traceback" not in result.err and len(result.messages) == 1, result.err
    assert result.messages[0] == "zerda-eval: interrupted: 2 cells kept; rerun to resume"
    assert_no_partial_output(tmp_path / "out")
    kept = {p: p.stat().st_mtime_ns for p in (tmp_path / "out" / "cells").glob("*/result.json")}
    assert len(kept) == 2
    resumed = zerda_eval_process(tmp_path, "run", str(config))
    assert resumed.code == 0, resumed.err
    assert all(path.stat().st_mtime_ns == mtime for path, mtime in kept.items()), "kept cells were redone"
    assert files_by_label(tmp_path / "out") == files_by_label(tmp_path / "ref" / "out")
    assert len(results_without_timing(tmp_path / "out")) == len(GRID[0]["grid"]["b"])


@pytest.mark.slow
def test_a_crash_after_a_cell_resumes_to_the_same_numbers(tmp_path):
    run_reference(tmp_path / "ref")
    config = experiment_toml(tmp_path, systems=GRID)
    crashed = zerda_eval_process(tmp_path, "run", str(config), fault="kill-after-cell:1")
    assert crashed.code == -9, crashed.err  # SIGKILL: no handler ran
    assert len(list((tmp_path / "out" / "cells").glob("*/result.json"))) == 1
    resumed = zerda_eval_process(tmp_path, "run", str(config))
    assert resumed.code == 0, resumed.err
    assert_no_partial_output(tmp_path / "out")
    assert files_by_label(tmp_path / "out") == files_by_label(tmp_path / "ref" / "out")


# --- a stdout that cannot encode a label ---------------------------------------------------------------

ARABIC_NAME = "مجموعة-صغيرة"


def test_an_ascii_stdout_prints_an_arabic_dataset_name_escaped_and_finishes(tmp_path):
    folder = write_beir(tmp_path / "collection")
    config = experiment_toml(tmp_path, datasets=[{"path": str(folder), "name": ARABIC_NAME}])
    result = zerda_eval_process(tmp_path, "run", str(config), PYTHONIOENCODING="ascii")
    assert result.code == 0, result.err
    assert "Traceback" not in result.err
    assert ARABIC_NAME.encode("ascii", "backslashreplace").decode() in result.out  # shown, escaped
    assert (tmp_path / "reports" / "reliability" / "report.md").is_file()
    assert ARABIC_NAME in (tmp_path / "reports" / "reliability" / "report.md").read_text(encoding="utf-8")


def test_an_ascii_stderr_shows_an_error_naming_an_arabic_label_in_one_line(tmp_path):
    folder = write_beir(tmp_path / "collection")
    config = experiment_toml(tmp_path, datasets=[{"path": str(folder), "name": ARABIC_NAME}])
    result = zerda_eval_process(tmp_path, "run", str(config), "--only", "نظام", PYTHONIOENCODING="ascii")
    line = assert_one_line_error(result, "--only")
    assert "\\u0646" in line  # the label, escaped


# --- a grid too large to expand --------------------------------------------------------------------------


def test_a_million_cell_grid_is_refused_within_a_second_naming_the_count_and_the_axes(cli, tmp_path):
    import time

    from zerda_eval.config.experiment import DEFAULT_MAX_CELLS

    k1 = [round(0.01 * i, 2) for i in range(1, 1001)]
    b = [round(0.001 * i, 3) for i in range(1000)]
    config = experiment_toml(
        tmp_path, systems=[{"name": "bm25", "family": "zerda.keyword", "grid": {"k1": k1, "b": b}}]
    )
    start = time.perf_counter()
    result = cli("run", config)
    elapsed = time.perf_counter() - start
    line = assert_one_line_error(result, "experiment.toml", "1000000 cells", "k1", "1000", "b", "max_cells")
    assert str(DEFAULT_MAX_CELLS) in line
    assert elapsed < 1.0, elapsed
    assert not (tmp_path / "out").exists()


def test_max_cells_raises_the_limit_for_a_grid_that_needs_it(tmp_path):
    b = [round(0.1 * i, 1) for i in range(11)]
    systems = [{"name": "bm25", "family": "zerda.keyword", "grid": {"b": b}}]
    with pytest.raises(ConfigError, match="11 cells"):
        Experiment.from_toml(experiment_toml(tmp_path, systems=systems, experiment={"max_cells": 10}))
    assert (
        len(Experiment.from_toml(experiment_toml(tmp_path, systems=systems, experiment={"max_cells": 11})).cells) == 11
    )


# --- a stdout whose reader went away -----------------------------------------------------------------------


@pytest.mark.slow
def test_a_closed_stdout_loses_the_output_not_the_work_nor_the_report(tmp_path):
    import os
    import subprocess
    import sys
    from pathlib import Path

    from tests.reliability.harness import CliResult

    repo = Path(__file__).resolve().parents[2]
    config = experiment_toml(tmp_path, systems=GRID)
    env = {**os.environ, "IR_DATASETS_HOME": str(tmp_path / "irds"), "PYTHONPATH": str(repo)}
    env.pop("ZERDA_EVAL_FAULT", None)
    read, write = os.pipe()
    os.close(read)  # the reader is gone before anything is printed, as after `| head -0`
    done = subprocess.run(
        [sys.executable, "-m", "zerda_eval", "run", str(config)],
        cwd=tmp_path,
        env=env,
        stdout=write,
        stderr=subprocess.PIPE,
        text=True,
        timeout=600,
    )
    os.close(write)
    assert "Traceback" not in done.stderr and "BrokenPipe" not in done.stderr, done.stderr
    assert not CliResult(done.returncode, "", done.stderr).messages, done.stderr
    assert done.returncode == 141  # the output was lost (as Unix tools say it), nothing else
    assert len(list((tmp_path / "out" / "cells").glob("*/result.json"))) == len(GRID[0]["grid"]["b"])
    assert (tmp_path / "out" / "results.csv").is_file()
    assert (tmp_path / "reports" / "reliability" / "report.md").is_file()  # the work went on to the end
    assert_no_partial_output(tmp_path / "out")
