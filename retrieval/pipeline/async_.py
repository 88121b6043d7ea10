"""Async retrievers and rerankers: concurrency with ``asyncio.gather``."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from retrieval.pipeline.errors import RetrieverError
from retrieval.pipeline.hybrid import check_weights, fuse_surviving
from retrieval.pipeline.models import ContextItem, QueryBundle
from retrieval.pipeline.rerankers import pick_by_index
from retrieval.pipeline.scoring import cut, rescore_sorted, rescored
from retrieval.pipeline.stores import InMemoryVectorStore, SimilarityFn


class AsyncDenseRetriever:
    """In-memory dense retriever; ``similarity_fn`` defaults to ``retrieval.core.cosine``.

    ``score`` is the similarity clipped to [0, 1], the raw value in ``metadata["similarity"]``.
    Re-indexing an id replaces it.
    """

    def __init__(
        self,
        embed_fn: Callable[[str], Awaitable[list[float]]],
        similarity_fn: SimilarityFn | None = None,
    ) -> None:
        self.embed_fn = embed_fn
        self.similarity_fn = similarity_fn
        self._vectors = InMemoryVectorStore(similarity_fn)
        self._items: dict[str, ContextItem] = {}

    def _store(self, item: ContextItem, embedding: list[float]) -> None:
        self._vectors.add_embedding(item.id, embedding)
        self._items[item.id] = item

    def index(self, items: list[ContextItem]) -> None:
        """Store pre-embedded items: each needs ``metadata["embedding"]``."""
        missing = [item.id for item in items if "embedding" not in item.metadata]
        if missing:
            raise RetrieverError(f"items {missing} have no metadata['embedding']; add one or use `await aindex(items)`")
        for item in items:
            self._store(item, item.metadata["embedding"])

    async def aindex(self, items: list[ContextItem]) -> None:
        """Embed all items concurrently with ``embed_fn`` and store them."""
        embeddings = await asyncio.gather(*(self.embed_fn(item.content) for item in items))
        for item, embedding in zip(items, embeddings, strict=True):
            self._store(item, embedding)

    async def aretrieve(self, query: QueryBundle, top_k: int = 10) -> list[ContextItem]:
        """Top ``top_k`` by similarity to ``query.embedding`` (or ``await embed_fn(query.query_str)``)."""
        embedding = query.embedding if query.embedding is not None else await self.embed_fn(query.query_str)
        return cut(
            [
                rescored(self._items[i], s, similarity=s, retrieval_method="dense")
                for i, s in self._vectors.search(embedding, top_k)
            ],
            top_k,
        )


class AsyncHybridRetriever:
    """Concurrent fan-out (``asyncio.gather``) to async retrievers, fused with RRF (``rrf_fuse``).

    Same rules as ``HybridRetriever``: each asked for ``top_k``; a failing retriever is skipped; all
    failing -> ``RetrieverError``; the items returned are exactly ``rrf_fuse``'s.
    """

    def __init__(self, retrievers: list[AsyncDenseRetriever], weights: list[float] | None = None, k: int = 60) -> None:
        if not retrievers:
            raise RetrieverError("AsyncHybridRetriever needs at least one retriever")
        check_weights(weights, len(retrievers))
        self.retrievers = retrievers
        self.weights = weights
        self.k = k

    async def aretrieve(self, query: QueryBundle, top_k: int = 10) -> list[ContextItem]:
        results = await asyncio.gather(*(r.aretrieve(query, top_k) for r in self.retrievers), return_exceptions=True)
        return fuse_surviving(list(results), self.weights, self.k, top_k)


class AsyncCrossEncoderReranker:
    """Scores every ``(query_str, content)`` pair concurrently with the async ``score_fn``."""

    def __init__(self, score_fn: Callable[[str, str], Awaitable[float]]) -> None:
        self.score_fn = score_fn

    async def arerank(self, query: QueryBundle, items: list[ContextItem], top_k: int = 10) -> list[ContextItem]:
        raw = await asyncio.gather(*(self.score_fn(query.query_str, item.content) for item in items))
        return cut(rescore_sorted(items, raw, "raw_score", rerank_method="cross_encoder"), top_k)


class AsyncCohereReranker:
    """Async batch reranker: ``rerank_fn(query, documents, top_k)`` returns document indices, best first.

    The callback gives no scores, so items keep their own ``score``; the new order is the
    callback's, recorded as 1-based ``metadata["rerank_rank"]``.
    """

    def __init__(self, rerank_fn: Callable[[str, list[str], int], Awaitable[list[int]]]) -> None:
        self.rerank_fn = rerank_fn

    async def arerank(self, query: QueryBundle, items: list[ContextItem], top_k: int = 10) -> list[ContextItem]:
        if not items:
            return []
        indices = await self.rerank_fn(query.query_str, [item.content for item in items], top_k)
        chosen = pick_by_index(items, indices, "rerank_fn")
        return cut([rescored(item, item.score, rerank_rank=rank) for rank, item in enumerate(chosen, start=1)], top_k)
