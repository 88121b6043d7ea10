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
