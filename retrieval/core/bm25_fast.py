"""BM25 on compact posting lists with exact top-k pruning: the same numbers as ``BM25Index``, fast.

Documents are numbered inside the index shortest first (ties in corpus order; ``original_ids`` maps an internal
number back to the corpus position every result reports): along a posting list the document length then only
grows, so a term's impacts can be computed once per length (``_scatter_impacts``). Ties are broken by corpus
position, never by internal number (``_worse``), so the numbering changes no result.

The index keeps, per term, its documents (int32 internal numbers, ascending) and term frequencies (the
smallest unsigned type that holds the corpus's largest, usually one byte), plus one float64 per term (idf, and
the term's largest weight); per document, its length (again the smallest unsigned type), and one float64 per
length value (the norm ``k1 * (1 - b + b * |d| / avgdl)``): about 5 bytes per posting, where a float64
weight matrix takes 12. A weight is computed when it is read, with the float64 operations of
``BM25Index.fit`` in the same order (``idf * tf * (k1 + 1) / (tf + norm)``), so each one is bit-identical
to the reference's.

A query is answered by one of two traversals (``TRAVERSALS``; ``_choose`` picks per query, the ``traversal``
option forces one): exhaustive (every posting of its terms, ``_search_exhaustive``) or by quantised impacts
(``search_impact``: an integer sum of each posting's weight rounded to one of 256 steps, made block by block
in document order, then an exact rescoring of the documents whose sum can reach the top k; the impacts of
frequent terms are derived in memory at fit and load as columns, one byte per document, not saved, the others
computed as their postings are read). Both sum a query's terms in the same order (highest bound, ``count *
largest weight``, first: ``_bound_order``) and break ties the same way, so they return the same arrays. Auto:
impacts, except for queries with few postings (exhaustive). A query word repeated ``c`` times adds ``c`` times
its weight (issue 18.1: the seed's "Q = number of unique query terms" is a complexity remark). Summing in bound
order rather than query order moves a score by at most a few ulps (tests: 1e-9 and identical rankings, ties by
lower doc index, on the six bundled datasets).

Three more traversals (term at a time and document at a time, MaxScore with block bounds; impacts by blocks
taken highest bound first) were measured and removed in issue 45: none won a bucket of query length or
frequency at any size (benchmarks/results.md, issue 35 rounds 3 and 5; the last commit with them: 8952906).

``fit`` streams the corpus in chunks (never more than one chunk's tokens, plus the finished chunks' postings at
five bytes each, in memory: at most twice the final lists while they are placed); ``save`` writes ``.npy``
arrays that ``SparseBM25.load(dir, mmap=True)`` serves from the page cache.
"""

from __future__ import annotations

import json
import threading
from array import array
from collections import Counter
from collections.abc import Iterable, Sequence
from operator import attrgetter
from pathlib import Path
from typing import NamedTuple

import numba
import numpy as np

from retrieval.core.bm25 import DEFAULT_B, DEFAULT_K1, bm25_idf, validate_bm25_params

# The layout ``save`` writes (in meta.json; ``load`` refuses any other). 3: posting lists of doc ids and tfs,
# a norm per document; 4: document lengths and a norm per length, tf columns of frequent terms; 5: each
# posting block's largest weight; 6: documents numbered by length, each one's original index; 7: no tf columns;
# 8: no block bounds (their one reader, document at a time, removed).
SAVE_FORMAT = 8
ARRAYS = ("indptr", "doc_ids", "tfs", "idf", "upper", "lengths", "length_norm", "original_ids")
# How a query's lists are walked (``SparseBM25.traversal``; "auto" chooses per query, ``_choose``).
TRAVERSALS = ("exhaustive", "impact")
EXHAUSTIVE, IMPACT = range(len(TRAVERSALS))
CHUNK_TOKENS = 1 << 22  # tokens per indexing chunk (16 MB of int32 ids)
# Queries whose lists hold fewer than IMPACT_MIN_POSTINGS postings, or fewer than IMPACT_MIN_POSTINGS_SHARE of
# the documents, are scored exhaustively; the others by quantised impacts (``_choose``).
IMPACT_MIN_POSTINGS = 4096
IMPACT_MIN_POSTINGS_SHARE = 1 / 64
# Indexes up to this many postings keep their weights in memory (8 bytes each; not saved), and the rows of
# terms in at least a quarter of the documents densely, within MAX_DENSE_CELLS float64 cells.
MATERIALISE_MAX_POSTINGS = 1 << 23
DENSE_MIN_DF_SHARE = 0.25
MAX_DENSE_CELLS = 1 << 22
# The impact traversal (``search_impact``): each posting's weight quantised to one of IMPACT_LEVELS + 1 integer
# steps; terms in at least IMPACT_COLUMN_MIN_DF_SHARE of the documents keep their impacts as a column (one byte
# per document), summed by a vectorised add, the others' computed as their postings are read; the integer sums
# (uint16, so at most IMPACT_MAX_WORDS query words) are scanned IMPACT_CHUNK documents at a time. The share
# trades memory for speed; on 10M real passages (benchmarks/results.md, issue 35 round 5) 1/16 gave 52 columns,
# 256 bytes a passage in memory, p95 8.0 ms; 1/14: 41, 245, 8.6 ms; 1/12: 34, 238, 8.8 ms; 1/10: 29, 233, 10.0.
IMPACT_LEVELS = 255
IMPACT_COLUMN_MIN_DF_SHARE = 1 / 14
IMPACT_MAX_WORDS = np.iinfo(np.uint16).max // IMPACT_LEVELS
IMPACT_CHUNK = 256
# Impacts of a term with no column are computed as its postings are read; those of tf 1 .. IMPACT_TABLE_TF - 1
# at most once per length (``_scatter_impacts``).
IMPACT_TABLE_TF = 8
# Pass 1 of the impact traversal (``_impact_candidates``) makes the sums IMPACT_STREAM_DOCS documents at a time
# (1 MB of uint16, a core's L2 here; 2^19 to 2^21 measured alike at 10M passages, 2^14 and the whole index
# slower).
IMPACT_STREAM_DOCS = 1 << 19


