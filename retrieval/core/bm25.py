"""The one BM25 of the project, in pure Python (the reference every fast path is checked against).

Formula (seed 000, "Standard BM25"):

    score(d, q) = sum over the query's tokens t, as they come, of
                  idf(t) * tf(t, d) * (k1 + 1) / (tf(t, d) + k1 * (1 - b + b * |d| / avgdl))
    idf(t)      = log((N - df(t) + 0.5) / (df(t) + 0.5) + 1)

A repeated query word adds its term score each time ("cat cat dog" counts cat twice), as zerda's
``BM25Scorer.score`` and rank_bm25's ``get_scores`` do. The seed's "Q = number of unique query terms"
is a complexity remark ("Complexity: O(D x Q)"), not the formula (issue 18.1). Terms outside the
corpus vocabulary add nothing. Scoring walks an inverted index, which gives the same numbers as
scoring every document against every term, with zero for documents that share no term.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence

from retrieval.core.top_k import top_k_indices

DEFAULT_K1 = 1.5
DEFAULT_B = 0.75


def bm25_idf(n_docs: int, df: int) -> float:
    """Seed 000's idf: ``log((N - df + 0.5) / (df + 0.5) + 1)``, always positive (Lucene's variant)."""
    return math.log((n_docs - df + 0.5) / (df + 0.5) + 1.0)


def validate_bm25_params(k1: float, b: float) -> None:
    """Raise ``ValueError`` unless ``k1 >= 0`` and ``0 <= b <= 1`` (both finite)."""
    if not (isinstance(k1, int | float) and math.isfinite(k1) and k1 >= 0):
        raise ValueError(f"BM25 k1 must be a finite number >= 0, got {k1!r}")
    if not (isinstance(b, int | float) and 0.0 <= b <= 1.0):
        raise ValueError(f"BM25 b must be a number in [0, 1], got {b!r}")


class BM25Index:
    """Pure-Python BM25 over pre-tokenised documents.

    ``fit`` replaces the whole index; ``scores`` and ``top_k`` do not mutate it, so concurrent
    queries on a built index are safe.
    """

    def __init__(self, k1: float = DEFAULT_K1, b: float = DEFAULT_B):
        validate_bm25_params(k1, b)
        self.k1 = k1
        self.b = b
        self.corpus: list[list[str]] = []
        self.idf: dict[str, float] = {}
        self.avg_dl: float = 0.0
        self._postings: dict[str, list[tuple[int, float]]] = {}  # term -> [(doc index, term weight)]

    def fit(self, corpus_tokens: Sequence[list[str]]) -> BM25Index:
        """Index documents given as token lists; an empty corpus leaves an empty index.

        Each posting stores its finished term weight ``idf * tf * (k1 + 1) / (tf + k1 * norm)``, so a
        query only adds numbers (the same numbers, in the same order, as computing them per query).
        """
        self.corpus = list(corpus_tokens)
        self.idf, self._postings = {}, {}
        self.avg_dl = 0.0
        if not self.corpus:
            return self
        n_docs = len(self.corpus)
        lengths = [len(doc) for doc in self.corpus]
        self.avg_dl = sum(lengths) / n_docs
        term_freqs: dict[str, list[tuple[int, int]]] = {}
        for doc_index, doc in enumerate(self.corpus):
            for term, tf in Counter(doc).items():
                term_freqs.setdefault(term, []).append((doc_index, tf))
        self.idf = {term: bm25_idf(n_docs, len(posting)) for term, posting in term_freqs.items()}
        # avg_dl is 0 only when every document is empty; then no term matches and the norm is unused.
        avg_dl = self.avg_dl or 1.0
        norm = [self.k1 * (1.0 - self.b + self.b * length / avg_dl) for length in lengths]
        k1_plus_1 = self.k1 + 1.0
        for term, posting in term_freqs.items():
            idf = self.idf[term]
            self._postings[term] = [
                (doc_index, idf * tf * k1_plus_1 / (tf + norm[doc_index])) for doc_index, tf in posting
            ]
        return self

    def __len__(self) -> int:
        return len(self.corpus)

    def scores(self, query_tokens: Iterable[str]) -> list[float]:
        """BM25 score of every document for the query, in document order (a repeated token adds again)."""
        scores = [0.0] * len(self.corpus)
        for term in query_tokens:
            for doc_index, weight in self._postings.get(term, ()):
                scores[doc_index] += weight
        return scores

    def top_k(self, query_tokens: Iterable[str], k: int) -> list[tuple[int, float]]:
        """``[(doc_index, score), ...]`` best first, ties by lower doc index, at most ``k`` long."""
        if not self.corpus or k <= 0:
            return []
        scores = self.scores(query_tokens)
        return [(doc_index, scores[doc_index]) for doc_index in top_k_indices(scores, k)]

    def weighted_scores(self, term_weights: Mapping[str, float]) -> list[float]:
        """``sum over t of w(t) * bm25(t, d)`` for every document: a weighted query (RM3's second pass).

        Terms are added in the mapping's order; ``{t: 2.0}`` scores as the query ``[t, t]``.
        """
        scores = [0.0] * len(self.corpus)
        for term, weight in term_weights.items():
            for doc_index, term_score in self._postings.get(term, ()):
                scores[doc_index] += weight * term_score
        return scores

    def weighted_top_k(self, term_weights: Mapping[str, float], k: int) -> list[tuple[int, float]]:
        """``top_k`` of ``weighted_scores``: best first, ties by lower doc index, at most ``k`` long."""
        if not self.corpus or k <= 0:
            return []
        scores = self.weighted_scores(term_weights)
        return [(doc_index, scores[doc_index]) for doc_index in top_k_indices(scores, k)]
