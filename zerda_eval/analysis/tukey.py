"""All pairs of a grid at once: the randomised Tukey HSD test (Carterette, TOIS 2012).

Per query, the values of the m systems are exchangeable under the null hypothesis that no system
differs; one permutation distribution of the range (largest minus smallest system mean) is drawn by
shuffling each query's values among the systems, and the p-value of a pair is the share of permutations
whose range reaches the pair's observed |mean difference|. It controls the family-wise error over all
m(m-1)/2 pairs of the grid, and respects the pairing by query (each query's row is shuffled as a block).

Written here because no kept library computes it: scipy's and statsmodels' Tukey HSD (what ranx calls)
are the parametric test for independent groups, which ignores the pairing by query. Exact (every
assignment) when (m!)^n is at most ``n_permutations``; otherwise seeded Monte Carlo with the
``(hits + 1) / (n + 1)`` estimate, as ``significance.randomization_test``.
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from zerda_eval.analysis.significance import DEFAULT_PERMUTATIONS, DEFAULT_SEED

_CELLS_PER_BATCH = 4_000_000  # permuted values held at once: bounds memory at 32 MB of float64


def _ranges_exact(scores: np.ndarray) -> np.ndarray:
    """The range of the system means under every assignment of each query's values to the systems."""
    n, m = scores.shape
    orders = [scores[q, list(order)] for q in range(n) for order in itertools.permutations(range(m))]
    per_query = np.array(orders).reshape(n, math.factorial(m), m)
    ranges = []
    for choice in itertools.product(range(math.factorial(m)), repeat=n):
        means = per_query[np.arange(n), list(choice)].mean(axis=0)
        ranges.append(means.max() - means.min())
    return np.array(ranges)


def randomised_tukey_hsd(
    scores: np.ndarray, n_permutations: int = DEFAULT_PERMUTATIONS, seed: int = DEFAULT_SEED
) -> np.ndarray:
    """p-values of every pair of systems: ``scores`` is queries x systems; the result systems x systems
    (1.0 on the diagonal), each the share of permutations whose range of means reaches the pair's difference."""
    scores = np.asarray(scores, float)
    n, m = scores.shape
    means = scores.mean(axis=0)
    observed = np.abs(means[:, None] - means[None, :])
    tolerance = 1e-12 * max(1.0, float(np.abs(scores).max(initial=0.0)))
    if m < 2 or n == 0:
        return np.ones((m, m))
    if math.factorial(m) ** n <= n_permutations:
        ranges = _ranges_exact(scores)
        return (ranges[None, None, :] >= observed[:, :, None] - tolerance).mean(axis=2)
    rng = np.random.default_rng(seed)
    batch = max(1, _CELLS_PER_BATCH // (n * m))
    ranges = np.empty(n_permutations)
    for start in range(0, n_permutations, batch):
        size = min(batch, n_permutations - start)
        shuffled = rng.permuted(np.broadcast_to(scores, (size, n, m)), axis=2)
        permuted_means = shuffled.mean(axis=1)
        ranges[start : start + size] = permuted_means.max(axis=1) - permuted_means.min(axis=1)
    hits = (ranges[None, None, :] >= observed[:, :, None] - tolerance).sum(axis=2)
    return (hits + 1) / (n_permutations + 1)