class KernelIndex(NamedTuple):
    """Everything the search kernels read (``SparseBM25._kernel_fields``), by name: numba types a NamedTuple as a
    tuple whose fields are read by attribute in compiled code.

    The kernels called from Python (``_search_queries``, ``_search_parallel``, ``_score_row``) take its fields as
    a plain tuple (``SparseBM25._kernel_fields``) and rebuild it first (``KernelIndex(*fields)``, free in compiled
    code): numba types a plain tuple's arguments in C at every call, a NamedTuple's in Python, 1.5 us more a call
    (5 % of a query's time at 10k passages, measured); and the tuple is read by ``attrgetter`` (0.7 us), not
    built by keywords (2.5 us).
    """

    indptr: np.ndarray  # int64, a row per term: its postings are indptr[t]:indptr[t + 1]
    doc_ids: np.ndarray  # int32 internal document of each posting, ascending within a term
    tfs: np.ndarray  # each posting's term frequency (smallest unsigned type)
    idf: np.ndarray  # float64 per term
    length_norm: np.ndarray  # float64 norm per document length
    lengths: np.ndarray  # each internal document's length (smallest unsigned type)
    upper: np.ndarray  # float64 largest weight per term (the summation order's key, ``_bound_order``)
    k1_plus_1: float
    original_ids: np.ndarray  # each internal document's corpus position (results and ties)
    weights: np.ndarray  # every posting's weight on a materialised index, else empty
    dense_slot: np.ndarray  # int64 per term: its row in dense_rows, -1 if none
    dense_rows: np.ndarray  # float64 (terms, documents): frequent terms' weights, 0.0 where absent
    length_start: np.ndarray  # int64: the first internal document of each length or more
    impact_step: float  # the weight of one impact step (the largest weight / IMPACT_LEVELS)
    impact_slot: np.ndarray  # int64 per term: its row in impact_columns, -1 if none
    impact_columns: np.ndarray  # uint8 (terms, documents): frequent terms' impacts, 0 where absent
    impact_stream_docs: int  # documents per block of pass 1's sums


# Where ``SparseBM25._kernel_fields`` reads each field: the index's attribute of that name (its saved arrays and
# ``impact_stream_docs``), else the private one derived in memory (``_weights`` for ``weights``).
_KERNEL_FIELDS = attrgetter(
    *(name if name in (*ARRAYS, "impact_stream_docs") else f"_{name}" for name in KernelIndex._fields)
)


# The building blocks both traversals share: the weight, the top-k heap, the list searches. All numba code
# lives in this one module: numba's on-disk cache of a function is not invalidated when a function it calls
# changes in another file, so a split would let a stale compiled kernel run.


@numba.njit(cache=True, inline="always")
def _weight(idf, tf, k1_plus_1, norm):  # type: ignore[no-untyped-def]
    return idf * tf * k1_plus_1 / (tf + norm)


@numba.njit(cache=True, inline="always")
def _worse(score_a, doc_a, score_b, doc_b, original):  # type: ignore[no-untyped-def]
    """Whether internal document ``doc_a`` ranks below ``doc_b``: a lower score, or a tie and a higher original
    index (``retrieval.core.top_k``'s rule, whatever order the index numbers documents in)."""
    return score_a < score_b or (score_a == score_b and original[doc_a] > original[doc_b])


@numba.njit(cache=True)
def _sift_down(heap_scores, heap_docs, size, pos, original):  # type: ignore[no-untyped-def]
    while True:
        child = 2 * pos + 1
        if child >= size:
            return
        right = child + 1
        scores, docs = heap_scores, heap_docs
        if right < size and _worse(scores[right], docs[right], scores[child], docs[child], original):
            child = right
        if not _worse(heap_scores[child], heap_docs[child], heap_scores[pos], heap_docs[pos], original):
            return
        heap_scores[pos], heap_scores[child] = heap_scores[child], heap_scores[pos]
        heap_docs[pos], heap_docs[child] = heap_docs[child], heap_docs[pos]
        pos = child


@numba.njit(cache=True)
def _offer(heap_scores, heap_docs, size, k, score, doc, original):  # type: ignore[no-untyped-def]
    """Add (score, internal doc) to a heap of at most ``k`` whose root is the worst kept; return the new size."""
    if size < k:
        heap_scores[size], heap_docs[size] = score, doc
        pos = size
        while pos > 0:
            parent = (pos - 1) // 2
            if not _worse(heap_scores[pos], heap_docs[pos], heap_scores[parent], heap_docs[parent], original):
                break
            heap_scores[pos], heap_scores[parent] = heap_scores[parent], heap_scores[pos]
            heap_docs[pos], heap_docs[parent] = heap_docs[parent], heap_docs[pos]
            pos = parent
        return size + 1
    if _worse(heap_scores[0], heap_docs[0], score, doc, original):
        heap_scores[0], heap_docs[0] = score, doc
        _sift_down(heap_scores, heap_docs, k, 0, original)
    return size


@numba.njit(cache=True)
def _emit(heap_scores, heap_docs, size, k, original, out_docs, out_scores):  # type: ignore[no-untyped-def]
    """The heap's ``size`` documents into ``out_docs``/``out_scores`` best first, as original indexes; then, if
    fewer than ``k`` matched, the unmatched documents (score 0) lowest original index first."""
    for position in range(size - 1, -1, -1):  # pop the worst first, so the row ends best first
        out_scores[position], out_docs[position] = heap_scores[0], original[heap_docs[0]]
        heap_scores[0], heap_docs[0] = heap_scores[position], heap_docs[position]
        _sift_down(heap_scores, heap_docs, position, 0, original)
    matched = np.sort(out_docs[:size])  # every matched document scores > 0: each weight is > 0
    doc, j = 0, 0
    for position in range(size, k):
        while j < size and matched[j] == doc:
            j += 1
            doc += 1
        out_scores[position], out_docs[position] = 0.0, doc
        doc += 1


@numba.njit(cache=True, inline="always")
def _lower_bound(doc_ids, low, high, doc):  # type: ignore[no-untyped-def]
    """First position in ``[low, high)`` whose doc id is >= ``doc`` (``high`` if none), by halving."""
    while low < high:
        middle = (low + high) >> 1
        if doc_ids[middle] < doc:
            low = middle + 1
        else:
            high = middle
    return low


@numba.njit(cache=True, inline="always")
def _gallop(doc_ids, low, end, doc):  # type: ignore[no-untyped-def]
    """``_lower_bound`` of ``[low, end)`` for a ``doc`` likely near ``low``: doubling steps, then halving."""
    if low >= end or doc_ids[low] >= doc:
        return low
    step = 1
    while low + step < end and doc_ids[low + step] < doc:
        low += step
        step <<= 1
    return _lower_bound(doc_ids, low + 1, min(low + step, end), doc)


@numba.njit(cache=True, inline="always")
def _tf_of(indptr, doc_ids, tfs, term, cursor, doc):  # type: ignore[no-untyped-def]
    """``(tf of term in doc, 0 if absent; the new cursor)``: a gallop through the term's postings from
    ``cursor`` (a position in them at or before ``doc``'s)."""
    end = indptr[term + 1]
    posting = _gallop(doc_ids, cursor, end, doc)
    if posting < end and doc_ids[posting] == doc:
        return int(tfs[posting]), posting
    return 0, posting


@numba.njit(cache=True)
def _bound_order(terms, counts, upper):  # type: ignore[no-untyped-def]
    """The order a query's terms are summed in: highest bound (``count * largest weight``) first, ties by term
    row. Every path sums in this order, so a score does not depend on the path."""
    bounds = np.empty(len(terms))
    for i in range(len(terms)):
        bounds[i] = counts[i] * upper[terms[i]]
    return np.argsort(-bounds, kind="mergesort")


