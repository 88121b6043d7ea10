"""The goals study: each dataset's best held-out row against a reference number it should reach.

Configured by ``[study.goals]`` with ``targets``: one ``{ dataset, measure, value, source, needs }`` per
goal (``source``: where the number comes from; ``needs``: what would close the gap, said when the goal is
missed; ``measure``: a measure name the dataset computes, checked when the file is read, so a misspelt or
uncomputed one is an error instead of a goal "not met"). Only tuned rows count (chosen without the queries
they are scored on): the best of them on the dataset is compared with the goal. Beside it, the per-query
oracle of every row of the dataset (each query's best value over all its rows, averaged): when even that
stays below the goal, no choice or fusion among the signals run can reach it per query, and a stronger
signal is needed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import pandas as pd

from zerda_eval.analysis.formatting import fmt, fmt_delta
from zerda_eval.analysis.studies.base import FinishedRun, StudyFigure, StudySection
from zerda_eval.checks import check_keys, check_string
from zerda_eval.config.tuning import TUNED
from zerda_eval.errors import ConfigError
from zerda_eval.evaluation.measures import parse_measure

KEYS = ("targets",)
TARGET_KEYS = ("dataset", "measure", "value", "source", "needs")
COLUMNS = ["dataset", "measure", "goal", "source", "held_out", "held_out_value", "gap", "met", "oracle", "needs"]


@dataclass(frozen=True)
class Target:
    """A number ``value`` of ``measure`` that the best held-out row of ``dataset`` should reach."""

    dataset: str
    measure: str
    value: float
    source: str
    needs: str = ""


def parse(table: Mapping[str, Any], document: Mapping[str, Any], where: str) -> list[Target]:
    """Validate ``[study.goals]``: ``targets`` is a list of tables, each naming a dataset of the experiment."""
    check_keys(table, KEYS, where, "key in [study.goals]")
    targets = table.get("targets")
    if not isinstance(targets, list) or not targets:
        raise ConfigError(
            f"{where}: study.goals.targets must be a non-empty list of "
            "{ dataset, measure, value, source[, needs] } tables"
        )
    experiment_measures = document.get("experiment", {}).get("measures")
    datasets = {  # as the results name them: a dataset's label (resolved), or its name or id (as written)
        entry.get("label") or entry.get("name") or entry.get("id"): entry.get("measures") or experiment_measures
        for entry in document.get("datasets", [])
        if isinstance(entry, Mapping)
    }
    out = []
    for number, target in enumerate(targets, 1):
        here = f"{where}: study.goals.targets[{number}]"
        if not isinstance(target, Mapping):
            raise ConfigError(f"{here} must be a table {{ dataset, measure, value, source[, needs] }}")
        check_keys(target, TARGET_KEYS, here, "key")
        missing = [key for key in ("dataset", "measure", "value", "source") if key not in target]
        if missing:
            raise ConfigError(f"{here} lacks {', '.join(missing)}")
        for key in ("dataset", "measure", "source"):
            check_string(target[key], f"{here}.{key}")
        if not isinstance(target.get("needs", ""), str):
            raise ConfigError(f"{here}.needs must be a string, got {target['needs']!r}")
        value = target["value"]
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ConfigError(f"{here}.value must be a number, got {value!r}")
        if datasets and target["dataset"] not in datasets:
            raise ConfigError(f"{here}.dataset {target['dataset']!r} is not a dataset of this experiment")
        _check_measure(target["measure"], datasets.get(target["dataset"]), target["dataset"], here)
        needs = target.get("needs", "")
        out.append(Target(target["dataset"], target["measure"], float(value), target["source"], needs))
    return out


def _check_measure(measure: str, computed: list[str] | None, dataset: str, here: str) -> None:
    """A goal's measure must be a measure name and one its dataset computes (else it could never be met)."""
    parse_measure(measure, f"{here}.measure")
    if computed is not None and measure not in computed:
        raise ConfigError(
            f"{here}.measure {measure!r} is not a measure of dataset {dataset!r} (it computes "
            f"{', '.join(computed)}); add it to [experiment].measures or that dataset's measures, or pick one of those"
        )


