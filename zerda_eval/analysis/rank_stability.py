"""How stable a ranking of systems is: the bootstrap over queries.

Each resample draws the queries with replacement (one multinomial count per query), ranks the systems
by their mean over the drawn queries (1 = best; a system shares rank 1 with those tied with it), and
counts how often each is best and which rank it takes. A system's probability of being best is its
share of resamples at the top (split evenly among ties); its rank interval is the central ``level`` of
its ranks. The question MTEB users ask of a leaderboard; no kept library computes it for a score matrix.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from zerda_eval.analysis.significance import DEFAULT_SEED

RESAMPLES = 1_000
LEVEL = 0.95
TIE = 1e-12  # means closer than this are tied: the same queries summed in another order differ in the last bits


def bootstrap_ranks(
    scores: np.ndarray, n_resamples: int = RESAMPLES, level: float = LEVEL, seed: int = DEFAULT_SEED
) -> pd.DataFrame:
    """Per system (a column of ``scores``, queries x systems): its observed rank, probability of being
    best, median rank and the ``level`` interval of its rank over ``n_resamples`` query resamples."""
    scores = np.asarray(scores, float)
    n = scores.shape[0]
    counts = np.random.default_rng(seed).multinomial(n, np.full(n, 1.0 / n), size=n_resamples)
    return rank_summary(counts @ scores / n, scores.mean(axis=0), level)


def ranks_of(means: np.ndarray) -> np.ndarray:
    """1 + the number of systems better by more than ``TIE``, per resample (rows) and system (columns)."""
    means = np.atleast_2d(means)
    return 1 + (means[:, None, :] > means[:, :, None] + TIE).sum(axis=2)


def rank_summary(means: np.ndarray, observed: np.ndarray, level: float = LEVEL) -> pd.DataFrame:
    """The per-system summary of resampled ``means`` (resamples x systems) against the ``observed`` means."""
    ranks = ranks_of(means)
    best = ranks == 1
    tail = (1 - level) / 2
    low, median, high = np.quantile(ranks, [tail, 0.5, 1 - tail], axis=0, method="inverted_cdf")
    return pd.DataFrame(
        {
            "rank": ranks_of(observed)[0],
            "p_best": (best / best.sum(axis=1, keepdims=True)).mean(axis=0),
            "rank_low": low.astype(int),
            "rank_median": median.astype(int),
            "rank_high": high.astype(int),
        }
    )
