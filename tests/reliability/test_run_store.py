"""The run store cannot be silently wrong (issue 17, points 1, 6, 7, 9, 11, 12, 13; issue 16's --only and build cost).

Each case damages a finished run directory (or races it, or starves it) the way a user, a crash or a
second process does, then checks what the next ``zerda-eval run`` does: repair the damage on its own
(recompute the cell, with one warning line naming it) and end byte-identical to an undamaged run.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from tests.reliability.harness import (
    CliResult,
    assert_no_partial_output,
    assert_one_line_error,
    cell_files,
    experiment_toml,
    read_per_query,
    results_without_timing,
    write_beir,
)
from zerda_eval.hashing import content_hash
from zerda_eval.store.run_dir import PER_QUERY_FILE, RUN_FILE

REPO = Path(__file__).resolve().parents[2]
SYSTEMS = [
    {"name": "bm25", "family": "zerda.keyword", "params": {"engine": "fast"}},
    {"name": "sparse", "family": "pipeline.sparse"},
]
FUSIONS = [{"name": "rrf", "inputs": ["bm25", "sparse"], "method": "rrf"}]


def setup_run(cli, tmp_path: Path) -> tuple[Path, Path, dict[str, Path]]:
    """A finished three-cell run (two systems and their fusion); returns config, output dir, cells by label."""
    config = experiment_toml(tmp_path, systems=SYSTEMS, fusions=FUSIONS)
    first = cli("run", config, "--no-report")
    assert first.code == 0, first.err
    out = tmp_path / "out"
    return config, out, cells_by_label(out)


def cells_by_label(out: Path) -> dict[str, Path]:
    cells = {}
    for result in (out / "cells").glob("*/result.json"):
        cells[json.loads(result.read_text(encoding="utf-8"))["system"]] = result.parent
    return cells


def warnings_of(result: CliResult) -> list[str]:
    return [line for line in result.messages if "warning" in line.lower()]


def assert_repaired(cli, config: Path, out: Path, before: dict, rows: list, label: str) -> None:
    again = cli("run", config, "--no-report")
    assert again.code == 0, again.err
    assert "Traceback" not in again.err
    shown = warnings_of(again)
    assert len(shown) == 1 and label in shown[0], again.err
    assert cell_files(out) == before
    assert results_without_timing(out) == rows
    assert_no_partial_output(out)


# --- 1. a damaged finished cell is never reused -----------------------------------------------------


@pytest.mark.parametrize("name", [PER_QUERY_FILE, RUN_FILE])
def test_truncated_cell_file_is_recomputed_with_one_warning(name, cli, tmp_path):
    config, out, cells = setup_run(cli, tmp_path)
    before, rows = cell_files(out), results_without_timing(out)
    path = cells["bm25"] / name
    path.write_bytes(path.read_bytes()[: len(path.read_bytes()) // 2])
    assert_repaired(cli, config, out, before, rows, "bm25")


def test_a_byte_changed_in_the_run_gzip_is_recomputed_with_one_warning(cli, tmp_path):
    config, out, cells = setup_run(cli, tmp_path)
    before, rows = cell_files(out), results_without_timing(out)
    path = cells["sparse"] / RUN_FILE
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))
    assert_repaired(cli, config, out, before, rows, "sparse")


def test_a_cell_written_by_the_older_version_is_recomputed_with_one_warning(cli, tmp_path):
    """The previous version stored ``run.trec`` (plain) and sealed it; such a cell, intact, is not reused as
    if this version had written it: one warning naming it, then the cell as this version writes it."""
    config, out, cells = setup_run(cli, tmp_path)
    before, rows = cell_files(out), results_without_timing(out)
    cell = cells["bm25"]
    with gzip.open(cell / RUN_FILE, "rb") as handle:
        (cell / "run.trec").write_bytes(handle.read())
    (cell / RUN_FILE).unlink()
    result = json.loads((cell / "result.json").read_text(encoding="utf-8"))
    old_files = ("run.trec", PER_QUERY_FILE)
    result["files"] = {name: hashlib.sha256((cell / name).read_bytes()).hexdigest() for name in old_files}
    result.pop("checksum")
    result["checksum"] = content_hash(result)
    (cell / "result.json").write_text(json.dumps(result, indent=2, sort_keys=True), encoding="utf-8")
    again = cli("run", config, "--no-report")
    assert again.code == 0, again.err
    shown = warnings_of(again)
    assert len(shown) == 1 and "bm25" in shown[0] and "older version" in shown[0], again.err
    assert cell_files(out) == before and results_without_timing(out) == rows
    assert not (cell / "run.trec").exists()  # the old file is gone with the old cell


def test_hand_edited_mean_in_result_json_is_recomputed(cli, tmp_path):
    config, out, cells = setup_run(cli, tmp_path)
    before, rows = cell_files(out), results_without_timing(out)
    path = cells["sparse"] / "result.json"
    result = json.loads(path.read_text(encoding="utf-8"))
    result["means"]["ndcg@10"] = 0.999
    path.write_text(json.dumps(result, indent=2, sort_keys=True), encoding="utf-8")
    assert_repaired(cli, config, out, before, rows, "sparse")
    assert json.loads(path.read_text(encoding="utf-8"))["means"]["ndcg@10"] != 0.999


def test_result_json_records_a_checksum_of_each_file(cli, tmp_path):
    import hashlib

    _, _, cells = setup_run(cli, tmp_path)
    for cell in cells.values():
        files = json.loads((cell / "result.json").read_text(encoding="utf-8"))["files"]
        assert set(files) == {RUN_FILE, PER_QUERY_FILE}
        for name, digest in files.items():
            assert digest == hashlib.sha256((cell / name).read_bytes()).hexdigest(), (cell, name)


# --- 12. any damage to the run directory is repaired by the next run --------------------------------


def _empty(cell: Path, name: str) -> None:
    (cell / name).write_bytes(b"")


def _delete(cell: Path, name: str) -> None:
    (cell / name).unlink()


DAMAGE = {
    "emptied-per-query": ("bm25", lambda cell: _empty(cell, "per_query.csv")),
    "deleted-per-query": ("bm25", lambda cell: _delete(cell, "per_query.csv")),
    "deleted-fusion-input-run": ("sparse", lambda cell: _delete(cell, RUN_FILE)),
    "result-json-empty-object": ("bm25", lambda cell: (cell / "result.json").write_text("{}")),
    "result-json-a-list": ("sparse", lambda cell: (cell / "result.json").write_text("[1, 2]")),
    "result-json-not-json": ("rrf", lambda cell: (cell / "result.json").write_bytes(b"\x00garbage")),
}


@pytest.mark.parametrize("case", list(DAMAGE))
def test_damaged_cell_is_repaired_by_the_next_run(case, cli, tmp_path):
    config, out, cells = setup_run(cli, tmp_path)
    before, rows = cell_files(out), results_without_timing(out)
    label, damage = DAMAGE[case]
    damage(cells[label])
    assert_repaired(cli, config, out, before, rows, label)


@pytest.mark.parametrize("name", ["results.parquet", "per_query.parquet", "results.csv", "experiment.json"])
def test_damaged_experiment_file_is_rewritten_by_the_next_run(name, cli, tmp_path):
    config, out, _ = setup_run(cli, tmp_path)
    before, rows = cell_files(out), results_without_timing(out)
    table = pd.read_parquet(out / "results.parquet")
    (out / name).write_bytes(b"PAR1 garbage, not a table")
    again = cli("run", config, "--no-report")
    assert again.code == 0 and not again.messages, again.err
    assert cell_files(out) == before and results_without_timing(out) == rows
    pd.testing.assert_frame_equal(
        pd.read_parquet(out / "results.parquet").drop(columns=TIMING), table.drop(columns=TIMING)
    )


TIMING = ["index_time_s", "index_build_s", "latency_mean_ms", "latency_p50_ms", "latency_p95_ms", "latency_p99_ms"]
TIMING += ["qps", "peak_rss_increment_mb"]


@pytest.mark.parametrize("name", ["results.parquet", "per_query.parquet", "experiment.json"])
def test_report_of_a_damaged_run_dir_is_one_line_naming_the_file(name, cli, tmp_path):
    _, out, _ = setup_run(cli, tmp_path)
    (out / name).write_bytes(b"garbage")
    line = assert_one_line_error(cli("report", out, "--out", tmp_path / "rep"), name)
    assert "zerda-eval run" in line, line


# --- 11. ids that CSV and TREC files must survive ---------------------------------------------------


def test_query_ids_with_commas_and_quotes_round_trip(cli, tmp_path):
    queries = {'"q1': "fennec fox ears", "q,2": "water in the desert oasis", "NA": "why are desert nights cold"}
    qrels = {'"q1': {"d6": 2, "d1": 1}, "q,2": {"d3": 2, "d7": 1, "d2": 1}, "NA": {"d5": 2}}
    folder = write_beir(tmp_path / "collection", queries=queries, qrels=qrels)
    datasets = [{"path": str(folder), "format": "beir", "name": "tiny"}]
    config = experiment_toml(tmp_path, datasets=datasets, systems=SYSTEMS[:1])
    assert cli("run", config, "--no-report").code == 0
    out = tmp_path / "out"
    cell = next((out / "cells").iterdir())
    assert {qid for qid, _ in read_per_query(cell)} == set(queries)
    long = pd.read_parquet(out / "per_query.parquet")
    assert set(long["query_id"]) == set(queries)
    again = cli("run", config)  # reused, and the report reads it back
    assert again.code == 0 and not warnings_of(again), again.err


@pytest.mark.parametrize(
    ("kind", "docs", "queries", "culprit"),
    [
        ("query", None, {"q1": "fennec", "q 2": "oasis", "q3": "nights"}, "'q 2'"),
        ("query", None, {"q1": "fennec", "q2\t": "oasis", "q3": "nights"}, "'q2\\t'"),
        ("doc", {"d1": "fennec fox", "d 2": "oasis water", "d3": "cold nights"}, None, "'d 2'"),
    ],
)
def test_ids_with_whitespace_are_rejected_at_load(kind, docs, queries, culprit, cli, tmp_path):
    docs = docs or {"d1": "fennec fox", "d2": "oasis water", "d3": "cold nights"}
    queries = queries or {"q1": "fennec", "q2": "oasis", "q3": "nights"}
    qrels = {q: {next(iter(docs)): 1} for q in queries}
    folder = write_beir(tmp_path / "collection", docs=docs, queries=queries, qrels=qrels)
    datasets = [{"path": str(folder), "format": "beir", "name": "tiny"}]
    line = assert_one_line_error(cli("run", experiment_toml(tmp_path, datasets=datasets)), culprit, "whitespace")
    assert ("corpus.jsonl" if kind == "doc" else "queries.jsonl") in line, line
    assert_no_partial_output(tmp_path / "out")


# --- issue 16: a partial run never shrinks what is on disk; build cost apart from this run's time ----


def test_only_one_system_keeps_every_finished_row(cli, tmp_path):
    config, out, _cells = setup_run(cli, tmp_path)
    rows = results_without_timing(out)
    assert len(rows) == 3
    again = cli("run", config, "--only", "sparse")
    assert again.code == 0, again.err
    assert results_without_timing(out) == rows
    assert len(pd.read_parquet(out / "per_query.parquet")["cell_id"].unique()) == 3


def test_index_build_cost_is_recorded_with_the_cache_entry(cli, tmp_path):
    _, _, cells = setup_run(cli, tmp_path)
    entries = list((tmp_path / "cache" / "bm25").glob("*/entry.json"))
    assert len(entries) == 1
    entry = json.loads(entries[0].read_text(encoding="utf-8"))
    built = json.loads((cells["bm25"] / "result.json").read_text(encoding="utf-8"))["efficiency"]
    assert built["index_build_s"] >= entry["build_s"] > 0
    # A later run reads the entry: its wall time is the load, its build cost the recorded one.
    entry["build_s"] = 1000.0  # stand-in for an expensive build (the metadata is not part of the checksums)
    entries[0].write_text(json.dumps(entry), encoding="utf-8")
    fresh = tmp_path / "second"
    fresh.mkdir()
    second = experiment_toml(fresh, systems=SYSTEMS, fusions=FUSIONS, experiment={"cache_dir": str(tmp_path / "cache")})
    assert cli("run", second, "--no-report").code == 0
    efficiency = json.loads(next(cells_by_label(fresh / "out")["bm25"].glob("result.json")).read_text())["efficiency"]
    assert efficiency["index_build_s"] >= 1000.0 > efficiency["index_time_s"]
    table = pd.read_csv(fresh / "out" / "results.csv")
    assert list(table.columns).index("index_build_s") == list(table.columns).index("index_time_s") + 1
    fusion = table.loc[table.system == "rrf"].iloc[0]
    assert fusion["index_build_s"] == pytest.approx(table.loc[table.system != "rrf", "index_build_s"].sum())


# --- 6. concurrent runs of one experiment on one run directory --------------------------------------


def zerda_eval_process(args: list[str], cwd: Path) -> subprocess.Popen:
    env = {**os.environ, "IR_DATASETS_HOME": str(cwd / "ir_datasets"), "PYTHONPATH": str(REPO)}
    command = [sys.executable, "-m", "zerda_eval", *args]
    return subprocess.Popen(command, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


@pytest.mark.slow  # 4 + 8 interpreters on a toy collection
@pytest.mark.parametrize("n_runs", [4, 8])
def test_concurrent_runs_finish_with_identical_results(n_runs, cli, tmp_path):
    grid = [{**SYSTEMS[0], "grid": {"b": [0.2, 0.4, 0.6, 0.8]}}, SYSTEMS[1]]
    reference = tmp_path / "reference"
    reference.mkdir()
    folder = write_beir(tmp_path / "collection")
    datasets = [{"path": str(folder), "format": "beir", "name": "tiny"}]
    assert cli("run", experiment_toml(reference, datasets=datasets, systems=grid), "--no-report").code == 0
    shared = tmp_path / "shared"
    shared.mkdir()
    config = experiment_toml(shared, datasets=datasets, systems=grid)
    runs = [zerda_eval_process(["run", str(config), "--no-report"], shared) for _ in range(n_runs)]
    for run in runs:
        _, err = run.communicate(timeout=600)
        assert run.returncode == 0, err[-3000:]
        assert "Traceback" not in err
    assert cell_files(shared / "out") == cell_files(reference / "out")
    assert results_without_timing(shared / "out") == results_without_timing(reference / "out")
    assert_no_partial_output(shared / "out")


def test_start_up_clean_up_spares_temporary_files_of_live_processes(tmp_path):
    from zerda_eval.store.files import remove_temp_files, temp_prefix

    cell = tmp_path / "cells" / "abc"
    cell.mkdir(parents=True)
    mine = cell / f"{temp_prefix()}x1"
    mine.write_text("being written")
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    orphan = cell / temp_prefix().replace(str(os.getpid()), dead.stdout.strip())
    orphan = orphan.with_name(orphan.name + "x2")
    orphan.write_text("left by a killed run")
    remove_temp_files(tmp_path)
    assert mine.exists() and not orphan.exists()


def test_a_failed_write_never_deletes_a_finished_cell(cli, tmp_path, monkeypatch):
    import errno

    config, out, _ = setup_run(cli, tmp_path)
    before = cell_files(out)
    real_replace = os.replace

    def full(src, dst, *args, **kwargs):
        if Path(dst).name == "per_query.csv":
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(dst))
        return real_replace(src, dst, *args, **kwargs)

    monkeypatch.setattr(os, "replace", full)
    failed = cli("run", config, "--force", "--no-report")
    assert_one_line_error(failed, "space")
    monkeypatch.setattr(os, "replace", real_replace)
    assert cli("run", config, "--no-report").code == 0
    assert cell_files(out) == before


# --- 7. files get the usual mode under the user's umask ---------------------------------------------


@pytest.mark.parametrize(("umask", "file", "folder"), [(0o022, 0o644, 0o755), (0o027, 0o640, 0o750)])
def test_written_files_follow_the_umask(umask, file, folder, cli, tmp_path):
    old = os.umask(umask)
    try:
        setup_run(cli, tmp_path)
        assert cli("report", tmp_path / "out", "--out", tmp_path / "rep").code == 0
    finally:
        os.umask(old)
    for root in (tmp_path / "out", tmp_path / "cache", tmp_path / "rep"):
        for path in root.rglob("*"):
            if path.is_file() and not path.name.endswith(".lock"):
                assert stat.S_IMODE(path.stat().st_mode) == file, path
            elif path.is_dir():
                assert stat.S_IMODE(path.stat().st_mode) == folder, path


# --- 9. the report step fails cleanly ---------------------------------------------------------------


def test_report_dir_that_cannot_be_written_is_one_line_and_the_runs_are_safe(cli, tmp_path):
    config = experiment_toml(tmp_path, systems=SYSTEMS[:1])
    (tmp_path / "reports").write_text("a file where the reports folder should be", encoding="utf-8")
    failed = cli("run", config)
    line = assert_one_line_error(failed, "report", "safe", "zerda-eval report")
    assert str(tmp_path / "out") in line or "out" in line
    assert len(list((tmp_path / "out" / "cells").glob("*/result.json"))) == 1
    assert_no_partial_output(tmp_path / "out")


def test_report_interrupted_by_a_full_disk_leaves_no_truncated_file(cli, tmp_path, monkeypatch):
    import errno

    config = experiment_toml(tmp_path, systems=SYSTEMS[:1])
    assert cli("run", config, "--no-report").code == 0
    real_replace = os.replace
    calls = {"n": 0}

    def full(src, dst, *args, **kwargs):
        if "rep" in Path(dst).parts:
            calls["n"] += 1
            if calls["n"] == 3:
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(dst))
        return real_replace(src, dst, *args, **kwargs)

    monkeypatch.setattr(os, "replace", full)
    line = assert_one_line_error(cli("report", tmp_path / "out", "--out", tmp_path / "rep"), "space", "safe")
    assert "zerda-eval report" in line
    assert calls["n"] == 3, "report files are not written through an atomic rename"
    leftovers = [
        p for p in (tmp_path / "rep").rglob("*") if p.is_file() and (p.name.startswith(".") or p.stat().st_size == 0)
    ]
    assert not leftovers


# --- 13. output piped into head: tests/reliability/test_exit_paths.py (the work and the report go on) ---
