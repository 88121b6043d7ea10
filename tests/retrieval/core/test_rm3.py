"""RM3 (``retrieval.core.rm3``) on hand-computed examples, and its weighted pass against rank_bm25.

The expected numbers are worked out in the comments from the formula (module docstring):
P(q|d) = s(d) / sum of the feedback scores; P(t|d) = tf / |d|; P(t|R) = sum_d P(t|d) P(q|d), top fb_terms,
divided by their sum; w(t) = a * c(t, q) / |q| + (1 - a) * P(t|R).
"""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pytest

from retrieval.core import BM25Index, tokenize
from retrieval.core.bm25_fast import SparseBM25
from retrieval.core.bm25_weighted import sparse_weighted_top_k
from retrieval.core.rm3 import RM3, expanded_query, relevance_model, rm3_top_k

# Two feedback documents and one that scores 0 (it shares no query term, so it is no feedback).
FEEDBACK = [
    (Counter({"cat": 2, "sat": 1, "mat": 1}), 3.0),  # |d| = 4, P(q|d) = 3 / (3 + 1) = 0.75
    (Counter({"cat": 1, "dog": 1}), 1.0),  # |d| = 2, P(q|d) = 1 / 4 = 0.25
    (Counter({"fish": 5}), 0.0),  # left out
]


def test_relevance_model_by_hand():
    # cat: 2/4 * 0.75 + 1/2 * 0.25 = 0.5; sat = mat: 1/4 * 0.75 = 0.1875; dog: 1/2 * 0.25 = 0.125; fish: none.
    assert relevance_model(FEEDBACK, 10) == pytest.approx({"cat": 0.5, "sat": 0.1875, "mat": 0.1875, "dog": 0.125})
    # Top 3: cat, then mat and sat (tied, both kept); their sum 0.875: cat 0.5 / 0.875 = 4/7, mat = sat = 3/14.
    assert relevance_model(FEEDBACK, 3) == pytest.approx({"cat": 4 / 7, "mat": 3 / 14, "sat": 3 / 14})
    # Top 2: cat and, of the tied mat and sat, mat (ties by term); sum 0.6875: cat 8/11, mat 3/11.
    assert relevance_model(FEEDBACK, 2) == pytest.approx({"cat": 8 / 11, "mat": 3 / 11})
    assert relevance_model([(Counter({"x": 1}), 0.0)], 5) == {}


def test_expanded_query_by_hand():
    # Query "cat bird": c/|q| = 0.5 each. With a = 0.5 and fb_terms 3 (cat 4/7, mat = sat 3/14):
    # cat 0.5 * 0.5 + 0.5 * 4/7 = 15/28; bird 0.25; mat = sat 0.5 * 3/14 = 3/28. The four sum to 1.
    weights = expanded_query(["cat", "bird"], FEEDBACK, RM3(fb_docs=3, fb_terms=3, original_query_weight=0.5))
    assert weights == pytest.approx({"cat": 15 / 28, "bird": 0.25, "mat": 3 / 28, "sat": 3 / 28})
    assert list(weights) == ["cat", "bird", "mat", "sat"]  # the query's order, then the expansion's
    # A repeated query word weighs more: "cat cat bird" -> cat 2/3, bird 1/3; a = 1 keeps the query alone.
    only_query = expanded_query(["cat", "cat", "bird"], FEEDBACK, RM3(original_query_weight=1.0))
    assert only_query == pytest.approx({"cat": 2 / 3, "bird": 1 / 3})
    # a = 0: the relevance model alone (bird, in no feedback document, drops out).
    assert expanded_query(["cat", "bird"], FEEDBACK, RM3(fb_terms=2, original_query_weight=0.0)) == pytest.approx(
        {"cat": 8 / 11, "mat": 3 / 11}
    )
    assert expanded_query([], FEEDBACK, RM3()) == {}


# k1 = 0 makes a term's BM25 its idf wherever it occurs (tf * 1 / (tf + 0)), so the passes can be done by hand.
CORPUS = [
    ["apple", "banana", "apple", "cherry"],  # d0, |d| = 4
    ["apple", "date"],  # d1, |d| = 2
    ["banana", "date", "elder", "fig"],  # d2: no query term
    ["grape"],  # d3
]
LOG2 = math.log(2)  # idf of a term in 2 of 4 documents: log((4 - 2 + 0.5) / (2 + 0.5) + 1) = log 2


