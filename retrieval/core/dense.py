"""Dense retrieval by cosine: exact (numpy, block by block, or FAISS's flat index) and approximate (FAISS).

Rows are L2-normalised when added (zero rows stay zero and score 0.0, as ``retrieval.core.cosine``
gives), so the inner product is the cosine. ``backend="auto"`` picks FAISS's exact ``IndexFlatIP``
when ``faiss`` imports, else numpy. The numpy backend breaks ties by lower row index, like
``heapq.nlargest``; FAISS orders ties inside its result by lower index too, but which of several rows
tied at the k-th score makes the cut is FAISS's choice.

``exact_top_k`` is the one exact search of unit rows: it scores the corpus ``EXACT_BLOCK_ROWS`` rows at
a time and keeps a running top k, so a read-only memory map (``np.load(mmap_mode="r")``) larger than
memory is searched with bounded memory: the pages of a block are released once it is scored. Every
block has the same shape whether the rows are in memory or mapped, so both give the same scores, bit for
bit. ``ApproximateIndex`` builds FAISS's IVF, IVF-PQ or HNSW index over the same rows, block by block;
which rows it returns is an approximation whose cost a caller measures against ``exact_top_k``.
"""

from __future__ import annotations

import mmap
from typing import Any

import numpy as np

BACKENDS = ("auto", "numpy", "faiss")
# The numpy backend scores queries in batches of at most this many float32 cells (64 MB).
MAX_BATCH_CELLS = 1 << 24
# ``top_k_rows``: a row with more than this many times k candidates is selected by ``argpartition``.
CROWDED_FACTOR = 8
# ``exact_top_k`` scores the corpus this many rows at a time (a block of 384-d float32 rows: 96 MB).
EXACT_BLOCK_ROWS = 1 << 16


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


