"""Tuned rows: a grid point chosen on other queries (a train split, or the other folds), never on its own."""

from __future__ import annotations

import json
import re

import numpy as np
import pandas as pd
import pytest

from tests.conftest import experiment_header, trec_dataset, write_trec_folder
from zerda_eval import Experiment
from zerda_eval.analysis.studies import rrf_order
from zerda_eval.errors import ConfigError, DatasetError
from zerda_eval.execution.tuning import assign_folds, train_overlap
from zerda_eval.store.run_dir import load_result, read_cell_per_query, read_cell_run

DOCS = {f"d{i}": f"document number {i}" for i in range(1, 7)}
TEST_QUERIES = {f"t{i}": f"test question {i}" for i in range(1, 7)}
TRAIN_QUERIES = {f"r{i}": f"train question {i}" for i in range(1, 7)}
# every query has one relevant document: t_i -> d_i, r_i -> d_i
TEST_QRELS = [(f"t{i}", f"d{i}", 1) for i in range(1, 7)]
TRAIN_QRELS = [(f"r{i}", f"d{i}", 1) for i in range(1, 7)]


def ranking(qid: str, relevant: str, first: bool) -> str:
    """Two documents for ``qid``: the relevant one first (``first``) or second."""
    other = "d6" if relevant != "d6" else "d5"
    docs = [relevant, other] if first else [other, relevant]
    return "".join(f"{qid} Q0 {d} {r} {3 - r}.0 x\n" for r, d in enumerate(docs, start=1))


def write_runs(tmp_path, good_on_train: str):
    """Run files a_<dataset>.trec and b_<dataset>.trec: ``good_on_train`` ranks the relevant doc first on
    every train query and second on every test query; the other one the reverse."""
    folder = tmp_path / "external"
    folder.mkdir(exist_ok=True)
    for name in ("a", "b"):
        good = name == good_on_train
        train = "".join(ranking(q, d, good) for q, d, _ in TRAIN_QRELS)
        test = "".join(ranking(q, d, not good) for q, d, _ in TEST_QRELS)
        (folder / f"{name}_train.trec").write_text(train, encoding="utf-8")
        (folder / f"{name}_test.trec").write_text(test, encoding="utf-8")
    return folder


def experiment(tmp_path, tuning: str, train_docs: dict | None = None, train_queries: dict | None = None) -> Experiment:
    test = write_trec_folder(tmp_path / "test", DOCS, TEST_QUERIES, TEST_QRELS)
    train = write_trec_folder(tmp_path / "train", train_docs or DOCS, train_queries or TRAIN_QUERIES, TRAIN_QRELS)
    runs = write_runs(tmp_path, good_on_train="a")
    path = tmp_path / "tune.toml"
    path.write_text(
        experiment_header(tmp_path, "tune", '["ndcg@10", "mrr@10"]')
        + trec_dataset("test", test)
        + trec_dataset("train", train)
        + f"""
[[systems]]
name = "ext"
family = "run_file"
grid = {{ path = ["{runs}/a_{{dataset}}.trec", "{runs}/b_{{dataset}}.trec"] }}
tune = true
"""
        + tuning,
        encoding="utf-8",
    )
    return Experiment.from_toml(path)


def test_a_row_tuned_on_the_train_split_uses_the_train_choice_even_when_test_prefers_another(tmp_path):
    results = experiment(tmp_path, '[tuning]\nmeasure = "mrr@10"\ntrain = { "test" = "train" }\n').run(progress=False)
    rows = results.table.set_index(["dataset", "system"])
    # run "a" is perfect on train (MRR 1) and second-placed on test (MRR 0.5); "b" the reverse
    a_test = rows.loc[("test", f"ext[path={tmp_path}/external/a_{{dataset}}.trec]"), "mrr@10"]
    b_test = rows.loc[("test", f"ext[path={tmp_path}/external/b_{{dataset}}.trec]"), "mrr@10"]
    assert (a_test, b_test) == (pytest.approx(0.5), pytest.approx(1.0))
    tuned = rows.loc[("test", "ext[tuned]")]
    assert tuned["mrr@10"] == pytest.approx(0.5)  # the train choice, worse than the test-tuned b (optimistic)
    assert ("train", "ext[tuned]") not in rows.index  # a dataset used only as a train split gets no tuned row
    cell = results.cell_id("ext[tuned]", dataset="test")
    choice = load_result(results.run_dir, cell)["stats"]["tuning"]["choices"]
    assert [c["chosen"].endswith("a_{dataset}.trec]") for c in choice] == [True]
    assert choice[0]["chosen_on_mean"] == pytest.approx(1.0) and choice[0]["answers"] == 6
    a_cell = results.cell_id(f"ext[path={tmp_path}/external/a_{{dataset}}.trec]", dataset="test")
    assert read_cell_run(results.run_dir, cell) == read_cell_run(results.run_dir, a_cell)
    assert pd.isna(tuned["latency_mean_ms"])  # run files: not measured, and so not for the tuned row
    report = results.report(tmp_path / "report").read_text(encoding="utf-8")
    section = report.split("## Best configuration per dataset", 1)[1].split("\n## ", 1)[0]
    # the answer: best[nested], here the one tuned row's train choice; then the per-row figures beside it
    assert "| test | 0.5000 | ext[tuned] (1 of 1) | ext[tuned] | 0.5000 | best mrr@10 on train |" in section.replace(
        "**", ""
    )
    assert "b_{dataset}.trec" in section and "1.0000" in section  # the optimistic pick on test, beside it
    comparisons = results.compare(baseline="ext[tuned]")  # a tuned row takes part in comparisons
    assert set(comparisons[comparisons["dataset"] == "test"]["system"]) == {
        f"ext[path={tmp_path}/external/a_{{dataset}}.trec]",
        f"ext[path={tmp_path}/external/b_{{dataset}}.trec]",
    }


