"""Tuned inputs, then a tuned fusion, per fold; a learned fusion (LTR) fitted without the held-out queries.

The expected runs are assembled here from plain dicts (the run files' rankings, a hand MRR, a hand
min-max weighted sum, scikit-learn fitted on features built here), never by the code under test.
"""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.ensemble import HistGradientBoostingClassifier
from sklearn.linear_model import LogisticRegression

from tests.conftest import experiment_header, trec_dataset, write_trec_folder
from zerda_eval import Experiment
from zerda_eval.errors import ConfigError
from zerda_eval.execution import tuned_fusion
from zerda_eval.execution.tuning import assign_folds
from zerda_eval.fusion import fuse_runs
from zerda_eval.fusion.simplex import simplex_weights
from zerda_eval.store.run_dir import load_result, read_cell_run

N_QUERIES, N_DOCS, FOLDS = 12, 10, 3
DOCS = {f"d{i}": f"document number {i}" for i in range(N_DOCS)}
QUERIES = {
    f"q{i}": " ".join(["question"] * (1 + i % 3)) + f" n{i:02d}" for i in range(N_QUERIES)
}  # words of 2+ letters
RNG = np.random.default_rng(7)
QRELS = {q: {f"d{d}" for d in RNG.choice(N_DOCS, size=2, replace=False)} for q in QUERIES}
WEIGHTS = [[0.8, 0.2], [0.5, 0.5], [0.2, 0.8]]


def random_run(rng: np.random.Generator) -> dict[str, list[tuple[str, float]]]:
    """Six documents per query with random scores, best first (scores are distinct)."""
    run = {}
    for q in QUERIES:
        docs = rng.choice(N_DOCS, size=6, replace=False)
        scores = np.round(rng.uniform(0, 10, size=6), 4)
        run[q] = sorted(((f"d{d}", float(s)) for d, s in zip(docs, scores, strict=True)), key=lambda p: -p[1])
    return run


RUNS = {name: random_run(np.random.default_rng(seed)) for name, seed in (("a", 1), ("b", 2), ("c", 3))}
# a train split of the same documents: its own queries (renamed), qrels and runs
TRAIN_QUERIES = {f"r{q[1:]}": f"train {text}" for q, text in QUERIES.items()}
TRAIN_RUNS = {
    name: {f"r{q[1:]}": r for q, r in random_run(np.random.default_rng(seed)).items()}
    for name, seed in (("a", 11), ("b", 12), ("c", 13))
}


def ranked(scores: dict[str, float]) -> list[tuple[str, float]]:
    """trec_eval's tie-break, by hand: score descending, then doc id descending (bytes)."""
    by_id = sorted(scores.items(), key=lambda p: p[0].encode("utf-8"), reverse=True)
    return sorted(by_id, key=lambda p: -p[1])


def mrr(ranking: list[tuple[str, float]], qid: str) -> float:
    relevant = QRELS[qid] if qid in QRELS else QRELS[f"q{qid[1:]}"]  # a train query r<i> shares q<i>'s qrels
    for rank, (doc, _) in enumerate(ranking[:10], start=1):
        if doc in relevant:
            return 1.0 / rank
    return 0.0


def minmax(ranking: list[tuple[str, float]]) -> dict[str, float]:
    scores = dict(ranking)
    low, high = min(scores.values()), max(scores.values())
    return {d: (s - low) / max(high - low, 1e-9) for d, s in scores.items()}


def wsum(rankings: list[list[tuple[str, float]]], weights: list[float]) -> list[tuple[str, float]]:
    normed = [minmax(r) for r in rankings]
    docs = dict.fromkeys(d for r in rankings for d, _ in r)
    fused = {}
    for d in docs:
        total = 0.0
        for w, n in zip(weights, normed, strict=True):
            total += w * n.get(d, 0.0)
        fused[d] = total
    return ranked(fused)


def mean(values: list[float]) -> float:
    return sum(values) / len(values)


