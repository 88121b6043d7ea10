"""The one top-k rule: best first, ties by lower index, against a sort written out here."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from retrieval.core.top_k import top_k_indices


@settings(max_examples=200, deadline=None)
@given(scores=st.lists(st.integers(-3, 3).map(float), max_size=30), k=st.one_of(st.none(), st.integers(0, 40)))
def test_top_k_is_best_first_ties_by_lower_index(scores, k):
    expected = sorted(range(len(scores)), key=lambda i: (-scores[i], i))
    assert top_k_indices(scores, k) == (expected if k is None else expected[:k])


def test_hand_example():
    assert top_k_indices([0.5, 2.0, 0.5, 2.0, 1.0], 3) == [1, 3, 4]
    assert top_k_indices([], 3) == [] and top_k_indices([1.0], 0) == []
