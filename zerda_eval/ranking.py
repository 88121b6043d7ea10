"""The one run type and the one tie-break order of the harness: trec_eval's.

A ranking is ``[(doc_id, score), ...]`` best first; a run is ``{query_id: ranking}``. Every run the
harness ranks, writes, fuses or evaluates is put in ONE order first (``TIE_BREAK``): score descending,
then doc id DESCENDING compared as UTF-8 bytes, the order trec_eval's ``comp_sim_docno`` sorts by
(``strcmp(docno2, docno1)``), so a cell's ``run.trec.gz`` given to trec_eval (or pytrec_eval, ir_measures)
gives the cell's numbers. Scores are compared as trec_eval holds them, in a C ``float``
(``TEXT_RESULTS.sim``, ``trec_format.h``): two scores that round to one float32 tie and go by doc id
(``trec_scores``); each keeps its float64 value, written and fused as it is. UTF-8 byte order is code
point order, but ``doc_key`` compares the bytes as trec_eval does, so nothing rests on that. A
container's order (a dict's keys, a file's lines) is never a rank. A document listed twice in one
ranking is an error unless a ``duplicates`` policy says which copy counts (``"max"``: its best score;
``"first"``: its first copy as given).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from itertools import chain
from operator import itemgetter

import numpy as np

from zerda_eval.errors import ConfigError, RunError

TIE_BREAK = "score desc (as a float32, trec_eval's float sim), doc_id desc (UTF-8 bytes, trec_eval's strcmp)"
DUPLICATE_POLICIES = ("max", "first")  # which copy of a doc listed twice counts; None: the run is refused

Ranking = list[tuple[str, float]]
Run = dict[str, Ranking]


def trec_scores(scores: np.ndarray) -> np.ndarray:
    """``scores`` as trec_eval compares them: rounded to float32 (it holds a score in a C ``float``), returned
    as float64 (exactly), the sort key of ``TIE_BREAK``; beyond float32's range, infinite, as in trec_eval."""
    with np.errstate(over="ignore"):
        return np.asarray(scores, dtype=np.float64).astype(np.float32).astype(np.float64)


def doc_key(doc_id: str) -> bytes:
    """A doc id as trec_eval compares it (``strcmp`` on its UTF-8 bytes); ties rank the larger key first."""
    return doc_id.encode("utf-8", "surrogatepass")


def check_duplicates_policy(duplicates: str | None, where: str = "duplicates") -> str | None:
    """``duplicates`` if it is None or one of ``DUPLICATE_POLICIES``, else a one-line ``ConfigError``."""
    if duplicates is not None and duplicates not in DUPLICATE_POLICIES:
        raise ConfigError(
            f"{where}: duplicates must be one of {', '.join(map(repr, DUPLICATE_POLICIES))}, got {duplicates!r}"
        )
    return duplicates


def tie_break(
    results: Sequence[tuple[str, float]], duplicates: str | None = None, where: str = ""
) -> list[tuple[str, float]]:
    """Results in ``TIE_BREAK`` order (score desc, doc id desc by bytes), each doc once.

    NaN or infinite scores are a system bug that would make any order arbitrary, and a doc listed twice
    is refused unless ``duplicates`` (``DUPLICATE_POLICIES``) says which copy counts: ``RunError``
    naming ``where`` (e.g. the run and query).
    """
    doc_ids, scores = ranked_arrays(results, duplicates, where)
    return list(zip(doc_ids, scores.tolist(), strict=True))


def order_run(run: Mapping[str, Sequence[tuple[str, float]]], duplicates: str | None = None, where: str = "run") -> Run:
    """Every ranking of ``run`` through ``tie_break``; an error names ``where`` and the query."""
    check_duplicates_policy(duplicates, where)
    return {qid: tie_break(ranking, duplicates, f"{where}, query {qid!r}") for qid, ranking in run.items()}


