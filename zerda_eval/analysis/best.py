"""The best configuration per dataset: the best held-out (tuned) row beside the best row picked on test.

Picking the best of a grid's rows by their test scores is tuning on the test queries: that figure is
optimistic. A tuned row (``spec.tuning``) was chosen on other queries; it is the honest answer.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import pandas as pd

from zerda_eval.spec.tuning import TUNED

COLUMNS = ["dataset", "measure", "held_out", "held_out_value", "chosen_by", "on_test", "on_test_value"]


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
                "held_out_value": float(held_out[measure]),
                "chosen_by": json.loads(held_out["params"]).get(TUNED, ""),
                "on_test": on_test["system"],
                "on_test_value": float(on_test[measure]),
            }
        )
    return pd.DataFrame(rows, columns=COLUMNS)
