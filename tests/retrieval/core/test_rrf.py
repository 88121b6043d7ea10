"""The one RRF: numbers computed by hand from 1/(k + rank), rank 1-based (Cormack et al. 2009)."""

import pytest

from retrieval.core import rrf_contribution, rrf_scores


def test_contribution_is_weight_over_k_plus_rank():
    assert rrf_contribution(1) == pytest.approx(1 / 61)
    assert rrf_contribution(3, k=10) == pytest.approx(1 / 13)
    assert rrf_contribution(2, k=60, weight=0.5) == pytest.approx(0.5 / 62)


def test_contribution_equals_seed_zero_based_form():
    # seed 000 writes 1 / (RRF_K + rank + 1) with a 0-based rank
    for zero_based in range(5):
        assert rrf_contribution(zero_based + 1, k=60) == pytest.approx(1 / (60 + zero_based + 1))


def test_contribution_rejects_zero_based_rank():
    with pytest.raises(ValueError, match="1-based"):
        rrf_contribution(0)


def test_rrf_scores_two_lists_by_hand():
    scores = rrf_scores([["a", "b", "c"], ["b", "d"]], k=60)
    assert scores == pytest.approx(
        {
            "a": 1 / 61,
            "b": 1 / 62 + 1 / 61,
            "c": 1 / 63,
            "d": 1 / 62,
        }
    )
    assert list(scores) == ["a", "b", "c", "d"]  # first-seen order


def test_rrf_scores_weighted():
    scores = rrf_scores([["x", "y"], ["y", "x"]], weights=[2.0, 1.0], k=1)
    assert scores["x"] == pytest.approx(2 / 2 + 1 / 3)
    assert scores["y"] == pytest.approx(2 / 3 + 1 / 2)


def test_rrf_scores_repeated_key_in_one_list_counts_each_occurrence():
    assert rrf_scores([["a", "a"]], k=60)["a"] == pytest.approx(1 / 61 + 1 / 62)


def test_rrf_scores_weights_length_checked():
    with pytest.raises(ValueError, match="2 weights for 1 ranked lists"):
        rrf_scores([["a"]], weights=[1.0, 2.0])


def test_rrf_scores_empty():
    assert rrf_scores([]) == {}
    assert rrf_scores([[], []]) == {}
