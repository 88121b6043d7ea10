"""``Experiment.only(label)`` (``--only``) keeps every cell the chosen one needs, inputs of inputs included."""

from __future__ import annotations

from tests.conftest import experiment_header, trec_dataset, write_trec_folder
from zerda_eval import Experiment

DOCS = {f"d{i}": f"document {i} about topic {i % 3}" for i in range(1, 9)}
QUERIES = {f"q{i}": f"topic {i}" for i in range(3)}
QRELS = [(f"q{i}", f"d{i + 3}", 1) for i in range(3)]


def test_a_tuned_fusion_keeps_the_systems_its_grid_cells_fuse(tmp_path):
    data = write_trec_folder(tmp_path / "toy", DOCS, QUERIES, QRELS)
    path = tmp_path / "only.toml"
    path.write_text(
        experiment_header(tmp_path, "only")
        + trec_dataset("toy", data)
        + """
[[systems]]
name = "a"
family = "zerda.keyword"

[[systems]]
name = "b"
family = "zerda.keyword"
params = { k1 = 0.9 }

[[fusions]]
name = "rrf"
inputs = ["a", "b"]
method = "rrf"
grid = { k = [10, 60] }
tune = true

[tuning]
folds = 3
""",
        encoding="utf-8",
    )
    only = Experiment.from_toml(path).only("rrf[tuned]")
    assert set(only.cells["system"]) == {"a", "b", "rrf[k=10]", "rrf[k=60]", "rrf[tuned]"}
    assert "rrf[tuned]" in set(only.run(progress=False).table["system"])
