"""``HybridRetriever``: several retrievers fused with Reciprocal Rank Fusion (``rrf_fuse``)."""

from __future__ import annotations

import logging

from retrieval.pipeline.errors import RetrieverError
from retrieval.pipeline.fusion import rrf_fuse
from retrieval.pipeline.models import ContextItem, QueryBundle
from retrieval.pipeline.protocols import Retriever

logger = logging.getLogger(__name__)


def check_weights(weights: list[float] | None, n_retrievers: int) -> None:
    """Weights, when given, need one non-negative value per retriever."""
    if weights is None:
        return
    if len(weights) != n_retrievers:
        raise RetrieverError(f"{len(weights)} weights for {n_retrievers} retrievers; give one weight per retriever")
    if any(w < 0 for w in weights):
        raise RetrieverError(f"weights must be >= 0, got {weights}")


def fuse_surviving(
    results: list[list[ContextItem] | BaseException], weights: list[float] | None, k: int, top_k: int
) -> list[ContextItem]:
    """RRF over the result lists that are not exceptions; all failed -> ``RetrieverError``."""
    kept = [i for i, result in enumerate(results) if not isinstance(result, BaseException)]
    for i, result in enumerate(results):
        if isinstance(result, BaseException):
            logger.warning("sub-retriever %d failed and is skipped: %s", i, result)
    if not kept:
        raise RetrieverError(f"all {len(results)} sub-retrievers failed; first error: {results[0]}")
    return rrf_fuse([results[i] for i in kept], None if weights is None else [weights[i] for i in kept], k, top_k)


class HybridRetriever:
    """RRF fusion (``rrf_k``, optional per-retriever ``weights``) of several ``Retriever``s.

    Each sub-retriever is asked for ``top_k`` items. A sub-retriever that raises ``Exception`` is
    skipped (logged) and its weight dropped; if every one fails, ``RetrieverError``. Returned items
    are exactly ``rrf_fuse``'s (seed 004: "Fuse results with RRF"): scores min-max normalised over the
    returned items, raw sums in ``metadata["rrf_raw_score"]``, ``metadata["retrieval_method"] == "rrf"``.
    """

    def __init__(self, retrievers: list[Retriever], rrf_k: int = 60, weights: list[float] | None = None) -> None:
        if not retrievers:
            raise RetrieverError("HybridRetriever needs at least one retriever")
        check_weights(weights, len(retrievers))
        self.retrievers = retrievers
        self.rrf_k = rrf_k
        self.weights = weights

    def retrieve(self, query: QueryBundle, top_k: int = 10) -> list[ContextItem]:
        results: list[list[ContextItem] | BaseException] = []
        for retriever in self.retrievers:
            try:
                results.append(retriever.retrieve(query, top_k))
            except Exception as exc:
                results.append(exc)
        return fuse_surviving(results, self.weights, self.rrf_k, top_k)
