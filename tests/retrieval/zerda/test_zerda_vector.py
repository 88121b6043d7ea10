"""VectorRetriever: the three modes and their order, indexing, the query cache, and every fail-safe path."""

import logging
import math

import numpy as np
import pytest

from retrieval.zerda import ContextEngineConfig, DocumentChunk, RetrieverConfig, ScoredChunk, VectorRetriever

LOGGER = "retrieval.zerda.retriever"

VECTORS = {
    "east": [1.0, 0.0],
    "north-east": [1.0, 1.0],
    "north": [0.0, 1.0],
    "west": [-1.0, 0.0],
    "query east": [2.0, 0.0],
}


class CountingEmbed:
    """embed_fn over a fixed table, recording every text it is asked for."""

    def __init__(self, fail_on: str | None = None):
        self.calls: list[str] = []
        self.fail_on = fail_on

    def __call__(self, text: str) -> list[float]:
        self.calls.append(text)
        if text == self.fail_on:
            raise RuntimeError(f"embedding service down for {text!r}")
        return VECTORS[text]


def _chunks() -> list[DocumentChunk]:
    return [DocumentChunk(name, doc_id=name) for name in ("east", "north-east", "north", "west")]


def _config(**retriever) -> ContextEngineConfig:
    return ContextEngineConfig(retriever=RetrieverConfig(**retriever))


class FakeVectorDB:
    """A backend of an unknown class name with a `filters` kwarg, recording calls."""

    def __init__(self, results=None, error: Exception | None = None):
        self.results = results or []
        self.error = error
        self.calls: list[tuple] = []
        self.added: list = []

    def search(self, query, top_k=5, score_threshold=None, filters=None):
        self.calls.append((query, top_k, score_threshold, filters))
        if self.error:
            raise self.error
        return self.results

    def add(self, chunks, embeddings=None):
        self.added.extend(chunks)

    def __len__(self):
        return len(self.added)


class FakeAdapter:
    """LangChain VectorStore-shaped adapter."""

    def __init__(self, results=None, error: Exception | None = None):
        self.results = results or []
        self.error = error
        self.calls: list[tuple] = []

    def similarity_search_with_score(self, query, k=4, filter=None):
        self.calls.append((query, k, filter))
        if self.error:
            raise self.error
        return self.results


# --- in-memory mode ---------------------------------------------------------------------------


def test_in_memory_cosine_ranking_threshold_and_top_k():
    retriever = VectorRetriever(_config())
    retriever.index_chunks(_chunks(), embed_fn=CountingEmbed())
    hits = retriever.retrieve("query east", top_k=10)
    # cos with (2,0): east 1, north-east 1/sqrt2, north 0 (kept: 0 >= min 0.0), west -1 (dropped)
    assert [h.doc_id for h in hits] == ["east", "north-east", "north"]
    assert [h.vector_score for h in hits] == pytest.approx([1.0, 1 / math.sqrt(2), 0.0])
    assert all(h.composite_score == h.vector_score and h.keyword_score == 0.0 for h in hits)
    assert [h.doc_id for h in retriever.retrieve("query east", top_k=2)] == ["east", "north-east"]


def test_in_memory_min_vector_score_drops_lower_similarities():
    retriever = VectorRetriever(_config(min_vector_score=0.75))
    retriever.index_chunks(_chunks(), embed_fn=CountingEmbed())
    assert [h.doc_id for h in retriever.retrieve("query east", top_k=10)] == ["east"]


def test_in_memory_ignores_filters():
    retriever = VectorRetriever(_config())
    retriever.index_chunks(_chunks(), embed_fn=CountingEmbed())
    filtered = retriever.retrieve("query east", top_k=10, filters={"doc_id": "north"})
    assert [h.doc_id for h in filtered] == ["east", "north-east", "north"]


def test_in_memory_from_constructor_arguments():
    chunks = _chunks()
    embeddings = [np.array(VECTORS[c.text]) for c in chunks]
    retriever = VectorRetriever(_config(), chunks=chunks, embeddings=embeddings, embed_fn=CountingEmbed())
    assert retriever.retrieve("query east", top_k=1)[0].chunk is chunks[0]


