"""The RRF-ordering study: what fixing seed 000's documented RRF ordering bug changes.

Configured by ``[study.rrf_order]`` (``system``: a ``[[systems]]`` entry with an ``rrf_order`` grid
axis holding both orders; ``depth``: the top-k whose changes are counted). It pairs the cells of that
system that differ only in ``rrf_order`` and reports, per pair and per dataset, fixed minus
as-documented: mean delta with a bootstrap CI and corrected p-values, the share of queries whose
top-k changed, Kendall's tau and rank-biased overlap between the two rankings, and what a reviewer asks
beside a p-value (``compare.test_pairs``: t and BCa intervals, d_z, the three tests' agreement, the minimum
detectable effect and the under-powered flag); beside the delta in the harness's tie order, the tie-aware
delta (the difference of the cells' expected values over every order of tied documents,
``evaluation.tie_aware``): a delta that tied documents alone make is not a finding. Per dataset, the
per-query deltas are averaged over the pairs (settings) and tested once, so each dataset gets one headline
delta and p-value; corrections run over all pairs (per test) and over all datasets (per test).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from retrieval.zerda.config import AS_DOCUMENTED, FIXED
from zerda_eval.analysis import significance as sig
from zerda_eval.analysis.agreement import RBO_PERSISTENCE, TOP_DEPTH, mean_rbo, ranking_agreement
from zerda_eval.analysis.compare import (
    CompareSpec,
    cells_of,
    check_system_name,
    correct_family,
    entry_names,
    index_per_query,
    measure_columns,
    test_pairs,
)
from zerda_eval.analysis.formatting import DIFFER, UNDERPOWERED, fmt, fmt_ci, fmt_delta, fmt_p
from zerda_eval.analysis.studies.base import FinishedRun, StudyFigure, StudySection
from zerda_eval.checks import check_keys
from zerda_eval.config.tuning import TUNED
from zerda_eval.errors import ConfigError
from zerda_eval.evaluation.tie_aware import EXPECTED
from zerda_eval.store.run_dir import read_cell_run

KEYS = ("system", "depth")
AXIS = "rrf_order"
SETTING_SPLIT = re.compile(r", (?=[A-Za-z_][A-Za-z0-9_]*=)")  # between "key=value" parts of a setting
NEGLIGIBLE_DELTA = 0.005  # |mean delta| below this (absolute, e.g. nDCG points / 100) reads "negligible"


@dataclass(frozen=True)
class Settings:
    """The study's system and the depth of the top lists compared."""

    system: str
    depth: int = TOP_DEPTH


@dataclass(frozen=True)
class StudyData:
    """The study's numbers: per pair and measure, per dataset (primary measure), and the verdict."""

    pairs: pd.DataFrame
    datasets: pd.DataFrame
    verdict: str
    measure: str
    depth: int = TOP_DEPTH
    tuned: pd.DataFrame | None = None  # per dataset, the pair of tuned rows (each order at its held-out best)


def parse(table: Mapping[str, Any], document: Mapping[str, Any], where: str) -> Settings:
    """Validate ``[study.rrf_order]`` against the experiment ``document`` (parsed or resolved)."""
    check_keys(table, KEYS, where, "key in [study.rrf_order]")
    depth = table.get("depth", TOP_DEPTH)
    if not (isinstance(depth, int) and not isinstance(depth, bool) and depth >= 1):
        raise ConfigError(f"{where}: study.rrf_order.depth must be an integer >= 1, got {depth!r}")
    if "system" not in table:
        raise ConfigError(f"{where}: study.rrf_order.system is missing; name the zerda.hybrid system to pair")
    names = entry_names(document)
    system = check_system_name(table["system"], "study.rrf_order.system", names, where)
    if names:
        _check_axis(document, system, where)
    return Settings(system, depth)


