"""BM25 on compact posting lists with exact top-k pruning: the same numbers as ``BM25Index``, fast.

Documents are numbered inside the index shortest first (ties in corpus order; ``original_ids`` maps an internal
number back to the corpus position every result reports): a posting block then holds documents of similar
length, so its largest weight bounds them more tightly. Ties are broken by corpus position, never by internal
number (``_worse``), so the numbering changes no result.

The index keeps, per term, its documents (int32 internal numbers, ascending) and term frequencies (the
smallest unsigned type that holds the corpus's largest, usually one byte), plus one float64 per term (idf, and
the term's largest weight); per document, its length (again the smallest unsigned type), and one float64 per
length value (the norm ``k1 * (1 - b + b * |d| / avgdl)``): about 5 bytes per posting, where a float64
weight matrix takes 12. A weight is computed when it is read, with the float64 operations of
``BM25Index.fit`` in the same order (``idf * tf * (k1 + 1) / (tf + norm)``), so each one is bit-identical
to the reference's.

A query is answered by one of five traversals (``TRAVERSALS``; ``_choose`` picks per query, the
``traversal`` option forces one): exhaustive (every posting of its terms), term at a time (below),
document at a time (block-max MaxScore, ``search_daat``; each block of 128 postings keeps its largest
weight, ``block_upper``) or by quantised impacts (``search_impact``: an integer sum of each posting's weight
rounded to one of 256 steps, then an exact rescoring of the documents whose sum can reach the top k; the
impacts of frequent terms are derived in memory at fit and load as columns, one byte per document, not
saved, the others computed as their postings are read), the sums made block by block in document order
(``impact``) or highest block bound first, blocks that cannot hold a candidate never read
(``impact_blocks``). All five sum a query's terms in the same order and break ties the same way, so they
return the same arrays. Auto: impacts in document order, except for queries with few postings (exhaustive).

Term at a time, a query is scored highest upper bound (``count * largest weight``) first. Once at least
``k`` documents have a partial score and the upper bounds of the terms left sum to less than the k-th
best partial score, no unseen document can reach the top k (MaxScore's argument, as in Lucene and PISA):
the remaining, frequent terms are then only looked up (a gallop through their posting lists) for the
documents that can still make it, instead of walking postings that cover
most of the corpus. The top k is exact: a document's score is the same sum in the same term order whether
or not pruning happened, and the bounds carry a relative slack of 1e-12 against rounding. A query word
repeated ``c`` times adds ``c`` times its weight (issue 18.1: the seed's "Q = number of unique query
terms" is a complexity remark). Summing in bound order rather than query order moves a score by at most a
few ulps (tests: 1e-9 and identical rankings, ties by lower doc index, on the six bundled datasets).

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
from pathlib import Path

import numba
import numpy as np

from retrieval.core.bm25 import DEFAULT_B, DEFAULT_K1, bm25_idf, validate_bm25_params

# The layout ``save`` writes (in meta.json; ``load`` refuses any other). 3: posting lists of doc ids and tfs,
# a norm per document; 4: document lengths and a norm per length, tf columns of frequent terms; 5: each
# posting block's largest weight; 6: documents numbered by length, each one's original index; 7: no tf columns.
SAVE_FORMAT = 7
ARRAYS = (
    "indptr", "doc_ids", "tfs", "idf", "upper", "lengths", "length_norm", "block_upper", "original_ids",
)  # fmt: skip
# How a query's lists are walked (``SparseBM25.traversal``; "auto" chooses per query, ``_choose``).
TRAVERSALS = ("exhaustive", "taat", "daat", "impact", "impact_blocks")
EXHAUSTIVE, TAAT, DAAT, IMPACT, IMPACT_BLOCKS = range(len(TRAVERSALS))
CHUNK_TOKENS = 1 << 22  # tokens per indexing chunk (16 MB of int32 ids)
# Score the best k in full before walking a list longer than this many times the lookups that takes.
LOOKAHEAD = 16
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
# slower), ``impact_blocks`` IMPACT_BLOCK_DOCS at a time (32 KB), skipping blocks by their bounds.
IMPACT_STREAM_DOCS = 1 << 19
IMPACT_BLOCK_DOCS = 1 << 14


# The building blocks every traversal shares: the weight, the top-k heap, the list searches. All numba code
# lives in this one module: numba's on-disk cache of a function is not invalidated when a function it calls
# changes in another file, so a split would let a stale compiled kernel run.

# Relative slack on every pruning bound: a float sum of at most a few hundred terms rounds by far less.
SLACK = 1e-12


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
    """Each query term's bound (``count * largest weight``) and the order terms are summed in: highest
    bound first, ties by term row. Every path sums in this order, so a score does not depend on the path."""
    bounds = np.empty(len(terms))
    for i in range(len(terms)):
        bounds[i] = counts[i] * upper[terms[i]]
    return bounds, np.argsort(-bounds, kind="mergesort")


# Document at a time: block-max MaxScore.
# Document-at-a-time BM25 top-k with block-max MaxScore: exact, and fast on queries with frequent words.
#
# Each posting list is cut into blocks of ``BLOCK_POSTINGS`` postings, and the index keeps each block's
# largest weight (``block_upper``; block ``j`` of term ``t`` is entry ``block_indptr[t] + j``). A query walks
# its lists together, one document at a time, in ascending doc id (MaxScore, Turtle and Flood 1995; with
# block bounds as in PISA's block-max MaxScore and Lucene's ``MaxScoreBulkScorer``):
#
# - terms sorted by bound (``count * largest weight``), lowest first; the lowest ones whose bounds sum below
#   the k-th best score so far (theta) are *non-essential*: a document in none of the other (*essential*)
#   lists cannot reach the top k, so only essential lists are walked;
# - a window of documents up to the nearest block end of the essential lists is skipped whole when the
#   essential blocks' bounds plus the non-essential terms' bounds sum below theta;
# - a document of an essential list is then bounded with the non-essential terms' *block* bounds at that
#   document, and only if it can still reach theta are those terms looked up (a gallop inside one block).
#
# Exact: every bound carries a relative slack of ``SLACK`` against rounding, and a scored document's score
# is summed in the engine's one order (highest bound first, ``_bound_order``), so it is bit-identical to the
# term-at-a-time and exhaustive paths'. Pruning drops only bounds strictly below theta, so a document that
# ties the k-th best score still reaches the heap, which breaks the tie by corpus position (``_worse``;
# ``retrieval.core.top_k``'s rule), whatever the internal numbering.

BLOCK_POSTINGS = 128  # postings per block: one float64 bound per 128 postings (0.06 bytes a posting)
WINDOW_DOCS = 1024  # documents scored together: the essential lists are summed into a window-sized buffer


@numba.njit(cache=True)
def block_indptr_of(indptr, block):  # type: ignore[no-untyped-def]
    """Where each term's block bounds start: term ``t`` has ``ceil(df / block)`` blocks."""
    out = np.zeros(len(indptr), dtype=np.int64)
    for term in range(len(indptr) - 1):
        df = indptr[term + 1] - indptr[term]
        out[term + 1] = out[term] + (df + block - 1) // block
    return out


