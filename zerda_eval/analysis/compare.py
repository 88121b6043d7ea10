"""Comparisons with a baseline: every (system, measure) of a dataset tested against it.

``parse_compare`` validates an experiment's ``[compare]`` table. ``compare_to_baseline`` tests every
(system, measure) of a dataset against the baseline on per-query values aligned by query id, and
corrects the p-values over the comparisons of that dataset's table (one family per dataset and test):
with the configured correction (``p_<test>_adj``) and with Benjamini-Hochberg (``p_<test>_bh``).

Each comparison also carries its effect (mean difference with a t and a BCa interval, d_z), the raw
p-values of all three tests side by side with whether they agree at alpha (``tests_agree``), and its
power: the minimum detectable effect with these queries and this variance, the queries
``min_effect`` would need, and ``underpowered`` (not significant AND unable to detect ``min_effect``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

from zerda_eval.analysis import significance as sig
from zerda_eval.analysis.effects import bca_intervals, t_interval
from zerda_eval.analysis.power import POWER, minimum_detectable_effect, queries_needed
from zerda_eval.checks import check_keys
from zerda_eval.errors import ConfigError, unknown_value_message

COMPARE_KEYS = ("baseline", "measures", "tests", "correction", "alpha", "n_permutations", "seed", "min_effect", "power")
DEFAULT_CORRECTION = "holm"
DEFAULT_ALPHA = 0.05
DEFAULT_MIN_EFFECT = 0.02  # the smallest mean difference worth detecting (measure units: 2 points of nDCG)


@dataclass(frozen=True)
class CompareSpec:
    """What to compare: baseline label, measures (None = all), tests, correction, alpha, permutations, seed,
    the smallest effect worth detecting and the power asked of a comparison that should detect it."""

    baseline: str | None = None
    measures: tuple[str, ...] | None = None
    tests: tuple[str, ...] = sig.DEFAULT_TESTS
    correction: str = DEFAULT_CORRECTION
    alpha: float = DEFAULT_ALPHA
    n_permutations: int = sig.DEFAULT_PERMUTATIONS
    seed: int = sig.DEFAULT_SEED
    min_effect: float = DEFAULT_MIN_EFFECT
    power: float = POWER


def entry_names(document: Mapping[str, Any]) -> list[str]:
    """The names of the ``[[systems]]`` and ``[[fusions]]`` entries of a parsed or resolved experiment."""
    return [e.get("name") for key in ("systems", "fusions") for e in document.get(key, []) if isinstance(e, Mapping)]


def check_system_name(value: Any, key: str, names: list[str], where: str) -> str | None:
    """``value`` if it names a system or fusion of the experiment, or one of its grid or tuned labels
    (``bm25[b=0.5]``, ``bm25[tuned]``; None stays None), else a ``ConfigError``."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise ConfigError(f"{where}: {key} must be a system name (string), got {value!r}")
    entry = value.split("[", 1)[0] if value.endswith("]") else value  # a grid or tuned label: its entry
    if names and entry not in names:
        raise ConfigError(unknown_value_message(f"system in {key}", value, [n for n in names if n], where))
    return value


