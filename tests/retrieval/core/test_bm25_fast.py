"""SparseBM25 must give BM25Index's numbers: scores to 1e-9 and identical top-k (ties by lower doc index).

Every check runs on each of the engine's three paths: materialised weights scored exhaustively (small
indexes, the default here), weights computed per posting and scored exhaustively, and pruned top-k (by the
default rule: quantised impacts).
"""

from __future__ import annotations

import json
import math
from array import array
from collections import Counter

import numpy as np
import pytest

from retrieval.core import BM25Index, bm25_fast, tokenize
from retrieval.core.bm25_fast import ARRAYS, SAVE_FORMAT, SparseBM25, _chunk_postings, _gallop, _lower_bound
from tests.arrays import backed_by_memmap

BUNDLED = [
    "beir/scifact/test",
    "cranfield",
    "vaswani",
    "quranqa23/taskA/train+dev",
    "tydiqa-goldp/ar/dev",
    "xquad/ar",
]
MAX_QUERIES = 100
PATHS = {  # path -> (materialise_max_postings, impact_min_postings, impact_min_postings_share)
    "materialised": (
        SparseBM25.materialise_max_postings,
        SparseBM25.impact_min_postings,
        SparseBM25.impact_min_postings_share,
    ),
    "computed": (0, 1 << 62, 1.0),
    "pruned": (0, 0, 0.0),
}


def fitted(corpus: list[list[str]], path: str, k1: float = 1.5, b: float = 0.75) -> SparseBM25:
    """A SparseBM25 of ``corpus`` that answers through ``path``."""
    index = SparseBM25(k1=k1, b=b)
    index.materialise_max_postings, index.impact_min_postings, index.impact_min_postings_share = PATHS[path]
    return index.fit(corpus)


@pytest.fixture(params=list(PATHS))
def path(request: pytest.FixtureRequest) -> str:
    return request.param


def assert_same_top_k(fast: SparseBM25, ref: BM25Index, queries: list[list[str]], k: int) -> None:
    docs, scores = fast.top_k_batch(queries, k)
    assert docs.shape == scores.shape == (len(queries), min(k, len(ref)))
    for row, query in enumerate(queries):
        expected = ref.top_k(query, k)
        assert docs[row].tolist() == [doc for doc, _ in expected], f"query {row}: {query}"
        np.testing.assert_allclose(scores[row], [score for _, score in expected], rtol=0, atol=1e-9)


@pytest.fixture(scope="module", params=BUNDLED)
def bundled(request: pytest.FixtureRequest) -> tuple[SparseBM25, BM25Index, list[list[str]]]:
    """Each bundled corpus indexed once by both implementations, with up to 100 evenly spread queries."""
    from zerda_eval.datasets import load_collection

    collection = load_collection(request.param)
    corpus = [tokenize(text) for text in collection.texts]
    texts = list(collection.queries.values())
    step = math.ceil(len(texts) / MAX_QUERIES)
    queries = [tokenize(text) for text in texts[::step]]
    return corpus, BM25Index().fit(corpus), queries


def test_scores_and_top_k_equal_reference_on_bundled_dataset(bundled, path: str) -> None:
    corpus, ref, queries = bundled
    fast = fitted(corpus, path)
    top_100 = [ref.top_k(query, 100) for query in queries]
    for query in queries:
        np.testing.assert_allclose(fast.scores(query), ref.scores(query), rtol=0, atol=1e-9)
    for k in (10, 100):
        docs, scores = fast.top_k_batch(queries, k)
        for row, expected in enumerate(top_100):
            assert docs[row].tolist() == [doc for doc, _ in expected[:k]], f"query {row}: {queries[row]}"
            np.testing.assert_allclose(scores[row], [score for _, score in expected[:k]], rtol=0, atol=1e-9)


