"""Evaluation with the tie-break: a hand-computed example, empty results, and trec_eval agreement.

The agreement test runs real BM25 (the fast engine of ``zerda.keyword``) on EVERY bundled dataset and
compares every reported measure with pytrec_eval (trec_eval) to 1e-12; random graded runs with ties,
missing queries and all-zero judgements are compared the same way.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from zerda_eval.errors import ConfigError, RunError
from zerda_eval.evaluation.efficiency import Efficiency
from zerda_eval.evaluation.measures import DEFAULT_MEASURES, aggregate_values, evaluate_run
from zerda_eval.ranking import order_run, ranked_arrays, tie_break, top_doc_ids


def test_tie_break_orders_score_desc_then_doc_id_desc_by_bytes():
    """trec_eval's order: ``strcmp(docno2, docno1)`` on ties, so "d3" > "d20" > "d2" > "D9"."""
    ranked = tie_break([("d2", 1.0), ("d1", 2.0), ("d3", 1.0), ("D9", 1.0), ("d20", 1.0)])
    assert ranked == [("d1", 2.0), ("d3", 1.0), ("d20", 1.0), ("d2", 1.0), ("D9", 1.0)]
    assert [doc for doc, _ in tie_break([("é", 0.0), ("z", 0.0), ("ع", 0.0)])] == ["ع", "é", "z"]
    assert tie_break([]) == []


def test_a_doc_listed_twice_is_an_error_unless_a_policy_is_given():
    hits = [("d3", 1.0), ("d1", 0.5), ("d2", 1.0), ("d1", 2.0)]
    with pytest.raises(RunError, match=r"run 'x', query 'q1': document 'd1' is listed 2 times; .*duplicates = 'max'"):
        tie_break(hits, where="run 'x', query 'q1'")
    assert tie_break(hits, "max") == [("d1", 2.0), ("d3", 1.0), ("d2", 1.0)]
    assert tie_break(hits, "first") == [("d3", 1.0), ("d2", 1.0), ("d1", 0.5)]
    with pytest.raises(ConfigError, match="duplicates must be one of 'max', 'first', got 'last'"):
        order_run({"q1": hits}, "last")


def test_non_finite_score_is_a_run_error():
    with pytest.raises(RunError, match="non-finite"):
        tie_break([("d1", math.nan)])


def test_hand_computed_example():
    # q1: relevant d1 (grade 2) and d3 (grade 1); the run ranks d2, d3, d1 (d1 and d3 tie: d3 > d1 first).
    qrels = {"q1": {"d1": 2, "d3": 1}, "q2": {"d9": 1}}
    run = {"q1": [("d2", 3.0), ("d3", 1.0), ("d1", 1.0)], "q2": []}
    values = evaluate_run(run, qrels, ["ndcg@3", "mrr@3", "recall@2", "map@3", "precision@2"])
    dcg = 1 / math.log2(3) + 2 / math.log2(4)  # linear gain, as ranx and trec_eval's ndcg_cut
    idcg = 2 / math.log2(2) + 1 / math.log2(3)
    assert values["ndcg@3"]["q1"] == pytest.approx(dcg / idcg, abs=1e-12)
    assert values["mrr@3"]["q1"] == pytest.approx(0.5)
    assert values["recall@2"]["q1"] == pytest.approx(0.5)
    assert values["map@3"]["q1"] == pytest.approx((1 / 2 + 2 / 3) / 2)
    assert values["precision@2"]["q1"] == pytest.approx(0.5)
    # q2 returned nothing: it scores 0 and still counts in the mean (ranx #51/#67).
    assert all(values[m]["q2"] == 0.0 for m in values)
    assert aggregate_values(values)["mrr@3"] == pytest.approx(0.25)


def test_query_missing_from_run_counts_as_zero():
    values = evaluate_run({"q1": [("d1", 1.0)]}, {"q1": {"d1": 1}, "q2": {"d2": 1}}, ["ndcg@10"])
    assert values["ndcg@10"] == {"q1": 1.0, "q2": 0.0}


def test_efficiency_summary():
    eff = Efficiency.from_timings(1.5, [0.001, 0.002, 0.003, 0.004], 123.0)
    assert eff.latency_mean_ms == pytest.approx(2.5)
    assert eff.latency_p50_ms == pytest.approx(2.5)
    assert eff.qps == pytest.approx(400.0)
    assert eff.peak_rss_increment_mb == 123.0
    assert eff.latency_parallel_mean_ms == eff.latency_mean_ms and eff.index_time_parallel_s == 1.5


TREC_NAMES = {"ndcg": "ndcg_cut", "recall": "recall", "map": "map_cut", "precision": "P"}


