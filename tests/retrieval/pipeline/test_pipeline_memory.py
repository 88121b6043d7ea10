"""The memory model of the documented library (issue 18): recency, relevance, importance, by hand."""

import math
from datetime import UTC, datetime, timedelta
from enum import StrEnum

import pytest

from retrieval.pipeline import (
    ExponentialDecay,
    InMemoryEntryStore,
    InMemoryVectorStore,
    MemoryDecay,
    MemoryEntry,
    MemoryRetrieverAdapter,
    QueryBundle,
    Retriever,
    ScoredMemoryRetriever,
    SourceType,
)
from retrieval.pipeline.memory import keyword_overlap

NOW = datetime(2026, 1, 15, 12, 0, tzinfo=UTC)
R2 = 1 / math.sqrt(2)


def entries():
    """created_at is 30 days back for all: recency comes from last_accessed only."""
    old = NOW - timedelta(days=30)
    return [
        MemoryEntry(id="fresh", content="Solar panels on the roof", relevance_score=0.5, last_accessed=NOW,
                    created_at=old, user_id="u1", memory_type="episodic"),
        MemoryEntry(id="week", content="wind turbines", relevance_score=1.0, last_accessed=NOW - timedelta(days=7),
                    created_at=old, user_id="u2"),
        MemoryEntry(id="fortnight", content="solar farms and WIND", relevance_score=0.0,
                    last_accessed=NOW - timedelta(days=14), created_at=old, user_id="u1"),
        MemoryEntry(id="future", content="tidal", relevance_score=0.2, last_accessed=NOW + timedelta(days=3),
                    created_at=old, user_id="u2"),
        MemoryEntry(id="expired", content="solar wind", relevance_score=1.0, last_accessed=NOW, created_at=old,
                    expires_at=NOW),
    ]  # fmt: skip


def retriever(**kwargs):
    store = InMemoryEntryStore()
    for entry in entries():
        store.add(entry)
    return ScoredMemoryRetriever(store, clock=lambda: NOW, **kwargs)


QUERY = "Solar wind solar"  # unique lower-cased words: {"solar", "wind"}
# recency (7-day half-life of last_accessed), keyword relevance, importance = relevance_score
SIGNALS = {
    "fresh": (1.0, 0.5, 0.5),  # "solar" occurs, "wind" does not
    "week": (0.5, 0.5, 1.0),  # "wind" only
    "fortnight": (0.25, 1.0, 0.0),  # both ("WIND" lower-cased)
    "future": (1.0, 0.0, 0.2),  # last accessed in the future: age 0
}
# composite = 0.3 recency + 0.5 relevance + 0.2 importance
COMPOSITE = {"fresh": 0.65, "week": 0.6, "fortnight": 0.575, "future": 0.34}


def test_composite_of_recency_keyword_relevance_and_relevance_score():
    scored = retriever().score_entries(QUERY, top_k=10)
    assert [e.id for e, _ in scored] == ["fresh", "week", "fortnight", "future"]  # "expired" skipped
    for entry, signals in scored:
        recency, relevance, importance = SIGNALS[entry.id]
        assert signals == pytest.approx(
            {"recency": recency, "relevance": relevance, "importance": importance, "composite": COMPOSITE[entry.id]}
        )
    assert [e.id for e in retriever().retrieve(QUERY)] == ["fresh", "week", "fortnight", "future"]
    assert [e.id for e in retriever().retrieve(QUERY, top_k=2)] == ["fresh", "week"]


def test_keyword_overlap_is_the_share_of_unique_query_words_found_in_the_content():
    assert keyword_overlap("Sun PANEL moon", "sunny solar panels") == pytest.approx(2 / 3)  # substrings count
    assert keyword_overlap("cat cat dog", "a cat") == 0.5  # repeated query words count once
    assert keyword_overlap("", "anything") == 0.0 and keyword_overlap("   ", "x") == 0.0


def test_expiry_is_checked_against_now():
    store = InMemoryEntryStore()
    store.add(MemoryEntry(id="at-now", content="a", expires_at=NOW))
    store.add(MemoryEntry(id="later", content="b", expires_at=NOW + timedelta(seconds=1)))
    store.add(MemoryEntry(id="naive", content="c", expires_at=datetime(2026, 1, 15, 11, 59)))  # naive = UTC
    assert [e.id for e in ScoredMemoryRetriever(store, clock=lambda: NOW).retrieve("q")] == ["later"]


def test_default_decay_is_a_seven_day_half_life_of_last_accessed():
    decay = ExponentialDecay(clock=lambda: NOW)
    assert isinstance(decay, MemoryDecay)
    ages = [0, 3.5, 7, 14, -2]
    retention = [decay.compute_retention(MemoryEntry(content="x", last_accessed=NOW - timedelta(days=d))) for d in ages]
    assert retention == pytest.approx([1.0, R2, 0.5, 0.25, 1.0])  # exp(-ln 2 * age / 7 days); future = age 0
    naive = MemoryEntry(content="x", last_accessed=datetime(2026, 1, 8, 12, 0))  # naive: read as UTC
    assert decay.compute_retention(naive) == pytest.approx(0.5)
    assert ExponentialDecay(half_life_days=1, clock=lambda: NOW).compute_retention(
        MemoryEntry(content="x", last_accessed=NOW - timedelta(days=2))
    ) == pytest.approx(0.25)
    with pytest.raises(ValueError, match="half_life_days"):
        ExponentialDecay(0)