def test_the_forced_impact_traversal_equals_reference_on_bundled_dataset(bundled) -> None:
    """Real text: every query answered by the impact traversal (counted; a query its sums cannot prune is handed
    to the exhaustive one, counted so), the reference's top k and scores; the sums made in blocks of 500
    documents."""
    corpus, ref, queries = bundled
    fast = SparseBM25(traversal="impact")
    fast.materialise_max_postings, fast.impact_min_postings, fast.impact_min_postings_share = PATHS["pruned"]
    fast.impact_stream_docs = 500
    fast.fit(corpus)
    assert_same_top_k(fast, ref, queries, 10)
    assert fast.traversals["impact"] + fast.traversals["exhaustive"] == len(queries)
    assert fast.traversals["impact"] > len(queries) // 2


# Documents 0/2 and 3/5 are duplicates (exact score ties); 1 and 4 never match "apple" or "pear".
TIED_CORPUS = [
    ["apple", "pear", "apple"],
    ["kiwi", "plum"],
    ["apple", "pear", "apple"],
    ["pear", "fig"],
    [],
    ["pear", "fig"],
]


@pytest.mark.parametrize("k", [1, 2, 3, 4, 5, 6, 50])
@pytest.mark.parametrize("query", [["apple"], ["pear"], ["pear", "pear", "apple"], ["durian"], [], ["fig", "kiwi"]])
def test_ties_and_zero_scores_go_to_lower_doc_index(query: list[str], k: int, path: str) -> None:
    fast = fitted(TIED_CORPUS, path)
    assert_same_top_k(fast, BM25Index().fit(TIED_CORPUS), [query], k)


def test_hand_computed_score_counts_a_repeated_query_word_each_time(path: str) -> None:
    # "apple" is in docs 0 and 2 of 6: idf = log((6 - 2 + 0.5) / (2 + 0.5) + 1); avgdl = 12 / 6.
    idf = math.log(4.5 / 2.5 + 1)
    norm = 1.5 * (1 - 0.75 + 0.75 * 3 / 2)
    apple = idf * 2 * 2.5 / (2 + norm)  # tf = 2 in a 3-token document
    # "fig" is in docs 3 and 5 (2 tokens, tf 1): same idf.
    fig = idf * 1 * 2.5 / (1 + 1.5 * (1 - 0.75 + 0.75 * 2 / 2))
    index = fitted(TIED_CORPUS, path)
    np.testing.assert_allclose(index.scores(["apple", "apple"]), [2 * apple, 0, 2 * apple, 0, 0, 0], atol=1e-12)
    query = ["fig", "apple", "fig", "apple", "apple"]
    expected = [3 * apple, 0, 3 * apple, 2 * fig, 0, 2 * fig]
    np.testing.assert_allclose(index.scores(query), expected, rtol=0, atol=1e-12)
    docs, scores = index.top_k_batch([query], 4)
    assert docs[0].tolist() == [0, 2, 3, 5]  # 3 x apple = 3.80 beats 2 x fig = 2.06
    np.testing.assert_allclose(scores[0], sorted(expected, reverse=True)[:4], rtol=0, atol=1e-12)


@pytest.mark.parametrize(("k1", "b"), [(0.0, 0.0), (0.9, 0.4), (2.0, 1.0)])
def test_other_parameters_equal_reference(k1: float, b: float, path: str) -> None:
    corpus = [tokenize(text) for text in ["the cat sat on the mat", "a dog and a cat", "mat mat mat", "dog"]]
    queries = [["cat", "mat"], ["dog"], ["the", "dog", "cat"]]
    fast, ref = fitted(corpus, path, k1=k1, b=b), BM25Index(k1=k1, b=b).fit(corpus)
    for query in queries:
        np.testing.assert_allclose(fast.scores(query), ref.scores(query), rtol=0, atol=1e-12)
    assert_same_top_k(fast, ref, queries, 3)


