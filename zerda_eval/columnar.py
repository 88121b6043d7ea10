"""The run as arrays: ``ColumnarRun``, the harness's ``Run`` without a Python tuple per (doc, score).

A 5,000-query x 1,000-deep run held as ``{qid: [(doc_id, score), ...]}`` takes about 1.6 GB; as arrays it
takes 12 bytes a row plus one table of distinct doc ids. Query ``q`` (``query_ids[q]``) owns the rows
``offsets[q]:offsets[q + 1]`` of ``docs`` (int32 indices into ``doc_ids``) and ``scores`` (float64), in
``ranking.TIE_BREAK`` order. ``doc_ids`` is sorted by UTF-8 bytes (numpy's ``StringDType`` compares code
points, which is the same order), so "doc id descending by bytes" is "doc index descending" and the
tie-break is a numeric sort on (score, index).

Built from flat columns (``from_columns``: a TREC file's, a DataFrame's) or a dict run (``from_run``),
with ``ranking``'s rules and messages: a non-finite score or a doc listed twice in a query is a
``RunError`` unless a ``duplicates`` policy says which copy counts; a query is checked by
``ranking.ranked_arrays`` itself whenever it has a problem, so the message is the one the dict path gives.
It is a read-only ``Mapping`` from query id to a ``Ranking`` list, so code written for the dict ``Run``
reads it unchanged (each access builds that query's list).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from itertools import chain
from typing import Any

import numpy as np

from zerda_eval.errors import DataFormatError
from zerda_eval.ranking import Ranking, Run, check_duplicates_policy, ranked_arrays, trec_scores

DOC_TABLE = np.dtypes.StringDType()  # doc ids: variable-width UTF-8, sorted by code point (= UTF-8 bytes)
KEY_BYTES = 16  # doc ids up to this long are sorted as integer keys (``sorted_distinct``)


class ColumnarRun(Mapping[str, Ranking]):
    """A run as ``query_ids``, ``offsets`` (int64), ``docs`` (int32 into ``doc_ids``) and ``scores`` (float64).

    Rows of a query are in ``TIE_BREAK`` order; ``doc_ids`` is sorted and holds each id once. Build it with
    ``from_columns`` / ``from_run`` (which check and order), not by hand.
    """

    __slots__ = ("_rows", "doc_ids", "docs", "offsets", "query_ids", "scores")

    def __init__(
        self, query_ids: Sequence[str], offsets: np.ndarray, docs: np.ndarray, scores: np.ndarray, doc_ids: np.ndarray
    ) -> None:
        self.query_ids = list(query_ids)
        self.offsets, self.docs, self.scores, self.doc_ids = offsets, docs, scores, doc_ids
        self._rows: dict[str, int] | None = None

    def row(self, qid: str) -> int:
        """The position of ``qid`` in ``query_ids``, or -1."""
        if self._rows is None:
            self._rows = {q: i for i, q in enumerate(self.query_ids)}
        return self._rows.get(qid, -1)

    def lengths(self) -> np.ndarray:
        """Rows per query (int64)."""
        return np.diff(self.offsets)

    def __getitem__(self, qid: str) -> Ranking:
        row = self.row(qid)
        if row < 0:
            raise KeyError(qid)
        start, stop = int(self.offsets[row]), int(self.offsets[row + 1])
        doc_ids = self.doc_ids[self.docs[start:stop]].tolist()
        return list(zip(doc_ids, self.scores[start:stop].tolist(), strict=True))

    def __contains__(self, qid: object) -> bool:
        return isinstance(qid, str) and self.row(qid) >= 0

    def __iter__(self) -> Iterator[str]:
        return iter(self.query_ids)

    def __len__(self) -> int:
        return len(self.query_ids)

    def __repr__(self) -> str:
        return f"ColumnarRun({len(self.query_ids)} queries, {self.docs.size} rows, {self.doc_ids.size} doc ids)"

    def keep(self, rows: np.ndarray) -> ColumnarRun:
        """The run of the rows where ``rows`` (bool, one a row) is True, each query's kept rows in their order."""
        if rows.all():
            return self
        query = np.repeat(np.arange(len(self.query_ids)), self.lengths())
        offsets = np.zeros_like(self.offsets)
        np.cumsum(np.bincount(query[rows], minlength=len(self.query_ids)), out=offsets[1:])
        return ColumnarRun(self.query_ids, offsets, self.docs[rows], self.scores[rows], self.doc_ids)

    def top(self, k: int) -> ColumnarRun:
        """Each query's first ``k`` rows."""
        lengths = self.lengths()
        if lengths.size == 0 or lengths.max() <= k:
            return self
        rank = np.arange(self.docs.size) - np.repeat(self.offsets[:-1], lengths)
        return self.keep(rank < k)

    def to_dict(self) -> Run:
        """The dict ``Run`` ``{qid: [(doc_id, score), ...]}`` (same order), for code that needs one."""
        doc_ids, scores = self.doc_ids[self.docs].tolist(), self.scores.tolist()
        bounds = self.offsets.tolist()
        return {
            qid: list(zip(doc_ids[start:stop], scores[start:stop], strict=True))
            for qid, start, stop in zip(self.query_ids, bounds[:-1], bounds[1:], strict=True)
        }


