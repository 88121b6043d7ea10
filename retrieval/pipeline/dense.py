"""``DenseRetriever``: embedding retrieval through a ``VectorStore`` and a ``ContextStore``.

The ``embed_fn`` contract: ONE text in, ONE vector out, ``embed_fn(text: str) -> list[float]`` (any
1-D sequence of numbers, e.g. a numpy array of shape ``(dim,)``), the same ``dim`` for every text.
A batch embedder (``texts -> (n, dim)`` matrix) breaks it: handed one text it returns a ``(1, dim)``
matrix, which is refused with a one-line ``RetrieverError``; wrap it as
``embed_fn=lambda text: embed([text])[0]``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

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


EMBED_FN_CONTRACT = "embed_fn must map one text to one vector (a 1-D sequence of floats)"


def one_vector(vector: Sequence[float], text: str) -> Sequence[float]:
    """``vector`` unchanged if it is what ``embed_fn`` promises for ``text`` (1-D, non-empty), else a one-line
    ``RetrieverError`` naming the contract and the fix."""
    shape = np.shape(vector)
    if len(shape) == 1 and shape[0] > 0:
        return vector
    batch = " (a batch embedder? wrap it: embed_fn=lambda text: embed([text])[0])" if len(shape) == 2 else ""
    raise RetrieverError(f"{EMBED_FN_CONTRACT}; it returned shape {shape} for the text {text[:40]!r}{batch}")


class DenseRetriever:
    """Dense retrieval: ``index`` embeds items with ``embed_fn``; ``retrieve`` searches the vector store.

    ``embed_fn(text) -> vector``: one text in, one 1-D vector out (module docstring); each result is
    checked, so a batch embedder fails with one line instead of a numpy shape error at search time.

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
            self.vector_store.add_embedding(item.id, one_vector(self.embed_fn(item.content), item.content))
            self.context_store.add(with_token_count(item, self.tokenizer))
        return len(items)

    def retrieve(self, query: QueryBundle, top_k: int = 10) -> list[ContextItem]:
        """Top ``top_k`` items by similarity to ``query.embedding`` (or ``embed_fn(query.query_str)``)."""
        if query.embedding is not None:
            embedding = query.embedding
        elif self.embed_fn is not None:
            embedding = one_vector(self.embed_fn(query.query_str), query.query_str)
        else:
            raise RetrieverError("query has no embedding and DenseRetriever has no embed_fn; set one of them")
        results = []
        for item_id, similarity in self.vector_store.search(embedding, top_k):
            item = self.context_store.get(item_id)
            if item is not None:
                results.append(rescored(item, similarity, similarity=similarity, retrieval_method="dense"))
        return cut(results, top_k)