def test_many_queries_split_across_threads_keep_their_order(path: str) -> None:
    rng = np.random.default_rng(0)
    words = [f"w{i}" for i in range(40)]
    corpus = [list(rng.choice(words, size=rng.integers(0, 12))) for _ in range(300)]
    queries = [list(rng.choice(words, size=rng.integers(0, 5))) for _ in range(97)]
    assert_same_top_k(fitted(corpus, path), BM25Index().fit(corpus), queries, 7)


def test_pruned_top_k_is_exact_on_a_zipfian_corpus() -> None:
    """Frequent words with small bounds, rare ones with large: pruning skips most postings, never a winner.

    Weights are not materialised (as on an index of a million passages); the default pruning threshold
    applies. Each query's top 10 and top 100 equal the reference's, one query per call and all in one call.
    """
    rng = np.random.default_rng(7)
    words = np.array([f"w{i}" for i in range(20_000)], dtype=object)

    def passages(n: int, low: int, high: int) -> list[list[str]]:
        return [list(words[np.minimum(rng.zipf(1.1, size=rng.integers(low, high + 1)) - 1, 19_999)]) for _ in range(n)]

    corpus, queries = passages(40_000, 20, 60), passages(40, 3, 10)
    fast = SparseBM25()
    fast.materialise_max_postings = 0
    fast.fit(corpus)
    ref = BM25Index().fit(corpus)
    df = np.diff(fast.indptr)
    postings = [sum(df[fast.vocabulary[w]] for w in set(q) if w in fast.vocabulary) for q in queries]
    pruned = [q for q, n in zip(queries, postings, strict=True) if n >= fast.impact_min_postings_below]
    assert len(pruned) >= 30  # most queries take the pruned path
    column_terms = {fast.vocabulary[w] for w in set().union(*pruned) if w in fast.vocabulary} & set(
        np.flatnonzero(fast._impact_slot >= 0).tolist()
    )
    assert len(column_terms) >= 5  # ... and add frequent terms' impacts from their columns
    for k in (10, 100):
        assert_same_top_k(fast, ref, queries, k)
        for query in queries[:10]:
            assert_same_top_k(fast, ref, [query], k)


def test_lengths_hold_the_corpus_and_weights_are_bit_identical() -> None:
    """Documents are numbered shortest first, ties in corpus order, and keep their lengths (one norm per
    length; ``_length_start`` finds each length's first document). A one-word query's scores are the
    reference's, in corpus order, to the last bit."""
    rng = np.random.default_rng(11)
    words = [f"w{i}" for i in range(300)]
    corpus = [[words[min(z, 299)] for z in rng.zipf(1.3, size=rng.integers(0, 90)) - 1] for _ in range(2_000)]
    fast, ref = fitted(corpus, "pruned"), BM25Index().fit(corpus)
    by_length = sorted(range(len(corpus)), key=lambda doc: (len(corpus[doc]), doc))
    assert fast.original_ids.tolist() == by_length
    assert fast.lengths.tolist() == [len(corpus[doc]) for doc in by_length]
    for length in range(max(map(len, corpus)) + 2):
        first = next((i for i, doc in enumerate(by_length) if len(corpus[doc]) >= length), len(corpus))
        assert fast._length_start[length] == first
    df = Counter(word for doc in corpus for word in set(doc))
    for word in list(df)[:60]:
        np.testing.assert_array_equal(fast.scores([word]), ref.scores([word]))


def test_a_chunk_holds_five_bytes_a_posting_sorted_by_term_then_document() -> None:
    """Hand-computed: fit holds every chunk until the last is read, so each keeps its distinct terms with their
    posting counts, then one int32 document and one smallest-type tf per posting (16 bytes before round 4)."""
    term_ids = array("i", [2, 0, 2, 1, 0, 0, 2])  # documents 7 (3 tokens), 8 (0), 9 (4): first_doc 7
    terms, per_term, docs, tfs = _chunk_postings(term_ids, array("q", [3, 0, 4]), 7)
    assert terms.tolist() == [0, 1, 2] and per_term.tolist() == [2, 1, 2]
    assert docs.tolist() == [7, 9, 9, 7, 9] and tfs.tolist() == [1, 2, 1, 2, 1]
    assert (docs.dtype, tfs.dtype) == (np.int32, np.uint8)
    assert _chunk_postings(array("i", [5] * 300), array("q", [300]), 0)[3].dtype == np.uint16


