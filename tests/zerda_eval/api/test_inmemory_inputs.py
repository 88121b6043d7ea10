"""The in-memory API ranks by score, whatever the container's order, and refuses what it cannot rank.

References: pytrec_eval (trec_eval) and ir_measures on the same runs with their own tie-break, a run file
whose lines are shuffled, ranx-style dicts, DataFrames, and hand-written expectations for every refusal.
"""

from __future__ import annotations

import random
import warnings

import ir_measures
import numpy as np
import pandas as pd
import pytest
import pytrec_eval

import zerda_eval as ze
from zerda_eval.errors import ConfigError, RunError, ZerdaEvalWarning

IDS = [f"d{i}" for i in range(30)] + ["D4", "d04", "é", "z"]
IR_MEASURES = ["nDCG@10", "AP", "P@5", "RR", "R@20", "nDCG", "Rprec", "Bpref", "Success@3"]
TREC_NAMES = {  # our name -> (pytrec_eval measure, its key)
    "nDCG@10": ("ndcg_cut.10", "ndcg_cut_10"),
    "AP": ("map", "map"),
    "P@5": ("P.5", "P_5"),
    "RR": ("recip_rank", "recip_rank"),
    "R@20": ("recall.20", "recall_20"),
    "nDCG": ("ndcg", "ndcg"),
    "Rprec": ("Rprec", "Rprec"),
    "Bpref": ("bpref", "bpref"),
    "Success@3": ("success.3", "success_3"),
}


def tied_run_and_qrels(seed: int) -> tuple[dict, dict]:
    """A run with many tied scores, each query's docs in a shuffled order, and graded qrels."""
    rng = np.random.default_rng(seed)
    run, qrels = {}, {}
    for q in range(12):
        qid = f"q{q}"
        docs = rng.choice(IDS, size=int(rng.integers(3, 30)), replace=False).tolist()
        run[qid] = {doc: float(rng.integers(0, 5)) for doc in docs}
        judged = rng.choice(IDS, size=8, replace=False).tolist()
        qrels[qid] = {doc: int(rng.integers(0, 3)) for doc in judged}
    return run, qrels


@pytest.mark.parametrize("seed", range(3))
def test_evaluate_with_ties_equals_pytrec_eval_and_ir_measures(seed):
    run, qrels = tied_run_and_qrels(seed)
    ours = ze.evaluate(qrels, run, IR_MEASURES, per_query=True)
    names = {trec for trec, _ in TREC_NAMES.values()}
    reference = pytrec_eval.RelevanceEvaluator(qrels, names).evaluate(run)
    for measure, (_, key) in TREC_NAMES.items():
        worst = max(abs(ours[measure][qid] - reference[qid][key]) for qid in qrels)
        assert worst < 1e-12, (measure, worst)
    theirs = {
        (m.measure, m.query_id): m.value
        for m in ir_measures.iter_calc([ir_measures.parse_measure(name) for name in IR_MEASURES], qrels, run)
    }
    for measure in IR_MEASURES:
        for qid in qrels:
            assert ours[measure][qid] == pytest.approx(theirs[(ir_measures.parse_measure(measure), qid)], abs=1e-12)


def shuffled(run: dict, seed: int) -> dict:
    rng = random.Random(seed)
    out = {}
    for qid, scored in run.items():
        items = list(scored.items())
        rng.shuffle(items)
        out[qid] = dict(items)
    return out


def frame(run: dict, query_column: str = "q_id") -> pd.DataFrame:
    rows = [(qid, doc, score) for qid, scored in run.items() for doc, score in scored.items()]
    return pd.DataFrame(rows, columns=[query_column, "doc_id", "score"])


