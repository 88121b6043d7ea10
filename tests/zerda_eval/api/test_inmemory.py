"""The in-memory API against the grid's own results for the same data, and run files against ranx's readers.

One small grid (two BM25 systems, an RRF fusion, a tuned weighted sum, a comparison) runs once; each
in-memory call is then given that grid's runs and qrels and must give the grid's numbers and runs
exactly: ``evaluate`` its means and per-query values (ir_measures names included), ``compare`` its
comparison table, ``fuse`` its fused cell, ``optimize_fusion`` its held-out tuned row and choices.
"""

from __future__ import annotations

import json

import pandas as pd
import pyarrow.parquet as pq
import pytest
from ranx import Qrels as RanxQrels
from ranx import Run as RanxRun

import zerda_eval as ze
from tests.conftest import experiment_header, trec_dataset, write_trec_folder
from zerda_eval import Experiment
from zerda_eval.errors import ConfigError, DataFormatError
from zerda_eval.store.run_dir import RUN_FILE, cell_dir, read_cell_run

WORDS = ["cats", "dogs", "birds", "fish", "sing", "bark", "purr", "swim", "fly", "sleep", "run", "jump"]
WORDS += ["quiet", "loud", "house", "tree", "river", "field"]
MEASURES = ["ndcg@10", "nDCG@10", "AP", "P(rel=2)@5", "Judged@5", "NumRet", "RR"]
SEED = 7
FOLDS = 3
WEIGHTS = [[0.2, 0.8], [0.5, 0.5], [0.8, 0.2]]


