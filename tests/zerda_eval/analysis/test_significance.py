"""zerda_eval.analysis.significance against scipy, hand enumeration, hand-computed Holm, and ranx's tests."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy import stats

from zerda_eval.analysis import significance as sig


def test_align_by_query_id_and_count_missing():
    aligned = sig.align({"q2": 0.5, "q1": 1.0, "q3": 0.2}, {"q1": 0.0, "q3": 0.4, "q4": 1.0})
    assert aligned.query_ids == ["q1", "q2", "q3", "q4"]
    assert aligned.baseline.tolist() == [1.0, 0.5, 0.2, 0.0]
    assert aligned.system.tolist() == [0.0, 0.0, 0.4, 1.0]
    assert (aligned.missing_in_baseline, aligned.missing_in_system) == (1, 1)


def test_misaligned_order_gives_the_aligned_p_value():
    """PyTerrier #64: the same values in a different dict order must give the same test."""
    rng = np.random.default_rng(0)
    qids = [f"q{i}" for i in range(40)]
    base = dict(zip(qids, rng.random(40), strict=True))
    system = {q: base[q] + 0.05 + 0.1 * rng.standard_normal() for q in reversed(qids)}
    aligned = sig.align(base, system)
    expected = stats.ttest_rel([system[q] for q in qids], [base[q] for q in qids]).pvalue
    assert sig.paired_t_test(aligned.baseline, aligned.system) == pytest.approx(expected, rel=1e-12)


def test_t_test_equals_scipy_and_handles_constant_differences():
    rng = np.random.default_rng(1)
    a, b = rng.random(25), rng.random(25)
    assert sig.paired_t_test(a, b) == pytest.approx(stats.ttest_rel(b, a).pvalue, rel=1e-12)
    assert sig.paired_t_test(a, a) == 1.0
    whole = np.arange(5.0)
    assert sig.paired_t_test(whole, whole + 1.0) == 0.0  # every difference is exactly 1: no variance


@pytest.mark.parametrize("n", [1, 4, 7, 10])
def test_randomization_test_is_exact_on_tiny_data(n):
    rng = np.random.default_rng(n)
    base, system = rng.random(n).round(2), rng.random(n).round(2)
    delta = system - base
    observed = abs(delta.mean())
    flips = list(itertools.product([1, -1], repeat=n))
    hits = sum(abs(sum(s * d for s, d in zip(signs, delta, strict=True)) / n) >= observed - 1e-12 for signs in flips)
    assert sig.randomization_test(base, system, n_permutations=10_000) == pytest.approx(hits / 2**n, abs=1e-15)


def test_randomization_monte_carlo_is_seeded_and_close_to_the_t_test_on_normal_data():
    rng = np.random.default_rng(2)
    base = rng.random(200)
    system = base + 0.02 + 0.1 * rng.standard_normal(200)
    p1 = sig.randomization_test(base, system, n_permutations=20_000, seed=5)
    assert p1 == sig.randomization_test(base, system, n_permutations=20_000, seed=5)
    assert 0 < p1 < 1
    assert p1 == pytest.approx(sig.paired_t_test(base, system), abs=0.02)


@pytest.mark.slow  # ranx's numba kernel compiles on first use (tens of seconds on a loaded machine)
def test_randomization_agrees_with_ranx_fisher_test():
    from ranx.statistical_tests import fisher_randomization_test

    rng = np.random.default_rng(3)
    base = rng.random(60)
    system = np.clip(base + 0.03 + 0.15 * rng.standard_normal(60), 0, 1)
    ranx_p, _ = fisher_randomization_test(base, system, n_permutations=20_000, max_p=0.05, random_seed=7)
    assert sig.randomization_test(base, system, n_permutations=20_000) == pytest.approx(ranx_p, abs=0.02)


def test_holm_by_hand():
    p = [0.01, 0.04, 0.03, 0.005]
    # sorted: 0.005*4=0.02, 0.01*3=0.03, 0.03*2=0.06, 0.04*1=0.04 -> monotone max -> 0.06
    assert sig.correct(p, "holm").tolist() == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert sig.correct([0.5, 0.9], "holm").tolist() == pytest.approx([1.0, 1.0])


def test_benjamini_hochberg_by_hand():
    p = [0.01, 0.04, 0.03, 0.005]
    # sorted 0.005, 0.01, 0.03, 0.04: p * m / rank = 0.02, 0.02, 0.04, 0.04; step-up minimum from the top
    assert sig.correct(p, "bh").tolist() == pytest.approx([0.02, 0.04, 0.04, 0.02])
    assert sig.correct([0.2, 0.9], "bh").tolist() == pytest.approx([0.4, 0.9])


def test_bonferroni_and_correct_skips_nan():
    assert sig.correct([0.01, 0.2, 0.5], "bonferroni").tolist() == pytest.approx([0.03, 0.6, 1.0])
    out = sig.correct([0.01, float("nan"), 0.02], "holm")
    assert out[0] == pytest.approx(0.02) and np.isnan(out[1]) and out[2] == pytest.approx(0.02)


