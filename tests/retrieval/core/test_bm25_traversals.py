"""Every SparseBM25 traversal (exhaustive, term at a time, document at a time) against the reference BM25Index.

Hypothesis draws corpora with skewed vocabularies (a few words in most documents, as stopwords are), repeated
words in documents and queries, empty documents and queries, and ``k`` above the number of matches; tiny
posting blocks and document windows put block and window boundaries everywhere. Each traversal must return
the reference's top-k with scores to 1e-12 relative, and all traversals the very same arrays (one summation
order, one tie rule: higher score first, then lower document index).
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from retrieval.core import BM25Index
from retrieval.core.bm25_fast import (
    BLOCK_POSTINGS,
    COMMON_DF_SHARE,
    DAAT_MIN_COMMON_TERMS,
    EXHAUSTIVE_MIN_TERMS,
    TRAVERSALS,
    SparseBM25,
)

VOCAB = [f"t{i}" for i in range(12)]
# Zipf-like weights: t0 in most documents, t11 in few.
skewed_words = st.sampled_from(VOCAB[:2]) | st.sampled_from(VOCAB[:5]) | st.sampled_from(VOCAB)
documents = st.lists(skewed_words, max_size=12)
corpora = st.lists(documents, min_size=1, max_size=60)
queries = st.lists(skewed_words | st.just("unseen"), max_size=7)


def forced(corpus: list[list[str]], traversal: str, materialised: bool, block: int, window: int) -> SparseBM25:
    """An index of ``corpus`` that answers every query through ``traversal``, with tiny blocks and windows."""
    index = SparseBM25(traversal=traversal)
    index.materialise_max_postings = 1 << 40 if materialised else 0
    index.block_postings, index.window_docs = block, window
    return index.fit(corpus)


def assert_reference_top_k(docs: np.ndarray, scores: np.ndarray, reference: BM25Index, query: list[str], k: int):
    """``docs``/``scores`` are the reference's top k: scores to 1e-12 relative, the same documents except
    inside ties that the reference's own summation order breaks by a few ulps."""
    expected = reference.top_k(query, k)
    np.testing.assert_allclose(scores, [s for _, s in expected], rtol=1e-12, atol=0)
    all_scores = reference.scores(query)
    np.testing.assert_allclose([all_scores[d] for d in docs], scores, rtol=1e-12, atol=0)
    for position, (doc, score) in enumerate(expected):
        if all(abs(score - other) > 1e-12 * score for j, (_, other) in enumerate(expected) if j != position):
            assert docs[position] == doc


@settings(max_examples=60, deadline=None)
@given(
    corpus=corpora,
    batch=st.lists(queries, min_size=1, max_size=4),
    k=st.integers(1, 70),
    materialised=st.booleans(),
    block=st.integers(1, 4),
    window=st.integers(1, 8),
)
def test_every_traversal_returns_the_reference_top_k(corpus, batch, k, materialised, block, window):
    reference = BM25Index().fit(corpus)
    results = {}
    for traversal in TRAVERSALS:
        index = forced(corpus, traversal, materialised, block, window)
        docs, scores = index.top_k_batch(batch, k)
        assert docs.shape == (len(batch), min(k, len(corpus)))
        assert index.traversals == {traversal: len(batch)}
        for row, query in enumerate(batch):
            assert_reference_top_k(docs[row], scores[row], reference, query, k)
        results[traversal] = docs, scores
    for traversal in TRAVERSALS[1:]:  # one summation order, one tie rule: bit-identical
        assert np.array_equal(results[traversal][0], results["exhaustive"][0])
        assert np.array_equal(results[traversal][1], results["exhaustive"][1])


def zipf_corpus(seed: int, n_docs: int) -> tuple[list[list[str]], list[list[str]]]:
    rng = np.random.default_rng(seed)
    words = [f"w{i}" for i in range(2000)]

    def draw(n: int, low: int, high: int) -> list[list[str]]:
        return [[words[min(r, 1999)] for r in rng.zipf(1.2, size=rng.integers(low, high)) - 1] for _ in range(n)]

    return draw(n_docs, 5, 40), draw(60, 1, 12)


@pytest.mark.parametrize("traversal", ["taat", "daat"])
def test_pruned_traversals_equal_the_exhaustive_one_on_a_zipfian_corpus(traversal: str) -> None:
    """Default blocks and windows, thousands of documents: pruning happens, the arrays stay identical."""
    corpus, asked = zipf_corpus(7, 6000)
    exhaustive = SparseBM25(traversal="exhaustive")
    exhaustive.materialise_max_postings = 0
    pruned = SparseBM25(traversal=traversal)
    pruned.materialise_max_postings = 0
    exhaustive.fit(corpus), pruned.fit(corpus)
    for k in (1, 10, 100):
        expected, got = exhaustive.top_k_batch(asked, k), pruned.top_k_batch(asked, k)
        assert np.array_equal(got[0], expected[0]) and np.array_equal(got[1], expected[1])
    reference = BM25Index().fit(corpus)
    docs, scores = pruned.top_k_batch(asked, 10)
    for row, query in enumerate(asked):
        assert_reference_top_k(docs[row], scores[row], reference, query, 10)


