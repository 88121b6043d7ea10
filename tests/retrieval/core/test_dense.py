"""DenseIndex must return the top-k of the reference ``retrieval.core.cosine``, ties by lower index."""

from __future__ import annotations

import heapq

import numpy as np
import pytest

from retrieval.core import cosine
from retrieval.core.dense import DenseIndex, top_k_rows


def reference_top_k(docs: np.ndarray, query: np.ndarray, k: int) -> list[tuple[int, float]]:
    """Brute force with the project's one cosine; ``heapq.nlargest`` keeps ties in index order."""
    scores = [cosine(query, doc) for doc in docs]
    best = heapq.nlargest(k, range(len(docs)), key=scores.__getitem__)
    return [(index, scores[index]) for index in best]


@pytest.fixture(scope="module")
def vectors() -> tuple[np.ndarray, np.ndarray]:
    """400 docs x 24 dims with zero rows (ties at 0.0), 30 queries incl. a zero one and a copy of a doc."""
    rng = np.random.default_rng(7)
    docs = rng.normal(size=(400, 24)).astype(np.float32)
    docs[[5, 77, 300]] = 0.0
    queries = rng.normal(size=(30, 24)).astype(np.float32)
    queries[3] = 0.0
    queries[4] = docs[10]
    return docs, queries


@pytest.mark.parametrize("backend", ["numpy", "faiss"])
@pytest.mark.parametrize("k", [1, 3, 10, 400, 1000])
def test_top_k_equals_reference_cosine(vectors, backend: str, k: int) -> None:
    docs, queries = vectors
    indices, scores = DenseIndex(docs, backend=backend).search(queries, k)
    assert indices.shape == scores.shape == (len(queries), min(k, len(docs)))
    for row, query in enumerate(queries):
        expected = reference_top_k(docs, query, k)
        np.testing.assert_allclose(scores[row], [score for _, score in expected], atol=1e-5)
        if backend == "numpy" or row != 3:  # FAISS picks its own rows among ties at the cut
            assert indices[row].tolist() == [index for index, _ in expected], f"query {row}"


@pytest.mark.parametrize("backend", ["numpy", "faiss"])
def test_duplicate_rows_rank_by_their_reference_score(vectors, backend: str) -> None:
    """BLAS may round identical rows a hair apart, so duplicates are checked by score, not position."""
    docs, queries = vectors
    docs = docs.copy()
    docs[[200, 350]] = docs[10]
    indices, _ = DenseIndex(docs, backend=backend).search(queries, 50)
    for row, query in enumerate(queries[:10]):
        got = [cosine(query, docs[index]) for index in indices[row]]
        np.testing.assert_allclose(got, [score for _, score in reference_top_k(docs, query, 50)], atol=1e-6)
    assert {10, 200, 350} <= set(indices[4, :3].tolist())


def test_zero_query_scores_zero_and_takes_lowest_indices(vectors) -> None:
    docs, _ = vectors
    indices, scores = DenseIndex(docs, backend="numpy").search(np.zeros((1, 24), dtype=np.float32), 4)
    assert indices.tolist() == [[0, 1, 2, 3]]
    assert scores.tolist() == [[0.0] * 4]


def test_top_k_rows_breaks_ties_at_the_cut_by_lower_index() -> None:
    scores = np.array([[0.5, 0.9, 0.5, 0.5, 0.1, 0.9], [0.0, 0.0, 0.0, 0.0, 0.0, 0.0]])
    indices, values = top_k_rows(scores, 3)
    assert indices.tolist() == [[1, 5, 0], [0, 1, 2]]
    assert values.tolist() == [[0.9, 0.9, 0.5], [0.0, 0.0, 0.0]]


@pytest.mark.parametrize("distinct", [3, 40, None])  # heavy ties (crowded rows), some ties, continuous
@pytest.mark.parametrize("k", [1, 7, 64, 500])
def test_top_k_rows_equals_heapq_nlargest_per_row(distinct: int | None, k: int) -> None:
    rng = np.random.default_rng(k)
    shape = (50, 500)
    scores = rng.random(shape) if distinct is None else rng.integers(0, distinct, size=shape) / distinct
    scores = scores.astype(np.float32)
    scores[7] = 0.0  # a flat row
    indices, values = top_k_rows(scores, k)
    for row in range(shape[0]):
        best = heapq.nlargest(k, range(shape[1]), key=scores[row].__getitem__)
        assert indices[row].tolist() == best, row
        assert values[row].tolist() == scores[row, best].tolist()


def test_auto_uses_faiss_when_installed(vectors) -> None:
    assert DenseIndex(vectors[0]).backend == "faiss"


@pytest.mark.parametrize("backend", ["numpy", "faiss"])
def test_add_continues_row_indices(vectors, backend: str) -> None:
    docs, queries = vectors
    index = DenseIndex(docs[:150], backend=backend)
    index.add(docs[150:])
    whole = DenseIndex(docs, backend=backend)
    assert len(index) == len(docs)
    np.testing.assert_array_equal(index.search(queries, 5)[0], whole.search(queries, 5)[0])


def test_non_positive_k_gives_empty_rows(vectors) -> None:
    docs, queries = vectors
    indices, scores = DenseIndex(docs, backend="numpy").search(queries, 0)
    assert indices.shape == scores.shape == (len(queries), 0)


def test_errors_name_the_problem(vectors) -> None:
    docs, _ = vectors
    with pytest.raises(ValueError, match="backend must be one of"):
        DenseIndex(docs, backend="annoy")
    with pytest.raises(ValueError, match="24-dimensional"):
        DenseIndex(docs, backend="numpy").search(np.ones((2, 8), dtype=np.float32), 3)


def test_faiss_backend_keeps_no_second_copy_of_the_vectors(vectors) -> None:
    """Issue 23: the rows live only inside FAISS's IndexFlatIP (the build was 0.27x of a raw IndexFlatIP)."""
    docs, queries = vectors
    index = DenseIndex(docs, backend="faiss")
    index.add(docs[:3])
    assert len(index) == len(docs) + 3 and index.vectors.size == 0
    reference = DenseIndex(np.concatenate([docs, docs[:3]]), backend="numpy")
    got, want = index.search(queries, 5), reference.search(queries, 5)
    np.testing.assert_allclose(got[1], want[1], rtol=0, atol=1e-5)
