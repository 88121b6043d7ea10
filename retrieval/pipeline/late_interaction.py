"""Late interaction (ColBERT-style): token-level scoring of first-stage candidates."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from retrieval.core import cosine_matrix
from retrieval.pipeline.errors import RetrieverError
from retrieval.pipeline.models import ContextItem, QueryBundle
from retrieval.pipeline.protocols import Retriever, TokenLevelEncoder
from retrieval.pipeline.scoring import cut, rescore_sorted

TokenScoreFn = Callable[[list[list[float]], list[list[float]]], float]


class MaxSimScorer:
    """MaxSim (Khattab & Zaharia, SIGIR 2020): sum over query tokens of the max cosine over doc tokens.

    Cosine is the project's (``retrieval.core.cosine_matrix``; zero vectors give 0.0). An empty
    query or document scores 0.0. The sum lies in [-n, n] for n query tokens.
    """

    def score(self, query_tokens: list[list[float]], doc_tokens: list[list[float]]) -> float:
        if len(query_tokens) == 0 or len(doc_tokens) == 0:
            return 0.0
        return float(cosine_matrix(np.asarray(query_tokens), np.asarray(doc_tokens)).max(axis=1).sum())


class LateInteractionScorer:
    """Token-level scorer; ``score_fn`` defaults to ``MaxSimScorer().score``."""

    def __init__(self, score_fn: TokenScoreFn | None = None) -> None:
        self.score_fn = score_fn or MaxSimScorer().score

    def score(self, query_tokens: list[list[float]], doc_tokens: list[list[float]]) -> float:
        return self.score_fn(query_tokens, doc_tokens)


class LateInteractionRetriever:
    """Two stages: ``first_stage`` gives ``first_stage_k`` candidates, re-scored token by token.

    The raw late-interaction score (a MaxSim sum can exceed 1) is in
    ``metadata["late_interaction_score"]`` and the candidate's earlier score in
    ``metadata["first_stage_score"]``; items are ordered by the raw score and ``score`` is it clamped to
    [0, 1] (the rerankers' rule: seed 004's "re-score with token-level similarity" names no mapping;
    issue 18). Ties keep the first-stage order. At most ``min(top_k, first_stage_k)`` items come back.
    """

    def __init__(
        self,
        first_stage: Retriever,
        encoder: TokenLevelEncoder,
        scorer: LateInteractionScorer | None = None,
        first_stage_k: int = 100,
    ) -> None:
        if first_stage_k < 1:
            raise RetrieverError(f"first_stage_k must be >= 1, got {first_stage_k}")
        self.first_stage = first_stage
        self.encoder = encoder
        self.scorer = scorer or LateInteractionScorer()
        self.first_stage_k = first_stage_k

    def retrieve(self, query: QueryBundle, top_k: int = 10) -> list[ContextItem]:
        candidates = self.first_stage.retrieve(query, self.first_stage_k)
        query_tokens = self.encoder.encode_tokens(query.query_str)
        raw = [self.scorer.score(query_tokens, self.encoder.encode_tokens(c.content)) for c in candidates]
        return cut(
            rescore_sorted(
                candidates,
                raw,
                "late_interaction_score",
                "first_stage_score",
                retrieval_method="late_interaction",
            ),
            top_k,
        )