def build(tmp_path, fusions: str, tuning: str = f'[tuning]\nmeasure = "mrr@10"\nfolds = {FOLDS}\n') -> Experiment:
    qrels = [(q, d, 1) for q, docs in QRELS.items() for d in sorted(docs)]
    folder = write_trec_folder(tmp_path / "data", DOCS, QUERIES, qrels)
    train = write_trec_folder(tmp_path / "train", DOCS, TRAIN_QUERIES, [(f"r{q[1:]}", d, g) for q, d, g in qrels])
    runs = tmp_path / "external"
    runs.mkdir()
    for dataset, named in (("toy", RUNS), ("train", TRAIN_RUNS)):
        for name, run in named.items():
            rows = [f"{q} Q0 {d} {r} {s} x\n" for q, ranking in run.items() for r, (d, s) in enumerate(ranking, 1)]
            (runs / f"{name}_{dataset}.trec").write_text("".join(rows), encoding="utf-8")
    train_entry = trec_dataset("train", train) if "train =" in tuning else ""
    path = tmp_path / "fuse.toml"
    path.write_text(
        experiment_header(tmp_path, "fuse", '["mrr@10", "ndcg@10"]')
        + trec_dataset("toy", folder)
        + train_entry
        + f"""
[[systems]]
name = "grid"
family = "run_file"
grid = {{ path = ["{runs}/a_{{dataset}}.trec", "{runs}/b_{{dataset}}.trec"] }}
tune = true

[[systems]]
name = "third"
family = "run_file"
params = {{ path = "{runs}/c_{{dataset}}.trec" }}
"""
        + fusions
        + tuning,
        encoding="utf-8",
    )
    return Experiment.from_toml(path)


WSUM_OVER_TUNED = f"""
[[fusions]]
name = "fz"
inputs = ["grid[tuned]", "third"]
method = "wsum"
grid = {{ weights = {WEIGHTS} }}
tune = true
"""


def folds() -> dict[int, tuple[list[str], list[str]]]:
    dealt = assign_folds(list(QUERIES), FOLDS, 0, QUERIES)
    return {f: ([q for q in QUERIES if dealt[q] != f], [q for q in QUERIES if dealt[q] == f]) for f in range(FOLDS)}


def test_a_fusion_over_a_tuned_input_equals_the_hand_assembled_run(tmp_path):
    results = build(tmp_path, WSUM_OVER_TUNED).run(progress=False)
    cell = results.cell_id("fz[tuned]", dataset="toy")
    expected, chosen = {}, []
    for _fold, (train, held_out) in folds().items():
        means = [mean([mrr(RUNS[name][q], q) for q in train]) for name in "ab"]
        best = "ab"[max(range(2), key=lambda i: (means[i], -i))]
        fused_means = [mean([mrr(wsum([RUNS[best][q], RUNS["c"][q]], w), q) for q in train]) for w in WEIGHTS]
        weights = WEIGHTS[max(range(len(WEIGHTS)), key=lambda i: (fused_means[i], -i))]
        chosen.append((best, weights))
        for q in held_out:
            expected[q] = wsum([RUNS[best][q], RUNS["c"][q]], weights)
    got = read_cell_run(results.run_dir, cell)
    assert {q: [d for d, _ in r] for q, r in got.items()} == {q: [d for d, _ in r] for q, r in expected.items()}
    for q in QUERIES:
        assert [s for _, s in got[q]] == pytest.approx([s for _, s in expected[q]], abs=1e-12)
    choices = load_result(results.run_dir, cell)["stats"]["tuning"]["choices"]
    assert [(c["inputs"][0].split("/")[-1][0], c["chosen"]) for c in choices] == [
        (best, f"fz[weights={w}]") for best, w in chosen
    ]
    assert [c["inputs"][1] for c in choices] == ["third"] * FOLDS
    assert results.table.set_index("system").loc["fz[tuned]", "mrr@10"] == pytest.approx(
        mean([mrr(expected[q], q) for q in QUERIES])
    )
    assert not any(label.startswith("fz[weights") for label in results.table["system"])  # no grid rows
    report = results.report(tmp_path / "report", formats=("markdown",)).read_text(encoding="utf-8")
    section = report[report.index("### What each fold chose") :]
    for fold, (best, weights) in enumerate(chosen):
        line = next(line for line in section.splitlines() if line.startswith(f"| toy | fz[tuned] | {fold} |"))
        assert f"{best}_{{dataset}}.trec" in line and "third" in line and str(weights) in line


def test_each_choice_sees_only_the_other_folds_queries(tmp_path, monkeypatch):
    seen: list[set[str]] = []
    real = tuned_fusion.best_variant

    def spying(values, qids):
        seen.append(set(qids))
        return real(values, qids)

    monkeypatch.setattr(tuned_fusion, "best_variant", spying)
    build(tmp_path, WSUM_OVER_TUNED).run(progress=False)
    per_fold = 3  # one choice for each of the two inputs, then one for the fusion
    assert len(seen) == FOLDS * per_fold
    for f, (train, held_out) in folds().items():
        for qids in seen[f * per_fold : (f + 1) * per_fold]:
            assert qids == set(train) and not qids & set(held_out)