def test_block_bounds_are_each_blocks_largest_reference_weight() -> None:
    """``block_upper`` against the reference's own posting weights (``BM25Index`` stores them per term)."""
    corpus, _ = zipf_corpus(3, 3000)
    index, reference = SparseBM25().fit(corpus), BM25Index().fit(corpus)
    by_length = sorted(range(len(corpus)), key=lambda doc: (len(corpus[doc]), doc))  # the index's numbering
    assert index.original_ids.tolist() == by_length
    internal = {doc: position for position, doc in enumerate(by_length)}
    for term, row in list(index.vocabulary.items())[:300]:
        weights = [weight for _, weight in sorted((internal[doc], w) for doc, w in reference._postings[term])]
        first = index._block_indptr[row]
        for block, start in enumerate(range(0, len(weights), BLOCK_POSTINGS)):
            assert index.block_upper[first + block] == max(weights[start : start + BLOCK_POSTINGS])
    assert index.nbytes >= index.block_upper.nbytes > 0


def test_auto_chooses_by_index_size_and_query_postings_and_counts_each_choice() -> None:
    corpus, asked = zipf_corpus(5, 4000)
    asked += [[f"w{i}" for i in range(14)], [f"w{i}" for i in range(20)]]  # long queries
    small = SparseBM25().fit(corpus)  # materialised: every query exhaustive
    small.top_k_batch(asked, 10)
    assert small.traversals == {"exhaustive": len(asked)}
    large = SparseBM25()
    large.materialise_max_postings, large.prune_min_postings = 0, 200
    large.fit(corpus)
    large.top_k_batch(asked, 10)
    df = Counter(word for doc in corpus for word in set(doc))  # from the corpus, not the index
    postings = [sum(df[w] for w in set(q)) for q in asked]
    distinct = [len({w for w in q if w in df}) for q in asked]
    common = [sum(df[w] >= COMMON_DF_SHARE * len(corpus) for w in set(q)) for q in asked]
    pruned = [c for c, p in zip(common, postings, strict=True) if p >= 200]
    assert large.traversals == {
        "exhaustive": len(asked) - len(pruned),
        "daat": sum(c >= DAAT_MIN_COMMON_TERMS for c in pruned),
        "taat": sum(c < DAAT_MIN_COMMON_TERMS for c in pruned),
    }
    assert 0 < large.traversals["daat"] < len(asked)
    pruning = SparseBM25()  # materialised, every query with enough postings to prune
    pruning.prune_min_postings = 0
    pruning.fit(corpus).top_k_batch(asked, 10)
    assert pruning.traversals == {
        "exhaustive": sum(n >= EXHAUSTIVE_MIN_TERMS for n in distinct),
        "taat": sum(n < EXHAUSTIVE_MIN_TERMS for n in distinct),
    }


def test_an_unknown_traversal_is_refused() -> None:
    with pytest.raises(ValueError, match="traversal must be 'auto' or one of exhaustive, taat, daat; got 'wand'"):
        SparseBM25(traversal="wand")


# Long documents first in the corpus, short ones last: the index numbers them the other way round.
varied_lengths = st.lists(st.lists(skewed_words, min_size=1, max_size=30), min_size=1, max_size=60)


@settings(max_examples=40, deadline=None)
@given(
    corpus=varied_lengths,
    words=st.lists(st.sampled_from(VOCAB), min_size=1, max_size=4),
    k=st.integers(1, 70),
    params=st.sampled_from([(1.5, 0.0), (0.0, 0.75)]),
    materialised=st.booleans(),
    block=st.integers(1, 4),
    window=st.integers(1, 8),
)
def test_ties_across_lengths_go_to_the_lower_original_index(corpus, words, k, params, materialised, block, window):
    """b = 0 (no length norm) or k1 = 0 (tf and length ignored): documents of different lengths tie exactly on a
    one-word query; every traversal must rank them by corpus position, as the reference does, although the
    index numbers documents by length."""
    corpus = sorted(corpus, key=len, reverse=True)
    k1, b = params
    reference = BM25Index(k1=k1, b=b).fit(corpus)
    for traversal in TRAVERSALS:
        index = SparseBM25(k1=k1, b=b, traversal=traversal)
        index.materialise_max_postings = 1 << 40 if materialised else 0
        index.prune_min_postings, index.block_postings, index.window_docs = 0, block, window
        index.fit(corpus)
        docs, scores = index.top_k_batch([[word] for word in words], k)
        for row, word in enumerate(words):
            expected = reference.top_k([word], k)
            assert docs[row].tolist() == [doc for doc, _ in expected], (traversal, word)
            assert scores[row].tolist() == [score for _, score in expected]


@pytest.mark.parametrize("traversal", TRAVERSALS)
@pytest.mark.parametrize("materialised", [True, False])
def test_a_long_document_first_in_the_corpus_wins_a_tie_against_a_short_one(traversal: str, materialised: bool):
    """b = 0: "a" scores the same in both documents; document 0 (four tokens) is numbered after document 1
    (one token) inside the index, and must still come first."""
    index = SparseBM25(b=0.0, traversal=traversal)
    index.materialise_max_postings, index.prune_min_postings = (1 << 40 if materialised else 0), 0
    index.fit([["a", "x", "x", "x"], ["a"], ["x"]])
    assert index.original_ids.tolist() == [1, 2, 0]
    docs, scores = index.top_k_batch([["a"]], 3)
    assert docs.tolist() == [[0, 1, 2]]
    assert scores[0, 0] == scores[0, 1] > scores[0, 2] == 0.0
