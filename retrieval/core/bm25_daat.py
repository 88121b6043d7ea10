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

from retrieval.core.bm25_kernels import SLACK, _bound_order, _gallop, _offer, _sift_down, _weight

BLOCK_POSTINGS = 128  # postings per block: one float64 bound per 128 postings (0.06 bytes a posting)


@numba.njit(cache=True)
def block_indptr_of(indptr):  # type: ignore[no-untyped-def]
    """Where each term's block bounds start: term ``t`` has ``ceil(df / BLOCK_POSTINGS)`` blocks."""
    out = np.zeros(len(indptr), dtype=np.int64)
    for term in range(len(indptr) - 1):
        df = indptr[term + 1] - indptr[term]
        out[term + 1] = out[term] + (df + BLOCK_POSTINGS - 1) // BLOCK_POSTINGS
    return out


@numba.njit(cache=True)
def block_upper_bounds(indptr, doc_ids, tfs, idf, length_norm, lengths, k1_plus_1):  # type: ignore[no-untyped-def]
    """Each block's largest weight, computed exactly as the search computes a weight (``_weight``)."""
    starts = block_indptr_of(indptr)
    out = np.zeros(starts[-1])
    for term in range(len(indptr) - 1):
        for posting in range(indptr[term], indptr[term + 1]):
            block = starts[term] + (posting - indptr[term]) // BLOCK_POSTINGS
            weight = _weight(idf[term], tfs[posting], k1_plus_1, length_norm[lengths[doc_ids[posting]]])
            out[block] = max(out[block], weight)
    return out


@numba.njit(cache=True, inline="always")
def _block_end(start, end, position):  # type: ignore[no-untyped-def]
    """One past the last posting of the block (of a list starting at ``start``) holding ``position``."""
    return min(start + ((position - start) // BLOCK_POSTINGS + 1) * BLOCK_POSTINGS, end)


@numba.njit(cache=True, inline="always")
def _gallop_blocks(doc_ids, start, end, position, doc):  # type: ignore[no-untyped-def]
    """The first position, from ``position`` on, of the block whose last doc id is >= ``doc`` (``end`` if none),
    moving block by block (one read of each block's last doc id), never past ``doc`` itself."""
    while position < end and doc_ids[_block_end(start, end, position) - 1] < doc:
        position = _block_end(start, end, position)
    return position


@numba.njit(cache=True)
def search_daat(index, block_indptr, block_upper, terms, counts, k, out_docs, out_scores):  # type: ignore[no-untyped-def]
    """Exact top ``k`` of one query (distinct ``terms``, ``counts``) into ``out_docs``/``out_scores``, best first.

    ``index`` is ``SparseBM25._kernel_input()``; ``k`` is at most the number of documents.
    """
    indptr, doc_ids, tfs, idf, length_norm, lengths, upper, k1_plus_1 = index[:8]
    weights = index[10]
    materialised = len(weights) > 0
    n_docs, n = len(lengths), len(terms)
    bounds, order = _bound_order(terms, counts, upper)
    asc = order[::-1].copy()  # lowest bound first: asc[:first_essential] are the non-essential terms
    prefix = np.zeros(n + 1)  # prefix[m]: the bounds of asc[:m] summed
    for m in range(n):
        prefix[m + 1] = prefix[m] + bounds[asc[m]]
    term_of, count_of = np.empty(n, np.int64), np.empty(n)
    start, end, pos = np.empty(n, np.int64), np.empty(n, np.int64), np.empty(n, np.int64)
    for m in range(n):
        term_of[m], count_of[m] = terms[asc[m]], counts[asc[m]]
        start[m], end[m] = indptr[term_of[m]], indptr[term_of[m] + 1]
        pos[m] = start[m]
    part = np.zeros(n)  # this document's weight (times count) per term, 0.0 where absent
    heap_scores, heap_docs = np.empty(k), np.empty(k, dtype=np.int64)
    size, first_essential = 0, 0
    window_end = 0  # the documents before it were checked against the block bounds of their window
    floor = 0.0  # theta * (1 - SLACK) once k documents are kept: a bound below it cannot reach the top k
    while first_essential < n:
        doc = n_docs  # the next document of an essential list
        for m in range(first_essential, n):
            if pos[m] < end[m] and doc_ids[pos[m]] < doc:
                doc = doc_ids[pos[m]]
        if doc == n_docs:
            break
        if size == k and doc >= window_end:
            # The window [doc, window_end) up to the nearest block end of the essential lists is skipped
            # whole if their blocks' bounds and the non-essential terms' bounds sum below theta.
            window_end, window_bound = n_docs, prefix[first_essential]
            for m in range(first_essential, n):
                if pos[m] < end[m]:
                    window_end = min(window_end, doc_ids[_block_end(start[m], end[m], pos[m]) - 1] + 1)
            for m in range(first_essential, n):
                if pos[m] < end[m] and doc_ids[pos[m]] < window_end:
                    window_bound += (
                        count_of[m] * block_upper[block_indptr[term_of[m]] + (pos[m] - start[m]) // BLOCK_POSTINGS]
                    )
            if window_bound < floor:
                for m in range(first_essential, n):
                    pos[m] = _gallop(doc_ids, pos[m], end[m], window_end)
                continue
        norm = length_norm[lengths[doc]]
        essential = 0.0
        for m in range(first_essential, n):
            part[m] = 0.0
            if pos[m] < end[m] and doc_ids[pos[m]] == doc:
                w = weights[pos[m]] if materialised else _weight(idf[term_of[m]], tfs[pos[m]], k1_plus_1, norm)
                part[m] = count_of[m] * w
                essential += part[m]
                pos[m] += 1
        if size == k and essential + prefix[first_essential] < floor:
            continue
        # The non-essential terms, highest bound first: first each one's block bound at doc (0 if doc falls
        # between its blocks), then, if the document can still make it, the lookups themselves.
        reachable = essential + prefix[first_essential]
        for m in range(first_essential - 1, -1, -1):
            pos[m] = _gallop_blocks(doc_ids, start[m], end[m], pos[m], doc)
            reachable -= bounds[asc[m]]
            if pos[m] < end[m] and doc_ids[pos[m]] <= doc:  # doc, if in the list, is in this block
                reachable += count_of[m] * block_upper[block_indptr[term_of[m]] + (pos[m] - start[m]) // BLOCK_POSTINGS]
            if size == k and reachable < floor:
                break
        else:
            score = essential
            for m in range(first_essential - 1, -1, -1):
                part[m] = 0.0
                if size == k and score + prefix[m + 1] < floor:
                    break
                posting = pos[m] = _gallop(doc_ids, pos[m], _block_end(start[m], end[m], pos[m]), doc)
                if posting < end[m] and doc_ids[posting] == doc:
                    w = weights[posting] if materialised else _weight(idf[term_of[m]], tfs[posting], k1_plus_1, norm)
                    part[m] = count_of[m] * w
                    score += part[m]
            else:
                full = 0.0  # the engine's one order: highest bound first (asc reversed), 0.0 where absent
                for m in range(n - 1, -1, -1):
                    full += part[m]
                if size < k or full > heap_scores[0]:  # a later doc that ties the k-th best loses to it
                    size = _offer(heap_scores, heap_docs, size, k, full, doc)
                    if size == k:
                        floor = heap_scores[0] * (1.0 - SLACK)
                        while first_essential < n and prefix[first_essential + 1] < floor:
                            first_essential += 1
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
