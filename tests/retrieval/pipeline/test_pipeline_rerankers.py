"""Synchronous rerankers: score, cross-encoder, Cohere callback, FlashRank (at its seam), round robin."""

import sys

import pytest

from retrieval.pipeline import (
    CohereReranker,
    ContextItem,
    CrossEncoderReranker,
    FlashRankReranker,
    QueryBundle,
    Reranker,
    RerankerPipeline,
    RetrieverError,
    RoundRobinReranker,
    ScoreReranker,
)

QUERY = QueryBundle(query_str="cat")
ITEMS = [
    ContextItem(id=i, content=c, score=s) for i, c, s in [("a", "dog", 0.9), ("b", "cat", 0.5), ("c", "cat cat", 0.1)]
]


def count_overlap(query, content):
    """A stand-in cross-encoder: how often the query occurs in the content, over 2 (stays in [0, 1])."""
    return content.split().count(query) / 2


def logit(query, content):
    return {"dog": -2.0, "cat": 1.0, "cat cat": 3.0}[content]


def test_score_reranker_process():
    reranked = ScoreReranker(count_overlap).process(ITEMS, QUERY)
    assert [(r.id, r.score) for r in reranked] == [("c", 1.0), ("b", 0.5), ("a", 0.0)]
    assert reranked[0].metadata["raw_score"] == 1.0
    assert [r.id for r in ScoreReranker(count_overlap, top_k=1).process(ITEMS, QUERY)] == ["c"]
    assert ScoreReranker(count_overlap).process(ITEMS) is ITEMS  # no query: input unchanged
    assert not isinstance(ScoreReranker(count_overlap), Reranker)  # process(), not the Reranker protocol


def test_cross_encoder_keeps_unit_scores_and_cuts_top_k():
    reranker = CrossEncoderReranker(count_overlap)
    assert isinstance(reranker, Reranker)
    assert [(r.id, r.score) for r in reranker.rerank(QUERY, ITEMS, top_k=2)] == [("c", 1.0), ("b", 0.5)]
    assert len(CrossEncoderReranker(count_overlap, top_k=1).rerank(QUERY, ITEMS, top_k=None)) == 1


def test_cross_encoder_clamps_logits_orders_by_raw_and_keeps_raw_score():
    """Seed 004 "Score each item and return top-k": the documented library clamps to [0, 1], no sigmoid."""
    reranked = CrossEncoderReranker(logit).rerank(QUERY, ITEMS)
    assert [r.id for r in reranked] == ["c", "b", "a"]  # by raw 3.0 > 1.0 > -2.0, though c and b both clamp to 1
    assert [r.score for r in reranked] == [1.0, 1.0, 0.0]
    assert [r.metadata["raw_score"] for r in reranked] == [3.0, 1.0, -2.0]
    assert reranked[0].metadata["rerank_method"] == "cross_encoder"
    assert "rerank_score" not in reranked[0].metadata


def test_score_reranker_clamps_too():
    reranked = ScoreReranker(lambda q, c: {"dog": -0.5, "cat": 0.25, "cat cat": 7.0}[c]).process(ITEMS, QUERY)
    assert [(r.id, r.score, r.metadata["raw_score"]) for r in reranked] == [
        ("c", 1.0, 7.0),
        ("b", 0.25, 0.25),
        ("a", 0.0, -0.5),
    ]


def test_cohere_reranker_uses_callback_indices_and_scores():
    calls = []

    def rerank_fn(query, documents, top_k):
        calls.append((query, documents, top_k))
        return [(1, 0.7), (2, 1.5)]

    reranked = CohereReranker(rerank_fn).rerank(QUERY, ITEMS, top_k=5)
    assert calls == [("cat", ["dog", "cat", "cat cat"], 5)]
    # sorted by the raw score, "a" dropped; 1.5 clamps to 1.0, 0.7 stays (no sigmoid of the batch)
    assert [(r.id, r.score, r.metadata["raw_score"]) for r in reranked] == [("c", 1.0, 1.5), ("b", 0.7, 0.7)]


