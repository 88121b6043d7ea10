"""Both SparseBM25 traversals (exhaustive, impact) against the reference BM25Index.

Hypothesis draws corpora with skewed vocabularies (a few words in most documents, as stopwords are), repeated
words in documents and queries, empty documents and queries, and ``k`` above the number of matches; tiny
blocks of impact sums put their boundaries everywhere. Each traversal must return the reference's top-k with
scores to 1e-12 relative, and both the very same arrays (one summation order, one tie rule: higher score first,
then lower document index). The impact traversal answers a query exhaustively when its integer sums can exclude
no document, and counts it so (``counted``).
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from retrieval.core import BM25Index
from retrieval.core.bm25_fast import (
    IMPACT_LEVELS,
    IMPACT_MAX_WORDS,
    IMPACT_TABLE_TF,
    TRAVERSALS,
    KernelIndex,
    SparseBM25,
    _scatter_impacts,
)

VOCAB = [f"t{i}" for i in range(12)]
# Zipf-like weights: t0 in most documents, t11 in few.
skewed_words = st.sampled_from(VOCAB[:2]) | st.sampled_from(VOCAB[:5]) | st.sampled_from(VOCAB)
documents = st.lists(skewed_words, max_size=12)
corpora = st.lists(documents, min_size=1, max_size=60)
queries = st.lists(skewed_words | st.just("unseen"), max_size=7)


def forced(corpus: list[list[str]], traversal: str, materialised: bool, impact_block: int = 3) -> SparseBM25:
    """An index of ``corpus`` that answers every query through ``traversal``, its impacts summed in tiny blocks."""
    index = SparseBM25(traversal=traversal)
    index.materialise_max_postings = 1 << 40 if materialised else 0
    index.impact_stream_docs = impact_block
    return index.fit(corpus)


def counted(index: SparseBM25, traversal: str, n_queries: int) -> bool:
    """Whether ``index`` counted its ``n_queries`` queries under ``traversal`` (the impact traversal: or under
    exhaustive, for the queries its sums could not prune)."""
    allowed = {traversal, "exhaustive"}
    return set(index.traversals) <= allowed and sum(index.traversals.values()) == n_queries


def assert_reference_top_k(docs: np.ndarray, scores: np.ndarray, reference: BM25Index, query: list[str], k: int):
    """``docs``/``scores`` are the reference's top k: scores to 1e-12 relative, the same documents except
    inside ties that the reference's own summation order breaks by a few ulps."""
    expected = reference.top_k(query, k)
    np.testing.assert_allclose(scores, [s for _, s in expected], rtol=1e-12, atol=0)
    all_scores = reference.scores(query)
    np.testing.assert_allclose([all_scores[d] for d in docs], scores, rtol=1e-12, atol=0)
    for position, (doc, score) in enumerate(expected):
        if all(abs(score - other) > 1e-12 * score for j, (_, other) in enumerate(expected) if j != position):
            assert docs[position] == doc


@settings(max_examples=60, deadline=None)
@given(
    corpus=corpora,
    batch=st.lists(queries, min_size=1, max_size=4),
    k=st.integers(1, 70),
    materialised=st.booleans(),
    impact_block=st.integers(1, 70),
)
def test_every_traversal_returns_the_reference_top_k(corpus, batch, k, materialised, impact_block):
    reference = BM25Index().fit(corpus)
    results = {}
    for traversal in TRAVERSALS:
        index = forced(corpus, traversal, materialised, impact_block)
        docs, scores = index.top_k_batch(batch, k)
        assert docs.shape == (len(batch), min(k, len(corpus)))
        assert counted(index, traversal, len(batch))
        for row, query in enumerate(batch):
            assert_reference_top_k(docs[row], scores[row], reference, query, k)
        results[traversal] = docs, scores
    for traversal in TRAVERSALS[1:]:  # one summation order, one tie rule: bit-identical
        assert np.array_equal(results[traversal][0], results["exhaustive"][0])
        assert np.array_equal(results[traversal][1], results["exhaustive"][1])


