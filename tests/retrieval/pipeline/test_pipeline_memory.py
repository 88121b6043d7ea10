"""Memory decay, composite scoring, filters, add_entry and the Retriever adapter, computed by hand."""

import math
from datetime import UTC, datetime, timedelta

import pytest

from retrieval.pipeline import (
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

NOW = datetime(2026, 1, 15, 12, 0, tzinfo=UTC)
R2 = 1 / math.sqrt(2)


def entries():
    return [
        MemoryEntry(id="today", content="fresh note", importance=0.5, created_at=NOW, embedding=[1.0, 0.0],
                    user_id="u1", memory_type="episodic"),
        MemoryEntry(id="week", content="week old", importance=1.0, created_at=NOW - timedelta(days=7),
                    embedding=[0.0, 1.0], user_id="u2", memory_type="semantic"),
        MemoryEntry(id="fortnight", content="two weeks", importance=0.0, created_at=NOW - timedelta(days=14),
                    embedding=[1.0, 1.0], user_id="u1", memory_type="semantic"),
    ]  # fmt: skip


def retriever(embed_fn=lambda text: [1.0, 0.0], **kwargs):
    store = InMemoryEntryStore()
    for entry in entries():
        store.add(entry)
    return ScoredMemoryRetriever(store, embed_fn=embed_fn, clock=lambda: NOW, **kwargs)


def test_decay_half_life_seven_days():
    decay = MemoryDecay()
    assert [decay.compute(d) for d in (0, 7, 14)] == pytest.approx([1.0, 0.5, 0.25])
    assert decay.compute(-3) == 1.0  # future-dated entries count as new
    assert MemoryDecay(half_life_days=1).compute(2) == pytest.approx(0.25)
    with pytest.raises(ValueError, match="half_life_days"):
        MemoryDecay(0)


# composite = 0.3 recency + 0.5 relevance + 0.2 importance, query embedding [1, 0]
COMPOSITE = {
    "today": 0.3 * 1 + 0.5 * 1 + 0.2 * 0.5,
    "week": 0.3 * 0.5 + 0.5 * 0 + 0.2 * 1.0,
    "fortnight": 0.3 * 0.25 + 0.5 * R2 + 0.2 * 0,
}


def test_composite_ranking_with_entry_embeddings():
    scored = retriever().score_entries("q", top_k=3)
    assert [e.id for e, _ in scored] == ["today", "fortnight", "week"]
    assert [s["composite"] for _, s in scored] == pytest.approx([COMPOSITE[i] for i in ("today", "fortnight", "week")])
    assert [e.id for e in retriever().retrieve("q")] == ["today", "fortnight", "week"]
    assert [e.id for e in retriever().retrieve("q", top_k=1)] == ["today"]


def test_without_embed_fn_relevance_is_zero():
    scored = retriever(embed_fn=None).score_entries("q")
    assert {e.id: s["composite"] for e, s in scored} == pytest.approx(
        {"today": 0.3 + 0.1, "week": 0.15 + 0.2, "fortnight": 0.075}
    )


def test_filters():
    assert [e.id for e in retriever().retrieve("q", user_id="u1")] == ["today", "fortnight"]
    assert [e.id for e in retriever().retrieve("q", memory_type="semantic")] == ["fortnight", "week"]
    assert [e.id for e in retriever().retrieve("q", user_id="u1", memory_type="semantic")] == ["fortnight"]
    assert retriever().retrieve("q", user_id="nobody") == []


def test_custom_weights_and_decay():
    scored = retriever(alpha=1.0, beta=0.0, gamma=0.0, decay=MemoryDecay(14)).score_entries("q")
    assert [(e.id, s["recency"]) for e, s in scored] == [("today", 1.0), ("week", pytest.approx(R2)),
                                                        ("fortnight", 0.5)]  # fmt: skip
    with pytest.raises(ValueError, match="alpha, beta, gamma"):
        retriever(alpha=-0.1)
    with pytest.raises(ValueError, match="not all 0"):
        retriever(alpha=0, beta=0, gamma=0)


def test_add_entry_embeds_and_indexes_in_vector_store():
    vectors = InMemoryVectorStore()
    embed = {"apples": [1.0, 0.0], "pears": [0.0, 1.0], "query": [0.0, 1.0]}.get
    memory = ScoredMemoryRetriever(InMemoryEntryStore(), embed_fn=embed, vector_store=vectors, clock=lambda: NOW)
    memory.add_entry(MemoryEntry(id="a", content="apples", importance=1.0, created_at=NOW))
    memory.add_entry(MemoryEntry(id="p", content="pears", importance=0.0, created_at=NOW))
    assert memory.store.get("a").embedding == [1.0, 0.0] and len(vectors) == 2
    scored = memory.score_entries("query")
    # a: 0.3 + 0 + 0.2 = 0.5; p: 0.3 + 0.5 + 0 = 0.8
    assert [(e.id, s["composite"]) for e, s in scored] == [
        ("p", pytest.approx(0.8)),
        ("a", pytest.approx(0.5)),
    ]


def test_adapter_builds_memory_context_items():
    adapter = retriever().as_retriever()
    assert isinstance(adapter, MemoryRetrieverAdapter) and isinstance(adapter, Retriever)
    items = adapter.retrieve(QueryBundle(query_str="q"), top_k=2)
    assert [i.id for i in items] == ["today", "fortnight"]
    assert all(i.source is SourceType.MEMORY and i.priority == 7 for i in items)
    assert [i.score for i in items] == pytest.approx([COMPOSITE["today"], COMPOSITE["fortnight"]])
    assert items[0].content == "fresh note" and items[0].created_at == NOW and items[0].token_count == 2
    assert items[1].metadata["memory_type"] == "semantic" and items[1].metadata["recency"] == 0.25
    filtered = adapter.retrieve(QueryBundle(query_str="q", metadata={"user_id": "u2"}))
    assert [i.id for i in filtered] == ["week"]


def test_adapter_scores_stay_in_unit_interval_for_any_weights():
    items = retriever(alpha=1.0, beta=1.0, gamma=2.0).as_retriever().retrieve(QueryBundle(query_str="q"))
    assert items[0].id == "today"
    assert items[0].score == pytest.approx((1 + 1 + 2 * 0.5) / 4)
    assert items[0].metadata["composite"] == pytest.approx(3.0)