def doc_table(doc_ids: Sequence[str] | np.ndarray, where: str = "run") -> np.ndarray:
    """``doc_ids`` as a ``DOC_TABLE`` array (``DataFormatError`` for an id that is not valid Unicode)."""
    try:
        return np.asarray(doc_ids, dtype=DOC_TABLE)
    except UnicodeEncodeError as exc:
        bad = exc.object if isinstance(exc.object, str) else "?"
        raise DataFormatError(f"{where}: doc id {bad!r} is not valid Unicode (a lone surrogate); fix the id") from None


def on_one_table(runs: Sequence[ColumnarRun]) -> list[ColumnarRun]:
    """The runs re-indexed on one sorted doc-id table holding every run's ids (the runs themselves when they
    share one already). The tables go to pyarrow (a copy of the bytes, no Python string) and are ordered by
    ``sorted_distinct``: a sort or a binary search of ``StringDType`` arrays compares slowly (about 3 us a
    lookup here), and a gather of one copies every string."""
    import pyarrow as pa

    tables = [run.doc_ids for run in runs]
    if all(table is tables[0] for table in tables):
        return list(runs)
    joined = pa.chunked_array([pa.array(table, type=pa.large_string()) for table in tables]).combine_chunks()
    where, union = sorted_distinct(joined)
    bounds = np.cumsum([0] + [table.size for table in tables]).tolist()
    return [
        ColumnarRun(run.query_ids, run.offsets, where[start:stop][run.docs], run.scores, union)
        for run, start, stop in zip(runs, bounds[:-1], bounds[1:], strict=True)
    ]