def zipf_corpus(seed: int, n_docs: int) -> tuple[list[list[str]], list[list[str]]]:
    rng = np.random.default_rng(seed)
    words = [f"w{i}" for i in range(2000)]

    def draw(n: int, low: int, high: int) -> list[list[str]]:
        return [[words[min(r, 1999)] for r in rng.zipf(1.2, size=rng.integers(low, high)) - 1] for _ in range(n)]

    return draw(n_docs, 5, 40), draw(60, 1, 12)


def test_the_impact_traversal_equals_the_exhaustive_one_on_a_zipfian_corpus() -> None:
    """Impact sums in blocks of 256 documents (24 of them), thousands of documents: pruning happens, the arrays
    stay identical."""
    corpus, asked = zipf_corpus(7, 6000)
    exhaustive = SparseBM25(traversal="exhaustive")
    exhaustive.materialise_max_postings = 0
    pruned = SparseBM25(traversal="impact")
    pruned.materialise_max_postings, pruned.impact_stream_docs = 0, 256
    exhaustive.fit(corpus), pruned.fit(corpus)
    for k in (1, 10, 100):
        expected, got = exhaustive.top_k_batch(asked, k), pruned.top_k_batch(asked, k)
        assert np.array_equal(got[0], expected[0]) and np.array_equal(got[1], expected[1])
    assert pruned.traversals["impact"] > len(asked)  # it ran, not only its exhaustive fallback
    reference = BM25Index().fit(corpus)
    docs, scores = pruned.top_k_batch(asked, 10)
    for row, query in enumerate(asked):
        assert_reference_top_k(docs[row], scores[row], reference, query, 10)


@pytest.mark.parametrize("materialised", [True, False])
def test_auto_chooses_impacts_unless_a_query_has_few_postings_and_counts_each_choice(materialised: bool) -> None:
    corpus, asked = zipf_corpus(5, 4000)
    asked += [[f"w{i}" for i in range(14)], [f"w{i}" for i in range(20)], ["w1999"], []]  # long, rare, empty
    index = SparseBM25()
    index.materialise_max_postings = 1 << 40 if materialised else 0
    index.fit(corpus)
    exhaustive = SparseBM25(traversal="exhaustive").fit(corpus)
    got, expected = index.top_k_batch(asked, 10), exhaustive.top_k_batch(asked, 10)
    assert np.array_equal(got[0], expected[0]) and np.array_equal(got[1], expected[1])
    df = Counter(word for doc in corpus for word in set(doc))  # from the corpus, not the index
    postings = [sum(df[w] for w in set(q)) for q in asked]
    below = max(index.impact_min_postings, index.impact_min_postings_share * len(corpus))
    assert index.impact_min_postings_below == below
    enough = [q for q, p in zip(asked, postings, strict=True) if p >= below]
    few = len(asked) - len(enough)
    assert 0 < few < len(asked) // 2
    # A query with enough postings goes by impacts, unless its sums could exclude no document: then it is
    # answered and counted as exhaustive, as the forced impact traversal does with it.
    forced_impact = SparseBM25(traversal="impact")
    forced_impact.materialise_max_postings = index.materialise_max_postings
    forced_impact.fit(corpus).top_k_batch(enough, 10)
    fallback = forced_impact.traversals["exhaustive"]
    assert fallback < len(enough) // 4
    assert index.traversals == {"exhaustive": few + fallback, "impact": len(enough) - fallback}


def test_impact_sums_made_in_blocks_of_any_size_give_the_exhaustive_arrays() -> None:
    """Pass 1 makes its sums ``impact_stream_docs`` documents at a time (a uint16 buffer of that many, in whole
    chunks, never longer than the index): the whole index in one block, then blocks of 300 and of 1,000 set
    between queries on the same index; every time the arrays are the exhaustive traversal's."""
    corpus, asked = zipf_corpus(23, 4000)
    index = SparseBM25(traversal="impact")
    index.materialise_max_postings = 0
    index.fit(corpus)
    expected = SparseBM25(traversal="exhaustive").fit(corpus).top_k_batch(asked, 10)
    assert index.n_docs == 4000
    for block, buffer in ((index.impact_stream_docs, 4096), (300, 512), (1000, 1024)):
        index.impact_stream_docs = block
        got = index.top_k_batch(asked, 10)
        assert np.array_equal(got[0], expected[0]) and np.array_equal(got[1], expected[1])
        assert len(index._scratch()[2]) == buffer
    assert index.traversals["impact"] > 2 * len(asked)


