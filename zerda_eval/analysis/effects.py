"""Effect sizes of a paired comparison with their intervals: the mean per-query difference with a t
interval and a bias-corrected and accelerated (BCa) bootstrap interval.

The standardised effect (mean difference over the standard deviation of the differences, d_z) is
``significance.cohens_d_paired``. Both intervals come from scipy (``scipy.stats.t``, ``scipy.stats.bootstrap``);
only the degenerate cases scipy leaves undefined (fewer than two queries, every difference equal) are ours.
"""

from __future__ import annotations

import numpy as np

from zerda_eval.analysis.significance import DEFAULT_SEED

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


def bca_interval(
    delta: np.ndarray, level: float = LEVEL, n_resamples: int = BOOTSTRAP_RESAMPLES, seed: int = DEFAULT_SEED
) -> tuple[float, float]:
    """The ``level`` BCa bootstrap interval of the mean of ``delta`` (``scipy.stats.bootstrap``, seeded)."""
    from scipy.stats import bootstrap

    delta = np.asarray(delta, float)
    fixed = _degenerate(delta)
    if fixed is not None:
        return fixed
    result = bootstrap(
        (delta,), np.mean, confidence_level=level, n_resamples=n_resamples, method="BCa", rng=seed, vectorized=True
    )
    return float(result.confidence_interval.low), float(result.confidence_interval.high)
