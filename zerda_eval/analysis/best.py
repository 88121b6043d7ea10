"""The best configuration per dataset: the best held-out (tuned) row beside the best row picked on test.

Picking the best of a grid's rows by their test scores is tuning on the test queries: that figure is
optimistic. A tuned row (``spec.tuning``) was chosen on other queries; it is the honest answer.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from zerda_eval.config.tuning import TUNED
from zerda_eval.store.run_dir import load_result

COLUMNS = ["dataset", "measure", "held_out", "held_out_value", "chosen_by", "on_test", "on_test_value"]
CHOICE_COLUMNS = ["dataset", "row", "fold", "inputs", "chosen", "chosen_on_mean", "chosen_on_queries", "answers"]


def best_configurations(results: pd.DataFrame, tuning: Mapping[str, Any]) -> pd.DataFrame:
    """Per dataset with tuned rows: the best tuned row on ``tuning["measure"]`` and how it was chosen, and
    the best untuned row (its value tuned on the test queries). Empty when the experiment tunes nothing."""
    measure = tuning.get("measure")
    if not measure or measure not in results.columns:
        return pd.DataFrame(columns=COLUMNS)
    rows = []
    for dataset, group in results.groupby("dataset", sort=False):
        tuned = group[group["family"] == TUNED]
        if tuned.empty:
            continue
        untuned = group[group["family"] != TUNED]
        held_out = tuned.loc[tuned[measure].idxmax()]
        on_test = untuned.loc[untuned[measure].idxmax()]
        rows.append(
            {
                "dataset": dataset,
                "measure": measure,
                "held_out": held_out["system"],
                "cell_id": held_out.get("cell_id"),
                "held_out_value": float(held_out[measure]),
                "chosen_by": json.loads(held_out["params"]).get(TUNED, ""),
                "on_test": on_test["system"],
                "on_test_value": float(on_test[measure]),
            }
        )
    return pd.DataFrame(rows, columns=[*COLUMNS, "cell_id"])


def fold_choices(run_dir: Path, results: pd.DataFrame, best: pd.DataFrame) -> pd.DataFrame:
    """What each fold (or the train split) chose, for each best held-out row of ``best_configurations`` and
    each fusion over tuned inputs: the inputs' grid points (empty when the row has no tuned input), the grid
    point, its mean on the queries it was chosen on, and how many queries it answers (cells' ``result.json``)."""
    best_ids = set(best["cell_id"].dropna()) if "cell_id" in best else set()
    tuned = results[results["family"] == TUNED] if "cell_id" in results else results.iloc[0:0]
    rows = []
    for _, row in tuned.iterrows():
        result = load_result(Path(run_dir), row["cell_id"]) or {}
        choices = result.get("stats", {}).get("tuning", {}).get("choices", [])
        if row["cell_id"] not in best_ids and not any("inputs" in choice for choice in choices):
            continue
        for choice in choices:
            rows.append(
                {
                    "dataset": row["dataset"],
                    "row": row["system"],
                    "fold": choice["fold"],
                    "inputs": " + ".join(choice.get("inputs", [])),
                    "chosen": choice["chosen"],
                    "chosen_on_mean": choice["chosen_on_mean"],
                    "chosen_on_queries": choice["chosen_on_queries"],
                    "answers": choice["answers"],
                }
            )
    return pd.DataFrame(rows, columns=CHOICE_COLUMNS)
