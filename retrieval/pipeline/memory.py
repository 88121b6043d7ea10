"""Memory retrieval: composite of recency (decay), relevance (embeddings) and importance.

``composite = alpha * recency + beta * relevance + gamma * importance`` (Park et al., 2023,
"Generative Agents"), with ``recency = MemoryDecay.compute(age in days)``.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

from retrieval.core import cosine
from retrieval.pipeline.models import ContextItem, MemoryEntry, QueryBundle, SourceType
from retrieval.pipeline.protocols import MemoryEntryStore, VectorStore
from retrieval.pipeline.scoring import clip_unit, cut
from retrieval.pipeline.tokens import RegexTokenCounter

SECONDS_PER_DAY = 86_400.0


class MemoryDecay:
    """Exponential decay ``0.5 ** (age_days / half_life_days)``: 1.0 now, 0.5 after one half-life.

    A negative age (entry dated in the future) counts as 0. A custom decay is any object with the
    same ``compute(age_days) -> float`` method returning a value in [0, 1].
    """

    def __init__(self, half_life_days: float = 7.0) -> None:
        if half_life_days <= 0:
            raise ValueError(f"half_life_days must be > 0, got {half_life_days}")
        self.half_life_days = half_life_days

    def compute(self, age_days: float) -> float:
        return 0.5 ** (max(age_days, 0.0) / self.half_life_days)


class ScoredMemoryRetriever:
    """Ranks memory entries by the weighted composite of recency, relevance and importance.

    - Relevance: with ``embed_fn``, the query is embedded; with ``vector_store`` the store's
      similarity is used, else the cosine with ``entry.embedding``; without ``embed_fn`` (or for an
      entry with no embedding) relevance is 0. Similarities are clipped to [0, 1].
    - Filters ``user_id`` / ``memory_type`` keep exact matches only.
    - Ties keep the store's order. ``clock`` (keyword, default now in UTC) fixes "now" for tests.
    Errors: negative weights, or all three zero -> ``ValueError``.
    """

    def __init__(
        self,
        store: MemoryEntryStore,
        embed_fn: Callable[[str], list[float]] | None = None,
        vector_store: VectorStore | None = None,
        decay: MemoryDecay | None = None,
        alpha: float = 0.3,
        beta: float = 0.5,
        gamma: float = 0.2,
        *,
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        if min(alpha, beta, gamma) < 0 or alpha + beta + gamma == 0:
            raise ValueError(f"alpha, beta, gamma must be >= 0 and not all 0, got {alpha}, {beta}, {gamma}")
        self.store = store
        self.embed_fn = embed_fn
        self.vector_store = vector_store
        self.decay = decay or MemoryDecay()
        self.alpha, self.beta, self.gamma = alpha, beta, gamma
        self.clock = clock or (lambda: datetime.now(UTC))

    def add_entry(self, entry: MemoryEntry) -> None:
        """Store ``entry``; embed it with ``embed_fn`` if it has no embedding; index it in vector_store."""
        if entry.embedding is None and self.embed_fn is not None:
            entry = entry.model_copy(update={"embedding": self.embed_fn(entry.content)})
        self.store.add(entry)
        if self.vector_store is not None and entry.embedding is not None:
            self.vector_store.add_embedding(entry.id, entry.embedding)

    def _relevance(self, query: str, entries: list[MemoryEntry]) -> dict[str, float]:
        if self.embed_fn is None or not entries:
            return {}
        query_embedding = self.embed_fn(query)
        if self.vector_store is not None:
            return dict(self.vector_store.search(query_embedding, len(self.store.list_all())))
        return {e.id: cosine(query_embedding, e.embedding) for e in entries if e.embedding is not None}

    def score_entries(
        self, query: str, top_k: int = 5, *, user_id: str | None = None, memory_type: str | None = None
    ) -> list[tuple[MemoryEntry, dict[str, float]]]:
        """Best ``top_k`` entries with their signals: ``recency, relevance, importance, composite``."""
        entries = [
            e
            for e in self.store.list_all()
            if (user_id is None or e.user_id == user_id) and (memory_type is None or e.memory_type == memory_type)
        ]
        relevance = self._relevance(query, entries)
        now = self.clock()
        scored = []
        for entry in entries:
            signals = {
                "recency": self.decay.compute((now - entry.created_at).total_seconds() / SECONDS_PER_DAY),
                "relevance": clip_unit(relevance.get(entry.id, 0.0)),
                "importance": entry.importance,
            }
            signals["composite"] = (
                self.alpha * signals["recency"] + self.beta * signals["relevance"] + self.gamma * signals["importance"]
            )
            scored.append((entry, signals))
        scored.sort(key=lambda pair: -pair[1]["composite"])
        return cut(scored, top_k)

    def retrieve(
        self, query: str, top_k: int = 5, *, user_id: str | None = None, memory_type: str | None = None
    ) -> list[MemoryEntry]:
        """Best ``top_k`` entries by composite score, after the optional filters."""
        return [e for e, _ in self.score_entries(query, top_k, user_id=user_id, memory_type=memory_type)]

    def as_retriever(self) -> MemoryRetrieverAdapter:
        """This retriever behind the ``Retriever`` protocol."""
        return MemoryRetrieverAdapter(self)


class MemoryRetrieverAdapter:
    """``Retriever`` view of a ``ScoredMemoryRetriever``: entries become ``ContextItem``s.

    Items: same id, content and created_at, ``source=SourceType.MEMORY``, ``priority=7``, ``score`` =
    composite / (alpha + beta + gamma) (equal to the composite for the default weights, in [0, 1]
    for any weights); signals, ``user_id``, ``memory_type`` in metadata. ``query.metadata["user_id"]``
    and ``["memory_type"]``, when present, are passed on as filters.
    """

    def __init__(self, retriever: ScoredMemoryRetriever) -> None:
        self.retriever = retriever
        self._tokens = RegexTokenCounter()

    def retrieve(self, query: QueryBundle, top_k: int = 10) -> list[ContextItem]:
        r = self.retriever
        total_weight = r.alpha + r.beta + r.gamma
        scored = r.score_entries(
            query.query_str,
            top_k,
            user_id=query.metadata.get("user_id"),
            memory_type=query.metadata.get("memory_type"),
        )
        return [
            ContextItem(
                id=entry.id,
                content=entry.content,
                source=SourceType.MEMORY,
                score=clip_unit(signals["composite"] / total_weight),
                priority=7,
                token_count=self._tokens.count_tokens(entry.content),
                metadata={
                    **entry.metadata,
                    **signals,
                    "user_id": entry.user_id,
                    "memory_type": entry.memory_type,
                    "retrieval_method": "memory",
                },
                created_at=entry.created_at,
            )
            for entry, signals in scored
        ]