def exact_top_k(
    vectors: np.ndarray, queries: np.ndarray, k: int, block_rows: int = EXACT_BLOCK_ROWS
) -> tuple[np.ndarray, np.ndarray]:
    """Top ``k`` rows of ``vectors`` (n, d) for every row of ``queries`` (m, d) by inner product, exactly.

    Both are taken as given (unit rows make the inner product the cosine). Returns ``(indices int64,
    scores)`` of shape (m, min(k, n)), best first, ties by lower row index: every row equals
    ``top_k_rows`` over the whole score matrix, because the top k of a union is the top k of each part's
    top k under one total order (score desc, index asc). ``vectors`` may be a read-only memory map: it is
    read ``block_rows`` rows at a time, and each block's pages leave the process once scored
    (``release_pages``), so resident memory stays near one block whatever the corpus size. Queries are
    scored against a block in batches of at most ``MAX_BATCH_CELLS`` cells.
    """
    queries = np.atleast_2d(queries)
    n_rows, n_queries = len(vectors), len(queries)
    width = max(0, min(k, n_rows))
    best = np.empty((n_queries, 0), dtype=np.int64), np.empty((n_queries, 0), dtype=np.float32)
    if width == 0:
        return best
    batch = max(1, MAX_BATCH_CELLS // block_rows)
    for start in range(0, n_rows, block_rows):
        block = np.asarray(vectors[start : start + block_rows])
        parts = [top_k_rows(queries[i : i + batch] @ block.T, width) for i in range(0, n_queries, batch)]
        found = np.concatenate([p[0] for p in parts]) + start, np.concatenate([p[1] for p in parts])
        best = found if start == 0 else _merge_top_k(best, found, width)
        release_pages(vectors, start, start + len(block))
    return best


def _merge_top_k(
    first: tuple[np.ndarray, np.ndarray], second: tuple[np.ndarray, np.ndarray], k: int
) -> tuple[np.ndarray, np.ndarray]:
    """The top ``k`` per row of two ``(indices, scores)`` candidate sets, best first, ties by lower index."""
    indices = np.concatenate([first[0], second[0]], axis=1)
    scores = np.concatenate([first[1], second[1]], axis=1)
    order = np.lexsort((indices, -scores), axis=1)[:, :k]
    return np.take_along_axis(indices, order, 1), np.take_along_axis(scores, order, 1)


def release_pages(vectors: np.ndarray, start: int, stop: int) -> None:
    """Drop rows ``[start, stop)`` of a memory-mapped array from this process's resident pages.

    The file's pages stay in the OS page cache (a later read is a cache hit, not a disk read); only
    the process's mapping of them goes, so its resident memory does not grow with the corpus. Arrays
    that are not a ``np.memmap`` (in memory) are left alone. ``_mmap`` is numpy's handle on the map.
    """
    mapping = getattr(vectors, "_mmap", None)
    if mapping is None or not hasattr(mmap, "MADV_DONTNEED") or stop <= start:
        return
    origin = np.frombuffer(mapping, dtype=np.uint8).ctypes.data
    first = vectors[start:stop].ctypes.data - origin
    last = first + (stop - start) * vectors.strides[0]
    first -= first % mmap.PAGESIZE  # madvise takes whole pages; a page shared with the next block refaults
    mapping.madvise(mmap.MADV_DONTNEED, first, last - first)


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
        return exact_top_k(self.vectors, queries, width)


APPROXIMATE_INDEXES = ("ivf", "ivfpq", "hnsw")
# Defaults of the approximate indexes' parameters (``ApproximateIndex``): FAISS's own where it has one.
NPROBE = 8  # inverted lists visited per query (FAISS's default is 1, which loses too much to be a useful default)
PQ_M = 16  # sub-vectors of a product-quantised code (must divide the dimension)
PQ_NBITS = 8  # bits per sub-vector code
HNSW_M = 32  # graph neighbours per node
EF_CONSTRUCTION = 40  # FAISS's default
EF_SEARCH = 64  # candidates kept per query; at least k is used
TRAIN_PER_CENTROID = 64  # training rows per k-means centroid (FAISS warns below 39)


def default_nlist(n_rows: int) -> int:
    """Inverted lists of an IVF index over ``n_rows`` rows: 4 * sqrt(n) (FAISS's guideline is 4-16 sqrt(n))."""
    return max(1, round(4 * n_rows**0.5))


class ApproximateIndex:
    """FAISS approximate inner-product search over unit rows: ``ivf`` (IVF-Flat), ``ivfpq`` (IVF-PQ) or ``hnsw``.

    ``build(vectors)`` reads the rows ``EXACT_BLOCK_ROWS`` at a time (a memory map stays bounded while the
    rows are added; IVF-Flat and HNSW then hold every vector in memory, IVF-PQ ``pq_m`` bytes a vector).
    ``search`` returns ``(indices int64, scores float32)`` like ``exact_top_k``: best first, ties inside the
    result by lower index; rows the index did not reach are left out (an IVF query visiting few lists may
    get fewer than k). IVF-PQ's scores are its approximate (quantised) inner products.

    Determinism: training samples evenly spaced rows (no random draw) and FAISS's k-means uses fixed seeds,
    so IVF and IVF-PQ build the same index on every run; HNSW's graph depends on the order threads insert
    rows, so it is built with one OpenMP thread (slower, reproducible). Search is deterministic for a
    given index; which of several rows tied at the k-th score a multi-threaded search keeps is FAISS's.
    """

    def __init__(
        self,
        kind: str,
        nlist: int | None = None,
        nprobe: int = NPROBE,
        pq_m: int = PQ_M,
        pq_nbits: int = PQ_NBITS,
        hnsw_m: int = HNSW_M,
        ef_construction: int = EF_CONSTRUCTION,
        ef_search: int = EF_SEARCH,
    ):
        if kind not in APPROXIMATE_INDEXES:
            raise ValueError(f"approximate index must be one of {APPROXIMATE_INDEXES}, got {kind!r}")
        self.kind, self.nlist, self.nprobe = kind, nlist, nprobe
        self.pq_m, self.pq_nbits = pq_m, pq_nbits
        self.hnsw_m, self.ef_construction, self.ef_search = hnsw_m, ef_construction, ef_search
        self._index: Any = None

    def settings(self) -> dict[str, Any]:
        """The parameters that ran (``nlist`` resolved for the corpus once built)."""
        if self.kind == "hnsw":
            return {"hnsw_m": self.hnsw_m, "ef_construction": self.ef_construction, "ef_search": self.ef_search}
        settings = {"nlist": self.nlist, "nprobe": self.nprobe}
        return settings | ({"pq_m": self.pq_m, "pq_nbits": self.pq_nbits} if self.kind == "ivfpq" else {})

    def build(self, vectors: np.ndarray) -> ApproximateIndex:
        """Train (IVF kinds) and add every row of ``vectors`` (n, d), unit rows, in corpus order.

        Raises ``ValueError`` (one line, naming the parameter) when the corpus cannot hold the index:
        fewer rows than ``nlist`` or than a PQ codebook's ``2 ** pq_nbits`` centroids, or a ``pq_m``
        that does not divide the dimension.
        """
        faiss = _import_faiss()
        n_rows, dim = vectors.shape
        if self.kind == "hnsw":
            self._index = faiss.IndexHNSWFlat(dim, self.hnsw_m, faiss.METRIC_INNER_PRODUCT)
            self._index.hnsw.efConstruction = self.ef_construction
            threads = faiss.omp_get_max_threads()
            faiss.omp_set_num_threads(1)  # a multi-threaded HNSW insert order, hence its graph, varies per run
            try:
                self._add(vectors)
            finally:
                faiss.omp_set_num_threads(threads)
            return self
        self.nlist = self.nlist or default_nlist(n_rows)
        centroids = self.nlist
        if n_rows < self.nlist:
            raise ValueError(f"nlist = {self.nlist} is more than the corpus's {n_rows} vectors; set nlist <= {n_rows}")
        quantizer = faiss.IndexFlatIP(dim)
        if self.kind == "ivf":
            self._index = faiss.IndexIVFFlat(quantizer, dim, self.nlist, faiss.METRIC_INNER_PRODUCT)
        else:
            if dim % self.pq_m:
                raise ValueError(f"pq_m = {self.pq_m} does not divide the vectors' dimension {dim}; use a divisor")
            if n_rows < 2**self.pq_nbits:
                raise ValueError(
                    f"pq_nbits = {self.pq_nbits} needs at least {2**self.pq_nbits} vectors, the corpus has {n_rows}; "
                    "lower pq_nbits"
                )
            self._index = faiss.IndexIVFPQ(
                quantizer, dim, self.nlist, self.pq_m, self.pq_nbits, faiss.METRIC_INNER_PRODUCT
            )
            centroids = max(centroids, 2**self.pq_nbits)
        self._index.own_fields = True
        quantizer.this.disown()  # the IVF index owns (and frees) its quantizer
        sample = min(n_rows, TRAIN_PER_CENTROID * centroids)
        rows = np.unique(np.linspace(0, n_rows - 1, sample).astype(np.int64))  # evenly spaced: no random draw
        self._index.train(np.ascontiguousarray(vectors[rows], dtype=np.float32))
        self._add(vectors)
        return self

    def _add(self, vectors: np.ndarray) -> None:
        for start in range(0, len(vectors), EXACT_BLOCK_ROWS):
            block = np.ascontiguousarray(vectors[start : start + EXACT_BLOCK_ROWS], dtype=np.float32)
            self._index.add(block)
            release_pages(vectors, start, start + len(block))

    def search(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """Approximate top ``k`` per query row: ``(indices int64, scores float32)``, each row best first.

        Rows are padded to the widest result with index -1 and score -inf when the index found fewer.
        """
        queries = np.ascontiguousarray(np.atleast_2d(queries), dtype=np.float32)
        width = max(0, min(k, self._index.ntotal))
        if width == 0:
            return np.empty((len(queries), 0), dtype=np.int64), np.empty((len(queries), 0), dtype=np.float32)
        if self.kind == "hnsw":  # search-time settings are read on every search: a caller may change them
            self._index.hnsw.efSearch = max(self.ef_search, width)
        else:
            self._index.nprobe = self.nprobe
        scores, indices = self._index.search(queries, width)
        scores = np.where(indices < 0, -np.inf, scores).astype(np.float32)
        order = np.lexsort((np.where(indices < 0, np.iinfo(np.int64).max, indices), -scores), axis=1)
        return np.take_along_axis(indices, order, 1).astype(np.int64), np.take_along_axis(scores, order, 1)
