"""Corpus-fitted LSA against a hand-computed TF-IDF: with full rank, LSA keeps the TF-IDF cosines."""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pytest

from retrieval.core import analyzer, cosine_matrix
from retrieval.embeddings import EmbedderError, load_embedder
from retrieval.embeddings.lsa import LSAEmbedder

CORPUS = [
    "the cat sat on the mat",
    "the dog sat on the log",
    "cats and dogs are pets",
    "stock markets fell sharply",
    "markets rallied after the fall",
    "the cat chased the dog dog dog",
]


def hand_tfidf(texts: list[str]) -> np.ndarray:
    """scikit-learn's documented TF-IDF, written out: (1 + ln tf) * (ln((1 + n) / (1 + df)) + 1), L2 rows."""
    docs = [Counter(analyzer()(t)) for t in texts]
    vocab = sorted(set().union(*docs))
    n = len(docs)
    df = {term: sum(term in d for d in docs) for term in vocab}
    matrix = np.array(
        [[(1 + math.log(d[t])) * (math.log((1 + n) / (1 + df[t])) + 1) if d[t] else 0.0 for t in vocab] for d in docs]
    )
    return matrix / np.linalg.norm(matrix, axis=1, keepdims=True)


def test_full_rank_lsa_preserves_tfidf_cosines():
    lsa = LSAEmbedder(dim=64, min_df=1).fit(CORPUS)
    assert lsa.n_components == len(CORPUS)  # rank-limited, padded up to dim with zero columns
    vectors = lsa.embed(CORPUS)
    assert vectors.shape == (len(CORPUS), 64) and vectors.dtype == np.float32
    reference = hand_tfidf(CORPUS)
    np.testing.assert_allclose(vectors @ vectors.T, reference @ reference.T, atol=1e-5)


def test_truncation_keeps_topics_apart():
    lsa = LSAEmbedder(dim=2, min_df=1).fit(CORPUS)
    sims = cosine_matrix(lsa.embed(["cat dog"]), lsa.embed(CORPUS))[0]
    assert sims[[0, 1, 5]].min() > sims[[3, 4]].max()


def test_labelled_corpus_fitted_and_deterministic():
    first, second = LSAEmbedder(dim=3, min_df=1), LSAEmbedder(dim=3, min_df=1)
    assert first.name == "lsa" and first.params["corpus_fitted"] is True
    assert first.params == {
        "corpus_fitted": True,
        "dim": 3,
        "normalization": "none",
        "stemmer": None,
        "stopwords": None,
        "min_df": 1,
        "sublinear_tf": True,
        "random_state": 0,
    }
    np.testing.assert_array_equal(first.fit(CORPUS).embed(CORPUS), second.fit(CORPUS).embed(CORPUS))


def test_arabic_light_normalisation_matches_letter_variants():
    # Documents 0 and 1 both contain ذهب and have four terms each; only document 0 has the other words,
    # written with hamza forms, alef maksura and taa marbuta, while the query writes them bare.
    corpus = ["أحمد ذهب إلى المدرسة", "ذهب الطقس جميل اليوم", "قرأ الطالب الكتاب"]
    query = ["احمد ذهب الى المدرسه"]
    plain = LSAEmbedder(dim=8, min_df=1).fit(corpus)
    light = LSAEmbedder(dim=8, normalization="light", min_df=1).fit(corpus)
    plain_sims = cosine_matrix(plain.embed(query), plain.embed(corpus))[0]
    light_sims = cosine_matrix(light.embed(query), light.embed(corpus))[0]
    assert plain_sims[0] == pytest.approx(plain_sims[1], abs=1e-5)  # only ذهب matches: a tie
    assert light_sims[0] == pytest.approx(1.0, abs=1e-5)  # same terms as document 0 once normalised
    assert light_sims[1] < 0.5


def test_english_stemmer_joins_inflections():
    corpus = ["running shoes for runners", "a quiet evening at home"]
    stemmed = LSAEmbedder(dim=4, stemmer="english", min_df=1).fit(corpus)
    plain = LSAEmbedder(dim=4, min_df=1).fit(corpus)
    assert np.abs(plain.embed(["runs"])).sum() == 0.0  # unknown term: zero vector, cosine 0
    assert float(stemmed.embed(["run"])[0] @ stemmed.embed(corpus)[0]) > 0.5


def test_errors_are_clear():
    with pytest.raises(EmbedderError, match=r"not fitted; call fit\(corpus_texts\) before embed\(\)"):
        LSAEmbedder().embed(["query"])
    with pytest.raises(EmbedderError, match="lsa cannot be fitted on this corpus"):
        LSAEmbedder().fit([])
    with pytest.raises(EmbedderError, match="lsa dim must be a positive integer"):
        load_embedder("lsa", dim=0)
    with pytest.raises(ValueError, match="unknown normalization 'heavy'"):
        LSAEmbedder(normalization="heavy")


def test_min_df_drops_terms_of_a_single_document():
    corpus = ["apple banana", "apple cherry", "banana durian"]
    vocabulary = LSAEmbedder(dim=2, min_df=2).fit(corpus)._vectorizer.vocabulary_
    assert sorted(vocabulary) == ["apple", "banana"]  # cherry and durian occur in one document each
    assert len(LSAEmbedder(dim=2, min_df=1).fit(corpus)._vectorizer.vocabulary_) == 4
    assert len(LSAEmbedder(dim=2).fit(corpus)._vectorizer.vocabulary_) == 4  # default: every term
