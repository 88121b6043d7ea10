"""DenseIndex must return the top-k of the reference ``retrieval.core.cosine``, ties by lower index; exact search
in blocks over a memory map equals it in memory; FAISS's approximate indexes rebuild identically and trade recall."""

from __future__ import annotations

import heapq
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from retrieval.core import cosine
from retrieval.core.dense import (
    EXACT_BLOCK_ROWS,
    ApproximateIndex,
    DenseIndex,
    exact_top_k,
    normalize_rows,
    top_k_rows,
)
from retrieval.core.top_k import top_k_indices


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


# --- exact search in blocks (memory-mapped corpora) and approximate indexes --------------------------------


@settings(max_examples=300, deadline=None)
@given(
    st.integers(1, 60).flatmap(
        lambda n: st.tuples(
            st.lists(st.lists(st.integers(-3, 3), min_size=4, max_size=4), min_size=n, max_size=n),
            st.lists(st.lists(st.integers(-3, 3), min_size=4, max_size=4), min_size=1, max_size=4),
            st.integers(0, 70),
            st.integers(1, 70),
        )
    )
)
def test_exact_top_k_in_blocks_equals_heapq_on_exact_scores(case) -> None:
    """Small integer vectors: every inner product is exact in float32, ties are everywhere, any block size."""
    docs, queries, k, block_rows = case
    indices, scores = exact_top_k(np.array(docs, np.float32), np.array(queries, np.float32), k, block_rows)
    for row, query in enumerate(queries):
        reference = [sum(q * x for q, x in zip(query, doc, strict=True)) for doc in docs]
        best = top_k_indices(reference, k)
        assert indices[row].tolist() == best
        assert scores[row].tolist() == [reference[i] for i in best]


@pytest.fixture(scope="module")
def scifact_vectors(scifact) -> tuple[np.ndarray, np.ndarray]:
    """SciFact's 5,183 documents and 300 test claims as 64-d wordllama unit vectors (real text, real ties)."""
    from retrieval.embeddings import load_embedder

    embedder = load_embedder("wordllama", dim=64)
    claims = [scifact.queries[qid] for qid in scifact.test_query_ids]
    return normalize_rows(embedder.embed(scifact.texts)), normalize_rows(embedder.embed(claims))


@pytest.mark.parametrize("block_rows", [EXACT_BLOCK_ROWS, 1000, 777])
def test_memory_mapped_search_equals_in_memory_search_on_scifact(scifact_vectors, tmp_path, block_rows) -> None:
    docs, queries = scifact_vectors
    np.save(tmp_path / "docs.npy", docs)
    mapped = np.load(tmp_path / "docs.npy", mmap_mode="r")
    for k in (10, 1000):
        got, want = exact_top_k(mapped, queries, k, block_rows), exact_top_k(docs, queries, k, block_rows)
        np.testing.assert_array_equal(got[0], want[0])
        np.testing.assert_array_equal(got[1], want[1])
    # and the in-memory search is the exact top k: float64 scores, ties by lower index (heapq)
    reference = queries.astype(np.float64) @ docs.astype(np.float64).T
    indices, scores = want
    np.testing.assert_allclose(scores, np.take_along_axis(reference, indices, 1), rtol=0, atol=1e-6)
    for row in range(len(queries)):
        best = top_k_indices(reference[row].tolist(), 1000)
        gaps = np.diff(reference[row, best])
        clear = np.concatenate([[True], gaps < -1e-6]) & np.concatenate([gaps < -1e-6, [True]])  # no near tie
        assert indices[row][clear].tolist() == np.array(best)[clear].tolist()


