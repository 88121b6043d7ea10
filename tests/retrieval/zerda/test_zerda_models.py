"""Config defaults (the shipped package's), the rrf_order toggle, and ScoredChunk's view of any chunk."""

import hashlib
from dataclasses import dataclass
from types import SimpleNamespace

import pytest

from retrieval.zerda import (
    ChunkMetadata,
    ContextEngineConfig,
    DocumentChunk,
    RetrieverConfig,
    ScoredChunk,
    chunk_metadata_dict,
)


def test_retriever_config_defaults_match_the_shipped_package():
    cfg = ContextEngineConfig().retriever
    assert isinstance(cfg, RetrieverConfig)
    assert (cfg.top_k, cfg.vector_weight, cfg.keyword_weight, cfg.metadata_weight) == (20, 0.60, 0.30, 0.10)
    assert (cfg.use_vector, cfg.use_keyword, cfg.use_metadata) == (True, True, False)
    assert cfg.metadata_filters == {} and cfg.min_vector_score == 0.0
    assert cfg.rrf_order == "as_documented"


def test_metadata_filters_default_is_not_shared():
    first, second = RetrieverConfig(), RetrieverConfig()
    first.metadata_filters["category"] = "legal"
    assert second.metadata_filters == {}
    assert ContextEngineConfig().retriever is not ContextEngineConfig().retriever


def test_rrf_order_accepts_both_values_and_rejects_others_naming_them():
    assert RetrieverConfig(rrf_order="fixed").rrf_order == "fixed"
    with pytest.raises(ValueError, match=r"rrf_order='as_shipped'.*as_documented, fixed"):
        RetrieverConfig(rrf_order="as_shipped")


def test_scored_chunk_defaults():
    sc = ScoredChunk(DocumentChunk("x"))
    assert (sc.vector_score, sc.keyword_score, sc.metadata_score, sc.composite_score) == (0, 0, 0, 0)


def test_scored_chunk_reads_zerda_chunks():
    chunk = DocumentChunk("Hello  World", doc_id="d1", metadata=ChunkMetadata(doc_id="d1", category="docs"))
    sc = ScoredChunk(chunk)
    assert sc.text == "Hello  World"
    assert sc.doc_id == "d1"
    assert sc.metadata == {"doc_id": "d1", "source": "", "category": "docs", "chunk_index": 0, "extra": {}}


def test_scored_chunk_reads_langchain_shaped_documents():
    document = SimpleNamespace(page_content="from langchain", id="lc-7", metadata={"year": 2026})
    sc = ScoredChunk(document)
    assert (sc.text, sc.doc_id, sc.metadata) == ("from langchain", "lc-7", {"year": 2026})


@pytest.mark.parametrize("text", ["", None])
def test_scored_chunk_text_falls_back_to_page_content_when_text_is_empty_or_missing(text):
    """Seed 000 names both chunk shapes; an empty ``text`` beside a ``page_content`` reads the page content."""
    document = SimpleNamespace(text=text, page_content="from langchain")
    sc = ScoredChunk(document)
    assert sc.text == "from langchain"
    assert sc.content_hash == hashlib.sha256(b"from langchain").hexdigest()
    assert ScoredChunk(SimpleNamespace(text="", page_content="")).text == ""


def test_scored_chunk_without_metadata_or_ids():
    """A chunk with neither ``doc_id`` nor ``id``: upstream zerda 0.1.0 returns ``""`` (a string, never None)."""
    sc = ScoredChunk(SimpleNamespace(text="bare"))
    assert sc.doc_id == "" and sc.metadata == {}


def test_content_hash_is_sha256_of_lowercased_whitespace_collapsed_text():
    expected = hashlib.sha256(b"solar power plants").hexdigest()
    assert ScoredChunk(DocumentChunk("  Solar\tPOWER\n plants ")).content_hash == expected
    assert ScoredChunk(DocumentChunk("solar power plant")).content_hash != expected


def test_content_hash_of_arabic_text():
    text = "الطاقة الشمسية"
    expected = hashlib.sha256(text.encode("utf-8")).hexdigest()
    assert ScoredChunk(DocumentChunk(f" {text.replace(' ', '   ')} ")).content_hash == expected


def test_chunk_metadata_dict_shapes():
    @dataclass
    class Meta:
        lang: str = "ar"

    plain = {"a": 1}
    assert chunk_metadata_dict(plain) is plain  # a dict is returned as is
    assert chunk_metadata_dict(Meta()) == {"lang": "ar"}
    assert chunk_metadata_dict(Meta) == {}  # a dataclass *type* is not metadata
    assert chunk_metadata_dict(None) == {}
    assert chunk_metadata_dict([("a", 1)]) == {}


def test_a_document_chunk_is_frozen_so_its_hash_cannot_go_stale():
    from dataclasses import FrozenInstanceError

    chunk = DocumentChunk(text="Hello   World", doc_id="d1")
    expected = hashlib.sha256(b"hello world").hexdigest()
    assert ScoredChunk(chunk).content_hash == chunk.content_hash == expected
    with pytest.raises(FrozenInstanceError):
        chunk.text = "something else"  # type: ignore[misc]
    # Equality is still by content; the hash is derived from it and takes no part.
    assert chunk == DocumentChunk(text="Hello   World", doc_id="d1")
    assert chunk != DocumentChunk(text="Hello World", doc_id="d1")


def test_a_mutable_chunk_changed_after_hashing_gets_its_new_hash():
    chunk = SimpleNamespace(page_content="first text", id="d1", metadata={})
    scored = ScoredChunk(chunk)
    assert scored.content_hash == hashlib.sha256(b"first text").hexdigest()
    chunk.page_content = "Second  TEXT"
    assert scored.content_hash == hashlib.sha256(b"second text").hexdigest()


@pytest.mark.parametrize("falsy", ["", 0, None])
def test_scored_chunk_doc_id_falls_back_to_id_when_doc_id_is_falsy(falsy):
    """Upstream zerda 0.1.0: ``chunk.doc_id or chunk.id``, ``""`` for an attribute the chunk lacks."""
    assert ScoredChunk(SimpleNamespace(text="t", doc_id=falsy, id="chunk-3")).doc_id == "chunk-3"
    assert ScoredChunk(DocumentChunk("t", doc_id="")).doc_id == ""  # a DocumentChunk has no `id`
    assert ScoredChunk(SimpleNamespace(text="t", doc_id="d9", id="chunk-3")).doc_id == "d9"
