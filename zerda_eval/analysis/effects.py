"""Effect sizes of a paired comparison with their intervals: the mean per-query difference with a t
interval and a bias-corrected and accelerated (BCa) bootstrap interval.

The standardised effect (mean difference over the standard deviation of the differences, d_z) is
``significance.cohens_d_paired``. The t interval comes from ``scipy.stats.t``. The BCa interval is
``scipy.stats.bootstrap(method="BCa", rng=seed, vectorized=True)`` of the mean (scipy 1.17; Efron &
Tibshirani 1993, 14.3 and eq. 14.15) computed here in O(n) memory and time per resample: the same seeded
resampling draws (in row batches, which draw the same stream), the same bias correction (scipy's
percentile-of-score, the average of its "<" and "<=" counts), the same acceleration and the same linear
interpolation of the bootstrap quantiles; only the jackknife differs in cost, not in value: the
leave-one-out mean is ``(sum - x_i) / (n - 1)``, where scipy evaluates the n x (n - 1) leave-one-out
array. ``tests/zerda_eval/analysis/test_effects_power.py`` pins the interval to scipy's. The degenerate
cases scipy leaves undefined (fewer than two queries, every difference equal) are ours.
"""

from __future__ import annotations

import numpy as np

from zerda_eval.analysis.significance import DEFAULT_SEED, bootstrap_means

LEVEL = 0.95
BOOTSTRAP_RESAMPLES = 2_000


def _degenerate(delta: np.ndarray) -> tuple[float, float] | None:
    """The interval where scipy's is undefined: NaN below two queries, a point when every difference is equal."""
    if delta.size < 2:
        return float("nan"), float("nan")
    if np.all(delta == delta[0]):
        return float(delta[0]), float(delta[0])
    return None


def t_interval(delta: np.ndarray, level: float = LEVEL) -> tuple[float, float]:
    """The ``level`` Student's t interval of the mean of the per-query differences ``delta``."""
    from scipy.stats import sem, t

    delta = np.asarray(delta, float)
    fixed = _degenerate(delta)
    if fixed is not None:
        return fixed
    low, high = t.interval(level, delta.size - 1, loc=delta.mean(), scale=sem(delta))
    return float(low), float(high)


def _acceleration(delta: np.ndarray) -> float:
    """The BCa acceleration from the jackknife means of ``delta``, each ``(sum - x_i) / (n - 1)``."""
    n = float(delta.size)
    leave_one_out = (delta.sum() - delta) / (n - 1)
    u = (n - 1) * (leave_one_out.mean() - leave_one_out)
    return float(1 / 6 * (np.sum(u**3) / n**3) / (np.sum(u**2) / n**2) ** (3 / 2))


def _quantiles(values: np.ndarray, p: np.ndarray) -> np.ndarray:
    """The ``p`` quantiles of ``values`` by linear interpolation (``scipy.stats.quantile``'s default,
    Hyndman & Fan type 7), in scipy's arithmetic; NaN where ``p`` is NaN or outside [0, 1]."""
    ordered = np.sort(values)
    n = float(values.size)
    outside = np.isnan(p) | (p < 0) | (p > 1)
    p = np.where(outside, 0.5, p)
    position = p * n + (1 - p)
    upper = position // 1
    lower = upper - 1
    fraction = np.where(lower < 0, 0.0, position % 1)
    lower = np.clip(lower, 0.0, n - 1).astype(np.int64)
    upper = np.clip(upper, 0.0, n - 1).astype(np.int64)
    result = (1 - fraction) * ordered[lower] + fraction * ordered[upper]
    return np.where(outside, np.nan, result)


def _bca_from_means(delta: np.ndarray, means: np.ndarray, level: float) -> tuple[float, float]:
    """The BCa interval of the mean of ``delta`` from its bootstrap ``means``, as scipy computes it."""
    from scipy.special import ndtr, ndtri

    observed = delta.mean()
    share_below = (np.count_nonzero(means < observed) + np.count_nonzero(means <= observed)) / (2 * means.size)
    z0 = ndtri(share_below)
    acceleration = _acceleration(delta)
    z_alpha = float(ndtri((1 - level) / 2))
    tails = []
    for z in (z_alpha, -z_alpha):
        shifted = z0 + z
        tails.append(ndtr(z0 + shifted / (1 - acceleration * shifted)))
    low, high = _quantiles(means, np.array(tails, float))
    return float(low), float(high)


def bca_intervals(
    deltas: np.ndarray, level: float = LEVEL, n_resamples: int = BOOTSTRAP_RESAMPLES, seed: int = DEFAULT_SEED
) -> list[tuple[float, float]]:
    """``bca_interval`` of each row of ``deltas`` (pairs x queries); the rows share the resampling draws,
    which are the same for every row of one length and seed, so each interval is the row's own."""
    deltas = np.asarray(deltas, float)
    fixed = [_degenerate(delta) for delta in deltas]
    live = [index for index, interval in enumerate(fixed) if interval is None]
    computed = {}
    if live:
        means = bootstrap_means(deltas[live], n_resamples, seed)
        computed = {index: _bca_from_means(deltas[index], means[row], level) for row, index in enumerate(live)}
    return [interval if interval is not None else computed[index] for index, interval in enumerate(fixed)]


def bca_interval(
    delta: np.ndarray, level: float = LEVEL, n_resamples: int = BOOTSTRAP_RESAMPLES, seed: int = DEFAULT_SEED
) -> tuple[float, float]:
    """The ``level`` BCa bootstrap interval of the mean of ``delta``: ``scipy.stats.bootstrap``'s (seeded,
    vectorised) interval with the O(n) jackknife of the mean; NaN where scipy's is NaN (it warns there)."""
    delta = np.asarray(delta, float)
    return bca_intervals(delta.reshape(1, -1), level, n_resamples, seed)[0]
