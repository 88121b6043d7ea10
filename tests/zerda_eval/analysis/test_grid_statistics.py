"""The randomised Tukey HSD, the topic x system ANOVA and bootstrap rank stability against brute-force
enumeration, statsmodels and ranx (scipy's parametric Tukey HSD)."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest

from zerda_eval.analysis.anova import two_way_anova
from zerda_eval.analysis.rank_stability import bootstrap_ranks
from zerda_eval.analysis.tukey import randomised_tukey_hsd


def brute_force_tukey(scores: np.ndarray) -> np.ndarray:
    """Every assignment of each query's values to the systems, written as plain loops."""
    n, m = scores.shape
    means = scores.mean(axis=0)
    ranges = []
    for orders in itertools.product(list(itertools.permutations(range(m))), repeat=n):
        shuffled = [[scores[q][order[j]] for j in range(m)] for q, order in enumerate(orders)]
        column_means = [sum(row[j] for row in shuffled) / n for j in range(m)]
        ranges.append(max(column_means) - min(column_means))
    p = np.ones((m, m))
    for i, j in itertools.product(range(m), repeat=2):
        p[i, j] = np.mean([r >= abs(means[i] - means[j]) - 1e-12 for r in ranges])
    return p


def test_tukey_is_exact_on_small_inputs():
    scores = np.array([[0.1, 0.5, 0.3], [0.2, 0.6, 0.2], [0.0, 0.4, 0.45]])
    assert randomised_tukey_hsd(scores, n_permutations=10_000) == pytest.approx(brute_force_tukey(scores))


def test_tukey_monte_carlo_is_close_to_exact():
    scores = np.random.default_rng(2).random((5, 3)) + np.array([0.0, 0.3, 0.1])
    exact = brute_force_tukey(scores)  # 6^5 = 7776 assignments
    sampled = randomised_tukey_hsd(scores, n_permutations=5_000, seed=1)
    assert sampled == pytest.approx(exact, abs=0.02)


def test_tukey_agrees_with_ranx_parametric_test_without_a_topic_effect():
    """Where the two overlap (independent normal scores, no topic effect), the permutation distribution of
    the range matches the studentised range that ranx (scipy's tukey_hsd) uses."""
    from ranx.statistical_tests import tukey_hsd_test

    rng = np.random.default_rng(11)
    scores = rng.normal(0.5, 0.2, (300, 4)) + np.array([0.0, 0.01, 0.03, 0.05])
    ours = randomised_tukey_hsd(scores, n_permutations=4_000, seed=3)
    theirs = tukey_hsd_test(list("abcd"), list(scores.T), max_p=0.05)
    for row in theirs:
        i, j = "abcd".index(row["control"]), "abcd".index(row["treatment"])
        assert ours[i, j] == pytest.approx(row["p-value"], abs=0.03)


def test_two_way_anova_equals_statsmodels():
    import statsmodels.formula.api as smf
    from statsmodels.stats.anova import anova_lm

    scores = np.random.default_rng(5).random((12, 4)) + np.array([0.0, 0.3, 0.15, 0.5])
    long = pd.DataFrame(
        [(f"q{q}", f"s{s}", scores[q, s]) for q in range(12) for s in range(4)], columns=["topic", "system", "value"]
    )
    reference = anova_lm(smf.ols("value ~ C(topic) + C(system)", data=long).fit())
    table = two_way_anova(scores).set_index("source")
    for ours, theirs in (("system", "C(system)"), ("topic", "C(topic)"), ("residual", "Residual")):
        assert table.loc[ours, "sum_sq"] == pytest.approx(reference.loc[theirs, "sum_sq"])
        assert table.loc[ours, "df"] == reference.loc[theirs, "df"]
    assert table.loc["system", "F"] == pytest.approx(reference.loc["C(system)", "F"])
    assert table.loc["system", "p"] == pytest.approx(reference.loc["C(system)", "PR(>F)"])
    # variance components from the expected mean squares, by hand
    ms = reference["sum_sq"] / reference["df"]
    assert table.loc["system", "variance"] == pytest.approx((ms["C(system)"] - ms["Residual"]) / 12)
    assert table["share"].sum() == pytest.approx(1.0)