def ranked_arrays(
    results: Sequence[tuple[str, float]], duplicates: str | None = None, where: str = ""
) -> tuple[list[str], np.ndarray]:
    """``tie_break`` as doc ids and float64 scores, with no per-document Python work where it can be avoided.

    A ranking already strictly decreasing (``trec_scores``; as the runner hands it over) is kept as it is;
    otherwise one numeric sort, and doc ids are compared only where scores tie.
    """
    if not results:
        return [], np.array([], dtype=np.float64)
    location = f"{where}: " if where else ""
    ranked = list(map(itemgetter(0), results))
    scores = np.fromiter(map(itemgetter(1), results), dtype=np.float64, count=len(ranked))
    finite = np.isfinite(scores)
    if not finite.all():
        bad = int(np.flatnonzero(~finite)[0])
        score, doc_id = float(scores[bad]), ranked[bad]
        raise RunError(f"{location}non-finite score {score!r} for document {doc_id!r}; fix the system or embedder")
    if len(set(ranked)) < len(ranked):
        keep = _kept_copies(ranked, scores, duplicates, location)
        ranked, scores = [ranked[i] for i in keep], scores[keep]
    keys = trec_scores(scores)
    if not (np.diff(keys) < 0).all():
        order = np.argsort(-keys, kind="stable")
        ranked, scores, keys = [ranked[i] for i in order.tolist()], scores[order], keys[order]
        tied = np.flatnonzero(np.diff(keys) == 0)  # ranked[i] and ranked[i + 1] tie
        if tied.size:  # each maximal run of equal scores: doc id descending (bytes) decides
            breaks = np.diff(tied) > 1
            starts, stops = tied[np.r_[True, breaks]], tied[np.r_[breaks, True]] + 2
            for start, stop in zip(starts.tolist(), stops.tolist(), strict=True):
                by_id = sorted(range(start, stop), key=lambda i: doc_key(ranked[i]), reverse=True)
                ranked[start:stop], scores[start:stop] = [ranked[i] for i in by_id], scores[by_id]
    return ranked, scores


def _kept_copies(ranked: list[str], scores: np.ndarray, duplicates: str | None, location: str) -> list[int]:
    """Positions of the copy of each doc that counts under ``duplicates`` (``RunError`` when None)."""
    if duplicates is None:
        seen: set[str] = set()
        twice = next(doc_id for doc_id in ranked if doc_id in seen or seen.add(doc_id))
        raise RunError(
            f"{location}document {twice!r} is listed {ranked.count(twice)} times; give each document once, "
            "or set duplicates = 'max' (its best score counts) or 'first' (its first copy counts)"
        )
    best: dict[str, int] = {}
    for i, doc_id in enumerate(ranked):
        if doc_id not in best or (duplicates == "max" and scores[i] > scores[best[doc_id]]):
            best[doc_id] = i
    return sorted(best.values())


def top_doc_ids(rankings: Sequence[Sequence[tuple[str, float]]], depth: int) -> list[list[str]]:
    """Each ranking's first ``depth`` doc ids in ``TIE_BREAK`` order: ``ranked_arrays(r)[0][:depth]`` for all at once.

    Rankings the runner hands over are in that order already; that is checked on one flat array of
    every score rather than per ranking (finite scores, each above the next, or equal to it with a
    greater doc id). Only a ranking that fails the check, or repeats a doc id, goes through
    ``ranked_arrays`` (which sorts it, or raises ``RunError``).
    """
    if not rankings:
        return []
    lengths = np.fromiter(map(len, rankings), dtype=np.int64, count=len(rankings))
    ends = np.cumsum(lengths)
    scores = np.fromiter(chain.from_iterable(map(itemgetter(1), r) for r in rankings), np.float64, int(ends[-1]))
    starts = ends - lengths
    keys = trec_scores(scores)
    ordered = np.ones(scores.size, dtype=bool)  # per position: finite, and before the next doc in TIE_BREAK order
    ordered[:-1] = keys[:-1] > keys[1:]
    tied = np.flatnonzero(keys[:-1] == keys[1:])
    doc_ids = list(chain.from_iterable(map(itemgetter(0), r) for r in rankings))
    if tied.size:  # equal scores: the greater doc id (bytes) must come first
        ordered[tied] = [doc_key(doc_ids[i]) > doc_key(doc_ids[i + 1]) for i in tied.tolist()]
    filled = lengths > 0
    ordered[ends[filled] - 1] = True
    ordered &= np.isfinite(scores)
    clean = np.ones(len(rankings), dtype=bool)
    if filled.any():
        clean[filled] = np.logical_and.reduceat(ordered, starts[filled])
    top = []
    for ranking, start, fast in zip(rankings, starts.tolist(), clean.tolist(), strict=True):
        fast = fast and len(set(doc_ids[start : start + len(ranking)])) == len(ranking)
        top.append(doc_ids[start : start + min(depth, len(ranking))] if fast else ranked_arrays(ranking)[0][:depth])
    return top


def sort_ranking(
    scored: Iterable[tuple[str, float]], top_k: int | None = None, duplicates: str | None = None, where: str = ""
) -> Ranking:
    """``(doc_id, score)`` pairs in ``TIE_BREAK`` order, at most ``top_k`` (``tie_break``'s rules on duplicates)."""
    ranking = tie_break([(str(d), float(s)) for d, s in scored], duplicates, where)
    return ranking if top_k is None else ranking[:top_k]
