"""Data model, protocols, default tokenizer and in-memory stores of retrieval.pipeline."""

import hashlib
import uuid
from datetime import UTC, datetime

import pytest
from pydantic import ValidationError

from retrieval.pipeline import (
    AsyncReranker,
    AsyncRetriever,
    ContextItem,
    ContextStore,
    DenseRetriever,
    InMemoryContextStore,
    InMemoryEntryStore,
    InMemoryVectorStore,
    LateInteractionRetriever,
    MemoryEntry,
    MemoryEntryStore,
    QueryBundle,
    RegexTokenCounter,
    Reranker,
    Retriever,
    RetrieverError,
    SourceType,
    SparseRetriever,
    Tokenizer,
    TokenLevelEncoder,
    VectorStore,
)


def test_context_item_defaults():
    item = ContextItem(content="hello")
    assert uuid.UUID(item.id).version == 4
    assert (item.score, item.priority, item.token_count, item.metadata) == (0.0, 5, 0, {})
    assert item.source is SourceType.RETRIEVAL
    assert item.created_at.tzinfo is not None
    assert ContextItem(content="x").id != item.id


@pytest.mark.parametrize(
    "field, value",
    [("score", 1.01), ("score", -0.01), ("priority", 0), ("priority", 11), ("token_count", -1)],
)
def test_context_item_rejects_out_of_range(field, value):
    with pytest.raises(ValueError, match=field):
        ContextItem(content="x", **{field: value})


def test_context_item_bounds_are_inclusive():
    assert ContextItem(content="x", score=1.0, priority=10).priority == 10
    assert ContextItem(content="x", score=0.0, priority=1).score == 0.0


def test_context_item_is_frozen_and_copies():
    item = ContextItem(content="x", score=0.2)
    with pytest.raises(ValidationError):
        item.score = 0.5
    copy = item.model_copy(update={"score": 0.5})
    assert (item.score, copy.score, copy.id) == (0.2, 0.5, item.id)


def test_source_type_members():
    assert {s.name for s in SourceType} == {"RETRIEVAL", "MEMORY", "SYSTEM", "USER", "TOOL", "CONVERSATION"}


def test_query_bundle_defaults_and_frozen():
    q = QueryBundle(query_str="q")
    assert (q.embedding, q.metadata) == (None, {})
    assert QueryBundle(query_str="q", embedding=[1.0, 2.0]).embedding == [1.0, 2.0]
    with pytest.raises(ValidationError):
        q.query_str = "other"


def test_memory_entry_fields_and_defaults_of_the_documented_library():
    """Seed 004 lists ``MemoryEntry`` without fields; these are the documented library's (issue 18)."""
    before = datetime.now(UTC)
    entry = MemoryEntry(content="likes apples")
    assert (entry.relevance_score, entry.access_count, entry.memory_type) == (0.5, 0, "semantic")
    assert (entry.tags, entry.metadata, entry.user_id, entry.session_id, entry.expires_at) == ([], {}, None, None, None)
    assert before <= entry.last_accessed <= datetime.now(UTC) and entry.created_at.tzinfo is not None
    assert entry.updated_at.tzinfo is not None and len(entry.id) == 36
    assert entry.content_hash == hashlib.md5(b"likes apples").hexdigest()  # computed from the content
    assert MemoryEntry(content="x", content_hash="given").content_hash == "given"
    assert MemoryEntry(content="m", relevance_score=1.0).relevance_score == 1.0
    with pytest.raises(ValueError, match="relevance_score"):
        MemoryEntry(content="m", relevance_score=1.5)
    with pytest.raises(ValueError, match="access_count"):
        MemoryEntry(content="m", access_count=-1)
    with pytest.raises(ValidationError):
        MemoryEntry(content="m", importance=0.9)  # the old name is an unknown field, not silently dropped


def test_protocols_are_runtime_checkable():
    class Enc:
        def encode_tokens(self, text):
            return [[1.0]]

    dense = DenseRetriever(InMemoryVectorStore(), InMemoryContextStore(), embed_fn=lambda t: [1.0])
    assert isinstance(dense, Retriever) and isinstance(SparseRetriever(), Retriever)
    assert isinstance(LateInteractionRetriever(dense, Enc()), Retriever)
    assert isinstance(Enc(), TokenLevelEncoder)
    assert not isinstance(Enc(), Retriever)
    assert not isinstance(dense, AsyncRetriever) and not isinstance(dense, Reranker)
    assert not isinstance(dense, AsyncReranker)
    assert isinstance(InMemoryVectorStore(), VectorStore)
    assert isinstance(InMemoryContextStore(), ContextStore)
    assert isinstance(InMemoryEntryStore(), MemoryEntryStore)
    assert isinstance(RegexTokenCounter(), Tokenizer)


def test_default_token_counter_uses_the_project_tokenizer():
    # tokens are word runs of 2+ characters: "a" and "!" do not count
    assert RegexTokenCounter().count_tokens("A cat, a DOG! تفسير القرآن") == 4


def test_vector_store_search_order_and_dimension_errors():
    store = InMemoryVectorStore()
    store.add_embedding("x", [1.0, 0.0])
    store.add_embedding("y", [1.0, 1.0])
    store.add_embedding("z", [-1.0, 0.0])
    hits = store.search([1.0, 0.0], top_k=2)
    assert [h[0] for h in hits] == ["x", "y"]
    assert hits[1][1] == pytest.approx(2**-0.5)
    with pytest.raises(RetrieverError, match=r"'w'.*dimension 3"):
        store.add_embedding("w", [1.0, 0.0, 0.0])
    with pytest.raises(RetrieverError, match="query embedding has dimension 1"):
        store.search([1.0])
    assert store.delete("x") and not store.delete("x")
    assert [h[0] for h in store.search([1.0, 0.0])] == ["y", "z"]


def test_context_and_entry_stores():
    items = InMemoryContextStore()
    a = ContextItem(id="a", content="one")
    items.add(a)
    items.add(ContextItem(id="b", content="two"))
    assert items.get("a") is a and items.get("zz") is None
    assert [i.id for i in items.get_all()] == ["a", "b"]
    assert items.delete("a") and items.get("a") is None
    entries = InMemoryEntryStore()
    entries.add(MemoryEntry(id="m", content="x"))
    assert entries.get("m").content == "x" and [e.id for e in entries.list_all()] == ["m"]
    assert entries.delete("m") and entries.list_all() == []
