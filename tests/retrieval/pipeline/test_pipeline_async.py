"""Async retrievers and rerankers, run with asyncio.run."""

import asyncio
import math

import pytest

from retrieval.pipeline import (
    AsyncCohereReranker,
    AsyncCrossEncoderReranker,
    AsyncDenseRetriever,
    AsyncHybridRetriever,
    AsyncReranker,
    AsyncRetriever,
    ContextItem,
    QueryBundle,
    RetrieverError,
    rrf_fuse,
)

VECTORS = {"east": [1.0, 0.0], "north": [0.0, 1.0], "northeast": [1.0, 1.0], "west": [-1.0, 0.0]}


async def embed(text):
    await asyncio.sleep(0)
    return VECTORS[text]


def indexed(names=tuple(VECTORS)):
    retriever = AsyncDenseRetriever(embed)
    asyncio.run(retriever.aindex([ContextItem(id=n, content=n) for n in names]))
    return retriever


def test_async_dense_aindex_and_aretrieve():
    retriever = indexed()
    assert isinstance(retriever, AsyncRetriever)
    results = asyncio.run(retriever.aretrieve(QueryBundle(query_str="east"), top_k=4))
    assert [r.id for r in results] == ["east", "northeast", "north", "west"]
    assert [r.score for r in results] == pytest.approx([1.0, 1 / math.sqrt(2), 0.0, 0.0])
    assert results[-1].metadata["similarity"] == pytest.approx(-1.0)


def test_async_dense_index_needs_metadata_embedding():
    retriever = AsyncDenseRetriever(embed, similarity_fn=lambda a, b: -abs(a[0] - b[0]))
    retriever.index([ContextItem(id=i, content=i, metadata={"embedding": [v]}) for i, v in [("p", 0.2), ("q", 0.9)]])
    results = asyncio.run(retriever.aretrieve(QueryBundle(query_str="", embedding=[1.0]), top_k=1))
    assert [r.id for r in results] == ["q"] and results[0].metadata["similarity"] == pytest.approx(-0.1)
    with pytest.raises(RetrieverError, match=r"\['bare'\] have no metadata\['embedding'\]"):
        retriever.index([ContextItem(id="bare", content="x")])


def test_async_hybrid_fans_out_concurrently_and_fuses():
    started = []

    class Slow:
        def __init__(self, name, ids):
            self.name, self.ids = name, ids

        async def aretrieve(self, query, top_k=10):
            started.append(self.name)
            await asyncio.sleep(0)
            started.append(f"{self.name} done")
            return [ContextItem(id=i, content=i) for i in self.ids]

    hybrid = AsyncHybridRetriever([Slow("one", ["a", "b"]), Slow("two", ["b", "c"])], weights=[1.0, 2.0], k=1)
    results = asyncio.run(hybrid.aretrieve(QueryBundle(query_str="q")))
    assert started[:2] == ["one", "two"]  # both started before either finished
    raw = {"a": 1 / 2, "b": 1 / 3 + 2 / 2, "c": 2 / 3}
    assert [r.id for r in results] == ["b", "c", "a"]
    assert [r.metadata["rrf_raw_score"] for r in results] == pytest.approx([raw["b"], raw["c"], raw["a"]])
    # min-max over the returned set, as rrf_fuse: c = (2/3 - 1/2) / (1/3 + 1 - 1/2) = 0.2
    assert [r.score for r in results] == pytest.approx([1.0, 0.2, 0.0])
    expected = rrf_fuse([[ContextItem(id=i, content=i) for i in ids] for ids in (["a", "b"], ["b", "c"])], [1, 2], 1)
    assert [(r.id, r.score, r.metadata) for r in results] == [(e.id, e.score, e.metadata) for e in expected]


def test_async_hybrid_with_dense_retrievers_and_failures():
    class Broken:
        async def aretrieve(self, query, top_k=10):
            raise TimeoutError("slow backend")

    results = asyncio.run(AsyncHybridRetriever([indexed(), Broken()]).aretrieve(QueryBundle(query_str="north"), 2))
    assert [r.id for r in results] == ["north", "northeast"]
    assert results[0].score == 1.0 and results[0].metadata["retrieval_method"] == "rrf"
    with pytest.raises(RetrieverError, match="all 1 sub-retrievers failed"):
        asyncio.run(AsyncHybridRetriever([Broken()]).aretrieve(QueryBundle(query_str="q")))
    with pytest.raises(RetrieverError, match="2 weights for 1"):
        AsyncHybridRetriever([Broken()], weights=[1.0, 1.0])


def test_async_cross_encoder_scores_concurrently():
    events = []

    async def score(query, content):
        events.append(f"start {len(content)}")
        await asyncio.sleep(0)
        events.append(f"end {len(content)}")
        return float(len(content)) / 10

    items = [ContextItem(id=str(n), content="x" * n) for n in (3, 9, 5)]
    reranker = AsyncCrossEncoderReranker(score)
    assert isinstance(reranker, AsyncReranker)
    reranked = asyncio.run(reranker.arerank(QueryBundle(query_str="q"), items, top_k=2))
    assert [(r.id, r.score) for r in reranked] == [("9", pytest.approx(0.9)), ("5", pytest.approx(0.5))]
    assert events[:3] == ["start 3", "start 9", "start 5"]  # all scored at once, not one by one


def test_async_cross_encoder_clamps_and_orders_by_raw_score():
    async def score(query, content):
        return {"a": -1.5, "b": 2.5, "c": 1.25}[content]

    items = [ContextItem(id=c, content=c) for c in "abc"]
    reranked = asyncio.run(AsyncCrossEncoderReranker(score).arerank(QueryBundle(query_str="q"), items))
    assert [(r.id, r.score, r.metadata["raw_score"]) for r in reranked] == [
        ("b", 1.0, 2.5),
        ("c", 1.0, 1.25),
        ("a", 0.0, -1.5),
    ]


def test_async_cohere_orders_by_returned_indices():
    async def rerank_fn(query, documents, top_k):
        assert (query, documents, top_k) == ("q", ["a", "b", "c"], 2)
        return [2, 0]

    items = [ContextItem(id=c, content=c, score=0.3) for c in "abc"]
    reranked = asyncio.run(AsyncCohereReranker(rerank_fn).arerank(QueryBundle(query_str="q"), items, top_k=2))
    assert [(r.id, r.score, r.metadata["rerank_rank"]) for r in reranked] == [("c", 0.3, 1), ("a", 0.3, 2)]

    async def bad(query, documents, top_k):
        return [7]

    with pytest.raises(RetrieverError, match="index 7"):
        asyncio.run(AsyncCohereReranker(bad).arerank(QueryBundle(query_str="q"), items))
