"""The name table (ranx's and ir_measures' names): every measure equals pytrec_eval (trec_eval) per query.

The reference maps each name to trec_eval here, independently of ``MEASURE_NAMES``: graded qrels,
queries whose judgements are all 0 (no relevant document), queries the run misses, unjudged documents
and ties everywhere; relevance thresholds through trec_eval's ``relevance_level``.
"""

from __future__ import annotations

import re

import pytest
import pytrec_eval

from tests.zerda_eval.test_measures import random_run_and_qrels
from zerda_eval.errors import ConfigError
from zerda_eval.evaluation.measures import MEASURE_NAMES, aggregate_values, evaluate_run, parse_measure
from zerda_eval.ranking import tie_break

# name -> (trec_eval measure, its result key, cut the ranking at k first, relevance level)
REFERENCE = {
    "nDCG@10": ("ndcg_cut.10", "ndcg_cut_10", None, 1),
    "nDCG@3": ("ndcg_cut.3", "ndcg_cut_3", None, 1),
    "nDCG": ("ndcg", "ndcg", None, 1),
    "ndcg@10": ("ndcg_cut.10", "ndcg_cut_10", None, 1),
    "AP@100": ("map_cut.100", "map_cut_100", None, 1),
    "AP": ("map", "map", None, 1),
    "AP(rel=2)": ("map", "map", None, 2),
    "map@100": ("map_cut.100", "map_cut_100", None, 1),
    "RR@10": ("recip_rank", "recip_rank", 10, 1),
    "RR": ("recip_rank", "recip_rank", None, 1),
    "RR(rel=2)@10": ("recip_rank", "recip_rank", 10, 2),
    "mrr@10": ("recip_rank", "recip_rank", 10, 1),
    "R@100": ("recall.100", "recall_100", None, 1),
    "R@5": ("recall.5", "recall_5", None, 1),
    "R(rel=2)@100": ("recall.100", "recall_100", None, 2),
    "recall@100": ("recall.100", "recall_100", None, 1),
    "P@10": ("P.10", "P_10", None, 1),
    "P(rel=2)@10": ("P.10", "P_10", None, 2),
    "P(rel=3)@5": ("P.5", "P_5", None, 3),
    "precision@10": ("P.10", "P_10", None, 1),
    "Success@10": ("success.10", "success_10", None, 1),
    "Success(rel=2)@10": ("success.10", "success_10", None, 2),
    "Rprec": ("Rprec", "Rprec", None, 1),
    "Rprec(rel=2)": ("Rprec", "Rprec", None, 2),
    "Bpref": ("bpref", "bpref", None, 1),
    "Bpref(rel=2)": ("bpref", "bpref", None, 2),
    "NumRet": ("num_ret", "num_ret", None, 1),
    "NumRel": ("num_rel", "num_rel", None, 1),
    "NumRel(rel=2)": ("num_rel", "num_rel", None, 2),
    "NumRelRet": ("num_rel_ret", "num_rel_ret", None, 1),
    "NumRelRet(rel=3)": ("num_rel_ret", "num_rel_ret", None, 3),
}
JUDGED = ("Judged@10", "Judged@1", "Judged@100")  # ir_measures' rate: judged docs of the top k / docs in it
ABSENT = "__not_in_the_collection__"  # a query the run misses: trec_eval needs one doc to report num_rel


def rank_scores(ranking: list[tuple[str, float]], cut: int | None = None) -> dict[str, float]:
    """A ranking as pytrec_eval scores that keep its order exactly (no ties left to trec_eval)."""
    kept = ranking[:cut] if cut else ranking
    return {doc: float(len(kept) - i) for i, (doc, _) in enumerate(kept)}


def trec_eval_value(run: dict, qrels: dict, measure: str, key: str, cut: int | None, level: int) -> dict[str, float]:
    """pytrec_eval per query; a query the run misses gets num_rel from a one-unjudged-doc run, else 0."""
    present = {qid: rank_scores(run[qid], cut) for qid in qrels if run.get(qid)}
    absent = {qid: {ABSENT: 1.0} for qid in qrels if not run.get(qid)}
    evaluator = pytrec_eval.RelevanceEvaluator(qrels, {measure}, relevance_level=level)
    values = {qid: row[key] for qid, row in evaluator.evaluate(present).items()}
    if key == "num_rel":
        values.update({qid: row[key] for qid, row in evaluator.evaluate(absent).items()})
    return {qid: values.get(qid, 0.0) for qid in qrels}


def judged_rate(run: dict, qrels: dict, k: int) -> dict[str, float]:
    """Judged@k from trec_eval's counts on the ranking cut at k: judged retrieved / retrieved."""
    cut = {qid: rank_scores(run[qid], k) for qid in qrels if run.get(qid)}
    evaluator = pytrec_eval.RelevanceEvaluator(qrels, {"num_rel_ret", "num_nonrel_judged_ret", "num_ret"})
    rows = evaluator.evaluate(cut)
    return {
        qid: (rows[qid]["num_rel_ret"] + rows[qid]["num_nonrel_judged_ret"]) / rows[qid]["num_ret"]
        if qid in rows
        else 0.0
        for qid in qrels
    }


