"""``DenseRetriever``: embedding retrieval through a ``VectorStore`` and a ``ContextStore``."""

from __future__ import annotations

from collections.abc import Callable

from retrieval.pipeline.errors import RetrieverError
from retrieval.pipeline.models import ContextItem, QueryBundle
from retrieval.pipeline.protocols import ContextStore, Tokenizer, VectorStore
from retrieval.pipeline.scoring import cut, rescored
from retrieval.pipeline.tokens import RegexTokenCounter


def with_token_count(item: ContextItem, tokenizer: Tokenizer) -> ContextItem:
    """``item`` with ``token_count`` filled by ``tokenizer`` when it is 0 (unset)."""
    if item.token_count:
        return item
    return item.model_copy(update={"token_count": tokenizer.count_tokens(item.content)})


class DenseRetriever:
    """Dense retrieval: ``index`` embeds items with ``embed_fn``; ``retrieve`` searches the vector store.

    ``score`` is the store's similarity clipped to [0, 1] (a negative cosine becomes 0.0); the raw
    similarity is in ``metadata["similarity"]``. Ids the context store cannot resolve are skipped.
    The tokenizer (default ``RegexTokenCounter``) fills ``token_count`` of items indexed with 0.
    """

    def __init__(
        self,
        vector_store: VectorStore,
        context_store: ContextStore,
        embed_fn: Callable[[str], list[float]] | None = None,
        tokenizer: Tokenizer | None = None,
    ) -> None:
        self.vector_store = vector_store
        self.context_store = context_store
        self.embed_fn = embed_fn
        self.tokenizer = tokenizer or RegexTokenCounter()

    def index(self, items: list[ContextItem]) -> int:
        """Embed and store ``items``; return how many. Needs ``embed_fn``."""
        if self.embed_fn is None:
            raise RetrieverError("DenseRetriever.index needs embed_fn; pass embed_fn=... to DenseRetriever")
        for item in items:
            self.vector_store.add_embedding(item.id, self.embed_fn(item.content))
            self.context_store.add(with_token_count(item, self.tokenizer))
        return len(items)

    def retrieve(self, query: QueryBundle, top_k: int = 10) -> list[ContextItem]:
        """Top ``top_k`` items by similarity to ``query.embedding`` (or ``embed_fn(query.query_str)``)."""
        if query.embedding is not None:
            embedding = query.embedding
        elif self.embed_fn is not None:
            embedding = self.embed_fn(query.query_str)
        else:
            raise RetrieverError("query has no embedding and DenseRetriever has no embed_fn; set one of them")
        results = []
        for item_id, similarity in self.vector_store.search(embedding, top_k):
            item = self.context_store.get(item_id)
            if item is not None:
                results.append(rescored(item, similarity, similarity=similarity, retrieval_method="dense"))
        return cut(results, top_k)