def sorted_distinct(ids: Any, where: str = "run") -> tuple[np.ndarray, np.ndarray]:
    """For a pyarrow ``large_string`` array: its distinct ids sorted by UTF-8 bytes (a ``DOC_TABLE``) and each
    row's index (int32) in that table. Ids of up to ``KEY_BYTES``
    bytes, none holding NUL, become big-endian integer keys, zero-padded (below every byte, as a shorter
    prefix is), sorted by numpy, the table cast from their bytes; any other array is sorted by pyarrow's
    ``sort_indices``, which compares bytes too."""
    import pyarrow as pa
    import pyarrow.compute as pc

    n = len(ids)
    offsets = np.frombuffer(ids.buffers()[1], dtype=np.int64)[ids.offset : ids.offset + n + 1]
    data = np.frombuffer(ids.buffers()[2] or b"", dtype=np.uint8)
    starts, lengths = offsets[:-1], np.diff(offsets)
    width = int(lengths.max()) if n else 0
    first = np.ones(n, dtype=bool)
    if width > KEY_BYTES or not data[offsets[0] : offsets[-1]].all():  # long ids, or a NUL byte
        order = pc.sort_indices(ids).to_numpy()
        ranked = ids.take(pa.array(order))
        first[1:] = pc.not_equal(ranked.slice(1), ranked.slice(0, n - 1)).to_numpy(zero_copy_only=False)
        return _codes(order, first), doc_table(ranked.filter(pa.array(first)).to_numpy(zero_copy_only=False), where)
    padded = np.concatenate([data, np.zeros(KEY_BYTES, dtype=np.uint8)])
    windows = np.lib.stride_tricks.sliding_window_view(padded, 8)  # the 8 bytes from each position, no copy
    masks = np.array([~np.uint64(0) << np.uint64(64 - 8 * used) if used else 0 for used in range(9)], dtype=np.uint64)
    keys = []  # the first 8 bytes of each id, then (if any is longer) the next 8, past its end zeroed
    for word in range(0, max(width, 1), 8):
        key = windows[starts + word].view(">u8").ravel().astype(np.uint64)
        keys.append(key & masks[np.clip(lengths - word, 0, 8)])
    order = np.argsort(keys[0]) if len(keys) == 1 else np.lexsort(keys[::-1])  # lexsort: the last key leads
    for key in keys:  # equal keys: the same id
        ranked = key[order]
        first[1:] &= ranked[1:] == ranked[:-1]
    first[1:] = ~first[1:]
    distinct = np.stack([key[order[first]] for key in keys], axis=1).astype(">u8")  # each id's bytes, NUL-padded
    return _codes(order, first), distinct.view(f"S{8 * len(keys)}").ravel().astype(DOC_TABLE)  # decoded as UTF-8


def _codes(order: np.ndarray, first: np.ndarray) -> np.ndarray:
    """Each row's index in the distinct table, from the sorting permutation ``order`` and which sorted rows
    start a new id (``first``)."""
    codes = np.empty(order.size, dtype=np.int32)
    codes[order] = np.cumsum(first, dtype=np.int64) - 1
    return codes


def from_columns(
    query_ids: Sequence[str],
    query_codes: np.ndarray,
    doc_ids: np.ndarray,
    doc_codes: np.ndarray,
    scores: np.ndarray,
    duplicates: str | None = None,
    where: str = "run",
) -> ColumnarRun:
    """The run of rows ``(query_ids[query_codes[i]], doc_ids[doc_codes[i]], scores[i])`` given in input order.

    ``query_ids`` in the order the run lists them (first seen), each once; ``doc_ids`` each id once, any
    order (already sorted by bytes, as ``store.run_dir.trec_columns`` gives them, it is the table as it is).
    Each query's rows are put in ``TIE_BREAK`` order; a problem (non-finite score, a doc listed twice with
    ``duplicates`` None) is the ``RunError`` ``ranking.order_run`` raises for the same input.
    """
    check_duplicates_policy(duplicates, where)
    table = doc_table(doc_ids, where)
    docs = np.asarray(doc_codes, dtype=np.int32)
    if table.size > 1 and not (table[1:] > table[:-1]).all():  # a sorted table (a reader's) is kept as it is
        by_bytes = np.argsort(table, kind="stable")
        index_of = np.empty(by_bytes.size, dtype=np.int32)
        index_of[by_bytes] = np.arange(by_bytes.size, dtype=np.int32)
        docs = index_of[docs]
        table = table[by_bytes]  # once: a gather of a StringDType array copies every string
    queries = np.asarray(query_codes, dtype=np.int64)
    scores = np.asarray(scores, dtype=np.float64)
    keep = _checked_rows(query_ids, queries, table, docs, scores, duplicates, where)
    if keep is not None:
        queries, docs, scores = queries[keep], docs[keep], scores[keep]
    order = _tie_break_order(queries, docs, scores)
    if order is not None:
        queries, docs, scores = queries[order], docs[order], scores[order]
    offsets = np.zeros(len(query_ids) + 1, dtype=np.int64)
    np.cumsum(np.bincount(queries, minlength=len(query_ids)), out=offsets[1:])
    return ColumnarRun(query_ids, offsets, docs, scores, table)


