"""Exact dense retrieval by cosine: batched float32 matrix products (numpy) or FAISS when installed.

Rows are L2-normalised when added (zero rows stay zero and score 0.0, as ``retrieval.core.cosine``
gives), so the inner product is the cosine. ``backend="auto"`` picks FAISS's exact ``IndexFlatIP``
when ``faiss`` imports, else numpy. The numpy backend breaks ties by lower row index, like
``heapq.nlargest``; FAISS orders ties inside its result by lower index too, but which of several rows
tied at the k-th score makes the cut is FAISS's choice.
"""

from __future__ import annotations

from typing import Any

import numpy as np

BACKENDS = ("auto", "numpy", "faiss")
# The numpy backend scores queries in batches of at most this many float32 cells (64 MB).
MAX_BATCH_CELLS = 1 << 24
# ``top_k_rows``: a row with more than this many times k candidates is selected by ``argpartition``.
CROWDED_FACTOR = 8


def normalize_rows(vectors: np.ndarray) -> np.ndarray:
    """float32 C-contiguous copy of ``vectors`` (n, d) with unit-length rows; zero rows stay zero."""
    vectors = np.atleast_2d(np.asarray(vectors, dtype=np.float32))
    norms = np.sqrt(np.einsum("ij,ij->i", vectors, vectors))[:, None]  # no (n, d) temporary, unlike linalg.norm
    return np.divide(vectors, norms, out=np.zeros_like(vectors), where=norms > 0)


