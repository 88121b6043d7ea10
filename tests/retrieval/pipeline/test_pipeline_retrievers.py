"""DenseRetriever, SparseRetriever and HybridRetriever against hand-computed numbers."""

import math
import sys

import pytest

from retrieval.pipeline import (
    ContextItem,
    DenseRetriever,
    HybridRetriever,
    InMemoryContextStore,
    InMemoryVectorStore,
    QueryBundle,
    RetrieverError,
    SparseRetriever,
    rrf_fuse,
)

VECTORS = {"north": [0.0, 1.0], "east": [1.0, 0.0], "northeast": [1.0, 1.0], "south": [0.0, -1.0]}


def dense(embed_fn=VECTORS.get):
    retriever = DenseRetriever(InMemoryVectorStore(), InMemoryContextStore(), embed_fn=embed_fn)
    retriever.index([ContextItem(id=name, content=name) for name in VECTORS])
    return retriever


class StaticRetriever:
    def __init__(self, ids):
        self.ids = ids

    def retrieve(self, query, top_k=10):
        return [ContextItem(id=i, content=i) for i in self.ids[:top_k]]


class FailingRetriever:
    def retrieve(self, query, top_k=10):
        raise ConnectionError("backend down")


def test_dense_index_needs_embed_fn():
    retriever = DenseRetriever(InMemoryVectorStore(), InMemoryContextStore())
    with pytest.raises(RetrieverError, match="embed_fn"):
        retriever.index([ContextItem(content="x")])


def test_dense_retrieve_with_embed_fn_scores_are_cosines():
    results = dense().retrieve(QueryBundle(query_str="east"), top_k=3)
    assert [r.id for r in results] == ["east", "northeast", "north"]
    assert [r.score for r in results] == pytest.approx([1.0, 1 / math.sqrt(2), 0.0])
    assert results[0].metadata["retrieval_method"] == "dense"
    assert results[0].token_count == 1  # filled by the default token counter


def test_dense_prefers_query_embedding_over_embed_fn():
    calls = []

    def embed(text):
        calls.append(text)
        return VECTORS[text]

    retriever = dense(embed)
    calls.clear()
    results = retriever.retrieve(QueryBundle(query_str="east", embedding=[0.0, -1.0]), top_k=1)
    assert [r.id for r in results] == ["south"] and calls == []


def test_dense_negative_cosine_is_clipped_and_kept_raw():
    results = dense().retrieve(QueryBundle(query_str="north"), top_k=4)
    assert results[-1].id == "south"
    assert results[-1].score == 0.0 and results[-1].metadata["similarity"] == pytest.approx(-1.0)


def test_dense_retrieve_without_embedding_or_embed_fn():
    retriever = DenseRetriever(InMemoryVectorStore(), InMemoryContextStore())
    with pytest.raises(RetrieverError, match="embed_fn"):
        retriever.retrieve(QueryBundle(query_str="q"))


# BM25Okapi by hand: N=4, avgdl=2.5, k1=1.5, b=0.75, idf = ln((N - df + 0.5) / (df + 0.5)).
DOCS = ["apple banana apple", "banana cherry", "cherry date elder", "fig grape"]


def bm25_term(tf, dl, df, n=4, avgdl=2.5, k1=1.5, b=0.75):
    idf = math.log((n - df + 0.5) / (df + 0.5))
    return idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * dl / avgdl))


def sparse():
    retriever = SparseRetriever()
    assert retriever.index([ContextItem(id=f"d{i}", content=t) for i, t in enumerate(DOCS)]) == 4
    return retriever


def test_sparse_scores_are_bm25_divided_by_the_best():
    results = sparse().retrieve(QueryBundle(query_str="Apple? DATE!"))
    d0 = bm25_term(tf=2, dl=3, df=1)
    d2 = bm25_term(tf=1, dl=3, df=1)
    assert [r.id for r in results] == ["d0", "d2"]  # d1, d3 share no term: not returned
    assert [r.score for r in results] == pytest.approx([1.0, d2 / d0])
    assert [r.metadata["bm25_score"] for r in results] == pytest.approx([d0, d2])
    assert results[0].metadata["retrieval_method"] == "sparse"


def test_sparse_zero_idf_terms_match_nothing():
    # "cherry" is in 2 of 4 documents: Okapi idf ln(2.5 / 2.5) = 0, so no positive score
    assert sparse().retrieve(QueryBundle(query_str="cherry")) == []
    assert sparse().retrieve(QueryBundle(query_str="zebra")) == []


def test_sparse_top_k_and_custom_tokenizer():
    assert len(sparse().retrieve(QueryBundle(query_str="apple date"), top_k=1)) == 1
    retriever = SparseRetriever(tokenize_fn=lambda text: text.split("-"))
    retriever.index([ContextItem(id=i, content=t) for i, t in [("a", "x-y"), ("b", "z-w"), ("c", "v")]])
    assert [r.id for r in retriever.retrieve(QueryBundle(query_str="x"))] == ["a"]