def test_with_a_train_split_inputs_and_fusion_are_chosen_on_the_train_queries_alone(tmp_path, monkeypatch):
    seen: list[set[str]] = []
    real = tuned_fusion.best_variant

    def spying(values, qids):
        seen.append(set(qids))
        return real(values, qids)

    monkeypatch.setattr(tuned_fusion, "best_variant", spying)
    tuning = '[tuning]\nmeasure = "mrr@10"\ntrain = { "toy" = "train" }\n'
    results = build(tmp_path, WSUM_OVER_TUNED, tuning).run(progress=False)
    assert seen == [set(TRAIN_QUERIES)] * 3
    train = list(TRAIN_QUERIES)
    means = [mean([mrr(TRAIN_RUNS[name][q], q) for q in train]) for name in "ab"]
    best = "ab"[max(range(2), key=lambda i: (means[i], -i))]
    fused = [mean([mrr(wsum([TRAIN_RUNS[best][q], TRAIN_RUNS["c"][q]], w), q) for q in train]) for w in WEIGHTS]
    weights = WEIGHTS[max(range(len(WEIGHTS)), key=lambda i: (fused[i], -i))]
    got = read_cell_run(results.run_dir, results.cell_id("fz[tuned]", dataset="toy"))
    expected = {q: wsum([RUNS[best][q], RUNS["c"][q]], weights) for q in QUERIES}
    assert {q: [d for d, _ in r] for q, r in got.items()} == {q: [d for d, _ in r] for q, r in expected.items()}
    assert "fz[tuned]" not in set(results.table.loc[results.table["dataset"] == "train", "system"])


def ltr_features(rankings: list[list[tuple[str, float]]], query: str) -> tuple[list[str], np.ndarray]:
    """The documented features, built by hand: per input min-max score, 1/rank, presence; query tokens."""
    docs = list(dict.fromkeys(d for r in rankings for d, _ in r))
    rows = []
    for d in docs:
        row = []
        for r in rankings:
            ranks = {doc: i for i, (doc, _) in enumerate(r, start=1)}
            row += [minmax(r).get(d, 0.0), 1.0 / ranks[d] if d in ranks else 0.0, float(d in ranks)]
        rows.append([*row, float(len(query.split()))])
    return docs, np.array(rows)


@pytest.mark.parametrize(
    ("model", "estimator"),
    [
        ("logistic", lambda: LogisticRegression(max_iter=1000, random_state=0)),
        ("hgb", lambda: HistGradientBoostingClassifier(random_state=0)),
    ],
)
def test_learned_fusion_is_fitted_per_fold_without_its_queries_and_scores_as_sklearn(
    tmp_path, monkeypatch, model, estimator
):
    fitted_on: list[set[str]] = []
    real = tuned_fusion.training_set

    def spying(runs, queries, relevant, qids):
        fitted_on.append(set(qids))
        return real(runs, queries, relevant, qids)

    monkeypatch.setattr(tuned_fusion, "training_set", spying)
    fusion = '\n[[fusions]]\nname = "learned"\ninputs = ["grid[tuned]", "third"]\nmethod = "ltr"\ntune = true\n'
    fusion += f'params = {{ model = "{model}" }}\n'
    results = build(tmp_path, fusion).run(progress=False)
    got = read_cell_run(results.run_dir, results.cell_id("learned[tuned]", dataset="toy"))
    for f, (train, held_out) in folds().items():
        assert fitted_on[f] == set(train) and not fitted_on[f] & set(held_out)
        means = [mean([mrr(RUNS[name][q], q) for q in train]) for name in "ab"]
        best = "ab"[max(range(2), key=lambda i: (means[i], -i))]
        blocks, labels = [], []
        for q in train:
            docs, features = ltr_features([RUNS[best][q], RUNS["c"][q]], QUERIES[q])
            blocks.append(features)
            labels += [d in QRELS[q] for d in docs]
        fitted = estimator().fit(np.vstack(blocks), np.array(labels, dtype=int))
        for q in held_out:
            docs, features = ltr_features([RUNS[best][q], RUNS["c"][q]], QUERIES[q])
            expected = ranked(dict(zip(docs, fitted.decision_function(features).tolist(), strict=True)))
            assert [d for d, _ in got[q]] == [d for d, _ in expected]
            assert [s for _, s in got[q]] == pytest.approx([s for _, s in expected], rel=1e-9, abs=1e-9)


