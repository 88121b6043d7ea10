"""Shared building blocks of both retrieval APIs: one tokenizer, one BM25, one cosine, one RRF."""

from retrieval.core.bm25 import BM25Index, bm25_idf
from retrieval.core.rrf import rrf_contribution, rrf_scores
from retrieval.core.similarity import cosine, cosine_matrix
from retrieval.core.tokenize import analyzer, normalize_arabic, tokenize

__all__ = [
    "BM25Index",
    "analyzer",
    "bm25_idf",
    "cosine",
    "cosine_matrix",
    "normalize_arabic",
    "rrf_contribution",
    "rrf_scores",
    "tokenize",
]
