"""The report describes each test as the one ``analysis.significance.run_test`` runs."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
from scipy.stats import ttest_rel

from zerda_eval.analysis import significance as sig
from zerda_eval.analysis.compare import CompareSpec
from zerda_eval.report.document import _tests_note


def note(tests: tuple[str, ...]) -> str:
    return _tests_note(SimpleNamespace(spec=CompareSpec(tests=tests, n_permutations=5000, seed=4)))


def test_the_t_test_is_described_as_the_paired_t_test_it_is():
    # what runs: scipy's paired Student's t-test, not a permutation test
    baseline, system = np.array([0.1, 0.5, 0.3, 0.9]), np.array([0.2, 0.4, 0.6, 0.95])
    aligned = sig.align(dict(enumerate(baseline)), dict(enumerate(system)))
    assert sig.run_test("t-test", aligned) == pytest.approx(ttest_rel(system, baseline).pvalue, abs=1e-15)
    only_t = note(("t-test",))
    assert "paired Student's t-test" in only_t and "scipy.stats.ttest_rel" in only_t
    assert "permutation" not in only_t and "sign-flip" not in only_t


def test_the_sign_flips_belong_to_the_randomisation_test():
    both = note(("t-test", "fisher"))
    t_part, fisher_part = both.split("randomisation (Fisher) test", 1)
    assert "sign-flip" not in t_part and "5000 sign-flip permutations" in fisher_part and "seed 4" in fisher_part
