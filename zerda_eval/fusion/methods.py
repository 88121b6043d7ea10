"""Fusion of runs: ranx's methods (RRF, CombSUM, CombMNZ, weighted sum) and the two seed APIs' own fusion.

A run here is ``{query_id: [(doc_id, score), ...]}``. ``fuse_runs`` first puts every input ranking in
the one order (``zerda_eval.ranking.TIE_BREAK``: score descending, then doc id descending, trec_eval's),
so a rank (RRF, the seeds' RRF bonus) comes from the scores, never from a list's or dict's order; a doc
listed twice or a non-finite score is a ``RunError``. It aligns the inputs by query id (a query missing
from one input fuses as an empty list there; inputs that share no query at all are refused), fuses,
and returns a run in the same order.

Methods and where they come from:

- ``combsum``, ``combmnz``, ``wsum`` (Fox & Shaw 1994): ranx's ``fuse`` methods ``sum``, ``mnz``, ``wsum``,
  computed here on a (inputs x docs) numpy matrix per query: ranx's ``fuse`` builds ``Run`` objects from
  dicts, and called per query (as a cell times each query) it was 7-8x slower (``benchmarks/
  test_bench_fusion.py``). Equal to ranx's numbers (tested on real runs). ``score_norm`` is ``"min-max"``,
  ``"z-score"`` (ranx's ``zmuv``) or ``"none"``, with ranx's guards: a list of equal scores maps to 0.
- ``rrf`` (Cormack et al. 2009): the project's one RRF, ``retrieval.core.rrf_scores``, optionally weighted.
  Its numbers equal ranx's ``rrf`` (tested); ranx's parallel RRF kernel is not served from numba's cache
  and recompiled for about a minute per process here, which a grid cannot afford.
- ``zerda``: seed 000's ``HybridRetriever``: the weighted sum of the inputs' scores, plus an RRF bonus
  ``0.20 * rrf / max(rrf)`` over the inputs' ranked lists. ``rrf_order="fixed"`` adds the bonus after the
  weighted sum; ``"as_documented"`` reproduces the documented ordering bug (the bonus is computed before
  the weighted sum overwrites the score, so it is discarded).
- ``ltr``: a learned combiner (``fusion.ltr``), fitted on judged training queries: not a function of
  the runs alone, so ``fuse_runs`` refuses it; a tuned row fits and applies it (``execution.tuned_fusion``).
- ``pipeline_rrf``: seed 004's ``retrieval.pipeline.fusion.rrf_fuse`` itself, ``top_k`` included: weighted
  RRF, scores min-max normalised over the documents it returns (so they depend on ``top_k``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from retrieval.core import rrf_scores
from retrieval.zerda.config import FIXED, RRF_ORDERS, RetrieverConfig
from retrieval.zerda.retriever import HybridRetriever, rrf_bonuses, weighted_sum
from zerda_eval.checks import check_keys
from zerda_eval.errors import ConfigError, RunError, unknown_value_message
from zerda_eval.ranking import Ranking, Run, order_run, sort_ranking
from zerda_eval.systems.params import ParamSpec

SCORE_NORMS = ("min-max", "z-score", "none")  # ranx's names: min-max, zmuv, (none)
LTR_MODELS = ("logistic", "hgb")  # fusion.ltr: LogisticRegression | HistGradientBoostingClassifier
LEARNED_METHODS = ("ltr",)  # fitted on judged queries: only a tuned row (execution.tuned_fusion) runs them


_K = ParamSpec(60, "int", "RRF constant k: an item at 1-based rank r adds weight / (k + r)", minimum=0)
_WEIGHTS = ParamSpec(None, "floats", "one weight per input run; none = 1.0 each", minimum=0.0, optional=True)
_TOP_K = ParamSpec(None, "int", "keep the best top_k documents per query; none keeps all", positive=True, optional=True)
_SCORE_NORM = "score normalisation of each input run before fusing (per query)"

FUSION_METHODS: dict[str, dict[str, ParamSpec]] = {
    "rrf": {"k": _K, "weights": _WEIGHTS, "top_k": _TOP_K},
    "combsum": {"score_norm": ParamSpec("min-max", "str", _SCORE_NORM, choices=SCORE_NORMS), "top_k": _TOP_K},
    "combmnz": {"score_norm": ParamSpec("min-max", "str", _SCORE_NORM, choices=SCORE_NORMS), "top_k": _TOP_K},
    "wsum": {
        "score_norm": ParamSpec("min-max", "str", _SCORE_NORM, choices=SCORE_NORMS),
        "weights": _WEIGHTS,
        "top_k": _TOP_K,
    },
    "zerda": {
        "rrf_order": ParamSpec(
            RetrieverConfig.rrf_order,
            "str",
            "when the RRF bonus is added (seed 000's bug)",
            choices=RRF_ORDERS,
        ),
        "weights": ParamSpec(
            None,
            "floats",
            "one weight per input; none: seed 000's [0.6, 0.3] (vector, keyword)",
            optional=True,
        ),
        "score_norm": ParamSpec("none", "str", _SCORE_NORM, choices=SCORE_NORMS),
        "k": ParamSpec(HybridRetriever.RRF_K, "int", "RRF constant of the bonus (seed 000: 60)", minimum=0),
        "top_k": _TOP_K,
    },
    "pipeline_rrf": {"k": _K, "weights": _WEIGHTS, "top_k": _TOP_K},
    "ltr": {
        "model": ParamSpec(LTR_MODELS[0], "str", "the learned combiner (fusion.ltr)", choices=LTR_MODELS),
        "top_k": _TOP_K,
    },
}

COMBINATIONS = ("combsum", "combmnz", "wsum")


def resolve_fusion_params(method: str, params: Mapping[str, Any], where: str = "") -> dict[str, Any]:
    """Validate ``params`` for ``method`` and return every parameter resolved, plus ``method``.

    The result is what a fused run records: method, normalisation, k and weights (as applicable).
    Raises ``ConfigError`` naming ``where`` for an unknown method, key or value.
    """
    if method not in FUSION_METHODS:
        raise ConfigError(unknown_value_message("fusion method", method, FUSION_METHODS, where))
    spec = FUSION_METHODS[method]
    check_keys(params, spec, where, f"parameter of fusion {method!r}")
    resolved: dict[str, Any] = {"method": method}
    for key, param in spec.items():
        resolved[key] = param.check(params[key], f"{where}: {method}.{key}") if key in params else param.default
    weights = resolved.get("weights")
    if weights is not None and not any(weights):
        raise ConfigError(
            f"{where}: {method}.weights are all 0 ({weights}), which scores every doc 0 and ranks by doc id alone; "
            "give at least one positive weight"
        )
    return resolved


def fusion_params(method: str, n_runs: int, params: Mapping[str, Any]) -> dict[str, Any]:
    """``resolve_fusion_params`` for fusing ``n_runs`` runs: a learned method, fewer than 2 runs or a weight
    count other than ``n_runs`` is a ``ConfigError`` (``fuse_runs``'s and ``fuse_columns``' one check)."""
    resolved = resolve_fusion_params(method, params, where="fuse_runs")
    if method in LEARNED_METHODS:
        raise ConfigError(
            f"fuse_runs: fusion {method!r} is learned from judged queries; use it in a tuned [[fusions]] entry "
            "(tune = true), which fits it on the training queries of each fold"
        )
    if n_runs < 2:
        raise ConfigError(f"fuse_runs: fusion {method!r} needs at least 2 input runs, got {n_runs}")
    weights = resolved.get("weights")
    if weights is not None and len(weights) != n_runs:
        raise ConfigError(f"fuse_runs: {len(weights)} weights for {n_runs} input runs; give one per run")
    return resolved


def fuse_runs(method: str, runs: Sequence[Mapping[str, Ranking]], **params: Any) -> Run:
    """Fuse ``runs`` with ``method`` (a key of ``FUSION_METHODS``) and the given parameters."""
    resolved = fusion_params(method, len(runs), params)
    weights = resolved.get("weights")
    runs = ordered_inputs(runs)
    query_ids = list(dict.fromkeys(qid for run in runs for qid in run))
    aligned = [{qid: run.get(qid, []) for qid in query_ids} for run in runs]
    if method in COMBINATIONS:
        weights = weights if method == "wsum" and weights else [1.0] * len(runs)
        fused = {qid: _combine(method, [r[qid] for r in aligned], resolved["score_norm"], weights) for qid in query_ids}
    elif method == "rrf":
        fused = {qid: rrf_scores([_ids(r[qid]) for r in aligned], weights, resolved["k"]) for qid in query_ids}
    elif method == "pipeline_rrf":
        fused = {
            qid: _pipeline_rrf([r[qid] for r in aligned], weights, resolved["k"], resolved["top_k"])
            for qid in query_ids
        }
    else:
        fused = _fuse_zerda(aligned, query_ids, resolved)
    return {qid: sort_ranking(scores.items(), resolved["top_k"]) for qid, scores in fused.items()}


def ordered_inputs(runs: Sequence[Mapping[str, Ranking]], where: str = "fuse_runs") -> list[Run]:
    """The input runs in ``TIE_BREAK`` order (``RunError`` on a doc listed twice or a non-finite score);
    runs that share no query id are a ``RunError``: fusing them would only list their union."""
    ordered = [order_run(run, None, f"{where}: input run {i}") for i, run in enumerate(runs, start=1)]
    check_shared_queries(ordered, where)
    return ordered


def check_shared_queries(runs: Sequence[Mapping[str, Any]], where: str = "fuse_runs") -> None:
    """``RunError`` when the runs share no query id: fusing them would only list their union."""
    if runs and any(runs) and not set.intersection(*(set(run) for run in runs)):
        examples = "; ".join(
            f"run {i}: {', '.join(map(repr, list(run)[:3])) or 'none'}" for i, run in enumerate(runs, 1)
        )
        raise RunError(f"{where}: the input runs share no query id ({examples}); fuse runs of the same queries")


def _ids(ranking: Ranking) -> list[str]:
    return [doc_id for doc_id, _ in ranking]


def _pipeline_rrf(
    rankings: list[Ranking], weights: Sequence[float] | None, k: float, top_k: int | None
) -> dict[str, float]:
    """Seed 004's own ``rrf_fuse`` on the doc ids (items built without validation: only ``id`` matters).

    ``top_k`` is rrf_fuse's own: its scores are min-max normalised over the items it returns.
    """
    from retrieval.pipeline.fusion import rrf_fuse
    from retrieval.pipeline.models import ContextItem

    lists = [[ContextItem.model_construct(id=d, content="", score=0.0, metadata={}) for d in _ids(r)] for r in rankings]
    return {item.id: item.score for item in rrf_fuse(lists, list(weights) if weights else None, k, top_k)}


def normalised(scores: np.ndarray, score_norm: str) -> np.ndarray:
    """ranx's per-query normalisations: ``(s - min) / max(max - min, 1e-9)`` and ``(s - mean) / max(std, 1e-9)``."""
    if score_norm == "none" or scores.size == 0:
        return scores
    if score_norm == "min-max":
        low = scores.min()
        return (scores - low) / max(scores.max() - low, 1e-9)
    return (scores - scores.mean()) / max(scores.std(), 1e-9)