def test_k_fold_rows_choose_per_fold_on_the_other_folds(tmp_path):
    results = experiment(tmp_path, "[tuning]\nfolds = 3\n").run(progress=False)
    cell = results.cell_id("ext[tuned]", dataset="test")
    folds = assign_folds(list(TEST_QUERIES), 3, 0)
    grid = [results.cell_id(f"ext[path={tmp_path}/external/{n}_{{dataset}}.trec]", dataset="test") for n in "ab"]
    values = [read_cell_per_query(results.run_dir, g, "ndcg@10") for g in grid]
    expected = {}
    for fold in range(3):
        others = [q for q in TEST_QUERIES if folds[q] != fold]
        means = [np.mean([v[q] for q in others]) for v in values]
        chosen = grid[int(np.argmax(means))]
        for q in TEST_QUERIES:
            if folds[q] == fold:
                expected[q] = read_cell_run(results.run_dir, chosen)[q]
    assert read_cell_run(results.run_dir, cell) == expected
    tuning = load_result(results.run_dir, cell)["stats"]["tuning"]
    assert [c["fold"] for c in tuning["choices"]] == [0, 1, 2] and sum(c["answers"] for c in tuning["choices"]) == 6


def test_folds_are_deterministic_per_seed_and_cover_every_query_once():
    qids = [f"q{i}" for i in range(23)]
    first = assign_folds(qids, 5, seed=7)
    assert first == assign_folds(qids, 5, seed=7)
    assert first != assign_folds(qids, 5, seed=8)
    assert set(first) == set(qids)
    sizes = np.bincount(list(first.values()), minlength=5)
    assert sizes.sum() == 23 and sizes.max() - sizes.min() <= 1


@pytest.mark.parametrize(
    ("tuning", "needle"),
    [
        ("[tuning]\nfold = 3\n", "did you mean 'folds'"),
        ("[tuning]\nfolds = 1\n", "[tuning].folds: give at least 2 folds"),
        ('[tuning]\nmeasure = "map@10"\n', "map@10 is not a measure of dataset 'test'"),
        ('[tuning]\ntrain = { "test" = "tran" }\n', "did you mean 'train'"),
        (
            '[tuning]\ntrain = { "test" = "beir/scifact/train" }\n',
            "'beir/scifact/train' must be listed in [[datasets]]",
        ),
        ('[tuning]\ntrain = { "test" = "test" }\n', "cannot be its own train split"),
    ],
)
def test_tuning_mistakes_are_one_line_config_errors(tmp_path, tuning, needle):
    with pytest.raises(ConfigError, match=re.escape(needle)) as info:
        experiment(tmp_path, tuning)
    assert "\n" not in str(info.value)


def test_tune_without_a_grid_and_tuning_without_a_tuned_entry_are_errors(tmp_path):
    folder = write_trec_folder(tmp_path / "test", DOCS, TEST_QUERIES, TEST_QRELS)
    base = experiment_header(tmp_path, "x") + f'[[datasets]]\nname = "t"\npath = "{folder}"\nformat = "trec"\n'
    no_grid = base + '[[systems]]\nname = "bm25"\nfamily = "zerda.keyword"\ntune = true\n'
    (tmp_path / "a.toml").write_text(no_grid, encoding="utf-8")
    with pytest.raises(ConfigError, match=r"systems\[0\].tune: the entry has no grid to tune"):
        Experiment.from_toml(tmp_path / "a.toml")
    untuned = base + '[[systems]]\nname = "bm25"\nfamily = "zerda.keyword"\n[tuning]\nfolds = 3\n'
    (tmp_path / "b.toml").write_text(untuned, encoding="utf-8")
    with pytest.raises(ConfigError, match=r"\[tuning\]: no \[\[systems\]\] or \[\[fusions\]\] entry has tune = true"):
        Experiment.from_toml(tmp_path / "b.toml")
    keep = base + '[[systems]]\nname = "b"\nfamily = "zerda.keyword"\ngrid = { b = [0.5, 0.75] }\n'
    (tmp_path / "c.toml").write_text(keep + 'tune = { keep = ["k1"] }\n', encoding="utf-8")
    with pytest.raises(ConfigError, match=r"unknown grid axis in tune.keep 'k1'"):
        Experiment.from_toml(tmp_path / "c.toml")


