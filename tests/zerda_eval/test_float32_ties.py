"""Scores that differ as float64 but round to one float32 tie, as in trec_eval (its ``TEXT_RESULTS.sim`` is a
C ``float``): they rank by doc id descending, and every number equals pytrec_eval's (trec_eval's code).

Found at 3M passages (``bench_scale.py``): two BM25 scores 31.04191622678287 (p1756144, not relevant) and
31.041915632243352 (p967757, relevant) are one float32; trec_eval ranks p967757 first, the float64 order the
other, and MAP@100 differed by 1.5e-5 on that query.
"""

from __future__ import annotations

import numpy as np
import pytest

from tests.zerda_eval.test_measures import ALL_FAMILIES, trec_eval_values
from zerda_eval.columnar import from_run
from zerda_eval.evaluation.measures import evaluate_columns, evaluate_run
from zerda_eval.evaluation.tie_aware import HIGH, LOW, tie_aware_run
from zerda_eval.fusion import fuse_runs
from zerda_eval.fusion.columns import fuse_columns
from zerda_eval.ranking import tie_break

HIGH_SCORE, LOW_SCORE = 31.04191622678287, 31.041915632243352  # distinct doubles, one float32


def near_tie_run() -> tuple[dict, dict]:
    """Queries whose only difference between the two orders is a pair of float32-equal scores."""
    assert HIGH_SCORE > LOW_SCORE and np.float32(HIGH_SCORE) == np.float32(LOW_SCORE)
    run = {
        "q1": [("p1756144", HIGH_SCORE), ("p967757", LOW_SCORE), ("p5", 30.0), ("p6", 29.0)],
        "q2": [("a", 1.0 + 2**-40), ("b", 1.0), ("c", 0.5)],  # "b" first in trec_eval
        "q3": [("z", 2.0), ("y", 1.0)],  # no tie: float64 and float32 orders agree
    }
    qrels = {"q1": {"p967757": 1, "p5": 2, "x": 1}, "q2": {"b": 2, "c": 1}, "q3": {"y": 1}}
    return run, qrels


def test_float32_ties_rank_by_doc_id_descending_keeping_each_score():
    run, _ = near_tie_run()
    assert tie_break(run["q1"])[:2] == [("p967757", LOW_SCORE), ("p1756144", HIGH_SCORE)]
    assert tie_break(run["q2"])[:2] == [("b", 1.0), ("a", 1.0 + 2**-40)]
    assert from_run(run)["q1"] == tie_break(run["q1"])


@pytest.mark.parametrize("columnar", [False, True])
def test_every_measure_equals_trec_eval_on_float32_ties(columnar):
    run, qrels = near_tie_run()
    given = from_run(run) if columnar else run
    values = evaluate_run(given, qrels, ALL_FAMILIES)
    for measure in ALL_FAMILIES:
        reference = trec_eval_values(run, qrels, measure)
        assert values[measure] == pytest.approx(reference, abs=1e-12, rel=0), measure
    table = evaluate_columns(from_run(run), qrels, ["map@100"])["map@100"].tolist()
    assert table == pytest.approx([values["map@100"][q] for q in qrels], abs=1e-15)
    assert values["map@100"]["q1"] == pytest.approx((1 / 1 + 2 / 3) / 3, abs=1e-15)  # by hand


def test_a_float32_tie_is_a_tie_for_the_tie_aware_bounds():
    run, qrels = near_tie_run()
    bounds = tie_aware_run(run, qrels, ["P@1"])
    assert (bounds[LOW]["P@1"]["q1"], bounds[HIGH]["P@1"]["q1"]) == (0.0, 1.0)  # either doc can be first
    assert bounds == tie_aware_run(from_run(run), qrels, ["P@1"])


def test_fused_scores_tied_as_float32_rank_by_doc_id_in_both_fusion_paths():
    first = {"q": [("a", 0.1), ("b", 0.2), ("c", 0.3)]}
    second = {"q": [("a", 0.2 + 1e-12), ("b", 0.1), ("c", 0.0)]}  # sums 0.3 + 1e-12, 0.3 + 4e-17, 0.3
    fused = fuse_runs("combsum", [first, second], score_norm="none")
    assert [doc for doc, _ in fused["q"]] == ["c", "b", "a"]  # one float32: doc id descending
    assert fuse_columns("combsum", [from_run(first), from_run(second)], score_norm="none").to_dict() == fused
