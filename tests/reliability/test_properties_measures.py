"""Properties of ``zerda_eval.evaluation.measures``: bounds, the perfect run, and agreement with trec_eval.

The reference is ``pytrec_eval`` (trec_eval) fed with the harness's documented tie-break rule
(score descending, then doc id ascending), implemented here independently as rank scores.
"""

from __future__ import annotations

import pytest
import pytrec_eval
from hypothesis import given, settings
from hypothesis import strategies as st

from zerda_eval.evaluation.measures import aggregate_values, evaluate_run
from zerda_eval.ranking import tie_break

SETTINGS = settings(max_examples=60, deadline=None)
MEASURES = ["ndcg@10", "mrr@10", "recall@100", "map@100", "precision@10", "ndcg@3", "precision@5"]
DOCS = [f"d{i:02d}" for i in range(25)]
QIDS = ["q1", "q2", "q3", "q4"]

judgements = st.dictionaries(st.sampled_from(DOCS), st.integers(0, 3), min_size=1, max_size=8)
qrels_strategy = st.dictionaries(st.sampled_from(QIDS), judgements, min_size=1, max_size=4)
# Few distinct scores, so ties are frequent; a query may be missing or have an empty list.
results = st.lists(st.tuples(st.sampled_from(DOCS), st.sampled_from([0.0, 0.5, 1.0, 2.0, 3.5])), max_size=20)
runs = st.dictionaries(st.sampled_from(QIDS), results, max_size=4)


def trec_eval(run: dict, qrels: dict) -> dict[str, dict[str, float]]:
    """``{measure: {qid: value}}`` by pytrec_eval over the tie-broken run; absent queries score 0."""
    ordered = {}
    for qid, hits in run.items():
        best: dict[str, float] = {}
        for doc, score in hits:
            best[doc] = max(score, best.get(doc, score))
        ranking = sorted(best, key=lambda doc: (-best[doc], doc))
        ordered[qid] = {doc: float(len(ranking) - i) for i, doc in enumerate(ranking)}
    names = {"ndcg": "ndcg_cut", "recall": "recall", "map": "map_cut", "precision": "P"}
    values = {measure: dict.fromkeys(qrels, 0.0) for measure in MEASURES}
    for measure in MEASURES:
        family, k = measure.split("@")
        if family == "mrr":  # trec_eval's recip_rank has no cutoff: cut the ranking at k first
            cut = {q: dict(sorted(d.items(), key=lambda p: -p[1])[: int(k)]) for q, d in ordered.items()}
            scored, base, name = cut, "recip_rank", "recip_rank"  # parameter ignored
        else:
            scored, base, name = ordered, names[family], f"{names[family]}_{k}"
        scored = {q: d for q, d in scored.items() if d and q in qrels}
        if not scored:
            continue
        evaluator = pytrec_eval.RelevanceEvaluator({q: qrels[q] for q in scored}, {f"{base}.{k}"})
        for qid, row in evaluator.evaluate(scored).items():
            values[measure][qid] = row[name]
    return values


@SETTINGS
@given(qrels=qrels_strategy, run=runs)
def test_measures_equal_trec_eval_with_ties_and_empty_lists(qrels, run):
    ours = evaluate_run(run, qrels, MEASURES)
    reference = trec_eval(run, qrels)
    for measure in MEASURES:
        assert ours[measure].keys() == set(qrels)
        for qid in qrels:
            assert ours[measure][qid] == pytest.approx(reference[measure][qid], abs=1e-9), (measure, qid)
            assert 0.0 <= ours[measure][qid] <= 1.0
    # The mean is over every judged query: a query the system missed counts as 0 (ranx #51/#67).
    means = aggregate_values(ours)
    for measure in MEASURES:
        assert means[measure] == pytest.approx(sum(reference[measure].values()) / len(qrels), abs=1e-9)


@SETTINGS
@given(qrels=qrels_strategy, noise=st.lists(st.sampled_from(DOCS), max_size=10))
def test_a_perfect_run_scores_one(qrels, noise):
    # Relevant documents first by grade, then unjudged or non-relevant noise below them.
    run = {}
    for qid, judged in qrels.items():
        relevant = sorted((doc for doc, grade in judged.items() if grade > 0), key=lambda d: -judged[d])
        tail = [doc for doc in dict.fromkeys(noise) if doc not in relevant]
        run[qid] = [(doc, 100.0 - i) for i, doc in enumerate(relevant + tail)]
    values = evaluate_run(run, qrels, ["ndcg@10", "ndcg@100", "mrr@10", "recall@100", "map@100"])
    for qid, judged in qrels.items():
        has_relevant = any(grade > 0 for grade in judged.values())
        for measure in values:
            assert values[measure][qid] == pytest.approx(1.0 if has_relevant else 0.0, abs=1e-12), measure


@settings(max_examples=200, deadline=None)
@given(
    hits=st.lists(
        st.tuples(st.sampled_from(DOCS), st.one_of(st.sampled_from([0.0, 1.0, 2.0]), st.floats(-1e6, 1e6))),
        max_size=40,
    )
)
def test_tie_break_equals_the_plain_definition(hits):
    best: dict[str, float] = {}
    for doc, score in hits:
        best[doc] = max(score, best.get(doc, score))
    expected = sorted(best.items(), key=lambda item: (-item[1], item[0]))
    assert tie_break(hits) == expected
