"""One run directory belongs to one experiment (issue 32, item 6): a second experiment file that names
the same output directory is refused in one line, and the first one's files are left as they were."""

from __future__ import annotations

from tests.reliability.harness import assert_one_line_error, experiment_toml


def test_a_second_experiment_cannot_write_into_the_first_ones_run_directory(cli, tmp_path):
    first = experiment_toml(tmp_path, name="alpha")
    assert cli("run", first, "--no-report").code == 0
    kept = {name: (tmp_path / "out" / name).read_bytes() for name in ("experiment.json", "results.csv")}
    (tmp_path / "other").mkdir()
    second = experiment_toml(
        tmp_path / "other",
        name="beta",
        systems=[{"name": "bm25_b", "family": "zerda.keyword", "params": {"b": 0.2}}],
        experiment={"output_dir": str(tmp_path / "out")},
    )
    line = assert_one_line_error(cli("run", second, "--no-report"), "'alpha'", "'beta'", str(tmp_path / "out"))
    assert "output_dir" in line
    assert {name: (tmp_path / "out" / name).read_bytes() for name in kept} == kept


def test_the_same_experiment_edited_and_rerun_keeps_its_run_directory(cli, tmp_path):
    config = experiment_toml(tmp_path, name="alpha")
    assert cli("run", config, "--no-report").code == 0
    edited = experiment_toml(tmp_path, name="alpha", experiment={"measures": ["ndcg@10"]})
    assert edited == config
    result = cli("run", config, "--no-report")
    assert result.code == 0, result.err


def test_a_report_is_never_written_from_tables_of_another_grid_than_experiment_json(cli, tmp_path):
    """A rerun of an edited experiment that stops before its tables are rewritten (here: a broken second
    dataset) leaves experiment.json describing the new grid and results.csv the old one: refused."""
    from tests.reliability.harness import write_beir

    config = experiment_toml(tmp_path, name="alpha", experiment={"depth": 10})
    assert cli("run", config, "--no-report").code == 0
    empty = write_beir(tmp_path / "empty", queries={"q9": "nothing judged"}, qrels={"q1": {"d1": 1}})
    datasets = [
        {"path": str(tmp_path / "collection"), "name": "tiny"},
        {"path": str(empty), "name": "broken"},
    ]
    experiment_toml(tmp_path, name="alpha", datasets=datasets, experiment={"depth": 20})
    assert cli("run", config, "--no-report").code == 1  # no judged queries in "broken": stops before any cell
    line = assert_one_line_error(
        cli("report", tmp_path / "out", "--out", tmp_path / "rep"), "results", "experiment.json"
    )
    assert "rerun" in line
    assert not (tmp_path / "rep" / "report.md").exists()
