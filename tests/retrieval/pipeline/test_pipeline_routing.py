"""Routers and RoutedRetriever: precedence, case sensitivity, defaults, errors."""

import pytest

from retrieval.pipeline import (
    CallbackRouter,
    ContextItem,
    KeywordRouter,
    MetadataRouter,
    QueryBundle,
    RetrieverError,
    RoutedRetriever,
)

ROUTES = {"code": ["python", "bug"], "docs": ["manual", "python"]}


def q(text, **metadata):
    return QueryBundle(query_str=text, metadata=metadata)


def test_keyword_router_first_route_wins_in_dict_order():
    router = KeywordRouter(ROUTES, default="general")
    assert router.route(q("the python manual")) == "code"  # both match; "code" is declared first
    assert router.route(q("read the manual")) == "docs"
    assert router.route(q("weather today")) == "general"
    assert KeywordRouter({"docs": ["manual"], "code": ["python"]}, "g").route(q("python manual")) == "docs"


def test_keyword_router_case_sensitivity():
    assert KeywordRouter(ROUTES, "general").route(q("A PYTHON BUG")) == "code"
    sensitive = KeywordRouter({"code": ["Python"]}, "general", case_sensitive=True)
    assert sensitive.route(q("python")) == "general"
    assert sensitive.route(q("Python")) == "code"


def test_keyword_router_matches_substrings():
    assert KeywordRouter({"code": ["bug"]}, "general").route(q("debugging")) == "code"


def test_callback_and_metadata_routers():
    router = CallbackRouter(lambda query: "short" if len(query.query_str) < 5 else None)
    assert router.route(q("hi")) == "short" and router.route(q("a long question")) == "default"
    assert MetadataRouter().route(q("x", route="sql")) == "sql"
    assert MetadataRouter().route(q("x")) == "default"
    assert MetadataRouter("kind", default="web").route(q("x", route="sql")) == "web"
    with pytest.raises(RetrieverError, match=r"metadata\['route'\] must be a route name \(str\), got int"):
        MetadataRouter().route(q("x", route=3))


class Named:
    def __init__(self, name):
        self.name = name

    def retrieve(self, query, top_k=10):
        return [ContextItem(id=self.name, content=query.query_str)][:top_k]


def test_routed_retriever_delegates_and_falls_back():
    retrievers = {"code": Named("code"), "docs": Named("docs")}
    routed = RoutedRetriever(KeywordRouter(ROUTES, default="other"), retrievers, default_retriever="docs")
    assert [r.id for r in routed.retrieve(q("python bug"))] == ["code"]
    assert [r.id for r in routed.retrieve(q("weather"))] == ["docs"]  # route "other" unknown -> default
    assert routed.retrieve(q("python"), top_k=0) == []


def test_routed_retriever_errors():
    routed = RoutedRetriever(MetadataRouter(), {"code": Named("code")})
    with pytest.raises(RetrieverError, match=r"route 'default' has no retriever.*'code'"):
        routed.retrieve(q("x"))
    with pytest.raises(RetrieverError, match="default_retriever 'nope'"):
        RoutedRetriever(MetadataRouter(), {"code": Named("code")}, default_retriever="nope")
