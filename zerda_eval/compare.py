"""Comparisons of a run directory: tables against a baseline per dataset, and the RRF-ordering study.

``parse_compare`` validates an experiment's ``[compare]`` and ``[study.rrf_order]`` tables.
``compare_to_baseline`` tests every (system, measure) of a dataset against the baseline on per-query
values aligned by query id, and corrects the p-values over the comparisons of that dataset's table
(one family per dataset and test). ``rrf_order_study`` pairs the cells of one system that differ only
in ``rrf_order`` and measures what fixing seed 000's RRF ordering bug changes.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from zerda_eval import significance as sig
from zerda_eval.errors import ConfigError, unknown_value_message

RunDict = dict[str, list[tuple[str, float]]]
COMPARE_KEYS = ("baseline", "measures", "tests", "correction", "alpha", "n_permutations", "seed")
STUDY_KEYS = ("rrf_order",)
RRF_ORDER_KEYS = ("system", "depth")
AS_DOCUMENTED, FIXED = "as_documented", "fixed"
TOP_DEPTH = 10
NEGLIGIBLE_DELTA = 0.005  # |mean delta| below this (absolute, e.g. nDCG points / 100) reads "negligible"


@dataclass(frozen=True)
class CompareSpec:
    """What to compare: baseline label, measures (None = all), tests, correction, alpha, study system."""

    baseline: str | None = None
    measures: tuple[str, ...] | None = None
    tests: tuple[str, ...] = sig.TESTS
    correction: str = "holm"
    alpha: float = 0.05
    n_permutations: int = sig.DEFAULT_PERMUTATIONS
    seed: int = sig.DEFAULT_SEED
    rrf_order_system: str | None = None
    rrf_order_depth: int = TOP_DEPTH


def _check_keys(table: Mapping[str, Any], allowed: tuple[str, ...], section: str, where: str) -> None:
    for key in table:
        if key not in allowed:
            raise ConfigError(unknown_value_message(f"key in [{section}]", key, allowed, where))


def parse_compare(table: Mapping[str, Any], where: str) -> CompareSpec:
    """Validate the ``[compare]`` and ``[study]`` tables of a parsed experiment file.

    ``table`` is the whole parsed document (``compare`` and ``study`` are read from it; a baseline or
    study system must name a ``[[systems]]`` or ``[[fusions]]`` entry when those are present).
    ``where`` (the file name) prefixes every error message.
    """
    compare = table.get("compare", {})
    study = table.get("study", {})
    if not isinstance(compare, Mapping) or not isinstance(study, Mapping):
        raise ConfigError(f"{where}: [compare] and [study] must be tables")
    _check_keys(compare, COMPARE_KEYS, "compare", where)
    _check_keys(study, STUDY_KEYS, "study", where)
    rrf_order = study.get("rrf_order", {})
    _check_keys(rrf_order, RRF_ORDER_KEYS, "study.rrf_order", where)
    names = [entry.get("name") for key in ("systems", "fusions") for entry in table.get(key, [])]

    def system_name(value: Any, key: str) -> str | None:
        if value is None:
            return None
        if not isinstance(value, str):
            raise ConfigError(f"{where}: {key} must be a system name (string), got {value!r}")
        if names and value not in names:
            raise ConfigError(unknown_value_message(f"system in {key}", value, [n for n in names if n], where))
        return value

    tests = tuple(compare.get("tests", sig.TESTS))
    for test in tests:
        if test not in sig.TESTS:
            raise ConfigError(unknown_value_message("test in compare.tests", test, sig.TESTS, where))
    correction = compare.get("correction", "holm")
    if correction not in sig.CORRECTIONS:
        raise ConfigError(unknown_value_message("compare.correction", correction, sig.CORRECTIONS, where))
    alpha = compare.get("alpha", 0.05)
    if not (isinstance(alpha, float | int) and 0 < alpha < 1):
        raise ConfigError(f"{where}: compare.alpha must be a number between 0 and 1, got {alpha!r}")
    n_permutations = compare.get("n_permutations", sig.DEFAULT_PERMUTATIONS)
    if not (isinstance(n_permutations, int) and n_permutations >= 1000):
        raise ConfigError(f"{where}: compare.n_permutations must be an integer >= 1000, got {n_permutations!r}")
    measures = compare.get("measures")
    if measures is not None and not (isinstance(measures, list) and all(isinstance(m, str) for m in measures)):
        raise ConfigError(f"{where}: compare.measures must be a list of measure names, got {measures!r}")
    depth = rrf_order.get("depth", TOP_DEPTH)
    if not (isinstance(depth, int) and depth >= 1):
        raise ConfigError(f"{where}: study.rrf_order.depth must be an integer >= 1, got {depth!r}")
    study_system = system_name(rrf_order.get("system"), "study.rrf_order.system")
    if study_system is not None and names:
        _check_rrf_order_axis(table, study_system, where)
    return CompareSpec(
        baseline=system_name(compare.get("baseline"), "compare.baseline"),
        measures=tuple(measures) if measures is not None else None,
        tests=tests,
        correction=correction,
        alpha=float(alpha),
        n_permutations=n_permutations,
        seed=int(compare.get("seed", table.get("experiment", {}).get("seed", sig.DEFAULT_SEED))),
        rrf_order_system=study_system,
        rrf_order_depth=depth,
    )


def _rrf_orders(entry: Mapping[str, Any]) -> set[Any]:
    """The ``rrf_order`` values a ``[[systems]]`` entry runs: from its grid and params (as written), or from
    its variants (a resolved config, as ``experiment.json`` holds it)."""
    if "variants" in entry:
        return {variant.get("params", {}).get("rrf_order") for variant in entry["variants"]}
    params, grid = entry.get("params", {}), entry.get("grid", {})
    values = {params["rrf_order"]} if isinstance(params, Mapping) and "rrf_order" in params else set()
    if isinstance(grid, Mapping) and isinstance(grid.get("rrf_order"), list):
        values.update(grid["rrf_order"])
    elif isinstance(grid, list):
        values.update(combo.get("rrf_order") for combo in grid if isinstance(combo, Mapping))
    return values


def _check_rrf_order_axis(table: Mapping[str, Any], name: str, where: str) -> None:
    """The study pairs cells differing only in ``rrf_order``: its system must run both orders."""
    systems = {entry.get("name"): entry for entry in table.get("systems", []) if isinstance(entry, Mapping)}
    if name not in systems or not {AS_DOCUMENTED, FIXED} <= _rrf_orders(systems[name]):
        raise ConfigError(
            f"{where}: study.rrf_order.system {name!r} has no rrf_order grid axis with both {AS_DOCUMENTED!r} and "
            f"{FIXED!r}, so the study would pair nothing; give a zerda.hybrid system "
            f'grid = {{ rrf_order = ["{AS_DOCUMENTED}", "{FIXED}"] }}'
        )


def cells_of(results: pd.DataFrame, name: str) -> pd.DataFrame:
    """Rows of ``results`` for the system ``name``: its label exactly, or its grid cells ``name[...]``."""
    label = results["system"].astype(str)
    return results[(label == name) | label.str.startswith(name + "[")]


def measure_columns(results: pd.DataFrame, per_query: pd.DataFrame, spec: CompareSpec) -> list[str]:
    """The measures to compare: ``spec.measures`` or every measure in ``per_query``, in results order."""
    available = list(dict.fromkeys(per_query["measure"]))
    if spec.measures is None:
        return [m for m in results.columns if m in available] or available
    for measure in spec.measures:
        if measure not in available:
            raise ConfigError(unknown_value_message("measure in compare.measures", measure, available, "results"))
    return list(spec.measures)


PerQuery = dict[tuple[str, str], dict[str, float]]


def index_per_query(per_query: pd.DataFrame) -> PerQuery:
    """``{(cell_id, measure): {query_id: value}}`` from the long per-query table (one pass)."""
    return {
        (str(cell), str(measure)): dict(zip(group["query_id"].astype(str), group["value"].astype(float), strict=True))
        for (cell, measure), group in per_query.groupby(["cell_id", "measure"], sort=False)
    }


def _baseline_cell(results: pd.DataFrame, dataset: str, baseline: str) -> str:
    rows = cells_of(results[results["dataset"] == dataset], baseline)
    if len(rows) != 1:
        found = ", ".join(rows["system"]) or "none"
        raise ConfigError(
            f"compare.baseline {baseline!r} must match exactly one cell on dataset {dataset!r}, "
            f"found: {found}; name one grid cell label as the baseline"
        )
    return str(rows["cell_id"].iloc[0])


def _test_pair(aligned: sig.Aligned, spec: CompareSpec) -> dict[str, Any]:
    delta = aligned.delta
    low, high = sig.bootstrap_ci(delta, seed=spec.seed)
    row: dict[str, Any] = {
        "n_queries": len(aligned.query_ids),
        "missing_in_baseline": aligned.missing_in_baseline,
        "missing_in_system": aligned.missing_in_system,
        "mean_baseline": float(aligned.baseline.mean()) if delta.size else float("nan"),
        "mean_system": float(aligned.system.mean()) if delta.size else float("nan"),
        "delta": float(delta.mean()) if delta.size else float("nan"),
        "ci_low": low,
        "ci_high": high,
        "cohens_d": sig.cohens_d_paired(aligned.baseline, aligned.system),
    }
    for test in spec.tests:
        row[f"p_{test}"] = sig.run_test(test, aligned, spec.n_permutations, spec.seed)
    return row


def _correct_family(table: pd.DataFrame, family: str, spec: CompareSpec) -> pd.DataFrame:
    for test in spec.tests:
        adjusted = table[f"p_{test}"].copy()
        for _, index in table.groupby(family).groups.items():
            adjusted.loc[index] = sig.correct(table.loc[index, f"p_{test}"], spec.correction)
        table[f"p_{test}_adj"] = adjusted
        table[f"significant_{test}"] = adjusted < spec.alpha
    return table


def compare_to_baseline(results: pd.DataFrame, per_query: pd.DataFrame, spec: CompareSpec) -> pd.DataFrame:
    """One row per (dataset, system, measure) other than the baseline: deltas, effect sizes, p-values.

    ``p_<test>_adj`` is corrected with ``spec.correction`` over all comparisons of the dataset's table.
    """
    if spec.baseline is None:
        return pd.DataFrame()
    measures = measure_columns(results, per_query, spec)
    lookup = index_per_query(per_query)
    rows = []
    for dataset, group in results.groupby("dataset", sort=False):
        base_cell = _baseline_cell(results, str(dataset), spec.baseline)
        for _, cell in group.iterrows():
            if cell["cell_id"] == base_cell:
                continue
            for measure in measures:
                if (base_cell, measure) not in lookup:  # not measured on this dataset (its own measures)
                    continue
                aligned = sig.align(lookup.get((base_cell, measure), {}), lookup.get((cell["cell_id"], measure), {}))
                rows.append(
                    {
                        "dataset": dataset,
                        "system": cell["system"],
                        "cell_id": cell["cell_id"],
                        "measure": measure,
                    }
                    | _test_pair(aligned, spec)
                )
    table = pd.DataFrame(rows)
    return _correct_family(table, "dataset", spec) if not table.empty else table


def kendall_tau_top(first: list[str], second: list[str], depth: int = TOP_DEPTH) -> float:
    """Kendall's tau-b between two rankings over the union of their top-``depth`` documents.

    Each document takes its 1-based rank in each full ranking; a document absent from a ranking is
    tied at rank ``len(ranking) + 1``. Identical top lists give 1.0.
    """
    from scipy.stats import kendalltau

    if first[:depth] == second[:depth]:
        return 1.0
    union = list(dict.fromkeys(first[:depth] + second[:depth]))
    rank_a = {doc: rank for rank, doc in enumerate(first, start=1)}
    rank_b = {doc: rank for rank, doc in enumerate(second, start=1)}
    a = [rank_a.get(doc, len(first) + 1) for doc in union]
    b = [rank_b.get(doc, len(second) + 1) for doc in union]
    return float(kendalltau(a, b).statistic)


def ranking_agreement(first: RunDict, second: RunDict, depth: int = TOP_DEPTH) -> tuple[float, float]:
    """(share of queries whose top-``depth`` list differs, mean Kendall tau) over the union of queries."""
    queries = sorted(set(first) | set(second))
    if not queries:
        return float("nan"), float("nan")
    a_ids = {q: [d for d, _ in first.get(q, [])] for q in queries}
    b_ids = {q: [d for d, _ in second.get(q, [])] for q in queries}
    changed = np.mean([a_ids[q][:depth] != b_ids[q][:depth] for q in queries])
    return float(changed), float(np.nanmean([kendall_tau_top(a_ids[q], b_ids[q], depth) for q in queries]))


def _setting(params_json: str) -> tuple[str, str | None]:
    params = json.loads(params_json) if isinstance(params_json, str) else dict(params_json)
    order = params.pop("rrf_order", None)
    label = ", ".join(f"{k}={params[k]}" for k in sorted(params))
    return label, order


def rrf_order_pairs(results: pd.DataFrame, system: str) -> pd.DataFrame:
    """Pairs of cells of ``system`` that differ only in ``rrf_order``: dataset, setting, both cell ids."""
    cells = cells_of(results, system)
    rows = []
    for _, cell in cells.iterrows():
        setting, order = _setting(cell["params"])
        rows.append({"dataset": cell["dataset"], "setting": setting, "order": order, "cell_id": cell["cell_id"]})
    frame = pd.DataFrame(rows, columns=["dataset", "setting", "order", "cell_id"])
    frame = frame[frame["order"].isin([AS_DOCUMENTED, FIXED])]
    pairs = frame.pivot_table(index=["dataset", "setting"], columns="order", values="cell_id", aggfunc="first")
    if AS_DOCUMENTED not in pairs or FIXED not in pairs:
        return pd.DataFrame(columns=["dataset", "setting", AS_DOCUMENTED, FIXED])
    return pairs.dropna().reset_index()[["dataset", "setting", AS_DOCUMENTED, FIXED]]


@dataclass(frozen=True)
class StudyResult:
    """The RRF-ordering study: per pair and measure, per dataset (primary measure), and the verdict."""

    pairs: pd.DataFrame
    datasets: pd.DataFrame
    verdict: str
    measure: str


def rrf_order_study(
    results: pd.DataFrame, per_query: pd.DataFrame, run_dir: Path, spec: CompareSpec
) -> StudyResult | None:
    """Fixed minus as-documented, per pair of cells: deltas with p-values, top-k changes, Kendall tau.

    Per dataset, the per-query deltas are averaged over the pairs (settings) and tested once, so
    each dataset gets one headline delta and p-value. Corrections run over all pairs (per test) and
    over all datasets (per test).
    """
    from zerda_eval.runner import read_trec  # the runner owns the run-file format

    if spec.rrf_order_system is None:
        return None
    pairs = rrf_order_pairs(results, spec.rrf_order_system)
    if pairs.empty:
        return None
    measures = measure_columns(results, per_query, spec)
    lookup = index_per_query(per_query)
    rows, deltas_by_dataset = [], {}
    for _, pair in pairs.iterrows():
        documented = read_trec(Path(run_dir) / "cells" / pair[AS_DOCUMENTED] / "run.trec")
        fixed = read_trec(Path(run_dir) / "cells" / pair[FIXED] / "run.trec")
        changed, tau = ranking_agreement(documented, fixed, spec.rrf_order_depth)
        for measure in measures:
            if (pair[AS_DOCUMENTED], measure) not in lookup:  # not measured on this dataset
                continue
            aligned = sig.align(lookup.get((pair[AS_DOCUMENTED], measure), {}), lookup.get((pair[FIXED], measure), {}))
            if measure == measures[0]:
                deltas_by_dataset.setdefault(pair["dataset"], []).append(
                    pd.Series(aligned.delta, index=aligned.query_ids)
                )
            rows.append(
                dict(pair)
                | {"measure": measure, "top_changed_share": changed, "kendall_tau": tau}
                | _test_pair(aligned, spec)
            )
    table = _correct_family(pd.DataFrame(rows), "measure", spec)
    datasets = []
    for dataset, series in deltas_by_dataset.items():
        mean_delta = pd.concat(series, axis=1).fillna(0.0).mean(axis=1)
        aligned = sig.Aligned(list(mean_delta.index), np.zeros(len(mean_delta)), mean_delta.to_numpy(), 0, 0)
        primary = table[(table["dataset"] == dataset) & (table["measure"] == measures[0])]
        datasets.append(
            {
                "dataset": dataset,
                "settings": len(series),
                "top_changed_share": float(primary["top_changed_share"].mean()),
                "kendall_tau": float(primary["kendall_tau"].mean()),
                "significant_settings": int(primary[f"significant_{spec.tests[0]}"].sum()),
            }
            | {k: v for k, v in _test_pair(aligned, spec).items() if k not in ("mean_baseline", "mean_system")}
        )
    per_dataset = pd.DataFrame(datasets).assign(measure=measures[0])
    per_dataset = _correct_family(per_dataset, "measure", spec)
    return StudyResult(table, per_dataset, study_verdict(per_dataset, measures[0], spec), measures[0])


def study_verdict(datasets: pd.DataFrame, measure: str, spec: CompareSpec) -> str:
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
        f"The fix changed the top-{spec.rrf_order_depth} of {datasets['top_changed_share'].mean():.1%} of "
        f"queries on average, with a mean Kendall tau of {datasets['kendall_tau'].mean():.3f} "
        "between the two rankings (1 = same order).",
    ]
    if len(significant) == 0:
        lines.append("The documented bug therefore reorders results without a measurable effect on quality here.")
    elif len(gains) > len(losses):
        lines.append('The documented bug therefore costs measurable quality: use rrf_order = "fixed".')
    else:
        lines.append("Fixing the bug does not help on balance here: the RRF bonus mostly hurts these datasets.")
    return " ".join(lines)