def toy_collection() -> tuple[dict[str, str], dict[str, str], list[tuple[str, str, int]]]:
    """40 docs of word pairs, 12 queries; graded qrels for every query (in query order), some docs judged 0."""
    docs = {f"d{i:02d}": f"{WORDS[i % 18]} {WORDS[(i * 7) % 18]} {WORDS[(i * 5 + 3) % 18]}" for i in range(40)}
    queries = {f"q{j:02d}": f"{WORDS[j]} {WORDS[(j * 3 + 1) % 18]}" for j in range(12)}
    qrels = []
    for j, qid in enumerate(queries):
        for i in range(40):
            if WORDS[j] in docs[f"d{i:02d}"].split():
                qrels.append((qid, f"d{i:02d}", 1 + (i + j) % 3 // 2))
            elif (i + j) % 9 == 0:
                qrels.append((qid, f"d{i:02d}", 0))
    return docs, queries, qrels


@pytest.fixture(scope="module")
def grid(tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("inmemory")
    folder = write_trec_folder(tmp_path / "toy", *toy_collection())
    path = tmp_path / "exp.toml"
    path.write_text(
        experiment_header(tmp_path, "inmemory", json.dumps(MEASURES)).replace(
            "depth = 10", f"depth = 10\nseed = {SEED}"
        )
        + trec_dataset("toy", folder)
        + f"""
[[systems]]
name = "bm25"
family = "zerda.keyword"

[[systems]]
name = "bm25_flat"
family = "zerda.keyword"
params = {{ k1 = 0.3, b = 0.1 }}

[[fusions]]
name = "rrf"
inputs = ["bm25", "bm25_flat"]
method = "rrf"

[[fusions]]
name = "wsum"
inputs = ["bm25", "bm25_flat"]
method = "wsum"
grid = {{ weights = {json.dumps(WEIGHTS)} }}
tune = true

[tuning]
measure = "ndcg@10"
folds = {FOLDS}

[compare]
baseline = "bm25"
tests = ["t-test", "fisher"]
n_permutations = 2000
""",
        encoding="utf-8",
    )
    results = Experiment.from_toml(path).run(progress=False)
    return results, ze.read_qrels(folder / "qrels.txt")


def runs_of(results) -> dict:
    return {label: results.run(label) for label in results.table["system"]}


def test_evaluate_equals_the_grid_means_and_per_query_values(grid):
    results, qrels = grid
    for _, row in results.table.iterrows():
        run = results.run(row["system"])  # a ranx Run, as a ranx user holds one
        means = ze.evaluate(qrels, run, MEASURES)
        assert means == {m: row[m] for m in MEASURES}, row["system"]
        per_query = ze.evaluate(qrels, run, MEASURES, per_query=True)
        cell = results.per_query[results.per_query["cell_id"] == row["cell_id"]]
        grid_values = {(m, q): v for m, q, v in zip(cell["measure"], cell["query_id"], cell["value"], strict=True)}
        assert grid_values == {(m, q): v for m, by_qid in per_query.items() for q, v in by_qid.items()}
    assert (
        ze.evaluate(qrels, results.run("bm25"), "nDCG@10") == results.table.set_index("system").loc["bm25", "nDCG@10"]
    )
    bm25 = results.run("bm25")
    assert ze.evaluate(RanxQrels(qrels), bm25, MEASURES) == ze.evaluate(qrels, bm25, MEASURES)  # ranx's Qrels in


def test_compare_equals_the_grid_comparison(grid):
    results, qrels = grid
    expected = results.compare(baseline="bm25", measures=["nDCG@10", "AP"], tests=["t-test", "fisher"], seed=3)
    comparison = ze.compare(
        qrels, runs_of(results), baseline="bm25", measures=["nDCG@10", "AP"], tests=["t-test", "fisher"], seed=3
    )
    columns = [c for c in expected.columns if c not in ("dataset", "cell_id")]
    pd.testing.assert_frame_equal(comparison.table[columns], expected[columns])
    assert list(comparison.means.index) == list(results.table["system"])
    markdown = comparison.to_markdown()
    assert "| bm25 (baseline) |" in markdown and "p Fisher (holm)" in markdown
    assert comparison.to_latex().count(r"\begin{table}") == 2 and comparison.to_html().count("<table>") == 2


def test_fuse_equals_the_grid_fusion_cell(grid):
    results, _ = grid
    inputs = [results.run("bm25"), results.run("bm25_flat")]
    fused = ze.fuse(inputs, method="rrf")
    cell = read_cell_run(results.run_dir, results.cell_id("rrf"))
    assert {qid: ranking[:10] for qid, ranking in fused.items()} == cell
    as_ranx = ze.fuse({"a": inputs[0], "b": inputs[1]}, method="wsum", as_ranx=True, weights=[0.5, 0.5])
    assert isinstance(as_ranx, RanxRun)
    point = results.cell_id("wsum[weights=[0.5, 0.5]]")
    assert {q: list(d.items())[:10] for q, d in as_ranx.to_dict().items()} == read_cell_run(results.run_dir, point)


def test_optimize_fusion_equals_the_grid_tuned_row(grid):
    results, qrels = grid
    inputs = {"bm25": results.run("bm25"), "bm25_flat": results.run("bm25_flat")}
    choice = ze.optimize_fusion(
        qrels, inputs, method="wsum", measure="ndcg@10", folds=FOLDS, grid={"weights": WEIGHTS}, seed=SEED
    )
    tuned = results.cell_id("wsum[tuned]")
    assert {qid: r[:10] for qid, r in choice.run.items()} == read_cell_run(results.run_dir, tuned)
    recorded = json.loads((cell_dir(results.run_dir, tuned) / "result.json").read_text())["stats"]["tuning"]
    assert [c["chosen"] for c in recorded["choices"]] == [
        f"wsum[weights={json.dumps(c['params']['weights'])}]" for c in choice.folds
    ]
    assert [c["chosen_on_mean"] for c in recorded["choices"]] == [c["chosen_on_mean"] for c in choice.folds]
    assert choice.grid == [{"weights": w} for w in WEIGHTS]


def test_optimize_fusion_default_grid_is_weights_in_tenths():
    # min-max per query: the first run puts the relevant doc first (1 vs 0), the second last. Fused, the
    # relevant doc scores w1 and the other w2: ranked first when w1 > w2 (q2), or w1 >= w2 when its id is
    # higher (q1, q3: ties go by doc id descending). The first point in order where every query has RR 1 is
    # (0.6, 0.4).
    qrels = {"q1": {"b": 1}, "q2": {"a": 1}, "q3": {"d": 1}}
    first = {"q1": {"b": 1.0, "a": 0.0}, "q2": {"a": 1.0, "b": 0.0}, "q3": {"d": 1.0, "c": 0.0}}
    second = {"q1": {"a": 1.0, "b": 0.0}, "q2": {"b": 1.0, "a": 0.0}, "q3": {"c": 1.0, "d": 0.0}}
    choice = ze.optimize_fusion(qrels, [first, second], method="wsum", measure="RR", folds=3)
    assert len(choice.grid) == 11 and choice.grid[0] == {"weights": [0.0, 1.0]}
    assert choice.best_params == {"weights": [0.6, 0.4]}
    # held out, q2's fold is chosen on q1 and q3 alone: (0.5, 0.5) is the first point right for both, and
    # the tie it leaves on q2 puts b (not relevant) first; the other folds choose (0.6, 0.4)
    q2_fold = next(c for c in choice.folds if c["chosen_on_queries"] == 2 and c["params"]["weights"] == [0.5, 0.5])
    assert sum(c["params"]["weights"] == [0.6, 0.4] for c in choice.folds) == 2 and q2_fold
    assert ze.evaluate(qrels, choice.run, "RR", per_query=True) == {"q1": 1.0, "q2": 0.5, "q3": 1.0}
    with pytest.raises(ConfigError, match="takes no weights; give grid="):
        ze.optimize_fusion(qrels, [first, second], method="combsum")


def test_read_run_reads_the_grid_cells_run_file(grid):
    results, _ = grid
    path = cell_dir(results.run_dir, results.cell_id("bm25")) / RUN_FILE
    assert ze.read_run(path) == read_cell_run(results.run_dir, results.cell_id("bm25"))


def nested(rows: list[dict]) -> dict:
    """ranx's Parquet rows (q_id, doc_id, score) as ``{q_id: {doc_id: score}}``."""
    out: dict = {}
    for row in rows:
        out.setdefault(row["q_id"], {})[row["doc_id"]] = row["score"]
    return out


@pytest.mark.parametrize("suffix", [".trec", ".json", ".parquet"])
def test_run_and_qrels_files_round_trip_through_ranx(tmp_path, suffix):
    run = {"q1": {"d1": 2.5, "d2": 2.5, "d3": 0.125}, "q 2": {"d9": -1.0}} if suffix != ".trec" else None
    run = run or {"q1": {"d1": 2.5, "d2": 2.5, "d3": 0.125}, "q2": {"d9": -1.0}}  # TREC: ids without spaces
    qrels = {"q1": {"d1": 2, "d3": 0}, "q2": {"d9": 1}}
    run_path = ze.write_run(run, tmp_path / f"run{suffix}")
    qrels_path = ze.write_qrels(qrels, tmp_path / f"qrels{suffix}")
    if suffix == ".parquet":  # ranx's from_parquet asserts object dtype, which pandas 3 no longer reads
        assert nested(pq.read_table(run_path).to_pylist()) == run
        assert nested(pq.read_table(qrels_path).to_pylist()) == qrels
    else:
        theirs, their_qrels = RanxRun.from_file(str(run_path)), RanxQrels.from_file(str(qrels_path))
        assert theirs.to_dict() == run and their_qrels.to_dict() == qrels
    assert {q: dict(r) for q, r in ze.read_run(run_path).items()} == run
    assert ze.read_qrels(qrels_path) == qrels
    assert ze.read_run(run_path)["q1"] == [("d2", 2.5), ("d1", 2.5), ("d3", 0.125)]  # trec_eval's tie-break order
    # and ranx's own files are read back the same
    RanxRun(run, name="theirs").save(str(tmp_path / f"ranx{suffix}"))
    assert {q: dict(r) for q, r in ze.read_run(tmp_path / f"ranx{suffix}").items()} == run
    assert ze.read_run(run_path, as_ranx=True).to_dict() == run
    assert ze.read_qrels(qrels_path, as_ranx=True).to_dict() == qrels


def test_numpy_grades_and_scores_are_accepted():
    import numpy as np

    qrels = {"q": {"a": np.int64(2), "b": 1.0}}
    assert ze.evaluate(qrels, {"q": {"a": np.float32(1.0), "b": 0.5}}, ["P(rel=2)@1", "NumRel"]) == {
        "P(rel=2)@1": 1.0,
        "NumRel": 2.0,
    }


def test_bad_files_and_inputs_are_one_line_errors(tmp_path):
    (tmp_path / "q.txt").write_text("q1 0 d1 high\n", encoding="utf-8")
    with pytest.raises(DataFormatError, match=r"q.txt:1: expected 'qid iter docid grade'"):
        ze.read_qrels(tmp_path / "q.txt")
    (tmp_path / "r.json").write_text("[1, 2]", encoding="utf-8")
    with pytest.raises(DataFormatError, match=r"r\.json: expected ranx's JSON"):
        ze.read_run(tmp_path / "r.json")
    with pytest.raises(DataFormatError, match=r"grade 0\.5 is not an integer"):
        ze.evaluate({"q1": {"d1": 0.5}}, {"q1": {"d1": 1.0}}, ["P@1"])
    with pytest.raises(ConfigError, match="unknown baseline 'bm2'"):
        ze.compare({"q1": {"d1": 1}}, {"bm25": {"q1": {"d1": 1.0}}, "x": {"q1": {"d2": 1.0}}}, baseline="bm2")
