"""Document-at-a-time BM25 top-k with block-max MaxScore: exact, and fast on queries with frequent words.

Each posting list is cut into blocks of ``BLOCK_POSTINGS`` postings, and the index keeps each block's
largest weight (``block_upper``; block ``j`` of term ``t`` is entry ``block_indptr[t] + j``). A query walks
its lists together, one document at a time, in ascending doc id (MaxScore, Turtle and Flood 1995; with
block bounds as in PISA's block-max MaxScore and Lucene's ``MaxScoreBulkScorer``):

- terms sorted by bound (``count * largest weight``), lowest first; the lowest ones whose bounds sum below
  the k-th best score so far (theta) are *non-essential*: a document in none of the other (*essential*)
  lists cannot reach the top k, so only essential lists are walked;
- a window of documents up to the nearest block end of the essential lists is skipped whole when the
  essential blocks' bounds plus the non-essential terms' bounds sum below theta;
- a document of an essential list is then bounded with the non-essential terms' *block* bounds at that
  document, and only if it can still reach theta are those terms looked up (a gallop inside one block).

Exact: every bound carries a relative slack of ``SLACK`` against rounding, and a scored document's score
is summed in the engine's one order (highest bound first, ``_bound_order``), so it is bit-identical to the
term-at-a-time and exhaustive paths'. Documents come in ascending id, so a later document that ties the
k-th best score loses (ties by lower index, ``retrieval.core.top_k``), and pruning needs a strictly higher
bound only.
"""

from __future__ import annotations

import numba
import numpy as np

from retrieval.core.bm25_kernels import SLACK, _bound_order, _gallop, _offer, _sift_down, _tf_of, _weight

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
    indptr, doc_ids, tfs, idf, length_norm, lengths, _, k1_plus_1, column_slot, column_tfs = index[:10]
    block_indptr, block_upper, block = index[13:16]
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
            tf, cursors[m] = _tf_of(indptr, doc_ids, tfs, column_slot, column_tfs, term, cursors[m], doc)
            if tf:
                score += counts[asc[m]] * _weight(idf[term], tf, k1_plus_1, length_norm[lengths[doc]])
        scores[posting - low] = score
    return np.partition(scores, len(scores) - k)[len(scores) - k]


@numba.njit(cache=True)
def search_daat(index, terms, counts, k, out_docs, out_scores):  # type: ignore[no-untyped-def]
    """Exact top ``k`` of one query (distinct ``terms``, ``counts``) into ``out_docs``/``out_scores``, best first.

    ``index`` is ``SparseBM25._kernel_input()``; ``k`` is at most the number of documents.
    """
    indptr, doc_ids, tfs, idf, length_norm, lengths, upper, k1_plus_1, column_slot, column_tfs, weights = index[:11]
    block_indptr, block_upper, block, window = index[13:17]
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
                tf, cursor = _tf_of(indptr, doc_ids, tfs, column_slot, column_tfs, term, cursor, doc)
                if tf:
                    acc[slot] += count * _weight(idf[term], tf, k1_plus_1, length_norm[lengths[doc]])
                if acc[slot] + window_prefix[m] >= floor:
                    candidates[kept] = slot
                    kept += 1
            pos[m], n_candidates = cursor, kept
        for j in range(n_candidates):  # full scores, summed in the engine's order, documents ascending
            slot = candidates[j]
            if size < k or acc[slot] > heap_scores[0]:  # a later doc that ties the k-th best loses to it
                size = _offer(heap_scores, heap_docs, size, k, acc[slot], window_start + slot)
                if size == k:
                    floor = max(floor, heap_scores[0] * (1.0 - SLACK))
                    while first_essential < n and prefix[first_essential + 1] < floor:
                        first_essential += 1
        for j in range(n_touched):
            acc[touched[j]] = 0.0
    if size < k:  # fewer than k matches: the unmatched documents, score 0, lowest index first
        kept = np.sort(heap_docs[:size])
        doc, j = 0, 0
        while size < k:
            if j < len(kept) and kept[j] == doc:
                j += 1
            else:
                size = _offer(heap_scores, heap_docs, size, k, 0.0, doc)
            doc += 1
    for position in range(k - 1, -1, -1):  # pop the worst first, so the row ends best first
        out_scores[position], out_docs[position] = heap_scores[0], heap_docs[0]
        heap_scores[0], heap_docs[0] = heap_scores[position], heap_docs[position]
        _sift_down(heap_scores, heap_docs, position, 0)
