"""Paired significance tests, multiple-comparison correction and effect sizes for per-query scores.

Every test starts from ``align``: per-query values of two systems are matched by query id (PyTerrier
issue #64: tests on misaligned arrays gave wrong p-values); a query missing from one side counts as 0
and the number missing is returned so reports can say it.

- ``paired_t_test``: two-sided paired Student's t-test (``scipy.stats.ttest_rel``).
- ``randomization_test``: two-sided paired randomisation (Fisher) test on the mean difference
  (Smucker, Allan & Carterette, CIKM 2007): signs of the per-query differences are flipped at random.
  Exact (all 2^n sign vectors) when 2^n <= ``n_permutations``; otherwise seeded Monte Carlo with the
  ``(hits + 1) / (n + 1)`` estimate, so a p-value is never 0. Every pair with the same number of queries
  and seed flips the same signs, so ``randomization_tests`` tests many pairs in one pass over the sign
  batches (one matrix product per batch); a sum within its rounding bound of the threshold is decided by
  its correctly rounded value (``math.fsum``), so a p-value does not depend on the batch or the BLAS.
- ``wilcoxon_test``: two-sided Wilcoxon signed-rank test (``scipy.stats.wilcoxon``), the rank-based
  third opinion beside the t-test and the randomisation test (``analysis.agreement`` of tests).
- ``correct``: adjusted p-values over one family of comparisons: Holm, Bonferroni (family-wise error) or
  Benjamini-Hochberg (false discovery rate), all from ``statsmodels.stats.multitest.multipletests``.
- ``cohens_d_paired`` and ``bootstrap_ci``: effect size of the per-query difference.
- ``by_length``: a batched computation (``randomization_tests``, ``effects.bca_intervals``) over the pairs of
  each query count, whose seeded draws are the same.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

import numpy as np

DEFAULT_PERMUTATIONS = 10_000
DEFAULT_SEED = 13
RANDOMIZATION = "fisher"  # the name of ``randomization_test`` in ``TESTS``
TESTS = ("t-test", RANDOMIZATION, "wilcoxon")  # every test a [compare] table may name
DEFAULT_TESTS = ("t-test", RANDOMIZATION)
CORRECTIONS = {"holm": "holm", "bonferroni": "bonferroni", "bh": "fdr_bh"}  # ours -> statsmodels' name
FDR = "bh"  # the false-discovery-rate correction every comparison also carries beside the configured one
T = TypeVar("T")
_BATCH = 2_000  # permutations per vectorised batch: bounds memory at batch * n
_VALUES_PER_BATCH = 2_000_000  # resampled values held at once (``bootstrap_means``): 16 MB of indices and 16 of values


@dataclass(frozen=True)
class Aligned:
    """Per-query values of a baseline and a system on the same query ids, in the same order."""

    query_ids: list[str]
    baseline: np.ndarray
    system: np.ndarray
    missing_in_baseline: int
    missing_in_system: int

    @property
    def delta(self) -> np.ndarray:
        """System minus baseline, per query."""
        return self.system - self.baseline


def align(
    baseline: Mapping[str, float], system: Mapping[str, float], query_ids: Sequence[str] | None = None
) -> Aligned:
    """Match two ``{query_id: value}`` maps on ``query_ids`` (default: the union, sorted); missing = 0."""
    ids = sorted(set(baseline) | set(system)) if query_ids is None else list(query_ids)
    return Aligned(
        query_ids=ids,
        baseline=np.array([float(baseline.get(q, 0.0)) for q in ids]),
        system=np.array([float(system.get(q, 0.0)) for q in ids]),
        missing_in_baseline=sum(q not in baseline for q in ids),
        missing_in_system=sum(q not in system for q in ids),
    )


def paired_t_test(baseline: np.ndarray, system: np.ndarray) -> float:
    """Two-sided p-value of the paired t-test.

    Where scipy returns NaN (fewer than 2 queries, or zero variance of the differences) this returns
    1.0 if every difference is zero and 0.0 if they are all the same non-zero value.
    """
    from scipy.stats import ttest_rel

    delta = np.asarray(system, float) - np.asarray(baseline, float)
    if delta.size < 2 or np.all(delta == delta[0]):
        return 0.0 if delta.size >= 2 and delta[0] != 0 else 1.0
    return float(ttest_rel(system, baseline).pvalue)


def _sign_matrix_exact(n: int) -> np.ndarray:
    codes = np.arange(2**n, dtype=np.int64)[:, None]
    bits = (codes >> np.arange(n, dtype=np.int64)) & 1
    return 1.0 - 2.0 * bits


def _exact(n: int, n_permutations: int) -> bool:
    """Whether the test on ``n`` queries enumerates all 2^n sign vectors (no more than ``n_permutations``)."""
    return n <= 30 and 2**n <= n_permutations


def _sign_batches(n: int, n_permutations: int, seed: int) -> Iterator[np.ndarray]:
    """The sign vectors of the test on ``n`` queries, in batches: all 2^n when exact, else ``n_permutations``
    seeded draws (the same for every pair with the same n and seed)."""
    if _exact(n, n_permutations):
        yield _sign_matrix_exact(n)
        return
    rng = np.random.default_rng(seed)
    for start in range(0, n_permutations, _BATCH):
        size = min(_BATCH, n_permutations - start)
        yield rng.integers(0, 2, size=(size, n), dtype=np.int8) * 2 - 1


def _count_hits(signs: np.ndarray, deltas: np.ndarray, thresholds: np.ndarray, slack: np.ndarray) -> np.ndarray:
    """Per row of ``deltas``, how many sign vectors give |mean of signed differences| >= its threshold.

    The sums come from one matrix product, whose rounding depends on the BLAS and on how many pairs share
    it; a sum within ``slack`` (its bound on that rounding) of the threshold is decided again from the
    correctly rounded sum (``math.fsum``), so a p-value is the same whatever the batch and the machine."""
    n = deltas.shape[1]
    stats = np.abs(signs @ deltas.T) / n
    hits = stats >= thresholds
    for row, pair in np.argwhere(np.abs(stats - thresholds) <= slack):
        hits[row, pair] = abs(math.fsum(signs[row] * deltas[pair])) / n >= thresholds[pair]
    return np.count_nonzero(hits, axis=0)


def randomization_tests(
    deltas: np.ndarray, n_permutations: int = DEFAULT_PERMUTATIONS, seed: int = DEFAULT_SEED
) -> np.ndarray:
    """``randomization_test`` of each row of ``deltas`` (pairs x queries: system minus baseline), from one
    pass over the sign batches they share (one matrix product per batch instead of one per pair)."""
    deltas = np.asarray(deltas, float)
    pairs, n = deltas.shape
    if n == 0:
        return np.ones(pairs)
    observed = np.array([abs(row.mean()) for row in deltas])
    tolerance = 1e-12 * np.maximum(1.0, np.abs(deltas).max(axis=1))
    thresholds = observed - tolerance
    # rounding of a sum of n signed terms in any order: at most n * eps * sum |terms|, plus the division
    eps = np.finfo(float).eps
    slack = 4 * (n + 1) * eps * (np.abs(deltas).sum(axis=1) / n + np.abs(thresholds))
    hits = sum(_count_hits(signs, deltas, thresholds, slack) for signs in _sign_batches(n, n_permutations, seed))
    if _exact(n, n_permutations):
        return hits / 2**n
    return (hits + 1) / (n_permutations + 1)


def randomization_test(
    baseline: np.ndarray,
    system: np.ndarray,
    n_permutations: int = DEFAULT_PERMUTATIONS,
    seed: int = DEFAULT_SEED,
) -> float:
    """Two-sided paired randomisation test of the mean difference (sign-flip), vectorised with numpy."""
    delta = np.asarray(system, float) - np.asarray(baseline, float)
    return float(randomization_tests(delta[None, :], n_permutations, seed)[0])


def by_length(vectors: Sequence[np.ndarray], batched: Callable[[np.ndarray], Sequence[T]]) -> list[T]:
    """``batched`` of the per-query vectors of each length stacked (vectors x queries), so the pairs with the
    same number of queries share one batched call (their seeded draws are the same); results in order given."""
    by_size: dict[int, list[int]] = {}
    for index, vector in enumerate(vectors):
        by_size.setdefault(len(vector), []).append(index)
    results: dict[int, T] = {}
    for size, indices in by_size.items():
        stacked = np.array([vectors[i] for i in indices], float).reshape(len(indices), size)
        results.update(zip(indices, batched(stacked), strict=True))
    return [results[index] for index in range(len(vectors))]


def correct(pvalues: Sequence[float], method: str) -> np.ndarray:
    """Adjust ``pvalues`` with ``method`` (``CORRECTIONS``: holm, bonferroni, bh) by statsmodels'
    ``multipletests``; NaN entries stay NaN and are not counted in the family."""
    from statsmodels.stats.multitest import multipletests

    p = np.asarray(pvalues, float)
    out = np.full(p.shape, np.nan)
    valid = ~np.isnan(p)
    if valid.any():
        out[valid] = multipletests(p[valid], method=CORRECTIONS[method])[1]
    return out


def wilcoxon_test(baseline: np.ndarray, system: np.ndarray) -> float:
    """Two-sided p-value of the Wilcoxon signed-rank test (``scipy.stats.wilcoxon``; zero differences
    dropped, scipy's default; exact or normal approximation as scipy chooses). 1.0 when every difference is 0."""
    from scipy.stats import wilcoxon

    delta = np.asarray(system, float) - np.asarray(baseline, float)
    if not np.any(delta != 0):
        return 1.0
    return float(wilcoxon(delta).pvalue)


def cohens_d_paired(baseline: np.ndarray, system: np.ndarray) -> float:
    """Cohen's d for paired samples (d_z): mean difference over the sample std of the differences."""
    delta = np.asarray(system, float) - np.asarray(baseline, float)
    if delta.size < 2:
        return float("nan")
    std = delta.std(ddof=1)
    if std == 0:
        return 0.0 if delta.mean() == 0 else float(np.sign(delta.mean()) * np.inf)
    return float(delta.mean() / std)


def bootstrap_means(deltas: np.ndarray, n_resamples: int, seed: int) -> np.ndarray:
    """The means of ``n_resamples`` resamples with replacement of each row of ``deltas`` (rows x queries),
    drawn as ``scipy.stats.bootstrap`` draws them for one row (one ``integers(0, n, (n_resamples, n))`` from
    ``default_rng(seed)``), in row batches shared by every row: rows x resamples."""
    rows, n = deltas.shape
    rng = np.random.default_rng(seed)
    means = np.empty((rows, n_resamples))
    batch = max(1, _VALUES_PER_BATCH // n)
    for start in range(0, n_resamples, batch):
        size = min(batch, n_resamples - start)
        draws = rng.integers(0, n, (size, n))
        for row, delta in enumerate(deltas):
            means[row, start : start + size] = delta[draws].mean(axis=-1)
    return means


def bootstrap_ci(
    values: np.ndarray, n_resamples: int = 2_000, level: float = 0.95, seed: int = DEFAULT_SEED
) -> tuple[float, float]:
    """Percentile bootstrap confidence interval of the mean of ``values`` (vectorised resampling)."""
    values = np.asarray(values, float)
    if values.size == 0:
        return float("nan"), float("nan")
    means = bootstrap_means(values[None, :], n_resamples, seed)[0]
    tail = (1 - level) / 2 * 100
    low, high = np.percentile(means, [tail, 100 - tail])
    return float(low), float(high)


def describe_test(test: str, n_permutations: int = DEFAULT_PERMUTATIONS, seed: int = DEFAULT_SEED) -> str:
    """What ``run_test(test, ...)`` runs, in words, for the report."""
    if test == "t-test":
        return "paired Student's t-test, two-sided (scipy.stats.ttest_rel)"
    if test == "wilcoxon":
        return "Wilcoxon signed-rank test, two-sided, zero differences dropped (scipy.stats.wilcoxon)"
    return (
        f"randomisation (Fisher) test, two-sided: {n_permutations} sign-flip permutations of the per-query "
        f"differences, seed {seed} (exact when 2^n <= permutations)"
    )


def run_test(
    test: str, aligned: Aligned, n_permutations: int = DEFAULT_PERMUTATIONS, seed: int = DEFAULT_SEED
) -> float:
    """p-value of ``test`` (``TESTS``) on aligned per-query values."""
    if test == "t-test":
        return paired_t_test(aligned.baseline, aligned.system)
    if test == "wilcoxon":
        return wilcoxon_test(aligned.baseline, aligned.system)
    return randomization_test(aligned.baseline, aligned.system, n_permutations, seed)
