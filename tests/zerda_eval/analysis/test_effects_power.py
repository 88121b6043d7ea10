"""Effect intervals and power against scipy and statsmodels, and against the formulas they solve."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from zerda_eval.analysis import effects, power


def test_t_interval_is_the_textbook_interval():
    delta = np.array([0.1, -0.05, 0.2, 0.0, 0.15, 0.05])
    half = stats.t.ppf(0.975, 5) * delta.std(ddof=1) / np.sqrt(6)
    assert effects.t_interval(delta) == pytest.approx((delta.mean() - half, delta.mean() + half))


def test_bca_interval_equals_scipy_and_covers_the_mean():
    delta = np.random.default_rng(3).normal(0.03, 0.2, 60)
    reference = stats.bootstrap((delta,), np.mean, method="BCa", n_resamples=2000, rng=5).confidence_interval
    assert effects.bca_interval(delta, seed=5) == pytest.approx((reference.low, reference.high))
    low, high = effects.bca_interval(delta)
    assert low < delta.mean() < high
    # the BCa and t intervals estimate the same spread: widths agree within bootstrap noise
    t_low, t_high = effects.t_interval(delta)
    assert high - low == pytest.approx(t_high - t_low, rel=0.15)


def _differences(kind: str, size: int, rng: np.random.Generator) -> np.ndarray:
    """Per-query differences of one shape: normal, tied (a few discrete steps), skewed, heavy-tailed, or
    every value equal but one."""
    if kind == "normal":
        return rng.normal(0.02, 0.2, size)
    if kind == "ties":
        return rng.integers(-3, 4, size) / 10
    if kind == "skew":
        return rng.exponential(0.1, size) - 0.05
    if kind == "heavy":
        return rng.standard_t(1.5, size)
    delta = np.full(size, 0.3)
    delta[rng.integers(size)] = 0.9
    return delta


@pytest.mark.parametrize("size", [2, 3, 5, 8, 13, 40, 101, 257, 500])
@pytest.mark.parametrize("kind", ["normal", "ties", "skew", "heavy", "all-but-one"])
def test_bca_interval_equals_scipy_bootstrap_on_many_inputs(size, kind):
    """The O(n) jackknife and the batched resampling give scipy's interval (same draws, same formulas): the
    two differ only in the rounding of the leave-one-out means, far below 1e-12 on values of order 1."""
    rng = np.random.default_rng(size * 7 + len(kind))
    delta = _differences(kind, size, rng)
    if np.all(delta == delta[0]):  # a tiny tied draw: the degenerate case, tested below
        delta[0] += 0.1
    for seed in (13, 2024):
        reference = stats.bootstrap(
            (delta,), np.mean, method="BCa", n_resamples=2000, rng=seed, vectorized=True
        ).confidence_interval
        low, high = effects.bca_interval(delta, seed=seed)
        assert abs(low - reference.low) <= 1e-12 and abs(high - reference.high) <= 1e-12


def test_bootstrap_quantiles_are_scipys_including_the_undefined_tails():
    """BCa's tail probabilities are NaN where scipy's bias correction is infinite (every resampled mean on one
    side): the quantile is then NaN, as ``scipy.stats.quantile`` gives; elsewhere its linear interpolation."""
    values = np.random.default_rng(2).normal(size=2000).round(2)  # ties among the resampled means
    p = np.array([0.0, 1e-9, 0.025, 0.5, 0.975, 1.0, np.nan])
    assert np.array_equal(effects._quantiles(values, p), stats.quantile(values, p), equal_nan=True)


def test_bca_interval_resamples_in_bounded_memory():
    """7,000 queries x 2,000 resamples: scipy holds 2 x 112 MB at once, ours a few row batches."""
    import tracemalloc

    delta = np.random.default_rng(1).normal(0.0, 0.2, 7_000)
    tracemalloc.start()
    effects.bca_interval(delta)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 100 * 2**20


def test_bca_intervals_of_many_pairs_equal_each_pairs_own_interval():
    """Pairs of one length share the resampling draws; each interval is still the row's own call's, degenerate
    rows (every difference equal) included."""
    rng = np.random.default_rng(6)
    deltas = np.vstack([_differences(kind, 90, rng) for kind in ("normal", "ties", "skew", "heavy", "all-but-one")])
    deltas = np.vstack([deltas, np.full(90, 0.2)])
    assert effects.bca_intervals(deltas, seed=8) == [effects.bca_interval(row, seed=8) for row in deltas]


def test_degenerate_differences_give_a_point_or_nothing():
    assert effects.bca_interval(np.full(5, 0.1)) == pytest.approx((0.1, 0.1))
    assert effects.t_interval(np.zeros(4)) == (0.0, 0.0)
    assert all(np.isnan(effects.t_interval(np.array([0.3]))))


def test_minimum_detectable_effect_has_the_asked_power():
    n, sd, alpha = 50, 0.2, 0.05
    mde = power.minimum_detectable_effect(n, sd, alpha)
    # the power of the two-sided one-sample t-test at that effect, from the non-central t by hand
    critical = stats.t.ppf(1 - alpha / 2, n - 1)
    noncentrality = mde / sd * np.sqrt(n)
    achieved = stats.nct.sf(critical, n - 1, noncentrality) + stats.nct.cdf(-critical, n - 1, noncentrality)
    assert achieved == pytest.approx(0.8, abs=1e-6)
    assert power.minimum_detectable_effect(200, sd, alpha) < mde  # more queries, smaller detectable effect


def test_queries_needed_is_the_smallest_n_with_the_power():
    from statsmodels.stats.power import TTestPower

    effect, sd, alpha = 0.05, 0.2, 0.05
    n = int(power.queries_needed(effect, sd, alpha))
    assert TTestPower().power(effect / sd, n, alpha) >= 0.8 > TTestPower().power(effect / sd, n - 1, alpha)
    assert power.queries_needed(0.5, 0.01, alpha) == 2
    assert power.queries_needed(0.0, 0.1, alpha) == np.inf