@pytest.mark.parametrize("method", ["rrf", "pipeline_rrf", "zerda", "combsum", "wsum"])
def test_fuse_ranks_dicts_dataframes_and_files_by_score_not_by_their_order(tmp_path, method):
    """The README's shape ``{qid: {doc: score}}`` in two insertion orders, a DataFrame, and a TREC file whose
    lines are shuffled all fuse to one run, in trec_eval's order."""
    first, _ = tied_run_and_qrels(1)
    second, _ = tied_run_and_qrels(2)
    expected = ze.fuse([first, second], method=method)
    assert ze.fuse([shuffled(first, 0), shuffled(second, 1)], method=method) == expected
    assert ze.fuse([frame(first), frame(second, "query_id")], method=method) == expected
    path = tmp_path / "second.trec"
    lines = [f"{qid} Q0 {doc} 1 {score!r} x" for qid, scored in second.items() for doc, score in scored.items()]
    random.Random(3).shuffle(lines)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert ze.fuse([first, ze.read_run(path)], method=method) == expected
    assert ze.fuse([first, ze.read_run(path, as_ranx=True)], method=method) == expected
    for ranking in expected.values():
        by_id = sorted(ranking, key=lambda item: item[0].encode("utf-8"), reverse=True)
        assert ranking == sorted(by_id, key=lambda item: -item[1])


def test_read_run_gives_trec_eval_order_and_rrf_uses_it(tmp_path):
    path = tmp_path / "run.trec"
    path.write_text("q1 Q0 a 1 1.0 x\nq1 Q0 c 2 3.0 x\nq1 Q0 b 3 1.0 x\n", encoding="utf-8")
    assert ze.read_run(path) == {"q1": [("c", 3.0), ("b", 1.0), ("a", 1.0)]}
    fused = ze.fuse([ze.read_run(path), {"q1": {"a": 1.0}}], method="rrf", k=0)
    assert fused == {"q1": [("a", 1 / 3 + 1.0), ("c", 1.0), ("b", 0.5)]}


def test_duplicates_are_an_error_unless_a_policy_is_given(tmp_path):
    path = tmp_path / "run.trec"
    path.write_text("q1 Q0 a 1 1.0 x\nq1 Q0 b 2 3.0 x\nq1 Q0 a 3 5.0 x\n", encoding="utf-8")
    with pytest.raises(RunError, match=rf"{path.name}, query 'q1': document 'a' is listed 2 times; .*'max'"):
        ze.read_run(path)
    assert ze.read_run(path, duplicates="max") == {"q1": [("a", 5.0), ("b", 3.0)]}
    assert ze.read_run(path, duplicates="first") == {"q1": [("b", 3.0), ("a", 1.0)]}
    listed = {"q1": [("a", 1.0), ("b", 3.0), ("a", 5.0)]}
    qrels = {"q1": {"a": 1}}
    with pytest.raises(RunError, match=r"run, query 'q1': document 'a' is listed 2 times"):
        ze.evaluate(qrels, listed, "RR")
    assert ze.evaluate(qrels, listed, "RR", duplicates="max") == 1.0
    assert ze.evaluate(qrels, listed, "RR", duplicates="first") == 0.5
    with pytest.raises(RunError, match=r"run 'run_1', query 'q1': document 'a' is listed 2 times"):
        ze.fuse([listed, {"q1": {"b": 1.0}}])
    assert ze.fuse([listed, {"q1": {"b": 1.0}}], duplicates="first", k=0) == {"q1": [("b", 2.0), ("a", 0.5)]}
    with pytest.raises(RunError, match=r"run 'x', query 'q1': document 'a' is listed 2 times"):
        ze.compare(qrels, {"x": listed, "y": {"q1": {"a": 1.0}}}, baseline="y")
    with pytest.raises(RunError, match=r"query 'q1': document 'a' is listed 2 times"):
        ze.evaluate(qrels, frame({"q1": {"a": 1.0}}).pipe(lambda f: pd.concat([f, f])), "RR")
    with pytest.raises(ConfigError, match=r"duplicates must be one of 'max', 'first', got 'last'"):
        ze.evaluate(qrels, listed, "RR", duplicates="last")


