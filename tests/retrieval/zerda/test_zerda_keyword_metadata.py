"""KeywordRetriever (BM25, max-normalised, top_k*2 over-fetch) and MetadataRetriever (filters only)."""

import math
from types import SimpleNamespace

import pytest

from retrieval.zerda import (
    BM25Scorer,
    ChunkMetadata,
    ContextEngineConfig,
    DocumentChunk,
    KeywordRetriever,
    MetadataRetriever,
)

CFG = ContextEngineConfig()
TEXTS = ["solar panels on roofs", "wind turbines", "solar solar farms", "hydro dams", "solar power"]


def _chunks(texts=TEXTS):
    return [DocumentChunk(text, doc_id=f"d{i}") for i, text in enumerate(texts)]


def test_keyword_scores_are_bm25_divided_by_the_batch_maximum():
    chunks = _chunks()
    hits = KeywordRetriever(CFG, chunks=chunks).retrieve("solar", top_k=3)
    # By hand: idf(solar), df = 3 of N = 5; lengths 4, 2, 3, 2, 2 -> avgdl 2.6; k1 1.5, b 0.75.
    idf = math.log((5 - 3 + 0.5) / (3 + 0.5) + 1)

    def bm25(tf, length):
        return idf * tf * 2.5 / (tf + 1.5 * (0.25 + 0.75 * length / 2.6))

    raw = {"d2": bm25(2, 3), "d4": bm25(1, 2), "d0": bm25(1, 4)}
    best = max(raw.values())
    assert [h.doc_id for h in hits] == ["d2", "d4", "d0"]
    assert [h.keyword_score for h in hits] == pytest.approx([raw[h.doc_id] / best for h in hits])
    assert hits[0].keyword_score == 1.0
    assert all(h.composite_score == h.keyword_score and h.vector_score == 0.0 for h in hits)
    assert hits[0].chunk is chunks[2]


def test_keyword_fetches_twice_top_k_from_bm25(monkeypatch):
    requested = []
    original = BM25Scorer.score

    def spy(self, query, top_k=20):
        requested.append(top_k)
        return original(self, query, top_k)

    monkeypatch.setattr(BM25Scorer, "score", spy)
    retriever = KeywordRetriever(CFG, chunks=_chunks())
    assert len(retriever.retrieve("solar", top_k=2)) == 2
    assert requested == [4]


def test_keyword_no_match_keeps_zero_scores_without_dividing_by_zero():
    hits = KeywordRetriever(CFG, chunks=_chunks()).retrieve("geothermal", top_k=2)
    assert [h.doc_id for h in hits] == ["d0", "d1"]  # all scores 0: corpus order
    assert [h.keyword_score for h in hits] == [0.0, 0.0]


def test_keyword_ignores_filters():
    retriever = KeywordRetriever(CFG, chunks=_chunks())
    assert retriever.retrieve("solar", 3, filters={"doc_id": "d1"}) == retriever.retrieve("solar", 3)


def test_keyword_index_chunks_replaces_the_index_and_empty_retriever_returns_nothing():
    retriever = KeywordRetriever(CFG)
    assert retriever.retrieve("solar", top_k=3) == []
    retriever.index_chunks(_chunks(["tidal energy", "solar energy"]))
    assert [h.doc_id for h in retriever.retrieve("solar", top_k=1)] == ["d1"]


def test_keyword_reads_langchain_shaped_chunks():
    chunks = [
        SimpleNamespace(page_content="مزارع الطاقة الشمسية", metadata={}),
        SimpleNamespace(page_content="سدود"),
    ]
    hits = KeywordRetriever(CFG, chunks=chunks).retrieve("الشمسية", top_k=1)
    assert hits[0].chunk is chunks[0] and hits[0].keyword_score == 1.0


# --- MetadataRetriever ------------------------------------------------------------------------


def _meta_chunks():
    return [
        SimpleNamespace(text="a", metadata={"category": "legal", "year": 2026}),
        SimpleNamespace(text="b", metadata={"category": "compliance", "year": 2025}),
        DocumentChunk("c", metadata=ChunkMetadata(doc_id="c", category="legal")),
        SimpleNamespace(text="d", metadata={"category": None, "year": 2026}),
        SimpleNamespace(text="e"),  # no metadata at all
    ]


def test_matches_filters_rules():
    match = MetadataRetriever._matches_filters
    assert match({"category": "legal"}, {"category": "legal"})
    assert not match({"category": "legal"}, {"category": "Legal"})
    assert match({"category": "faq"}, {"category": ["docs", "faq"]})  # list = IN
    assert not match({"category": "blog"}, {"category": ["docs", "faq"]})
    assert not match({"category": None}, {"category": None})  # None = no match, even against None
    assert not match({}, {"category": "legal"})
    assert match({"a": 1, "b": 2}, {"a": 1, "b": 2})
    assert not match({"a": 1, "b": 3}, {"a": 1, "b": 2})  # every filter must hold


def test_metadata_retrieve_scores_matches_one_and_excludes_the_rest():
    chunks = _meta_chunks()
    hits = MetadataRetriever(CFG, chunks=chunks).retrieve("ignored", top_k=10, filters={"category": "legal"})
    assert [h.chunk for h in hits] == [chunks[0], chunks[2]]  # dict and ChunkMetadata dataclass alike
    assert all(h.metadata_score == h.composite_score == 1.0 for h in hits)


def test_metadata_in_filter_combined_with_equality():
    chunks = _meta_chunks()
    filters = {"category": ["legal", "compliance"], "year": 2026}
    hits = MetadataRetriever(CFG, chunks=chunks).retrieve("q", top_k=10, filters=filters)
    assert [h.chunk for h in hits] == [chunks[0]]


def test_metadata_truncates_to_top_k():
    hits = MetadataRetriever(CFG, chunks=_meta_chunks()).retrieve("q", top_k=1, filters={"category": "legal"})
    assert len(hits) == 1


@pytest.mark.parametrize("filters", [None, {}])
def test_metadata_without_filters_matches_nothing(filters):
    assert MetadataRetriever(CFG, chunks=_meta_chunks()).retrieve("q", top_k=10, filters=filters) == []


def test_metadata_without_chunks_and_index_chunks():
    retriever = MetadataRetriever(CFG)
    assert retriever.retrieve("q", top_k=10, filters={"category": "legal"}) == []
    retriever.index_chunks(_meta_chunks())
    assert len(retriever.retrieve("q", top_k=10, filters={"category": "legal"})) == 2
