"""The one cosine: hand-computed values, zero-norm behaviour, matrix form agreeing with the scalar one."""

import math

import numpy as np
import pytest

from retrieval.core import cosine, cosine_matrix


def test_cosine_hand_computed():
    # (1,2,2)·(2,0,1) = 4; norms 3 and sqrt(5)
    assert cosine([1.0, 2.0, 2.0], [2.0, 0.0, 1.0]) == pytest.approx(4 / (3 * math.sqrt(5)))


def test_cosine_parallel_orthogonal_opposite():
    assert cosine([1, 1], [3, 3]) == pytest.approx(1.0)
    assert cosine([1, 0], [0, 5]) == 0.0
    assert cosine(np.array([1.0, -2.0]), np.array([-1.0, 2.0])) == pytest.approx(-1.0)


def test_cosine_zero_norm_is_zero_not_nan():
    assert cosine([0.0, 0.0], [1.0, 2.0]) == 0.0
    assert cosine([1.0, 2.0], [0.0, 0.0]) == 0.0
    assert cosine(np.zeros(3), np.zeros(3)) == 0.0


def test_cosine_returns_python_float():
    assert type(cosine(np.ones(4, dtype=np.float32), np.arange(4, dtype=np.float32))) is float


def test_cosine_matrix_matches_scalar_cosine_including_zero_rows():
    rng = np.random.default_rng(0)
    queries = rng.normal(size=(3, 5))
    docs = rng.normal(size=(4, 5))
    docs[2] = 0.0
    matrix = cosine_matrix(queries, docs)
    assert matrix.shape == (3, 4)
    expected = [[cosine(q, d) for d in docs] for q in queries]
    np.testing.assert_allclose(matrix, expected, rtol=1e-12, atol=1e-12)
    assert np.all(matrix[:, 2] == 0.0)
