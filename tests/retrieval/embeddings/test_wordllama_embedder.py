"""WordLlama loads offline from the wheel and gives deterministic unit float32 rows."""

from __future__ import annotations

import socket

import numpy as np
import pytest

from retrieval.embeddings import Embedder, EmbedderError, load_embedder
from retrieval.embeddings.wordllama import WordLlamaEmbedder


@pytest.fixture(scope="module")
def model() -> WordLlamaEmbedder:
    return WordLlamaEmbedder()


def test_loads_with_the_network_blocked(monkeypatch):
    def refuse(*args, **kwargs):
        raise OSError("network blocked by the test")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    model = load_embedder("wordllama", dim=64, batch_size=16)
    assert isinstance(model, Embedder)
    assert model.params == {"config": "l2_supercat", "dim": 64, "batch_size": 16}
    assert model.embed(["offline works"]).shape == (1, 64)


def test_unit_float32_rows_and_zero_row_for_empty_text(model):
    out = model.embed(["A short sentence.", "", "Another, somewhat longer sentence about proteins."])
    assert out.dtype == np.float32 and out.shape == (3, 256)
    np.testing.assert_allclose(np.linalg.norm(out, axis=1), [1.0, 0.0, 1.0], atol=1e-6)


def test_deterministic_and_independent_of_batching(model):
    texts = [f"sentence {i} about " + "cells " * (i % 7) for i in range(40)]
    small = WordLlamaEmbedder(batch_size=3).embed(texts)
    np.testing.assert_array_equal(model.embed(texts), model.embed(texts))
    np.testing.assert_allclose(model.embed(texts), small, atol=1e-6)


def test_truncated_dims_are_the_leading_dims_of_the_full_vector(model):
    texts = ["matryoshka embeddings keep the leading dimensions", "second text"]
    raw = model._model.embed(texts, norm=False)  # the library's own unnormalised pooling
    truncated = WordLlamaEmbedder(dim=128).embed(texts)
    expected = raw[:, :128] / np.linalg.norm(raw[:, :128], axis=1, keepdims=True)
    np.testing.assert_allclose(truncated, expected, atol=1e-5)


def test_related_texts_score_higher(model):
    cat, kitten, market = model.embed(
        ["The cat sat on the mat.", "A kitten is sleeping on a rug.", "The stock market crashed today."]
    )
    assert float(cat @ kitten) > float(cat @ market)


def test_invalid_parameters():
    with pytest.raises(EmbedderError, match=r"dim=512 is not available offline; use one of \(256, 128, 64\)"):
        WordLlamaEmbedder(dim=512)
    with pytest.raises(EmbedderError, match="batch_size must be a positive integer"):
        WordLlamaEmbedder(batch_size=0)
