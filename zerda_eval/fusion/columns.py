"""``fuse_runs`` on columnar runs (``zerda_eval.columnar``): every query fused by one compiled call.

Same methods, parameters, checks and numbers as ``fusion.methods.fuse_runs`` (equal to the bit, same
order; ``tests/zerda_eval/test_fusion_columns.py``), for runs of 1,000-deep rankings where the dict path
spends milliseconds a query in Python. The inputs' doc-id tables are merged into one sorted table, each
input's scores normalised per query by ``methods.normalised``, and ``fusion.kernel`` fuses and orders
every query. ``pipeline_rrf`` is seed 004's own ``rrf_fuse`` by design, so it runs on the dict path.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

import numpy as np

from retrieval.zerda.config import FIXED, RetrieverConfig
from retrieval.zerda.retriever import HybridRetriever
from zerda_eval.columnar import ColumnarRun, from_run, on_one_table
from zerda_eval.fusion.methods import COMBINATIONS, check_shared_queries, fuse_runs, fusion_params, normalised


def fuse_columns(method: str, runs: Sequence[ColumnarRun], **params: Any) -> ColumnarRun:
    """``fuse_runs(method, runs, **params)`` computed on arrays; the result indexes the inputs' merged doc table."""
    resolved = fusion_params(method, len(runs), params)
    check_shared_queries(runs)
    if method == "pipeline_rrf":
        return from_run(fuse_runs(method, [run.to_dict() for run in runs], **params))
    from zerda_eval.fusion import kernel  # a module import: numba loads only when a fusion runs

    runs = on_one_table(runs)
    table = runs[0].doc_ids
    query_ids = list(dict.fromkeys(qid for run in runs for qid in run.query_ids))
    starts = np.zeros((len(runs), len(query_ids)), dtype=np.int64)
    stops = np.zeros_like(starts)
    base = 0
    for i, run in enumerate(runs):
        rows = np.array([run.row(qid) for qid in query_ids], dtype=np.int64)
        found = rows >= 0
        starts[i, found] = run.offsets[rows[found]] + base
        stops[i, found] = run.offsets[rows[found] + 1] + base
        base += run.docs.size
    docs = np.concatenate([run.docs for run in runs])
    score_norm = resolved.get("score_norm", "none")
    values = np.concatenate([_normalised_run(run, score_norm) for run in runs]) if method != "rrf" else docs * 0.0
    code, weights, bonus = _kernel_method(method, resolved, len(runs), kernel)
    offsets, fused_docs, scores = kernel.fusion_kernel(
        code, table.size, starts, stops, docs, values, weights, resolved.get("k", 0), bonus, resolved["top_k"] or 0
    )
    if not np.isfinite(scores).all():  # the dict path's RunError, word for word
        fuse_runs(method, [run.to_dict() for run in runs], **params)
    return ColumnarRun(query_ids, offsets, fused_docs, scores, table)


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


def _normalised_run(run: ColumnarRun, score_norm: str) -> np.ndarray:
    """``run.scores`` with each query's scores normalised by ``methods.normalised`` (in rank order, as there)."""
    if score_norm == "none":
        return run.scores
    out = np.empty_like(run.scores)
    bounds = run.offsets.tolist()
    for start, stop in itertools.pairwise(bounds):
        out[start:stop] = normalised(run.scores[start:stop], score_norm)
    return out
