"""Memory retrieval: composite of recency, relevance and importance, as the documented library computes it.

``composite = alpha * recency + beta * relevance + gamma * importance`` (Park et al., 2023, "Generative
Agents"). Seed 004 gives the signature, the weights' defaults and "Defaults to 7-day half-life"; the
rest is resolved as the library it documents does (issue 18):

- recency: ``decay.compute_retention(entry)``, by default ``ExponentialDecay``: a 7-day half-life of the
  time since ``entry.last_accessed`` (not ``created_at``);
- relevance: with ``embed_fn`` *and* ``vector_store``, the store's similarity (clipped to [0, 1]) for
  the ``top_k * 3`` candidates it returns; every other entry gets ``keyword_overlap``;
- importance: ``entry.relevance_score``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from datetime import UTC, datetime

from retrieval.pipeline.models import ContextItem, MemoryEntry, QueryBundle, SourceType
from retrieval.pipeline.protocols import MemoryDecay, MemoryEntryStore, VectorStore
from retrieval.pipeline.scoring import clip_unit, cut
from retrieval.pipeline.tokens import RegexTokenCounter

SECONDS_PER_DAY = 86_400.0
HALF_LIFE_DAYS = 7.0  # seed 004: "Defaults to 7-day half-life"
CANDIDATES_PER_RESULT = 3  # the vector store is asked for top_k * 3 candidates


def _utc_now() -> datetime:
    return datetime.now(UTC)


def as_utc(moment: datetime) -> datetime:
    """``moment`` made timezone-aware: a naive datetime is read as UTC (as the library reads ``last_accessed``)."""
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def keyword_overlap(query: str, content: str) -> float:
    """Share of the query's distinct lower-cased whitespace words that occur (as substrings) in the content.

    The library's relevance fallback: ``"sun"`` occurs in ``"sunny"``; a repeated query word counts once;
    a query without words scores 0.0.
    """
    words = set(query.lower().split())
    if not words:
        return 0.0
    text = content.lower()
    return sum(word in text for word in words) / len(words)


class ExponentialDecay:
    """Retention ``exp(-ln 2 * age / half_life)``, age = now - ``entry.last_accessed`` (0 if in the future).

    The default ``MemoryDecay`` of ``ScoredMemoryRetriever``: 1.0 just accessed, 0.5 after one half-life.
    ``clock`` (default now in UTC) fixes "now" for tests.
    """

    def __init__(self, half_life_days: float = HALF_LIFE_DAYS, *, clock: Callable[[], datetime] | None = None) -> None:
        if half_life_days <= 0:
            raise ValueError(f"half_life_days must be > 0, got {half_life_days}")
        self.half_life_days = half_life_days
        self.clock = clock or _utc_now

    def compute_retention(self, entry: MemoryEntry) -> float:
        age_seconds = max(0.0, (as_utc(self.clock()) - as_utc(entry.last_accessed)).total_seconds())
        return math.exp(-math.log(2) * age_seconds / (self.half_life_days * SECONDS_PER_DAY))


class ScoredMemoryRetriever:
    """Ranks memory entries by the weighted composite of recency, relevance and importance (module docstring).

    - Entries with ``expires_at <= now`` are skipped; ``user_id`` keeps equal ids, ``memory_type``
      compares as strings (``str(entry.memory_type) == str(memory_type)``).
    - A custom ``decay`` is any ``MemoryDecay`` (``compute_retention(entry) -> float`` in [0, 1]); its
      value is used as returned.
    - Sorted by composite descending; ties keep the store's order. ``clock`` (keyword, default now in
      UTC) fixes "now" for expiry and the default decay.
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
        self.clock = clock or _utc_now
        self.decay = decay if decay is not None else ExponentialDecay(clock=self.clock)
        self.alpha, self.beta, self.gamma = alpha, beta, gamma

    def add_entry(self, entry: MemoryEntry) -> None:
        """Store ``entry``; with ``embed_fn`` and ``vector_store``, also index ``embed_fn(entry.content)``."""
        self.store.add(entry)
        if self.embed_fn is not None and self.vector_store is not None:
            self.vector_store.add_embedding(entry.id, self.embed_fn(entry.content))

    def _vector_similarities(self, query: str, top_k: int) -> dict[str, float]:
        if self.embed_fn is None or self.vector_store is None:
            return {}
        return dict(self.vector_store.search(self.embed_fn(query), top_k * CANDIDATES_PER_RESULT))

    def _kept(self, entry: MemoryEntry, now: datetime, user_id: str | None, memory_type: str | None) -> bool:
        if entry.expires_at is not None and as_utc(entry.expires_at) <= now:
            return False
        if user_id is not None and entry.user_id != user_id:
            return False
        return memory_type is None or str(entry.memory_type) == str(memory_type)

    def score_entries(
        self, query: str, top_k: int = 5, *, user_id: str | None = None, memory_type: str | None = None
    ) -> list[tuple[MemoryEntry, dict[str, float]]]:
        """Best ``top_k`` entries with their signals: ``recency, relevance, importance, composite``."""
        similarities = self._vector_similarities(query, top_k)
        now = as_utc(self.clock())
        scored = []
        for entry in self.store.list_all():
            if not self._kept(entry, now, user_id, memory_type):
                continue
            if entry.id in similarities:
                relevance = clip_unit(similarities[entry.id])
            else:
                relevance = keyword_overlap(query, entry.content)
            signals = {
                "recency": float(self.decay.compute_retention(entry)),
                "relevance": relevance,
                "importance": entry.relevance_score,
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

    Seed 004: "Convert MemoryEntry to ContextItem with source=MEMORY, priority=7"; as the library,
    ``score`` is the entry's ``relevance_score`` (the order is the composite's) and no filter is applied.
    Items keep the entry's id, content and created_at; metadata holds ``memory_type``, ``memory_id``,
    ``user_id`` and the four signals.
    """

    def __init__(self, retriever: ScoredMemoryRetriever) -> None:
        self.retriever = retriever
        self._tokens = RegexTokenCounter()

    def retrieve(self, query: QueryBundle, top_k: int = 10) -> list[ContextItem]:
        return [
            ContextItem(
                id=entry.id,
                content=entry.content,
                source=SourceType.MEMORY,
                score=entry.relevance_score,
                priority=7,
                token_count=self._tokens.count_tokens(entry.content),
                metadata={
                    **entry.metadata,
                    **signals,
                    "memory_type": entry.memory_type,
                    "memory_id": entry.id,
                    "user_id": entry.user_id,
                    "retrieval_method": "memory",
                },
                created_at=entry.created_at,
            )
            for entry, signals in self.retriever.score_entries(query.query_str, top_k)
        ]
