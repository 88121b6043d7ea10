"""Synchronous rerankers: score, cross-encoder, Cohere-style callback, FlashRank, round robin, chains.

``top_k`` rule (the seed gives both a constructor and a call ``top_k``): the call's value wins;
``None`` at the call means the constructor's. Scores: every reranker that scores (score, cross-encoder,
Cohere, FlashRank) orders by the raw score, clamps it to [0, 1] as ``score`` (no sigmoid) and keeps it in
``metadata["raw_score"]``: seed 004 says only "Score each item and return top-k" / "Rescore and sort",
and this is what the documented library does (issue 18).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from retrieval.pipeline.errors import RetrieverError
from retrieval.pipeline.models import ContextItem, QueryBundle
from retrieval.pipeline.protocols import Reranker
from retrieval.pipeline.scoring import cut, rank_by, rescore_sorted


def pick_by_index(items: Sequence[ContextItem], indices: Sequence[int], source: str) -> list[ContextItem]:
    """``items[i]`` for each index a callback returned; an index out of range is ``RetrieverError``."""
    for i in indices:
        if not 0 <= i < len(items):
            raise RetrieverError(
                f"{source} returned index {i} for {len(items)} documents; indices must be 0..{len(items) - 1}"
            )
    return [items[i] for i in indices]


class ScoreReranker:
    """Re-scores items with ``score_fn(query_str, content)`` through ``process`` (a pipeline stage).

    ``process(items, None)`` returns ``items`` unchanged (the same list); ``top_k=None`` keeps all.
    """

    def __init__(self, score_fn: Callable[[str, str], float], top_k: int | None = None) -> None:
        self.score_fn = score_fn
        self.top_k = top_k

    def process(self, items: list[ContextItem], query: QueryBundle | None = None) -> list[ContextItem]:
        if query is None:
            return items
        reranked = rescore_sorted(
            items,
            [self.score_fn(query.query_str, it.content) for it in items],
            "raw_score",
            rerank_method="score",
        )
        return reranked if self.top_k is None else cut(reranked, self.top_k)


class CrossEncoderReranker:
    """``Reranker`` scoring each ``(query_str, content)`` pair with ``score_fn`` (e.g. a cross-encoder)."""

    def __init__(self, score_fn: Callable[[str, str], float], top_k: int = 10) -> None:
        self.score_fn = score_fn
        self.top_k = top_k

    def rerank(self, query: QueryBundle, items: list[ContextItem], top_k: int | None = 10) -> list[ContextItem]:
        raw = [self.score_fn(query.query_str, item.content) for item in items]
        return cut(
            rescore_sorted(items, raw, "raw_score", rerank_method="cross_encoder"),
            self.top_k if top_k is None else top_k,
        )


class CohereReranker:
    """``Reranker`` calling ``rerank_fn(query, documents, top_k) -> [(index, score)]`` once per batch.

    Items not returned by the callback are dropped; the result is sorted by the callback's scores.
    """

    def __init__(self, rerank_fn: Callable[[str, list[str], int], list[tuple[int, float]]], top_k: int = 10) -> None:
        self.rerank_fn = rerank_fn
        self.top_k = top_k

    def rerank(self, query: QueryBundle, items: list[ContextItem], top_k: int | None = 10) -> list[ContextItem]:
        k = self.top_k if top_k is None else top_k
        if not items:
            return []
        pairs = self.rerank_fn(query.query_str, [item.content for item in items], k)
        chosen = pick_by_index(items, [i for i, _ in pairs], "rerank_fn")
        return cut(rescore_sorted(chosen, [score for _, score in pairs], "raw_score", rerank_method="cohere"), k)


def _import_flashrank() -> Any:
    try:
        import flashrank
    except ImportError as exc:
        raise RetrieverError(
            "FlashRankReranker needs the flashrank package; install it with `pip install flashrank`"
        ) from exc
    return flashrank


class FlashRankReranker:
    """``Reranker`` backed by the ``flashrank`` package (ONNX cross-encoders), loaded on first use.

    The model is read from ``cache_dir`` (flashrank's default ``/tmp``); this class never downloads
    it: missing package or model files -> ``RetrieverError`` saying which. Seam for tests and for a
    preloaded model: ``ranker=`` (any object with flashrank's ``rerank(RerankRequest)``), also what
    ``_get_ranker()`` returns. Its scores are clamped like every reranker's (a flashrank model scoring
    outside [0, 1] keeps its raw value in ``metadata["raw_score"]``).
    """

    def __init__(
        self,
        model_name: str = "ms-marco-MiniLM-L-12-v2",
        top_k: int = 10,
        *,
        cache_dir: str | None = None,
        ranker: Any | None = None,
    ) -> None:
        self.model_name = model_name
        self.top_k = top_k
        self.cache_dir = cache_dir
        self._ranker = ranker

    def _get_ranker(self) -> Any:
        """The flashrank ``Ranker``, created on the first call."""
        if self._ranker is None:
            flashrank = _import_flashrank()
            from flashrank.Config import default_cache_dir

            cache_dir = self.cache_dir or default_cache_dir
            if not (Path(cache_dir) / self.model_name).is_dir():
                raise RetrieverError(
                    f"flashrank model files for {self.model_name!r} not found in {cache_dir}; "
                    "download them once (flashrank.Ranker with network) or pass cache_dir="
                )
            try:
                self._ranker = flashrank.Ranker(model_name=self.model_name, cache_dir=cache_dir)
            except Exception as exc:  # unreadable or partial model files
                raise RetrieverError(f"flashrank could not load {self.model_name!r} from {cache_dir}: {exc}") from exc
        return self._ranker

    def rerank(self, query: QueryBundle, items: list[ContextItem], top_k: int | None = 10) -> list[ContextItem]:
        if not items:
            return []
        ranker = self._get_ranker()
        passages = [{"id": i, "text": item.content} for i, item in enumerate(items)]
        results = ranker.rerank(_import_flashrank().RerankRequest(query=query.query_str, passages=passages))
        chosen = pick_by_index(items, [int(r["id"]) for r in results], "flashrank")
        raw = [float(r["score"]) for r in results]
        return cut(
            rescore_sorted(chosen, raw, "raw_score", rerank_method="flashrank"),
            self.top_k if top_k is None else top_k,
        )


class RoundRobinReranker:
    """``rerank`` re-sorts by the items' existing scores; ``rerank_multiple`` interleaves result sets.

    ``rerank_multiple`` takes rank 1 of every set in order, then rank 2, ...; an id already taken is
    skipped (first occurrence wins); the merged order is kept (no re-sort), scores unchanged.
    """

    def __init__(self, top_k: int = 10) -> None:
        self.top_k = top_k

    def rerank(self, query: QueryBundle, items: list[ContextItem], top_k: int | None = 10) -> list[ContextItem]:
        ranked = [item for item, _ in rank_by(items, [item.score for item in items])]
        return cut(ranked, self.top_k if top_k is None else top_k)

    def rerank_multiple(
        self, query: QueryBundle, result_sets: list[list[ContextItem]], top_k: int | None = None
    ) -> list[ContextItem]:
        merged: dict[str, ContextItem] = {}
        for position in range(max((len(s) for s in result_sets), default=0)):
            for result_set in result_sets:
                if position < len(result_set):
                    merged.setdefault(result_set[position].id, result_set[position])
        return cut(list(merged.values()), self.top_k if top_k is None else top_k)


class RerankerPipeline:
    """Runs ``rerankers`` in order; intermediate stages keep every item, the final ``top_k`` cuts."""

    def __init__(self, rerankers: list[Reranker], top_k: int = 10) -> None:
        self.rerankers = rerankers
        self.top_k = top_k

    def rerank(self, query: QueryBundle, items: list[ContextItem], top_k: int | None = 10) -> list[ContextItem]:
        for reranker in self.rerankers:
            items = reranker.rerank(query, items, len(items))
        return cut(items, self.top_k if top_k is None else top_k)