@numba.njit(cache=True)
def block_upper_bounds(indptr, doc_ids, tfs, idf, length_norm, lengths, k1_plus_1, block):  # type: ignore[no-untyped-def]
    """Each ``block`` postings' largest weight, computed exactly as the search computes a weight (``_weight``)."""
    starts = block_indptr_of(indptr, block)
    out = np.zeros(starts[-1])
    for term in range(len(indptr) - 1):
        for posting in range(indptr[term], indptr[term + 1]):
            slot = starts[term] + (posting - indptr[term]) // block
            weight = _weight(idf[term], tfs[posting], k1_plus_1, length_norm[lengths[doc_ids[posting]]])
            out[slot] = max(out[slot], weight)
    return out


@numba.njit(cache=True, inline="always")
def _block_end(start, end, position, block):  # type: ignore[no-untyped-def]
    """One past the last posting of the block (of a list starting at ``start``) holding ``position``."""
    return min(start + ((position - start) // block + 1) * block, end)


@numba.njit(cache=True, inline="always")
def _gallop_blocks(doc_ids, start, end, position, doc, block):  # type: ignore[no-untyped-def]
    """The first position, from ``position`` on, of the block whose last doc id is >= ``doc`` (``end`` if none),
    moving block by block (one read of each block's last doc id), never past ``doc`` itself."""
    while position < end and doc_ids[_block_end(start, end, position, block) - 1] < doc:
        position = _block_end(start, end, position, block)
    return position


@numba.njit(cache=True, inline="always")
def _window_bound(doc_ids, block_upper, first_block, start, end, position, window_end, block):  # type: ignore[no-untyped-def]
    """The largest block bound of a list's blocks holding its postings from ``position`` below ``window_end``
    (0.0 if it has none there)."""
    best = 0.0
    while position < end and doc_ids[position] < window_end:
        best = max(best, block_upper[first_block + (position - start) // block])
        position = _block_end(start, end, position, block)
    return best


@numba.njit(cache=True)
def _seed_theta(index, terms, counts, asc, k):  # type: ignore[no-untyped-def]
    """A lower bound of the query's k-th best score, before any list is walked: the k-th best full score of the
    documents in the block with the highest bound of the highest-bound list (0.0 if it holds fewer than ``k``).

    A high theta from the start keeps the frequent terms non-essential and the candidates few.
    """
    indptr, doc_ids, tfs, idf, length_norm, lengths, _, k1_plus_1 = index[:8]
    block_indptr, block_upper, block = index[11:14]
    if len(asc) == 0:
        return 0.0
    top = terms[asc[-1]]
    first, n_blocks = block_indptr[top], block_indptr[top + 1] - block_indptr[top]
    best = first + np.argmax(block_upper[first : first + n_blocks])
    low = indptr[top] + (best - first) * block
    high = min(low + block, indptr[top + 1])
    if high - low < k:
        return 0.0
    cursors = np.empty(len(asc), np.int64)
    for m in range(len(asc)):
        cursors[m] = indptr[terms[asc[m]]]
    scores = np.empty(high - low)
    for posting in range(low, high):  # ascending documents: every cursor only moves forward
        doc, score = doc_ids[posting], 0.0
        for m in range(len(asc) - 1, -1, -1):
            term = terms[asc[m]]
            tf, cursors[m] = _tf_of(indptr, doc_ids, tfs, term, cursors[m], doc)
            if tf:
                score += counts[asc[m]] * _weight(idf[term], tf, k1_plus_1, length_norm[lengths[doc]])
        scores[posting - low] = score
    return np.partition(scores, len(scores) - k)[len(scores) - k]


@numba.njit(cache=True)
def search_daat(index, terms, counts, k, out_docs, out_scores):  # type: ignore[no-untyped-def]
    """Exact top ``k`` of one query (distinct ``terms``, ``counts``) into ``out_docs``/``out_scores``, best first.

    ``index`` is ``SparseBM25._kernel_input()``; ``k`` is at most the number of documents.
    """
    indptr, doc_ids, tfs, idf, length_norm, lengths, upper, k1_plus_1, weights = index[:9]
    block_indptr, block_upper, block, window, original = index[11:16]
    materialised = len(weights) > 0
    n_docs, n = len(lengths), len(terms)
    bounds, order = _bound_order(terms, counts, upper)
    asc = order[::-1].copy()  # lowest bound first: asc[:first_essential] are the non-essential terms
    prefix = np.zeros(n + 1)  # prefix[m]: the bounds of asc[:m] summed
    for m in range(n):
        prefix[m + 1] = prefix[m] + bounds[asc[m]]
    term_of, count_of, first_block = np.empty(n, np.int64), np.empty(n), np.empty(n, np.int64)
    start, end, pos = np.empty(n, np.int64), np.empty(n, np.int64), np.empty(n, np.int64)
    for m in range(n):
        term_of[m], count_of[m] = terms[asc[m]], counts[asc[m]]
        start[m], end[m], first_block[m] = indptr[term_of[m]], indptr[term_of[m] + 1], block_indptr[term_of[m]]
        pos[m] = start[m]
    window_prefix = np.zeros(n + 1)
    acc = np.zeros(window)  # the essential terms' partial score of each document of the window
    touched = np.empty(window, np.int64)
    candidates = np.empty(window, np.int64)
    heap_scores, heap_docs = np.empty(k), np.empty(k, dtype=np.int64)
    size, first_essential = 0, 0
    # theta * (1 - SLACK), theta a proven lower bound of the k-th best score: a bound below floor cannot reach
    # the top k. It starts at the k-th best full score of the best block of the highest-bound list.
    floor = _seed_theta(index, terms, counts, asc, k) * (1.0 - SLACK)
    while first_essential < n and prefix[first_essential + 1] < floor:
        first_essential += 1
    while first_essential < n:
        window_start = n_docs  # the window opens at the next document of an essential list
        for m in range(first_essential, n):
            if pos[m] < end[m]:
                window_start = min(window_start, doc_ids[pos[m]])
        if window_start == n_docs:
            break
        window_end = min(window_start + window, n_docs)
        essential = first_essential  # this window's split, even if theta rises inside it
        for m in range(essential):  # window_prefix[m]: the window's block bounds of terms asc[:m] summed
            pos[m] = _gallop_blocks(doc_ids, start[m], end[m], pos[m], window_start, block)
            top = _window_bound(doc_ids, block_upper, first_block[m], start[m], end[m], pos[m], window_end, block)
            window_prefix[m + 1] = window_prefix[m] + count_of[m] * top
        if floor > 0.0:  # the whole window skipped if no document in it can reach theta
            bound = window_prefix[essential]
            for m in range(essential, n):
                top = _window_bound(doc_ids, block_upper, first_block[m], start[m], end[m], pos[m], window_end, block)
                bound += count_of[m] * top
            if bound < floor:
                for m in range(essential, n):
                    pos[m] = _gallop(doc_ids, pos[m], end[m], window_end)
                continue
        n_touched = 0  # the essential lists in the window, highest bound first (the engine's order)
        for m in range(n - 1, essential - 1, -1):
            term, count, posting = term_of[m], count_of[m], pos[m]
            while posting < end[m] and doc_ids[posting] < window_end:
                doc = doc_ids[posting]
                slot = doc - window_start
                touched[n_touched] = slot  # kept only if new: every weight is > 0, so 0.0 means unseen
                n_touched += acc[slot] == 0.0
                if materialised:
                    acc[slot] += count * weights[posting]
                else:
                    acc[slot] += count * _weight(idf[term], tfs[posting], k1_plus_1, length_norm[lengths[doc]])
                posting += 1
            pos[m] = posting
        n_candidates = 0  # the documents whose partial score and the non-essential bounds reach theta
        for j in range(n_touched):
            if acc[touched[j]] + window_prefix[essential] >= floor:
                candidates[n_candidates] = touched[j]
                n_candidates += 1
        candidates[:n_candidates].sort()  # ascending: the lookups' cursors only move forward
        # The non-essential terms, highest bound first, looked up for the candidates left; a candidate stays
        # while its partial score and the bounds of the terms still to look up reach theta.
        for m in range(essential - 1, -1, -1):
            term, count, cursor, kept = term_of[m], count_of[m], pos[m], 0
            for j in range(n_candidates):
                slot = candidates[j]
                doc = window_start + slot
                tf, cursor = _tf_of(indptr, doc_ids, tfs, term, cursor, doc)
                if tf:
                    acc[slot] += count * _weight(idf[term], tf, k1_plus_1, length_norm[lengths[doc]])
                if acc[slot] + window_prefix[m] >= floor:
                    candidates[kept] = slot
                    kept += 1
            pos[m], n_candidates = cursor, kept
        for j in range(n_candidates):  # full scores, summed in the engine's order, documents ascending
            slot = candidates[j]
            if size < k or acc[slot] >= heap_scores[0]:  # a tie goes to the lower original index (_worse)
                size = _offer(heap_scores, heap_docs, size, k, acc[slot], window_start + slot, original)
                if size == k:
                    floor = max(floor, heap_scores[0] * (1.0 - SLACK))
                    while first_essential < n and prefix[first_essential + 1] < floor:
                        first_essential += 1
        for j in range(n_touched):
            acc[touched[j]] = 0.0
    _emit(heap_scores, heap_docs, size, k, original, out_docs, out_scores)


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
# so the scores are bit-identical to the other traversals' and the heap breaks ties by corpus position.
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
    doc_ids, tfs, idf, length_norm, lengths, k1_plus_1 = index[1], index[2], index[3], index[4], index[5], index[7]
    length_start, step = index[16], index[17]
    term_idf = idf[term]
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


# Pass 1 never holds the sums of every document: it makes them ``block`` documents at a time in a buffer a
# core's cache holds (``impact_stream_docs``, 2^19: 1 MB of uint16), all the query's impact columns added in
# one pass (four at a time) and its posting lists scattered from a cursor each, then keeps the documents of
# the block whose sum can still be a candidate. The k largest sums seen so far (a min-heap of integers) give
# a lower bound ``L`` of ``S``; a sum below ``L - W - 1`` can be neither a candidate nor among the k largest,
# so only the others are kept, and the final ``S`` filters them: the candidates are the documents with
# ``A(d) >= S - W - 1``, whatever the block size (on 10M passages, the whole-index sums, 20 MB, left the cache
# and each impact column streamed them again: p95 9.8 -> 6.2 ms for pass 1, benchmarks/results.md, round 5).
#
# ``impact_blocks`` computes the same candidates with smaller blocks (``impact_block_docs``) taken highest
# bound first: each block's bound is the query's largest possible sum in it (``count`` times each term's
# largest impact there: kept per block for the terms with an impact column, ``_impact_block_max``, found in
# one pass over the postings for the others); once a block's bound is below ``L - W - 1`` no document in it
# or in any later block can be a candidate or among the k largest sums, so the rest are never read.


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


@numba.njit(cache=True)
def _impact_block_bounds(index, terms, counts, n_blocks, block):  # type: ignore[no-untyped-def]
    """Each block's bound (the largest integer sum a document of it can have for the query) and, for each term
    without an impact column, where its postings of each block start (``starts[i, b]``; ``starts[i, n_blocks]``
    is its end)."""
    indptr, doc_ids, tfs, idf, length_norm, lengths, _, k1_plus_1 = index[:8]
    step, impact_slot, block_max = index[17], index[18], index[20]
    bounds = np.zeros(n_blocks, np.int64)
    starts = np.empty((len(terms), n_blocks + 1), np.int64)
    for i in range(len(terms)):
        term, count = terms[i], int(counts[i])
        if impact_slot[term] >= 0:
            tops = block_max[impact_slot[term]]
            for b in range(n_blocks):
                bounds[b] += count * int(tops[b])
            continue
        posting, end = indptr[term], indptr[term + 1]
        for b in range(n_blocks):
            starts[i, b] = posting
            limit, top = (b + 1) * block, 0
            while posting < end and doc_ids[posting] < limit:
                norm = length_norm[lengths[doc_ids[posting]]]
                top = max(top, _quantise(_weight(idf[term], tfs[posting], k1_plus_1, norm), step))
                posting += 1
            bounds[b] += count * top
        starts[i, n_blocks] = end
    return bounds, starts


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
def _impact_candidates(index, terms, counts, k, by_bound, local, candidates):  # type: ignore[no-untyped-def]
    """Pass 1 of ``search_impact``: the documents whose integer sum can still reach the top k, ascending, into
    ``candidates`` (their number returned; -1 if none can be excluded); blocks in document order, or highest
    bound first, skipping those that cannot hold a candidate (``by_bound``: ``impact_blocks``). ``local``
    (uint16, ``impact_buffer_length`` long) is zero on entry and left zero."""
    indptr, impact_slot, impact_columns = index[0], index[18], index[19]
    n_docs, words = len(index[5]), int(counts.sum())
    block = index[21] if by_bound else index[22]
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
    if by_bound:
        bounds, starts = _impact_block_bounds(index, terms, counts, n_blocks, block)
        order = np.argsort(-bounds, kind="mergesort")
    else:
        bounds, starts, order = np.zeros(0, np.int64), np.zeros((0, 0), np.int64), np.arange(n_blocks)
    heap = np.zeros(k, np.int64)  # the k largest sums seen (zeros until k are positive: k <= n_docs)
    kept, n_kept = np.empty(1024, np.int64), 0  # candidates so far, each (doc << 16) | sum
    chunk_max = np.empty(len(local) // IMPACT_CHUNK, local.dtype)
    tables, length_at = np.zeros((len(listed), IMPACT_TABLE_TF), np.int64), np.full(len(listed), -1, np.int64)
    for b in order:
        cutoff = max(1, heap[0] - words - 1)
        if by_bound and bounds[b] < cutoff:
            break  # every later block's bound is at most this one's
        first = b * block
        size = min(block, n_docs - first)
        n_chunks = (size + IMPACT_CHUNK - 1) // IMPACT_CHUNK  # past ``size`` ``local`` is never written: zero
        _add_columns(local, impact_columns, slots, column_counts, first, size)
        for j in range(len(listed)):
            i = listed[j]
            posting = starts[i, b] if by_bound else cursor[j]
            stop = _gallop(index[1], posting, indptr[terms[i] + 1], first + size)
            length = -1 if by_bound else length_at[j]  # blocks by bound: not in list order
            length_at[j] = _scatter_impacts(
                index, terms[i], np.uint16(counts[i]), posting, stop, first, local, tables[j], length
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
    n_candidates = 0
    for j in range(n_kept):
        if kept[j] & 0xFFFF >= threshold:
            kept[n_candidates] = kept[j]
            n_candidates += 1
    if by_bound:
        kept[:n_candidates].sort()  # by document (the sum is in the low bits); in document order, already so
    for j in range(n_candidates):
        candidates[j] = kept[j] >> 16
    return n_candidates


@numba.njit(cache=True)
def impact_buffer_length(n_docs, block_docs, stream_docs):  # type: ignore[no-untyped-def]
    """Length of the uint16 buffer pass 1 makes its sums in: the larger block, at most the index, in whole
    ``IMPACT_CHUNK``s."""
    longest = min(n_docs, max(block_docs, stream_docs))
    return (longest + IMPACT_CHUNK - 1) // IMPACT_CHUNK * IMPACT_CHUNK


@numba.njit(cache=True)
def search_impact(index, terms, counts, k, by_bound, local, candidates, out_docs, out_scores):  # type: ignore[no-untyped-def]
    """Exact top ``k`` of one query into ``out_docs``/``out_scores`` (best first) by quantised impacts and
    exact rescoring, the sums made block by block in document order or, if ``by_bound``, highest bound first
    (``impact_blocks``); False (outputs untouched) if the integer sums cannot exclude any document, or the
    query has more than ``IMPACT_MAX_WORDS`` words.

    ``index`` is ``SparseBM25._kernel_input()``; ``local`` (uint16, ``impact_buffer_length`` long) is zero on
    entry and left zero; ``candidates`` (int32) has one slot per document.
    """
    indptr, doc_ids, tfs, idf, length_norm, lengths, upper, k1_plus_1 = index[:8]
    original = index[15]
    if counts.sum() > IMPACT_MAX_WORDS:
        return False
    n_candidates = _impact_candidates(index, terms, counts, k, by_bound, local, candidates)
    if n_candidates < 0:
        return False
    scores = np.zeros(n_candidates)
    for i in _bound_order(terms, counts, upper)[1]:  # the engine's summation order
        term, count, cursor = terms[i], counts[i], indptr[terms[i]]
        for j in range(n_candidates):  # ascending documents: the cursor only moves forward
            doc = candidates[j]
            tf, cursor = _tf_of(indptr, doc_ids, tfs, term, cursor, doc)
            if tf:
                scores[j] += count * _weight(idf[term], tf, k1_plus_1, length_norm[lengths[doc]])
    heap_scores, heap_docs, size = np.empty(k), np.empty(k, dtype=np.int64), 0
    for j in range(n_candidates):
        if size < k or scores[j] >= heap_scores[0]:  # a tie goes to the lower original index (_worse)
            size = _offer(heap_scores, heap_docs, size, k, scores[j], candidates[j], original)
    _emit(heap_scores, heap_docs, size, k, original, out_docs, out_scores)
    return True


@numba.njit(cache=True)
def _search_taat(index, prune, terms, counts, k, acc, touched, out_docs, out_scores):  # type: ignore[no-untyped-def]
    """Exact top ``k`` of one query into ``out_docs``/``out_scores`` (best first), term at a time, pruned if
    ``prune`` (else exhaustive); leaves ``acc`` all zero.

    ``index`` is ``SparseBM25._kernel_input()``. ``acc`` (float64) and ``touched`` (int32) have one slot per
    document; ``acc`` is zero on entry.
    """
    indptr, doc_ids, tfs, idf, length_norm, lengths, upper, k1_plus_1, weights, dense_slot, dense_rows = index[:11]
    original = index[15]
    n_terms = len(terms)
    bounds, order = _bound_order(terms, counts, upper)
    remaining = np.zeros(n_terms + 1)  # remaining[i]: the bounds of terms order[i:] summed
    for i in range(n_terms - 1, -1, -1):
        remaining[i] = remaining[i + 1] + bounds[order[i]]
    heap_scores = np.empty(k)
    heap_docs = np.empty(k, dtype=np.int64)
    n_touched = 0
    run_starts = np.zeros(n_terms + 1, dtype=np.int64)
    first_lookup = n_terms  # terms order[first_lookup:] are only looked up, for documents that can still win
    theta = 0.0  # a lower bound of the final k-th best score: the k-th best of k documents' lower bounds
    size = 0
    total = _postings_of(indptr, terms)
    materialised = len(weights) > 0
    # Without pruning, a short corpus is cheaper to scan whole than to track which documents were touched.
    track = prune or 2 * total < len(lengths)
    for i in range(n_terms):
        term = terms[order[i]]
        # Before walking a long list, or before pruning, score the previous term's k best in full (a few
        # lookups): their k-th best full score may exceed every bound left, and a higher theta leaves
        # fewer documents to look up.
        long_list = indptr[term + 1] - indptr[term] > LOOKAHEAD * k * (n_terms - i)
        if prune and i > 0 and size == k and (long_list or remaining[i] < theta * (1.0 - SLACK)):
            for j in range(k):
                doc = heap_docs[j]
                full = acc[doc]
                for later in range(i, n_terms):
                    other = terms[order[later]]
                    tf = _tf_of(indptr, doc_ids, tfs, other, indptr[other], doc)[0]
                    if tf:
                        full += counts[order[later]] * _weight(idf[other], tf, k1_plus_1, length_norm[lengths[doc]])
                heap_scores[j] = full
            theta = max(theta, heap_scores[:k].min())
        if prune and i > 0 and remaining[i] < theta * (1.0 - SLACK):
            first_lookup = i  # an unseen document scores at most remaining[i]: it cannot reach the top k
            break
        count = counts[order[i]]
        term_idf = idf[term]
        size = 0  # the k best partial scores among this term's documents
        if not track:  # the plain loops of an exhaustive scan
            if dense_slot[term] >= 0:  # a frequent term: a sequential add beats a scatter
                row = dense_rows[dense_slot[term]]
                for doc in range(len(lengths)):  # adding 0.0 where the term is absent changes no sum
                    acc[doc] += count * row[doc]
            elif materialised:
                for posting in range(indptr[term], indptr[term + 1]):
                    acc[doc_ids[posting]] += count * weights[posting]
            else:
                for posting in range(indptr[term], indptr[term + 1]):
                    doc = doc_ids[posting]
                    acc[doc] += count * _weight(term_idf, tfs[posting], k1_plus_1, length_norm[lengths[doc]])
            continue
        run_starts[i] = n_touched  # documents first seen in this term's list: one ascending run
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
            if prune and (size < k or partial > heap_scores[0]):
                size = _offer(heap_scores, heap_docs, size, k, partial, doc, original)
        if size == k:
            theta = max(theta, heap_scores[0])
    size = 0
    if first_lookup < n_terms:
        # The looked-up terms, for each document whose partial score plus the bounds left can still reach
        # theta, or the k-th best full score so far once k are kept. The touched documents form one
        # ascending run per walked list, so within a run every list's cursor only moves forward.
        run_starts[first_lookup] = n_touched
        cursors = np.empty(n_terms, dtype=np.int64)
        for run in range(first_lookup):
            for i in range(first_lookup, n_terms):
                cursors[i] = indptr[terms[order[i]]]
            for j in range(run_starts[run], run_starts[run + 1]):
                doc = touched[j]
                floor = (heap_scores[0] if size == k and heap_scores[0] > theta else theta) * (1.0 - SLACK)
                if acc[doc] + remaining[first_lookup] < floor:
                    continue
                for i in range(first_lookup, n_terms):
                    if acc[doc] + remaining[i] < floor:
                        break
                    term = terms[order[i]]
                    tf, cursors[i] = _tf_of(indptr, doc_ids, tfs, term, cursors[i], doc)
                    if tf:
                        acc[doc] += counts[order[i]] * _weight(idf[term], tf, k1_plus_1, length_norm[lengths[doc]])
                else:
                    if acc[doc] >= floor:
                        size = _offer(heap_scores, heap_docs, size, k, acc[doc], doc, original)
    elif not track:
        for doc in range(len(lengths)):
            if size < k or _worse(heap_scores[0], heap_docs[0], acc[doc], doc, original):  # most fail the test
                size = _offer(heap_scores, heap_docs, size, k, acc[doc], doc, original)
        acc[:] = 0.0
    else:
        for j in range(n_touched):
            doc = touched[j]
            if size < k or _worse(heap_scores[0], heap_docs[0], acc[doc], doc, original):  # most fail the test
                size = _offer(heap_scores, heap_docs, size, k, acc[doc], doc, original)
    for j in range(n_touched):
        acc[touched[j]] = 0.0
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
    exhaustively. Term and document at a time never win any more; they stay, forced only, as the exact references of
    the pruning arguments they embody. Impacts by blocks (``impact_blocks``) run only when forced too: since
    ``impact`` makes its sums in blocks as well (round 5), they lost on every bucket of 10M real passages (p50 / p95
    12.2 / 25.3 ms against 4.6 / 8.5; ``bench_bm25_traversals.py --passages 10000000 --corpus real --traversals
    impact impact_blocks``).
    """
    if forced >= 0:
        return forced
    if postings < impact_min:
        return EXHAUSTIVE
    return IMPACT


@numba.njit(cache=True)
def _search_queries(  # type: ignore[no-untyped-def]
    index, forced, impact_min, q_indptr, q_rows, first, last, acc, touched, sums, out_docs, out_scores, out_traversals
):
    """Queries ``first`` to ``last - 1`` of a batch, one after another on one workspace; each query's
    traversal (``TRAVERSALS`` index) goes to ``out_traversals`` (exhaustive for an impact query whose sums
    could exclude no document, ``search_impact``)."""
    k = out_docs.shape[1]
    for query in range(first, last):
        terms, counts = _distinct(q_rows[q_indptr[query] : q_indptr[query + 1]])
        traversal = _choose(forced, _postings_of(index[0], terms), impact_min)
        by_impacts = traversal in (IMPACT, IMPACT_BLOCKS)
        if by_impacts and not search_impact(
            index, terms, counts, k, traversal == IMPACT_BLOCKS, sums, touched, out_docs[query], out_scores[query]
        ):
            traversal, by_impacts = EXHAUSTIVE, False
        out_traversals[query] = traversal
        if traversal == DAAT:
            search_daat(index, terms, counts, k, out_docs[query], out_scores[query])
        elif not by_impacts:
            prune = traversal == TAAT
            _search_taat(index, prune, terms, counts, k, acc, touched, out_docs[query], out_scores[query])


@numba.njit(cache=True, parallel=True)
def _search_parallel(  # type: ignore[no-untyped-def]
    index, forced, impact_min, q_indptr, q_rows, n_chunks, out_docs, out_scores, out_traversals
):
    """The batch split into ``n_chunks`` runs of queries, one workspace each, in parallel."""
    n_queries, n_docs = out_docs.shape[0], len(index[5])  # index[5]: lengths, one per document
    for chunk in numba.prange(n_chunks):
        first, last = chunk * n_queries // n_chunks, (chunk + 1) * n_queries // n_chunks
        acc, touched = np.zeros(n_docs), np.empty(n_docs, dtype=np.int32)
        sums = np.zeros(impact_buffer_length(n_docs, index[21], index[22]), dtype=np.uint16)
        _search_queries(
            index, forced, impact_min, q_indptr, q_rows, first, last, acc, touched, sums, out_docs, out_scores,
            out_traversals,
        )  # fmt: skip


@numba.njit(cache=True)
def _score_row(index, rows):  # type: ignore[no-untyped-def]
    """Every document's score for one query, terms summed in the order every traversal uses."""
    indptr, doc_ids, tfs, idf, length_norm, lengths, upper, k1_plus_1 = index[:8]
    terms, counts = _distinct(rows)
    scores = np.zeros(len(lengths))
    for i in _bound_order(terms, counts, upper)[1]:
        term, count = terms[i], counts[i]
        for posting in range(indptr[term], indptr[term + 1]):
            doc = doc_ids[posting]
            scores[doc] += count * _weight(idf[term], tfs[posting], k1_plus_1, length_norm[lengths[doc]])
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
    block_postings: int = BLOCK_POSTINGS  # read by fit (and saved); tests make blocks tiny
    window_docs: int = WINDOW_DOCS
    impact_block_docs: int = IMPACT_BLOCK_DOCS  # read when impacts are derived (fit, load)
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
        self.block_upper = np.empty(0, dtype=np.float64)
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
        each) and their block maxima, and on a small index its weights and dense rows."""
        derived = (self._weights, self._dense_rows, self._impact_columns, self._impact_block_max, self._length_start)
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
        # Documents are numbered shortest first (ties: original order), so a posting block holds documents of
        # similar length and its largest weight bounds them tightly; ``original_ids`` maps back.
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
        weight_inputs = (indptr, doc_ids, tfs, self.idf, self.length_norm, self.lengths, self.k1 + 1.0)
        self.upper = _upper_bounds(*weight_inputs)
        self.block_upper = block_upper_bounds(*weight_inputs, self.block_postings)
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

    def _kernel_input(self) -> tuple:
        """Everything the kernels read, in the order they unpack it."""
        return (
            self.indptr, self.doc_ids, self.tfs, self.idf, self.length_norm, self.lengths, self.upper, self.k1 + 1.0,
            self._weights, self._dense_slot, self._dense_rows,
            self._block_indptr, self.block_upper, self.block_postings, self.window_docs, self.original_ids,
            self._length_start, self._impact_step, self._impact_slot, self._impact_columns, self._impact_block_max,
            self._impact_block, self.impact_stream_docs,
        )  # fmt: skip

    def _materialise(self) -> None:
        """Derive the in-memory helpers: each term's column slot (-1: none) and, on a small index, every
        weight (and the densest terms' rows), so no posting needs a division.

        Weights are computed by ``_weight`` itself, so the numbers do not change.
        """
        self._block_indptr = block_indptr_of(self.indptr, self.block_postings)
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
        ``IMPACT_COLUMN_MIN_DF_SHARE`` of the documents as columns (one byte per document, 0 where absent), with
        each column's largest impact per block of ``impact_block_docs`` documents (``impact_blocks``)."""
        self._impact_step = float(self.upper.max()) / IMPACT_LEVELS if len(self.upper) and self.upper.max() > 0 else 1.0
        longest = int(self.lengths[-1]) if self.n_docs else 0  # documents are numbered shortest first
        self._length_start = np.searchsorted(self.lengths, np.arange(longest + 2)).astype(np.int64)
        df = np.diff(self.indptr)
        frequent = np.flatnonzero(df >= max(1.0, IMPACT_COLUMN_MIN_DF_SHARE * self.n_docs))
        self._impact_slot = np.full(len(self.idf), -1, dtype=np.int64)
        self._impact_slot[frequent] = np.arange(len(frequent))
        inputs = (self.indptr, self.doc_ids, self.tfs, self.idf, self.length_norm, self.lengths, self.k1 + 1.0)
        self._impact_columns = impact_columns_of(*inputs, self._impact_step, frequent)
        self._impact_block = self.impact_block_docs  # the block size of these maxima, whatever is set later
        block_starts = np.arange(0, self.n_docs, self._impact_block)
        self._impact_block_max = np.zeros((len(frequent), len(block_starts)), dtype=np.uint8)
        if len(frequent) and len(block_starts):
            self._impact_block_max[:] = np.maximum.reduceat(self._impact_columns, block_starts, axis=1)

    def scores(self, query_tokens: Iterable[str]) -> np.ndarray:
        """BM25 score of every document for one query, in the corpus's (original) order (float64)."""
        scores = np.empty(self.n_docs)
        scores[self.original_ids] = _score_row(self._kernel_input(), self._query_arrays([query_tokens])[1])
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
            index, impact_min = self._kernel_input(), self.impact_min_postings_below
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
        sums_length = impact_buffer_length(self.n_docs, self._impact_block, self.impact_stream_docs)
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
        meta = {"format": SAVE_FORMAT, "k1": self.k1, "b": self.b, "avg_dl": self.avg_dl, "block": self.block_postings}
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
        index.avg_dl, index.block_postings = meta["avg_dl"], meta["block"]
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
