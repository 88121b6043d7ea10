"""zerda_eval.compare: config validation, baseline comparisons, the RRF-ordering study."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from zerda_eval import compare
from zerda_eval.compare import CompareSpec, parse_compare
from zerda_eval.errors import ConfigError

DOC = {
    "experiment": {"name": "x", "seed": 7},
    "systems": [{"name": "bm25"}, {"name": "hybrid", "grid": {"rrf_order": ["as_documented", "fixed"]}}],
    "compare": {"baseline": "bm25", "tests": ["t-test"], "correction": "bonferroni", "alpha": 0.01},
    "study": {"rrf_order": {"system": "hybrid"}},
}


def test_parse_compare_reads_everything_and_defaults():
    spec = parse_compare(DOC, "x.toml")
    assert spec == CompareSpec(
        baseline="bm25",
        tests=("t-test",),
        correction="bonferroni",
        alpha=0.01,
        seed=7,
        rrf_order_system="hybrid",
    )
    assert parse_compare({}, "x.toml") == CompareSpec()


@pytest.mark.parametrize(
    ("table", "needle"),
    [
        ({"compare": {"basline": "bm25"}}, "did you mean 'baseline'"),
        ({"compare": {"correction": "holms"}}, "did you mean 'holm'"),
        ({"compare": {"tests": ["wilcoxon"]}}, "allowed: fisher, t-test"),
        ({"compare": {"alpha": 5}}, "alpha must be"),
        ({**DOC, "compare": {"baseline": "bm2"}}, "did you mean 'bm25'"),
        ({"study": {"rrf_ordr": {}}}, "did you mean 'rrf_order'"),
        ({**DOC, "study": {"rrf_order": {"system": "hybird"}}}, "did you mean 'hybrid'"),
        ({**DOC, "study": {"rrf_order": {"system": "bm25"}}}, "'bm25' has no rrf_order grid axis"),
        (
            {
                **DOC,
                "systems": [{"name": "h", "params": {"rrf_order": "fixed"}}],
                "study": {"rrf_order": {"system": "h"}},
            },
            "'h' has no rrf_order grid axis",
        ),
    ],
)
def test_parse_compare_errors_name_file_and_fix(table, needle):
    with pytest.raises(ConfigError, match=needle) as info:
        parse_compare(table, "exp.toml")
    assert str(info.value).startswith("exp.toml") and "\n" not in str(info.value)


def test_parse_compare_accepts_the_study_system_in_a_resolved_config():
    """``experiment.json`` holds variants instead of the grid; the report reads it with the same check."""
    variants = [{"label": f"h[rrf_order={o}]", "params": {"rrf_order": o}} for o in ("as_documented", "fixed")]
    table = {"systems": [{"name": "h", "variants": variants}], "study": {"rrf_order": {"system": "h"}}}
    assert parse_compare(table, "experiment.json").rrf_order_system == "h"
    listed = {"systems": [{"name": "h", "grid": [{"rrf_order": "as_documented"}, {"rrf_order": "fixed"}]}]}
    assert parse_compare({**listed, "study": {"rrf_order": {"system": "h"}}}, "x.toml").rrf_order_system == "h"


def frames(values: dict[tuple[str, str], dict[str, float]], params: dict[str, dict] | None = None):
    """results + per_query frames from {(dataset, system): {qid: ndcg}}; means computed from the values."""
    rows, per_query = [], []
    for (dataset, system), per_q in values.items():
        cell_id = f"{dataset}-{system}"
        rows.append(
            {
                "dataset": dataset,
                "system": system,
                "family": "f",
                "cell_id": cell_id,
                "params": json.dumps((params or {}).get(system, {})),
                "ndcg@10": np.mean(list(per_q.values())),
            }
        )
        per_query += [
            {
                "cell_id": cell_id,
                "dataset": dataset,
                "system": system,
                "query_id": q,
                "measure": "ndcg@10",
                "value": v,
            }
            for q, v in per_q.items()
        ]
    return pd.DataFrame(rows), pd.DataFrame(per_query)


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
    assert compare.kendall_tau_top(["a", "b", "c"], ["b", "a", "c"], depth=3) == pytest.approx(1 / 3)
    assert compare.kendall_tau_top(["a", "b"], ["a", "b"]) == 1.0
    # d is missing from the second list: it ties at rank len + 1 = 3 there
    tau = compare.kendall_tau_top(["a", "d", "b"], ["a", "b"], depth=3)
    assert tau == pytest.approx(stats.kendalltau([1, 2, 3], [1, 3, 2]).statistic)


def write_study_dir(tmp_path):
    per_q = {
        ("d", "h[rrf_order=as_documented,w=1]"): {"q1": 0.2, "q2": 0.4, "q3": 0.6},
        ("d", "h[rrf_order=fixed,w=1]"): {"q1": 0.3, "q2": 0.4, "q3": 0.8},
        ("d", "h[rrf_order=as_documented,w=2]"): {"q1": 0.5, "q2": 0.5, "q3": 0.5},
        ("d", "h[rrf_order=fixed,w=2]"): {"q1": 0.5, "q2": 0.6, "q3": 0.5},
    }
    params = {s: {"rrf_order": s.split("rrf_order=")[1].split(",")[0], "w": int(s[-2])} for _, s in per_q}
    results, per_query = frames(per_q, params)
    rankings = {
        "as_documented": {"q1": "abc", "q2": "abc", "q3": "abc"},
        "fixed": {"q1": "bac", "q2": "abc", "q3": "abd"},
    }
    for _, row in results.iterrows():
        folder = tmp_path / "cells" / row["cell_id"]
        folder.mkdir(parents=True)
        order = json.loads(row["params"])["rrf_order"]
        lines = [f"{q} Q0 {d} {r} {10 - r} t" for q, docs in rankings[order].items() for r, d in enumerate(docs, 1)]
        (folder / "run.trec").write_text("\n".join(lines) + "\n")
    return results, per_query


def test_rrf_order_study_pairs_deltas_changes_and_verdict(tmp_path):
    results, per_query = write_study_dir(tmp_path)
    spec = CompareSpec(tests=("t-test", "fisher"), rrf_order_system="h", rrf_order_depth=3)
    study = compare.rrf_order_study(results, per_query, tmp_path, spec)
    pairs = study.pairs.set_index("setting")
    assert set(pairs.index) == {"w=1", "w=2"}
    assert pairs.loc["w=1", "delta"] == pytest.approx((0.1 + 0.0 + 0.2) / 3)
    assert pairs.loc["w=1", "p_t-test"] == pytest.approx(stats.ttest_rel([0.3, 0.4, 0.8], [0.2, 0.4, 0.6]).pvalue)
    assert pairs.loc["w=1", "top_changed_share"] == pytest.approx(2 / 3)  # q1 and q3 changed
    tau_q1 = stats.kendalltau([1, 2, 3], [2, 1, 3]).statistic
    tau_q3 = stats.kendalltau([1, 2, 3, 4], [1, 2, 4, 3]).statistic  # union a b c d; c/d absent -> rank 4
    assert pairs.loc["w=1", "kendall_tau"] == pytest.approx((tau_q1 + 1.0 + tau_q3) / 3)
    headline = study.datasets.iloc[0]
    per_query_mean_delta = np.mean([(0.1 + 0.0) / 2, (0.0 + 0.1) / 2, (0.2 + 0.0) / 2])
    assert headline["delta"] == pytest.approx(per_query_mean_delta)
    assert headline["settings"] == 2
    assert f"{headline['delta']:+.4f}" in study.verdict
    assert f"{headline['top_changed_share']:.1%}" in study.verdict
    assert "0 of 1 dataset(s)" in study.verdict  # 3 queries: nothing is significant


def test_verdict_follows_the_numbers():
    spec = CompareSpec(tests=("t-test",), rrf_order_depth=10)
    base = {"settings": 3, "top_changed_share": 0.4, "kendall_tau": 0.8, "measure": "ndcg@10"}
    gains = pd.DataFrame(
        [
            base | {"dataset": "a", "delta": 0.03, "significant_t-test": True},
            base | {"dataset": "b", "delta": 0.01, "significant_t-test": True},
        ]
    )
    text = compare.study_verdict(gains, "ndcg@10", spec)
    assert (
        "between +0.0100 (b) and +0.0300 (a)" in text
        and "on 2 of 2 dataset(s): 2 gain(s)" in text
        and "material" in text
    )
    assert 'use rrf_order = "fixed"' in text
    null = gains.assign(delta=[0.001, -0.002], **{"significant_t-test": [False, False]})
    assert "without a measurable effect" in compare.study_verdict(null, "ndcg@10", spec)
