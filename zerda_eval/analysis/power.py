"""Power of a paired comparison and topic-set size (Sakai, SIGIR 2016 and IRJ 2016).

With ``n`` queries and the standard deviation ``sd`` of the per-query differences, the paired t-test at
``alpha`` detects, with probability ``power``, a mean difference of at least ``minimum_detectable_effect``;
``queries_needed`` is Sakai's topic-set size: the queries a difference ``effect`` needs at that variance.
Both solve the non-central t power equation with statsmodels' ``TTestPower`` (one-sample t on the
differences, two-sided), converting between the standardised effect and the measure's units by ``sd``.
"""

from __future__ import annotations

import math

POWER = 0.8
MIN_QUERIES = 2  # a t-test needs two differences


def minimum_detectable_effect(n: int, sd: float, alpha: float, power: float = POWER) -> float:
    """The smallest |mean difference| (measure units) detected with ``power`` by ``n`` queries (NaN below 2)."""
    from statsmodels.stats.power import TTestPower

    if n < MIN_QUERIES or not math.isfinite(sd):
        return float("nan")
    if sd == 0:
        return 0.0
    standardised = TTestPower().solve_power(effect_size=None, nobs=n, alpha=alpha, power=power)
    return float(standardised) * sd


def queries_needed(effect: float, sd: float, alpha: float, power: float = POWER) -> float:
    """Queries a true mean difference ``effect`` needs to be detected with ``power`` at ``alpha`` when the
    differences have standard deviation ``sd`` (rounded up; ``inf`` for a zero effect, NaN without a variance)."""
    from statsmodels.stats.power import TTestPower

    if not math.isfinite(sd):
        return float("nan")
    if effect == 0:
        return math.inf
    if sd == 0:
        return float(MIN_QUERIES)
    standardised = abs(effect) / sd
    # Two queries suffice when their power already reaches ``power`` (statsmodels gives NaN there when the
    # non-centrality is so large that the power is 1 to double precision); the solver's root lies below 2.
    if not TTestPower().power(standardised, MIN_QUERIES, alpha) < power:
        return float(MIN_QUERIES)
    nobs = TTestPower().solve_power(effect_size=standardised, nobs=None, alpha=alpha, power=power)
    return float(max(MIN_QUERIES, math.ceil(float(nobs))))