def _orders(entry: Mapping[str, Any]) -> set[Any]:
    """The ``rrf_order`` values a ``[[systems]]`` entry runs: from its grid and params (as written), or from
    its variants (a resolved config, as ``experiment.json`` holds it)."""
    if "variants" in entry:
        return {variant.get("params", {}).get(AXIS) for variant in entry["variants"]}
    params, grid = entry.get("params", {}), entry.get("grid", {})
    values = {params[AXIS]} if isinstance(params, Mapping) and AXIS in params else set()
    if isinstance(grid, Mapping) and isinstance(grid.get(AXIS), list):
        values.update(grid[AXIS])
    elif isinstance(grid, list):
        values.update(combo.get(AXIS) for combo in grid if isinstance(combo, Mapping))
    return values


def _check_axis(document: Mapping[str, Any], name: str, where: str) -> None:
    """The study pairs cells differing only in ``rrf_order``: its system must run both orders."""
    systems = {entry.get("name"): entry for entry in document.get("systems", []) if isinstance(entry, Mapping)}
    if name not in systems or not {AS_DOCUMENTED, FIXED} <= _orders(systems[name]):
        raise ConfigError(
            f"{where}: study.rrf_order.system {name!r} has no rrf_order grid axis with both {AS_DOCUMENTED!r} and "
            f"{FIXED!r}, so the study would pair nothing; give a zerda.hybrid system "
            f'grid = {{ rrf_order = ["{AS_DOCUMENTED}", "{FIXED}"] }}'
        )


def is_tuned(setting: str) -> bool:
    """A pair of tuned rows (``tune = { keep = ["rrf_order"] }``): each order at its own held-out best."""
    return any(part.startswith(f"{TUNED}=") for part in SETTING_SPLIT.split(setting))


def _setting(params_json: str) -> tuple[str, str | None]:
    params = json.loads(params_json) if isinstance(params_json, str) else dict(params_json)
    order = params.pop(AXIS, None)
    label = ", ".join(f"{k}={params[k]}" for k in sorted(params))
    return label, order


def pairs_of(results: pd.DataFrame, system: str) -> pd.DataFrame:
    """Pairs of cells of ``system`` that differ only in ``rrf_order``: dataset, setting, both cell ids."""
    rows = []
    for _, cell in cells_of(results, system).iterrows():
        setting, order = _setting(cell["params"])
        rows.append({"dataset": cell["dataset"], "setting": setting, "order": order, "cell_id": cell["cell_id"]})
    frame = pd.DataFrame(rows, columns=["dataset", "setting", "order", "cell_id"])
    frame = frame[frame["order"].isin([AS_DOCUMENTED, FIXED])]
    pairs = frame.pivot_table(index=["dataset", "setting"], columns="order", values="cell_id", aggfunc="first")
    if AS_DOCUMENTED not in pairs or FIXED not in pairs:
        return pd.DataFrame(columns=["dataset", "setting", AS_DOCUMENTED, FIXED])
    return pairs.dropna().reset_index()[["dataset", "setting", AS_DOCUMENTED, FIXED]]