def test_a_train_split_of_another_corpus_is_refused_before_any_cell_runs(tmp_path):
    other = {**DOCS, "d7": "one more document"}
    tuned = experiment(tmp_path, '[tuning]\ntrain = { "test" = "train" }\n', train_docs=other)
    with pytest.raises(DatasetError, match=r"\[tuning\].train: .* do not hold the same documents"):
        tuned.run(progress=False)
    assert not (tuned.output_dir / "cells").exists()


def test_a_train_split_of_another_corpus_with_the_same_doc_ids_is_refused(tmp_path):
    """The ids match, the documents do not: a choice made there says nothing of the tuned corpus."""
    other = {doc: f"another text {i}" for i, doc in enumerate(DOCS)}
    tuned = experiment(tmp_path, '[tuning]\ntrain = { "test" = "train" }\n', train_docs=other)
    with pytest.raises(DatasetError, match=r"\[tuning\].train: .* do not hold the same documents") as error:
        tuned.run(progress=False)
    assert "\n" not in str(error.value) and not (tuned.output_dir / "cells").exists()


def test_train_queries_that_are_test_questions_with_punctuation_added_are_refused(tmp_path):
    train = {**TRAIN_QUERIES, "r2": "Test question 2?", "r5": "test-question, 5!"}
    tuned = experiment(tmp_path, '[tuning]\ntrain = { "test" = "train" }\n', train_queries=train)
    with pytest.raises(DatasetError, match=r"2 queries of train split .* are test queries .* e\.g\. 'r2', 'r5'"):
        tuned.run(progress=False)
    assert not (tuned.output_dir / "cells").exists()


def test_the_same_question_is_the_same_words_after_the_harness_analysis():
    """Case, punctuation (Latin and Arabic), diacritics and spacing are left out; one-letter words are not."""
    test = {"t1": "ما هو أطول نهر في أفريقيا", "t2": "Is vitamin D linked to diabetes", "t3": "Type 1 diabetes"}
    train = {
        "a": "ما هو أطولُ نهرٍ في أفريقيا؟",  # diacritics and an Arabic question mark
        "b": "is Vitamin D linked to diabetes?!",
        "c": "Is vitamin E linked to diabetes",  # another question: one letter apart
        "d": "Type 2 diabetes",
        "e": "type   1 diabetes.",
    }
    assert train_overlap(test, train) == ["a", "b", "e"]


def test_the_rrf_order_study_pairs_tuned_rows_of_each_order():
    """``tune = { keep = ["rrf_order"] }`` gives one tuned row per order; the study pairs them as a setting."""
    rows = []
    for order in ("as_documented", "fixed"):
        for weight in (0.3, 0.6):
            params = {"rrf_order": order, "vector_weight": weight}
            rows.append({"dataset": "d", "system": f"h[rrf_order={order},vector_weight={weight}]", "params": params})
        tuned = {"rrf_order": order, "tuned": "5-fold cross-validation on ndcg@10"}
        rows.append({"dataset": "d", "system": f"h[rrf_order={order},tuned]", "params": tuned})
    results = pd.DataFrame([r | {"params": json.dumps(r["params"]), "cell_id": f"c{i}"} for i, r in enumerate(rows)])
    pairs = rrf_order.pairs_of(results, "h")
    assert "tuned=5-fold cross-validation on ndcg@10" in set(pairs["setting"])
    tuned_pair = pairs[pairs["setting"].str.startswith("tuned")].iloc[0]
    assert (tuned_pair["as_documented"], tuned_pair["fixed"]) == ("c2", "c5")


def test_best_configurations_put_the_best_held_out_row_beside_the_best_picked_on_test():
    from zerda_eval.analysis.best import best_configurations

    rows = [
        ("d", "bm25[b=0.4]", "zerda.keyword", {"b": 0.4}, 0.61),
        ("d", "bm25[b=0.75]", "zerda.keyword", {"b": 0.75}, 0.66),
        ("d", "bm25[tuned]", "tuned", {"tuned": "5-fold cross-validation on ndcg@10"}, 0.63),
        ("d", "rrf[tuned]", "tuned", {"tuned": "5-fold cross-validation on ndcg@10"}, 0.64),
        ("e", "bm25[b=0.4]", "zerda.keyword", {"b": 0.4}, 0.2),
    ]
    results = pd.DataFrame(
        [{"dataset": d, "system": s, "family": f, "params": json.dumps(p), "ndcg@10": v} for d, s, f, p, v in rows]
    )
    best = best_configurations(results, {"measure": "ndcg@10"}).set_index("dataset")
    assert list(best.index) == ["d"]  # "e" has no tuned row
    assert best.loc["d", "held_out"] == "rrf[tuned]" and best.loc["d", "held_out_value"] == 0.64
    assert best.loc["d", "on_test"] == "bm25[b=0.75]" and best.loc["d", "on_test_value"] == 0.66
    assert best.loc["d", "chosen_by"] == "5-fold cross-validation on ndcg@10"
    assert best_configurations(results, {}).empty
