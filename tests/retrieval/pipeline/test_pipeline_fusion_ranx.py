"""rrf_fuse: hand-computed RRF and parity with ranx's fuse(method="rrf") (the only ranx module here)."""

import itertools
import random

import pytest

from retrieval.pipeline import ContextItem, RetrieverError, rrf_fuse


def items(ids, content="x"):
    return [ContextItem(id=i, content=f"{content} {i}") for i in ids]


def test_rrf_fuse_hand_numbers_one_based_ranks():
    fused = rrf_fuse([items(["a", "b", "c"]), items(["c", "a"])], k=60)
    raw = {"a": 1 / 61 + 1 / 62, "b": 1 / 62, "c": 1 / 63 + 1 / 61}
    assert [f.id for f in fused] == ["a", "c", "b"]
    assert [f.metadata["rrf_score"] for f in fused] == pytest.approx([raw["a"], raw["c"], raw["b"]])
    assert [f.score for f in fused] == pytest.approx([1.0, raw["c"] / raw["a"], raw["b"] / raw["a"]])
    assert all(f.metadata["retrieval_method"] == "rrf" for f in fused)


def test_rrf_fuse_weights_top_k_and_new_items():
    first = items(["a", "b"], "first")
    second = items(["b", "a"], "second")
    fused = rrf_fuse([first, second], weights=[1.0, 3.0], k=0, top_k=1)
    assert [f.id for f in fused] == ["b"]  # b: 1/2 + 3/1, a: 1/1 + 3/2
    assert fused[0].metadata["rrf_score"] == pytest.approx(3.5)
    assert fused[0].content == "first b"  # the first copy seen is kept
    assert first[1].score == 0.0 and "retrieval_method" not in first[1].metadata  # inputs untouched


def test_rrf_fuse_edge_cases_and_errors():
    assert rrf_fuse([]) == [] and rrf_fuse([[], []]) == []
    assert [f.score for f in rrf_fuse([items(["a"])], weights=[0.0])] == [0.0]
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
        ours = {f.id: f.metadata["rrf_score"] for f in fused}
        assert ours == pytest.approx(expected[q], rel=1e-9)
        # same order: ranx's values along our ranking never increase (ties may be ordered either way)
        theirs = [expected[q][f.id] for f in fused]
        assert all(a >= b for a, b in itertools.pairwise(theirs))
