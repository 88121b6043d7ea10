"""Keeping ``ContextItem.score`` inside [0, 1]: the one rule every retriever and reranker applies.

Every score (a cosine in [-1, 1], a cross-encoder logit, a MaxSim sum, a callback's value) is clamped:
``clip_unit``, so negatives become 0.0 and values above 1 become 1.0, with the raw value kept in the
item's metadata (``rescored``); rankings are made on the raw value. That is what the documented library
does (seed 004 names no other mapping: issue 18), so no sigmoid and no per-batch rescaling.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeVar

from retrieval.core.top_k import top_k_indices
from retrieval.pipeline.errors import RetrieverError
from retrieval.pipeline.models import ContextItem

T = TypeVar("T")


def clip_unit(value: float) -> float:
    """``value`` clipped to [0, 1]."""
    return min(1.0, max(0.0, float(value)))


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
    if len(items) != len(raw):
        raise ValueError(f"rank_by got {len(items)} items and {len(raw)} scores")
    return [(items[i], raw[i]) for i in top_k_indices(raw)]


def rescore_sorted(
    items: Sequence[ContextItem],
    raw: Sequence[float],
    raw_key: str,
    previous_key: str | None = None,
    **fixed: Any,
) -> list[ContextItem]:
    """``items`` sorted by ``raw`` (ties in input order), each scored by its raw value clamped to [0, 1].

    The raw score goes to ``metadata[raw_key]``, the item's old score to ``metadata[previous_key]``
    when that is given, and ``fixed`` into every item's metadata.
    """
    out = []
    for item, score in rank_by(items, [float(value) for value in raw]):
        extra = {raw_key: score, **fixed}
        if previous_key is not None:
            extra[previous_key] = item.score
        out.append(rescored(item, score, **extra))
    return out
