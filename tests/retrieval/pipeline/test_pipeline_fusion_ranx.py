"""rrf_fuse: hand-computed RRF and parity with ranx's fuse(method="rrf") (the only ranx module here)."""

import itertools
import random

import pytest

from retrieval.pipeline import ContextItem, RetrieverError, rrf_fuse


def items(ids, content="x"):
    return [ContextItem(id=i, content=f"{content} {i}") for i in ids]


def test_rrf_fuse_hand_numbers_one_based_ranks_min_max_scores():
    """Seed 004: "Returns fused items with normalized scores": min-max over the returned set (issue 18)."""
    fused = rrf_fuse([items(["a", "b", "c"]), items(["c", "a"])], k=60)
    raw = {"a": 1 / 61 + 1 / 62, "b": 1 / 62, "c": 1 / 63 + 1 / 61}
    assert [f.id for f in fused] == ["a", "c", "b"]
    assert [f.metadata["rrf_raw_score"] for f in fused] == pytest.approx([raw["a"], raw["c"], raw["b"]])
    # (s - min) / (max - min): a = 1, b = 0, c = (1/63 + 1/61 - 1/62) / (1/61) = 1 - 61 / (62 * 63)
    assert [f.score for f in fused] == pytest.approx([1.0, 1 - 61 / 3906, 0.0], rel=1e-12)
    assert all(f.metadata["retrieval_method"] == "rrf" for f in fused)
    assert all("rrf_score" not in f.metadata for f in fused)


def test_rrf_fuse_normalises_after_the_top_k_cut():
    fused = rrf_fuse([items(["a", "b", "c"]), items(["c", "a"])], k=60, top_k=2)
    assert [(f.id, f.score) for f in fused] == [("a", 1.0), ("c", 0.0)]  # b is cut before min-max
    assert fused[1].metadata["rrf_raw_score"] == pytest.approx(1 / 63 + 1 / 61)


def test_rrf_fuse_single_item_scores_one_and_all_ties_score_zero():
    assert [(f.id, f.score) for f in rrf_fuse([items(["a", "b"])], top_k=1)] == [("a", 1.0)]
    tied = rrf_fuse([items(["a"]), items(["b"])])  # both 1/61
    assert [(f.id, f.score) for f in tied] == [("a", 0.0), ("b", 0.0)]
    assert [f.metadata["rrf_raw_score"] for f in tied] == pytest.approx([1 / 61, 1 / 61])


def test_rrf_fuse_weights_top_k_and_keeps_the_highest_scored_copy():
    first = [ContextItem(id="a", content="first a", score=0.9), ContextItem(id="b", content="first b", score=0.2)]
    second = [ContextItem(id="b", content="second b", score=0.7), ContextItem(id="a", content="second a", score=0.9)]
    fused = rrf_fuse([first, second], weights=[1.0, 3.0], k=0, top_k=1)
    assert [f.id for f in fused] == ["b"]  # b: 1/2 + 3/1, a: 1/1 + 3/2
    assert fused[0].metadata["rrf_raw_score"] == pytest.approx(3.5)
    assert fused[0].content == "second b"  # its copy with the higher score (0.7 > 0.2)
    both = rrf_fuse([first, second], weights=[1.0, 3.0], k=0)
    assert [(f.id, f.content, f.score) for f in both] == [("b", "second b", 1.0), ("a", "first a", 0.0)]  # 0.9 tie
    assert first[1].score == 0.2 and "retrieval_method" not in first[1].metadata  # inputs untouched


def test_rrf_fuse_edge_cases_and_errors():
    assert rrf_fuse([]) == [] and rrf_fuse([[], []]) == []
    assert [f.score for f in rrf_fuse([items(["a"])], weights=[0.0])] == [0.0]  # a sum of 0 has no scale
    with pytest.raises(RetrieverError, match="2 weights for 1 ranked lists"):
        rrf_fuse([items(["a"])], weights=[1.0, 1.0])
    with pytest.raises(RetrieverError, match=">= 0"):
        rrf_fuse([items(["a"])], weights=[-1.0])
    with pytest.raises(RetrieverError, match="top_k"):
        rrf_fuse([items(["a"])], top_k=-1)


@pytest.fixture(scope="module")
def random_lists():
    rng = random.Random(4)
    pool = [f"doc{i}" for i in range(40)]
    return {q: [rng.sample(pool, rng.randint(5, 25)) for _ in range(3)] for q in ("q1", "q2", "q3")}


@pytest.mark.slow  # ranx compiles its numba kernels on first use (~35-60 s on 2 busy cores)
@pytest.mark.parametrize("k", [60, 10])
def test_rrf_fuse_matches_ranx(random_lists, k):
    from ranx import Run, fuse

    runs = [
        Run({q: {d: float(100 - r) for r, d in enumerate(lists[i])} for q, lists in random_lists.items()})
        for i in range(3)
    ]
    expected = fuse(runs, norm=None, method="rrf", params={"k": k}).to_dict()
    for q, lists in random_lists.items():
        fused = rrf_fuse([items(ids) for ids in lists], k=k)
        ours = {f.id: f.metadata["rrf_raw_score"] for f in fused}
        assert ours == pytest.approx(expected[q], rel=1e-9)
        # same order: ranx's values along our ranking never increase (ties may be ordered either way)
        theirs = [expected[q][f.id] for f in fused]
        assert all(a >= b for a, b in itertools.pairwise(theirs))