def test_an_index_fitted_in_many_chunks_equals_one_fitted_in_one(monkeypatch: pytest.MonkeyPatch) -> None:
    """Chunks of 40 tokens: the vocabulary grows across chunks, a later chunk widens the tf type (a word 300
    times in the last document); every array equals the one-chunk index's, and the scores the reference's."""
    rng = np.random.default_rng(5)
    words = [f"w{i}" for i in range(200)]
    corpus = [[words[min(z, 199)] for z in rng.zipf(1.3, size=rng.integers(0, 30)) - 1] for _ in range(400)]
    corpus.append(["w3"] * 300 + ["late"])
    whole = SparseBM25().fit(corpus)
    monkeypatch.setattr(bm25_fast, "CHUNK_TOKENS", 40)
    chunked = SparseBM25().fit(corpus)
    assert chunked.vocabulary == whole.vocabulary and chunked.tfs.dtype == np.uint16
    for name in ARRAYS:
        np.testing.assert_array_equal(getattr(chunked, name), getattr(whole, name), err_msg=name)
    ref = BM25Index().fit(corpus)
    for query in (["w3"], ["late", "w0", "w7"], ["w150", "w3", "w3"]):
        np.testing.assert_allclose(chunked.scores(query), ref.scores(query), rtol=0, atol=1e-9)


def test_empty_corpus_and_non_positive_k() -> None:
    empty = SparseBM25().fit([])
    assert empty.scores(["apple"]).shape == (0,)
    assert empty.top_k_batch([["apple"], []], 10)[0].shape == (2, 0)
    assert SparseBM25().fit(TIED_CORPUS).top_k_batch([["apple"]], 0)[0].shape == (1, 0)


@pytest.mark.parametrize(("k1", "b"), [(-0.1, 0.75), (1.5, 1.2), (float("nan"), 0.5)])
def test_invalid_parameters_raise(k1: float, b: float) -> None:
    with pytest.raises(ValueError, match="BM25"):
        SparseBM25(k1=k1, b=b)


def test_saved_index_loads_memory_mapped_with_the_same_results(tmp_path) -> None:
    corpus = [tokenize(text) for text in ["الكتاب على الطاولة", "the cat sat", "cat and the hat", ""]]
    fast = SparseBM25(k1=1.2, b=0.5).fit(corpus)
    fast.save(tmp_path)
    written = sorted(p.name for p in tmp_path.iterdir())
    assert written == sorted([f"{name}.npy" for name in ARRAYS] + ["meta.json", "vocabulary.json"])
    loaded = SparseBM25.load(tmp_path, mmap=True)
    assert all(backed_by_memmap(getattr(loaded, name)) for name in ARRAYS)
    assert (loaded.k1, loaded.b, loaded.vocabulary) == (1.2, 0.5, fast.vocabulary)
    assert loaded.original_ids.tolist() == fast.original_ids.tolist() == [3, 0, 1, 2]  # 0, 3, 3, 4 tokens
    queries = [["cat", "the"], ["الكتاب"], ["unknown"]]
    for got, want in zip(loaded.top_k_batch(queries, 4), fast.top_k_batch(queries, 4), strict=True):
        np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(loaded.scores(["cat"]), fast.scores(["cat"]))
    assert fast.nbytes == sum(np.load(tmp_path / f"{name}.npy").nbytes for name in ARRAYS)


