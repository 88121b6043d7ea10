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
TWO_DENSE_OVER_ONE_ENCODING = """
[[systems]]
name = "dense_a"
family = "zerda.vector"
params = { embedder = "lsa", dim = 64 }

[[systems]]
name = "dense_b"
family = "zerda.vector"
params = { embedder = "lsa", dim = 64, backend = "in_memory" }
"""  # the second reads the vectors the first encoded


def result(output_dir, results, label):
    cell = results.cell_id(label)
    return json.loads((cell_dir(output_dir, cell) / "result.json").read_text(encoding="utf-8"))


def test_a_fusion_of_two_systems_over_one_encoding_counts_it_once(tmp_path):
    folder = write_trec_folder(tmp_path / "toy", DOCS, QUERIES, QRELS)
    path = tmp_path / "exp.toml"
    path.write_text(
        experiment_header(tmp_path, "shared")
        + trec_dataset("toy", folder)
        + TWO_DENSE_OVER_ONE_ENCODING
        + """
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
            "cell_id": "a",
            "efficiency": {"index_time_s": 5.0, "peak_rss_increment_mb": 10.0},
            "stats": {"latency_ms": {"q1": 1.0}, "shared_builds": shared},
        },
        {
            "cell_id": "b",
            "efficiency": {"index_time_s": 4.0, "peak_rss_increment_mb": 12.0},
            "stats": {"latency_ms": {"q2": 2.0}, "shared_builds": shared},
        },
    ]
    efficiency = _efficiency(results, {"q1": 0, "q2": 1}, ["q1", "q2"])
    assert efficiency.index_time_s == pytest.approx(5.0 + 4.0 - 2.0)
    assert counted_once([310.0, 305.0], [shared, shared], "build_s") == (315.0, {"corpus vectors x": 300.0})
    assert counted_once([310.0, 305.0], [shared, {}], "build_s") == (615.0, {})


def test_a_tuned_row_over_a_fusion_s_own_grid_counts_the_cells_under_it_once(tmp_path):
    """Two grid points of one fusion are made of the same system cells (one BM25 index, one encoding shared by
    two dense systems): a tuned row whose folds chose both costs what one grid point costs, not twice that."""
    from zerda_eval.execution.tuned_fusion import _efficiency as tuned_fusion_efficiency
    from zerda_eval.execution.tuned_fusion import _stage

    folder = write_trec_folder(tmp_path / "toy", DOCS, QUERIES, QRELS)
    path = tmp_path / "exp.toml"
    path.write_text(
        experiment_header(tmp_path, "shared-grid")
        + trec_dataset("toy", folder)
        + TWO_DENSE_OVER_ONE_ENCODING
        + """
[[systems]]
name = "bm25"
family = "zerda.keyword"

[[fusions]]
name = "all"
inputs = ["bm25", "dense_a", "dense_b"]
method = "rrf"
grid = { k = [1, 60] }
tune = true

[tuning]
folds = 3
""",
        encoding="utf-8",
    )
    results = Experiment.from_toml(path).run(progress=False)
    grid = [result(results.run_dir, results, f"all[k={k}]") for k in (1, 60)]
    systems = [result(results.run_dir, results, label) for label in ("bm25", "dense_a", "dense_b")]
    (entry,) = systems[1]["stats"]["shared_builds"]
    encodings = [s["stats"]["shared_builds"][entry] for s in systems[1:]]  # dense_b read dense_a's vectors
    own = {  # the encoding once: its largest share (the cell that encoded), the other one's left out
        column: sum(s["efficiency"][column] for s in systems) - min(e[part] for e in encodings)
        for column, part in (("index_time_s", "spent_s"), ("index_build_s", "build_s"))
    }
    for cell in grid:  # each grid point: its three systems, the encoding once
        assert cell["efficiency"]["index_time_s"] == pytest.approx(own["index_time_s"], rel=1e-12)
        assert cell["efficiency"]["index_build_s"] == pytest.approx(own["index_build_s"], rel=1e-12)
    both = _efficiency(grid, {"q1": 0, "q2": 1, "q3": 0}, list(QUERIES))  # the folds chose both grid points
    assert both.index_time_s == pytest.approx(own["index_time_s"], rel=1e-12)
    tuned = result(results.run_dir, results, "all[tuned]")
    assert tuned["efficiency"]["index_time_s"] == pytest.approx(own["index_time_s"], rel=1e-12)
    assert tuned["efficiency"]["index_build_s"] == pytest.approx(own["index_build_s"], rel=1e-12)
    stages = [_stage(results.run_dir, None, [results.cell_id(f"all[k={k}]") for k in (1, 60)], "ndcg@10")]
    fused_both = tuned_fusion_efficiency(stages, [(0, 0), (0, 1)], {q: 1.0 for q in QUERIES}, list(QUERIES))
    assert fused_both.index_time_s == pytest.approx(own["index_time_s"], rel=1e-12)
