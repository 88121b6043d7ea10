"""Properties of the two fusions: seed 004's ``rrf_fuse`` and seed 000's ``HybridRetriever`` merge.

Hypothesis draws small ranked lists / corpora; every property is a law the fusion must obey for
ANY input, so a counter-example is a bug, never a tolerance to tune.
"""

from __future__ import annotations

import hashlib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from retrieval.core.hashing import normalized_text_sha256
from retrieval.pipeline import ContextItem, rrf_fuse
from retrieval.zerda import (
    ContextEngineConfig,
    DocumentChunk,
    HybridRetriever,
    KeywordRetriever,
    RetrieverConfig,
    VectorRetriever,
)

SETTINGS = settings(max_examples=75, deadline=None)
IDS = [f"d{i}" for i in range(12)]

# A ranked list: distinct ids (as a retriever returns them), best first.
ranked_ids = st.lists(st.sampled_from(IDS), max_size=8, unique=True)
ranked_lists = st.lists(ranked_ids, min_size=1, max_size=4)


def items(ids: list[str]) -> list[ContextItem]:
    return [ContextItem(id=item_id, content=f"text of {item_id}") for item_id in ids]


def fuse(lists: list[list[str]], **kwargs) -> list[ContextItem]:
    return rrf_fuse([items(ids) for ids in lists], **kwargs)


@SETTINGS
@given(lists=ranked_lists, data=st.data())
def test_rrf_fuse_ignores_the_order_of_the_lists_with_equal_weights(lists, data):
    shuffled = data.draw(st.permutations(lists))
    before, after = fuse(lists), fuse(shuffled)
    raw_before = {item.id: item.metadata["rrf_raw_score"] for item in before}
    raw_after = {item.id: item.metadata["rrf_raw_score"] for item in after}
    assert raw_before.keys() == raw_after.keys()
    for item_id, value in raw_before.items():
        assert raw_after[item_id] == pytest.approx(value, rel=1e-12)
    # Same ranking up to ties: the score sequence is the same, only tied ids may swap.
    assert [item.score for item in before] == pytest.approx([item.score for item in after], rel=1e-12)


@SETTINGS
@given(lists=ranked_lists, data=st.data())
def test_rrf_fuse_scores_are_in_unit_interval_and_sorted(lists, data):
    weights = data.draw(
        st.lists(st.one_of(st.just(0.0), st.floats(1e-6, 10.0)), min_size=len(lists), max_size=len(lists))
    )
    fused = fuse(lists, weights=weights)
    scores = [item.score for item in fused]
    assert all(0.0 <= score <= 1.0 for score in scores)
    assert scores == sorted(scores, reverse=True)
    assert len({item.id for item in fused}) == len(fused)
    assert {item.id for item in fused} == {item_id for ids in lists for item_id in ids}
    # Min-max over the returned items (seed 004 "normalized scores", issue 18): the best scores 1.0 and
    # the last 0.0, unless all tie (0.0 each) or a single item is returned (1.0 when its sum is > 0).
    raw = [item.metadata["rrf_raw_score"] for item in fused]
    if len(fused) == 1:
        assert scores == [1.0 if raw[0] > 0 else 0.0]
    elif len(fused) > 1 and raw[0] > raw[-1]:
        assert (scores[0], scores[-1]) == (1.0, 0.0)
        assert scores == pytest.approx([(r - raw[-1]) / (raw[0] - raw[-1]) for r in raw], rel=1e-12, abs=1e-12)
    else:
        assert set(scores) <= {0.0}


@SETTINGS
@given(lists=ranked_lists, top_k=st.integers(0, 15))
def test_rrf_fuse_top_k_is_a_prefix_of_the_full_fusion(lists, top_k):
    full = fuse(lists)
    cut = fuse(lists, top_k=top_k)
    assert len(cut) == min(top_k, len(full))
    assert [item.id for item in cut] == [item.id for item in full][:top_k]
    # the raw sums do not depend on the cut; the normalised scores are over the cut's own range
    assert [i.metadata["rrf_raw_score"] for i in cut] == [i.metadata["rrf_raw_score"] for i in full][:top_k]
    if len(cut) > 1 and cut[0].metadata["rrf_raw_score"] > cut[-1].metadata["rrf_raw_score"]:
        assert cut[-1].score == 0.0


