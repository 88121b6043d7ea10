"""Adapters for user-supplied models: a tiny model2vec model built here, and the offline error paths."""

from __future__ import annotations

import socket
import sys

import numpy as np
import pytest

from retrieval.embeddings import EmbedderUnavailable, load_embedder


@pytest.fixture()
def no_network(monkeypatch):
    def refuse(*args, **kwargs):
        raise OSError("network blocked by the test")

    monkeypatch.setattr(socket.socket, "connect", refuse)


@pytest.fixture()
def tiny_model2vec(tmp_path):
    """A 4-dimensional model2vec model over a six-word vocabulary, saved to a local directory."""
    from model2vec import StaticModel
    from tokenizers import Tokenizer
    from tokenizers.models import WordLevel
    from tokenizers.pre_tokenizers import Whitespace

    vocab = {"[UNK]": 0, "[PAD]": 1, "cat": 2, "dog": 3, "sat": 4, "ran": 5}
    tokenizer = Tokenizer(WordLevel(vocab, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = Whitespace()
    vectors = np.random.default_rng(3).normal(size=(len(vocab), 4)).astype(np.float32)
    StaticModel(vectors, tokenizer, normalize=False).save_pretrained(tmp_path / "tiny")
    return tmp_path / "tiny", vocab, vectors


def test_model2vec_from_local_path_is_the_normalised_token_mean(tiny_model2vec, no_network):
    path, vocab, vectors = tiny_model2vec
    model = load_embedder("model2vec", model=str(path))
    assert model.dim == 4 and model.params == {"model": str(path), "batch_size": 1024}
    out = model.embed(["cat sat", "dog", "dog ran ran"])
    expected = np.stack(
        [
            (vectors[vocab["cat"]] + vectors[vocab["sat"]]) / 2,
            vectors[vocab["dog"]],
            (vectors[vocab["dog"]] + 2 * vectors[vocab["ran"]]) / 3,
        ]
    )
    expected /= np.linalg.norm(expected, axis=1, keepdims=True)
    np.testing.assert_allclose(out, expected, atol=1e-6)


@pytest.mark.parametrize("name", ["model2vec", "sentence-transformers"])
def test_missing_model_is_a_one_line_error_without_network(name, tmp_path, no_network, monkeypatch):
    # sentence-transformers needs torch, not installed here: a placeholder module lets the path check run.
    monkeypatch.setitem(sys.modules, "sentence_transformers", sys.modules.get("sentence_transformers", object()))
    missing = tmp_path / "no-such-model"
    with pytest.raises(EmbedderUnavailable, match=r"is not a local directory nor in the Hugging Face cache") as e:
        load_embedder(name, model=str(missing))
    assert "\n" not in str(e.value) and str(missing) in str(e.value)
    with pytest.raises(EmbedderUnavailable, match="pass the path of a downloaded copy"):
        load_embedder(name, model="some-org/model-that-is-not-cached")


@pytest.mark.parametrize(
    ("name", "module", "package"),
    [
        ("sentence-transformers", "sentence_transformers", "sentence-transformers"),
        ("fastembed", "fastembed", "fastembed"),
        ("model2vec", "model2vec", "model2vec"),
    ],
)
def test_missing_package_is_a_one_line_error(name, module, package, monkeypatch):
    monkeypatch.setitem(sys.modules, module, None)  # makes `import module` raise ImportError
    with pytest.raises(EmbedderUnavailable) as e:
        load_embedder(name, model="anything")
    assert str(e.value) == f"{package} is not installed; pip install {package}"


def test_fastembed_local_path_must_exist(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "fastembed", object())  # stands in for an installed package
    with pytest.raises(EmbedderUnavailable, match=r"fastembed model path .* does not exist"):
        load_embedder("fastembed", model="BAAI/bge-small-en-v1.5", path=str(tmp_path / "absent"))