def test_three_way_weights_tuned_over_the_simplex(tmp_path):
    fusion = """
[[fusions]]
name = "three"
inputs = ["grid[tuned]", "third", "grid[path=PATH]"]
method = "wsum"
grid = { weights = { simplex = 0.5 } }
tune = true
""".replace("PATH", f"{tmp_path}/external/b_{{dataset}}.trec")
    results = build(tmp_path, fusion).run(progress=False)
    cell = results.cell_id("three[tuned]", dataset="toy")
    simplex = [[0.0, 0.0, 1.0], [0.0, 0.5, 0.5], [0.0, 1.0, 0.0], [0.5, 0.0, 0.5], [0.5, 0.5, 0.0], [1.0, 0.0, 0.0]]
    expected = {}
    for _fold, (train, held_out) in folds().items():
        means = [mean([mrr(RUNS[name][q], q) for q in train]) for name in "ab"]
        best = "ab"[max(range(2), key=lambda i: (means[i], -i))]
        inputs = [RUNS[best], RUNS["c"], RUNS["b"]]
        fused_means = [mean([mrr(wsum([r[q] for r in inputs], w), q) for q in train]) for w in simplex]
        weights = simplex[max(range(len(simplex)), key=lambda i: (fused_means[i], -i))]
        expected.update({q: wsum([r[q] for r in inputs], weights) for q in held_out})
    got = read_cell_run(results.run_dir, cell)
    assert {q: [d for d, _ in r] for q, r in got.items()} == {q: [d for d, _ in r] for q, r in expected.items()}


@pytest.mark.parametrize(
    ("fusion", "needle"),
    [
        ('inputs = ["grid[tuned]", "third"]\nmethod = "rrf"\n', "add tune = true"),
        ('inputs = ["grid", "third"]\nmethod = "ltr"\ntune = true\n', '"grid[tuned]"'),
        ('inputs = ["third[tuned]", "grid[tuned]"]\nmethod = "rrf"\ntune = true\n', "not tuned"),
        ('inputs = ["nope[tuned]", "third"]\nmethod = "rrf"\ntune = true\n', "unknown tuned system"),
        (
            'inputs = ["grid[tuned]", "third"]\nmethod = "ltr"\ngrid = { model = ["logistic", "hgb"] }\ntune = true\n',
            "one model per [[fusions]] entry",
        ),
        (
            'inputs = ["grid[tuned]", "third"]\nmethod = "wsum"\ngrid = { weights = { simplex = 0.3 } }\ntune = true\n',
            "must divide 1",
        ),
    ],
)
def test_staged_fusion_mistakes_are_one_line_config_errors(tmp_path, fusion, needle):
    with pytest.raises(ConfigError, match=None) as caught:
        build(tmp_path, f'\n[[fusions]]\nname = "f"\n{fusion}')
    assert needle in str(caught.value) and "\n" not in str(caught.value)


def test_simplex_weights_are_every_step_vector_summing_to_one():
    assert simplex_weights(2, 0.25) == [[0.0, 1.0], [0.25, 0.75], [0.5, 0.5], [0.75, 0.25], [1.0, 0.0]]
    three = simplex_weights(3, 0.1)
    by_hand = sorted([a / 10, b / 10, (10 - a - b) / 10] for a in range(11) for b in range(11 - a))
    assert len(three) == 66 and three == by_hand
    with pytest.raises(ConfigError, match="must divide 1"):
        simplex_weights(3, 0.3)


def test_a_learned_fusion_cannot_be_fused_without_training_queries():
    with pytest.raises(ConfigError, match="tuned"):
        fuse_runs("ltr", [{"q": [("d", 1.0)]}, {"q": [("d", 2.0)]}])


def test_a_simplex_weight_axis_counts_as_its_vectors_against_max_cells():
    from zerda_eval.config.experiment import resolve_experiment

    systems = [
        {"name": n, "family": "zerda.keyword", "params": {"k1": k1}} for n, k1 in (("a", 1.0), ("b", 1.5), ("c", 2.0))
    ]
    fusion = {"name": "f", "inputs": ["a", "b", "c"], "method": "wsum", "grid": {"weights": {"simplex": 0.1}}}
    raw = {"experiment": {"name": "x", "max_cells": 50}, "datasets": [{"id": "cranfield"}], "systems": systems}
    with pytest.raises(ConfigError, match=r"69 cells .*weights 66"):
        resolve_experiment({**raw, "fusions": [fusion]}, "t.toml")