def test_sparse_errors(monkeypatch):
    with pytest.raises(RetrieverError, match="before index"):
        SparseRetriever().retrieve(QueryBundle(query_str="q"))
    with pytest.raises(RetrieverError, match="no items"):
        SparseRetriever().index([])
    monkeypatch.setitem(sys.modules, "rank_bm25", None)  # makes `import rank_bm25` fail
    with pytest.raises(RetrieverError, match="pip install rank-bm25"):
        SparseRetriever().index([ContextItem(content="x")])


def test_hybrid_rrf_numbers():
    hybrid = HybridRetriever([StaticRetriever(["a", "b", "c"]), StaticRetriever(["b", "d"])])
    results = hybrid.retrieve(QueryBundle(query_str="q"))
    raw = {"a": 1 / 61, "b": 1 / 61 + 1 / 62, "c": 1 / 63, "d": 1 / 62}
    assert [r.id for r in results] == ["b", "a", "d", "c"]
    assert [r.metadata["rrf_raw_score"] for r in results] == pytest.approx([raw[i] for i in "badc"])
    # min-max over the returned set: (s - 1/63) / (1/61 + 1/62 - 1/63)
    span = 1 / 61 + 1 / 62 - 1 / 63
    assert [r.score for r in results] == pytest.approx([1.0, (1 / 61 - 1 / 63) / span, (1 / 62 - 1 / 63) / span, 0.0])


def test_hybrid_returns_exactly_rrf_fuse_output():
    """Seed 004: HybridRetriever "Fuse results with RRF": its items are ``rrf_fuse``'s, scores included."""
    lists = [["a", "b", "c"], ["b", "d"]]
    hybrid = HybridRetriever([StaticRetriever(ids) for ids in lists], 10, [2.0, 1.0])
    results = hybrid.retrieve(QueryBundle(query_str="q"), top_k=3)
    expected = rrf_fuse([StaticRetriever(ids).retrieve(None, 3) for ids in lists], [2.0, 1.0], 10, 3)
    assert [(r.id, r.score, r.metadata) for r in results] == [(e.id, e.score, e.metadata) for e in expected]
    # b 2/12 + 1/11, a 2/11, c 2/13 (d 1/12 is cut): a = (2/11 - 2/13) / (2/12 + 1/11 - 2/13)
    assert [r.score for r in results] == pytest.approx([1.0, (2 / 11 - 2 / 13) / (2 / 12 + 1 / 11 - 2 / 13), 0.0])


def test_hybrid_weights_and_k():
    hybrid = HybridRetriever([StaticRetriever(["a", "b", "c"]), StaticRetriever(["b", "d"])], 10, [2.0, 1.0])
    results = hybrid.retrieve(QueryBundle(query_str="q"))
    raw = {"a": 2 / 11, "b": 2 / 12 + 1 / 11, "c": 2 / 13, "d": 1 / 12}
    assert [r.id for r in results] == ["b", "a", "c", "d"]
    assert [r.metadata["rrf_raw_score"] for r in results] == pytest.approx([raw[i] for i in "bacd"])


def test_hybrid_skips_failures_and_fails_when_all_fail():
    hybrid = HybridRetriever([FailingRetriever(), StaticRetriever(["x", "y"])], weights=[5.0, 1.0])
    results = hybrid.retrieve(QueryBundle(query_str="q"), top_k=1)
    assert [r.id for r in results] == ["x"] and results[0].metadata["rrf_raw_score"] == pytest.approx(1 / 61)
    with pytest.raises(RetrieverError, match=r"all 2 sub-retrievers failed.*backend down"):
        HybridRetriever([FailingRetriever(), FailingRetriever()]).retrieve(QueryBundle(query_str="q"))


def test_hybrid_with_real_dense_and_sparse():
    items = [ContextItem(id=f"d{i}", content=t) for i, t in enumerate(DOCS)]
    vectors = {t: [float(i == j) for j in range(4)] for i, t in enumerate(DOCS)}
    vectors["apple"] = [0.0, 0.0, 0.0, 1.0]
    dense_r = DenseRetriever(InMemoryVectorStore(), InMemoryContextStore(), embed_fn=vectors.get)
    dense_r.index(items)
    sparse_r = SparseRetriever()
    sparse_r.index(items)
    results = HybridRetriever([dense_r, sparse_r]).retrieve(QueryBundle(query_str="apple"), top_k=2)
    # dense: d3 (cosine 1), then d0, d1, d2 tied at 0 in index order; sparse: d0 only
    assert [r.id for r in results] == ["d0", "d3"]
    assert [r.metadata["rrf_raw_score"] for r in results] == pytest.approx([1 / 62 + 1 / 61, 1 / 61])


def test_hybrid_construction_errors():
    with pytest.raises(RetrieverError, match="1 weights for 2 retrievers"):
        HybridRetriever([StaticRetriever([]), StaticRetriever([])], weights=[1.0])
    with pytest.raises(RetrieverError, match="at least one"):
        HybridRetriever([])
