"""BM25 on SciFact (5,183 docs, the 300 test queries): index time and query throughput, ours vs peers.

Every system gets the same ``retrieval.core.tokenize`` tokens, so tokenisation is outside the timings.
Targets: reference ``BM25Index.scores`` >= 1.0x ``rank_bm25`` ``get_scores``; ``SparseBM25.top_k_batch``
>= 1.0x ``bm25s`` ``retrieve`` (numba backend, its fastest, serial and on every core).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from benchmarks.conftest import same_top_k
from retrieval.core import BM25Index, tokenize
from retrieval.core.bm25_fast import SparseBM25

K = 10


@pytest.fixture(scope="module")
def scifact() -> tuple[list[list[str]], list[list[str]]]:
    from zerda_eval.datasets import load_collection

    collection = load_collection("beir/scifact/test")
    return [tokenize(text) for text in collection.texts], [tokenize(q) for q in collection.queries.values()]


def bm25s_index(corpus: list[list[str]], backend: str) -> Any:
    import bm25s

    retriever = bm25s.BM25(k1=1.5, b=0.75, method="lucene", backend=backend)
    retriever.index(corpus, show_progress=False)
    return retriever


def rank_bm25_index(corpus: list[list[str]]) -> Any:
    import rank_bm25

    return rank_bm25.BM25Okapi(corpus, k1=1.5, b=0.75)


INDEXERS: dict[str, Callable[[list[list[str]]], Any]] = {
    "ours BM25Index.fit": lambda corpus: BM25Index().fit(corpus),
    "ours SparseBM25.fit": lambda corpus: SparseBM25().fit(corpus),
    "rank_bm25 BM25Okapi()": rank_bm25_index,
    "bm25s index (numba)": lambda corpus: bm25s_index(corpus, "numba"),
}


@pytest.mark.parametrize("system", INDEXERS)
def test_bm25_index_time(timed, scifact, system: str) -> None:
    corpus, _ = scifact
    role = "ours" if system.startswith("ours") else "peer"
    build = INDEXERS[system]
    timed(
        "bm25 index, SciFact",
        system,
        lambda: build(corpus),
        units=len(corpus),
        unit="doc",
        role=role,
        rounds=3,
    )


@pytest.mark.parametrize("system", ["ours BM25Index.scores", "rank_bm25 get_scores"])
def test_bm25_full_scoring(timed, scifact, system: str) -> None:
    """Score every document for each query, one query at a time (the reference's job)."""
    corpus, queries = scifact
    if system.startswith("ours"):
        score, role = BM25Index().fit(corpus).scores, "ours"
    else:
        score, role = rank_bm25_index(corpus).get_scores, "peer"
    # Pure Python on both sides: nothing to warm up, and one round of 300 queries is long enough.
    timed(
        "bm25 score all docs, 300 SciFact queries",
        system,
        lambda: [score(q) for q in queries],
        units=len(queries),
        role=role,
        rounds=1,
        warmup=False,
    )


@pytest.mark.parametrize(
    "system",
    [
        "ours SparseBM25.top_k_batch",
        "bm25s retrieve (numba, 1 thread)",
        "bm25s retrieve (numba, all cores)",
        "bm25s retrieve (numpy)",
    ],
)
def test_bm25_top_k_batch(timed, scifact, system: str) -> None:
    """Top-10 of all 300 queries in one call."""
    corpus, queries = scifact
    if system.startswith("ours"):
        index = SparseBM25().fit(corpus)
        run, role = (lambda: index.top_k_batch(queries, K)), "ours"
    else:
        retriever = bm25s_index(corpus, "numpy" if "numpy" in system else "numba")
        threads = -1 if "all cores" in system else 0
        run, role = (lambda: retriever.retrieve(queries, k=K, show_progress=False, n_threads=threads)), "peer"
    timed("bm25 top-10, 300 SciFact queries batched", system, run, units=len(queries), role=role, rounds=20)


@pytest.mark.parametrize("system", ["ours SparseBM25.top_k_batch", "bm25s retrieve (numba, 1 thread)"])
def test_bm25_top_k_one_query_per_call(timed, scifact, system: str) -> None:
    """Top-10 of the 300 queries, one call per query: the path a grid times. Both sides return the same lists."""
    corpus, queries = scifact
    queries = [q for q in queries if q]
    index, peer, reference = SparseBM25().fit(corpus), bm25s_index(corpus, "numba"), BM25Index().fit(corpus)
    ours = [index.top_k_batch([q], K)[0][0] for q in queries]
    theirs = [peer.retrieve([q], k=K, show_progress=False, n_threads=0)[0][0] for q in queries]
    # Every query: the reference's exact list, and bm25s's top-10 up to ties within its float32 scores.
    assert [row.tolist() for row in ours] == [[d for d, _ in reference.top_k(q, K)] for q in queries]
    differ = [q for q, a, b in zip(queries, ours, theirs, strict=True) if not same_top_k(b, a, index.scores(q), 1e-6)]
    assert differ == [], f"bm25s's top-{K} differs on {len(differ)} of {len(queries)} queries"
    if system.startswith("ours"):
        run, role = (lambda: [index.top_k_batch([q], K) for q in queries]), "ours"
    else:
        run, role = (lambda: [peer.retrieve([q], k=K, show_progress=False, n_threads=0) for q in queries]), "peer"
    timed("bm25 top-10, 300 SciFact queries, one per call", system, run, units=len(queries), role=role, rounds=10)