def trec_eval_values(run, qrels, measure):
    """pytrec_eval's per-query values of a ranx measure name on the run's own scores (trec_eval breaks the
    ties); MRR@k is ``recip_rank``, 0 when the first relevant doc ranks below k."""
    import pytrec_eval

    family, k = measure.split("@")
    k = int(k)
    scored = {qid: dict(r) for qid, r in run.items() if r}
    name = "recip_rank" if family == "mrr" else f"{TREC_NAMES[family]}.{k}"
    out = pytrec_eval.RelevanceEvaluator(qrels, {name}).evaluate(scored)
    key = "recip_rank" if family == "mrr" else f"{TREC_NAMES[family]}_{k}"
    values = {qid: out[qid][key] if qid in out else 0.0 for qid in qrels}
    if family == "mrr":
        values = {qid: rr if rr and round(1 / rr) <= k else 0.0 for qid, rr in values.items()}
    return values


@pytest.mark.slow
@pytest.mark.parametrize(
    "dataset_id",
    [
        "beir/scifact/test",
        "beir/scifact/train",
        "cranfield",
        "vaswani",
        "quranqa23/taskA/train+dev",
        "tydiqa-goldp/ar/dev",
        "xquad/ar",
    ],
)
def test_measures_equal_trec_eval_on_real_bm25_runs(dataset_id):
    from zerda_eval.datasets import load_collection
    from zerda_eval.systems import build_system

    collection = load_collection(dataset_id)
    system = build_system("zerda.keyword", {"engine": "fast"})
    system.index(collection)
    run = {qid: tie_break(r) for qid, r in system.search(collection.queries, 100).items()}
    qrels = {qid: dict(docs) for qid, docs in collection.qrels.items()}
    values = evaluate_run(run, qrels, DEFAULT_MEASURES)
    for measure in DEFAULT_MEASURES:
        reference = trec_eval_values(run, qrels, measure)
        worst = max(abs(values[measure][qid] - reference[qid]) for qid in qrels)
        assert worst < 1e-12, (dataset_id, measure, worst)


ALL_FAMILIES = ["ndcg@1", "ndcg@10", "ndcg@100", "mrr@10", "recall@5", "recall@100", "map@10", "map@100", "precision@3"]


def random_run_and_qrels(seed: int) -> tuple[dict, dict]:
    """Random graded qrels (some queries judged all 0, some unanswered) and runs with many tied scores."""
    rng = np.random.default_rng(seed)
    docs = [f"doc{i:03d}" for i in range(300)]
    qrels, run = {}, {}
    for q in range(40):
        qid = f"q{q}"
        judged = rng.choice(docs, size=int(rng.integers(1, 30)), replace=False)
        grades = rng.integers(0, 4, size=judged.size) if q % 7 else np.zeros(judged.size, dtype=int)
        qrels[qid] = {str(d): int(g) for d, g in zip(judged, grades, strict=True)}
        if q % 5 == 4:
            continue  # judged but missing from the run
        ranked = rng.choice(docs, size=int(rng.integers(1, 150)), replace=False)
        scores = rng.integers(0, 12, size=ranked.size) / 4.0  # few distinct scores: ties everywhere
        run[qid] = [(str(d), float(s)) for d, s in zip(ranked, scores, strict=True)]
    run["unjudged"] = [("doc001", 1.0)]
    return run, qrels


@pytest.mark.parametrize("seed", range(5))
def test_kernel_equals_trec_eval_on_random_runs_with_ties(seed):
    run, qrels = random_run_and_qrels(seed)
    values = evaluate_run(run, qrels, ALL_FAMILIES)
    for measure in ALL_FAMILIES:
        reference = trec_eval_values(run, qrels, measure)
        assert values[measure].keys() == qrels.keys()
        worst = max(abs(values[measure][qid] - reference[qid]) for qid in qrels)
        assert worst < 1e-12, (measure, worst)


def test_top_doc_ids_equals_ranked_arrays():
    rng = np.random.default_rng(3)
    rankings = [[]]
    for _ in range(200):
        n = int(rng.integers(0, 40))
        ids = [f"d{i}" for i in rng.choice(30, size=min(n, 30), replace=False)]
        scores = rng.integers(0, 6, size=len(ids)).astype(float)
        ranking = list(zip(ids, scores.tolist(), strict=True))
        rankings.append(ranking if rng.random() < 0.5 else tie_break(ranking))  # sorted, or not
    for depth in (1, 5, 100):
        assert top_doc_ids(rankings, depth) == [ranked_arrays(r)[0][:depth] for r in rankings]
    assert top_doc_ids([], 10) == [] and top_doc_ids([[], []], 10) == [[], []]


def test_top_doc_ids_rejects_non_finite_scores():
    with pytest.raises(RunError, match="non-finite"):
        top_doc_ids([[("a", 2.0), ("b", 1.0)], [("c", math.inf), ("d", 1.0)]], 10)