# Quantised impacts, exact by rescoring (the impact-ordered indexes of JASS and PISA, made exact).
#
# Each posting's impact is ``q = round(w / step)`` (``_quantise``, at most IMPACT_LEVELS), ``step`` the index's
# largest weight / IMPACT_LEVELS, so ``|w - q * step| <= step / 2`` (up to a relative 1e-16 from the division).
# Only the terms with an impact column store theirs (one byte per document); the others' are computed from tf
# and document length as their postings are read (``_scatter_impacts``). Pass 1 sums ``count * q`` over
# the query's terms into one uint16 per document (a vectorised add for a term with an impact column, a
# scatter otherwise): an integer ``A(d)`` with ``|score(d) - step * A(d)| <= W * step / 2``, ``W`` the
# query's word count (repeats included). Let ``S`` be the k-th largest ``A``: the k documents with the largest
# sums each score at least ``step * S - W * step / 2``, so the k-th best score is at least that, and a
# document that reaches it (ties included) has ``step * A(d) + W * step / 2 >= step * S - W * step / 2``,
# that is ``A(d) >= S - W``. Pass 2 rescores exactly the candidates with ``A(d) >= S - W - 1`` (one step of
# slack against the division's rounding; none has ``A(d) = 0`` once that threshold is >= 1): each term looked
# up (a gallop) and weighed by ``_weight``, summed in the engine's one order (``_bound_order``),
# so the scores are bit-identical to the exhaustive traversal's and the heap breaks ties by corpus position.
# When the threshold is below 1 (fewer than k documents with a positive sum, or sums too close to 0), no
# document can be excluded, and the query is answered exhaustively instead (and counted as such).


@numba.njit(cache=True, inline="always")
def _quantise(weight, step):  # type: ignore[no-untyped-def]
    """A weight's impact: ``weight / step`` rounded to the nearest integer, at most ``IMPACT_LEVELS``."""
    return min(IMPACT_LEVELS, int(weight / step + 0.5))


@numba.njit(cache=True)
def impact_columns_of(indptr, doc_ids, tfs, idf, length_norm, lengths, k1_plus_1, step, terms):  # type: ignore[no-untyped-def]
    """The impacts of ``terms`` as columns, one uint8 per document (0 where the term is absent)."""
    out = np.zeros((len(terms), len(lengths)), dtype=np.uint8)
    for slot in range(len(terms)):
        term = terms[slot]
        for posting in range(indptr[term], indptr[term + 1]):
            doc = doc_ids[posting]
            out[slot, doc] = _quantise(_weight(idf[term], tfs[posting], k1_plus_1, length_norm[lengths[doc]]), step)
    return out


@numba.njit(cache=True, inline="always")
def _scatter_impacts(index, term, count, posting, stop, first, local, table, length):  # type: ignore[no-untyped-def]
    """``local[doc - first] += count * impact`` for postings ``posting .. stop - 1`` of ``term``, each impact
    computed as it is read; returns the length it ended at. Documents are numbered by length, so along a list
    the length only grows (``length_start[l]``: the first document of length ``l`` or more): ``table[tf]``
    keeps the impact of each tf below ``len(table)`` met at the current length (-1: not met yet), a larger
    tf's is computed each time. ``table`` holds those of ``length`` (from an earlier call on the same list; a
    ``length`` of -1: none)."""
    doc_ids, tfs, lengths, length_norm = index.doc_ids, index.tfs, index.lengths, index.length_norm
    length_start, step, k1_plus_1, term_idf = index.length_start, index.impact_step, index.k1_plus_1, index.idf[term]
    next_start = length_start[length + 1] if length >= 0 else -1
    for p in range(posting, stop):
        doc = doc_ids[p]
        if doc >= next_start:
            length = int(lengths[doc]) if length < 0 else length
            while length_start[length + 1] <= doc:
                length += 1
            next_start = length_start[length + 1]
            table[:] = -1
        tf = tfs[p]
        impact = table[tf] if tf < len(table) else -1
        if impact < 0:
            impact = _quantise(_weight(term_idf, tf, k1_plus_1, length_norm[length]), step)
            if tf < len(table):
                table[tf] = impact
        local[doc - first] += count * impact
    return length


# Pass 1 never holds the sums of every document: it makes them ``impact_stream_docs`` (2^19) documents at a time,
# in document order, in a buffer a core's cache holds (1 MB of uint16), all the query's impact columns added in
# one pass (four at a time) and its posting lists scattered from a cursor each, then keeps the documents of
# the block whose sum can still be a candidate. The k largest sums seen so far (a min-heap of integers) give
# a lower bound ``L`` of ``S``; a sum below ``L - W - 1`` can be neither a candidate nor among the k largest,
# so only the others are kept, and the final ``S`` filters them: the candidates are the documents with
# ``A(d) >= S - W - 1``, whatever the block size (on 10M passages, the whole-index sums, 20 MB, left the cache
# and each impact column streamed them again: p95 9.8 -> 6.2 ms for pass 1, benchmarks/results.md, round 5).


@numba.njit(cache=True, inline="always")
def _replace_smallest(heap, value):  # type: ignore[no-untyped-def]
    """Put ``value`` in place of the root of a min-heap of integers, and restore the heap."""
    heap[0], pos, size = value, 0, len(heap)
    while True:
        child = 2 * pos + 1
        if child >= size:
            return
        if child + 1 < size and heap[child + 1] < heap[child]:
            child += 1
        if heap[child] >= heap[pos]:
            return
        heap[pos], heap[child] = heap[child], heap[pos]
        pos = child


@numba.njit(cache=True, inline="always")
def _add_columns(local, columns, slots, counts, first, size):  # type: ignore[no-untyped-def]
    """``local[:size] += counts[j] * columns[slots[j], first : first + size]`` for every j, four columns per
    pass over ``local`` (each loop vectorised)."""
    j, n = 0, len(slots)
    while j + 4 <= n:
        c0, c1 = columns[slots[j], first : first + size], columns[slots[j + 1], first : first + size]
        c2, c3 = columns[slots[j + 2], first : first + size], columns[slots[j + 3], first : first + size]
        n0, n1, n2, n3 = counts[j], counts[j + 1], counts[j + 2], counts[j + 3]
        for doc in range(size):
            local[doc] += n0 * c0[doc] + n1 * c1[doc] + n2 * c2[doc] + n3 * c3[doc]
        j += 4
    while j < n:
        c0, n0 = columns[slots[j], first : first + size], counts[j]
        for doc in range(size):
            local[doc] += n0 * c0[doc]
        j += 1