def parse_compare(document: Mapping[str, Any], where: str) -> CompareSpec:
    """Validate the ``[compare]`` table of a parsed (or resolved) experiment ``document``.

    A baseline must name a ``[[systems]]`` or ``[[fusions]]`` entry when those are present; ``where``
    (the file name) prefixes every error message.
    """
    compare = document.get("compare", {})
    if not isinstance(compare, Mapping):
        raise ConfigError(f"{where}: compare must be a table ([compare])")
    check_keys(compare, COMPARE_KEYS, where, "key in [compare]")
    tests = tuple(compare.get("tests", sig.DEFAULT_TESTS))
    for test in tests:
        if test not in sig.TESTS:
            raise ConfigError(unknown_value_message("test in compare.tests", test, sig.TESTS, where))
    correction = compare.get("correction", DEFAULT_CORRECTION)
    if correction not in sig.CORRECTIONS:
        raise ConfigError(unknown_value_message("compare.correction", correction, sig.CORRECTIONS, where))
    alpha = compare.get("alpha", DEFAULT_ALPHA)
    if not (isinstance(alpha, float | int) and 0 < alpha < 1):
        raise ConfigError(f"{where}: compare.alpha must be a number between 0 and 1, got {alpha!r}")
    n_permutations = compare.get("n_permutations", sig.DEFAULT_PERMUTATIONS)
    if not (isinstance(n_permutations, int) and n_permutations >= 1000):
        raise ConfigError(f"{where}: compare.n_permutations must be an integer >= 1000, got {n_permutations!r}")
    min_effect = compare.get("min_effect", DEFAULT_MIN_EFFECT)
    if isinstance(min_effect, bool) or not (isinstance(min_effect, float | int) and min_effect > 0):
        raise ConfigError(f"{where}: compare.min_effect must be a positive number (measure units), got {min_effect!r}")
    power = compare.get("power", POWER)
    if isinstance(power, bool) or not (isinstance(power, float | int) and 0 < power < 1):
        raise ConfigError(f"{where}: compare.power must be a number between 0 and 1, got {power!r}")
    measures = compare.get("measures")
    if measures is not None and not (isinstance(measures, list) and all(isinstance(m, str) for m in measures)):
        raise ConfigError(f"{where}: compare.measures must be a list of measure names, got {measures!r}")
    return CompareSpec(
        baseline=check_system_name(compare.get("baseline"), "compare.baseline", entry_names(document), where),
        measures=tuple(measures) if measures is not None else None,
        tests=tests,
        correction=correction,
        alpha=float(alpha),
        n_permutations=n_permutations,
        seed=int(compare.get("seed", document.get("experiment", {}).get("seed", sig.DEFAULT_SEED))),
        min_effect=float(min_effect),
        power=float(power),
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


def _baseline_cell(results: pd.DataFrame, dataset: str, baseline: str) -> str | None:
    """The baseline's cell on ``dataset``; None when it has none there (a tuned row of a train split)."""
    rows = cells_of(results[results["dataset"] == dataset], baseline)
    if rows.empty and not cells_of(results, baseline).empty:
        return None
    if len(rows) != 1:
        found = ", ".join(rows["system"]) or "none"
        raise ConfigError(
            f"compare.baseline {baseline!r} must match exactly one cell on dataset {dataset!r}, "
            f"found: {found}; name one grid cell label as the baseline"
        )
    return str(rows["cell_id"].iloc[0])


def test_pairs(pairs: Sequence[sig.Aligned], spec: CompareSpec) -> list[dict[str, Any]]:
    """One comparison's numbers per aligned pair, in order: means, the mean difference with its t and BCa
    intervals, d_z, the raw p-value of every test (``sig.TESTS``) and whether they agree at alpha, and the
    comparison's power. The pairs with the same number of queries share their seeded draws (``sig.by_length``):
    the randomisation tests one pass over the sign batches, the BCa intervals the resampling draws; each
    p-value and interval is the one the pair's own call gives."""
    deltas = [aligned.delta for aligned in pairs]
    fisher = sig.by_length(deltas, lambda stacked: sig.randomization_tests(stacked, spec.n_permutations, spec.seed))
    bca = sig.by_length(deltas, lambda stacked: bca_intervals(stacked, seed=spec.seed))
    return [_pair_row(a, spec, p, ci) for a, p, ci in zip(pairs, fisher, bca, strict=True)]


def _pair_row(aligned: sig.Aligned, spec: CompareSpec, p_fisher: float, bca: tuple[float, float]) -> dict[str, Any]:
    """``test_pairs``' row of one pair, given its randomisation p-value ``p_fisher`` and BCa interval ``bca``."""
    delta = aligned.delta
    n = len(aligned.query_ids)
    sd = float(delta.std(ddof=1)) if n >= 2 else float("nan")
    low, high = bca
    t_low, t_high = t_interval(delta)
    row: dict[str, Any] = {
        "n_queries": n,
        "missing_in_baseline": aligned.missing_in_baseline,
        "missing_in_system": aligned.missing_in_system,
        "mean_baseline": float(aligned.baseline.mean()) if delta.size else float("nan"),
        "mean_system": float(aligned.system.mean()) if delta.size else float("nan"),
        "delta": float(delta.mean()) if delta.size else float("nan"),
        "ci_low": low,
        "ci_high": high,
        "t_low": t_low,
        "t_high": t_high,
        "cohens_d": sig.cohens_d_paired(aligned.baseline, aligned.system),
        "sd_delta": sd,
    }
    for test in sig.TESTS:
        row[f"p_{test}"] = (
            p_fisher if test == sig.RANDOMIZATION else sig.run_test(test, aligned, spec.n_permutations, spec.seed)
        )
    row["tests_agree"] = len({row[f"p_{test}"] < spec.alpha for test in sig.TESTS}) == 1
    row["mde"] = minimum_detectable_effect(n, sd, spec.alpha, spec.power)
    row["queries_needed"] = queries_needed(spec.min_effect, sd, spec.alpha, spec.power)
    return row


def correct_family(table: pd.DataFrame, family: str, spec: CompareSpec) -> pd.DataFrame:
    """``p_<test>_adj`` (``spec.correction``), ``p_<test>_bh`` (Benjamini-Hochberg) and ``significant_<test>``
    per test, each corrected over the rows sharing ``family``'s value; ``underpowered``: not significant by
    the first test AND its minimum detectable effect above ``spec.min_effect``."""
    for test in spec.tests:
        adjusted = table[f"p_{test}"].copy()
        fdr = table[f"p_{test}"].copy()
        for _, index in table.groupby(family).groups.items():
            adjusted.loc[index] = sig.correct(table.loc[index, f"p_{test}"], spec.correction)
            fdr.loc[index] = sig.correct(table.loc[index, f"p_{test}"], sig.FDR)
        table[f"p_{test}_adj"] = adjusted
        table[f"p_{test}_bh"] = fdr
        table[f"significant_{test}"] = adjusted < spec.alpha
    table["underpowered"] = ~table[f"significant_{spec.tests[0]}"] & (table["mde"] > spec.min_effect)
    return table


def compare_to_baseline(results: pd.DataFrame, per_query: pd.DataFrame, spec: CompareSpec) -> pd.DataFrame:
    """One row per (dataset, system, measure) other than the baseline: deltas, effect sizes, p-values.

    A dataset where the baseline has no cell (the train split of a tuned row) has no comparisons.

    ``p_<test>_adj`` is corrected with ``spec.correction`` over all comparisons of the dataset's table.
    """
    if spec.baseline is None:
        return pd.DataFrame()
    measures = measure_columns(results, per_query, spec)
    lookup = index_per_query(per_query)
    keys, pairs = [], []
    for dataset, group in results.groupby("dataset", sort=False):
        base_cell = _baseline_cell(results, str(dataset), spec.baseline)
        if base_cell is None:
            continue
        for _, cell in group.iterrows():
            if cell["cell_id"] == base_cell:
                continue
            for measure in measures:
                if (base_cell, measure) not in lookup:  # not measured on this dataset (its own measures)
                    continue
                keys.append(
                    {"dataset": dataset, "system": cell["system"], "cell_id": cell["cell_id"], "measure": measure}
                )
                pairs.append(
                    sig.align(lookup.get((base_cell, measure), {}), lookup.get((cell["cell_id"], measure), {}))
                )
    rows = [key | numbers for key, numbers in zip(keys, test_pairs(pairs, spec), strict=True)]
    table = pd.DataFrame(rows)
    return correct_family(table, "dataset", spec) if not table.empty else table
