"""In-memory implementations of ``VectorStore``, ``ContextStore`` and ``MemoryEntryStore``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, TypeVar

from retrieval.core import cosine
from retrieval.pipeline.errors import RetrieverError
from retrieval.pipeline.models import ContextItem, MemoryEntry

SimilarityFn = Callable[[list[float], list[float]], float]
Record = TypeVar("Record", ContextItem, MemoryEntry)


class InMemoryVectorStore:
    """Brute-force vector search; similarity defaults to ``retrieval.core.cosine``.

    All embeddings must have one dimension: a mismatch raises ``RetrieverError`` naming the item.
    ``search`` orders by similarity descending, ties by insertion order.
    """

    def __init__(self, similarity_fn: SimilarityFn | None = None) -> None:
        self.similarity_fn = similarity_fn or cosine
        self._vectors: dict[str, list[float]] = {}
        self._metadata: dict[str, dict[str, Any]] = {}

    def __len__(self) -> int:
        return len(self._vectors)

    @property
    def dim(self) -> int | None:
        """Dimension of the stored embeddings, ``None`` while empty."""
        return len(next(iter(self._vectors.values()))) if self._vectors else None

    def add_embedding(self, item_id: str, embedding: list[float], metadata: dict[str, Any] | None = None) -> None:
        dim = self.dim
        if dim is not None and len(embedding) != dim:
            raise RetrieverError(f"embedding of item {item_id!r} has dimension {len(embedding)}, store has {dim}")
        self._vectors[item_id] = list(embedding)
        self._metadata[item_id] = dict(metadata or {})

    def search(self, query_embedding: list[float], top_k: int = 10) -> list[tuple[str, float]]:
        dim = self.dim
        if dim is not None and len(query_embedding) != dim:
            raise RetrieverError(f"query embedding has dimension {len(query_embedding)}, store has {dim}")
        scored = [(item_id, float(self.similarity_fn(query_embedding, v))) for item_id, v in self._vectors.items()]
        scored.sort(key=lambda pair: -pair[1])
        return scored[: max(top_k, 0)]

    def delete(self, item_id: str) -> bool:
        self._metadata.pop(item_id, None)
        return self._vectors.pop(item_id, None) is not None


class _RecordsById(Generic[Record]):
    """Records keyed by their ``id``, in insertion order; adding an existing id replaces it."""

    def __init__(self) -> None:
        self._records: dict[str, Record] = {}

    def add(self, record: Record) -> None:
        self._records[record.id] = record

    def get(self, record_id: str) -> Record | None:
        return self._records.get(record_id)

    def delete(self, record_id: str) -> bool:
        return self._records.pop(record_id, None) is not None


class InMemoryContextStore(_RecordsById[ContextItem]):
    """``ContextItem``s by id (the ``ContextStore`` protocol)."""

    def get_all(self) -> list[ContextItem]:
        return list(self._records.values())


class InMemoryEntryStore(_RecordsById[MemoryEntry]):
    """``MemoryEntry`` records by id (the ``MemoryEntryStore`` protocol)."""

    def list_all(self) -> list[MemoryEntry]:
        return list(self._records.values())
