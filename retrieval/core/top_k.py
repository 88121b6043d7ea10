"""The one top-k rule of the reference side: highest score first, ties by lower index (input order).

It is ``heapq.nlargest`` on the indices (which keeps equal scores in input order, as a stable sort does).
Both seed APIs, ``BM25Index`` and RRF fusion rank with it; ``dense.top_k_rows`` (numpy, a matrix at a time)
and ``SparseBM25``'s numba kernel are its fast paths, tested equal to it.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence


def top_k_indices(scores: Sequence[float], k: int | None = None) -> list[int]:
    """Indices of the ``k`` highest ``scores`` (every index when ``k`` is None), best first, ties by lower index."""
    if k is None or k >= len(scores):
        return sorted(range(len(scores)), key=scores.__getitem__, reverse=True)  # stable: ties keep input order
    return heapq.nlargest(max(k, 0), range(len(scores)), key=scores.__getitem__)
