"""HybridRetriever: the seed's eight steps, the content-hash merge, and both RRF orders (hand-computed)."""

import logging

import pytest

from retrieval.zerda import (
    ContextEngineConfig,
    DocumentChunk,
    HybridRetriever,
    KeywordRetriever,
    MetadataRetriever,
    RetrieverConfig,
    ScoredChunk,
    VectorRetriever,
)

LOGGER = "retrieval.zerda.retriever"


class Fixed:
    """A sub-retriever returning fresh ScoredChunks with preset scores, recording its calls."""

    def __init__(self, score_field: str, ranked: list[tuple[DocumentChunk, float]]):
        self.score_field = score_field
        self.ranked = ranked
        self.calls: list[tuple] = []
        self.returned: list[ScoredChunk] = []

    def retrieve(self, query, top_k, filters=None):
        self.calls.append((query, top_k, filters))
        self.returned = [
            ScoredChunk(chunk, composite_score=score, **{self.score_field: score}) for chunk, score in self.ranked
        ]
        return self.returned[:top_k]


def _config(**retriever) -> ContextEngineConfig:
    return ContextEngineConfig(retriever=RetrieverConfig(**retriever))


X, Y, Z = DocumentChunk("chunk x", "x"), DocumentChunk("chunk y", "y"), DocumentChunk("chunk z", "z")


def _order_case(rrf_order: str) -> list[ScoredChunk]:
    """X: vector #1 (0.55). Y: vector #2 (0.45) and keyword #2 (0.05). Z: keyword #1 (1.0)."""
    vector = Fixed("vector_score", [(X, 0.55), (Y, 0.45)])
    keyword = Fixed("keyword_score", [(Z, 1.0), (Y, 0.05)])
    return HybridRetriever(_config(rrf_order=rrf_order), vector, keyword).retrieve("q", top_k=3)


def test_as_documented_discards_the_rrf_bonus():
    hits = _order_case("as_documented")
    weighted = {"x": 0.6 * 0.55, "y": 0.6 * 0.45 + 0.3 * 0.05, "z": 0.3 * 1.0}  # 0.33, 0.285, 0.30
    assert [h.doc_id for h in hits] == ["x", "z", "y"]
    assert {h.doc_id: h.composite_score for h in hits} == pytest.approx(weighted, rel=1e-12)
    # The bonus was computed (rrf_score recorded) and then overwritten by the weighted assignment.
    assert {h.doc_id: h.rrf_score for h in hits} == pytest.approx({"x": 1 / 61, "y": 2 / 62, "z": 1 / 61})


def test_fixed_order_adds_the_rrf_bonus_and_changes_the_ranking():
    hits = _order_case("fixed")
    max_rrf = 1 / 62 + 1 / 62  # Y is ranked #2 twice: 1/(60+1+1) per list, 0-based rank 1
    expected = {
        "x": 0.6 * 0.55 + 0.20 * (1 / 61) / max_rrf,  # 0.4316
        "y": 0.6 * 0.45 + 0.3 * 0.05 + 0.20 * (2 / 62) / max_rrf,  # 0.485
        "z": 0.3 * 1.0 + 0.20 * (1 / 61) / max_rrf,  # 0.4016
    }
    assert [h.doc_id for h in hits] == ["y", "x", "z"]
    assert {h.doc_id: h.composite_score for h in hits} == pytest.approx(expected, rel=1e-12)


def test_invalid_rrf_order_set_after_construction_is_rejected():
    cfg = _config()
    cfg.retriever.rrf_order = "sometimes"
    with pytest.raises(ValueError, match="as_documented, fixed"):
        HybridRetriever(cfg, Fixed("vector_score", [(X, 1.0)])).retrieve("q")


