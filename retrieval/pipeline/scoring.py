"""Keeping ``ContextItem.score`` inside [0, 1]: the shared rules every retriever and reranker applies.

- Similarities (cosine in [-1, 1]) are clipped: ``clip_unit``; negatives become 0.0.
- Free-range scores from callbacks (cross-encoder logits, MaxSim sums, custom scorers) go through
  ``unit_scores`` per batch: a batch already inside [0, 1] is kept as it is; otherwise every score
  of the batch is mapped by the logistic sigmoid (monotonic, so the order is unchanged; for
  cross-encoder logits it is the usual relevance probability).
In both cases the raw value is kept in the item's metadata (``rescored``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, TypeVar

from retrieval.pipeline.errors import RetrieverError
from retrieval.pipeline.models import ContextItem

T = TypeVar("T")


def clip_unit(value: float) -> float:
    """``value`` clipped to [0, 1]."""
    return min(1.0, max(0.0, float(value)))


def _sigmoid(value: float) -> float:
    if value >= 0:
        return 1.0 / (1.0 + math.exp(-value))
    exp = math.exp(value)
    return exp / (1.0 + exp)


def unit_scores(raw: Sequence[float]) -> list[float]:
    """Map a batch of free-range scores into [0, 1], keeping their order (see module docstring)."""
    values = [float(v) for v in raw]
    if all(0.0 <= v <= 1.0 for v in values):
        return values
    return [_sigmoid(v) for v in values]


def rescored(item: ContextItem, score: float, **metadata: Any) -> ContextItem:
    """A copy of ``item`` with ``score`` (clipped to [0, 1]) and ``metadata`` merged into its own."""
    return item.model_copy(update={"score": clip_unit(score), "metadata": {**item.metadata, **metadata}})


def cut(items: Sequence[T], top_k: int) -> list[T]:
    """The first ``top_k`` of ``items``; a negative ``top_k`` is a caller mistake."""
    if top_k < 0:
        raise RetrieverError(f"top_k must be >= 0, got {top_k}")
    return list(items[:top_k])


def rank_by(items: Sequence[T], raw: Sequence[float]) -> list[tuple[T, float]]:
    """``(item, raw score)`` pairs sorted by score descending; ties keep the input order."""
    return sorted(zip(items, raw, strict=True), key=lambda pair: -pair[1])


def rescore_sorted(
    items: Sequence[ContextItem],
    raw: Sequence[float],
    raw_key: str,
    previous_key: str | None = None,
    **fixed: Any,
) -> list[ContextItem]:
    """``items`` sorted by ``raw`` (ties in input order), scored by ``unit_scores(raw)``.

    The raw score goes to ``metadata[raw_key]``, the item's old score to ``metadata[previous_key]``
    when that is given, and ``fixed`` into every item's metadata.
    """
    ranked = rank_by(items, raw)
    units = unit_scores([score for _, score in ranked])
    out = []
    for (item, score), unit in zip(ranked, units, strict=True):
        extra = {raw_key: score, **fixed}
        if previous_key is not None:
            extra[previous_key] = item.score
        out.append(rescored(item, unit, **extra))
    return out