def compute(settings: Settings, finished: FinishedRun) -> StudyData | None:
    """Fixed minus as-documented, per pair of cells and per dataset (None: no pair in the results)."""
    spec, per_query = finished.compare, finished.per_query
    pairs = pairs_of(finished.results, settings.system)
    if pairs.empty:
        return None
    measures = measure_columns(finished.results, per_query, spec)
    lookup = index_per_query(per_query)
    by_cell = finished.results.set_index("cell_id")
    keys, pairs_tested, deltas_by_dataset = [], [], {}
    # Per dataset, the grid's pairs are pooled; the tuned pair (made of grid points) is reported on its own.
    tuned_settings = pairs["setting"].map(is_tuned)
    pooled_settings = set(pairs["setting"][tuned_settings if tuned_settings.all() else ~tuned_settings])
    for _, pair in pairs.iterrows():
        documented = read_cell_run(finished.run_dir, pair[AS_DOCUMENTED])
        fixed = read_cell_run(finished.run_dir, pair[FIXED])
        changed, tau = ranking_agreement(documented, fixed, settings.depth)
        overlap = mean_rbo(documented, fixed, settings.depth)
        for measure in measures:
            if (pair[AS_DOCUMENTED], measure) not in lookup:  # not measured on this dataset
                continue
            aligned = sig.align(lookup.get((pair[AS_DOCUMENTED], measure), {}), lookup.get((pair[FIXED], measure), {}))
            if measure == measures[0] and pair["setting"] in pooled_settings:
                deltas_by_dataset.setdefault(pair["dataset"], []).append(
                    pd.Series(aligned.delta, index=aligned.query_ids)
                )
            keys.append(
                dict(pair)
                | {"measure": measure, "top_changed_share": changed, "kendall_tau": tau, "rbo": overlap}
                | {
                    "tie_aware_delta": _expected(by_cell, pair[FIXED], measure)
                    - _expected(by_cell, pair[AS_DOCUMENTED], measure)
                }
            )
            pairs_tested.append(aligned)
    rows = [key | numbers for key, numbers in zip(keys, test_pairs(pairs_tested, spec), strict=True)]
    table = correct_family(pd.DataFrame(rows), "measure", spec)
    datasets, pooled = [], []
    for dataset, series in deltas_by_dataset.items():
        mean_delta = pd.concat(series, axis=1).fillna(0.0).mean(axis=1)
        aligned = sig.Aligned(list(mean_delta.index), np.zeros(len(mean_delta)), mean_delta.to_numpy(), 0, 0)
        primary = table[
            (table["dataset"] == dataset) & (table["measure"] == measures[0]) & table["setting"].isin(pooled_settings)
        ]
        datasets.append(
            {
                "dataset": dataset,
                "settings": len(series),
                "top_changed_share": float(primary["top_changed_share"].mean()),
                "kendall_tau": float(primary["kendall_tau"].mean()),
                "rbo": float(primary["rbo"].mean()),
                "significant_settings": int(primary[f"significant_{spec.tests[0]}"].sum()),
                "tie_aware_delta": float(primary["tie_aware_delta"].mean()),
            }
        )
        pooled.append(aligned)
    for row, numbers in zip(datasets, test_pairs(pooled, spec), strict=True):
        row.update({k: v for k, v in numbers.items() if k not in ("mean_baseline", "mean_system")})
    per_dataset = correct_family(pd.DataFrame(datasets).assign(measure=measures[0]), "measure", spec)
    tuned = table[(table["measure"] == measures[0]) & table["setting"].map(is_tuned)].reset_index(drop=True)
    text = verdict(per_dataset, measures[0], spec, settings.depth, tuned) + " " + reviewer_verdict(per_dataset, spec)
    return StudyData(table, per_dataset, text, measures[0], settings.depth, tuned)


def _expected(by_cell: pd.DataFrame, cell_id: str, measure: str) -> float:
    """A cell's mean ``measure`` over every order of its tied documents (``evaluation.tie_aware``; NaN: none)."""
    column = f"{measure} {EXPECTED}"
    return float(by_cell.at[cell_id, column]) if column in by_cell.columns else float("nan")


def _fmt_recorded(delta: float) -> str:
    """A delta, or "-" for one the cells did not record (written before tie-aware values were)."""
    return "-" if np.isnan(delta) else fmt_delta(delta)


def run(settings: Settings, finished: FinishedRun) -> StudySection | None:
    """The study's report section (None when the results hold no pair of cells)."""
    data = compute(settings, finished)
    if data is None:
        return None
    headline, detail = _tables(data, finished.compare, settings.depth)
    tables = [("Per dataset", headline)]
    if data.tuned is not None and not data.tuned.empty:
        tables.append(
            ("Each order at its own held-out best settings (tuned rows)", _tuned_table(data, finished.compare))
        )
    figure = StudyFigure(
        "rrf_order_delta",
        f"{data.measure}: fixed minus as_documented per dataset, beside the share of queries whose top-"
        f"{settings.depth} changed, Kendall's tau and rank-biased overlap (RBO, p = {RBO_PERSISTENCE}) between the "
        "two rankings.",
        lambda label: _delta_figure(data, label),
    )
    return StudySection(
        title="RRF-ordering study (seed 000 HybridRetriever)",
        summary=data.verdict,
        tables=tables,
        figures=[figure],
        detail=[("RRF-ordering study: every paired setting", detail)],
        data=data,
    )


