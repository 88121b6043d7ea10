"""best[nested]: per fold, the best of ALL tuned rows' grids on the training queries answers the held-out
fold; checked against a brute-force choice over every grid cell's per-query values."""

from __future__ import annotations

import numpy as np
import pytest

from tests.conftest import experiment_header, trec_dataset, write_trec_folder
from zerda_eval import Experiment
from zerda_eval.analysis.nested import nested_best
from zerda_eval.execution.tuning import assign_folds
from zerda_eval.store.run_dir import read_cell_per_query

QUERIES = {f"q{i}": f"question {i}" for i in range(12)}
DOCS = {f"d{i}": f"document {i}" for i in range(12)}
QRELS = [(f"q{i}", f"d{i}", 1) for i in range(12)]
RUNS = ("a1", "a2", "b1", "b2")  # system a's grid (a1, a2) and system b's (b1, b2)


def write_runs(folder, seed: int = 8) -> None:
    """Each run puts each query's relevant document at a random rank among three; with seed 8 the folds choose
    a1, a2 (each tied with b's point, so the first row's) and b1: the choice crosses configurations."""
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    for name in RUNS:
        lines = []
        for i in range(12):
            docs = [f"d{(i + 1) % 12}", f"d{(i + 2) % 12}"]
            docs.insert(int(rng.integers(0, 3)), f"d{i}")
            lines += [f"q{i} Q0 {d} {r} {4 - r}.0 x\n" for r, d in enumerate(docs, start=1)]
        (folder / f"{name}.trec").write_text("".join(lines), encoding="utf-8")


def test_nested_row_chooses_among_all_tuned_grids_on_training_queries_only(tmp_path):
    data = write_trec_folder(tmp_path / "data", DOCS, QUERIES, QRELS)
    runs = tmp_path / "external"
    write_runs(runs)
    entries = "".join(
        f'\n[[systems]]\nname = "{system}"\nfamily = "run_file"\n'
        f'grid = {{ path = ["{runs}/{system}1.trec", "{runs}/{system}2.trec"] }}\ntune = true\n'
        for system in "ab"
    )
    path = tmp_path / "nested.toml"
    path.write_text(
        experiment_header(tmp_path, "nested") + trec_dataset("d", data) + entries + "[tuning]\nfolds = 3\n",
        encoding="utf-8",
    )
    results = Experiment.from_toml(path).run(progress=False)
    summary, folds = nested_best(results.run_dir, results.table, results.per_query, "ndcg@10")
    dealt = assign_folds(list(QUERIES), 3, 0, QUERIES)
    grid = {
        name: read_cell_per_query(results.run_dir, results.cell_id(f"{name[0]}[path={runs}/{name}.trec]"), "ndcg@10")
        for name in RUNS
    }
    expected = {}
    for fold in range(3):
        train = [q for q in QUERIES if dealt[q] != fold]
        means = {name: round(float(np.mean([grid[name][q] for q in train])), 9) for name in RUNS}
        chosen = next(name for name in RUNS if means[name] == max(means.values()))  # union of both grids; ties: first
        expected |= {q: grid[chosen][q] for q in QUERIES if dealt[q] == fold}
        assert folds.iloc[fold]["chosen"].endswith(f"{chosen}.trec]")
    assert set(folds["row"]) == {"a[tuned]", "b[tuned]"}  # this seed: folds choose different configurations
    row = summary.iloc[0]
    assert row["value"] == pytest.approx(np.mean(list(expected.values())))
    assert row["queries"] == 12 and folds["answers"].sum() == 12
    # never better than choosing per query with hindsight, and honest: no fold saw its own queries
    assert row["value"] <= np.mean([max(grid[n][q] for n in RUNS) for q in QUERIES])
