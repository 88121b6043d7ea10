"""How SparseBM25 grows: 10k, 100k, 200k (and, with ZERDA_BENCH_1M=1, 1M) passages of both BM25 corpora.

The corpora (``bm25_corpora``): Zipf-synthetic passages and queries, and passages of two real SciFact
sentences with SciFact's real claims as queries, stopwords included. Reported: index time, batched and
single-query latency, and index bytes per passage (saved, and in memory), beside bm25s's (numba, one
thread). The p95 / p99 table comes from ``bench_bm25_latency.py``.
"""

from __future__ import annotations

import itertools
import os

import pytest

from benchmarks.bm25_corpora import CORPORA, passages, queries
from benchmarks.conftest import QUICK, same_top_k
from retrieval.core.bm25_fast import SparseBM25

LARGE = pytest.mark.skipif(
    os.environ.get("ZERDA_BENCH_1M") != "1", reason="set ZERDA_BENCH_1M=1 (needs ~6 GB RAM, a few minutes)"
)
SIZES = [10_000] if QUICK else [10_000, 100_000, 200_000, 1_000_000]  # quick mode (CI): the small size only
CASES = [
    pytest.param((corpus, n), id=f"{corpus}-{n:,}", marks=[LARGE] if n >= 1_000_000 else [])
    for n in SIZES
    for corpus in CORPORA
]
N_QUERIES, K = 200, 10


@pytest.fixture(scope="module", params=CASES)
def case(request: pytest.FixtureRequest) -> tuple[str, list[list[str]], list[list[str]]]:
    """``(label, passages, queries)`` of one corpus at one size; the label names both in every timing group."""
    corpus, n = request.param
    return f"{corpus} {n:,}", list(passages(corpus, n, n)), queries(corpus, N_QUERIES, n + 1)


def test_index_time(timed, case, peer) -> None:
    """Index time; bytes per passage beside bm25s's (same postings on both sides)."""
    label, corpus, _ = case
    index = timed(
        f"scaling: index {label}",
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
def index(case) -> SparseBM25:
    return SparseBM25().fit(case[1])


@pytest.fixture(scope="module")
def peer(case):
    import bm25s

    retriever = bm25s.BM25(k1=1.5, b=0.75, method="lucene", backend="numba")
    retriever.index(case[1], show_progress=False)
    return retriever


def one_by_one(search, queries: list[list[str]]) -> list:
    return [search(query) for query in queries]


def checked_queries(index: SparseBM25, peer, asked: list[list[str]]) -> list[list[str]]:
    """The non-empty queries (bm25s rejects an empty one), once both sides agree on every one (checked).

    bm25s scores in float32 and orders ties its own way: its top-k must be ours up to rows whose scores
    tie within float32 precision (``same_top_k``), on every query.
    """
    asked = [query for query in asked if query]
    ours = index.top_k_batch(asked, K)[0]
    theirs = peer.retrieve(asked, k=K, show_progress=False, n_threads=0)[0]
    differ = [
        i
        for i, (a, b) in enumerate(zip(ours, theirs, strict=True))
        if not same_top_k(b, a, index.scores(asked[i]), 1e-6)
    ]
    assert differ == [], f"bm25s and SparseBM25 differ on {len(differ)} of {len(asked)} top-{K} lists"
    return asked


@pytest.mark.parametrize("system", ["ours SparseBM25.top_k_batch", "bm25s retrieve (numba, 1 thread)"])
@pytest.mark.parametrize("batch", [N_QUERIES, 1], ids=["batched", "one query per call"])
def test_query_latency(timed, case, index: SparseBM25, peer, batch: int, system: str) -> None:
    """Top-10 of the queries, in one call or one call per query (the path a grid times); same lists on both sides."""
    label, _, asked = case
    asked = checked_queries(index, peer, asked)
    if system.startswith("ours"):
        run = (
            (lambda: index.top_k_batch(asked, K))
            if batch > 1
            else (lambda: one_by_one(lambda q: index.top_k_batch([q], K), asked))
        )
        role = "ours"
    else:
        run = (
            (lambda: peer.retrieve(asked, k=K, show_progress=False, n_threads=0))
            if batch > 1
            else (lambda: one_by_one(lambda q: peer.retrieve([q], k=K, show_progress=False, n_threads=0), asked))
        )
        role = "peer"
    mode = "batched" if batch > 1 else "one query per call"
    timed(f"scaling: top-{K} over {label}, {mode}", system, run, units=len(asked), role=role, rounds=5)


@pytest.mark.parametrize("system", ["ours SparseBM25.top_k_batch", "bm25s retrieve (numba, 1 thread)"])
def test_query_latency_median(timed, case, index: SparseBM25, peer, system: str) -> None:
    """p50 of single-query latency: each round is one query (the queries in turn, three passes), median compared."""
    label, _, asked = case
    asked = checked_queries(index, peer, asked)
    turn = itertools.cycle(asked)
    if system.startswith("ours"):
        run, role = (lambda: index.top_k_batch([next(turn)], K)), "ours"
    else:
        run, role = (lambda: peer.retrieve([next(turn)], k=K, show_progress=False, n_threads=0)), "peer"
    group = f"scaling: top-{K} over {label}, p50 of one query per call"
    timed(group, system, run, units=1, role=role, rounds=3 * len(asked), warmup=False, stat="median")