@pytest.mark.parametrize("corrupt", [[0, 0, 1], [0, 1], [0, 1, 3], [-1, 0, 1]])
def test_a_document_order_that_is_not_a_permutation_is_refused_in_one_line(tmp_path, corrupt: list[int]) -> None:
    """``original_ids`` maps the index's documents back to the corpus: a damaged one would return wrong ids."""
    SparseBM25().fit([["a", "b"], ["b"], ["a", "a", "c"]]).save(tmp_path)
    np.save(tmp_path / "original_ids.npy", np.array(corrupt, dtype=np.int32))
    with pytest.raises(ValueError, match=r"original_ids\.npy: not a permutation of the index's 3 documents") as raised:
        SparseBM25.load(tmp_path)
    assert "\n" not in str(raised.value)


@pytest.mark.parametrize("terms", [["a", "b"], ["a", "b", "c", "d"]])
def test_a_vocabulary_without_one_term_per_postings_list_is_refused_in_one_line(tmp_path, terms: list[str]) -> None:
    """A truncated (or padded) ``vocabulary.json`` would map terms to other terms' postings."""
    SparseBM25().fit([["a", "b"], ["b"], ["a", "a", "c"]]).save(tmp_path)
    (tmp_path / "vocabulary.json").write_text(json.dumps(terms), encoding="utf-8")
    with pytest.raises(ValueError, match=rf"vocabulary\.json: {len(terms)} terms for 3 postings lists") as raised:
        SparseBM25.load(tmp_path)
    assert "\n" not in str(raised.value)


@pytest.mark.parametrize("saved_format", [None, 3])
def test_an_index_saved_in_another_format_is_refused_in_one_line(tmp_path, saved_format: int | None) -> None:
    """An index written by an older SparseBM25 (no lengths, a norm per document) must not load half-read."""
    SparseBM25().fit([["a", "b"], ["b"]]).save(tmp_path)
    meta_path = tmp_path / "meta.json"
    meta = json.loads(meta_path.read_text(encoding="utf-8"))
    assert meta["format"] == SAVE_FORMAT
    meta.pop("format")
    if saved_format is not None:
        meta["format"] = saved_format
    meta_path.write_text(json.dumps(meta), encoding="utf-8")
    with pytest.raises(ValueError, match=rf"{tmp_path}.*format.*rebuild") as raised:
        SparseBM25.load(tmp_path)
    assert "\n" not in str(raised.value)


def test_scores_agree_with_bm25s_lucene() -> None:
    """Independent check: bm25s's "lucene" BM25 is the same formula without the (k1 + 1) factor."""
    import bm25s

    corpus = [tokenize(text) for text in ["the cat sat on the mat", "a dog and a cat", "mat mat", "dog"]]
    peer = bm25s.BM25(k1=1.5, b=0.75, method="lucene")
    peer.index(corpus, show_progress=False)
    peer_scores = peer.get_scores(["cat", "mat"])
    ours = SparseBM25().fit(corpus).scores(["cat", "mat"])
    np.testing.assert_allclose(ours, 2.5 * np.asarray(peer_scores, dtype=np.float64), rtol=1e-5)


def test_lookups_stay_inside_their_posting_list() -> None:
    """``_lower_bound`` / ``_gallop`` against a brute force, on sub-ranges whose next entry IS the sought doc.

    A search that looked one past its list (into the next term's postings) would report the next term's
    posting as a match and inflate a pruning bound.
    """
    rng = np.random.default_rng(3)
    for _ in range(300):
        doc_ids = np.sort(rng.choice(200, size=int(rng.integers(1, 60)), replace=False)).astype(np.int32)
        low = int(rng.integers(0, len(doc_ids)))
        high = int(rng.integers(low, len(doc_ids) + 1))
        targets = [int(rng.integers(-1, 201))] + ([int(doc_ids[high])] if high < len(doc_ids) else [])
        for doc in targets:
            expected = low + int(np.searchsorted(doc_ids[low:high], doc))
            assert _lower_bound(doc_ids, low, high, doc) == expected
            assert _gallop(doc_ids, low, high, doc) == expected
