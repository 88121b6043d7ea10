"""Topic x system two-way ANOVA without replication, and its variance components.

A score is system effect + topic effect + residual. The sums of squares are the textbook ones (checked
against statsmodels' ``anova_lm`` of ``value ~ C(topic) + C(system)``); the variance components follow
from the expected mean squares of the random-effects model: sigma^2 residual = MS residual, sigma^2
system = (MS system - MS residual) / topics, sigma^2 topic = (MS topic - MS residual) / systems (clipped
at 0). Computed directly on the topics x systems matrix because a linear-model fit of every grid would
cost a design matrix of topics + systems columns per measure. The residual variance is what Sakai's
topic-set size design (``analysis.power``) takes as the variance of a difference's per-topic noise.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

SOURCES = ("system", "topic", "residual")


def two_way_anova(scores: np.ndarray) -> pd.DataFrame:
    """One row per source (system, topic, residual): sum of squares, df, mean square, F, p, variance
    component and its share of the total variance; ``scores`` is topics x systems, complete."""
    from scipy.stats import f

    scores = np.asarray(scores, float)
    n, m = scores.shape
    grand = scores.mean()
    ss_system = n * float(((scores.mean(axis=0) - grand) ** 2).sum())
    ss_topic = m * float(((scores.mean(axis=1) - grand) ** 2).sum())
    ss_residual = float(((scores - grand) ** 2).sum()) - ss_system - ss_topic
    df = {"system": m - 1, "topic": n - 1, "residual": (m - 1) * (n - 1)}
    ss = {"system": ss_system, "topic": ss_topic, "residual": max(ss_residual, 0.0)}
    ms = {source: ss[source] / df[source] if df[source] else float("nan") for source in SOURCES}
    components = {
        "system": max((ms["system"] - ms["residual"]) / n, 0.0),
        "topic": max((ms["topic"] - ms["residual"]) / m, 0.0),
        "residual": ms["residual"],
    }
    total = sum(components.values())
    rows = []
    for source in SOURCES:
        statistic = ms[source] / ms["residual"] if source != "residual" and ms["residual"] > 0 else float("nan")
        rows.append(
            {
                "source": source,
                "sum_sq": ss[source],
                "df": df[source],
                "mean_sq": ms[source],
                "F": statistic,
                "p": float(f.sf(statistic, df[source], df["residual"])) if np.isfinite(statistic) else float("nan"),
                "variance": components[source],
                "share": components[source] / total if total > 0 else float("nan"),
            }
        )
    return pd.DataFrame(rows)
