"""A cost several cells share (one corpus encoding) is counted once in a row made of them: a fusion of
two dense systems over the same vectors, a tuned row whose folds chose two grid points."""

from __future__ import annotations

import json

import pytest

from tests.conftest import experiment_header, trec_dataset, write_trec_folder
from zerda_eval import Experiment
from zerda_eval.execution.tuning import _efficiency
from zerda_eval.store.build_costs import counted_once
from zerda_eval.store.run_dir import cell_dir

WORDS = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel"]
DOCS = {f"d{i}": f"{w} {v} notes" for i, (w, v) in enumerate(zip(WORDS, WORDS[::-1], strict=True))}
QUERIES = {"q1": "alpha hotel", "q2": "bravo golf", "q3": "charlie foxtrot"}
QRELS = [("q1", "d0", 1), ("q2", "d1", 1), ("q3", "d2", 1)]


def result(output_dir, results, label):
    cell = results.cell_id(label)
    return json.loads((cell_dir(output_dir, cell) / "result.json").read_text(encoding="utf-8"))


def test_a_fusion_of_two_systems_over_one_encoding_counts_it_once(tmp_path):
    folder = write_trec_folder(tmp_path / "toy", DOCS, QUERIES, QRELS)
    path = tmp_path / "exp.toml"
    path.write_text(
        experiment_header(tmp_path, "shared")
        + trec_dataset("toy", folder)
        + """
[[systems]]
name = "dense_a"
family = "zerda.vector"
params = { embedder = "lsa", dim = 64 }

[[systems]]
name = "dense_b"
family = "zerda.vector"
params = { embedder = "lsa", dim = 64, backend = "in_memory" }

[[fusions]]
name = "both"
inputs = ["dense_a", "dense_b"]
method = "rrf"
""",
        encoding="utf-8",
    )
    results = Experiment.from_toml(path).run(progress=False)
    a, b, fused = (result(results.run_dir, results, label) for label in ("dense_a", "dense_b", "both"))
    (entry,) = a["stats"]["shared_builds"]
    assert entry.startswith("corpus vectors ") and set(b["stats"]["shared_builds"]) == {entry}
    builds = [a["stats"]["shared_builds"][entry]["build_s"], b["stats"]["shared_builds"][entry]["build_s"]]
    assert builds[0] == builds[1] > 0  # b reused a's vectors in memory: the same from-scratch cost
    expected = a["efficiency"]["index_build_s"] + b["efficiency"]["index_build_s"] - builds[1]
    assert fused["efficiency"]["index_build_s"] == pytest.approx(expected, rel=1e-12)
    assert fused["stats"]["builds_counted_once"] == {entry: builds[0]}


def test_a_tuned_row_counts_an_encoding_its_chosen_cells_share_once():
    shared = {"corpus vectors x": {"build_s": 300.0, "spent_s": 2.0}}
    results = [
        {
            "efficiency": {"index_time_s": 5.0, "peak_rss_mb": 10.0},
            "stats": {"latency_ms": {"q1": 1.0}, "shared_builds": shared},
        },
        {
            "efficiency": {"index_time_s": 4.0, "peak_rss_mb": 12.0},
            "stats": {"latency_ms": {"q2": 2.0}, "shared_builds": shared},
        },
    ]
    efficiency = _efficiency(results, {"q1": 0, "q2": 1}, ["q1", "q2"])
    assert efficiency.index_time_s == pytest.approx(5.0 + 4.0 - 2.0)
    assert counted_once([310.0, 305.0], [shared, shared], "build_s") == (315.0, {"corpus vectors x": 300.0})
    assert counted_once([310.0, 305.0], [shared, {}], "build_s") == (615.0, {})
