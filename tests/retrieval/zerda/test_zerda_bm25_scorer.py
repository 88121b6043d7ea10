"""BM25Scorer: the seed's formula and tokenizer, by hand in English and Arabic, and against bm25s."""

import csv
import math

import numpy as np
import pytest

from retrieval.zerda import BM25Scorer


def _term(idf: float, tf: int, length: int, avgdl: float, k1: float, b: float) -> float:
    """One term's BM25 contribution, written out from the seed formula."""
    return idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * length / avgdl))


@pytest.mark.parametrize(("k1", "b"), [(1.5, 0.75), (1.2, 0.4)])
def test_english_three_documents_by_hand(k1, b):
    docs = [
        "The cat sat on the mat.",  # the cat sat on the mat -> 6 tokens
        "A dog sat.",  # "a" dropped -> dog sat -> 2 tokens
        "Cat and dog; CAT again!",  # cat and dog cat again -> 5 tokens
    ]
    scorer = BM25Scorer(k1=k1, b=b)
    scorer.index(docs)
    avgdl = (6 + 2 + 5) / 3
    idf_cat = math.log((3 - 2 + 0.5) / (2 + 0.5) + 1)  # in docs 0 and 2
    idf_sat = math.log((3 - 2 + 0.5) / (2 + 0.5) + 1)  # in docs 0 and 1
    expected = {  # "cat" is in the query twice: its term score counts twice (issue 18.1)
        0: 2 * _term(idf_cat, 1, 6, avgdl, k1, b) + _term(idf_sat, 1, 6, avgdl, k1, b),
        1: _term(idf_sat, 1, 2, avgdl, k1, b),
        2: 2 * _term(idf_cat, 2, 5, avgdl, k1, b),
    }
    ranked = scorer.score("Cat cat SAT?")
    assert [doc for doc, _ in ranked] == sorted(expected, key=expected.get, reverse=True)
    assert dict(ranked) == pytest.approx(expected, rel=1e-12)
    assert scorer._avg_dl == pytest.approx(avgdl)
    assert scorer._corpus[1] == ["dog", "sat"]


def test_arabic_three_documents_by_hand():
    docs = [
        "الطاقة الشمسية مصدر نظيف",  # 4 tokens
        "الطاقة النووية والطاقة الشمسية الحديثة",  # 5 tokens; "والطاقة" is its own token
        "الرياح مصدر آخر للطاقة و الطاقة الطاقة",  # "و" dropped -> 6 tokens, tf(الطاقة) = 2
    ]
    scorer = BM25Scorer()
    scorer.index(docs)
    k1, b, avgdl = 1.5, 0.75, (4 + 5 + 6) / 3
    idf_energy = math.log((3 - 3 + 0.5) / (3 + 0.5) + 1)  # الطاقة: every document
    idf_solar = math.log((3 - 2 + 0.5) / (2 + 0.5) + 1)  # الشمسية: docs 0 and 1
    expected = {
        0: _term(idf_energy, 1, 4, avgdl, k1, b) + _term(idf_solar, 1, 4, avgdl, k1, b),
        1: _term(idf_energy, 1, 5, avgdl, k1, b) + _term(idf_solar, 1, 5, avgdl, k1, b),
        2: _term(idf_energy, 2, 6, avgdl, k1, b),
    }
    ranked = scorer.score("الطاقة الشمسية")
    assert [doc for doc, _ in ranked] == sorted(expected, key=expected.get, reverse=True)
    assert dict(ranked) == pytest.approx(expected, rel=1e-12)
    assert scorer._idf["الطاقة"] == pytest.approx(idf_energy)
    # Seed tokenizer quirk: "الشمسية؟" keeps its Arabic question mark, so it matches nothing.
    assert dict(scorer.score("الطاقة الشمسية؟")) == pytest.approx(
        {i: _term(idf_energy, tf, n, avgdl, k1, b) for i, tf, n in [(0, 1, 4), (1, 1, 5), (2, 2, 6)]}
    )


def test_score_before_index_and_on_empty_index_is_empty():
    scorer = BM25Scorer()
    assert scorer.score("anything") == []
    scorer.index([])
    assert scorer._corpus == [] and scorer._idf == {} and scorer._avg_dl == 0.0
    assert scorer.score("anything") == []


def test_index_replaces_previous_state():
    scorer = BM25Scorer()
    scorer.index(["alpha beta", "beta gamma"])
    scorer.index(["delta epsilon zeta"])
    assert scorer._corpus == [["delta", "epsilon", "zeta"]]
    assert set(scorer._idf) == {"delta", "epsilon", "zeta"}
    assert scorer._avg_dl == 3.0
    assert scorer.score("beta") == [(0, 0.0)]
    scorer.index([])
    assert scorer.score("delta") == []


def test_top_k_truncates_and_keeps_zero_score_documents_in_index_order():
    scorer = BM25Scorer()
    scorer.index(["red apple", "green pear", "red red cherry", "blue plum"])
    ranked = scorer.score("red", top_k=3)
    assert [doc for doc, _ in ranked] == [2, 0, 1]  # docs 1 and 3 score 0: lower index first
    assert ranked[2][1] == 0.0
    assert len(scorer.score("red")) == 4  # default top_k=20 > corpus


def test_parity_with_bm25s_on_arabic_quran_passages(shared_dir):
    """Same tokens to both; bm25s "lucene" = seed idf, tf part without (k1 + 1): scores differ by 2.5."""
    import bm25s

    from retrieval.core import tokenize

    folder = shared_dir / "datasets" / "quranqa23-taskA"
    with (folder / "QQA23_TaskA_QPC_v1.1.tsv").open(encoding="utf-8") as rows:
        passages = [row[1] for row in csv.reader(rows, delimiter="\t", quoting=csv.QUOTE_NONE)]
    with (folder / "QQA23_TaskA_dev.tsv").open(encoding="utf-8") as rows:
        questions = [row[1] for row in csv.reader(rows, delimiter="\t", quoting=csv.QUOTE_NONE)]
    assert len(passages) == 1266 and len(questions) >= 20
    scorer = BM25Scorer()
    scorer.index(passages)
    reference = bm25s.BM25(method="lucene", k1=1.5, b=0.75, dtype="float64")
    reference.index([tokenize(passage) for passage in passages], show_progress=False)
    for question in questions:
        tokens = [t for t in tokenize(question) if t in scorer._idf]  # repeats kept: both sum them
        if not tokens:
            continue
        theirs = 2.5 * reference.get_scores(tokens)
        ours = scorer.score(question, top_k=len(passages))
        np.testing.assert_allclose([score for _, score in sorted(ours)], theirs, rtol=1e-9, atol=1e-12)
        their_top = np.lexsort((np.arange(len(theirs)), -theirs))[:10].tolist()
        assert [doc for doc, _ in ours[:10]] == their_top, question