def compute(targets: list[Target], finished: FinishedRun) -> pd.DataFrame:
    """One row per goal: the best held-out row and its value, the gap, whether it is met, the per-query oracle."""
    results, per_query = finished.results, finished.per_query
    rows = []
    for target in targets:
        cells = results[results["dataset"] == target.dataset]
        tuned = cells[cells["family"] == TUNED]
        tuned = tuned[tuned[target.measure].notna()] if target.measure in cells.columns else tuned.iloc[0:0]
        if tuned.empty:
            best_name, best_value = None, float("nan")
        else:
            best = tuned.loc[tuned[target.measure].idxmax()]
            best_name, best_value = str(best["system"]), float(best[target.measure])
        gap = best_value - target.value
        rows.append(
            {
                "dataset": target.dataset,
                "measure": target.measure,
                "goal": target.value,
                "source": target.source,
                "held_out": best_name,
                "held_out_value": best_value,
                "gap": gap,
                "met": bool(gap >= 0),
                "oracle": _oracle(per_query, set(cells["cell_id"]), target.measure),
                "needs": target.needs,
            }
        )
    return pd.DataFrame(rows, columns=COLUMNS)


def _oracle(per_query: pd.DataFrame, cell_ids: set[str], measure: str) -> float:
    """Mean over the queries of each query's best value among ``cell_ids`` (NaN when none was measured)."""
    values = per_query[per_query["cell_id"].isin(cell_ids) & (per_query["measure"] == measure)]
    if values.empty:
        return float("nan")
    return float(values.groupby("query_id")["value"].max().mean())


def verdict(table: pd.DataFrame) -> str:
    """One paragraph: how many goals held-out rows meet, and what each missed one would need."""
    met = table[table["met"]]
    lines = [f"{len(met)} of {len(table)} goal(s) met by a row tuned without the queries it is scored on."]
    for _, row in table[~table["met"]].iterrows():
        if row["held_out"] is None:
            lines.append(f"{row['dataset']}: no held-out (tuned) row measured {row['measure']}.")
            continue
        reach = (
            "even the best row chosen per query stays below it, so no choice or fusion of these rows reaches it "
            "and a stronger signal is needed"
            if row["oracle"] < row["goal"]
            else "the best row chosen per query would reach it (an oracle, an upper bound rather than a method), "
            "so the rows hold the answers and a better combiner might close it"
        )
        lines.append(
            f"{row['dataset']}: {row['held_out']} reaches {fmt(row['held_out_value'])} {row['measure']}, "
            f"short of {fmt(row['goal'])} ({row['source']}) by {fmt(-row['gap'])}; the per-query oracle of all "
            f"its rows is {fmt(row['oracle'])}: {reach}" + (f"; needed: {row['needs']}." if row["needs"] else ".")
        )
    return " ".join(lines)


def run(targets: list[Target], finished: FinishedRun) -> StudySection:
    """The study's report section: the verdict, the table of goals and a figure of values against goals."""
    table = compute(targets, finished)
    shown = pd.DataFrame(
        {
            "dataset": table["dataset"],
            "measure": table["measure"],
            "goal": table["goal"].map(fmt),
            "source of the goal": table["source"],
            "best held-out row": table["held_out"].fillna("-"),
            "value": table["held_out_value"].map(fmt),
            "gap": table["gap"].map(lambda gap: "-" if pd.isna(gap) else fmt_delta(gap)),
            "met": table["met"].map({True: "yes", False: "no"}),
            "per-query oracle of all rows": table["oracle"].map(fmt),
            "what would close it": table["needs"].where(~table["met"], ""),
        }
    )
    figure = StudyFigure(
        "goals",
        "Best held-out row per dataset (bar), its goal (black tick) and the per-query oracle of all rows (grey dot).",
        lambda label: _figure(table, label),
    )
    return StudySection(
        title="Against the goals",
        summary=verdict(table),
        tables=[("Each goal against the best row tuned without its test queries", shown)],
        figures=[figure],
        data=table,
    )


def _figure(table: pd.DataFrame, label: Callable[[str], str]) -> Any:
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 0.5 + 0.45 * len(table)))
    positions = range(len(table))
    colours = ["tab:green" if met else "tab:red" for met in table["met"]]
    ax.barh(list(positions), table["held_out_value"].fillna(0.0), color=colours, height=0.6)
    ax.scatter(table["goal"], list(positions), marker="|", s=400, color="black", zorder=3, label="goal")
    ax.scatter(table["oracle"], list(positions), marker="o", color="grey", zorder=3, label="per-query oracle")
    names = [label(f"{name} ({measure})") for name, measure in zip(table["dataset"], table["measure"], strict=True)]
    ax.set_yticks(list(positions), names)
    ax.invert_yaxis()
    ax.set_xlabel("value of the best held-out row")
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    return fig