# --- zerda HybridRetriever -------------------------------------------------------------------------

WORDS = ["sand", "fox", "dune", "night", "water", "oasis"]
texts = st.lists(st.sampled_from(WORDS), min_size=0, max_size=6).map(" ".join)
# Upper/lower case and extra spaces make different strings with the same content hash.
spellings = st.tuples(texts, st.sampled_from([str, str.upper, str.title]), st.sampled_from([" ", "  "]))


def embed(text: str) -> np.ndarray:
    """A deterministic bag-of-words vector: the hybrid only needs some embed_fn."""
    vector = np.zeros(len(WORDS) + 1)
    for token in text.lower().split():
        vector[WORDS.index(token)] += 1.0
    vector[-1] = int(hashlib.sha256(text.lower().encode()).hexdigest()[:4], 16) / 65536.0
    return vector


def hybrid(chunks: list[DocumentChunk], rrf_order: str, weights: tuple[float, float, float]):
    config = ContextEngineConfig(
        RetrieverConfig(
            vector_weight=weights[0],
            keyword_weight=weights[1],
            metadata_weight=weights[2],
            rrf_order=rrf_order,
            min_vector_score=-1.0,
        )
    )
    vector = VectorRetriever(config)
    vector.index_chunks(chunks, embed)
    keyword = KeywordRetriever(config, chunks)
    return HybridRetriever(config, vector_retriever=vector, keyword_retriever=keyword)


corpora = st.lists(spellings, min_size=1, max_size=12).map(
    lambda rows: [
        DocumentChunk(text=case(text).replace(" ", gap), doc_id=f"d{i}") for i, (text, case, gap) in enumerate(rows)
    ]
)
weight_triples = st.tuples(*[st.floats(0.0, 1.0, allow_nan=False)] * 3)


@SETTINGS
@given(
    chunks=corpora,
    query=texts,
    top_k=st.integers(1, 15),
    rrf_order=st.sampled_from(["as_documented", "fixed"]),
)
def test_hybrid_never_returns_a_chunk_twice(chunks, query, top_k, rrf_order):
    results = hybrid(chunks, rrf_order, (0.6, 0.3, 0.1)).retrieve(query, top_k=top_k)
    hashes = [hit.content_hash for hit in results]
    assert len(hashes) == len(set(hashes))
    assert len({id(hit.chunk) for hit in results}) == len(results)
    assert len(results) <= min(top_k, len({normalized_text_sha256(chunk.text) for chunk in chunks}))
    composites = [hit.composite_score for hit in results]
    assert composites == sorted(composites, reverse=True)


@SETTINGS
@given(chunks=corpora, query=texts, weights=weight_triples)
def test_hybrid_as_documented_composite_is_the_pure_weighted_sum(chunks, query, weights):
    for hit in hybrid(chunks, "as_documented", weights).retrieve(query, top_k=10):
        expected = hit.vector_score * weights[0] + hit.keyword_score * weights[1] + hit.metadata_score * weights[2]
        assert hit.composite_score == pytest.approx(expected, rel=1e-12, abs=1e-15)


@SETTINGS
@given(chunks=corpora, query=texts, weights=weight_triples)
def test_hybrid_fixed_composite_adds_the_rrf_bonus(chunks, query, weights):
    # top_k = corpus size: every merged chunk comes back, so the max over the results is the seed's
    # max over all merged chunks (with a smaller top_k the best-RRF chunk may be cut off: found by hypothesis)
    results = hybrid(chunks, "fixed", weights).retrieve(query, top_k=len(chunks))
    if not results:
        return
    max_rrf = max(hit.rrf_score for hit in results)
    for hit in results:
        weighted = hit.vector_score * weights[0] + hit.keyword_score * weights[1] + hit.metadata_score * weights[2]
        bonus = HybridRetriever.RRF_BONUS_WEIGHT * hit.rrf_score / max_rrf
        assert hit.composite_score == pytest.approx(weighted + bonus, rel=1e-12, abs=1e-15)
