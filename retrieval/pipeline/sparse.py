"""``SparseRetriever``: BM25 (the ``rank-bm25`` package's ``BM25Okapi``) over ``ContextItem`` contents."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from retrieval.core import tokenize
from retrieval.pipeline.dense import with_token_count
from retrieval.pipeline.errors import RetrieverError
from retrieval.pipeline.models import ContextItem, QueryBundle
from retrieval.pipeline.protocols import Tokenizer
from retrieval.pipeline.scoring import cut, rank_by, rescored
from retrieval.pipeline.tokens import RegexTokenCounter


def _bm25_okapi() -> Any:
    try:
        from rank_bm25 import BM25Okapi
    except ImportError as exc:
        raise RetrieverError(
            "SparseRetriever needs the rank-bm25 package; install it with `pip install rank-bm25`"
        ) from exc
    return BM25Okapi


class SparseRetriever:
    """BM25 retrieval with ``BM25Okapi`` (``k1``, ``b``; default 1.5, 0.75, epsilon=0.25: the package defaults).

    - Tokens: ``tokenize_fn`` (default ``retrieval.core.tokenize``) on documents and queries.
    - ``score`` = BM25 / the best BM25 of the query, so the top item scores 1.0; the raw value is in
      ``metadata["bm25_score"]``.
    - Only items with a BM25 score > 0 are returned: an item sharing no query term (or only terms
      whose Okapi idf is not positive) is not a match. No match at all gives ``[]``.
    - ``index`` replaces the previous index; ``retrieve`` before ``index`` raises ``RetrieverError``.
    """

    def __init__(
        self,
        tokenize_fn: Callable[[str], list[str]] | None = None,
        tokenizer: Tokenizer | None = None,
        k1: float = 1.5,
        b: float = 0.75,
    ) -> None:
        self.tokenize_fn = tokenize_fn or tokenize
        self.k1 = k1
        self.b = b
        self.tokenizer = tokenizer or RegexTokenCounter()
        self._items: list[ContextItem] = []
        self._bm25: Any = None

    def index(self, items: list[ContextItem]) -> int:
        """Build the BM25 index over ``items``; return how many."""
        bm25_okapi = _bm25_okapi()
        if not items:
            raise RetrieverError("SparseRetriever.index got no items; BM25 needs at least one document")
        self._items = [with_token_count(item, self.tokenizer) for item in items]
        self._bm25 = bm25_okapi([self.tokenize_fn(item.content) for item in self._items], k1=self.k1, b=self.b)
        return len(self._items)

    def retrieve(self, query: QueryBundle, top_k: int = 10) -> list[ContextItem]:
        """Top ``top_k`` items by BM25, scores normalised to [0, 1]; ties keep index order."""
        if self._bm25 is None:
            raise RetrieverError("SparseRetriever.retrieve called before index(); index items first")
        raw = [float(s) for s in self._bm25.get_scores(self.tokenize_fn(query.query_str))]
        ranked = [(item, score) for item, score in rank_by(self._items, raw) if score > 0]
        if not ranked:
            return []
        best = ranked[0][1]
        return cut([rescored(item, s / best, bm25_score=s, retrieval_method="sparse") for item, s in ranked], top_k)
