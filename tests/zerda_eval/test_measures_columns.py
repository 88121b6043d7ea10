"""``evaluate_columns`` (the measures of a columnar run) equals pytrec_eval (trec_eval) to 1e-12 and
``evaluate_run`` (the dict path) exactly, on random runs with ties, unjudged docs and missing queries."""

from __future__ import annotations

import numpy as np
import pytest

from tests.zerda_eval.test_measures import ALL_FAMILIES, random_run_and_qrels, trec_eval_values
from zerda_eval.columnar import from_run
from zerda_eval.evaluation.measures import evaluate_columns, evaluate_run

# Every kernel family, whole-ranking measures (which read each ranking to its end) and relevance levels.
EVERY_NAME = [
    *("nDCG", "AP", "RR", "Rprec", "Bpref", "NumRet", "NumRel", "NumRelRet", "Judged@10", "Success@5"),
    *("P(rel=2)@10", "R(rel=2)@100", "AP(rel=3)@100", "nDCG@20"),
]


@pytest.mark.parametrize("seed", range(5))
def test_evaluate_columns_equals_trec_eval_on_random_runs_with_ties(seed):
    run, qrels = random_run_and_qrels(seed)
    values = evaluate_columns(from_run(run), qrels, ALL_FAMILIES)
    for measure in ALL_FAMILIES:
        reference = trec_eval_values(run, qrels, measure)
        assert values[measure].tolist() == pytest.approx([reference[qid] for qid in qrels], abs=1e-12, rel=0)


@pytest.mark.parametrize("seed", range(5))
def test_evaluate_columns_equals_evaluate_run_exactly_on_every_measure(seed):
    run, qrels = random_run_and_qrels(seed)
    qrels["q-empty"] = {}  # a query without judgements is not evaluated, by either path
    qrels["q-unranked-docs"] = {"never-ranked": 2}
    columns = evaluate_columns(from_run(run), qrels, EVERY_NAME)
    expected = evaluate_run(run, qrels, EVERY_NAME)
    for measure in EVERY_NAME:
        assert dict(zip(expected[measure], columns[measure].tolist(), strict=True)) == expected[measure], measure


def test_a_run_sharing_no_doc_with_the_qrels_scores_zero():
    run = from_run({"q": [("a", 1.0), ("b", 0.5)]})
    values = evaluate_columns(run, {"q": {"z": 1}}, ["nDCG@10", "NumRet", "NumRel"])
    assert {m: v.tolist() for m, v in values.items()} == {"nDCG@10": [0.0], "NumRet": [2.0], "NumRel": [1.0]}


def test_no_judged_query_gives_empty_values():
    values = evaluate_columns(from_run({"q": [("a", 1.0)]}), {"q": {}}, ["nDCG@10"])
    assert values["nDCG@10"].size == 0 and np.asarray(values["nDCG@10"]).dtype == np.float64


@pytest.mark.parametrize("seed", range(3))
def test_evaluate_run_given_a_columnar_run_equals_trec_eval(seed):
    run, qrels = random_run_and_qrels(seed)  # the grid's cells evaluate ColumnarRuns through evaluate_run
    values = evaluate_run(from_run(run), qrels, ALL_FAMILIES)
    for measure in ALL_FAMILIES:
        reference = trec_eval_values(run, qrels, measure)
        assert values[measure] == pytest.approx({qid: reference[qid] for qid in qrels}, abs=1e-12, rel=0)
