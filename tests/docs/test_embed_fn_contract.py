"""Seed 004's ``embed_fn`` contract, as ``retrieval/pipeline/dense.py`` states it: one text in, one vector out.

A batch embedder (texts -> (n, dim) matrix) used as ``embed_fn`` used to fail at search time with a numpy
shape traceback; it is now one ``RetrieverError`` line naming the contract and the fix.
"""

from __future__ import annotations

import numpy as np
import pytest

import retrieval.pipeline.dense as dense_module
from retrieval.pipeline.dense import DenseRetriever
from retrieval.pipeline.errors import RetrieverError
from retrieval.pipeline.models import ContextItem, QueryBundle
from retrieval.pipeline.stores import InMemoryContextStore, InMemoryVectorStore

ITEMS = [ContextItem(id="a", content="red apples"), ContextItem(id="b", content="green pears")]


def batch_embedder(texts):
    """A batch embedder: a list (or one string, as a list of one) in, an (n, 3) matrix out."""
    texts = [texts] if isinstance(texts, str) else texts
    return np.array([[len(t), t.count("e"), 1.0] for t in texts])


def one_text_embedder(text):
    return batch_embedder([text])[0]


def retriever(embed_fn):
    return DenseRetriever(InMemoryVectorStore(), InMemoryContextStore(), embed_fn=embed_fn)


def test_the_contract_is_stated_in_the_module_docstring():
    assert "ONE text in, ONE vector out" in dense_module.__doc__
    assert "embed_fn" in DenseRetriever.__doc__ and "one 1-D vector out" in DenseRetriever.__doc__


def test_a_batch_embedder_is_one_line_naming_the_contract_at_index_time():
    with pytest.raises(RetrieverError) as error:
        retriever(batch_embedder).index(ITEMS)
    message = str(error.value)
    assert "\n" not in message
    assert message.startswith("embed_fn must map one text to one vector (a 1-D sequence of floats)")
    assert "shape (1, 3)" in message and "embed([text])[0]" in message


def test_a_batch_embedder_at_query_time_is_one_line_too():
    good = retriever(one_text_embedder)
    good.index(ITEMS)
    good.embed_fn = batch_embedder
    with pytest.raises(RetrieverError, match=r"^embed_fn must map one text to one vector.*shape \(1, 3\)"):
        good.retrieve(QueryBundle(query_str="apples"), top_k=1)


def test_a_one_text_embedder_keeps_working_and_its_vectors_are_stored_unchanged():
    good = retriever(one_text_embedder)
    assert good.index(ITEMS) == 2
    hits = good.retrieve(QueryBundle(query_str="red apples"), top_k=2)
    assert hits[0].id == "a"  # identical vector: cosine 1
    assert hits[0].metadata["similarity"] == pytest.approx(1.0)


@pytest.mark.parametrize("bad", [np.float64(0.5), np.zeros(0), [[0.1, 0.2]]])
def test_other_shapes_break_the_contract(bad):
    with pytest.raises(RetrieverError, match="embed_fn must map one text to one vector"):
        retriever(lambda text: bad).index(ITEMS[:1])