@pytest.mark.parametrize("missing", ["chunks", "embeddings", "embed_fn"])
def test_in_memory_returns_empty_when_a_piece_is_missing(missing):
    pieces = {
        "chunks": _chunks(),
        "embeddings": [np.array(VECTORS[c.text]) for c in _chunks()],
        "embed_fn": CountingEmbed(),
    }
    pieces[missing] = None
    assert VectorRetriever(_config(), **pieces).retrieve("query east", top_k=3) == []


def test_constructor_rejects_mismatched_chunks_and_embeddings():
    with pytest.raises(ValueError, match="4 chunks but 1 embeddings"):
        VectorRetriever(_config(), chunks=_chunks(), embeddings=[np.ones(2)])


def test_index_chunks_calls_embed_fn_once_per_chunk_text(caplog):
    embed = CountingEmbed()
    retriever = VectorRetriever(_config())
    with caplog.at_level(logging.INFO, logger=LOGGER):
        retriever.index_chunks(_chunks(), embed_fn=embed)
    assert embed.calls == ["east", "north-east", "north", "west"]
    assert len([r for r in caplog.records if r.levelno == logging.INFO]) == 2  # before and after


def test_index_chunks_propagates_embed_errors_and_keeps_previous_state():
    retriever = VectorRetriever(_config())
    retriever.index_chunks(_chunks()[:1], embed_fn=CountingEmbed())
    with pytest.raises(RuntimeError, match="embedding service down"):
        retriever.index_chunks(_chunks(), embed_fn=CountingEmbed(fail_on="north"))
    assert [h.doc_id for h in retriever.retrieve("query east", top_k=5)] == ["east"]


def test_query_embedding_error_returns_empty_and_warns(caplog):
    retriever = VectorRetriever(_config())
    embed = CountingEmbed(fail_on="query east")
    retriever.index_chunks(_chunks(), embed_fn=embed)
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        assert retriever.retrieve("query east", top_k=3) == []
    assert [r.levelname for r in caplog.records] == ["WARNING"]
    assert "embedding service down" in caplog.records[0].getMessage()
    assert "query east" not in retriever._query_cache  # failures are not cached


def test_query_cache_embeds_a_repeated_query_once():
    embed = CountingEmbed()
    retriever = VectorRetriever(_config())
    retriever.index_chunks(_chunks(), embed_fn=embed)
    first = retriever.retrieve("query east", top_k=3)
    second = retriever.retrieve("query east", top_k=3)
    assert embed.calls.count("query east") == 1
    assert [h.doc_id for h in first] == [h.doc_id for h in second]
    assert list(retriever._query_cache) == ["query east"]
    assert retriever._get_query_embedding("query east") is retriever._query_cache["query east"]
    for query in ("east", "north", "west"):  # unbounded: every distinct query stays cached
        retriever.retrieve(query, top_k=1)
    assert list(retriever._query_cache) == ["query east", "east", "north", "west"]


def test_reindexing_with_another_embed_fn_drops_cached_query_vectors():
    retriever = VectorRetriever(_config())
    retriever.index_chunks(_chunks(), embed_fn=CountingEmbed())
    retriever.retrieve("query east", top_k=3)
    other = CountingEmbed()
    retriever.index_chunks(_chunks(), embed_fn=other)
    retriever.retrieve("query east", top_k=3)
    assert other.calls[-1] == "query east"


# --- native vector_db mode --------------------------------------------------------------------


def test_vector_db_mode_calls_search_with_documented_arguments():
    chunk = DocumentChunk("hit", doc_id="h")
    db = FakeVectorDB(results=[(chunk, 0.9)])
    retriever = VectorRetriever(_config(), vector_db=db)
    hits = retriever.retrieve("q", top_k=7, filters={"lang": "ar"})
    assert db.calls == [("q", 7, None, {"lang": "ar"})]  # min_vector_score 0.0 -> score_threshold None
    assert hits == [ScoredChunk(chunk, vector_score=0.9, composite_score=0.9)]