@pytest.mark.parametrize("seed", range(6))
def test_every_name_equals_trec_eval_per_query(seed):
    run, qrels = random_run_and_qrels(seed)
    qrels["q_grade1_only"] = {"doc001": 1, "doc002": 0}  # relevant at level 1, none at level 2
    run["q_grade1_only"] = [("doc002", 1.0), ("doc001", 1.0), ("doc250", 1.0)]
    names = [*REFERENCE, *JUDGED]
    values = evaluate_run(run, qrels, names)
    tie_broken = {qid: tie_break(ranking) for qid, ranking in run.items()}
    for name in names:
        if name in JUDGED:
            reference = judged_rate(tie_broken, qrels, int(name.split("@")[1]))
        else:
            reference = trec_eval_value(tie_broken, qrels, *REFERENCE[name])
        assert values[name].keys() == qrels.keys()
        worst = max(abs(values[name][qid] - reference[qid]) for qid in qrels)
        assert worst < 1e-12, (name, worst)


def test_the_table_is_covered_by_the_reference():
    tested = {parse_measure(name).name.split("(")[0].split("@")[0] for name in [*REFERENCE, *JUDGED]}
    assert tested == set(MEASURE_NAMES)


def test_counts_are_summed_and_rates_averaged_as_trec_eval_summarises():
    qrels = {"q1": {"a": 1, "b": 2}, "q2": {"c": 1}}
    run = {"q1": [("a", 2.0), ("x", 1.0)], "q2": [("c", 1.0)]}
    summary = aggregate_values(evaluate_run(run, qrels, ["NumRet", "NumRel", "NumRelRet", "P@2"]))
    assert summary == {"NumRet": 3.0, "NumRel": 3.0, "NumRelRet": 2.0, "P@2": 0.5}


def test_hand_computed_bpref_judged_and_thresholds():
    # a (grade 2) at rank 2 below judged non-relevant n; b (grade 1) at rank 4 below n and unjudged u, v
    qrels = {"q": {"a": 2, "b": 1, "n": 0, "m": 0}}
    run = {"q": [("n", 4.0), ("a", 3.0), ("u", 2.0), ("b", 1.0), ("v", 0.5)]}
    values = evaluate_run(run, qrels, ["Bpref", "Judged@4", "P(rel=2)@2", "R(rel=2)@4", "Rprec", "RR(rel=2)"])
    # bpref = (1/R) sum over retrieved relevant of 1 - |n ranked above| / min(R, N); R = 2, N = 2
    assert values["Bpref"]["q"] == pytest.approx(((1 - 1 / 2) + (1 - 1 / 2)) / 2, abs=1e-15)
    assert values["Judged@4"]["q"] == 3 / 4
    assert values["P(rel=2)@2"]["q"] == 1 / 2
    assert values["R(rel=2)@4"]["q"] == 1.0
    assert values["Rprec"]["q"] == 1 / 2
    assert values["RR(rel=2)"]["q"] == 1 / 2


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("ndcg", "needs a cutoff, e.g. ndcg@10"),
        ("P", "needs a cutoff"),
        ("Rprec@10", "takes no cutoff: write Rprec"),
        ("nDCG(rel=2)@10", "takes no (rel=N) threshold"),
        ("NDCG@10", "unknown measure 'NDCG@10' (did you mean 'nDCG@10'?)"),
        ("P(rel=0)@10", "unknown measure"),
        ("ndcg@0", "unknown measure"),
    ],
)
def test_a_bad_name_is_one_config_error(name, message):
    with pytest.raises(ConfigError, match=re.escape(message)):
        parse_measure(name)


@pytest.mark.slow
@pytest.mark.parametrize("dataset_id", ["cranfield", "vaswani", "beir/scifact/test", "quranqa23/taskA/train+dev"])
def test_every_name_equals_trec_eval_on_real_bm25_runs(dataset_id):
    from zerda_eval.datasets import load_collection
    from zerda_eval.systems import build_system

    collection = load_collection(dataset_id)
    system = build_system("zerda.keyword", {"engine": "fast"})
    system.index(collection)
    run = {qid: tie_break(r) for qid, r in system.search(collection.queries, 100).items()}
    qrels = {qid: dict(docs) for qid, docs in collection.qrels.items() if docs}
    names = [*REFERENCE, *JUDGED]
    values = evaluate_run(run, qrels, names)
    for name in names:
        if name in JUDGED:
            reference = judged_rate(run, qrels, int(name.split("@")[1]))
        else:
            reference = trec_eval_value(run, qrels, *REFERENCE[name])
        worst = max(abs(values[name][qid] - reference[qid]) for qid in qrels)
        assert worst < 1e-12, (dataset_id, name, worst)
