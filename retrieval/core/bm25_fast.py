"""BM25 on a sparse matrix: the same numbers as ``BM25Index``, scored for a batch of queries at once.

``fit`` precomputes every (term, document) weight of the seed-000 formula once (eager scoring, as
bm25s does), with the same float64 operations in the same order as ``BM25Index.scores``, so each
weight is bit-identical to the reference's. ``scores`` sums a query's weight rows with a sparse
product; ``top_k_batch`` runs a compiled kernel (numba, parallel over queries) that walks the posting
lists of each query's terms and keeps the k best documents in a heap, so no dense score matrix is
built. A query word repeated ``c`` times adds ``c`` times its weight, as the reference adds it
``c`` times (issue 18.1: the seed's "Q = number of unique query terms" is a complexity remark). Terms
are summed in vocabulary order rather than query order, which moves a score by at most a few ulps
(tests check 1e-9 and identical rankings).

``save`` writes the CSR arrays as ``.npy`` so ``SparseBM25.load(dir, mmap=True)`` can serve corpora
larger than memory from the page cache.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

import numba
import numpy as np
import scipy.sparse as sp

from retrieval.core.bm25 import DEFAULT_B, DEFAULT_K1, bm25_idf, validate_bm25_params

_ARRAYS = ("data", "indices", "indptr")
# Terms in at least this share of documents also get a dense weight row, within a budget of cells.
DENSE_MIN_DF_SHARE = 0.25
MAX_DENSE_CELLS = 1 << 25  # 256 MB of float64


# The kernel of ``top_k_batch``, per query: add each term's posting weights into a dense score row
# (frequent terms, df >= N / 4, have their weights stored densely too, as adding 0.0 changes nothing),
# then scan the row in document order keeping the k best in a heap whose root is the worst kept
# (lowest score, then highest doc index), so ties go to the lower index as with ``heapq.nlargest``.


@numba.njit(cache=True, inline="always")
def _worse(score_a: float, doc_a: int, score_b: float, doc_b: int) -> bool:
    return score_a < score_b or (score_a == score_b and doc_a > doc_b)


@numba.njit(cache=True)
def _sift_down(heap_scores, heap_docs, size, pos):  # type: ignore[no-untyped-def]
    while True:
        child = 2 * pos + 1
        if child >= size:
            return
        right = child + 1
        if right < size and _worse(heap_scores[right], heap_docs[right], heap_scores[child], heap_docs[child]):
            child = right
        if not _worse(heap_scores[child], heap_docs[child], heap_scores[pos], heap_docs[pos]):
            return
        heap_scores[pos], heap_scores[child] = heap_scores[child], heap_scores[pos]
        heap_docs[pos], heap_docs[child] = heap_docs[child], heap_docs[pos]
        pos = child


@numba.njit(cache=True)
def _push(heap_scores, heap_docs, size, score, doc):  # type: ignore[no-untyped-def]
    heap_scores[size], heap_docs[size] = score, doc
    pos = size
    while pos > 0:
        parent = (pos - 1) // 2
        if not _worse(heap_scores[pos], heap_docs[pos], heap_scores[parent], heap_docs[parent]):
            break
        heap_scores[pos], heap_scores[parent] = heap_scores[parent], heap_scores[pos]
        heap_docs[pos], heap_docs[parent] = heap_docs[parent], heap_docs[pos]
        pos = parent


@numba.njit(cache=True, parallel=True)
def _top_k_kernel(  # type: ignore[no-untyped-def]
    indptr,
    indices,
    data,
    dense_slot,
    dense_rows,
    query_indptr,
    query_terms,
    query_counts,
    n_docs,
    n_chunks,
    out_docs,
    out_scores,
):
    n_queries, k = out_docs.shape
    for chunk in numba.prange(n_chunks):
        scores = np.zeros(n_docs)
        heap_scores = np.empty(k)
        heap_docs = np.empty(k, dtype=np.int64)
        for query in range(chunk * n_queries // n_chunks, (chunk + 1) * n_queries // n_chunks):
            for term_pos in range(query_indptr[query], query_indptr[query + 1]):
                term, count = query_terms[term_pos], query_counts[term_pos]
                slot = dense_slot[term]
                if slot >= 0:  # a frequent term: a sequential add of its dense row beats a scatter
                    for doc in range(n_docs):  # in place: ``count * row`` would allocate a row per term
                        scores[doc] += count * dense_rows[slot, doc]
                else:
                    for posting in range(indptr[term], indptr[term + 1]):
                        scores[indices[posting]] += count * data[posting]
            for doc in range(k):
                _push(heap_scores, heap_docs, doc, scores[doc], doc)
            # Later documents have higher indices, so only a strictly higher score displaces the root.
            for doc in range(k, n_docs):
                if scores[doc] > heap_scores[0]:
                    heap_scores[0], heap_docs[0] = scores[doc], doc
                    _sift_down(heap_scores, heap_docs, k, 0)
            scores[:] = 0.0
            for pos in range(k - 1, -1, -1):  # pop the worst first, so the row ends best first
                out_scores[query, pos], out_docs[query, pos] = heap_scores[0], heap_docs[0]
                heap_scores[0], heap_docs[0] = heap_scores[pos], heap_docs[pos]
                _sift_down(heap_scores, heap_docs, pos, 0)


# One query (or one thread) runs serially: waking the thread pool costs more than it saves then.
_top_k_kernel_serial = numba.njit(cache=True)(_top_k_kernel.py_func)


class SparseBM25:
    """Eager sparse BM25 (seed-000 formula, ``retrieval.core.tokenize`` tokens), equal to ``BM25Index``.

    ``weights`` is a ``(n_terms, n_docs)`` float64 CSR matrix (one posting list per row);
    ``vocabulary`` maps a term to its row. ``fit`` replaces the whole index; queries never mutate it.
    """

    def __init__(self, k1: float = DEFAULT_K1, b: float = DEFAULT_B):
        validate_bm25_params(k1, b)
        self.k1 = k1
        self.b = b
        self.vocabulary: dict[str, int] = {}
        self.weights: sp.csr_matrix = sp.csr_matrix((0, 0), dtype=np.float64)
        self.avg_dl: float = 0.0
        self._dense_slot = np.empty(0, dtype=np.int64)
        self._dense_rows = np.empty((0, 0), dtype=np.float64)

    @property
    def n_docs(self) -> int:
        return self.weights.shape[1]

    def __len__(self) -> int:
        return self.n_docs

    def fit(self, corpus_tokens: Iterable[list[str]]) -> SparseBM25:
        """Index documents given as token lists (the input of ``BM25Index.fit``) in ONE pass.

        A generator streams: only its token ids (int32) are held, never the token lists.
        """
        vocabulary: dict[str, int] = {}
        lengths: list[int] = []

        def terms() -> Iterator[str]:
            for doc in corpus_tokens:
                lengths.append(len(doc))
                yield from doc

        term_ids = np.fromiter((vocabulary.setdefault(term, len(vocabulary)) for term in terms()), dtype=np.int32)
        n_docs = len(lengths)
        doc_lengths = np.asarray(lengths, dtype=np.int64)
        doc_ids = np.repeat(np.arange(n_docs, dtype=np.int32), doc_lengths)
        # Duplicate (term, doc) pairs are summed into term frequencies by the COO -> CSR conversion.
        tf = sp.csr_matrix(
            (np.ones(len(term_ids)), (term_ids, doc_ids)), shape=(len(vocabulary), n_docs), dtype=np.float64
        )
        tf.sum_duplicates()
        self.vocabulary = vocabulary
        self.avg_dl = int(doc_lengths.sum()) / n_docs if n_docs else 0.0
        # Same operations, same order as BM25Index.fit / .scores, so each weight is bit-identical.
        avg_dl = self.avg_dl or 1.0
        length_norm = self.k1 * (1.0 - self.b + self.b * doc_lengths.astype(np.float64) / avg_dl)
        idf = np.array([bm25_idf(n_docs, int(df)) for df in np.diff(tf.indptr)], dtype=np.float64)
        row_idf = np.repeat(idf, np.diff(tf.indptr))
        tf.data = row_idf * tf.data * (self.k1 + 1.0) / (tf.data + length_norm[tf.indices])
        self.weights = tf
        self._build_dense_rows()
        return self

    def _build_dense_rows(self) -> None:
        """Copy the weight rows of the most frequent terms (df >= N / 4, within budget) to a dense array."""
        df = np.diff(self.weights.indptr)
        n_dense = MAX_DENSE_CELLS // max(self.n_docs, 1)
        frequent = np.flatnonzero(df >= max(1, DENSE_MIN_DF_SHARE * self.n_docs))
        frequent = np.sort(frequent[np.argsort(-df[frequent], kind="stable")][:n_dense])
        self._dense_slot = np.full(self.weights.shape[0], -1, dtype=np.int64)
        self._dense_slot[frequent] = np.arange(len(frequent))
        self._dense_rows = self.weights[frequent].toarray()

    def _query_arrays(self, queries: Sequence[Iterable[str]]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Each query's terms known to the index, CSR-style: ``(indptr, term rows, counts)``.

        A repeated query word counts every time (issue 18.1): its weight row is added ``count`` times.
        Plain arrays, no scipy matrix: building one per call cost more than a small query's scoring.
        """
        lookup = self.vocabulary.get
        indptr = [0]
        columns: list[int] = []
        counts: list[float] = []
        for tokens in queries:
            terms = Counter(c for c in map(lookup, tokens) if c is not None)
            for column in sorted(terms):
                columns.append(column)
                counts.append(terms[column])
            indptr.append(len(columns))
        return (
            np.array(indptr, dtype=np.int64),
            np.array(columns, dtype=np.int32),
            np.array(counts, dtype=np.float64),
        )

    def scores(self, query_tokens: Iterable[str]) -> np.ndarray:
        """BM25 score of every document for one query, in document order (float64)."""
        indptr, columns, counts = self._query_arrays([query_tokens])
        query = sp.csr_matrix((counts, columns, indptr), shape=(1, self.weights.shape[0]))
        return (query @ self.weights).toarray()[0]

    def top_k_batch(self, queries_tokens: Sequence[Iterable[str]], k: int) -> tuple[np.ndarray, np.ndarray]:
        """Top ``k`` documents of each query: ``(indices, scores)`` of shape ``(n_queries, min(k, n_docs))``.

        Rows are best first, ties by lower doc index: row ``i`` equals ``BM25Index.top_k(queries[i], k)``.
        The first call in a process loads (or, the very first time, compiles) the numba kernel.
        """
        width = max(0, min(k, self.n_docs))
        docs = np.zeros((len(queries_tokens), width), dtype=np.int64)
        scores = np.zeros((len(queries_tokens), width), dtype=np.float64)
        if width and len(queries_tokens):
            query_indptr, query_terms, query_counts = self._query_arrays(queries_tokens)
            w = self.weights
            n_chunks = min(len(queries_tokens), numba.get_num_threads())
            kernel = _top_k_kernel if n_chunks > 1 else _top_k_kernel_serial
            kernel(
                w.indptr,
                w.indices,
                w.data,
                self._dense_slot,
                self._dense_rows,
                query_indptr,
                query_terms,
                query_counts,
                self.n_docs,
                n_chunks,
                docs,
                scores,
            )
        return docs, scores

    def save(self, directory: str | Path) -> None:
        """Write the index to ``directory``: CSR arrays as ``.npy``, parameters and vocabulary as JSON."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        for name in _ARRAYS:
            np.save(directory / f"{name}.npy", getattr(self.weights, name))
        terms = sorted(self.vocabulary, key=self.vocabulary.__getitem__)
        meta = {"k1": self.k1, "b": self.b, "avg_dl": self.avg_dl, "shape": list(self.weights.shape)}
        (directory / "meta.json").write_text(json.dumps(meta), encoding="utf-8")
        (directory / "vocabulary.json").write_text(json.dumps(terms, ensure_ascii=False), encoding="utf-8")

    @classmethod
    def load(cls, directory: str | Path, mmap: bool = True) -> SparseBM25:
        """Read an index written by ``save``; with ``mmap`` the arrays stay on disk, paged in on use."""
        directory = Path(directory)
        meta = json.loads((directory / "meta.json").read_text(encoding="utf-8"))
        terms = json.loads((directory / "vocabulary.json").read_text(encoding="utf-8"))
        arrays = [np.load(directory / f"{name}.npy", mmap_mode="r" if mmap else None) for name in _ARRAYS]
        index = cls(k1=meta["k1"], b=meta["b"])
        index.avg_dl = meta["avg_dl"]
        index.vocabulary = {term: row for row, term in enumerate(terms)}
        index.weights = sp.csr_matrix(tuple(arrays), shape=tuple(meta["shape"]), copy=False)
        index._build_dense_rows()
        return index
