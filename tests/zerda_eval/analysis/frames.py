"""Results and per-query frames built by hand, as a run directory's tables hold them."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd


def frames(values: dict[tuple[str, str], dict[str, float]], params: dict[str, dict] | None = None):
    """results + per_query frames from {(dataset, system): {qid: ndcg}}; means computed from the values."""
    rows, per_query = [], []
    for (dataset, system), per_q in values.items():
        cell_id = f"{dataset}-{system}"
        rows.append(
            {
                "dataset": dataset,
                "system": system,
                "family": "f",
                "cell_id": cell_id,
                "params": json.dumps((params or {}).get(system, {})),
                "ndcg@10": np.mean(list(per_q.values())),
            }
        )
        per_query += [
            {
                "cell_id": cell_id,
                "dataset": dataset,
                "system": system,
                "query_id": q,
                "measure": "ndcg@10",
                "value": v,
            }
            for q, v in per_q.items()
        ]
    return pd.DataFrame(rows), pd.DataFrame(per_query)