def verdict(
    datasets: pd.DataFrame, measure: str, spec: CompareSpec, depth: int, tuned: pd.DataFrame | None = None
) -> str:
    """One paragraph stating what the numbers of the RRF-ordering study say (generated, not written)."""
    test = spec.tests[0]
    test_name = "paired t-test" if test == "t-test" else "randomisation test"
    significant = datasets[datasets[f"significant_{test}"]]
    gains = significant[significant["delta"] > 0]
    losses = significant[significant["delta"] < 0]
    best = datasets.loc[datasets["delta"].idxmax()]
    worst = datasets.loc[datasets["delta"].idxmin()]
    settings = int(datasets["settings"].sum())
    mean_abs = float(datasets["delta"].abs().mean())
    size = "negligible" if mean_abs < NEGLIGIBLE_DELTA else "material"
    lines = [
        f"Over {len(datasets)} dataset(s) and {settings} paired setting(s), fixing the RRF ordering "
        f"(adding the bonus after the weighted sum) changed mean {measure} per dataset by between "
        f"{worst['delta']:+.4f} ({worst['dataset']}) and {best['delta']:+.4f} ({best['dataset']}); "
        f"the mean absolute change is {mean_abs:.4f}, which is {size} (threshold {NEGLIGIBLE_DELTA}).",
        f"The change is significant ({test_name}, {spec.correction} correction over datasets, "
        f"alpha={spec.alpha}) on {len(significant)} of {len(datasets)} dataset(s): "
        f"{len(gains)} gain(s) and {len(losses)} loss(es).",
        f"The fix changed the top-{depth} of {datasets['top_changed_share'].mean():.1%} of "
        f"queries on average, with a mean Kendall tau of {datasets['kendall_tau'].mean():.3f} "
        "between the two rankings (1 = same order).",
    ]
    tie_aware = datasets.get("tie_aware_delta", pd.Series(dtype=float)).dropna()
    if not tie_aware.empty:
        lines.append(
            f"Counting every order of tied scores as equally likely (the expected value, McSherry and Najork), "
            f"the change is between {tie_aware.min():+.4f} and {tie_aware.max():+.4f} per dataset."
        )
    if tuned is not None and not tuned.empty:
        flags = tuned[f"significant_{test}"]
        low, high = tuned.loc[tuned["delta"].idxmin()], tuned.loc[tuned["delta"].idxmax()]
        lines.append(
            f"With each order at its own best settings chosen on held-out queries (the tuned rows), fixing "
            f"changed mean {measure} by between {low['delta']:+.4f} ({low['dataset']}) and "
            f"{high['delta']:+.4f} ({high['dataset']}), significant on {int(flags.sum())} of {len(tuned)} "
            f"dataset(s): {int((flags & (tuned['delta'] > 0)).sum())} gain(s) and "
            f"{int((flags & (tuned['delta'] < 0)).sum())} loss(es)."
        )
    if len(significant) == 0:
        lines.append("The documented bug therefore reorders results without a measurable effect on quality here.")
    elif len(gains) > len(losses):
        lines.append('The documented bug therefore costs measurable quality: use rrf_order = "fixed".')
    else:
        lines.append("Fixing the bug does not help on balance here: the RRF bonus mostly hurts these datasets.")
    return " ".join(lines)


