"""``load_embedder``: names, parameter checking, and lazy imports."""

from __future__ import annotations

import pytest

from retrieval.embeddings import EMBEDDERS, EmbedderError, load_embedder
from retrieval.embeddings.lsa import LSAEmbedder


def test_contract_names_are_registered():
    assert set(EMBEDDERS) == {
        *("wordllama", "lsa", "sentence-transformers", "fastembed", "model2vec"),
        *("minilm", "minilm-int8", "e5-small"),
    }
    model = load_embedder("lsa", dim=8, normalization="light", stemmer="arabic")
    assert isinstance(model, LSAEmbedder) and model.params["stemmer"] == "arabic"


def test_unknown_name_suggests_the_closest():
    with pytest.raises(EmbedderError, match=r"unknown embedder 'wordlama' \(did you mean 'wordllama'\?\)"):
        load_embedder("wordlama")


def test_unknown_parameter_lists_the_accepted_ones():
    with pytest.raises(EmbedderError, match=r"'lsa' has no parameter 'dims'; accepted: dim, normalization"):
        load_embedder("lsa", dims=8)