def _tie_break_order(queries: np.ndarray, docs: np.ndarray, scores: np.ndarray) -> np.ndarray | None:
    """The permutation that groups rows by query in order, each query's in ``TIE_BREAK`` order (scores as
    ``ranking.trec_scores``); None when they are already. Rows grouped and by score already (as most run files
    are) only have their runs of tied rows sorted, by doc index descending; anything else is one ``lexsort``."""
    if queries.size < 2:
        return None
    keys = trec_scores(scores)
    same = queries[1:] == queries[:-1]
    if not (same | (queries[1:] > queries[:-1])).all() or not ((keys[:-1] >= keys[1:]) | ~same).all():
        return np.lexsort((-docs.astype(np.int64), -keys, queries))
    tied = same & (keys[:-1] == keys[1:])
    if not (tied & (docs[:-1] < docs[1:])).any():
        return None
    member = np.zeros(queries.size, dtype=bool)  # rows in a run of equal scores
    member[:-1] |= tied
    member[1:] |= tied
    rows = np.flatnonzero(member)
    group = np.cumsum(~np.r_[False, tied][rows])  # a new run starts where a row does not tie the one before
    order = np.arange(queries.size)
    order[rows] = rows[np.lexsort((-docs[rows].astype(np.int64), group))]
    return order