def reference_impacts(index: SparseBM25, reference: BM25Index) -> dict[int, dict[int, int]]:
    """Each term's impacts by the reference's own weights: ``{row: {internal doc: round(weight / step)}}``, the
    step being the reference's largest weight / ``IMPACT_LEVELS``."""
    step = max(w for postings in reference._postings.values() for _, w in postings) / IMPACT_LEVELS
    internal = {doc: position for position, doc in enumerate(index.original_ids.tolist())}
    return {
        row: {internal[doc]: min(IMPACT_LEVELS, int(weight / step + 0.5)) for doc, weight in reference._postings[term]}
        for term, row in index.vocabulary.items()
    }


def test_impacts_are_the_reference_weights_rounded_to_the_step() -> None:
    """Each posting's impact is its ``BM25Index`` weight over the step (largest weight / ``IMPACT_LEVELS``),
    rounded to the nearest integer: stored in a column for terms in many documents, computed as the postings
    are read for the others (a term's count times it added to each of its documents' sums)."""
    corpus, _ = zipf_corpus(11, 3000)
    corpus += [["w1", "often"], ["often"] * 12, ["w2"] * 3 + ["often"] * 9]  # tfs beyond the per-length table
    index, reference = SparseBM25().fit(corpus), BM25Index().fit(corpus)
    expected, kernel_index = reference_impacts(index, reference), KernelIndex(*index._kernel_fields())
    table = np.zeros(IMPACT_TABLE_TF, np.int64)
    n_columns = 0
    for row, impacts in expected.items():
        wanted = np.zeros(index.n_docs, np.int64)
        wanted[list(impacts)] = list(impacts.values())
        if index._impact_slot[row] >= 0:
            assert index._impact_columns[index._impact_slot[row]].tolist() == wanted.tolist()
            n_columns += 1
            continue
        start, end = index.indptr[row], index.indptr[row + 1]
        for count in (1, 3):
            local = np.zeros(index.n_docs, np.uint16)
            _scatter_impacts(kernel_index, row, np.uint16(count), start, end, 0, local, table, -1)
            assert local.tolist() == (count * wanted).tolist()
        # In two calls, the second going on from the first one's length and table (as pass 1 reads a list).
        local, middle = np.zeros(index.n_docs, np.uint16), (start + end) // 2
        length = _scatter_impacts(kernel_index, row, np.uint16(1), start, middle, 0, local, table, -1)
        _scatter_impacts(kernel_index, row, np.uint16(1), middle, end, 0, local, table, length)
        assert local.tolist() == wanted.tolist()
    assert 0 < n_columns == len(index._impact_columns) < len(index.vocabulary)
    often = index.vocabulary["often"]
    assert index._impact_slot[often] < 0 and max(index.tfs[index.indptr[often] : index.indptr[often + 1]]) >= 9
    assert index.memory_nbytes >= index.nbytes + index._impact_columns.size


def near_ties(seed: int, n_docs: int) -> tuple[list[list[str]], list[list[str]]]:
    """Six words in documents of 1-30 of them (many lengths), so many documents score within one impact step
    of each other, plus one document of a word found nowhere else, whose large weight makes the step coarse;
    and three queries of 1-8 of the six words (repeats likely). Drawn by numpy from ``seed``: typical random
    corpora, where hypothesis's own draws shrink towards a few identical documents."""
    rng = np.random.default_rng(seed)
    words = VOCAB[:6]
    corpus = [list(rng.choice(words, size=rng.integers(1, 31))) for _ in range(n_docs)]
    return [*corpus, ["unique"]], [list(rng.choice(words, size=rng.integers(1, 9))) for _ in range(3)]


@settings(max_examples=80, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    n_docs=st.integers(20, 150),
    k=st.integers(1, 8),
    materialised=st.booleans(),
    impact_block=st.integers(1, 40),
)
def test_the_impact_traversal_returns_the_reference_top_k_among_near_ties(seed, n_docs, k, materialised, impact_block):
    """Small ``k`` over many near-tied documents, repeated query words: the integer sums' candidates must hold
    every document that reaches the top k (on these corpora about one batch in five needs the margin of the
    query's word count: without it, 57 of 300 batches differ), and ties go to the lower corpus position,
    whichever block the k largest sums and the candidates fall in."""
    corpus, batch = near_ties(seed, n_docs)
    reference = BM25Index().fit(corpus)
    index = forced(corpus, "impact", materialised, impact_block)
    exhaustive = forced(corpus, "exhaustive", materialised)
    docs, scores = index.top_k_batch(batch, k)
    assert counted(index, "impact", len(batch))
    for row, query in enumerate(batch):
        assert_reference_top_k(docs[row], scores[row], reference, query, k)
    expected = exhaustive.top_k_batch(batch, k)
    assert np.array_equal(docs, expected[0]) and np.array_equal(scores, expected[1])


