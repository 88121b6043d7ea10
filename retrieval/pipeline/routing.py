"""Query routers and ``RoutedRetriever``, which delegates each query to a named retriever."""

from __future__ import annotations

from collections.abc import Callable

from retrieval.pipeline.errors import RetrieverError
from retrieval.pipeline.models import ContextItem, QueryBundle
from retrieval.pipeline.protocols import Retriever


class KeywordRouter:
    """Routes by keywords: the first route (dict order) with a keyword found in the query wins.

    A keyword matches as a substring of ``query_str`` (so ``"code"`` also matches ``"barcode"``);
    routes are tried in insertion order, keywords in list order. Case-insensitive unless
    ``case_sensitive=True``. No match -> ``default``.
    """

    def __init__(self, routes: dict[str, list[str]], default: str, *, case_sensitive: bool = False) -> None:
        self.routes = routes
        self.default = default
        self.case_sensitive = case_sensitive

    def route(self, query: QueryBundle) -> str:
        text = query.query_str if self.case_sensitive else query.query_str.lower()
        for name, keywords in self.routes.items():
            for keyword in keywords:
                if (keyword if self.case_sensitive else keyword.lower()) in text:
                    return name
        return self.default


class CallbackRouter:
    """Routes with ``callback(query)``; a ``None`` answer means ``default``."""

    def __init__(self, callback: Callable[[QueryBundle], str | None], default: str = "default") -> None:
        self.callback = callback
        self.default = default

    def route(self, query: QueryBundle) -> str:
        name = self.callback(query)
        return self.default if name is None else name


class MetadataRouter:
    """Routes by ``query.metadata[metadata_key]``; missing (or ``None``) -> ``default``.

    A non-string value is a caller mistake: ``RetrieverError``.
    """

    def __init__(self, metadata_key: str = "route", default: str = "default") -> None:
        self.metadata_key = metadata_key
        self.default = default

    def route(self, query: QueryBundle) -> str:
        name = query.metadata.get(self.metadata_key)
        if name is None:
            return self.default
        if not isinstance(name, str):
            raise RetrieverError(
                f"query.metadata[{self.metadata_key!r}] must be a route name (str), got {type(name).__name__}"
            )
        return name


class RoutedRetriever:
    """Asks ``router`` for a route name and delegates to ``retrievers[name]``.

    Unknown route -> ``retrievers[default_retriever]`` if set, else ``RetrieverError`` listing the
    routes. A ``default_retriever`` that is not a key of ``retrievers`` fails at construction.
    """

    def __init__(
        self,
        router: KeywordRouter | CallbackRouter | MetadataRouter,
        retrievers: dict[str, Retriever],
        default_retriever: str | None = None,
    ) -> None:
        if default_retriever is not None and default_retriever not in retrievers:
            raise RetrieverError(
                f"default_retriever {default_retriever!r} is not one of the retrievers {sorted(retrievers)}"
            )
        self.router = router
        self.retrievers = retrievers
        self.default_retriever = default_retriever

    def retrieve(self, query: QueryBundle, top_k: int = 10) -> list[ContextItem]:
        name = self.router.route(query)
        if name not in self.retrievers:
            if self.default_retriever is None:
                raise RetrieverError(
                    f"route {name!r} has no retriever (known: {sorted(self.retrievers)}); "
                    "add it or set default_retriever"
                )
            name = self.default_retriever
        return self.retrievers[name].retrieve(query, top_k)