def test_cohere_reranker_rejects_bad_index():
    reranker = CohereReranker(lambda q, docs, k: [(3, 0.5)])
    with pytest.raises(RetrieverError, match="index 3 for 3 documents"):
        reranker.rerank(QUERY, ITEMS)
    assert reranker.rerank(QUERY, []) == []


class FakeRanker:
    """flashrank.Ranker's interface: rerank(RerankRequest) -> passages with a "score", best first."""

    def __init__(self):
        self.requests = []

    def rerank(self, request):
        self.requests.append(request)
        scored = [{**p, "score": 0.2 * len(p["text"]) - 0.3} for p in request.passages]
        return sorted(scored, key=lambda p: -p["score"])


def test_flashrank_scoring_through_the_ranker_seam():
    fake = FakeRanker()
    reranker = FlashRankReranker(ranker=fake)
    assert reranker._get_ranker() is fake
    reranked = reranker.rerank(QUERY, ITEMS, top_k=2)
    assert [r.id for r in reranked] == ["c", "a"]  # "cat cat" (1.1) then "dog" (0.3, before "cat" by order)
    assert [r.score for r in reranked] == pytest.approx([1.0, 0.3])  # 1.1 clamped
    assert [r.metadata["raw_score"] for r in reranked] == pytest.approx([1.1, 0.3])
    assert fake.requests[0].query == "cat"
    assert [p["text"] for p in fake.requests[0].passages] == ["dog", "cat", "cat cat"]


def test_flashrank_lazy_load_and_missing_model(tmp_path):
    reranker = FlashRankReranker(cache_dir=str(tmp_path))
    assert reranker.model_name == "ms-marco-MiniLM-L-12-v2" and reranker.top_k == 10
    assert reranker._ranker is None  # nothing loaded at construction
    with pytest.raises(RetrieverError, match="model files for 'ms-marco-MiniLM-L-12-v2' not found"):
        reranker.rerank(QUERY, ITEMS)


def test_flashrank_missing_package(monkeypatch):
    monkeypatch.setitem(sys.modules, "flashrank", None)
    with pytest.raises(RetrieverError, match="pip install flashrank"):
        FlashRankReranker().rerank(QUERY, ITEMS)


def test_round_robin_rerank_sorts_by_existing_score():
    assert [r.id for r in RoundRobinReranker().rerank(QUERY, ITEMS[::-1], top_k=2)] == ["a", "b"]


def test_round_robin_rerank_multiple_interleaves_and_dedups():
    def make(ids):
        return [ContextItem(id=i, content=f"{i} from set") for i in ids]

    sets = [make(["a", "b", "c"]), make(["b", "d"]), make(["e"])]
    merged = RoundRobinReranker().rerank_multiple(QUERY, sets)
    assert [m.id for m in merged] == ["a", "b", "e", "d", "c"]
    assert merged[1] is sets[1][0]  # first occurrence in round-robin order kept, unchanged
    assert [m.id for m in RoundRobinReranker(top_k=2).rerank_multiple(QUERY, sets)] == ["a", "b"]
    assert [m.id for m in RoundRobinReranker().rerank_multiple(QUERY, sets, top_k=4)] == ["a", "b", "e", "d"]


def test_pipeline_runs_in_order_and_cuts_at_the_end():
    seen = []

    class Recorder:
        def rerank(self, query, items, top_k=10):
            seen.append(([i.id for i in items], top_k))
            return items

    pipeline = RerankerPipeline([CrossEncoderReranker(count_overlap, top_k=1), Recorder()], top_k=2)
    result = pipeline.rerank(QUERY, ITEMS, top_k=None)
    assert seen == [(["c", "b", "a"], 3)]  # the first stage did not cut at its own top_k=1
    assert [r.id for r in result] == ["c", "b"]
    assert [r.id for r in pipeline.rerank(QUERY, ITEMS, top_k=1)] == ["c"]
