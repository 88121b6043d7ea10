"""The one cosine similarity of the project (seed 000's ``_cosine``; seed 004's default similarity)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def cosine(a: np.ndarray | Sequence[float], b: np.ndarray | Sequence[float]) -> float:
    """Cosine similarity of two vectors; 0.0 if either has zero norm (avoids division by zero)."""
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    norm_a = float(np.linalg.norm(a))
    norm_b = float(np.linalg.norm(b))
    if norm_a == 0.0 or norm_b == 0.0:
        return 0.0
    return float(np.dot(a, b) / (norm_a * norm_b))


def cosine_matrix(queries: np.ndarray, docs: np.ndarray) -> np.ndarray:
    """Pairwise cosine of the rows of ``queries`` (m x d) and ``docs`` (n x d): an m x n matrix.

    Rows of zero norm give 0.0, as ``cosine`` does.
    """
    queries = np.atleast_2d(np.asarray(queries, dtype=np.float64))
    docs = np.atleast_2d(np.asarray(docs, dtype=np.float64))
    q_norm = np.linalg.norm(queries, axis=1, keepdims=True)
    d_norm = np.linalg.norm(docs, axis=1, keepdims=True)
    q_unit = np.divide(queries, q_norm, out=np.zeros_like(queries), where=q_norm > 0)
    d_unit = np.divide(docs, d_norm, out=np.zeros_like(docs), where=d_norm > 0)
    return q_unit @ d_unit.T
