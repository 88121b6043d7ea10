"""Corpus-fitted LSA: TF-IDF (sublinear tf) + truncated SVD, learnt on the corpus being searched.

It needs no downloaded weights and works in any language the analyzer tokenises, Arabic included.
Because it learns from the searched corpus it is not a pretrained model: its ``params`` say
``corpus_fitted=True`` so results tables can label it (Deerwester et al., JASIS 1990).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np

from retrieval.core import analyzer
from retrieval.embeddings.base import BaseEmbedder, EmbedderError, check_positive_int, first_line

DEFAULT_DIM = 256


class LSAEmbedder(BaseEmbedder):
    """TF-IDF over ``retrieval.core.analyzer`` tokens, projected on the top ``dim`` singular vectors.

    ``normalization``, ``stemmer`` and ``stopwords`` are the analyzer's options ("none" = off).
    ``min_df`` drops terms found in fewer documents: it speeds up the SVD but costs quality on
    question-style queries (``min_df=2``: TyDi-ar nDCG@10 0.558 -> 0.409), so it is 1 unless asked.
    ``fit(texts)`` must run before ``embed``. When the corpus has fewer than ``dim`` documents or terms,
    the extra components are zero columns, so ``dim`` and every cosine stay as they would be.
    """

    def __init__(
        self,
        dim: int = DEFAULT_DIM,
        normalization: str = "none",
        stemmer: str | None = None,
        stopwords: str | None = None,
        sublinear_tf: bool = True,
        min_df: int = 1,
        random_state: int = 0,
    ):
        check_positive_int("lsa dim", dim)
        stemmer = None if stemmer == "none" else stemmer
        stopwords = None if stopwords == "none" else stopwords
        self._analyze = analyzer(normalization, stemmer, stopwords)  # validates the options early
        self.name = "lsa"
        self.dim = dim
        self.params = {
            "corpus_fitted": True,
            "dim": dim,
            "normalization": normalization,
            "stemmer": stemmer,
            "stopwords": stopwords,
            "sublinear_tf": sublinear_tf,
            "min_df": min_df,
            "random_state": random_state,
        }
        self.n_components = 0
        self._vectorizer = None
        self._basis: np.ndarray | None = None  # (n_terms, n_components), C-contiguous

    def fit(self, texts: Iterable[str]) -> LSAEmbedder:
        """Learn the vocabulary, idf and SVD basis from ``texts`` (the corpus to be searched), in one pass."""
        from sklearn.decomposition import TruncatedSVD
        from sklearn.feature_extraction.text import TfidfVectorizer
        from threadpoolctl import threadpool_limits

        vectorizer = TfidfVectorizer(
            analyzer=self._analyze, sublinear_tf=self.params["sublinear_tf"], min_df=self.params["min_df"]
        )
        try:
            tfidf = vectorizer.fit_transform(texts)
        except ValueError as exc:  # empty corpus or no token at all
            raise EmbedderError(f"lsa cannot be fitted on this corpus: {first_line(exc)}") from exc
        # TruncatedSVD needs n_components < number of terms; a corpus of n docs has rank <= n.
        self.n_components = min(self.dim, tfidf.shape[1] - 1, tfidf.shape[0])
        if self.n_components < 1:
            raise EmbedderError(f"lsa needs at least 2 distinct terms to fit, got {tfidf.shape[1]}")
        svd = TruncatedSVD(n_components=self.n_components, random_state=self.params["random_state"])
        with threadpool_limits(limits=1, user_api="blas"):  # oversubscribed BLAS threads made it 3-8x slower
            svd.fit(tfidf)
        # Project with a C-contiguous basis: TruncatedSVD.transform multiplies by components_.T, which
        # makes scipy copy the whole (terms x components) matrix on every call (50 ms per query here).
        self._vectorizer, self._basis = vectorizer, np.ascontiguousarray(svd.components_.T)
        return self

    def fitted_state(self) -> dict[str, np.ndarray]:
        """Vocabulary (terms in column order), idf and SVD basis: all ``restore`` needs, no pickle."""
        if self._basis is None:
            raise EmbedderError("lsa embedder is not fitted; call fit(corpus_texts) before fitted_state()")
        terms = np.array(self._vectorizer.get_feature_names_out(), dtype=str)
        return {"terms": terms, "idf": self._vectorizer.idf_, "basis": self._basis}

    def restore(self, state: Mapping[str, np.ndarray]) -> LSAEmbedder:
        """Become the embedder ``fitted_state`` was taken from (same vectors, bit for bit)."""
        from sklearn.feature_extraction.text import TfidfVectorizer

        terms, idf, basis = (np.asarray(state[key]) for key in ("terms", "idf", "basis"))
        if not (terms.ndim == idf.ndim == 1 and terms.size == idf.size == basis.shape[0] and basis.ndim == 2):
            raise EmbedderError(f"lsa state does not fit together: {terms.size} terms, {idf.size} idf, {basis.shape}")
        vectorizer = TfidfVectorizer(
            analyzer=self._analyze,
            sublinear_tf=self.params["sublinear_tf"],
            vocabulary={term: column for column, term in enumerate(terms.tolist())},
        )
        vectorizer.idf_ = idf
        self.n_components = basis.shape[1]
        self._vectorizer, self._basis = vectorizer, np.ascontiguousarray(basis)
        return self

    def _encode(self, texts: list[str]) -> np.ndarray:
        if self._basis is None:
            raise EmbedderError("lsa embedder is not fitted; call fit(corpus_texts) before embed()")
        reduced = self._vectorizer.transform(texts) @ self._basis
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        out[:, : self.n_components] = reduced
        return out
