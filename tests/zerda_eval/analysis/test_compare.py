"""zerda_eval.analysis: [compare] and [study] validation, baseline comparisons, top-k agreement."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from tests.zerda_eval.analysis.frames import frames
from zerda_eval.analysis import compare
from zerda_eval.analysis.agreement import kendall_tau_top
from zerda_eval.analysis.compare import CompareSpec, parse_compare
from zerda_eval.analysis.settings import parse_analysis
from zerda_eval.analysis.studies import rrf_order
from zerda_eval.errors import ConfigError

DOC = {
    "experiment": {"name": "x", "seed": 7},
    "systems": [{"name": "bm25"}, {"name": "hybrid", "grid": {"rrf_order": ["as_documented", "fixed"]}}],
    "compare": {"baseline": "bm25", "tests": ["t-test"], "correction": "bonferroni", "alpha": 0.01},
    "study": {"rrf_order": {"system": "hybrid"}},
}


def test_parse_analysis_reads_everything_and_defaults():
    settings = parse_analysis(DOC, "x.toml")
    assert settings.compare == CompareSpec(
        baseline="bm25", tests=("t-test",), correction="bonferroni", alpha=0.01, seed=7
    )
    assert settings.studies == {"rrf_order": rrf_order.Settings(system="hybrid")}
    assert parse_compare({}, "x.toml") == CompareSpec()


@pytest.mark.parametrize(
    ("table", "needle"),
    [
        ({"compare": {"basline": "bm25"}}, "did you mean 'baseline'"),
        ({"compare": {"correction": "holms"}}, "did you mean 'holm'"),
        ({"compare": {"tests": ["sign"]}}, "allowed: fisher, t-test, wilcoxon"),
        ({"compare": {"alpha": 5}}, "alpha must be"),
        ({"compare": {"min_effect": -0.1}}, "min_effect must be a positive number"),
        ({"compare": {"power": 1.5}}, "power must be a number between 0 and 1"),
        ({**DOC, "compare": {"baseline": "bm2"}}, "did you mean 'bm25'"),
        ({"study": {"rrf_ordr": {}}}, "did you mean 'rrf_order'"),
        ({**DOC, "study": {"rrf_order": {"system": "hybird"}}}, "did you mean 'hybrid'"),
        ({**DOC, "study": {"rrf_order": {"system": "bm25"}}}, "'bm25' has no rrf_order grid axis"),
        ({**DOC, "study": {"rrf_order": {"system": "hybrid", "depht": 3}}}, "did you mean 'depth'"),
        (
            {
                "systems": [{"name": "h", "params": {"rrf_order": "fixed"}}],
                "study": {"rrf_order": {"system": "h"}},
            },
            "'h' has no rrf_order grid axis",
        ),
    ],
)
def test_analysis_errors_name_file_and_fix(table, needle):
    with pytest.raises(ConfigError, match=needle) as info:
        parse_analysis(table, "exp.toml")
    assert str(info.value).startswith("exp.toml") and "\n" not in str(info.value)


def test_the_study_system_is_found_in_a_resolved_config():
    """``experiment.json`` holds variants instead of the grid; the report reads it with the same check."""
    variants = [{"label": f"h[rrf_order={o}]", "params": {"rrf_order": o}} for o in ("as_documented", "fixed")]
    table = {"systems": [{"name": "h", "variants": variants}], "study": {"rrf_order": {"system": "h"}}}
    assert parse_analysis(table, "experiment.json").studies["rrf_order"].system == "h"
    listed = {"systems": [{"name": "h", "grid": [{"rrf_order": "as_documented"}, {"rrf_order": "fixed"}]}]}
    assert (
        parse_analysis({**listed, "study": {"rrf_order": {"system": "h"}}}, "x.toml").studies["rrf_order"].system == "h"
    )


def test_generic_analysis_code_does_not_know_the_study():
    """Studies are plug-ins: compare, settings and the report never name the RRF-order study."""
    from pathlib import Path

    root = Path(compare.__file__).parents[1]
    generic = [
        root / "analysis" / "compare.py",
        root / "analysis" / "settings.py",
        *sorted((root / "report").glob("*.py")),
    ]
    for path in generic:
        assert "rrf_order" not in path.read_text(encoding="utf-8"), path


def test_compare_to_baseline_aligns_counts_missing_and_corrects_per_dataset():
    base = {"q1": 0.1, "q2": 0.5, "q3": 0.3, "q4": 0.9, "q5": 0.2}
    a = {"q5": 0.4, "q4": 0.9, "q3": 0.6, "q2": 0.7}  # q1 missing -> 0
    b = {"q1": 0.2, "q2": 0.4, "q3": 0.3, "q4": 0.8, "q5": 0.1}
    results, per_query = frames({("d", "bm25"): base, ("d", "a"): a, ("d", "b"): b, ("e", "bm25"): base, ("e", "a"): b})
    spec = CompareSpec(baseline="bm25", tests=("t-test",), correction="holm")
    table = compare.compare_to_baseline(results, per_query, spec).set_index(["dataset", "system"])
    qids = sorted(base)
    a_values = [a.get(q, 0.0) for q in qids]
    assert table.loc[("d", "a"), "missing_in_system"] == 1
    assert table.loc[("d", "a"), "delta"] == pytest.approx(np.mean(a_values) - np.mean(list(base.values())))
    p_a = stats.ttest_rel(a_values, [base[q] for q in qids]).pvalue
    p_b = stats.ttest_rel([b[q] for q in qids], [base[q] for q in qids]).pvalue
    assert table.loc[("d", "a"), "p_t-test"] == pytest.approx(p_a)
    low, high = sorted([p_a, p_b])
    holm_by_hand = {low: min(1, 2 * low), high: min(1, max(2 * low, high))}  # m = 2 comparisons
    assert table.loc[("d", "a"), "p_t-test_adj"] == pytest.approx(holm_by_hand[p_a])
    assert table.loc[("d", "b"), "p_t-test_adj"] == pytest.approx(holm_by_hand[p_b])
    # dataset "e" is its own family: one comparison, nothing to correct
    assert table.loc[("e", "a"), "p_t-test_adj"] == pytest.approx(table.loc[("e", "a"), "p_t-test"])


def test_baseline_must_resolve_to_one_cell():
    results, per_query = frames({("d", "bm25[k1=1]"): {"q": 1.0}, ("d", "bm25[k1=2]"): {"q": 0.5}})
    with pytest.raises(ConfigError, match="exactly one cell on dataset 'd'"):
        compare.compare_to_baseline(results, per_query, CompareSpec(baseline="bm25"))


def test_kendall_tau_top_by_hand():
    # union {a, b, c}: ranks a (1, 2), b (2, 1), c (3, 3): 2 concordant, 1 discordant pair -> 1/3
    assert kendall_tau_top(["a", "b", "c"], ["b", "a", "c"], depth=3) == pytest.approx(1 / 3)
    assert kendall_tau_top(["a", "b"], ["a", "b"]) == 1.0
    # d is missing from the second list: it ties at rank len + 1 = 3 there
    tau = kendall_tau_top(["a", "d", "b"], ["a", "b"], depth=3)
    assert tau == pytest.approx(stats.kendalltau([1, 2, 3], [1, 3, 2]).statistic)


def test_every_comparison_carries_effects_agreement_and_power_from_scipy_and_statsmodels():
    from statsmodels.stats.multitest import multipletests
    from statsmodels.stats.power import TTestPower

    rng = np.random.default_rng(21)
    base = {f"q{i}": float(v) for i, v in enumerate(rng.random(30))}
    systems = {
        name: {q: v + shift + rng.normal(0, 0.1) for q, v in base.items()}
        for name, shift in (("a", 0.08), ("b", 0.01), ("c", -0.03))
    }
    results, per_query = frames({("d", "bm25"): base, **{("d", name): values for name, values in systems.items()}})
    spec = CompareSpec(baseline="bm25", tests=("t-test", "fisher"), correction="holm", min_effect=0.02)
    table = compare.compare_to_baseline(results, per_query, spec).set_index("system")
    qids = sorted(base)
    raw = {}
    for name, values in systems.items():
        delta = np.array([values[q] - base[q] for q in qids])
        row = table.loc[name]
        assert row["p_wilcoxon"] == pytest.approx(stats.wilcoxon(delta).pvalue)
        half = stats.t.ppf(0.975, 29) * delta.std(ddof=1) / np.sqrt(30)
        assert (row["t_low"], row["t_high"]) == pytest.approx((delta.mean() - half, delta.mean() + half))
        bca = stats.bootstrap((delta,), np.mean, method="BCa", n_resamples=2000, rng=spec.seed).confidence_interval
        assert (row["ci_low"], row["ci_high"]) == pytest.approx((bca.low, bca.high))
        mde = TTestPower().solve_power(nobs=30, alpha=0.05, power=0.8) * delta.std(ddof=1)
        assert row["mde"] == pytest.approx(mde)
        decisions = {row[f"p_{test}"] < 0.05 for test in ("t-test", "fisher", "wilcoxon")}
        assert row["tests_agree"] == (len(decisions) == 1)
        assert row["underpowered"] == (not row["significant_t-test"] and mde > 0.02)
        raw[name] = row["p_t-test"]
    fdr = multipletests(list(raw.values()), method="fdr_bh")[1]
    assert [table.loc[name, "p_t-test_bh"] for name in raw] == pytest.approx(list(fdr))


def test_batched_randomisation_p_values_and_intervals_equal_each_pairs_own():
    """The report tests its pairs together (one pass over the sign batches and the resampling draws per
    query count); every p_fisher and BCa interval is still that pair's own call's, on datasets of two sizes."""
    from zerda_eval.analysis import significance as sig
    from zerda_eval.analysis.effects import bca_interval

    rng = np.random.default_rng(8)
    values = {}
    for dataset, size in (("small", 40), ("large", 90)):
        base = {f"q{i}": float(v) for i, v in enumerate(rng.random(size).round(1))}
        values[(dataset, "bm25")] = base
        for name, shift in (("a", 0.05), ("b", 0.0), ("c", -0.02)):
            values[(dataset, name)] = {q: round(v + shift + rng.normal(0, 0.2), 1) for q, v in base.items()}
    results, per_query = frames(values)
    spec = CompareSpec(baseline="bm25", tests=("fisher",), n_permutations=3_000, seed=4)
    table = compare.compare_to_baseline(results, per_query, spec).set_index(["dataset", "system"])
    for (dataset, name), row in table.iterrows():
        qids = sorted(values[(dataset, "bm25")])
        base = [values[(dataset, "bm25")][q] for q in qids]
        system = [values[(dataset, name)][q] for q in qids]
        assert row["p_fisher"] == sig.randomization_test(np.array(base), np.array(system), 3_000, 4)
        assert (row["ci_low"], row["ci_high"]) == bca_interval(np.array(system) - np.array(base), seed=4)
