"""Evaluating a 300-query x 1,000-doc SciFact run (nDCG@10, MRR@10, R@100, MAP@100), objects built included.

Ours is ``zerda_eval.evaluation.measures.evaluate_run`` (tie-break, ranx objects, ranx evaluate); peers are
ranx from dicts (warm: numba already compiled) and ``pytrec_eval`` (its closest measures:
``ndcg_cut.10``, ``recip_rank`` (no cut-off), ``recall.100``, ``map_cut.100``).
Target: ours >= 1.0x pytrec_eval. 15 rounds each (fastest kept): single rounds of all three moved by up to 1.7x here.
"""

from __future__ import annotations

import pytest

from retrieval.core import tokenize
from retrieval.core.bm25_fast import SparseBM25

MEASURES = ["ndcg@10", "mrr@10", "recall@100", "map@100"]
TREC_MEASURES = {"ndcg_cut.10", "recip_rank", "recall.100", "map_cut.100"}
DEPTH = 1_000


@pytest.fixture(scope="module")
def run_and_qrels() -> tuple[dict[str, list[tuple[str, float]]], dict[str, dict[str, int]]]:
    """The BM25 run of the 300 SciFact test queries, 1,000 documents each, and their qrels."""
    from zerda_eval.datasets import load_collection

    collection = load_collection("beir/scifact/test")
    index = SparseBM25().fit([tokenize(text) for text in collection.texts])
    qids = list(collection.queries)
    docs, scores = index.top_k_batch([tokenize(collection.queries[qid]) for qid in qids], DEPTH)
    run = {
        qid: [(collection.doc_ids[d], float(s)) for d, s in zip(docs[row], scores[row], strict=True)]
        for row, qid in enumerate(qids)
    }
    return run, {qid: dict(docs) for qid, docs in collection.qrels.items()}


@pytest.mark.parametrize("system", ["ours evaluate_run", "ranx from dicts", "pytrec_eval"])
def test_evaluate_run(timed, run_and_qrels, system: str) -> None:
    run, qrels = run_and_qrels
    if system == "ours evaluate_run":
        from zerda_eval.evaluation.measures import evaluate_run

        evaluate, role = (lambda: evaluate_run(run, qrels, MEASURES)), "ours"
    elif system == "ranx from dicts":
        ranx = pytest.importorskip("ranx")
        as_dict = {qid: dict(results) for qid, results in run.items()}

        def evaluate():  # type: ignore[no-untyped-def]
            return ranx.evaluate(ranx.Qrels.from_dict(qrels), ranx.Run.from_dict(as_dict), MEASURES, threads=1)

        role = "peer"
    else:
        pytrec_eval = pytest.importorskip("pytrec_eval")

        def evaluate():  # type: ignore[no-untyped-def]
            as_dict = {qid: dict(results) for qid, results in run.items()}
            return pytrec_eval.RelevanceEvaluator(qrels, TREC_MEASURES).evaluate(as_dict)

        role = "peer"
    timed("evaluate 300 x 1000 SciFact run", system, evaluate, units=len(run), role=role, rounds=15)
