"""Configuration of the zerda retrieval stack (seed 000), with the shipped package's defaults."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

AS_DOCUMENTED = "as_documented"
FIXED = "fixed"
RRF_ORDERS = (AS_DOCUMENTED, FIXED)


def check_rrf_order(rrf_order: str) -> str:
    """Return ``rrf_order`` if it is one of ``RRF_ORDERS``, else raise a ``ValueError`` naming them."""
    if rrf_order not in RRF_ORDERS:
        raise ValueError(f"RetrieverConfig.rrf_order={rrf_order!r} is not valid; use one of {', '.join(RRF_ORDERS)}")
    return rrf_order


@dataclass
class RetrieverConfig:
    """Knobs of the retrievers and of ``HybridRetriever``'s fusion.

    ``rrf_order`` chooses when ``HybridRetriever`` adds its RRF bonus:
    ``"as_documented"`` (default) runs the RRF step before the weighted composite overwrites it, so the
    bonus is computed and discarded, as seed 000's warning describes; ``"fixed"`` adds it after.
    """

    top_k: int = 20
    vector_weight: float = 0.60
    keyword_weight: float = 0.30
    metadata_weight: float = 0.10
    use_vector: bool = True
    use_keyword: bool = True
    use_metadata: bool = False
    metadata_filters: dict[str, Any] = field(default_factory=dict)
    min_vector_score: float = 0.0
    rrf_order: str = AS_DOCUMENTED

    def __post_init__(self) -> None:
        check_rrf_order(self.rrf_order)


@dataclass
class ContextEngineConfig:
    """Top-level configuration; the retrievers read only its ``retriever`` section."""

    retriever: RetrieverConfig = field(default_factory=RetrieverConfig)