def score_matrix(rankings: list[Ranking], score_norm: str) -> tuple[list[str], np.ndarray, np.ndarray]:
    """Docs of all inputs (first-seen order) and, per input row, their normalised scores (0 if absent) and presence."""
    columns: dict[str, int] = {}
    rows = []
    for ranking in rankings:
        scores = dict(ranking)  # each doc once (``ordered_inputs``)
        where = np.array([columns.setdefault(doc_id, len(columns)) for doc_id in scores], dtype=np.intp)
        rows.append((where, normalised(np.fromiter(scores.values(), np.float64, len(scores)), score_norm)))
    matrix = np.zeros((len(rankings), len(columns)))
    present = np.zeros(matrix.shape, dtype=bool)
    for row, (where, values) in enumerate(rows):
        matrix[row, where] = values
        present[row, where] = True
    return list(columns), matrix, present


def _weighted_sum(matrix: np.ndarray, weights: Sequence[float]) -> np.ndarray:
    """``sum_i w_i * row_i`` added input by input, the order ranx and the seed add in (so equal to the bit)."""
    total = np.zeros(matrix.shape[1])
    for weight, row in zip(weights, matrix, strict=True):
        total += weight * row
    return total


def _combine(method: str, rankings: list[Ranking], score_norm: str, weights: Sequence[float]) -> dict[str, float]:
    """CombSUM, CombMNZ (sum times the number of inputs holding the doc) or weighted sum of one query."""
    docs, matrix, present = score_matrix(rankings, score_norm)
    return _combination(method, docs, matrix, present, weights)


