"""A tuned row is held out for real: a train split holding test queries (by id or by text) is refused
unless ``[tuning].overlap = "drop"`` leaves them out of the choice, and k-fold cross-validation never
puts two queries with the same text on both sides of a fold."""

from __future__ import annotations

import pytest

from tests.reliability.harness import assert_one_line_error, experiment_toml, write_beir
from zerda_eval import Experiment
from zerda_eval.execution.tuning import assign_folds
from zerda_eval.store.run_dir import load_result

TEST_QUERIES = {f"t{i}": f"test question number {i}" for i in range(1, 7)}
TRAIN_QUERIES = {f"r{i}": f"train question number {i}" for i in range(1, 7)}
DOCS = {f"d{i}": f"document about question number {i}" for i in range(1, 7)}


def _qrels(queries):
    return {qid: {f"d{i % 6 + 1}": 1} for i, qid in enumerate(queries)}


def _config(tmp_path, train_queries, overlap=None):
    test = write_beir(tmp_path / "test", DOCS, TEST_QUERIES, _qrels(TEST_QUERIES))
    train = write_beir(tmp_path / "train", DOCS, train_queries, _qrels(train_queries))
    tuning = {"measure": "ndcg@10", "train": {"test": "train"}, **({"overlap": overlap} if overlap else {})}
    config = experiment_toml(
        tmp_path,
        datasets=[{"path": str(test), "name": "test"}, {"path": str(train), "name": "train"}],
        systems=[{"name": "bm25", "family": "zerda.keyword", "grid": {"b": [0.3, 0.8]}, "tune": True}],
    )
    text = (
        config.read_text(encoding="utf-8")
        + "\n[tuning]\n"
        + "".join(
            f"{k} = {v!r}\n".replace("'", '"') if not isinstance(v, dict) else f'{k} = {{ "test" = "train" }}\n'
            for k, v in tuning.items()
        )
    )
    config.write_text(text, encoding="utf-8")
    return config


def test_a_train_split_holding_test_queries_by_id_or_text_is_refused(cli, tmp_path):
    leaky = {**TRAIN_QUERIES, "t1": "a different text under a test id", "r9": TEST_QUERIES["t2"]}
    line = assert_one_line_error(cli("run", _config(tmp_path, leaky), "--no-report"), "train", "2", "'t1'", "'r9'")
    assert "overlap" in line and "drop" in line
    assert not (tmp_path / "out" / "results.csv").exists()


def test_a_clean_train_split_runs(cli, tmp_path):
    assert cli("run", _config(tmp_path, TRAIN_QUERIES), "--no-report").code == 0


def test_overlap_drop_chooses_on_the_train_queries_that_are_not_test_queries(tmp_path):
    leaky = {**TRAIN_QUERIES, "t1": "a different text under a test id", "r9": TEST_QUERIES["t2"]}
    results = Experiment.from_toml(_config(tmp_path, leaky, overlap="drop")).run(progress=False)
    tuning = load_result(results.run_dir, results.cell_id("bm25[tuned]", dataset="test"))["stats"]["tuning"]
    assert tuning["choices"][0]["chosen_on_queries"] == len(TRAIN_QUERIES)  # 8 train queries, 2 left out
    assert tuning["left_out_of_train"] == ["r9", "t1"]


@pytest.mark.parametrize("seed", range(6))
def test_folds_keep_queries_with_the_same_text_together(seed):
    texts = {f"q{i}": f"question {i % 7}" for i in range(20)}  # q0, q7, q14 share a text, and so on
    folds = assign_folds(list(texts), 4, seed, texts)
    for qid, text in texts.items():
        assert {folds[other] for other, t in texts.items() if t == text} == {folds[qid]}
    assert set(folds.values()) == {0, 1, 2, 3}


def test_folds_of_distinct_texts_are_dealt_as_before():
    qids = [f"q{i}" for i in range(23)]
    texts = {q: f"text {q}" for q in qids}
    assert assign_folds(qids, 5, 7, texts) == assign_folds(qids, 5, 7)
