"""The one exception of ``retrieval.pipeline``: a retriever, reranker or router cannot do what was asked."""


class RetrieverError(RuntimeError):
    """A one-line, user-fixable failure (missing package, missing embed_fn, unknown route, bad index)."""
