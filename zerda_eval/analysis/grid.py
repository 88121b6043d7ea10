"""Every row of a dataset at once: all pairs by the randomised Tukey HSD, the topic x system ANOVA, and
how stable the ranking of the rows is under a bootstrap over queries.

The family of the Tukey HSD is every pair of the dataset's rows on one measure; a query missing from a
row's run counts as 0, as in ``significance.align``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from zerda_eval.analysis.anova import two_way_anova
from zerda_eval.analysis.compare import CompareSpec
from zerda_eval.analysis.rank_stability import bootstrap_ranks
from zerda_eval.analysis.tukey import randomised_tukey_hsd


@dataclass(frozen=True)
class GridAnalysis:
    """One dataset's rows on ``measure``: the ANOVA table, every pair's Tukey p-value, each row's rank stability."""

    dataset: str
    measure: str
    queries: int
    anova: pd.DataFrame
    pairs: pd.DataFrame  # system_a, system_b, delta (a - b), p_tukey, significant
    ranks: pd.DataFrame  # system, cell_id, mean, rank, p_best, rank_low/median/high, differs_from_best


def score_matrix(results: pd.DataFrame, per_query: pd.DataFrame, dataset: str, measure: str) -> pd.DataFrame:
    """Queries x cell ids of ``dataset`` on ``measure`` (the union of their queries; a missing value is 0)."""
    cells = results[results["dataset"] == dataset]["cell_id"].astype(str)
    values = per_query[per_query["cell_id"].astype(str).isin(set(cells)) & (per_query["measure"] == measure)]
    matrix = values.pivot_table(index="query_id", columns="cell_id", values="value", aggfunc="first")
    return matrix.reindex(columns=[c for c in cells if c in matrix.columns]).fillna(0.0).sort_index()


def analyse_dataset(results: pd.DataFrame, per_query: pd.DataFrame, dataset: str, measure: str, spec: CompareSpec):
    """The ``GridAnalysis`` of ``dataset`` (None with fewer than two rows or two queries measured)."""
    matrix = score_matrix(results, per_query, dataset, measure)
    if matrix.shape[1] < 2 or matrix.shape[0] < 2:
        return None
    scores = matrix.to_numpy()
    labels = results.set_index(results["cell_id"].astype(str)).loc[list(matrix.columns), "system"].astype(str)
    p = randomised_tukey_hsd(scores, spec.n_permutations, spec.seed)
    means = scores.mean(axis=0)
    a, b = np.triu_indices(len(means), k=1)
    pairs = pd.DataFrame(
        {
            "system_a": labels.to_numpy()[a],
            "system_b": labels.to_numpy()[b],
            "delta": means[a] - means[b],
            "p_tukey": p[a, b],
            "significant": p[a, b] < spec.alpha,
        }
    )
    ranks = bootstrap_ranks(scores, seed=spec.seed)
    best = int(np.argmax(means))
    ranks.insert(0, "mean", means)
    ranks.insert(0, "cell_id", list(matrix.columns))
    ranks.insert(0, "system", labels.to_numpy())
    ranks["differs_from_best"] = p[best] < spec.alpha
    ranks = ranks.sort_values(["rank", "system"], kind="stable").reset_index(drop=True)
    return GridAnalysis(str(dataset), measure, scores.shape[0], two_way_anova(scores), pairs, ranks)


def analyse_grid(results: pd.DataFrame, per_query: pd.DataFrame, measure: str, spec: CompareSpec) -> list[GridAnalysis]:
    """``analyse_dataset`` of every dataset of ``results`` that has at least two rows measured on ``measure``."""
    analyses = [analyse_dataset(results, per_query, str(d), measure, spec) for d in dict.fromkeys(results["dataset"])]
    return [analysis for analysis in analyses if analysis is not None]
