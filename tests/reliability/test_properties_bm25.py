"""Properties of the one BM25 (``retrieval.core.BM25Index``) and its fast path (``SparseBM25``).

Monotonicity in the query, equivariance under a permutation of the corpus, and fast == reference,
for any small corpus Hypothesis can draw (a vocabulary of six terms makes ties and shared terms common).
"""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from retrieval.core import BM25Index, bm25_fast

SETTINGS = settings(max_examples=75, deadline=None)
VOCAB = ["sand", "fox", "dune", "night", "water", "oasis"]

documents = st.lists(st.sampled_from(VOCAB), max_size=10)
corpora = st.lists(documents, min_size=1, max_size=15)
queries = st.lists(st.sampled_from([*VOCAB, "unseen"]), max_size=5)
k1s = st.floats(0.0, 3.0)
bs = st.floats(0.0, 1.0)


@SETTINGS
@given(corpus=corpora, query=queries, term=st.sampled_from(VOCAB), k1=k1s, b=bs)
def test_adding_a_matching_term_never_lowers_a_score(corpus, query, term, k1, b):
    index = BM25Index(k1=k1, b=b).fit(corpus)
    before, after = index.scores(query), index.scores([*query, term])
    for doc, (old, new) in enumerate(zip(before, after, strict=True)):
        assert new >= old
        if term in corpus[doc] and term not in query and k1 > 0:
            assert new > old  # a new term the document contains adds a positive idf * tf part


@SETTINGS
@given(corpus=corpora, query=queries, k1=k1s, b=bs, data=st.data())
def test_permuting_the_corpus_permutes_the_results(corpus, query, k1, b, data):
    order = data.draw(st.permutations(range(len(corpus))))
    original = BM25Index(k1=k1, b=b).fit(corpus)
    permuted = BM25Index(k1=k1, b=b).fit([corpus[i] for i in order])
    scores, permuted_scores = original.scores(query), permuted.scores(query)
    assert [scores[i] for i in order] == permuted_scores  # same operations: bit-identical
    # top_k: the same (document, score) pairs, in an order that differs at most inside ties.
    top, permuted_top = original.top_k(query, len(corpus)), permuted.top_k(query, len(corpus))
    assert sorted(top, key=lambda p: (-p[1], p[0])) == sorted(
        ((order[i], s) for i, s in permuted_top), key=lambda p: (-p[1], p[0])
    )
    assert [s for _, s in top] == [s for _, s in permuted_top]


@settings(max_examples=40, deadline=None)  # each example also runs the numba top-k kernel
@given(corpus=corpora, batch=st.lists(queries, min_size=1, max_size=4), k=st.integers(1, 20), k1=k1s, b=bs)
def test_sparse_bm25_equals_the_reference(corpus, batch, k, k1, b):
    reference = BM25Index(k1=k1, b=b).fit(corpus)
    fast = bm25_fast.SparseBM25(k1=k1, b=b).fit(corpus)
    for query in batch:
        np.testing.assert_allclose(fast.scores(query), reference.scores(query), rtol=0, atol=1e-9)
    docs, scores = fast.top_k_batch(batch, k)
    assert docs.shape == scores.shape == (len(batch), min(k, len(corpus)))
    for row, query in enumerate(batch):
        expected = reference.top_k(query, k)
        np.testing.assert_allclose(scores[row], [s for _, s in expected], rtol=0, atol=1e-9)
        ref_scores = reference.scores(query)
        # Each returned document really has the returned score; rankings agree except inside 1e-9 ties.
        np.testing.assert_allclose([ref_scores[d] for d in docs[row]], scores[row], rtol=0, atol=1e-9)
        for position, (doc, score) in enumerate(expected):
            if all(abs(score - other) > 1e-9 for j, (_, other) in enumerate(expected) if j != position):
                assert docs[row][position] == doc
