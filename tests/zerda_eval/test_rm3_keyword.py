"""RM3 as a ``zerda.keyword`` option: recorded as applied, the same run on both engines, off by default.

The algorithm itself is pinned by hand and against rank_bm25 in ``tests/retrieval/core/test_rm3.py``.
"""

from __future__ import annotations

from collections import Counter

import pytest

from retrieval.core import BM25Index
from retrieval.core.rm3 import RM3, expanded_query
from zerda_eval.datasets.collection import Collection
from zerda_eval.errors import ConfigError
from zerda_eval.systems import build_system, resolve_params


@pytest.fixture(scope="module")
def scifact_collection(scifact) -> Collection:
    queries = {qid: scifact.queries[qid] for qid in scifact.test_query_ids[:25]}
    return Collection(
        id="scifact-rm3",
        language="en",
        doc_ids=scifact.doc_ids,
        texts=scifact.texts,
        queries=queries,
        qrels={qid: {} for qid in queries},
        options={},
    )


def run(collection: Collection, params: dict, k: int = 50) -> dict:
    system = build_system("zerda.keyword", params)
    system.index(collection)
    return system.search(collection.queries, k)


def test_off_by_default_and_recorded_as_off():
    params = resolve_params("zerda.keyword", {})
    assert params["rm3"] is False
    assert [params[name] for name in ("fb_docs", "fb_terms", "original_query_weight")] == [None, None, None]


def test_on_records_the_values_applied():
    params = resolve_params("zerda.keyword", {"rm3": True, "fb_terms": 20})
    assert (params["fb_docs"], params["fb_terms"], params["original_query_weight"]) == (10, 20, 0.5)
    assert RM3() == RM3(10, 10, 0.5)  # the defaults filled in are rm3.py's


@pytest.mark.parametrize("option", ["fb_docs", "fb_terms", "original_query_weight"])
def test_an_rm3_option_without_rm3_is_refused_in_one_line(option):
    with pytest.raises(ConfigError, match=rf"^bm25\.params\.{option}: .*rm3 = true") as error:
        resolve_params("zerda.keyword", {option: 1}, "bm25.params")
    assert "\n" not in str(error.value)


def test_both_engines_give_the_same_expanded_run(scifact_collection):
    params = {"rm3": True, "stopwords": "english", "fb_docs": 5, "fb_terms": 15}
    reference = run(scifact_collection, {**params, "engine": "reference"})
    fast = run(scifact_collection, {**params, "engine": "fast"})
    for qid in reference:
        assert [doc for doc, _ in fast[qid]] == [doc for doc, _ in reference[qid]]
        assert [s for _, s in fast[qid]] == pytest.approx([s for _, s in reference[qid]], rel=1e-12)
    plain = run(scifact_collection, {"stopwords": "english", "engine": "fast"})
    changed = sum([d for d, _ in plain[q][:10]] != [d for d, _ in reference[q][:10]] for q in plain)
    assert changed >= len(plain) // 4  # the expansion is applied, not just recorded


def test_the_system_ranks_by_the_expanded_query(scifact_collection):
    """The run equals the weighted pass of the expanded query computed here from its parts (max-normalised)."""
    system = build_system("zerda.keyword", {"rm3": True, "original_query_weight": 0.3})
    system.index(scifact_collection)
    analyze = system.analysis(scifact_collection).analyzer()
    index = BM25Index().fit([analyze(text) for text in scifact_collection.texts])
    for text in list(scifact_collection.queries.values())[:10]:
        tokens = analyze(text)
        feedback = [(Counter(index.corpus[d]), s) for d, s in index.top_k(tokens, 10)]
        weights = expanded_query(tokens, feedback, RM3(original_query_weight=0.3))
        top = index.weighted_top_k(weights, 10)
        results, raw_top = system._scored(text, 10)
        assert [doc for doc, _ in results] == [scifact_collection.doc_ids[d] for d, _ in top]
        assert raw_top == pytest.approx(top[0][1], rel=1e-12)
