"""Fusing two 300-query x 100-doc SciFact runs (CombSUM, CombMNZ, weighted sum; min-max), query by query.

Ours is ``zerda_eval.fusion.methods.fuse_runs`` called per query, as a grid cell calls it (each query's fusion is
timed for the latency columns); the peer is ranx's ``fuse`` (warm) on the same single-query runs, which
is what the harness called before. Both give the same numbers (``tests/zerda_eval/test_fusion.py``).
"""

from __future__ import annotations

import warnings

import pytest

from retrieval.core import tokenize
from retrieval.core.bm25_fast import SparseBM25

DEPTH = 100
RANX_METHOD = {"combsum": "sum", "combmnz": "mnz", "wsum": "wsum"}


@pytest.fixture(scope="module")
def two_runs() -> list[dict[str, list[tuple[str, float]]]]:
    """Two BM25 settings over the 300 SciFact test queries: overlapping, differently scored top-100s."""
    from zerda_eval.datasets import load_collection

    collection = load_collection("beir/scifact/test")
    tokens = [tokenize(text) for text in collection.texts]
    qids = list(collection.queries)
    runs = []
    for k1, b in ((1.5, 0.75), (0.6, 0.2)):
        index = SparseBM25(k1=k1, b=b).fit(tokens)
        docs, scores = index.top_k_batch([tokenize(collection.queries[q]) for q in qids], DEPTH)
        runs.append(
            {
                qid: [(collection.doc_ids[d], float(s)) for d, s in zip(docs[i], scores[i], strict=True)]
                for i, qid in enumerate(qids)
            }
        )
    return runs


@pytest.mark.parametrize("method", list(RANX_METHOD))
@pytest.mark.parametrize("system", ["ours fuse_runs", "ranx fuse"])
def test_fuse_query_by_query(timed, two_runs, method: str, system: str) -> None:
    params = {"weights": [0.3, 0.7]} if method == "wsum" else {}
    qids = list(two_runs[0])
    if system == "ours fuse_runs":
        from zerda_eval.fusion.methods import fuse_runs

        def fuse_all():  # type: ignore[no-untyped-def]
            return [fuse_runs(method, [{q: run[q]} for run in two_runs], score_norm="min-max", **params) for q in qids]

        role = "ours"
    else:
        from numba.core.errors import NumbaTypeSafetyWarning
        from ranx import Run, fuse

        def fuse_all():  # type: ignore[no-untyped-def]
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", NumbaTypeSafetyWarning)
                return [
                    fuse(
                        [Run({q: dict(run[q])}) for run in two_runs],
                        norm="min-max",
                        method=RANX_METHOD[method],
                        params=params,
                    )
                    for q in qids
                ]

        role = "peer"
    timed(f"fuse {method}, 300 SciFact queries one by one", system, fuse_all, units=len(qids), role=role, rounds=3)