def test_custom_decay_gets_the_entry():
    class ByAccessCount:
        def compute_retention(self, entry):
            return min(1.0, entry.access_count / 10)

    store = InMemoryEntryStore()
    store.add(MemoryEntry(id="rare", content="x", access_count=1, relevance_score=0.0))
    store.add(MemoryEntry(id="often", content="x", access_count=8, relevance_score=0.0))
    memory = ScoredMemoryRetriever(store, decay=ByAccessCount(), alpha=1.0, beta=0.0, gamma=0.0)
    assert [(e.id, s["recency"]) for e, s in memory.score_entries("q")] == [("often", 0.8), ("rare", 0.1)]


def test_weights_are_checked():
    with pytest.raises(ValueError, match="alpha, beta, gamma"):
        retriever(alpha=-0.1)
    with pytest.raises(ValueError, match="not all 0"):
        retriever(alpha=0, beta=0, gamma=0)


def test_filters_user_id_and_memory_type_as_strings():
    class Kind(StrEnum):
        SEMANTIC = "semantic"

    assert [e.id for e in retriever().retrieve(QUERY, user_id="u1")] == ["fresh", "fortnight"]
    assert [e.id for e in retriever().retrieve(QUERY, memory_type="semantic")] == ["week", "fortnight", "future"]
    assert [e.id for e in retriever().retrieve(QUERY, memory_type=Kind.SEMANTIC)] == ["week", "fortnight", "future"]
    assert [e.id for e in retriever().retrieve(QUERY, user_id="u1", memory_type="episodic")] == ["fresh"]
    assert retriever().retrieve(QUERY, user_id="nobody") == []


VECTORS = {"alpha": [1.0, 0.0], "beta": [1.0, 1.0], "gamma": [0.0, 1.0], "delta": [-1.0, 0.0], "DELTA": [1.0, 0.0]}


def vector_memory(embed_fn=VECTORS.get):
    vectors = InMemoryVectorStore()
    memory = ScoredMemoryRetriever(InMemoryEntryStore(), embed_fn=embed_fn, vector_store=vectors, clock=lambda: NOW)
    for name, importance in [("alpha", 0.0), ("beta", 0.0), ("gamma", 0.0), ("delta", 1.0)]:
        memory.add_entry(MemoryEntry(id=name, content=name, relevance_score=importance, last_accessed=NOW))
    return memory, vectors


def test_add_entry_indexes_the_content_embedding():
    memory, vectors = vector_memory()
    assert len(vectors) == 4 and vectors.search([-1.0, 0.0], 1) == [("delta", 1.0)]
    assert [e.id for e in memory.store.list_all()] == ["alpha", "beta", "gamma", "delta"]


def test_vector_relevance_for_the_top_k_times_3_candidates_keyword_overlap_for_the_rest():
    memory, _ = vector_memory()
    # Query "DELTA" embeds to [1, 0]: cosines alpha 1, beta 1/sqrt2, gamma 0, delta -1.
    # top_k=1 -> 3 candidates (alpha, beta, gamma); delta is not among them and falls back to the
    # keyword overlap of "delta" in "delta" = 1.0: composite 0.3 + 0.5 * 1.0 + 0.2 * 1.0 = 1.0.
    [(entry, signals)] = memory.score_entries("DELTA", top_k=1)
    assert entry.id == "delta" and signals["relevance"] == 1.0 and signals["composite"] == pytest.approx(1.0)
    # top_k=4 -> 12 candidates: delta is one, its similarity -1 clipped to 0: composite 0.3 + 0.2 = 0.5.
    scored = memory.score_entries("DELTA", top_k=4)
    assert {e.id: s["relevance"] for e, s in scored} == pytest.approx({"alpha": 1.0, "beta": R2, "gamma": 0.0,
                                                                       "delta": 0.0})  # fmt: skip
    assert [e.id for e, _ in scored] == ["alpha", "beta", "delta", "gamma"]  # 0.8, 0.654, 0.5, 0.3


def test_embed_fn_without_vector_store_uses_keyword_overlap():
    def never(text):
        raise AssertionError("embed_fn is only used with a vector_store")

    scored = retriever(embed_fn=never).score_entries(QUERY, top_k=10)
    assert {e.id: s["composite"] for e, s in scored} == pytest.approx(COMPOSITE)


def test_adapter_items_carry_source_priority_and_relevance_score():
    adapter = retriever().as_retriever()
    assert isinstance(adapter, MemoryRetrieverAdapter) and isinstance(adapter, Retriever)
    items = adapter.retrieve(QueryBundle(query_str=QUERY), top_k=3)
    assert [i.id for i in items] == ["fresh", "week", "fortnight"]  # by composite
    assert all(i.source is SourceType.MEMORY and i.priority == 7 for i in items)
    assert [i.score for i in items] == [0.5, 1.0, 0.0]  # the entries' relevance_score, not the composite
    assert items[0].content == "Solar panels on the roof" and items[0].token_count == 5
    assert items[0].metadata["memory_type"] == "episodic" and items[0].metadata["memory_id"] == "fresh"
    assert items[0].metadata["composite"] == pytest.approx(0.65)
    # Seed 004's adapter takes (query, top_k) only: query metadata is not a filter.
    unfiltered = adapter.retrieve(QueryBundle(query_str=QUERY, metadata={"user_id": "u2"}), top_k=3)
    assert [i.id for i in unfiltered] == ["fresh", "week", "fortnight"]
