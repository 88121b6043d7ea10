"""The best configuration chosen without any test query: one ``best[nested]`` row per dataset.

Picking the best of a dataset's tuned rows by their scores on the test queries is a choice made on the
test queries. The nested selection moves that choice inside the folds: on each fold, among ALL tuned rows
of the dataset (each a configuration with its grid), the one whose grid point did best on the fold's
training queries (``chosen_on_mean`` in its ``result.json``; all rows deal the same folds from the
experiment's seed) answers the fold's held-out queries. That is the best of the union of their grids on
the training queries, so the configuration and its parameters are chosen together, on training queries
only, and the row's mean over the folds is an honest figure for "the best configuration". With a train
split, the one "fold" is the train split. Ties go to the first tuned row in results order.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from zerda_eval.analysis.compare import index_per_query
from zerda_eval.config.tuning import TUNED
from zerda_eval.errors import DataFormatError
from zerda_eval.store.run_dir import load_result

NESTED = "best[nested]"
TIE = 1e-12  # training means closer than this are tied: equal means summed from other values differ in the last bits
COLUMNS = ["dataset", "measure", "value", "queries", "chosen"]
FOLD_COLUMNS = ["dataset", "fold", "row", "chosen", "chosen_on_mean", "answers"]


def nested_best(run_dir: Path, results: pd.DataFrame, per_query: pd.DataFrame, measure: str):
    """(one row per dataset with tuned rows: the nested value on ``measure``, its query count and the rows
    chosen, each with the number of folds it won; one row per dataset and fold: the row chosen there).

    A dataset whose tuned rows predate the record of their folds (``stats.tuning.fold_of``) is left out."""
    lookup = index_per_query(per_query)
    summary, folds = [], []
    for dataset, group in results.groupby("dataset", sort=False):
        tuned = group[group["family"] == TUNED]
        stats = [_tuning(run_dir, str(cell)) for cell in tuned["cell_id"]]
        if tuned.empty or any(s is None or s.get("measure") != measure or "fold_of" not in s for s in stats):
            continue
        fold_of = stats[0]["fold_of"]
        for cell, own in zip(tuned["cell_id"], stats, strict=True):
            if own["fold_of"] != fold_of:
                raise DataFormatError(
                    f"{run_dir}: tuned cell {cell} dealt other folds than {tuned['cell_id'].iloc[0]} on dataset "
                    f"{dataset!r}; rerun `zerda-eval run CONFIG` so every tuned row of a dataset deals the same folds"
                )
        by_fold = [{choice["fold"]: choice for choice in own["choices"]} for own in stats]
        values = {}
        wins: dict[str, int] = {}
        for fold in by_fold[0]:
            means = [own[fold]["chosen_on_mean"] for own in by_fold]
            best = next(i for i, mean in enumerate(means) if mean >= max(means) - TIE)  # ties: the first row
            row, cell = str(tuned["system"].iloc[best]), str(tuned["cell_id"].iloc[best])
            chosen = by_fold[best][fold]
            own_values = lookup.get((cell, measure), {})
            held_out = [qid for qid, dealt in fold_of.items() if dealt == fold]
            values |= {qid: own_values.get(qid, 0.0) for qid in held_out}
            wins[row] = wins.get(row, 0) + 1
            folds.append(
                {
                    "dataset": dataset,
                    "fold": fold,
                    "row": row,
                    "chosen": chosen["chosen"],
                    "chosen_on_mean": chosen["chosen_on_mean"],
                    "answers": len(held_out),
                }
            )
        summary.append(
            {
                "dataset": dataset,
                "measure": measure,
                "value": sum(values.values()) / len(values) if values else float("nan"),
                "queries": len(values),
                "chosen": ", ".join(f"{row} ({count} of {len(by_fold[0])})" for row, count in wins.items()),
            }
        )
    return pd.DataFrame(summary, columns=COLUMNS), pd.DataFrame(folds, columns=FOLD_COLUMNS)


def _tuning(run_dir: Path, cell_id: str) -> dict | None:
    result = load_result(Path(run_dir), cell_id)
    return None if result is None else result.get("stats", {}).get("tuning")
