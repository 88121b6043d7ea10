"""Experiment files: every mistake is a one-line ConfigError naming file and key; cells and their hashes."""

from __future__ import annotations

from pathlib import Path

import pytest

from zerda_eval.config.experiment import load_experiment, resolve_experiment
from zerda_eval.errors import ConfigError

BASE = """
[experiment]
name = "t"
depth = 100

[[datasets]]
id = "cranfield"
max_queries = 5

[[systems]]
name = "bm25"
family = "zerda.keyword"
params = { k1 = 1.2 }
grid = { b = [0.5, 0.75] }
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "exp.toml"
    path.write_text(text, encoding="utf-8")
    return path


def error_of(tmp_path: Path, text: str) -> str:
    with pytest.raises(ConfigError) as info:
        load_experiment(write(tmp_path, text))
    message = str(info.value)
    assert "\n" not in message and "exp.toml" in message
    return message


def test_grid_expands_to_labelled_cells_with_resolved_params(tmp_path):
    exp = load_experiment(write(tmp_path, BASE))
    assert [c.label for c in exp.cells] == ["bm25[b=0.5]", "bm25[b=0.75]"]
    params = exp.cells[0].config["system"]["params"]
    assert params["k1"] == 1.2 and params["b"] == 0.5 and params["engine"] == "reference"
    assert exp.cells[0].config["dataset"]["options"]["relevance"] == "5-code"
    assert exp.output_dir == Path("runs/t")


def test_cell_id_is_stable_and_changes_with_any_result_relevant_setting(tmp_path):
    ids = [c.cell_id for c in load_experiment(write(tmp_path, BASE)).cells]
    assert ids == [c.cell_id for c in load_experiment(write(tmp_path, BASE)).cells]
    for changed in (
        BASE.replace("k1 = 1.2", "k1 = 1.3"),
        BASE.replace("max_queries = 5", "max_queries = 6"),
        BASE.replace("depth = 100", "depth = 101"),
        BASE.replace('id = "cranfield"', 'id = "cranfield"\nrelevance = "raw"'),
    ):
        new = [c.cell_id for c in load_experiment(write(tmp_path, changed)).cells]
        assert set(new).isdisjoint(ids)


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        (('name = "bm25"', 'name = "bm25"\nfamly = "x"'), "did you mean 'family'"),
        (('family = "zerda.keyword"', 'family = "zerda.keywrd"'), "did you mean 'zerda.keyword'"),
        (('id = "cranfield"', 'id = "cranfeld"'), "did you mean 'cranfield'"),
        (("k1 = 1.2", "k_1 = 1.2"), "did you mean 'k1'"),
        (("k1 = 1.2", "k1 = -1.0"), "k1"),
        (("b = [0.5, 0.75]", "b = [0.5, 1.5]"), "expected a number >= 0.0 and <= 1.0"),
        (("k1 = 1.2", 'k1 = "high"'), "k1"),
        (("depth = 100", "depth = 0"), "depth"),
        (("depth = 100", 'depth = 100\nmeasures = ["ndcg@10", "ndcg@ten"]'), "unknown measure 'ndcg@ten'"),
        (("depth = 100", 'depth = 10\nmeasures = ["recall@100"]'), "depth >= 100"),
        (("[experiment]", "[experimnt]"), "did you mean 'experiment'"),
        (('name = "t"', 'name = "t"\nname2 = 1'), "key in [experiment]"),
        (("max_queries = 5", "max_queries = 0"), "max_queries"),
        (("max_queries = 5", 'normalisation = "light"'), "did you mean 'normalization'"),
        (("grid = { b = [0.5, 0.75] }", "grid = { bb = [0.5] }"), "did you mean 'b'"),
        (("grid = { b = [0.5, 0.75] }", "grid = { k1 = [1.0] }"), "also set in params"),
        (("grid = { b = [0.5, 0.75] }", "grid = { b = [0.5, 0.5] }"), "[b=0.5] appears twice"),
        (("grid = { b = [0.5, 0.75] }", "grid = { b = [1, 1.0] }"), "are the same parameters"),
        (("max_queries = 5", "ignore_identical_ids = 1"), "ignore_identical_ids=1 is invalid"),
    ],
)
def test_mistakes_are_one_line_config_errors(tmp_path, edit, expected):
    old, new = edit
    assert old in BASE
    assert expected in error_of(tmp_path, BASE.replace(old, new, 1))


def test_nan_weights_and_malformed_toml(tmp_path):
    hybrid = BASE + '\n[[systems]]\nname = "h"\nfamily = "pipeline.hybrid"\nparams = { weights = [nan, 1.0] }\n'
    assert "weights" in error_of(tmp_path, hybrid)
    assert "malformed TOML" in error_of(tmp_path, BASE + "\n[[systems]\n")
    assert "appears twice" in error_of(tmp_path, BASE + '\n[[systems]]\nname = "bm25"\nfamily = "zerda.vector"\n')


def test_fusion_inputs_must_name_one_cell(tmp_path):
    fused = (
        BASE + '\n[[systems]]\nname = "dense"\nfamily = "pipeline.dense"\n'
        '\n[[fusions]]\nname = "f"\ninputs = ["bm25", "dense"]\nmethod = "rrf"\n'
    )
    assert "grid of 2 cells" in error_of(tmp_path, fused)
    ok = load_experiment(write(tmp_path, fused.replace('["bm25", "dense"]', '["bm25[b=0.5]", "dense"]')))
    fusion = ok.cells[-1]
    assert fusion.kind == "fusion" and fusion.inputs == (ok.cells[0].cell_id, ok.cells[2].cell_id)
    assert "did you mean 'rrf'" in error_of(tmp_path, fused.replace('method = "rrf"', 'method = "rff"'))


def test_only_keeps_a_system_and_the_inputs_of_a_fusion(tmp_path):
    exp = load_experiment(write(tmp_path, BASE))
    assert [c.label for c in exp.only("bm25[b=0.5]").cells] == ["bm25[b=0.5]"]
    assert exp.only("bm25[b=0.5]").every_cell == exp.cells == exp.every_cell  # the tables still cover all
    with pytest.raises(ConfigError, match="did you mean 'bm25'"):
        exp.only("bm2")


def test_missing_file(tmp_path):
    with pytest.raises(ConfigError, match="not found"):
        load_experiment(tmp_path / "nope.toml")
    with pytest.raises(ConfigError, match="is a directory"):
        load_experiment(tmp_path)


def test_cell_key_holds_the_content_of_the_data_and_the_code(tmp_path):
    cell = load_experiment(write(tmp_path, BASE)).cells[0]
    assert set(cell.config["dataset"]["content"]) == {"cran.all.1400", "cran.qry", "cranqrel"}
    assert len(cell.config["code"]) == 64


def _quran(dataset: dict, measures: list[str]) -> dict:
    return {
        "experiment": {"name": "q", "measures": measures},
        "datasets": [{"id": "quranqa23/taskA/dev", **dataset}],
        "systems": [{"name": "bm25", "family": "zerda.keyword"}],
    }


def test_measures_deeper_than_a_datasets_run_depth_are_refused():
    """Qur'an QA runs are cut at 10: a recall@100 there would be a depth-10 number under a depth-100 label."""
    with pytest.raises(ConfigError) as error:
        resolve_experiment(_quran({}, ["ndcg@10", "recall@100"]), "q.toml")
    message = str(error.value)
    assert "\n" not in message and message.startswith("q.toml: datasets[0]")
    assert "recall@100" in message and "run depth 10" in message and "measures" in message


def test_a_dataset_takes_its_own_measures_and_always_gets_its_official_ones():
    experiment = resolve_experiment(_quran({"measures": ["ndcg@10", "recall@10"]}, ["ndcg@10", "recall@100"]), "q.toml")
    assert {tuple(cell.config["measures"]) for cell in experiment.cells} == {
        ("ndcg@10", "recall@10", "map@10", "mrr@10")
    }
    with pytest.raises(ConfigError, match=r"datasets\[0\]\.measures: .*depth >= 200"):
        resolve_experiment(_quran({"measures": ["ndcg@200"]}, ["ndcg@10"]), "q.toml")
