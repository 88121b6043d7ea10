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
