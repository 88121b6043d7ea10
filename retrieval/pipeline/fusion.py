"""``rrf_fuse``: Reciprocal Rank Fusion of ranked ``ContextItem`` lists (Cormack et al., SIGIR 2009).

The RRF sum is ``retrieval.core.rrf_scores``: 1-based ranks, a list adds ``weight / (k + rank)``
(ranx's ``1 / (k + i + 1)`` with 0-based ``i``: the same numbers).
"""

from __future__ import annotations

from retrieval.core import rrf_scores
from retrieval.pipeline.errors import RetrieverError
from retrieval.pipeline.models import ContextItem
from retrieval.pipeline.scoring import cut, rescored


def rrf_fuse(
    ranked_lists: list[list[ContextItem]],
    weights: list[float] | None = None,
    k: int = 60,
    top_k: int | None = None,
) -> list[ContextItem]:
    """Fuse ranked lists by item id; return new items, best first, at most ``top_k`` (``None``: all).

    - Items are matched by ``id``; the copy kept is the first one seen (list order, then rank).
      An id repeated inside one list contributes once per occurrence (``rrf_scores``'s rule).
    - ``score`` is the RRF sum divided by the largest sum, so the best item scores 1.0 (all-zero
      weights give 0.0 everywhere); the raw sum is in ``metadata["rrf_score"]``.
    - ``metadata["retrieval_method"] == "rrf"``. Ties keep first-seen order.
    Errors (``RetrieverError``): weights of the wrong length or negative, ``k`` < 0, ``top_k`` < 0.
    """
    if weights is not None:
        if len(weights) != len(ranked_lists):
            raise RetrieverError(f"rrf_fuse got {len(weights)} weights for {len(ranked_lists)} ranked lists")
        if any(w < 0 for w in weights):
            raise RetrieverError(f"rrf_fuse weights must be >= 0, got {weights}")
    if k < 0:
        raise RetrieverError(f"rrf_fuse k must be >= 0, got {k}")
    first_seen: dict[str, ContextItem] = {}
    for ranked in ranked_lists:
        for item in ranked:
            first_seen.setdefault(item.id, item)
    sums = rrf_scores([[item.id for item in ranked] for ranked in ranked_lists], weights, k)
    best = max(sums.values(), default=0.0)
    order = sorted(sums, key=lambda item_id: -sums[item_id])
    fused = [
        rescored(
            first_seen[item_id],
            sums[item_id] / best if best > 0 else 0.0,
            retrieval_method="rrf",
            rrf_score=sums[item_id],
        )
        for item_id in order
    ]
    return fused if top_k is None else cut(fused, top_k)
