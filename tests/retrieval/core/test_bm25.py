"""The one BM25 (seed 000's formula) against hand computation, bm25s (Lucene) and rank_bm25 (Okapi).

Seed formula: idf(t) = log((N - df + 0.5) / (df + 0.5) + 1);
term score = idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * |d| / avgdl)).
"""

import math
from collections import Counter

import numpy as np
import pytest

from retrieval.core import BM25Index, bm25_idf, tokenize

K1, B = 1.5, 0.75

DOCS = [
    ["the", "cat", "sat", "on", "the", "mat"],  # |d| = 6
    ["the", "dog", "sat"],  # |d| = 3
    ["cat", "and", "dog", "and", "cat"],  # |d| = 5
]
AVGDL = 14 / 3


def _term(idf: float, tf: int, length: int) -> float:
    """One term's contribution, written out from the seed formula."""
    return idf * tf * (K1 + 1) / (tf + K1 * (1 - B + B * length / AVGDL))


def test_hand_computed_three_documents():
    index = BM25Index(K1, B).fit(DOCS)
    idf_cat = math.log((3 - 2 + 0.5) / (2 + 0.5) + 1)  # df(cat) = 2
    idf_sat = math.log((3 - 2 + 0.5) / (2 + 0.5) + 1)  # df(sat) = 2
    idf_mat = math.log((3 - 1 + 0.5) / (1 + 0.5) + 1)  # df(mat) = 1
    expected = [
        _term(idf_cat, 1, 6) + _term(idf_sat, 1, 6) + _term(idf_mat, 1, 6),
        _term(idf_sat, 1, 3),
        _term(idf_cat, 2, 5),
    ]
    assert index.scores(["cat", "sat", "mat"]) == pytest.approx(expected, rel=1e-12)
    assert index.avg_dl == pytest.approx(AVGDL)
    assert index.idf["the"] == pytest.approx(math.log(1.5 / 2.5 + 1))
    assert index.idf["and"] == pytest.approx(math.log(2.5 / 1.5 + 1))


def test_top_k_best_first_with_ties_by_lower_index():
    index = BM25Index().fit([["x", "y"], ["y", "x"], ["x", "z"], ["w", "w"]])
    ranked = index.top_k(["y"], 4)
    assert [doc for doc, _ in ranked] == [0, 1, 2, 3]  # docs 0 and 1 tie; 2 and 3 score 0
    assert ranked[0][1] == ranked[1][1] > 0 == ranked[2][1] == ranked[3][1]
    assert index.top_k(["y"], 1) == ranked[:1]
    assert index.top_k(["y"], 0) == []


def test_repeated_query_terms_count_every_time_and_unknown_terms_add_nothing():
    """Issue 18.1: "cat cat dog" adds cat's term score twice (zerda's and rank_bm25's sum over tokens)."""
    index = BM25Index(K1, B).fit(DOCS)
    idf_cat = math.log((3 - 2 + 0.5) / (2 + 0.5) + 1)  # df(cat) = 2
    idf_dog = math.log((3 - 2 + 0.5) / (2 + 0.5) + 1)  # df(dog) = 2
    expected = [
        2 * _term(idf_cat, 1, 6),
        _term(idf_dog, 1, 3),
        2 * _term(idf_cat, 2, 5) + _term(idf_dog, 1, 5),
    ]
    assert index.scores(["cat", "cat", "dog", "unicorn"]) == pytest.approx(expected, rel=1e-12)
    assert index.scores(["cat", "unicorn", "dog", "cat"]) == pytest.approx(expected, rel=1e-12)
    assert index.scores(["cat", "cat"]) != index.scores(["cat"])


def _seed_idf_rank_bm25(corpus: list[list[str]]):
    """rank_bm25's ``BM25Okapi`` with its idf table replaced by the seed's ``log((N - df + 0.5) / (df + 0.5) + 1)``.

    Its tf part is the seed's, so the two then compute the same formula, each with its own code.
    """
    import rank_bm25

    theirs = rank_bm25.BM25Okapi(corpus, k1=K1, b=B)
    df = Counter(term for doc in corpus for term in set(doc))
    n = len(corpus)
    theirs.idf = {term: math.log((n - count + 0.5) / (count + 0.5) + 1) for term, count in df.items()}
    return theirs


