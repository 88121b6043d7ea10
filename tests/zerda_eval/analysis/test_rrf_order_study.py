"""The RRF-order study plug-in (analysis.studies.rrf_order): pairs, deltas, agreement and the verdict."""

from __future__ import annotations

import gzip
import json

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from tests.zerda_eval.analysis.frames import frames
from zerda_eval.analysis.compare import CompareSpec
from zerda_eval.analysis.studies import rrf_order
from zerda_eval.analysis.studies.base import FinishedRun
from zerda_eval.store.run_dir import RUN_FILE


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
        (folder / RUN_FILE).write_bytes(gzip.compress(("\n".join(lines) + "\n").encode()))
    return results, per_query


def test_rrf_order_study_pairs_deltas_changes_and_verdict(tmp_path):
    results, per_query = write_study_dir(tmp_path)
    spec = CompareSpec(tests=("t-test", "fisher"))
    finished = FinishedRun(tmp_path, results, per_query, spec, ["ndcg@10"])
    study = rrf_order.compute(rrf_order.Settings(system="h", depth=3), finished)
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
    spec = CompareSpec(tests=("t-test",))
    base = {"settings": 3, "top_changed_share": 0.4, "kendall_tau": 0.8, "measure": "ndcg@10"}
    gains = pd.DataFrame(
        [
            base | {"dataset": "a", "delta": 0.03, "significant_t-test": True},
            base | {"dataset": "b", "delta": 0.01, "significant_t-test": True},
        ]
    )
    text = rrf_order.verdict(gains, "ndcg@10", spec, 10)
    assert (
        "between +0.0100 (b) and +0.0300 (a)" in text
        and "on 2 of 2 dataset(s): 2 gain(s)" in text
        and "material" in text
    )
    assert 'use rrf_order = "fixed"' in text
    null = gains.assign(delta=[0.001, -0.002], **{"significant_t-test": [False, False]})
    assert "without a measurable effect" in rrf_order.verdict(null, "ndcg@10", spec, 10)


def test_tuned_pair_is_reported_on_its_own_and_not_pooled(tmp_path):
    """The tuned rows (each order at its held-out best) form a pair of their own, outside the pooled mean."""
    results, per_query = write_study_dir(tmp_path)
    tuned = {"as_documented": {"q1": 0.1, "q2": 0.1, "q3": 0.1}, "fixed": {"q1": 0.9, "q2": 0.8, "q3": 0.9}}
    extra_results, extra_per_query = frames(
        {("d", f"h[rrf_order={order},tuned]"): values for order, values in tuned.items()},
        {f"h[rrf_order={order},tuned]": {"rrf_order": order, "tuned": "5-fold"} for order in tuned},
    )
    for _, row in extra_results.iterrows():
        folder = tmp_path / "cells" / row["cell_id"]
        folder.mkdir(parents=True)
        (folder / RUN_FILE).write_bytes(gzip.compress(b"q1 Q0 a 1 1 t\nq2 Q0 a 1 1 t\nq3 Q0 a 1 1 t\n"))
    results = pd.concat([results, extra_results], ignore_index=True)
    per_query = pd.concat([per_query, extra_per_query], ignore_index=True)
    finished = FinishedRun(tmp_path, results, per_query, CompareSpec(tests=("t-test",)), ["ndcg@10"])
    study = rrf_order.compute(rrf_order.Settings(system="h", depth=3), finished)

    assert set(study.pairs["setting"]) == {"w=1", "w=2", "tuned=5-fold"}
    headline = study.datasets.iloc[0]
    assert headline["settings"] == 2  # the grid's two pairs only, in every per-dataset figure
    assert headline["significant_settings"] <= 2
    grid = study.pairs[(study.pairs["measure"] == "ndcg@10") & (study.pairs["setting"] != "tuned=5-fold")]
    assert headline["top_changed_share"] == pytest.approx(grid["top_changed_share"].mean())
    assert headline["kendall_tau"] == pytest.approx(grid["kendall_tau"].mean())
    assert headline["delta"] == pytest.approx(np.mean([(0.1 + 0.0) / 2, (0.0 + 0.1) / 2, (0.2 + 0.0) / 2]))
    row = study.tuned.iloc[0]
    assert (row["dataset"], row["mean_baseline"], row["mean_system"]) == (
        "d",
        pytest.approx(0.1),
        pytest.approx(26 / 30),
    )
    assert row["delta"] == pytest.approx(np.mean([0.8, 0.7, 0.8]))
    assert "own best settings chosen on held-out queries" in study.verdict and "+0.7667 (d)" in study.verdict
    section = rrf_order.run(rrf_order.Settings(system="h", depth=3), finished)
    titles = [title for title, _ in section.tables]
    assert titles == ["Per dataset", "Each order at its own held-out best settings (tuned rows)"]
    assert section.tables[1][1].iloc[0]["fixed[tuned]"] == "0.8667"
    # the grid settings are named by what varies among them (w), the tuned pair by how it was tuned
    assert list(section.detail[0][1]["setting"]) == ["w=1", "w=2", "tuned=5-fold"]


def test_the_tie_aware_delta_stands_beside_the_delta_in_the_tie_order(tmp_path):
    """Fixed minus as-documented of the cells' expected values over every order of tied documents."""
    results, per_query = write_study_dir(tmp_path)
    expected = {"as_documented,w=1": 0.40, "fixed,w=1": 0.43, "as_documented,w=2": 0.50, "fixed,w=2": 0.49}
    results["ndcg@10 expected"] = [expected[s.split("rrf_order=")[1][:-1]] for s in results["system"]]
    finished = FinishedRun(tmp_path, results, per_query, CompareSpec(tests=("t-test",)), ["ndcg@10"])
    study = rrf_order.compute(rrf_order.Settings(system="h", depth=3), finished)
    pairs = study.pairs.set_index("setting")
    assert pairs.loc["w=1", "tie_aware_delta"] == pytest.approx(0.03)
    assert pairs.loc["w=2", "tie_aware_delta"] == pytest.approx(-0.01)
    assert study.datasets.iloc[0]["tie_aware_delta"] == pytest.approx(0.01)  # the mean over the pooled settings
    assert "the change is between +0.0100 and +0.0100 per dataset" in study.verdict
    headline, detail = rrf_order._tables(study, finished.compare, 3)
    assert headline["tie-aware delta"].tolist() == ["+0.0100"]
    assert detail["tie-aware delta"].tolist() == ["+0.0300", "-0.0100"]
