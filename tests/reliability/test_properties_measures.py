"""Properties of ``zerda_eval.evaluation.measures``: bounds, the perfect run, and agreement with trec_eval.

The reference is ``pytrec_eval`` (trec_eval) fed the runs' own scores: it breaks ties itself (score
descending, then doc id descending by ``strcmp``), the order the harness documents and applies.
"""

from __future__ import annotations

import pytest
import pytrec_eval
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.conftest import trec_order
from zerda_eval.errors import RunError
from zerda_eval.evaluation.measures import aggregate_values, evaluate_run
from zerda_eval.ranking import tie_break

SETTINGS = settings(max_examples=60, deadline=None)
MEASURES = ["ndcg@10", "mrr@10", "recall@100", "map@100", "precision@10", "ndcg@3", "precision@5", "mrr@2"]
# Ids whose byte order differs from their numeric or case-folded order, and non-ASCII ones (UTF-8 bytes).
DOCS = [f"d{i}" for i in range(20)] + ["D3", "d03", "ä1", "z", "é", "عربي", "ع", "a"]
QIDS = ["q1", "q2", "q3", "q4"]

judgements = st.dictionaries(st.sampled_from(DOCS), st.integers(0, 3), min_size=1, max_size=8)
qrels_strategy = st.dictionaries(st.sampled_from(QIDS), judgements, min_size=1, max_size=4)
# Few distinct scores, so ties are frequent; each doc once per query, in an arbitrary order; a query may
# be missing or have an empty list.
results = st.dictionaries(st.sampled_from(DOCS), st.sampled_from([0.0, 0.5, 1.0, 2.0, 3.5]), max_size=20)
runs = st.dictionaries(st.sampled_from(QIDS), results.map(lambda d: list(d.items())), max_size=4)


def trec_eval(run: dict, qrels: dict) -> dict[str, dict[str, float]]:
    """``{measure: {qid: value}}`` by pytrec_eval on the run's own scores; absent queries score 0.

    ``mrr@k`` is trec_eval's ``recip_rank`` of the whole ranking, 0 when the first relevant doc is below k.
    """
    scored = {qid: dict(hits) for qid, hits in run.items() if hits and qid in qrels}
    names = {"ndcg": "ndcg_cut", "recall": "recall", "map": "map_cut", "precision": "P"}
    values = {measure: dict.fromkeys(qrels, 0.0) for measure in MEASURES}
    if not scored:
        return values
    wanted = {"recip_rank"} | {f"{names[m.split('@')[0]]}.{m.split('@')[1]}" for m in MEASURES if "mrr" not in m}
    rows = pytrec_eval.RelevanceEvaluator({q: qrels[q] for q in scored}, wanted).evaluate(scored)
    for measure in MEASURES:
        family, k = measure.split("@")
        for qid, row in rows.items():
            if family == "mrr":
                rr = row["recip_rank"]
                values[measure][qid] = rr if rr and round(1 / rr) <= int(k) else 0.0
            else:
                values[measure][qid] = row[f"{names[family]}_{k}"]
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
    ),
    duplicates=st.sampled_from(["max", "first"]),
)
def test_tie_break_equals_the_plain_definition(hits, duplicates):
    """Score descending (as trec_eval holds it, a C float), then doc id descending by UTF-8 bytes (two stable
    sorts: ``tests.conftest.trec_order``); a doc listed twice keeps its best score (``max``) or its first copy
    (``first``), and is an error without a policy."""
    kept: dict[str, float] = {}
    for doc, score in hits:
        if doc not in kept or (duplicates == "max" and score > kept[doc]):
            kept[doc] = score
    expected = trec_order(kept)
    assert tie_break(hits, duplicates) == expected
    if len(kept) < len(hits):
        with pytest.raises(RunError, match=r"is listed [0-9]+ times"):
            tie_break(hits)
    else:
        assert tie_break(hits) == expected