def top_k_rows(scores: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Top ``k`` of every row of a dense score matrix: ``(indices, scores)``, best first, ties by lower index.

    Every row equals ``heapq.nlargest`` on it. Split a row's first columns into ``k`` blocks: each
    block's maximum is a different cell, so at least ``k`` cells reach the smallest of those maxima,
    and the row's top ``k`` are among the cells at or above it. Those few candidates are found with
    one comparison over the matrix and sorted (score desc, index asc), exactly; this is several times
    faster than ``argpartition`` over whole rows. A row with too many candidates (a flat row, e.g. a
    zero query) takes the ``argpartition`` path instead.
    """
    n_rows, n_cols = scores.shape
    k = max(0, min(k, n_cols))
    if k == 0 or n_rows == 0:
        return np.empty((n_rows, k), dtype=np.int64), np.empty((n_rows, k), dtype=scores.dtype)
    width = n_cols // k
    threshold = scores[:, : k * width].reshape(n_rows, k, width).max(axis=2).min(axis=1, keepdims=True)
    rows, cols = np.nonzero(scores >= threshold)
    counts = np.bincount(rows, minlength=n_rows)
    crowded = counts > CROWDED_FACTOR * k
    if crowded.any():
        kept = ~crowded[rows]
        rows, cols, counts = rows[kept], cols[kept], np.where(crowded, 0, counts)
    values = scores[rows, cols]
    order = np.lexsort((cols, -values, rows))  # rows grouped, each best first, ties by lower index
    fast = np.flatnonzero(~crowded)
    take = (np.cumsum(counts) - counts)[fast, None] + np.arange(k)
    indices = np.empty((n_rows, k), dtype=np.int64)
    top = np.empty((n_rows, k), dtype=scores.dtype)
    indices[fast], top[fast] = cols[order[take]], values[order[take]]
    if crowded.any():
        indices[crowded], top[crowded] = _top_k_partition(scores[crowded], k)
    return indices, top


def _top_k_partition(scores: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """``top_k_rows`` by ``argpartition`` (k candidates per row; a row with more cells tied at its k-th
    score than the partition kept is redone exactly)."""
    n_rows, n_cols = scores.shape
    if k < n_cols:
        candidates = np.argpartition(scores, n_cols - k, axis=1)[:, n_cols - k :]
    else:
        candidates = np.broadcast_to(np.arange(n_cols), (n_rows, n_cols))
    values = np.take_along_axis(scores, candidates, axis=1)
    order = np.lexsort((candidates, -values), axis=1)
    indices = np.take_along_axis(candidates, order, axis=1).astype(np.int64)
    values = np.take_along_axis(values, order, axis=1)
    if k < n_cols:
        kth = values[:, -1:]
        for row in np.flatnonzero(np.count_nonzero(scores >= kth, axis=1) > k):
            indices[row], values[row] = _top_k_with_ties(scores[row], k, kth[row, 0])
    return indices, values


def _top_k_with_ties(row: np.ndarray, k: int, kth: float) -> tuple[np.ndarray, np.ndarray]:
    """One row's top k when cells tie at the k-th score: every better cell, then the lowest tied ones."""
    better = np.flatnonzero(row > kth)
    better = better[np.lexsort((better, -row[better]))]
    indices = np.concatenate([better, np.flatnonzero(row == kth)[: k - len(better)]])
    return indices, row[indices]


def _import_faiss() -> Any:
    import faiss

    return faiss


def faiss_available() -> bool:
    """True when ``faiss`` (the optional ``zerda-eval[faiss]`` extra) imports."""
    try:
        _import_faiss()
    except ImportError:
        return False
    return True


class DenseIndex:
    """Exact top-k cosine search over float32 row vectors (numpy or FAISS ``IndexFlatIP``)."""

    def __init__(self, vectors: np.ndarray, backend: str = "auto"):
        if backend not in BACKENDS:
            raise ValueError(f"DenseIndex backend must be one of {BACKENDS}, got {backend!r}")
        if backend == "faiss" and not faiss_available():
            raise ImportError("DenseIndex backend 'faiss' needs faiss: pip install 'zerda-eval[faiss]'")
        if backend == "auto":
            backend = "faiss" if faiss_available() else "numpy"
        self.backend = backend
        self.dim = np.atleast_2d(vectors).shape[1]
        # The numpy backend's rows; the faiss backend keeps them only inside FAISS (no second copy).
        self.vectors = np.empty((0, self.dim), dtype=np.float32)
        self._faiss_index = _import_faiss().IndexFlatIP(self.dim) if backend == "faiss" else None
        self.add(vectors)

    def __len__(self) -> int:
        return self._faiss_index.ntotal if self._faiss_index is not None else len(self.vectors)

    def add(self, vectors: np.ndarray) -> None:
        """Append rows (normalised here); their indices continue after the existing ones.

        FAISS gets the rows as given (its one copy) and they are normalised inside its storage, in
        place (``faiss.normalize_L2``: zero rows stay zero), so a build makes no second copy of them.
        """
        rows = np.atleast_2d(np.asarray(vectors, dtype=np.float32))
        if rows.shape[1] != self.dim:
            raise ValueError(f"DenseIndex holds {self.dim}-dimensional vectors, got {rows.shape[1]}")
        if self._faiss_index is not None:
            faiss, start = _import_faiss(), self._faiss_index.ntotal
            self._faiss_index.add(np.ascontiguousarray(rows))
            stored = faiss.rev_swig_ptr(self._faiss_index.get_xb(), self._faiss_index.ntotal * self.dim)
            faiss.normalize_L2(stored.reshape(-1, self.dim)[start:])
        else:
            rows = normalize_rows(rows)
            self.vectors = np.concatenate([self.vectors, rows]) if len(self.vectors) else rows

    def search(self, query_vectors: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """Top ``k`` rows per query by cosine: ``(indices int64, scores float32)``, shape (m, min(k, n))."""
        queries = normalize_rows(query_vectors)
        if queries.shape[1] != self.dim:
            raise ValueError(f"DenseIndex holds {self.dim}-dimensional vectors, got queries of {queries.shape[1]}")
        width = max(0, min(k, len(self)))
        if width == 0:
            return np.empty((len(queries), 0), dtype=np.int64), np.empty((len(queries), 0), dtype=np.float32)
        if self._faiss_index is not None:
            scores, indices = self._faiss_index.search(queries, width)
            order = np.lexsort((indices, -scores), axis=1)
            return np.take_along_axis(indices, order, 1).astype(np.int64), np.take_along_axis(scores, order, 1)
        batch = max(1, MAX_BATCH_CELLS // len(self))
        parts = [top_k_rows(queries[i : i + batch] @ self.vectors.T, width) for i in range(0, len(queries), batch)]
        return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])
