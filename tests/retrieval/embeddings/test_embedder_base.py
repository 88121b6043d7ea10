"""Output checks shared by every embedder: shape, finiteness, unit rows, empty input."""

from __future__ import annotations

import numpy as np
import pytest

from retrieval.embeddings import BaseEmbedder, EmbedderError, finish_embeddings


def test_rows_are_normalised_and_zero_rows_stay_zero():
    raw = np.array([[3.0, 4.0], [0.0, 0.0], [-1.0, 0.0]])
    out = finish_embeddings(raw, 3, 2, "demo")
    assert out.dtype == np.float32 and out.flags.c_contiguous
    np.testing.assert_allclose(out, [[0.6, 0.8], [0.0, 0.0], [-1.0, 0.0]])


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (np.ones((2, 3)), r"embedder 'demo' returned shape \(2, 3\) for 2 texts; expected \(2, 4\)"),
        (np.ones((3, 4)), r"shape \(3, 4\) for 2 texts"),
        (np.array([[1.0, 0, 0, 0], [np.nan, 0, 0, 0]]), r"NaN or infinite values for text #1"),
        (np.array([[np.inf, 0, 0, 0], [1.0, 0, 0, 0]]), r"NaN or infinite values for text #0"),
    ],
)
def test_invalid_outputs_raise_one_line_errors(raw, message):
    with pytest.raises(EmbedderError, match=message) as info:
        finish_embeddings(raw, 2, 4, "demo")
    assert "\n" not in str(info.value)


class BrokenModel(BaseEmbedder):
    """Returns NaN for texts containing "bad", like a model dividing by a zero norm."""

    name, params, dim = "broken", {}, 3

    def _encode(self, texts):
        return np.array([[np.nan] * 3 if "bad" in t else [1.0, 2.0, 2.0] for t in texts])


def test_base_embedder_checks_every_output():
    model = BrokenModel()
    np.testing.assert_allclose(model.embed(["ok"]), [[1 / 3, 2 / 3, 2 / 3]], rtol=1e-6)
    with pytest.raises(EmbedderError, match=r"'broken'.*text #1"):
        model.embed(["ok", "bad"])
    assert model.embed([]).shape == (0, 3)
    with pytest.raises(TypeError, match="sequence of texts"):
        model.embed("a single string")
    assert model.fit(["corpus"]) is model


def test_without_torch_auto_is_the_cpu_and_cuda_is_one_line_naming_the_torch_extra(monkeypatch):
    """The lean install has no torch: the shipped models run on the CPU, and asking for CUDA says what to install."""
    import sys

    from retrieval.embeddings import EmbedderUnavailable
    from retrieval.embeddings.base import resolve_device

    monkeypatch.setitem(sys.modules, "torch", None)  # `import torch` fails as it does where torch is absent
    assert resolve_device("minilm", "auto") == "cpu" and resolve_device("minilm", "cpu") == "cpu"
    with pytest.raises(EmbedderUnavailable) as error:
        resolve_device("e5-small", "cuda")
    assert str(error.value) == (
        "e5-small device = 'cuda' runs on torch, which is not installed; pip install \"zerda-eval[torch]\""
    )
