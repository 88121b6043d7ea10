"""A report is current only when its inputs are unchanged AND every file it wrote is still there as
written (issue 32): a deleted or edited plot, table or page is written again by the next report."""

from __future__ import annotations

import pytest

from tests.reliability.harness import experiment_toml

SYSTEMS = [
    {"name": "bm25", "family": "zerda.keyword"},
    {"name": "bm25_b", "family": "zerda.keyword", "params": {"b": 0.3}},
]


@pytest.fixture
def reported(cli, tmp_path):
    config = experiment_toml(tmp_path, systems=SYSTEMS)
    assert cli("run", config, "--no-report").code == 0
    result = cli("report", tmp_path / "out", "--out", tmp_path / "report")
    assert result.code == 0, result.err
    files = {p: p.read_bytes() for p in (tmp_path / "report").rglob("*") if p.is_file()}
    assert any(p.suffix == ".svg" for p in files), sorted(files)
    return tmp_path, files


@pytest.mark.parametrize("damage", ["delete", "edit"])
@pytest.mark.parametrize("kind", [".svg", ".png", ".csv", ".md"])
def test_a_deleted_or_edited_report_file_is_written_again(cli, reported, damage, kind):
    tmp_path, files = reported
    victims = [p for p in files if p.suffix == kind]
    assert victims, f"the report holds no {kind} file"
    victim = victims[0]
    if damage == "delete":
        victim.unlink()
    else:
        victim.write_bytes(b"edited by hand")
    result = cli("report", tmp_path / "out", "--out", tmp_path / "report")
    assert result.code == 0, result.err
    assert victim.read_bytes() == files[victim]