def test_a_query_too_long_for_the_impact_sums_is_answered_exhaustively_and_counted_so() -> None:
    corpus, _ = zipf_corpus(13, 500)
    index = SparseBM25(traversal="impact").fit(corpus)
    exhaustive = SparseBM25(traversal="exhaustive").fit(corpus)
    asked = [["w0"] * (IMPACT_MAX_WORDS + 1), ["w0"] * IMPACT_MAX_WORDS]
    got, expected = index.top_k_batch(asked, 5), exhaustive.top_k_batch(asked, 5)
    assert np.array_equal(got[0], expected[0]) and np.array_equal(got[1], expected[1])
    assert index.traversals == {"exhaustive": 1, "impact": 1}


@pytest.mark.parametrize("name", ["wand", "taat", "daat", "impact_blocks"])
def test_an_unknown_or_removed_traversal_is_refused_in_one_line_naming_the_available_ones(name: str) -> None:
    """Term and document at a time and impacts by blocks were removed in issue 45: asking for one says so."""
    with pytest.raises(ValueError, match=f"must be 'auto' or one of exhaustive, impact; got '{name}'") as raised:
        SparseBM25(traversal=name)
    assert "\n" not in str(raised.value)


# Long documents first in the corpus, short ones last: the index numbers them the other way round.
varied_lengths = st.lists(st.lists(skewed_words, min_size=1, max_size=30), min_size=1, max_size=60)


@settings(max_examples=40, deadline=None)
@given(
    corpus=varied_lengths,
    words=st.lists(st.sampled_from(VOCAB), min_size=1, max_size=4),
    k=st.integers(1, 70),
    params=st.sampled_from([(1.5, 0.0), (0.0, 0.75)]),
    materialised=st.booleans(),
    block=st.integers(1, 4),
)
def test_ties_across_lengths_go_to_the_lower_original_index(corpus, words, k, params, materialised, block):
    """b = 0 (no length norm) or k1 = 0 (tf and length ignored): documents of different lengths tie exactly on a
    one-word query; every traversal must rank them by corpus position, as the reference does, although the
    index numbers documents by length."""
    corpus = sorted(corpus, key=len, reverse=True)
    k1, b = params
    reference = BM25Index(k1=k1, b=b).fit(corpus)
    for traversal in TRAVERSALS:
        index = SparseBM25(k1=k1, b=b, traversal=traversal)
        index.materialise_max_postings = 1 << 40 if materialised else 0
        index.impact_stream_docs = block
        index.fit(corpus)
        docs, scores = index.top_k_batch([[word] for word in words], k)
        for row, word in enumerate(words):
            expected = reference.top_k([word], k)
            assert docs[row].tolist() == [doc for doc, _ in expected], (traversal, word)
            assert scores[row].tolist() == [score for _, score in expected]


@pytest.mark.parametrize("traversal", TRAVERSALS)
@pytest.mark.parametrize("materialised", [True, False])
def test_a_long_document_first_in_the_corpus_wins_a_tie_against_a_short_one(traversal: str, materialised: bool):
    """b = 0: "a" scores the same in both documents; document 0 (four tokens) is numbered after document 1
    (one token) inside the index, and must still come first."""
    index = SparseBM25(b=0.0, traversal=traversal)
    index.materialise_max_postings = 1 << 40 if materialised else 0
    index.fit([["a", "x", "x", "x"], ["a"], ["x"]])
    assert index.original_ids.tolist() == [1, 2, 0]
    docs, scores = index.top_k_batch([["a"]], 3)
    assert docs.tolist() == [[0, 1, 2]]
    assert scores[0, 0] == scores[0, 1] > scores[0, 2] == 0.0
