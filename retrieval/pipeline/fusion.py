"""``rrf_fuse``: Reciprocal Rank Fusion of ranked ``ContextItem`` lists (Cormack et al., SIGIR 2009).

The RRF sum is ``retrieval.core.rrf_scores``: 1-based ranks, a list adds ``weight / (k + rank)``
(ranx's ``1 / (k + i + 1)`` with 0-based ``i``: the same numbers).
"""

from __future__ import annotations

from retrieval.core import rrf_scores
from retrieval.core.top_k import top_k_indices
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

    Seed 004: "Returns fused items with normalized scores" resolved as the documented library does
    (issue 18):

    - ``score`` is min-max normalised over the *returned* items (after the ``top_k`` cut):
      ``(s - min) / (max - min)``; a single returned item scores 1.0 (0.0 if its sum is 0); more than
      one item, all tied: 0.0 each. The raw RRF sum is in ``metadata["rrf_raw_score"]``.
    - Items are matched by ``id``; the copy kept is the one with the highest ``score`` (on a tie the
      first seen, list order then rank). An id repeated inside one list contributes once per occurrence.
    - ``metadata["retrieval_method"] == "rrf"``. Equal sums keep first-seen order.
    Errors (``RetrieverError``): weights of the wrong length or negative, ``k`` < 0, ``top_k`` < 0.
    """
    if weights is not None:
        if len(weights) != len(ranked_lists):
            raise RetrieverError(f"rrf_fuse got {len(weights)} weights for {len(ranked_lists)} ranked lists")
        if any(w < 0 for w in weights):
            raise RetrieverError(f"rrf_fuse weights must be >= 0, got {weights}")
    if k < 0:
        raise RetrieverError(f"rrf_fuse k must be >= 0, got {k}")
    kept: dict[str, ContextItem] = {}
    for ranked in ranked_lists:
        for item in ranked:
            if item.id not in kept or item.score > kept[item.id].score:
                kept[item.id] = item
    sums = rrf_scores([[item.id for item in ranked] for ranked in ranked_lists], weights, k)
    ids = list(sums)
    order = [ids[i] for i in top_k_indices([sums[item_id] for item_id in ids])]
    if top_k is not None:
        order = cut(order, top_k)
    if not order:
        return []
    scores = returned_min_max([sums[item_id] for item_id in order])
    return [
        rescored(kept[item_id], score, retrieval_method="rrf", rrf_raw_score=sums[item_id])
        for item_id, score in zip(order, scores, strict=True)
    ]


def returned_min_max(sums: list[float]) -> list[float]:
    """The documented library's min-max of ``rrf_fuse`` (a quirk kept, issue 18), over the returned sums best
    first: ``(s - min) / (max - min)``, except that one item is divided by itself (1.0; 0.0 when its sum is
    0) and all-tied items score 0.0. The harness's min-max is ranx's (``zerda_eval.fusion.methods``)."""
    high = sums[0]
    low = sums[-1] if len(sums) > 1 else 0.0
    span = high - low if high > low else 1.0
    return [(value - low) / span for value in sums]
