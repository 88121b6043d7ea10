"""Rank-biased overlap against repro_eval's (Clarke et al.'s truncated RBO), and its hand values."""

from __future__ import annotations

import pytest

from zerda_eval.analysis.agreement import mean_rbo, rbo


def as_scored(ids: list[str]) -> dict[str, float]:
    return {doc: float(len(ids) - rank) for rank, doc in enumerate(ids)}  # distinct scores, in list order


@pytest.mark.parametrize(
    ("first", "second"),
    [
        (list("abcdefghij"), list("abcdefghij")),
        (list("abcdefghij"), list("bacdefghij")),
        (list("abcdefghij"), list("klmnopqrst")),
        (list("abcdefghij"), list("jihgfedcba")),
        (list("abcde"), list("axbyc")),
    ],
)
def test_rbo_equals_repro_eval(first, second):
    from repro_eval.measure.document_order import RBO

    reference = RBO({"q": as_scored(first)}, {"q": as_scored(second)}, p=0.9, depth=10, pbar=False, per_topic=True)
    assert rbo(first, second, depth=10, persistence=0.9) == pytest.approx(reference["q"])


def test_rbo_by_hand_and_mean_over_queries():
    # depth 2, p 0.5: d=1 overlap 0 of 1, d=2 overlap 2 of 2 -> (0 + 0.5 * 1) / 1.5
    assert rbo(["a", "b"], ["b", "a"], depth=2, persistence=0.5) == pytest.approx(1 / 3)
    first = {"q1": [("a", 2.0), ("b", 1.0)], "q2": [("c", 1.0)]}
    second = {"q1": [("a", 2.0), ("b", 1.0)], "q2": [("d", 1.0)]}
    assert mean_rbo(first, second, depth=2) == pytest.approx(0.5)