def _combination(
    method: str, docs: list[str], matrix: np.ndarray, present: np.ndarray, weights: Sequence[float]
) -> dict[str, float]:
    fused = _weighted_sum(matrix, weights)
    if method == "combmnz":
        fused *= present.sum(axis=0)
    return dict(zip(docs, fused.tolist(), strict=True))


def zerda_scores(
    rankings: list[Ranking],
    weights: Sequence[float],
    rrf_order: str,
    k: int = HybridRetriever.RRF_K,
    score_norm: str = "none",
) -> dict[str, float]:
    """Seed 000 ``HybridRetriever`` scores of one query, by the retriever's own steps 6 and 7.

    A document absent from an input scores 0 there (the seed's ``ScoredChunk`` defaults); step 7 is
    ``retrieval.zerda.retriever.weighted_sum`` of its inputs' scores, step 6 ``rrf_bonuses`` over the
    inputs' ranked lists. With ``as_documented`` the bonus is discarded, as the seed's ``=`` assignment
    in step 7 does; with ``fixed`` it is added after the weighted sum.
    """
    docs, matrix, _ = score_matrix(rankings, score_norm)
    composite = {doc_id: weighted_sum(column.tolist(), weights) for doc_id, column in zip(docs, matrix.T, strict=True)}
    if rrf_order == FIXED:
        _, bonus = rrf_bonuses([_ids(r) for r in rankings], k)
        for doc_id, value in bonus.items():
            composite[doc_id] += value
    return composite


def _fuse_zerda(runs: list[Run], query_ids: list[str], resolved: dict[str, Any]) -> dict[str, dict[str, float]]:
    seed_weights = [RetrieverConfig.vector_weight, RetrieverConfig.keyword_weight]
    weights = resolved["weights"] or (seed_weights if len(runs) == 2 else [1.0] * len(runs))
    return {
        qid: zerda_scores([r[qid] for r in runs], weights, resolved["rrf_order"], resolved["k"], resolved["score_norm"])
        for qid in query_ids
    }
