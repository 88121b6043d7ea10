"""Qur'an QA 2023 task A: the no-answer rule on hand-made runs, answerable-only evaluation."""

from __future__ import annotations

from statistics import mean

from zerda_eval.datasets import Collection, load_collection
from zerda_eval.datasets.quranqa import answerable_only
from zerda_eval.evaluation.no_answer import cut_run, no_answer_scores, task_scores

HAND_MADE = Collection(
    id="hand-made",
    language="ar",
    doc_ids=["1:1-4", "2:1-5", "2:6-7"],
    texts=["a", "b", "c"],
    queries={"q1": "answerable", "q2": "answerable", "n1": "no answer", "n2": "no answer", "n3": "no answer"},
    qrels={"q1": {"2:1-5": 1}, "q2": {"2:6-7": 1}, "n1": {"-1": 1}, "n2": {"-1": 1}, "n3": {"-1": 1}},
    no_answer_qids=frozenset({"n1", "n2", "n3"}),
)


def test_no_answer_credit_only_for_exactly_minus_one():
    run = {"n1": ["-1"], "n2": ["-1", "2:1-5"], "q1": ["-1"]}  # n3 not answered at all
    assert no_answer_scores(run, HAND_MADE) == {"n1": 1.0, "n2": 0.0, "n3": 0.0}


def test_runs_are_cut_at_ten_before_the_rule():
    long_run = [f"2:{i}-{i}" for i in range(12)]
    assert cut_run({"q1": long_run}) == {"q1": long_run[:10]}
    # "-1" at rank 11 is cut away: the remaining ten passages are not "exactly [-1]" either way
    assert no_answer_scores({"n1": [*long_run[:10], "-1"]}, HAND_MADE)["n1"] == 0.0


def test_task_scores_merge_answerable_values_with_the_rule():
    run = {"q1": ["2:1-5"], "q2": ["1:1-4", "2:6-7"], "n1": ["-1"], "n2": ["1:1-4"], "n3": ["-1"]}
    ap_at_10 = {"q1": 1.0, "q2": 0.5}  # AP@10 of q1 (hit at rank 1) and q2 (hit at rank 2), by hand
    scores = task_scores(ap_at_10, run, HAND_MADE)
    assert scores == {"q1": 1.0, "q2": 0.5, "n1": 1.0, "n2": 0.0, "n3": 1.0}
    assert mean(scores.values()) == (1.0 + 0.5 + 1.0 + 0.0 + 1.0) / 5
    assert task_scores({"q1": 1.0}, run, HAND_MADE)["q2"] == 0.0  # a missing answerable query scores 0


def test_answerable_only_drops_no_answer_questions_on_the_real_set():
    full = load_collection("quranqa23/taskA/train+dev")
    answerable = answerable_only(full)
    assert len(answerable.queries) == len(answerable.qrels) == 169
    assert not answerable.no_answer_qids and answerable.options["no_answer"] == "drop"
    assert all("-1" not in judged for judged in answerable.qrels.values())
    assert full.options["no_answer"] == "task_rule" and full.options["official_measures"] == [
        "map@10",
        "mrr@10",
    ]


def test_no_answer_rule_on_the_real_dev_set():
    dev = load_collection("quranqa23/taskA/dev")
    assert len(dev.no_answer_qids) == 4
    first, *rest = sorted(dev.no_answer_qids)
    run = {first: ["-1"], **{qid: ["1:1-4"] for qid in rest}}
    assert no_answer_scores(run, dev) == {first: 1.0, **dict.fromkeys(rest, 0.0)}
