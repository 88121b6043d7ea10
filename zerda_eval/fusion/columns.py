"""``fuse_runs`` on columnar runs (``zerda_eval.columnar``): every query fused by one compiled call, or one
query a call for a caller that times each (the grid's fusion cell).

Same methods, parameters, checks and numbers as ``fusion.methods.fuse_runs`` (equal to the bit, same
order; ``tests/zerda_eval/test_fusion_columns.py``), for runs of 1,000-deep rankings where the dict path
spends milliseconds a query in Python. ``QueryFusion`` puts the inputs on one sorted doc-id table once;
each input's scores are normalised per query by ``methods.normalised`` and ``fusion.kernel`` fuses and
orders. ``pipeline_rrf`` is seed 004's own ``rrf_fuse`` by design, so it runs on the dict path.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from retrieval.zerda.config import FIXED, RetrieverConfig
from retrieval.zerda.retriever import HybridRetriever
from zerda_eval.columnar import ColumnarRun, from_run, on_one_table
from zerda_eval.errors import ConfigError
from zerda_eval.fusion.methods import COMBINATIONS, check_shared_queries, fuse_runs, fusion_params, normalised

KERNEL_METHODS = ("rrf", *COMBINATIONS, "zerda")  # fused by ``fusion.kernel``; any other by ``fuse_runs``


def fuse_columns(method: str, runs: Sequence[ColumnarRun], **params: Any) -> ColumnarRun:
    """``fuse_runs(method, runs, **params)`` computed on arrays; the result indexes the inputs' merged doc table."""
    fusion_params(method, len(runs), params)
    check_shared_queries(runs)
    if method not in KERNEL_METHODS:
        return from_run(fuse_runs(method, [run.to_dict() for run in runs], **params))
    return QueryFusion(method, runs, **params).fuse_all()


class QueryFusion:
    """The inputs of a fusion by a ``KERNEL_METHODS`` method, on one doc-id table: ``fuse(qid)`` fuses one
    query (its scratch kept from call to call, so a call costs the query's rows only), ``fuse_all()`` every
    query in one compiled call; both equal ``fuse_runs`` on the same rankings to the bit."""

    def __init__(self, method: str, runs: Sequence[ColumnarRun], **params: Any) -> None:
        from zerda_eval.fusion import kernel  # a module import: numba loads only when a fusion runs

        resolved = fusion_params(method, len(runs), params)
        if method not in KERNEL_METHODS:
            raise ConfigError(
                f"fusion {method!r} is not fused by the kernel ({', '.join(KERNEL_METHODS)}); use fuse_runs"
            )
        self.method, self.params, self._kernel = method, params, kernel
        self.runs = on_one_table(runs)
        self.doc_ids = self.runs[0].doc_ids
        self._docs = np.concatenate([run.docs for run in self.runs])
        self._scores = np.concatenate([run.scores for run in self.runs])
        self._bases = np.cumsum([0] + [run.docs.size for run in self.runs])[:-1].tolist()
        self._bounds = [run.offsets.tolist() for run in self.runs]
        self._norm = resolved.get("score_norm", "none") if method != "rrf" else "none"  # RRF reads ranks only
        self._values = self._scores.copy() if self._norm != "none" else self._scores
        self._code, self._weights, self._bonus = _kernel_method(method, resolved, len(runs), kernel)
        self._k, self._top_k = resolved.get("k", 0), resolved["top_k"] or 0
        self._slot = np.full(self.doc_ids.size, -1, dtype=np.int32)

    def fuse(self, qid: str) -> tuple[np.ndarray, np.ndarray]:
        """The fused ranking of ``qid`` as doc indices (into ``doc_ids``) and scores, in ``TIE_BREAK`` order."""
        n = len(self.runs)
        starts, stops = np.zeros(n, dtype=np.int64), np.zeros(n, dtype=np.int64)
        for i, run in enumerate(self.runs):
            row = run.row(qid)
            if row >= 0:
                starts[i] = self._bases[i] + self._bounds[i][row]
                stops[i] = self._bases[i] + self._bounds[i][row + 1]
                self._normalise(starts[i], stops[i])
        docs, scores = self._kernel.fuse_query(
            self._code, self._slot, starts, stops, self._docs, self._values, self._weights, self._k, self._bonus,
            self._top_k,
        )  # fmt: skip
        if not np.isfinite(scores).all():  # the dict path's RunError, word for word
            fuse_runs(self.method, [{qid: run.get(qid, [])} for run in self.runs], **self.params)
        return docs, scores

    def fuse_all(self) -> ColumnarRun:
        """Every query of the inputs (first-seen order), fused in one compiled call."""
        query_ids = list(dict.fromkeys(qid for run in self.runs for qid in run.query_ids))
        starts = np.zeros((len(self.runs), len(query_ids)), dtype=np.int64)
        stops = np.zeros_like(starts)
        for i, run in enumerate(self.runs):
            rows = np.array([run.row(qid) for qid in query_ids], dtype=np.int64)
            found = rows >= 0
            starts[i, found] = run.offsets[rows[found]] + self._bases[i]
            stops[i, found] = run.offsets[rows[found] + 1] + self._bases[i]
        for base, bounds in zip(self._bases, self._bounds, strict=True):
            for start, stop in itertools.pairwise(bounds):
                self._normalise(base + start, base + stop)
        offsets, docs, scores = self._kernel.fusion_kernel(
            self._code, self.doc_ids.size, starts, stops, self._docs, self._values, self._weights, self._k,
            self._bonus, self._top_k,
        )  # fmt: skip
        if not np.isfinite(scores).all():  # the dict path's RunError, word for word
            fuse_runs(self.method, [run.to_dict() for run in self.runs], **self.params)
        return ColumnarRun(query_ids, offsets, docs, scores, self.doc_ids)

    def _normalise(self, start: int, stop: int) -> None:
        """``values[start:stop]``, one input's ranking of one query, normalised by ``methods.normalised``."""
        if self._norm != "none":
            self._values[start:stop] = normalised(self._scores[start:stop], self._norm)

    def run(self, fused: Mapping[str, tuple[np.ndarray, np.ndarray]]) -> ColumnarRun:
        """The run of ``{qid: fuse(qid)}`` (queries in the order given)."""
        lengths = [docs.size for docs, _ in fused.values()]
        offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        docs = np.concatenate([docs for docs, _ in fused.values()]) if fused else np.zeros(0, dtype=np.int32)
        scores = np.concatenate([scores for _, scores in fused.values()]) if fused else np.zeros(0)
        return ColumnarRun(list(fused), offsets, docs, scores, self.doc_ids)


def _kernel_method(method: str, resolved: dict[str, Any], n_runs: int, kernel: Any) -> tuple[int, np.ndarray, float]:
    """The kernel's method code, weights and bonus weight for ``method``, with ``fuse_runs``' defaults."""
    weights = resolved.get("weights")
    bonus = 0.0
    if method in COMBINATIONS:
        code = {"combsum": kernel.COMBSUM, "combmnz": kernel.COMBMNZ, "wsum": kernel.WSUM}[method]
        weights = weights if method == "wsum" and weights else None
    elif method == "rrf":
        code = kernel.RRF
    else:
        code = kernel.ZERDA
        seed_weights = [RetrieverConfig.vector_weight, RetrieverConfig.keyword_weight]
        weights = weights or (seed_weights if n_runs == 2 else None)
        bonus = HybridRetriever.RRF_BONUS_WEIGHT if resolved["rrf_order"] == FIXED else 0.0
    return code, np.array(weights or [1.0] * n_runs, dtype=np.float64), bonus
