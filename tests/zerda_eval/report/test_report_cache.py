"""A report is rebuilt only when its inputs changed (report.cache): config, tables, report code, formats."""

from __future__ import annotations

import shutil
from pathlib import Path

import pandas as pd
import pytest

from zerda_eval.config.code_fingerprint import modules_of
from zerda_eval.report import write_report
from zerda_eval.report.cache import INPUTS_FILE, REPORT_CODE, report_key
from zerda_eval.report.tables import load_run_dir


def snapshot(folder: Path) -> dict[str, tuple[int, bytes]]:
    """Every file of ``folder`` (recursively): modification time in ns and bytes."""
    return {
        str(p.relative_to(folder)): (p.stat().st_mtime_ns, p.read_bytes()) for p in folder.rglob("*") if p.is_file()
    }


@pytest.fixture()
def run_copy(run_dir, tmp_path) -> Path:
    return Path(shutil.copytree(run_dir, tmp_path / "runs" / "tiny"))


def test_a_second_report_of_the_same_inputs_rewrites_nothing(run_copy, tmp_path):
    report_dir = tmp_path / "reports" / "tiny"
    first = write_report(run_copy, report_dir)
    before = snapshot(report_dir)
    assert INPUTS_FILE in before and "report.html" in before and any(k.startswith("plots") for k in before)
    assert write_report(run_copy, report_dir) == first
    assert snapshot(report_dir) == before  # same files, same bytes, not even touched


def test_a_changed_result_or_per_query_value_rewrites_the_report(run_copy, tmp_path):
    report_dir = tmp_path / "reports" / "tiny"
    tex = write_report(run_copy, report_dir, formats=["latex"])
    assert tex.name == "report.tex"
    results = pd.read_parquet(run_copy / "results.parquet")
    assert "0.9876" not in tex.read_text(encoding="utf-8")
    results.loc[0, "ndcg@10"] = 0.9876
    results.to_parquet(run_copy / "results.parquet", index=False)
    write_report(run_copy, report_dir, formats=["latex"])
    assert "0.9876" in tex.read_text(encoding="utf-8")
    stamp = snapshot(report_dir)
    per_query = pd.read_parquet(run_copy / "per_query.parquet")
    per_query.loc[0, "value"] = 1.0 - per_query.loc[0, "value"]
    per_query.to_parquet(run_copy / "per_query.parquet", index=False)
    write_report(run_copy, report_dir, formats=["latex"])
    assert snapshot(report_dir)[INPUTS_FILE] != stamp[INPUTS_FILE]


def test_a_deleted_output_or_another_format_is_written_though_the_tables_did_not_change(run_copy, tmp_path):
    report_dir = tmp_path / "reports" / "tiny"
    tex = write_report(run_copy, report_dir, formats=["latex"])
    tex.unlink()
    assert write_report(run_copy, report_dir, formats=["latex"]).is_file()
    data = load_run_dir(run_copy)
    assert report_key(data, ["latex"]) != report_key(data, ["markdown", "html"])


def test_the_report_code_version_covers_every_module_a_report_runs():
    modules = modules_of(REPORT_CODE)
    for name in ("plots", "tables", "document", "html", "markdown", "latex", "labels"):
        assert f"zerda_eval.report.{name}" in modules
    assert "zerda_eval.analysis.compare" in modules and "zerda_eval.analysis.studies.rrf_order" in modules


def test_the_same_run_reported_from_another_folder_names_that_folder(run_copy, tmp_path):
    report_dir = tmp_path / "reports" / "tiny"
    write_report(run_copy, report_dir, formats=["markdown"])
    moved = Path(shutil.copytree(run_copy, tmp_path / "elsewhere" / "tiny"))
    markdown = write_report(moved, report_dir, formats=["markdown"]).read_text(encoding="utf-8")
    assert f"from `{moved}`" in markdown and f"from `{run_copy}`" not in markdown  # the provenance line is true