def test_weights_over_all_three_branches_and_filter_routing():
    vector = Fixed("vector_score", [(X, 0.8), (Y, 0.4)])
    keyword = Fixed("keyword_score", [(Z, 1.0), (X, 0.5)])
    metadata = Fixed("metadata_score", [(X, 1.0), (Z, 1.0)])
    cfg = _config(vector_weight=0.5, keyword_weight=0.25, metadata_weight=0.25, use_metadata=True)
    filters = {"category": "legal"}
    hits = HybridRetriever(cfg, vector, keyword, metadata).retrieve("q", top_k=5, filters=filters)
    expected = {
        "x": 0.5 * 0.8 + 0.25 * 0.5 + 0.25 * 1.0,  # 0.775
        "z": 0.25 * 1.0 + 0.25 * 1.0,  # 0.5
        "y": 0.5 * 0.4,  # 0.2
    }
    assert [h.doc_id for h in hits] == ["x", "z", "y"]
    assert {h.doc_id: h.composite_score for h in hits} == pytest.approx(expected, rel=1e-12)
    assert vector.calls == [("q", 10, filters)] and metadata.calls == [("q", 5, filters)]
    assert keyword.calls == [("q", 10, None)]  # keyword retrieval never sees filters


def test_metadata_branch_fetches_k_not_twice_k():
    """Seed 000 step 4 shares step 3's "same merge pattern", not steps 2-3's "fetch k*2 results"."""
    a, b, c = (DocumentChunk(f"text {i}", i, metadata={"lang": "ar"}) for i in "abc")
    vector = Fixed("vector_score", [(c, 0.5), (a, 0.45)])
    metadata = MetadataRetriever(ContextEngineConfig(), chunks=[b, a])  # matches in corpus order: b, a
    cfg = _config(use_metadata=True, use_keyword=False)
    hits = HybridRetriever(cfg, vector, metadata_retriever=metadata).retrieve("q", top_k=1, filters={"lang": "ar"})
    # k=1: the metadata branch brings b only, so c = 0.6*0.5 = 0.30 beats a = 0.6*0.45 = 0.27.
    # (Fetching k*2 would also bring a: 0.27 + 0.1*1.0 = 0.37 would win.)
    assert [(h.doc_id, h.composite_score) for h in hits] == [("c", pytest.approx(0.30, rel=1e-12))]
    spy = Fixed("metadata_score", [(b, 1.0), (a, 1.0)])
    HybridRetriever(cfg, vector, metadata_retriever=spy).retrieve("q", top_k=1, filters={"lang": "ar"})
    assert spy.calls == [("q", 1, {"lang": "ar"})] and vector.calls[-1][1] == 2


def test_each_branch_over_fetches_twice_k_and_result_is_truncated_to_k():
    chunks = [DocumentChunk(f"text {i}", f"d{i}") for i in range(6)]
    vector = Fixed("vector_score", [(c, 1.0 - i / 10) for i, c in enumerate(chunks)])
    keyword = Fixed("keyword_score", [(c, 0.5) for c in reversed(chunks)])
    hits = HybridRetriever(_config(top_k=2), vector, keyword).retrieve("q")  # k falls back to cfg.top_k
    assert vector.calls[0][1] == keyword.calls[0][1] == 4
    assert len(hits) == 2
    assert len(HybridRetriever(_config(top_k=2), vector, keyword).retrieve("q", top_k=3)) == 3
    assert vector.calls[-1][1] == 6


def test_merge_by_content_hash_reuses_the_first_object_and_merges_only_the_branch_score():
    same_a = DocumentChunk("Solar  Power plants", "a")
    same_b = DocumentChunk("solar power PLANTS", "b")  # same hash: case and whitespace differ
    vector = Fixed("vector_score", [(same_a, 0.9)])
    keyword = Fixed("keyword_score", [(same_b, 0.7), (Y, 0.2)])
    hits = HybridRetriever(_config(), vector, keyword).retrieve("q", top_k=5)
    assert [h.doc_id for h in hits] == ["a", "y"]
    merged = hits[0]
    assert merged is vector.returned[0]  # the vector branch's object, not replaced
    assert (merged.vector_score, merged.keyword_score, merged.metadata_score) == (0.9, 0.7, 0.0)
    assert merged.composite_score == pytest.approx(0.6 * 0.9 + 0.3 * 0.7)


