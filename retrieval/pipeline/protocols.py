"""The seed's protocols (all ``runtime_checkable``) and the storage protocols the retrievers write against."""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from retrieval.pipeline.models import ContextItem, MemoryEntry, QueryBundle


@runtime_checkable
class Retriever(Protocol):
    def retrieve(self, query: QueryBundle, top_k: int = 10) -> list[ContextItem]: ...


@runtime_checkable
class AsyncRetriever(Protocol):
    async def aretrieve(self, query: QueryBundle, top_k: int = 10) -> list[ContextItem]: ...


@runtime_checkable
class Reranker(Protocol):
    def rerank(self, query: QueryBundle, items: list[ContextItem], top_k: int = 10) -> list[ContextItem]: ...


@runtime_checkable
class AsyncReranker(Protocol):
    async def arerank(self, query: QueryBundle, items: list[ContextItem], top_k: int = 10) -> list[ContextItem]: ...


@runtime_checkable
class TokenLevelEncoder(Protocol):
    def encode_tokens(self, text: str) -> list[list[float]]: ...


@runtime_checkable
class Tokenizer(Protocol):
    """Counts tokens of a text (fills ``ContextItem.token_count``)."""

    def count_tokens(self, text: str) -> int: ...


@runtime_checkable
class VectorStore(Protocol):
    """Embeddings by item id; ``search`` returns ``(item_id, similarity)`` best first."""

    def add_embedding(self, item_id: str, embedding: list[float], metadata: dict[str, Any] | None = None) -> None: ...

    def search(self, query_embedding: list[float], top_k: int = 10) -> list[tuple[str, float]]: ...

    def delete(self, item_id: str) -> bool: ...


@runtime_checkable
class ContextStore(Protocol):
    """Resolves item ids to ``ContextItem``s."""

    def add(self, item: ContextItem) -> None: ...

    def get(self, item_id: str) -> ContextItem | None: ...

    def get_all(self) -> list[ContextItem]: ...

    def delete(self, item_id: str) -> bool: ...


@runtime_checkable
class MemoryEntryStore(Protocol):
    """Holds ``MemoryEntry`` records by id."""

    def add(self, entry: MemoryEntry) -> None: ...

    def get(self, entry_id: str) -> MemoryEntry | None: ...

    def list_all(self) -> list[MemoryEntry]: ...

    def delete(self, entry_id: str) -> bool: ...


@runtime_checkable
class MemoryDecay(Protocol):
    """Retention of a memory entry, from 0.0 (forgotten) to 1.0 (perfect): ``ScoredMemoryRetriever``'s recency."""

    def compute_retention(self, entry: MemoryEntry) -> float: ...