def test_rm3_retrieval_by_hand_on_both_engines():
    # First pass "apple": d0 and d1 score log 2 (tied), so P(q|d) = 0.5 each.
    # RM1: apple 2/4 * 0.5 + 1/2 * 0.5 = 0.5; date 1/2 * 0.5 = 0.25; banana = cherry 1/4 * 0.5 = 0.125.
    # fb_terms 2: apple 0.5, date 0.25 -> 2/3 and 1/3. a = 0.5: apple 0.5 + 0.5 * 2/3 = 5/6; date 1/6.
    # Second pass: d0 5/6 log 2; d1 (5/6 + 1/6) log 2 = log 2; d2 (date) 1/6 log 2; d3 0.
    expected = [(1, LOG2), (0, 5 / 6 * LOG2), (2, 1 / 6 * LOG2), (3, 0.0)]
    rm3 = RM3(fb_docs=2, fb_terms=2, original_query_weight=0.5)
    reference = BM25Index(k1=0.0, b=0.75).fit(CORPUS)
    ranked = rm3_top_k(
        ["apple"], 4, rm3, reference.top_k, lambda d: Counter(reference.corpus[d]), reference.weighted_top_k
    )
    assert [doc for doc, _ in ranked] == [doc for doc, _ in expected]
    assert [score for _, score in ranked] == pytest.approx([score for _, score in expected], rel=1e-12)
    fast = SparseBM25(k1=0.0, b=0.75).fit(CORPUS)

    def fast_top_k(tokens, k):
        rows, scores = fast.top_k_batch([tokens], k)
        return list(zip(rows[0].tolist(), scores[0].tolist(), strict=True))

    def fast_weighted_top_k(weights, k):
        return sparse_weighted_top_k(fast, weights, k)

    assert rm3_top_k(["apple"], 4, rm3, fast_top_k, lambda d: Counter(CORPUS[d]), fast_weighted_top_k) == ranked


def _seed_idf_rank_bm25(corpus: list[list[str]]):
    """rank_bm25's ``BM25Okapi`` with the seed's idf table (its tf part is the seed's): an outside BM25."""
    import rank_bm25

    theirs = rank_bm25.BM25Okapi(corpus, k1=1.5, b=0.75)
    df = Counter(term for doc in corpus for term in set(doc))
    theirs.idf = {term: math.log((len(corpus) - n + 0.5) / (n + 0.5) + 1) for term, n in df.items()}
    return theirs


def test_weighted_scores_are_the_weighted_sum_of_rank_bm25_term_scores(scifact):
    corpus = [tokenize(text) for text in scifact.texts[:1500]]
    ours, theirs = BM25Index().fit(corpus), _seed_idf_rank_bm25(corpus)
    fast = SparseBM25().fit(corpus)
    for qid in scifact.test_query_ids[:20]:
        tokens = tokenize(scifact.queries[qid])
        feedback = [(Counter(corpus[d]), s) for d, s in ours.top_k(tokens, 10)]
        weights = expanded_query(tokens, feedback, RM3())
        assert len(weights) > len(set(tokens))  # the expansion added terms
        expected = sum(w * theirs.get_scores([term]) for term, w in weights.items())
        np.testing.assert_allclose(ours.weighted_scores(weights), expected, rtol=1e-12, atol=1e-12)
        top = ours.weighted_top_k(weights, 20)
        assert sparse_weighted_top_k(fast, weights, 20) == top  # the fast engine: same documents, same bits
        assert [d for d, _ in top] == sorted(range(len(corpus)), key=lambda d: (-expected[d], d))[:20]


@pytest.mark.parametrize("bad", [{"fb_docs": 0}, {"fb_terms": 0}, {"original_query_weight": 1.5}, {"fb_docs": 2.0}])
def test_invalid_parameters_raise(bad):
    with pytest.raises(ValueError, match="RM3"):
        RM3(**bad)