def _resident_file_kb() -> int:
    """This process's resident pages of mapped files (``RssFile`` of /proc/self/status), in kB."""
    status = Path("/proc/self/status").read_text()
    return int(next(line.split()[1] for line in status.splitlines() if line.startswith("RssFile:")))


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="resident memory is read from Linux's /proc")
def test_memory_mapped_search_keeps_one_block_resident(tmp_path) -> None:
    """A 51 MB mapped corpus searched in 2 MB blocks: resident file pages grow by about a block, not the corpus.

    The control (one matrix product over the whole map) shows the measure sees mapped pages.
    """
    rows = normalize_rows(np.random.default_rng(3).normal(size=(200_000, 64)))
    np.save(tmp_path / "docs.npy", rows)
    del rows
    query = normalize_rows(np.ones((1, 64)))
    mapped = np.load(tmp_path / "docs.npy", mmap_mode="r")
    before = _resident_file_kb()
    exact_top_k(mapped, query, 100, block_rows=8192)
    assert _resident_file_kb() - before < 8_000
    control = np.load(tmp_path / "docs.npy", mmap_mode="r")
    before = _resident_file_kb()
    control @ query[0]
    assert _resident_file_kb() - before > 40_000


def _recall(found: np.ndarray, exact: np.ndarray) -> float:
    return float(np.mean([len(set(f.tolist()) & set(e.tolist())) / len(e) for f, e in zip(found, exact, strict=True)]))


@pytest.mark.parametrize(
    ("kind", "options"),
    [("ivf", {"nlist": 32}), ("ivfpq", {"nlist": 32, "pq_m": 8}), ("hnsw", {"hnsw_m": 16})],
)
def test_approximate_index_rebuilt_gives_identical_results(scifact_vectors, kind, options) -> None:
    docs, queries = scifact_vectors
    first = ApproximateIndex(kind, **options).build(docs).search(queries, 100)
    second = ApproximateIndex(kind, **options).build(docs).search(queries, 100)
    np.testing.assert_array_equal(first[0], second[0])
    np.testing.assert_array_equal(first[1], second[1])


def test_approximate_indexes_trade_recall_as_their_settings_say(scifact_vectors) -> None:
    """Exhaustive settings find exact search's top k; cheap ones lose some (measured against ``exact_top_k``)."""
    docs, queries = scifact_vectors
    exact, exact_scores = exact_top_k(docs, queries, 100)
    everything = ApproximateIndex("ivf", nlist=32, nprobe=32).build(docs)
    found, scores = everything.search(queries, 100)
    assert _recall(found, exact) == 1.0
    np.testing.assert_allclose(scores, exact_scores, rtol=0, atol=1e-5)
    few_lists = ApproximateIndex("ivf", nlist=32, nprobe=1).build(docs)
    assert _recall(few_lists.search(queries, 100)[0], exact) < 0.9
    few_lists.nprobe = 32  # a search-time setting: the next search uses it
    assert _recall(few_lists.search(queries, 100)[0], exact) == 1.0
    assert _recall(ApproximateIndex("hnsw", ef_search=400).build(docs).search(queries, 100)[0], exact) > 0.95


def test_approximate_index_pads_short_results_at_the_end(scifact_vectors) -> None:
    docs, queries = scifact_vectors
    index = ApproximateIndex("ivf", nlist=512, nprobe=1).build(docs)  # ~10 rows a list: fewer than k
    found, scores = index.search(queries[:20], 50)
    assert (found == -1).any()
    for row_found, row_scores in zip(found, scores, strict=True):
        real = row_found >= 0
        assert real.tolist() == sorted(real.tolist(), reverse=True)  # padding only at the end
        assert np.isneginf(row_scores[~real]).all() and (np.diff(row_scores[real]) <= 0).all()


def test_approximate_index_errors_name_the_parameter(scifact_vectors) -> None:
    docs, _ = scifact_vectors
    with pytest.raises(ValueError, match=r"nlist = 9000 is more than the corpus's 5183 vectors"):
        ApproximateIndex("ivf", nlist=9000).build(docs)
    with pytest.raises(ValueError, match=r"pq_m = 7 does not divide the vectors' dimension 64"):
        ApproximateIndex("ivfpq", nlist=8, pq_m=7).build(docs)
    with pytest.raises(ValueError, match=r"approximate index must be one of"):
        ApproximateIndex("lsh")
