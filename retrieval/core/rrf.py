"""The one Reciprocal Rank Fusion of the project (Cormack, Clarke & Buettcher, SIGIR 2009).

Convention: ranks are 1-based and a list contributes ``weight / (k + rank)``. Seed 000 writes the
same thing as ``1 / (RRF_K + rank + 1)`` with a 0-based rank, and ranx as ``1 / (k + i + 1)``:
the numbers are identical.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Sequence

DEFAULT_K = 60


def rrf_contribution(rank: int, k: int = DEFAULT_K, weight: float = 1.0) -> float:
    """What one list adds for an item at 1-based ``rank``."""
    if rank < 1:
        raise ValueError(f"rank is 1-based, got {rank}")
    return weight / (k + rank)


def rrf_scores(
    ranked_lists: Sequence[Iterable[Hashable]],
    weights: Sequence[float] | None = None,
    k: int = DEFAULT_K,
) -> dict[Hashable, float]:
    """Sum of RRF contributions per key over ranked lists (best first); keys keep first-seen order.

    A key repeated inside one list contributes once per occurrence, as in the seeds' loops.
    """
    if weights is not None and len(weights) != len(ranked_lists):
        raise ValueError(f"{len(weights)} weights for {len(ranked_lists)} ranked lists")
    scores: dict[Hashable, float] = {}
    for position, ranked in enumerate(ranked_lists):
        weight = 1.0 if weights is None else weights[position]
        for rank, key in enumerate(ranked, start=1):
            scores[key] = scores.get(key, 0.0) + rrf_contribution(rank, k, weight)
    return scores