@numba.njit(cache=True)
def _impact_candidates(index, terms, counts, k, local, candidates):  # type: ignore[no-untyped-def]
    """Pass 1 of ``search_impact``: the documents whose integer sum can still reach the top k, ascending, into
    ``candidates`` (their number returned; -1 if none can be excluded). ``local`` (uint16,
    ``impact_buffer_length`` long) is zero on entry and left zero."""
    indptr, impact_slot = index.indptr, index.impact_slot
    n_docs, words, block = len(index.lengths), int(counts.sum()), index.impact_stream_docs
    n_blocks = (n_docs + block - 1) // block
    # The query's impact columns (slot, count) and its other terms (position in ``terms``, cursor, count).
    slots, column_counts, n_columns = np.empty(len(terms), np.int64), np.empty(len(terms), np.uint16), 0
    listed, cursor, n_listed = np.empty(len(terms), np.int64), np.empty(len(terms), np.int64), 0
    for i in range(len(terms)):
        if impact_slot[terms[i]] >= 0:
            slots[n_columns], column_counts[n_columns] = impact_slot[terms[i]], np.uint16(counts[i])
            n_columns += 1
        else:
            listed[n_listed], cursor[n_listed] = i, indptr[terms[i]]
            n_listed += 1
    slots, column_counts, listed = slots[:n_columns], column_counts[:n_columns], listed[:n_listed]
    heap = np.zeros(k, np.int64)  # the k largest sums seen (zeros until k are positive: k <= n_docs)
    kept, n_kept = np.empty(1024, np.int64), 0  # candidates so far, each (doc << 16) | sum
    chunk_max = np.empty(len(local) // IMPACT_CHUNK, local.dtype)
    tables, length_at = np.zeros((len(listed), IMPACT_TABLE_TF), np.int64), np.full(len(listed), -1, np.int64)
    for b in range(n_blocks):
        first = b * block
        size = min(block, n_docs - first)
        n_chunks = (size + IMPACT_CHUNK - 1) // IMPACT_CHUNK  # past ``size`` ``local`` is never written: zero
        _add_columns(local, index.impact_columns, slots, column_counts, first, size)
        for j in range(len(listed)):
            i = listed[j]
            stop = _gallop(index.doc_ids, cursor[j], indptr[terms[i] + 1], first + size)
            length_at[j] = _scatter_impacts(
                index, terms[i], np.uint16(counts[i]), cursor[j], stop, first, local, tables[j], length_at[j]
            )
            cursor[j] = stop
        for chunk in range(n_chunks):  # a fixed trip count, so the loop is vectorised
            offset, top = chunk * IMPACT_CHUNK, local[chunk * IMPACT_CHUNK]
            for doc in range(IMPACT_CHUNK):
                top = max(top, local[offset + doc])
            chunk_max[chunk] = top
        # The k largest sums so far, first. Until the heap holds k positive sums, the k-th largest chunk maximum
        # bounds it from below (k distinct documents reach it): a sum under it cannot be among the k largest.
        floor = heap[0] + 1
        if heap[0] == 0 and n_chunks >= k:
            floor = max(floor, int(np.partition(chunk_max[:n_chunks], n_chunks - k)[n_chunks - k]))
        for chunk in range(n_chunks):
            if chunk_max[chunk] >= floor:
                for doc in range(chunk * IMPACT_CHUNK, (chunk + 1) * IMPACT_CHUNK):
                    if local[doc] >= floor and local[doc] > heap[0]:
                        _replace_smallest(heap, int(local[doc]))
        cutoff = max(1, heap[0] - words - 1)  # a sum below it is no candidate
        for chunk in range(n_chunks):
            offset = chunk * IMPACT_CHUNK
            if chunk_max[chunk] >= cutoff:
                for doc in range(offset, offset + IMPACT_CHUNK):
                    if local[doc] >= cutoff:
                        if n_kept == len(kept):  # drop what the heap has since excluded; grow if still full
                            n_kept, old = 0, kept
                            for j in range(len(old)):
                                if old[j] & 0xFFFF >= cutoff:
                                    kept[n_kept] = old[j]
                                    n_kept += 1
                            if 2 * n_kept > len(kept):
                                kept = np.concatenate((kept, np.empty(len(kept), np.int64)))
                        kept[n_kept] = ((first + doc) << 16) | int(local[doc])
                        n_kept += 1
            for doc in range(IMPACT_CHUNK):
                local[offset + doc] = 0
    threshold = heap[0] - words - 1
    if threshold < 1:
        return -1
    n_candidates = 0  # blocks in document order: ``kept`` is ascending by document already
    for j in range(n_kept):
        if kept[j] & 0xFFFF >= threshold:
            candidates[n_candidates] = kept[j] >> 16
            n_candidates += 1
    return n_candidates


@numba.njit(cache=True)
def impact_buffer_length(n_docs, stream_docs):  # type: ignore[no-untyped-def]
    """Length of the uint16 buffer pass 1 makes its sums in: ``stream_docs``, at most the index, in whole
    ``IMPACT_CHUNK``s."""
    longest = min(n_docs, stream_docs)
    return (longest + IMPACT_CHUNK - 1) // IMPACT_CHUNK * IMPACT_CHUNK


@numba.njit(cache=True)
def search_impact(index, terms, counts, k, local, candidates, out_docs, out_scores):  # type: ignore[no-untyped-def]
    """Exact top ``k`` of one query into ``out_docs``/``out_scores`` (best first) by quantised impacts and
    exact rescoring; False (outputs untouched) if the integer sums cannot exclude any document, or the query has
    more than ``IMPACT_MAX_WORDS`` words.

    ``index`` is a ``KernelIndex``; ``local`` (uint16, ``impact_buffer_length`` long) is zero on entry and left
    zero; ``candidates`` (int32) has one slot per document.
    """
    indptr, doc_ids, tfs, idf = index.indptr, index.doc_ids, index.tfs, index.idf
    length_norm, lengths = index.length_norm, index.lengths
    if counts.sum() > IMPACT_MAX_WORDS:
        return False
    n_candidates = _impact_candidates(index, terms, counts, k, local, candidates)
    if n_candidates < 0:
        return False
    scores = np.zeros(n_candidates)
    for i in _bound_order(terms, counts, index.upper):  # the engine's summation order
        term, count, cursor = terms[i], counts[i], indptr[terms[i]]
        for j in range(n_candidates):  # ascending documents: the cursor only moves forward
            doc = candidates[j]
            tf, cursor = _tf_of(indptr, doc_ids, tfs, term, cursor, doc)
            if tf:
                scores[j] += count * _weight(idf[term], tf, index.k1_plus_1, length_norm[lengths[doc]])
    heap_scores, heap_docs, size = np.empty(k), np.empty(k, dtype=np.int64), 0
    for j in range(n_candidates):
        if size < k or scores[j] >= heap_scores[0]:  # a tie goes to the lower original index (_worse)
            size = _offer(heap_scores, heap_docs, size, k, scores[j], candidates[j], index.original_ids)
    _emit(heap_scores, heap_docs, size, k, index.original_ids, out_docs, out_scores)
    return True


@numba.njit(cache=True)
def _search_exhaustive(index, terms, counts, k, acc, touched, out_docs, out_scores):  # type: ignore[no-untyped-def]
    """Exact top ``k`` of one query into ``out_docs``/``out_scores`` (best first), from every posting of its
    terms, summed into ``acc`` in the engine's order; leaves ``acc`` all zero.

    ``index`` is a ``KernelIndex``. ``acc`` (float64) and ``touched`` (int32) have one slot per document;
    ``acc`` is zero on entry.
    """
    indptr, doc_ids, tfs, idf = index.indptr, index.doc_ids, index.tfs, index.idf
    length_norm, lengths = index.length_norm, index.lengths
    weights, dense_slot, dense_rows, original = index.weights, index.dense_slot, index.dense_rows, index.original_ids
    k1_plus_1, n_docs, materialised = index.k1_plus_1, len(lengths), len(index.weights) > 0
    # A query with few postings keeps a list of the documents it touched; a longer one scans the whole corpus.
    track = 2 * _postings_of(indptr, terms) < n_docs
    n_touched = 0
    for i in _bound_order(terms, counts, index.upper):
        term, count = terms[i], counts[i]
        term_idf = idf[term]
        if not track:  # the plain loops of a whole scan
            if dense_slot[term] >= 0:  # a frequent term: a sequential add beats a scatter
                row = dense_rows[dense_slot[term]]
                for doc in range(n_docs):  # adding 0.0 where the term is absent changes no sum
                    acc[doc] += count * row[doc]
            elif materialised:
                for posting in range(indptr[term], indptr[term + 1]):
                    acc[doc_ids[posting]] += count * weights[posting]
            else:
                for posting in range(indptr[term], indptr[term + 1]):
                    doc = doc_ids[posting]
                    acc[doc] += count * _weight(term_idf, tfs[posting], k1_plus_1, length_norm[lengths[doc]])
            continue
        for posting in range(indptr[term], indptr[term + 1]):
            doc = doc_ids[posting]
            partial = acc[doc]
            touched[n_touched] = doc  # kept only if unseen: every weight is > 0, so zero means unseen
            n_touched += partial == 0.0
            if materialised:
                partial += count * weights[posting]
            else:
                partial += count * _weight(term_idf, tfs[posting], k1_plus_1, length_norm[lengths[doc]])
            acc[doc] = partial
    heap_scores, heap_docs, size = np.empty(k), np.empty(k, dtype=np.int64), 0
    if not track:
        for doc in range(n_docs):
            if size < k or _worse(heap_scores[0], heap_docs[0], acc[doc], doc, original):  # most fail the test
                size = _offer(heap_scores, heap_docs, size, k, acc[doc], doc, original)
        acc[:] = 0.0
    else:
        for j in range(n_touched):
            doc = touched[j]
            if size < k or _worse(heap_scores[0], heap_docs[0], acc[doc], doc, original):  # most fail the test
                size = _offer(heap_scores, heap_docs, size, k, acc[doc], doc, original)
            acc[doc] = 0.0
    _emit(heap_scores, heap_docs, size, k, original, out_docs, out_scores)


@numba.njit(cache=True)
def _distinct(rows):  # type: ignore[no-untyped-def]
    """A query's distinct known term rows, ascending, and how often each occurs (-1: unknown token)."""
    rows = np.sort(rows)
    terms = np.empty(len(rows), dtype=np.int64)
    counts = np.empty(len(rows))
    n_terms = 0
    for row in rows:
        if row >= 0 and n_terms and terms[n_terms - 1] == row:
            counts[n_terms - 1] += 1.0
        elif row >= 0:
            terms[n_terms], counts[n_terms] = row, 1.0
            n_terms += 1
    return terms[:n_terms], counts[:n_terms]


@numba.njit(cache=True)
def _postings_of(indptr, terms):  # type: ignore[no-untyped-def]
    """How many postings the lists of ``terms`` hold together."""
    total = 0
    for term in terms:
        total += indptr[term + 1] - indptr[term]
    return total


@numba.njit(cache=True)
def _choose(forced, postings, impact_min):  # type: ignore[no-untyped-def]
    """The traversal of one query (``TRAVERSALS`` index): ``forced`` unless it is -1 ("auto").

    Measured on both benchmark corpora at 10k, 100k, 200k and 1M passages (each traversal forced on every query,
    ``benchmarks/bench_bm25_traversals.py``; benchmarks/results.md, issue 35 round 3): the impact traversal was the
    fastest on every bucket of query length and frequency, at every size, except on queries with fewer postings than
    ``impact_min`` (``SparseBM25.impact_min_postings_below``: 4,096, or 1/64 of the documents if more), where its
    fixed costs (making and scanning the integer sums of every document) exceed walking the lists: those are scored
    exhaustively. Term and document at a time won no bucket there, and impacts by blocks taken highest bound first
    lost every bucket of 10M real passages once ``impact`` made its sums in blocks too (round 5: p50 / p95 12.2 /
    25.3 ms against 4.6 / 8.5): all three were removed in issue 45.
    """
    if forced >= 0:
        return forced
    if postings < impact_min:
        return EXHAUSTIVE
    return IMPACT


@numba.njit(cache=True)
def _search_queries(  # type: ignore[no-untyped-def]
    fields, forced, impact_min, q_indptr, q_rows, first, last, acc, touched, sums, out_docs, out_scores, out_traversals
):
    """Queries ``first`` to ``last - 1`` of a batch, one after another on one workspace; each query's
    traversal (``TRAVERSALS`` index) goes to ``out_traversals`` (exhaustive for an impact query whose sums
    could exclude no document, ``search_impact``)."""
    index, k = KernelIndex(*fields), out_docs.shape[1]
    for query in range(first, last):
        terms, counts = _distinct(q_rows[q_indptr[query] : q_indptr[query + 1]])
        traversal = _choose(forced, _postings_of(index.indptr, terms), impact_min)
        if traversal == IMPACT and not search_impact(
            index, terms, counts, k, sums, touched, out_docs[query], out_scores[query]
        ):
            traversal = EXHAUSTIVE
        out_traversals[query] = traversal
        if traversal == EXHAUSTIVE:
            _search_exhaustive(index, terms, counts, k, acc, touched, out_docs[query], out_scores[query])


@numba.njit(cache=True, parallel=True)
def _search_parallel(  # type: ignore[no-untyped-def]
    fields, forced, impact_min, q_indptr, q_rows, n_chunks, out_docs, out_scores, out_traversals
):
    """The batch split into ``n_chunks`` runs of queries, one workspace each, in parallel."""
    index = KernelIndex(*fields)
    n_queries, n_docs = out_docs.shape[0], len(index.lengths)
    for chunk in numba.prange(n_chunks):
        first, last = chunk * n_queries // n_chunks, (chunk + 1) * n_queries // n_chunks
        acc, touched = np.zeros(n_docs), np.empty(n_docs, dtype=np.int32)
        sums = np.zeros(impact_buffer_length(n_docs, index.impact_stream_docs), dtype=np.uint16)
        _search_queries(
            fields, forced, impact_min, q_indptr, q_rows, first, last, acc, touched, sums, out_docs, out_scores,
            out_traversals,
        )  # fmt: skip


@numba.njit(cache=True)
def _score_row(fields, rows):  # type: ignore[no-untyped-def]
    """Every document's score for one query, terms summed in the order both traversals use."""
    index = KernelIndex(*fields)
    indptr, doc_ids, tfs, idf = index.indptr, index.doc_ids, index.tfs, index.idf
    length_norm, lengths = index.length_norm, index.lengths
    terms, counts = _distinct(rows)
    scores = np.zeros(len(lengths))
    for i in _bound_order(terms, counts, index.upper):
        term, count = terms[i], counts[i]
        for posting in range(indptr[term], indptr[term + 1]):
            doc = doc_ids[posting]
            scores[doc] += count * _weight(idf[term], tfs[posting], index.k1_plus_1, length_norm[lengths[doc]])
    return scores


@numba.njit(cache=True)
def _posting_weights(indptr, doc_ids, tfs, idf, length_norm, lengths, k1_plus_1):  # type: ignore[no-untyped-def]
    """Every posting's weight, computed exactly as the search computes it (``_weight``)."""
    weights = np.empty(len(doc_ids))
    for term in range(len(indptr) - 1):
        for posting in range(indptr[term], indptr[term + 1]):
            weights[posting] = _weight(idf[term], tfs[posting], k1_plus_1, length_norm[lengths[doc_ids[posting]]])
    return weights


@numba.njit(cache=True)
def _upper_bounds(indptr, doc_ids, tfs, idf, length_norm, lengths, k1_plus_1):  # type: ignore[no-untyped-def]
    """Each term's largest weight, computed exactly as the search computes it."""
    upper = np.zeros(len(indptr) - 1)
    for term in range(len(indptr) - 1):
        best = 0.0
        for posting in range(indptr[term], indptr[term + 1]):
            weight = _weight(idf[term], tfs[posting], k1_plus_1, length_norm[lengths[doc_ids[posting]]])
            best = max(best, weight)
        upper[term] = best
    return upper


@numba.njit(cache=True)
def _place(terms, per_term, docs, tfs, cursor, out_docs, out_tfs, internal):  # type: ignore[no-untyped-def]
    """Append one chunk's postings (``per_term[i]`` rows of ``terms[i]``, in term order) to their term's slots in
    the final arrays, each document renumbered (``internal[original index]``)."""
    row = 0
    for i in range(len(terms)):
        slot = cursor[terms[i]]
        for _ in range(per_term[i]):
            out_docs[slot] = internal[docs[row]]
            out_tfs[slot] = tfs[row]
            slot += 1
            row += 1
        cursor[terms[i]] = slot


@numba.njit(cache=True)
def _sort_lists(indptr, doc_ids, tfs):  # type: ignore[no-untyped-def]
    """Sort each term's postings by (internal) doc id, in place, its tfs alongside: one list at a time."""
    longest = 0
    for term in range(len(indptr) - 1):
        longest = max(longest, indptr[term + 1] - indptr[term])
    keys = np.empty(longest, dtype=np.int64)  # doc id in the high 32 bits, tf in the low 32
    for term in range(len(indptr) - 1):
        start, end = indptr[term], indptr[term + 1]
        ordered = True
        for posting in range(start + 1, end):
            if doc_ids[posting] < doc_ids[posting - 1]:
                ordered = False
                break
        if ordered:
            continue
        for posting in range(start, end):
            keys[posting - start] = (np.int64(doc_ids[posting]) << 32) | np.int64(tfs[posting])
        run = keys[: end - start]
        run.sort()
        for posting in range(start, end):
            doc_ids[posting] = run[posting - start] >> 32
            tfs[posting] = run[posting - start] & 0xFFFFFFFF


def _smallest_uint(largest: int) -> type[np.unsignedinteger]:
    """The smallest unsigned type that holds ``largest`` (a term frequency or a document length)."""
    for dtype in (np.uint8, np.uint16, np.uint32):
        if largest <= np.iinfo(dtype).max:
            return dtype
    raise ValueError(f"a document of at least {largest} tokens; at most {np.iinfo(np.uint32).max} supported")


def _chunk_postings(
    term_ids: array, lengths: array, first_doc: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The postings of a chunk of documents, sorted by term then doc: ``(terms, per_term, docs, tfs)``, its
    distinct terms and how many postings each has, then each posting's document (int32) and tf (the smallest
    unsigned type). Five bytes a posting, as in the final arrays: fit holds every chunk until the last one is
    read, so at 10M passages a wider row (16 bytes) made most of the build's peak memory."""
    terms = np.frombuffer(term_ids, dtype=np.int32).astype(np.int64)
    docs = np.repeat(np.arange(first_doc, first_doc + len(lengths), dtype=np.int64), np.frombuffer(lengths, np.int64))
    keys, tfs = np.unique((terms << 32) | docs, return_counts=True)
    del terms, docs
    distinct, per_term = np.unique(keys >> 32, return_counts=True)
    tf_dtype = _smallest_uint(int(tfs.max()) if len(tfs) else 0)
    return distinct.astype(np.int32), per_term, (keys & 0xFFFFFFFF).astype(np.int32), tfs.astype(tf_dtype)


class SparseBM25:
    """Compact BM25 index (seed-000 formula, ``retrieval.core.tokenize`` tokens), equal to ``BM25Index``.

    ``vocabulary`` maps a term to its row; row ``t``'s postings are ``doc_ids[indptr[t]:indptr[t + 1]]``
    with frequencies ``tfs[...]``, in internal numbers (shortest document first; ``lengths`` too); internal
    document ``i`` is corpus document ``original_ids[i]``, and every result (``scores``, ``top_k_batch``) is in
    corpus positions. ``fit`` replaces the whole index; queries never mutate it.
    ``traversal`` ("auto" or one of ``TRAVERSALS``) forces how queries walk the lists; ``traversals`` counts
    the queries each traversal answered. The class attributes below choose the auto path (tests set them per
    instance to cover each one).
    """

    materialise_max_postings: int = MATERIALISE_MAX_POSTINGS
    impact_min_postings: int = IMPACT_MIN_POSTINGS
    impact_min_postings_share: float = IMPACT_MIN_POSTINGS_SHARE
    impact_stream_docs: int = IMPACT_STREAM_DOCS  # read per query

    def __init__(self, k1: float = DEFAULT_K1, b: float = DEFAULT_B, traversal: str = "auto"):
        validate_bm25_params(k1, b)
        if traversal != "auto" and traversal not in TRAVERSALS:
            raise ValueError(
                f"SparseBM25 traversal must be 'auto' or one of {', '.join(TRAVERSALS)}; got {traversal!r}"
            )
        self.k1 = k1
        self.b = b
        self.traversal = traversal
        self.traversals: Counter[str] = Counter()
        self.vocabulary: dict[str, int] = {}
        self.avg_dl: float = 0.0
        self.indptr = np.zeros(1, dtype=np.int64)
        self.doc_ids = np.empty(0, dtype=np.int32)
        self.tfs = np.empty(0, dtype=np.uint8)
        self.idf = np.empty(0, dtype=np.float64)
        self.upper = np.empty(0, dtype=np.float64)
        self.lengths = np.empty(0, dtype=np.uint8)
        self.length_norm = np.empty(0, dtype=np.float64)
        self.original_ids = np.empty(0, dtype=np.int32)
        self._workspace = threading.local()
        self._materialise()

    @property
    def n_docs(self) -> int:
        return len(self.lengths)

    @property
    def nbytes(self) -> int:
        """Bytes of the index arrays (what ``save`` writes, vocabulary aside)."""
        return sum(getattr(self, name).nbytes for name in ARRAYS)

    @property
    def memory_nbytes(self) -> int:
        """``nbytes`` plus what is derived in memory at fit and load: the impact columns (one byte per document
        each), and on a small index its weights and dense rows."""
        derived = (self._weights, self._dense_rows, self._impact_columns, self._length_start)
        return self.nbytes + sum(array.nbytes for array in derived)

    @property
    def impact_min_postings_below(self) -> float:
        """The fewest postings a query needs for the auto rule to answer it by impacts (``_choose``)."""
        return max(self.impact_min_postings, self.impact_min_postings_share * self.n_docs)

    def __len__(self) -> int:
        return self.n_docs

    @property
    def _materialised(self) -> bool:
        """Whether the index is small enough to keep its weights in memory (and so never prunes)."""
        return len(self.doc_ids) <= self.materialise_max_postings

    def fit(self, corpus_tokens: Iterable[list[str]]) -> SparseBM25:
        """Index documents given as token lists (the input of ``BM25Index.fit``) in ONE streamed pass.

        Only one chunk of token ids (int32) and the postings built so far are held, never the token lists.
        """
        vocabulary: dict[str, int] = {}
        assign = vocabulary.setdefault
        lengths, term_ids = array("q"), array("i")
        chunks: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = []
        chunk_start = 0
        for doc in corpus_tokens:
            lengths.append(len(doc))
            term_ids.extend([assign(term, len(vocabulary)) for term in doc])
            if len(term_ids) >= CHUNK_TOKENS:
                chunks.append(_chunk_postings(term_ids, lengths[chunk_start:], chunk_start))
                term_ids, chunk_start = array("i"), len(lengths)
        chunks.append(_chunk_postings(term_ids, lengths[chunk_start:], chunk_start))
        del term_ids
        n_docs, n_terms = len(lengths), len(vocabulary)
        df = np.zeros(n_terms, dtype=np.int64)
        for terms, per_term, _, _ in chunks:
            df[terms] += per_term  # a chunk's terms are distinct
        indptr = np.zeros(n_terms + 1, dtype=np.int64)
        np.cumsum(df, out=indptr[1:])
        tf_dtype = _smallest_uint(max((int(tfs.max()) for *_, tfs in chunks if len(tfs)), default=0))
        # Documents are numbered shortest first (ties: original order), so along a list the length only grows
        # (``_scatter_impacts``); ``original_ids`` maps back.
        doc_lengths = np.frombuffer(lengths, dtype=np.int64)
        original_ids = np.argsort(doc_lengths, kind="stable").astype(np.int32)
        internal = np.empty(n_docs, dtype=np.int32)
        internal[original_ids] = np.arange(n_docs, dtype=np.int32)
        doc_ids = np.empty(indptr[-1], dtype=np.int32)
        tfs = np.empty(indptr[-1], dtype=tf_dtype)
        cursor = indptr[:-1].copy()
        chunks.reverse()
        while chunks:  # each chunk freed once placed
            chunk_terms, per_term, chunk_docs, chunk_tfs = chunks.pop()
            _place(chunk_terms, per_term, chunk_docs, chunk_tfs.astype(tf_dtype), cursor, doc_ids, tfs, internal)
        del internal, chunk_terms, per_term, chunk_docs, chunk_tfs
        _sort_lists(indptr, doc_ids, tfs)
        longest = int(doc_lengths.max()) if n_docs else 0
        self.vocabulary = vocabulary
        self.avg_dl = int(doc_lengths.sum()) / n_docs if n_docs else 0.0
        # A document's norm depends only on its length: one float64 per length, the same operations in the
        # same order as BM25Index.fit, so each weight is bit-identical.
        avg_dl = self.avg_dl or 1.0
        self.lengths = doc_lengths[original_ids].astype(_smallest_uint(longest))
        self.original_ids = original_ids
        self.length_norm = self.k1 * (1.0 - self.b + self.b * np.arange(longest + 1, dtype=np.float64) / avg_dl)
        self.idf = np.array([bm25_idf(n_docs, int(count)) for count in df], dtype=np.float64)
        self.indptr, self.doc_ids, self.tfs = indptr, doc_ids, tfs
        self.upper = _upper_bounds(indptr, doc_ids, tfs, self.idf, self.length_norm, self.lengths, self.k1 + 1.0)
        self._materialise()
        return self

    def _query_arrays(self, queries: Sequence[Iterable[str]]) -> tuple[np.ndarray, np.ndarray]:
        """Each query's token rows, CSR-style: ``(indptr, rows)``, -1 for a token outside the vocabulary.

        The kernels count repeats (issue 18.1: a repeated query word adds its weight every time).
        """
        lookup = self.vocabulary.get
        indptr = [0]
        rows: list[int] = []
        for tokens in queries:
            rows.extend([lookup(token, -1) for token in tokens])
            indptr.append(len(rows))
        return np.array(indptr, dtype=np.int64), np.array(rows, dtype=np.int64)

    @property
    def _k1_plus_1(self) -> float:
        return self.k1 + 1.0

    def _kernel_fields(self) -> tuple:
        """Everything the kernels read, as the plain tuple the entry kernels take (``KernelIndex``'s fields)."""
        return _KERNEL_FIELDS(self)

    def _materialise(self) -> None:
        """Derive the in-memory helpers: each term's column slot (-1: none) and, on a small index, every
        weight (and the densest terms' rows), so no posting needs a division.

        Weights are computed by ``_weight`` itself, so the numbers do not change.
        """
        self._materialise_impacts()
        self._weights = np.empty(0)
        self._dense_slot = np.full(len(self.idf), -1, dtype=np.int64)
        self._dense_rows = np.empty((0, 0))
        if not self._materialised:
            return
        df = np.diff(self.indptr)
        self._weights = _posting_weights(
            self.indptr, self.doc_ids, self.tfs, self.idf, self.length_norm, self.lengths, self.k1 + 1.0
        )
        frequent = np.flatnonzero(df >= max(1, DENSE_MIN_DF_SHARE * self.n_docs))
        frequent = frequent[np.argsort(-df[frequent], kind="stable")][: MAX_DENSE_CELLS // max(self.n_docs, 1)]
        self._dense_slot[frequent] = np.arange(len(frequent))
        self._dense_rows = np.zeros((len(frequent), self.n_docs))
        for slot, term in enumerate(frequent):
            span = slice(self.indptr[term], self.indptr[term + 1])
            self._dense_rows[slot, self.doc_ids[span]] = self._weights[span]

    def _materialise_impacts(self) -> None:
        """Derive the impact traversal's inputs (``search_impact``): the step (the largest weight /
        ``IMPACT_LEVELS``), the first document of each length, and the impacts of terms in at least
        ``IMPACT_COLUMN_MIN_DF_SHARE`` of the documents as columns (one byte per document, 0 where absent)."""
        self._impact_step = float(self.upper.max()) / IMPACT_LEVELS if len(self.upper) and self.upper.max() > 0 else 1.0
        longest = int(self.lengths[-1]) if self.n_docs else 0  # documents are numbered shortest first
        self._length_start = np.searchsorted(self.lengths, np.arange(longest + 2)).astype(np.int64)
        df = np.diff(self.indptr)
        frequent = np.flatnonzero(df >= max(1.0, IMPACT_COLUMN_MIN_DF_SHARE * self.n_docs))
        self._impact_slot = np.full(len(self.idf), -1, dtype=np.int64)
        self._impact_slot[frequent] = np.arange(len(frequent))
        inputs = (self.indptr, self.doc_ids, self.tfs, self.idf, self.length_norm, self.lengths, self.k1 + 1.0)
        self._impact_columns = impact_columns_of(*inputs, self._impact_step, frequent)

    def scores(self, query_tokens: Iterable[str]) -> np.ndarray:
        """BM25 score of every document for one query, in the corpus's (original) order (float64)."""
        scores = np.empty(self.n_docs)
        scores[self.original_ids] = _score_row(self._kernel_fields(), self._query_arrays([query_tokens])[1])
        return scores

    def top_k_batch(self, queries_tokens: Sequence[Iterable[str]], k: int) -> tuple[np.ndarray, np.ndarray]:
        """Top ``k`` documents of each query: ``(indices, scores)`` of shape ``(n_queries, min(k, n_docs))``.

        Rows are best first, ties by lower doc index: row ``i`` equals ``BM25Index.top_k(queries[i], k)``.
        Several queries run in parallel (numba threads); one runs serially on a per-thread workspace.
        Each query's traversal is counted in ``traversals``.
        """
        width = max(0, min(k, self.n_docs))
        docs = np.zeros((len(queries_tokens), width), dtype=np.int64)
        scores = np.zeros((len(queries_tokens), width), dtype=np.float64)
        if width and len(queries_tokens):
            index, impact_min = self._kernel_fields(), self.impact_min_postings_below
            forced = -1 if self.traversal == "auto" else TRAVERSALS.index(self.traversal)
            q_indptr, q_rows = self._query_arrays(queries_tokens)
            chosen = np.empty(len(queries_tokens), dtype=np.int8)
            n_chunks = min(len(queries_tokens), numba.get_num_threads())
            if n_chunks > 1:
                _search_parallel(index, forced, impact_min, q_indptr, q_rows, n_chunks, docs, scores, chosen)
            else:
                acc, touched, sums = self._scratch()
                n, out = len(queries_tokens), (docs, scores, chosen)
                _search_queries(index, forced, impact_min, q_indptr, q_rows, 0, n, acc, touched, sums, *out)
            for code, count in enumerate(np.bincount(chosen, minlength=len(TRAVERSALS)).tolist()):
                if count:
                    self.traversals[TRAVERSALS[code]] += count
        return docs, scores

    def _scratch(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """This thread's zeroed accumulators (float64 scores, a block of uint16 impact sums) and touched-list,
        kept between queries (the kernels re-zero them)."""
        workspace = self._workspace
        sums_length = impact_buffer_length(self.n_docs, self.impact_stream_docs)
        if getattr(workspace, "acc", None) is None or len(workspace.acc) != self.n_docs:
            workspace.acc = np.zeros(self.n_docs)
            workspace.touched = np.empty(self.n_docs, dtype=np.int32)
        if getattr(workspace, "sums", None) is None or len(workspace.sums) != sums_length:
            workspace.sums = np.zeros(sums_length, dtype=np.uint16)
        return workspace.acc, workspace.touched, workspace.sums

    def save(self, directory: str | Path) -> None:
        """Write the index to ``directory``: arrays as ``.npy``, parameters and vocabulary as JSON."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        for name in ARRAYS:
            np.save(directory / f"{name}.npy", getattr(self, name))
        terms = sorted(self.vocabulary, key=self.vocabulary.__getitem__)
        meta = {"format": SAVE_FORMAT, "k1": self.k1, "b": self.b, "avg_dl": self.avg_dl}
        (directory / "meta.json").write_text(json.dumps(meta), encoding="utf-8")
        (directory / "vocabulary.json").write_text(json.dumps(terms, ensure_ascii=False), encoding="utf-8")

    @classmethod
    def load(cls, directory: str | Path, mmap: bool = True) -> SparseBM25:
        """Read an index written by ``save``; with ``mmap`` the arrays stay on disk, paged in on use."""
        directory = Path(directory)
        meta = json.loads((directory / "meta.json").read_text(encoding="utf-8"))
        if meta.get("format") != SAVE_FORMAT:
            found = meta.get("format", "3 or older")
            raise ValueError(
                f"{directory}: a SparseBM25 index in format {found}, this version reads format {SAVE_FORMAT}; "
                "rebuild it (fit, then save)"
            )
        terms = json.loads((directory / "vocabulary.json").read_text(encoding="utf-8"))
        index = cls(k1=meta["k1"], b=meta["b"])
        index.avg_dl = meta["avg_dl"]
        index.vocabulary = {term: row for row, term in enumerate(terms)}
        for name in ARRAYS:
            setattr(index, name, np.load(directory / f"{name}.npy", mmap_mode="r" if mmap else None))
        if not _is_permutation(index.original_ids, index.n_docs):
            raise ValueError(
                f"{directory / 'original_ids.npy'}: not a permutation of the index's {index.n_docs} documents "
                "(corrupt, or from another index); rebuild it (fit, then save)"
            )
        if len(terms) != len(index.indptr) - 1:
            raise ValueError(
                f"{directory / 'vocabulary.json'}: {len(terms)} terms for {len(index.indptr) - 1} postings lists "
                "(truncated, or from another index); rebuild it (fit, then save)"
            )
        index._materialise()
        return index


def _is_permutation(ids: np.ndarray, n: int) -> bool:
    """Whether ``ids`` holds each of ``0 .. n - 1`` exactly once."""
    if ids.shape != (n,) or ids.dtype.kind not in "iu":
        return False
    return n == 0 or (int(ids.min()) >= 0 and bool(np.all(np.bincount(ids, minlength=n) == 1)))
