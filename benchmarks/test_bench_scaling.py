"""How SparseBM25 grows: 10k, 100k (and, with ZERDA_BENCH_1M=1, 1M) synthetic Zipfian passages.

Passages draw 20-80 tokens from a 200,000-word vocabulary with Zipf(1.1) frequencies (so a few words
are in most passages, as real stopwords are); queries draw 3-10 words the same way. Reported: index
time, batched and single-query latency, and index bytes per passage (saved, and in memory), beside bm25s's.
"""

from __future__ import annotations

import itertools
import os

import numpy as np
import pytest

from benchmarks.conftest import QUICK, same_top_k
from retrieval.core.bm25_fast import SparseBM25

VOCABULARY = np.array([f"w{i}" for i in range(200_000)], dtype=object)
SIZES = (
    [10_000]  # quick mode (ZERDA_BENCH_QUICK=1): the small size only
    if QUICK
    else [
        10_000,
        100_000,
        pytest.param(
            1_000_000,
            marks=pytest.mark.skipif(
                os.environ.get("ZERDA_BENCH_1M") != "1",
                reason="set ZERDA_BENCH_1M=1 (needs ~4 GB RAM, a few minutes)",
            ),
        ),
    ]
)
N_QUERIES, K = 200, 10


def zipf_token_lists(rng: np.random.Generator, n: int, low: int, high: int) -> list[list[str]]:
    lengths = rng.integers(low, high + 1, size=n)
    ranks = rng.zipf(1.1, size=int(lengths.sum())) - 1
    words = VOCABULARY[ranks[ranks < len(VOCABULARY)]].tolist()  # token strings shared, not copied
    bounds = np.concatenate([[0], np.cumsum(lengths)])
    return [words[bounds[i] : bounds[i + 1]] for i in range(n)]


@pytest.fixture(scope="module", params=SIZES, ids=lambda n: f"{n:,}")
def synthetic(request: pytest.FixtureRequest) -> tuple[list[list[str]], list[list[str]]]:
    rng = np.random.default_rng(request.param)
    return zipf_token_lists(rng, request.param, 20, 80), zipf_token_lists(rng, N_QUERIES, 3, 10)


def test_index_time(timed, synthetic, peer) -> None:
    """Index time; bytes per passage beside bm25s's (same postings on both sides)."""
    corpus, _ = synthetic
    index = timed(
        f"scaling: index {len(corpus):,}",
        "ours SparseBM25.fit",
        lambda: SparseBM25().fit(corpus),
        units=len(corpus),
        unit="doc",
        rounds=1,
        warmup=False,
    )
    theirs = sum(peer.scores[name].nbytes for name in ("data", "indices", "indptr"))
    assert len(peer.scores["data"]) == len(index.doc_ids)  # one posting per (term, passage) on both sides
    print(
        f"\n{len(corpus):,} passages, {len(index.idf):,} terms: ours {index.nbytes / len(corpus):.0f} index "
        f"bytes/passage saved ({index.memory_nbytes / len(corpus):.0f} in memory), "
        f"bm25s {theirs / len(corpus):.0f}: {theirs / index.nbytes:.2f}x"
    )


@pytest.fixture(scope="module")
def index(synthetic) -> SparseBM25:
    return SparseBM25().fit(synthetic[0])


@pytest.fixture(scope="module")
def peer(synthetic):
    import bm25s

    retriever = bm25s.BM25(k1=1.5, b=0.75, method="lucene", backend="numba")
    retriever.index(synthetic[0], show_progress=False)
    return retriever


def one_by_one(search, queries: list[list[str]]) -> list:
    return [search(query) for query in queries]


def checked_queries(index: SparseBM25, peer, queries: list[list[str]]) -> list[list[str]]:
    """The non-empty queries (bm25s rejects an empty one), once both sides agree on every one (checked).

    bm25s scores in float32 and orders ties its own way: its top-k must be ours up to rows whose scores
    tie within float32 precision (``same_top_k``), on every query.
    """
    queries = [query for query in queries if query]
    ours = index.top_k_batch(queries, K)[0]
    theirs = peer.retrieve(queries, k=K, show_progress=False, n_threads=0)[0]
    differ = [
        i
        for i, (a, b) in enumerate(zip(ours, theirs, strict=True))
        if not same_top_k(b, a, index.scores(queries[i]), 1e-6)
    ]
    assert differ == [], f"bm25s and SparseBM25 differ on {len(differ)} of {len(queries)} top-{K} lists"
    return queries


@pytest.mark.parametrize("system", ["ours SparseBM25.top_k_batch", "bm25s retrieve (numba, 1 thread)"])
@pytest.mark.parametrize("batch", [N_QUERIES, 1], ids=["batched", "one query per call"])
def test_query_latency(timed, synthetic, index: SparseBM25, peer, batch: int, system: str) -> None:
    """Top-10 of 200 queries, in one call or one call per query (the path a grid times); same lists on both sides."""
    corpus, queries = synthetic
    queries = checked_queries(index, peer, queries)
    if system.startswith("ours"):
        run = (
            (lambda: index.top_k_batch(queries, K))
            if batch > 1
            else (lambda: one_by_one(lambda q: index.top_k_batch([q], K), queries))
        )
        role = "ours"
    else:
        run = (
            (lambda: peer.retrieve(queries, k=K, show_progress=False, n_threads=0))
            if batch > 1
            else (lambda: one_by_one(lambda q: peer.retrieve([q], k=K, show_progress=False, n_threads=0), queries))
        )
        role = "peer"
    mode = "batched" if batch > 1 else "one query per call"
    timed(f"scaling: top-{K} over {len(corpus):,}, {mode}", system, run, units=len(queries), role=role, rounds=5)


@pytest.mark.parametrize("system", ["ours SparseBM25.top_k_batch", "bm25s retrieve (numba, 1 thread)"])
def test_query_latency_median(timed, synthetic, index: SparseBM25, peer, system: str) -> None:
    """p50 of single-query latency: each round is one query (the queries in turn, three passes), median compared."""
    corpus, queries = synthetic
    queries = checked_queries(index, peer, queries)
    turn = itertools.cycle(queries)
    if system.startswith("ours"):
        run, role = (lambda: index.top_k_batch([next(turn)], K)), "ours"
    else:
        run, role = (lambda: peer.retrieve([next(turn)], k=K, show_progress=False, n_threads=0)), "peer"
    group = f"scaling: top-{K} over {len(corpus):,}, p50 of one query per call"
    timed(group, system, run, units=1, role=role, rounds=3 * len(queries), warmup=False, stat="median")