def test_wilcoxon_equals_scipy_and_is_one_without_differences():
    rng = np.random.default_rng(8)
    base, system = rng.random(25), rng.random(25)
    assert sig.wilcoxon_test(base, system) == pytest.approx(stats.wilcoxon(system - base).pvalue)
    # exact by enumeration on 6 differences: the signed-rank statistic over all 2^6 sign vectors
    delta = np.array([0.1, -0.2, 0.3, 0.4, 0.5, 0.65])
    ranks = stats.rankdata(np.abs(delta))
    observed = ranks[delta > 0].sum()
    totals = [sum(r for r, s in zip(ranks, signs, strict=True) if s) for signs in itertools.product([0, 1], repeat=6)]
    centre = ranks.sum() / 2
    exact = np.mean([abs(t - centre) >= abs(observed - centre) for t in totals])
    assert sig.wilcoxon_test(np.zeros(6), delta) == pytest.approx(exact)
    assert sig.wilcoxon_test(base, base) == 1.0


def test_cohens_d_paired_by_hand():
    base = np.array([0.1, 0.2, 0.3, 0.4])
    system = np.array([0.2, 0.2, 0.5, 0.5])
    delta = np.array([0.1, 0.0, 0.2, 0.1])
    expected = delta.mean() / np.sqrt(((delta - delta.mean()) ** 2).sum() / 3)
    assert sig.cohens_d_paired(base, system) == pytest.approx(expected)


def test_bootstrap_ci_contains_the_mean_and_shrinks_with_n():
    rng = np.random.default_rng(4)
    small, large = rng.random(20), rng.random(2000)
    lo_s, hi_s = sig.bootstrap_ci(small)
    lo_l, hi_l = sig.bootstrap_ci(large)
    assert lo_s <= small.mean() <= hi_s and lo_l <= large.mean() <= hi_l
    assert hi_l - lo_l < hi_s - lo_s
    # the standard error of the mean, from the normal approximation: width ~ 2 * 1.96 * sd / sqrt(n)
    assert hi_l - lo_l == pytest.approx(2 * 1.96 * large.std(ddof=1) / np.sqrt(2000), rel=0.15)


def test_t_test_equals_ranx_paired_student_t_test():
    from ranx.statistical_tests import paired_student_t_test

    rng = np.random.default_rng(12)
    base, system = rng.random(40), rng.random(40)
    assert sig.paired_t_test(base, system) == pytest.approx(paired_student_t_test(base, system)[0])


@pytest.mark.parametrize("n", [1, 2, 9, 13, 14, 40, 257])
def test_batched_randomization_tests_equal_the_test_pair_by_pair(n):
    """One pass over the shared sign batches gives every pair the p-value of its own test: exact sizes
    (2^n <= permutations), Monte Carlo sizes, differences on a 0.1 grid (many exact ties with the observed
    mean) and pairs with every difference 0 or every difference equal."""
    rng = np.random.default_rng(n)
    base = rng.random((12, n)).round(1)
    system = rng.random((12, n)).round(1)
    system[0] = base[0]  # no difference at all
    system[1] = base[1] + 0.1  # the same difference everywhere
    system[2] = base[2] + np.where(np.arange(n) % 2 == 0, 0.2, -0.2)  # symmetric: ties at the observed mean
    batched = sig.randomization_tests(system - base, n_permutations=10_000, seed=7)
    pairs = list(zip(base, system, strict=True))
    one_by_one = [sig.randomization_test(b, s, n_permutations=10_000, seed=7) for b, s in pairs]
    assert list(batched) == one_by_one
    by_length = sig.by_length([s - b for b, s in pairs], lambda stacked: sig.randomization_tests(stacked, 10_000, 7))
    assert by_length == one_by_one


def test_by_length_groups_pairs_of_different_lengths():
    rng = np.random.default_rng(4)
    deltas = [rng.normal(0.05, 0.2, size) for size in (30, 12, 30, 5, 12)]
    expected = [sig.randomization_test(np.zeros(d.size), d, seed=3) for d in deltas]
    assert sig.by_length(deltas, lambda stacked: sig.randomization_tests(stacked, seed=3)) == expected


def test_randomization_test_exact_enumeration_counts_ties_by_brute_force():
    """Symmetric differences: many sign vectors reach the observed mean exactly; each counts as a hit."""
    delta = np.array([0.3, -0.3, 0.1, 0.1, -0.1, 0.2, 0.2, -0.2, 0.0, 0.3])
    flips = itertools.product([1, -1], repeat=delta.size)
    observed = abs(delta.mean())
    sums = (abs(sum(s * d for s, d in zip(signs, delta, strict=True))) for signs in flips)
    hits = sum(total / delta.size >= observed - 1e-12 for total in sums)
    assert sig.randomization_test(np.zeros(delta.size), delta) == hits / 2**delta.size


def test_sums_near_the_threshold_are_decided_by_the_correctly_rounded_sum():
    """0.1 + 0.2 - 0.3 is 5.55e-17 summed left to right but 2.78e-17 exactly: a threshold between the two
    is decided by the exact sum, whatever order the matrix product summed in."""
    from fractions import Fraction

    deltas = np.array([[0.1, 0.2, -0.3]])
    signs = np.ones((1, 3))
    exact = abs(sum(Fraction(d) for d in deltas[0])) / 3
    threshold = np.array([4e-17 / 3])
    assert float(exact) < threshold[0] <= float(np.abs(signs @ deltas.T)[0, 0]) / 3  # the naive sum is wrong
    slack = np.array([1e-15])
    assert sig._count_hits(signs, deltas, threshold, slack)[0] == int(exact >= Fraction(threshold[0]))