def test_a_run_sharing_no_query_with_the_qrels_is_refused():
    with pytest.raises(RunError, match=r"run shares no query id with the qrels \(run: '1', '2'; qrels: 'q1'\)"):
        ze.evaluate({"q1": {"a": 1}}, {"1": {"a": 1.0}, "2": {"a": 1.0}}, "RR")
    with pytest.raises(RunError, match=r"run 'x' shares no query id with the qrels"):
        ze.compare({"q1": {"a": 1}}, {"x": {"1": {"a": 1.0}}, "y": {"q1": {"a": 1.0}}}, baseline="y")
    with pytest.raises(RunError, match=r"run 'run_1' shares no query id with the qrels"):
        ze.optimize_fusion({"q1": {"a": 1}, "q2": {"a": 1}}, [{"1": {"a": 1.0}}, {"q1": {"a": 1.0}}], folds=2)


def test_partial_overlap_is_one_warning_with_the_counts():
    qrels = {"q1": {"a": 1}, "q2": {"a": 1}, "q3": {"a": 1}}
    with pytest.warns(ZerdaEvalWarning) as caught:
        assert ze.evaluate(qrels, {"q1": {"a": 1.0}, "q9": {"a": 1.0}}, "RR") == pytest.approx(1 / 3)
    assert [str(w.message) for w in caught] == [
        "run covers 1 of 3 judged queries (the other 2 score 0 in every mean); 1 of its 2 queries are not judged "
        "and are ignored"
    ]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ze.evaluate(qrels, {q: {"a": 1.0} for q in qrels}, "RR")  # full overlap: no warning


def test_fusing_runs_that_share_no_query_is_refused():
    with pytest.raises(RunError, match=r"input runs share no query id \(run 1: 'q1'; run 2: 'q2'\)"):
        ze.fuse([{"q1": {"a": 1.0}}, {"q2": {"a": 1.0}}])


@pytest.mark.parametrize("method", ["wsum", "rrf"])
def test_all_zero_weights_are_refused(method):
    with pytest.raises(ConfigError, match=rf"{method}.weights are all 0"):
        ze.fuse([{"q1": {"a": 1.0, "b": 0.5}}, {"q1": {"b": 1.0}}], method=method, weights=[0, 0])


def test_a_nan_score_is_refused_by_rrf_as_by_combsum_and_evaluate():
    bad = {"q1": {"a": float("nan"), "b": 1.0}}
    for call in (
        lambda: ze.fuse([bad, {"q1": {"a": 1.0}}], method="rrf"),
        lambda: ze.fuse([bad, {"q1": {"a": 1.0}}], method="combsum"),
        lambda: ze.evaluate({"q1": {"a": 1}}, bad, "RR"),
    ):
        with pytest.raises(RunError, match=r"query 'q1': non-finite score nan for document 'a'"):
            call()


@pytest.mark.parametrize("folds", [0, 1, -2, 4, 2.0, True])
def test_optimize_fusion_folds_outside_two_to_the_judged_queries_are_refused(folds):
    qrels = {"q1": {"a": 1}, "q2": {"b": 1}, "q3": {"a": 1}}
    runs = [{q: {"a": 1.0, "b": 0.5} for q in qrels}, {q: {"b": 1.0, "a": 0.5} for q in qrels}]
    with pytest.raises(ConfigError, match=rf"folds must be an integer from 2 to the 3 judged queries .*got {folds!r}"):
        ze.optimize_fusion(qrels, runs, folds=folds)


@pytest.mark.parametrize("measures", [None, [], 3, ["ndcg@10", None]])
def test_evaluate_with_no_measure_names_is_a_config_error(measures):
    with pytest.raises(ConfigError, match=r"evaluate: measures must be a measure name or a non-empty list"):
        ze.evaluate({"q1": {"a": 1}}, {"q1": {"a": 1.0}}, measures)