def test_vector_db_mode_passes_a_nonzero_min_score_as_threshold_and_no_filter_kwarg_without_filters():
    db = FakeVectorDB()
    VectorRetriever(_config(min_vector_score=0.3), vector_db=db).retrieve("q", top_k=2)
    assert db.calls == [("q", 2, 0.3, None)]


def test_vector_db_mode_reembeds_nothing_client_side():
    embed = CountingEmbed()
    retriever = VectorRetriever(_config(), vector_db=FakeVectorDB(), embed_fn=embed)
    retriever.retrieve("query east", top_k=2)
    retriever.retrieve("query east", top_k=2)
    assert embed.calls == [] and retriever._query_cache == {}


def test_vector_db_search_error_returns_empty_and_logs_error(caplog):
    retriever = VectorRetriever(_config(), vector_db=FakeVectorDB(error=ConnectionError("collection missing")))
    with caplog.at_level(logging.ERROR, logger=LOGGER):
        assert retriever.retrieve("q", top_k=3) == []
    assert [r.levelname for r in caplog.records] == ["ERROR"]
    assert "collection missing" in caplog.records[0].getMessage()


def test_vector_db_checked_before_adapter_and_in_memory():
    db, adapter = FakeVectorDB(), FakeAdapter()
    retriever = VectorRetriever(_config(), vector_store_adapter=adapter, vector_db=db)
    retriever.index_chunks(_chunks(), embed_fn=CountingEmbed())
    retriever.retrieve("query east", top_k=3)
    assert len(db.calls) == 1 and adapter.calls == []


def test_index_vector_db_switches_mode_adds_chunks_and_logs_size(caplog):
    adapter = FakeAdapter()
    retriever = VectorRetriever(_config(), vector_store_adapter=adapter)
    db = FakeVectorDB()
    chunks = _chunks()
    with caplog.at_level(logging.INFO, logger=LOGGER):
        retriever.index_vector_db(chunks, db)
    assert db.added == chunks
    assert "holds 4" in caplog.records[-1].getMessage()
    retriever.retrieve("q", top_k=1)
    assert len(db.calls) == 1 and adapter.calls == []


def test_index_vector_db_with_no_chunks_still_attaches_the_backend():
    class NoAdd(FakeVectorDB):
        def add(self, chunks, embeddings=None):
            raise AssertionError("add() must not be called for an empty chunk list")

    db = NoAdd()
    retriever = VectorRetriever(_config())
    retriever.index_vector_db([], db)
    assert retriever._vector_db is db


def test_index_vector_db_propagates_add_errors():
    class BrokenAdd(FakeVectorDB):
        def add(self, chunks, embeddings=None):
            raise ValueError("dimension mismatch")

    with pytest.raises(ValueError, match="dimension mismatch"):
        VectorRetriever(_config()).index_vector_db(_chunks(), BrokenAdd())


# --- adapter mode -----------------------------------------------------------------------------


def test_adapter_mode_passes_filters_unmodified_and_wraps_pairs():
    document = DocumentChunk("doc", doc_id="d")
    adapter = FakeAdapter(results=[(document, 0.42)])
    filters = {"category": ["docs", "faq"]}
    hits = VectorRetriever(_config(), vector_store_adapter=adapter).retrieve("query", top_k=5, filters=filters)
    assert adapter.calls == [("query", 5, filters)] and adapter.calls[0][2] is filters
    assert hits == [ScoredChunk(document, vector_score=0.42, composite_score=0.42)]


def test_adapter_checked_before_in_memory():
    adapter = FakeAdapter()
    embed = CountingEmbed()
    retriever = VectorRetriever(_config(), vector_store_adapter=adapter)
    retriever.index_chunks(_chunks(), embed_fn=embed)
    assert retriever.retrieve("query east", top_k=3) == []
    assert len(adapter.calls) == 1 and "query east" not in embed.calls


def test_adapter_error_returns_empty_and_logs_error(caplog):
    retriever = VectorRetriever(_config(), vector_store_adapter=FakeAdapter(error=TimeoutError("timed out")))
    with caplog.at_level(logging.ERROR, logger=LOGGER):
        assert retriever.retrieve("q", top_k=3) == []
    assert [r.levelname for r in caplog.records] == ["ERROR"]
    assert "timed out" in caplog.records[0].getMessage()