def _checked_rows(
    query_ids: Sequence[str],
    queries: np.ndarray,
    table: np.ndarray,
    docs: np.ndarray,
    scores: np.ndarray,
    duplicates: str | None,
    where: str,
) -> np.ndarray | None:
    """The rows to keep (None: all), or the ``RunError`` of the first query (in query order) with a problem.

    A problem query goes through ``ranking.ranked_arrays`` on its own rows, so it raises exactly as the dict
    path would; only doc copies that a ``duplicates`` policy resolves are dropped here, vectorised.
    """
    bad = ~np.isfinite(scores)
    width = max(table.size, 1)
    key = queries * width + docs
    sorted_key = np.sort(key)
    repeated = sorted_key[1:][sorted_key[1:] == sorted_key[:-1]]
    if not bad.any() and not repeated.size:
        return None
    for q in np.union1d(queries[bad], repeated // width).tolist():
        rows = np.flatnonzero(queries == q)
        pairs = list(zip(table[docs[rows]].tolist(), scores[rows].tolist(), strict=True))
        ranked_arrays(pairs, duplicates, f"{where}, query {query_ids[q]!r}")  # raises, or resolves the copies
    position = np.arange(key.size)
    ranks = (position,) if duplicates == "first" else (position, -scores)  # "max": best score, first of equals
    order = np.lexsort((*ranks, key))
    first = np.ones(order.size, dtype=bool)
    first[1:] = key[order][1:] != key[order][:-1]
    return np.sort(order[first])


def from_run(run: Mapping[str, Any], duplicates: str | None = None, where: str = "run") -> ColumnarRun:
    """A ``ColumnarRun`` of ``{qid: [(doc_id, score), ...]}`` or ``{qid: {doc_id: score}}`` (its own rows when
    it is one already). Ids become ``str`` and scores ``float``; ``DataFormatError`` names a query whose
    ranking is not (doc, number) pairs."""
    if isinstance(run, ColumnarRun):
        return run
    rankings = {str(qid): ranking for qid, ranking in run.items()}  # 1 and "1" are one query: the last counts
    builder = RunBuilder(where)
    for qid, ranking in rankings.items():
        builder.add(qid, ranking)
    return builder.build(duplicates)


class RunBuilder:
    """A run gathered one query at a time (a grid cell's timed search loop), kept as each query's doc ids and
    a float64 score array, so no (doc, score) tuple outlives its query; ``build`` checks and orders it as
    ``from_columns`` does. Each query id is added once."""

    def __init__(self, where: str = "run") -> None:
        self.where = where
        self._qids: list[str] = []
        self._docs: list[Sequence[Any]] = []
        self._scores: list[np.ndarray] = []

    def add(self, qid: str, ranking: Any) -> None:
        """Query ``qid``'s ranking, ``[(doc_id, score), ...]`` or ``{doc_id: score}``, in any order."""
        try:
            pairs = ranking.items() if isinstance(ranking, Mapping) else ranking
            docs, scores = zip(*pairs, strict=True) if len(pairs) else ((), ())
            values = np.fromiter(scores, dtype=np.float64, count=len(scores))
            if np.isnan(values).any() and any(score is None for score in scores):  # numpy reads None as NaN
                raise TypeError
        except (TypeError, ValueError):
            raise DataFormatError(bad_ranking_message(self.where, qid)) from None
        self._qids.append(qid)
        self._docs.append(docs)
        self._scores.append(values)

    def build(self, duplicates: str | None = None) -> ColumnarRun:
        """The ``ColumnarRun`` of every query added (in the order added), each in ``TIE_BREAK`` order; a
        non-finite score or a doc listed twice is ``from_columns``' ``RunError``."""
        lengths = np.fromiter(map(len, self._docs), dtype=np.int64, count=len(self._docs))
        scores = np.concatenate(self._scores) if self._scores else np.zeros(0)
        doc_codes, doc_ids = _factorize([str(doc_id) for doc_id in chain.from_iterable(self._docs)])
        queries = np.repeat(np.arange(len(self._qids), dtype=np.int64), lengths)
        return from_columns(self._qids, queries, doc_ids, doc_codes, scores, duplicates, self.where)


def bad_ranking_message(where: str, qid: Any) -> str:
    """The one-line message for a query whose ranking is not (doc_id, number) pairs."""
    return f"{where}: query {qid!r}: expected {{doc_id: score}} or [(doc_id, score), ...] with numeric scores"


def _factorize(values: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """Codes (int64) and the distinct values (first-seen order) of a list of strings."""
    import pandas as pd

    codes, uniques = pd.factorize(np.asarray(values, dtype=object), use_na_sentinel=False)
    return codes, np.asarray(uniques, dtype=object)


def gather(parts: Sequence[tuple[ColumnarRun, str]], doc_ids: np.ndarray) -> ColumnarRun:
    """One run of the query ``qid`` of each ``(run, qid)`` in order (runs indexing ``doc_ids``); a query the
    run lacks is an empty ranking."""
    starts, stops = [], []
    for run, qid in parts:
        row = run.row(qid)
        starts.append(run.offsets[row] if row >= 0 else 0)
        stops.append(run.offsets[row + 1] if row >= 0 else 0)
    lengths = np.array(stops, dtype=np.int64) - np.array(starts, dtype=np.int64)
    offsets = np.zeros(len(parts) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    docs = np.empty(int(offsets[-1]), dtype=np.int32)
    scores = np.empty(int(offsets[-1]), dtype=np.float64)
    for (run, _), start, first, last in zip(parts, offsets[:-1].tolist(), starts, stops, strict=True):
        docs[start : start + last - first] = run.docs[first:last]
        scores[start : start + last - first] = run.scores[first:last]
    return ColumnarRun([qid for _, qid in parts], offsets, docs, scores, doc_ids)


def assemble(parts: Sequence[tuple[ColumnarRun, str]]) -> ColumnarRun:
    """``gather`` of runs that may index different doc tables: the distinct runs are put on one table first."""
    distinct = list({id(run): run for run, _ in parts}.values())
    tabled = dict(zip(map(id, distinct), on_one_table(distinct), strict=True))
    table = tabled[id(distinct[0])].doc_ids if distinct else doc_table([])
    return gather([(tabled[id(run)], qid) for run, qid in parts], table)
