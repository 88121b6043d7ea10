"""_resolve_vector_db_filter_kwargs: the static backend map, FAISS's doc_id-only rule, signature fallback."""

import logging

import pytest

from retrieval.zerda.retriever import _resolve_vector_db_filter_kwargs

LOGGER = "retrieval.zerda.retriever"


# Stand-ins with the documented class names and search() signatures of zerda's three backends.
class ChromaVectorDatabase:
    def search(self, query, top_k=5, score_threshold=None, filters=None): ...


class FAISSVectorDatabase:
    def search(self, query, top_k=5, score_threshold=None, doc_id_filter=None): ...


class PineconeVectorDatabase:
    def search(self, query, top_k=5, score_threshold=None, filter_dict=None): ...


class _UnreadableSignature:
    """A callable whose signature cannot be read (inspect.signature raises ValueError)."""

    def __call__(self, *args, **kwargs): ...

    @property
    def __signature__(self):
        raise ValueError("no signature")


@pytest.mark.parametrize(
    ("backend", "expected"),
    [
        (ChromaVectorDatabase(), {"filters": {"category": "legal", "year": 2026}}),
        (PineconeVectorDatabase(), {"filter_dict": {"category": "legal", "year": 2026}}),
    ],
)
def test_known_backends_get_their_kwarg(backend, expected):
    assert _resolve_vector_db_filter_kwargs(backend, {"category": "legal", "year": 2026}) == expected


def test_faiss_passes_only_the_doc_id():
    faiss = FAISSVectorDatabase()
    assert _resolve_vector_db_filter_kwargs(faiss, {"doc_id": "d7", "category": "x"}) == {"doc_id_filter": "d7"}


def test_faiss_category_filter_resolves_to_unfiltered_search(caplog):
    with caplog.at_level(logging.DEBUG, logger=LOGGER):
        assert _resolve_vector_db_filter_kwargs(FAISSVectorDatabase(), {"category": "legal"}) == {}
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]  # silent: no warning, no raise


def test_map_is_by_class_name_not_signature():
    class ChromaVectorDatabase:  # same name, signature without any filter kwarg
        def search(self, query, **kwargs): ...

    assert _resolve_vector_db_filter_kwargs(ChromaVectorDatabase(), {"a": 1}) == {"filters": {"a": 1}}


@pytest.mark.parametrize("kwarg", ["filters", "filter_dict", "where"])
def test_unknown_backend_falls_back_to_signature(kwarg):
    namespace: dict = {}
    exec(f"def search(self, query, top_k=5, score_threshold=None, {kwarg}=None): ...", namespace)
    backend = type("CustomVectorDB", (), {"search": namespace["search"]})()
    assert _resolve_vector_db_filter_kwargs(backend, {"lang": "ar"}) == {kwarg: {"lang": "ar"}}


def test_unknown_backend_with_doc_id_filter_in_signature_gets_doc_id_only():
    class CustomVectorDB:
        def search(self, query, top_k=5, score_threshold=None, doc_id_filter=None): ...

    backend = CustomVectorDB()
    assert _resolve_vector_db_filter_kwargs(backend, {"doc_id": "d1", "lang": "ar"}) == {"doc_id_filter": "d1"}
    assert _resolve_vector_db_filter_kwargs(backend, {"lang": "ar"}) == {}


def test_signature_candidates_checked_in_seed_order():
    class CustomVectorDB:
        def search(self, query, where=None, filter_dict=None): ...

    assert _resolve_vector_db_filter_kwargs(CustomVectorDB(), {"a": 1}) == {"filter_dict": {"a": 1}}


def test_unknown_backend_without_filter_kwarg_logs_debug_and_ignores_filters(caplog):
    class CustomVectorDB:
        def search(self, query, top_k=5, **kwargs): ...

    with caplog.at_level(logging.DEBUG, logger=LOGGER):
        assert _resolve_vector_db_filter_kwargs(CustomVectorDB(), {"lang": "ar"}) == {}
    assert [r.levelno for r in caplog.records] == [logging.DEBUG]
    assert "CustomVectorDB" in caplog.records[0].getMessage()


def test_unreadable_signature_is_treated_as_no_filter_kwarg():
    backend = type("OpaqueVectorDB", (), {})()
    backend.search = _UnreadableSignature()
    assert _resolve_vector_db_filter_kwargs(backend, {"lang": "ar"}) == {}


@pytest.mark.parametrize("filters", [None, {}])
def test_falsy_filters_give_no_kwargs(filters):
    assert _resolve_vector_db_filter_kwargs(ChromaVectorDatabase(), filters) == {}
    assert _resolve_vector_db_filter_kwargs(FAISSVectorDatabase(), filters) == {}


@pytest.mark.parametrize("doc_id", ["", None, 0])
def test_falsy_doc_id_is_no_filter_for_faiss_and_the_signature_fallback(doc_id):
    """Seed 000: "If filters is falsy, or no matching kwarg can be found at all, it returns {}"; a falsy
    doc_id gives FAISS nothing to filter by: {"doc_id": ""} is an unfiltered search (as zerda does)."""

    class CustomVectorDB:
        def search(self, query, top_k=5, score_threshold=None, doc_id_filter=None): ...

    assert _resolve_vector_db_filter_kwargs(FAISSVectorDatabase(), {"doc_id": doc_id}) == {}
    assert _resolve_vector_db_filter_kwargs(CustomVectorDB(), {"doc_id": doc_id, "lang": "ar"}) == {}