def _tables(data: StudyData, spec: CompareSpec, depth: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(per dataset headline table, per paired setting table) on the study's measure, as display strings."""
    test = spec.tests[0]
    headline = pd.DataFrame(
        [
            {
                "dataset": row["dataset"],
                "settings": str(row["settings"]),
                f"mean delta {data.measure}": fmt_delta(row["delta"]),
                "tie-aware delta": _fmt_recorded(row["tie_aware_delta"]),
                "95% CI (BCa)": fmt_ci(row["ci_low"], row["ci_high"], 3),
                "95% CI (t)": fmt_ci(row["t_low"], row["t_high"], 3),
                f"p ({test}, {spec.correction})": fmt_p(row[f"p_{test}_adj"]),
                "significant settings": f"{row['significant_settings']}/{row['settings']}",
                f"top-{depth} changed": f"{row['top_changed_share']:.1%}",
                "Kendall tau": f"{row['kendall_tau']:.3f}",
                **_reviewer_columns(row, spec),
            }
            for _, row in data.datasets.iterrows()
        ]
    )
    primary = data.pairs[data.pairs["measure"] == data.measure]
    primary = primary.iloc[np.lexsort((primary["setting"].map(is_tuned), primary["dataset"]))]  # tuned last
    grid = [setting for setting in primary["setting"] if not is_tuned(setting)]
    settings = varying_settings(grid) | {s: s for s in primary["setting"] if is_tuned(s)}
    detail = pd.DataFrame(
        [
            {
                "dataset": row["dataset"],
                **({"setting": settings[row["setting"]]} if any(settings.values()) else {}),
                AS_DOCUMENTED: fmt(row["mean_baseline"]),
                FIXED: fmt(row["mean_system"]),
                "delta": fmt_delta(row["delta"]),
                "tie-aware delta": _fmt_recorded(row["tie_aware_delta"]),
                **{f"p ({t}, {spec.correction})": fmt_p(row[f"p_{t}_adj"]) for t in spec.tests},
                f"top-{depth} changed": f"{row['top_changed_share']:.1%}",
                "Kendall tau": f"{row['kendall_tau']:.3f}",
                **_reviewer_columns(row, spec),
            }
            for _, row in primary.iterrows()
        ]
    )
    return headline, detail


def _tuned_table(data: StudyData, spec: CompareSpec) -> pd.DataFrame:
    """Per dataset: each order's tuned row, the delta and its corrected p-values, as display strings."""
    return pd.DataFrame(
        [
            {
                "dataset": row["dataset"],
                f"{AS_DOCUMENTED}[tuned]": fmt(row["mean_baseline"]),
                f"{FIXED}[tuned]": fmt(row["mean_system"]),
                "delta": fmt_delta(row["delta"]),
                "95% CI": fmt_ci(row["ci_low"], row["ci_high"]),
                **{f"p ({t}, {spec.correction})": fmt_p(row[f"p_{t}_adj"]) for t in spec.tests},
                **_reviewer_columns(row, spec),
            }
            for _, row in data.tuned.iterrows()
        ]
    )


def _reviewer_columns(row: pd.Series, spec: CompareSpec) -> dict[str, str]:
    """What a reviewer asks of one comparison beside its p-value: RBO (when ranked lists were compared), d_z,
    whether the three tests agree at alpha, the minimum detectable effect and the under-powered flag."""
    columns = {"RBO": f"{row['rbo']:.3f}"} if "rbo" in row else {}
    return columns | {
        "d_z": fmt(row["cohens_d"], 2),
        "tests": "agree" if row["tests_agree"] else DIFFER,
        "MDE": fmt(row["mde"], 3),
        "power": UNDERPOWERED if row["underpowered"] else "",
    }


def reviewer_verdict(datasets: pd.DataFrame, spec: CompareSpec) -> str:
    """Three sentences on the per-dataset deltas: the rankings' overlap (RBO), do the tests agree, and could a
    non-significant result have been significant at all (power)."""
    differ = datasets[~datasets["tests_agree"]]
    weak = datasets[datasets["underpowered"]]
    overlap = f"The mean rank-biased overlap of the two rankings is {datasets['rbo'].mean():.3f} (1 = same lists)."
    agreement = (
        overlap
        + " "
        + (
            "The t-test, Wilcoxon and randomisation tests agree at alpha on every dataset."
            if differ.empty
            else f"The t-test, Wilcoxon and randomisation tests disagree at alpha on {', '.join(differ['dataset'])}."
        )
    )
    if weak.empty:
        return f"{agreement} No non-significant dataset is under-powered for a change of {spec.min_effect:g}."
    return (
        f"{agreement} Not significant AND under-powered (the change these queries could detect with power "
        f"{spec.power:g} exceeds {spec.min_effect:g}): {', '.join(weak['dataset'])}; there, no effect was "
        "found, but none of that size could have been."
    )


def varying_settings(settings: list[str]) -> dict[str, str]:
    """``{setting: the parameters that differ between the settings}`` ("" for all when none differs), so a
    table names a setting by what sets it apart rather than by every parameter of the system."""
    split = {setting: SETTING_SPLIT.split(setting) if setting else [] for setting in settings}
    parts = [part for items in split.values() for part in items]
    common = {part for part in parts if all(part in items for items in split.values())}
    return {setting: ", ".join(part for part in items if part not in common) for setting, items in split.items()}


def _delta_figure(data: StudyData, label: Callable[[str], str]) -> Any:
    """Per dataset, side by side: the score delta (fixed minus as-documented; bar = mean over settings
    with its 95% CI, dots = each setting), the share of queries whose top-k changed, and Kendall's tau."""
    import matplotlib.pyplot as plt

    datasets = data.datasets
    pairs = data.pairs[data.pairs["measure"] == data.measure]
    y = np.arange(len(datasets))
    fig, axes = plt.subplots(
        1, 4, figsize=(9.5, 0.45 * len(datasets) + 1.6), sharey=True, layout="constrained", width_ratios=[1.4, 1, 1, 1]
    )
    delta = datasets["delta"].to_numpy()
    xerr = np.vstack([delta - datasets["ci_low"].to_numpy(), datasets["ci_high"].to_numpy() - delta])
    axes[0].barh(y, delta, 0.6, xerr=np.clip(xerr, 0, None), capsize=3, color="#4c72b0", label="mean (95% CI)")
    for i, dataset in enumerate(datasets["dataset"]):
        values = pairs[pairs["dataset"] == dataset]["delta"].to_numpy()
        axes[0].scatter(
            values,
            np.full(values.size, i) + np.linspace(-0.15, 0.15, values.size),
            color="black",
            s=10,
            zorder=3,
            label="one setting" if i == 0 else None,
        )
    axes[0].axvline(0.0, color="black", linewidth=0.8)
    axes[0].set_xlabel(f"Δ {data.measure} (fixed − as_documented)")
    axes[0].legend(loc="lower left", bbox_to_anchor=(0.0, 1.0), ncols=2, frameon=False, fontsize=8)
    shares = datasets["top_changed_share"].to_numpy() * 100
    taus = datasets["kendall_tau"].to_numpy()
    for ax, values, xlabel, limit, text in (
        (axes[1], shares, f"top-{data.depth} changed\n(% of queries)", 100.0, "{:.0f}%"),
        (axes[2], taus, f"Kendall tau, top-{data.depth}\n(1 = same)", 1.0, "{:.2f}"),
        (axes[3], datasets["rbo"].to_numpy(), f"RBO, top-{data.depth}\n(1 = same)", 1.0, "{:.2f}"),
    ):
        ax.barh(y, values, 0.6, color="#8172b2")
        for i, value in enumerate(values):
            ax.text(value, i, " " + text.format(value), va="center", fontsize=8)
        ax.set_xlim(0, limit * 1.15)
        ax.set_xlabel(xlabel)
    axes[0].set_yticks(y, [label(d) for d in datasets["dataset"]])
    axes[0].invert_yaxis()
    for ax in axes:
        ax.grid(axis="y", visible=False)
    fig.suptitle("Fixing the RRF ordering: the score change and how much the ranking moves, per dataset")
    return fig