def test_bootstrap_ranks_match_exhaustive_resampling():
    scores = np.array([[0.2, 0.3, 0.1], [0.5, 0.2, 0.4], [0.1, 0.4, 0.2], [0.6, 0.3, 0.5]])
    n, m = scores.shape
    wins = np.zeros(m)
    ranks = []
    for draw in itertools.product(range(n), repeat=n):  # every ordered resample, each equally likely
        means = [round(sum(scores[q][j] for q in draw) / n, 9) for j in range(m)]  # rounded: exact ties stay ties
        top = [j for j in range(m) if means[j] == max(means)]
        for j in top:
            wins[j] += 1 / len(top)
        ranks.append([1 + sum(other > means[j] for other in means) for j in range(m)])
    exact_best = wins / n**n
    ranks = np.array(ranks)
    table = bootstrap_ranks(scores, n_resamples=40_000, seed=9)
    assert table["p_best"].to_numpy() == pytest.approx(exact_best, abs=0.01)
    assert table["rank"].tolist() == [1, 2, 2]  # means 0.35, 0.3, 0.3: the last two tie
    for j in range(m):
        assert table.loc[j, "rank_low"] == int(np.quantile(ranks[:, j], 0.025, method="inverted_cdf"))
        assert table.loc[j, "rank_high"] == int(np.quantile(ranks[:, j], 0.975, method="inverted_cdf"))


def permuted_by_numpy(scores: np.ndarray, n_permutations: int, seed: int) -> np.ndarray:
    """The Tukey p-values with the shuffles drawn by ``Generator.permuted`` row by row, from first principles."""
    rng = np.random.default_rng(seed)
    means = scores.mean(axis=0)
    observed = np.abs(means[:, None] - means[None, :])
    ranges = np.empty(n_permutations)
    for k in range(n_permutations):
        shuffled_means = rng.permuted(scores, axis=1).mean(axis=0)
        ranges[k] = shuffled_means.max() - shuffled_means.min()
    hits = (ranges[None, None, :] >= observed[:, :, None] - 1e-12).sum(axis=2)
    return (hits + 1) / (n_permutations + 1)


def test_tukey_monte_carlo_agrees_with_numpy_shuffles_on_a_medium_input():
    """The compiled draw and numpy's ``permuted`` estimate the same p-values: two independent estimates from
    10,000 permutations each differ by at most 0.5 * sqrt(2 / 10,000) = 0.007 in sd, so 0.035 is 5 sd."""
    rng = np.random.default_rng(12)
    scores = rng.random((200, 5)) * 0.6 + np.array([0.0, 0.01, 0.03, 0.05, 0.06])
    ours = randomised_tukey_hsd(scores, n_permutations=10_000, seed=4)
    assert ours == pytest.approx(permuted_by_numpy(scores, 10_000, seed=4), abs=0.035)
    assert 0.01 < ours[0, 4] < 0.99  # a pair whose p-value the comparison can tell apart


def test_tukey_monte_carlo_is_deterministic_for_a_seed():
    scores = np.random.default_rng(5).random((300, 6))
    first = randomised_tukey_hsd(scores, n_permutations=2_000, seed=9)
    assert np.array_equal(first, randomised_tukey_hsd(scores, n_permutations=2_000, seed=9))
    assert not np.array_equal(first, randomised_tukey_hsd(scores, n_permutations=2_000, seed=10))


@pytest.mark.parametrize("m", [3, 13])
def test_tukey_shuffles_are_uniform_permutations(m):
    """Two queries, each with a single 1 (at the first and at the second system): under a uniform shuffle the
    two 1s fall on the same system with probability 1/m, and the range of the means is then 1, else 0.5.
    With m = 13 the shuffle's digits span two codes (13! > 2^32, the last swap in the second): without
    either code's swaps the share would be 11/169 or 1/2, not 1/13 (the sd is 0.0013)."""
    from zerda_eval.analysis.tukey import _digit_groups, _monte_carlo_ranges

    assert len(_digit_groups(m)[1]) == (2 if m == 13 else 1)
    scores = np.zeros((2, m))
    scores[0, 0] = scores[1, 1] = 1.0
    ranges = _monte_carlo_ranges(scores, 40_000, seed=3)
    assert set(np.unique(ranges)) <= {0.5, 1.0}
    share = np.mean(ranges == 1.0)
    sd = np.sqrt((1 / m) * (1 - 1 / m) / 40_000)
    assert abs(share - 1 / m) < 5 * sd