def test_repeated_words_sum_as_rank_bm25_get_scores_does(scifact_tokens, scifact):
    """rank_bm25 loops over the query's tokens as they come: a repeated word adds its score again."""
    corpus = scifact_tokens[:800]
    ours, theirs = BM25Index(K1, B).fit(corpus), _seed_idf_rank_bm25(corpus)
    hand = ["cell", "cell", "protein", "cell", "unicorn"]
    np.testing.assert_allclose(ours.scores(hand), theirs.get_scores(hand), rtol=1e-12, atol=1e-12)
    queries = [tokenize(scifact.queries[q]) for q in scifact.test_query_ids]
    repeated = [q for q in queries if len(set(q)) < len(q)][:25]
    assert len(repeated) >= 10
    for query in repeated:
        np.testing.assert_allclose(ours.scores(query), theirs.get_scores(query), rtol=1e-12, atol=1e-12)


def test_idf_is_positive_even_for_terms_in_every_document():
    assert bm25_idf(3, 3) == pytest.approx(math.log(0.5 / 3.5 + 1))
    assert bm25_idf(3, 3) > 0


def test_empty_corpus_gives_empty_index():
    index = BM25Index().fit([])
    assert len(index) == 0 and index.idf == {} and index.avg_dl == 0.0
    assert index.scores(["cat"]) == []
    assert index.top_k(["cat"], 5) == []


def test_refit_replaces_everything():
    index = BM25Index().fit(DOCS)
    index.fit([["only", "one"]])
    assert len(index) == 1 and set(index.idf) == {"only", "one"}
    assert index.scores(["cat"]) == [0.0]


@pytest.mark.parametrize(("k1", "b"), [(-0.1, 0.75), (1.2, 1.5), (1.2, -0.1), (float("nan"), 0.5)])
def test_invalid_parameters_rejected(k1, b):
    with pytest.raises(ValueError, match="BM25"):
        BM25Index(k1, b)


@pytest.fixture(scope="module")
def scifact_tokens(scifact):
    return [tokenize(text) for text in scifact.texts]


@pytest.fixture(scope="module")
def scifact_indexes(scifact_tokens):
    """Our index and bm25s's (Lucene variant, float64), built once over the same SciFact tokens."""
    import bm25s

    theirs = bm25s.BM25(method="lucene", k1=K1, b=B, dtype="float64")
    theirs.index(scifact_tokens, show_progress=False)
    return BM25Index(K1, B).fit(scifact_tokens), theirs


@pytest.mark.parametrize(
    "every", [pytest.param(6, id="50-test-queries"), pytest.param(1, id="all-300", marks=pytest.mark.slow)]
)
def test_parity_with_bm25s_lucene_on_scifact(scifact, scifact_indexes, every):
    """bm25s "lucene" has the seed's idf; its tf part is tf / (tf + k1 * (1 - b + b * |d| / avgdl)),
    i.e. without the (k1 + 1) factor (bm25s/scoring.py: _score_tfc_lucene = _score_tfc_robertson).
    So our scores are exactly (k1 + 1) times bm25s's, and the rankings are identical."""
    ours, theirs = scifact_indexes
    query_ids = scifact.test_query_ids[::every]
    compared = 0
    for query_id in query_ids:
        # Same tokens for both, repeats kept: both sum a repeated word's score again.
        tokens = [t for t in tokenize(scifact.queries[query_id]) if t in ours.idf]
        if not tokens:
            continue
        their_scores = theirs.get_scores(tokens)
        np.testing.assert_allclose(ours.scores(tokens), (K1 + 1) * their_scores, rtol=1e-9, atol=1e-12)
        their_top = np.lexsort((np.arange(len(their_scores)), -their_scores))[:10]
        assert [doc for doc, _ in ours.top_k(tokens, 10)] == their_top.tolist(), query_id
        compared += 1
    assert len(scifact.test_query_ids) == 300
    assert compared == len(query_ids)


def test_tf_part_agrees_with_rank_bm25_okapi(scifact_tokens):
    """rank_bm25's BM25Okapi idf is log((N - df + 0.5) / (df + 0.5)) with negatives floored, not the
    seed's; its tf part is the seed's. So for one-term queries, score / idf must agree per document."""
    import rank_bm25

    corpus = scifact_tokens[:500]
    ours = BM25Index(K1, B).fit(corpus)
    theirs = rank_bm25.BM25Okapi(corpus, k1=K1, b=B)
    terms = [t for t in ("cancer", "cell", "protein", "the", "of", "mice", "risk", "dna") if t in ours.idf]
    assert len(terms) >= 6
    for term in terms:
        their_idf = theirs.idf[term]
        assert abs(their_idf) > 1e-9
        np.testing.assert_allclose(
            np.array(ours.scores([term])) / ours.idf[term],
            theirs.get_scores([term]) / their_idf,
            rtol=1e-9,
            atol=1e-12,
        )