def test_duplicate_texts_within_one_branch_collapse_keeping_the_best_score():
    chunks = [
        DocumentChunk("wind farm", "w1"),
        DocumentChunk("tidal", "t"),
        DocumentChunk("Wind  Farm", "w2"),
    ]
    keyword = KeywordRetriever(ContextEngineConfig(), chunks=chunks)
    hits = HybridRetriever(_config(use_vector=False), keyword_retriever=keyword).retrieve("wind", top_k=5)
    assert [h.doc_id for h in hits].count("w1") + [h.doc_id for h in hits].count("w2") == 1
    assert len(hits) == 2 and hits[0].keyword_score == 1.0


def test_use_metadata_without_filters_skips_the_branch():
    metadata = Fixed("metadata_score", [(X, 1.0)])
    cfg = _config(use_metadata=True)
    vector = Fixed("vector_score", [(Y, 0.5)])
    hits = HybridRetriever(cfg, vector, metadata_retriever=metadata).retrieve("q", top_k=5)
    assert metadata.calls == [] and [h.doc_id for h in hits] == ["y"]
    HybridRetriever(_config(use_metadata=False), vector, metadata_retriever=metadata).retrieve("q", filters={"a": 1})
    assert metadata.calls == []  # use_metadata=False skips it even with filters


def test_disabled_branches_are_not_called():
    vector = Fixed("vector_score", [(X, 0.5)])
    keyword = Fixed("keyword_score", [(Y, 0.5)])
    hits = HybridRetriever(_config(use_vector=False), vector, keyword).retrieve("q")
    assert vector.calls == [] and [h.doc_id for h in hits] == ["y"]


def test_nothing_found_returns_empty_and_warns(caplog):
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        assert HybridRetriever(_config(), Fixed("vector_score", []), Fixed("keyword_score", [])).retrieve("q") == []
        assert HybridRetriever(_config()).retrieve("q") == []
    assert [r.levelname for r in caplog.records] == ["WARNING", "WARNING"]


@pytest.mark.parametrize("rrf_order", ["as_documented", "fixed"])
def test_end_to_end_with_real_retrievers(rrf_order):
    texts = {
        "d0": ("solar panels convert sunlight", [1.0, 0.0, 0.0], "energy"),
        "d1": ("wind turbines and solar farms", [0.6, 0.8, 0.0], "energy"),
        "d2": ("the history of tea", [0.0, 0.0, 1.0], "food"),
    }
    chunks = [DocumentChunk(t, doc_id, metadata={"category": c}) for doc_id, (t, _, c) in texts.items()]
    table = {t: v for t, v, _ in texts.values()} | {"solar": [1.0, 0.0, 0.0]}
    cfg = _config(use_metadata=True, rrf_order=rrf_order)
    vector = VectorRetriever(cfg)
    vector.index_chunks(chunks, embed_fn=table.__getitem__)
    hybrid = HybridRetriever(cfg, vector, KeywordRetriever(cfg, chunks), MetadataRetriever(cfg, chunks))
    hits = hybrid.retrieve("solar", top_k=3, filters={"category": "energy"})
    assert [h.doc_id for h in hits][:2] == ["d0", "d1"]
    d0, d1 = hits[0], hits[1]
    assert d0.vector_score == pytest.approx(1.0) and d1.vector_score == pytest.approx(0.6)
    assert d0.metadata_score == d1.metadata_score == 1.0
    for hit in hits:
        weighted = 0.6 * hit.vector_score + 0.3 * hit.keyword_score + 0.1 * hit.metadata_score
        bonus = 0.20 * hit.rrf_score / max(h.rrf_score for h in hits) if rrf_order == "fixed" else 0.0
        assert hit.composite_score == pytest.approx(weighted + bonus)
