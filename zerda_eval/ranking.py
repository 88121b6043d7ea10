"""The one run type and the one tie-break order of the harness.

A ranking is ``[(doc_id, score), ...]`` best first; a run is ``{query_id: ranking}``. Every run the
harness writes, fuses or evaluates is put in ONE order first (``TIE_BREAK``: score descending, then
doc id ascending): ranx and trec_eval break tied scores differently, which moved MAP@100 by up to
2e-3 on the small Arabic sets; after ``tie_break`` every tool sees the same ranking.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from itertools import chain
from operator import itemgetter

import numpy as np

from zerda_eval.errors import RunError

TIE_BREAK = "score desc, doc_id asc"

Ranking = list[tuple[str, float]]
Run = dict[str, Ranking]


def tie_break(results: Sequence[tuple[str, float]]) -> list[tuple[str, float]]:
    """Results in ``TIE_BREAK`` order (score desc, doc id asc), a doc kept once (its best score).

    NaN or infinite scores are a system bug that would make any order arbitrary: ``RunError``.
    """
    doc_ids, scores = ranked_arrays(results)
    return list(zip(doc_ids, scores.tolist(), strict=True))


def ranked_arrays(results: Sequence[tuple[str, float]]) -> tuple[list[str], np.ndarray]:
    """``tie_break`` as doc ids and float64 scores, with no per-document Python work where it can be avoided.

    A ranking already strictly decreasing (as the runner hands it over) is kept as it is; otherwise one
    numeric sort, and doc id strings are compared only if some scores tie.
    """
    if not results:
        return [], np.array([], dtype=np.float64)
    ranked = list(map(itemgetter(0), results))
    scores = np.fromiter(map(itemgetter(1), results), dtype=np.float64, count=len(ranked))
    finite = np.isfinite(scores)
    if not finite.all():
        bad = int(np.flatnonzero(~finite)[0])
        raise RunError(f"non-finite score {scores[bad]!r} for document {ranked[bad]!r}; fix the system or embedder")
    if not (np.diff(scores) < 0).all():
        order = np.argsort(-scores, kind="stable")
        ranked, scores = [ranked[i] for i in order.tolist()], scores[order]
        tied = np.flatnonzero(np.diff(scores) == 0)  # ranked[i] and ranked[i + 1] tie
        if tied.size:  # each maximal run of equal scores: doc id ascending decides
            breaks = np.diff(tied) > 1
            starts, stops = tied[np.r_[True, breaks]], tied[np.r_[breaks, True]] + 2
            for start, stop in zip(starts.tolist(), stops.tolist(), strict=True):
                ranked[start:stop] = sorted(ranked[start:stop])
    if len(set(ranked)) < len(ranked):  # a doc listed twice keeps its first (best-ranked) place
        seen: set[str] = set()
        keep = [i for i, doc_id in enumerate(ranked) if not (doc_id in seen or seen.add(doc_id))]
        ranked, scores = [ranked[i] for i in keep], scores[keep]
    return ranked, scores


def top_doc_ids(rankings: Sequence[Sequence[tuple[str, float]]], depth: int) -> list[list[str]]:
    """Each ranking's first ``depth`` doc ids in ``TIE_BREAK`` order: ``ranked_arrays(r)[0][:depth]`` for all at once.

    Rankings the runner hands over are in that order already; that is checked on one flat array of
    every score rather than per ranking (finite scores, each above the next, or equal to it with a
    lower doc id). Only a ranking that fails the check, or repeats a doc id within its first ``depth``,
    goes through ``ranked_arrays`` (which sorts it, or raises ``RunError``).
    """
    if not rankings:
        return []
    lengths = np.fromiter(map(len, rankings), dtype=np.int64, count=len(rankings))
    ends = np.cumsum(lengths)
    scores = np.fromiter(chain.from_iterable(map(itemgetter(1), r) for r in rankings), np.float64, int(ends[-1]))
    starts = ends - lengths
    ordered = np.ones(scores.size, dtype=bool)  # per position: finite, and before the next doc in TIE_BREAK order
    ordered[:-1] = scores[:-1] > scores[1:]
    tied = np.flatnonzero(scores[:-1] == scores[1:])
    doc_ids = list(chain.from_iterable(map(itemgetter(0), r) for r in rankings))
    if tied.size:  # equal scores: the lower doc id must come first
        ordered[tied] = [doc_ids[i] < doc_ids[i + 1] for i in tied.tolist()]
    filled = lengths > 0
    ordered[ends[filled] - 1] = True
    ordered &= np.isfinite(scores)
    clean = np.ones(len(rankings), dtype=bool)
    if filled.any():
        clean[filled] = np.logical_and.reduceat(ordered, starts[filled])
    top = []
    for ranking, start, fast in zip(rankings, starts.tolist(), clean.tolist(), strict=True):
        head = doc_ids[start : start + min(depth, len(ranking))]
        top.append(head if fast and len(set(head)) == len(head) else ranked_arrays(ranking)[0][:depth])
    return top


def sort_ranking(scored: Iterable[tuple[str, float]], top_k: int | None = None) -> Ranking:
    """``(doc_id, score)`` pairs in ``TIE_BREAK`` order, at most ``top_k`` (a doc kept once, its best score)."""
    ranking = tie_break([(str(d), float(s)) for d, s in scored])
    return ranking if top_k is None else ranking[:top_k]
