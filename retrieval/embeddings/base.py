"""The ``Embedder`` contract, its errors, and the output checks every embedder goes through.

An embedder turns texts into a float32 matrix whose rows are L2-normalised, so a dot product is a
cosine. A text with no usable token (empty string, no known term) gives a zero row: its cosine with
anything is 0.0, as ``retrieval.core.cosine`` defines it. NaN, infinity or a wrong shape are bugs of
the model or the adapter and raise ``EmbedderError`` instead of silently producing wrong rankings.
"""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np


class EmbedderError(RuntimeError):
    """An embedder was misused (not fitted, bad parameter) or produced invalid vectors."""


class EmbedderUnavailable(EmbedderError):
    """The package or the model weights of an embedder are not available on this machine."""


class EmbedderWarning(UserWarning):
    """Something an embedder repaired on its own (a damaged model file rebuilt, a tampered folder unpacked again).

    A front end may show it in its own form (the harness's CLI: one ``zerda-eval: warning:`` line).
    """


@runtime_checkable
class Embedder(Protocol):
    """What retrieval code needs from an embedding model (see docs/ARCHITECTURE.md)."""

    name: str
    params: dict[str, Any]
    dim: int

    def fit(self, texts: Sequence[str]) -> Embedder: ...

    def embed(self, texts: Sequence[str]) -> np.ndarray: ...


@runtime_checkable
class CorpusFitted(Protocol):
    """An embedder whose ``fit`` learns from the corpus, with its fitted state as plain arrays.

    A cache keeps the state beside the corpus vectors, so a rerun restores it instead of refitting.
    """

    def fitted_state(self) -> dict[str, np.ndarray]: ...

    def restore(self, state: Mapping[str, np.ndarray]) -> CorpusFitted: ...


def finish_embeddings(matrix: Any, n_texts: int, dim: int, name: str) -> np.ndarray:
    """Check a raw model output and return it as C-contiguous float32 with L2-normalised rows.

    Raises ``EmbedderError`` naming the embedder when the shape is not ``(n_texts, dim)`` or a value is
    not finite. Zero rows stay zero.
    """
    matrix = np.asarray(matrix, dtype=np.float32)
    if matrix.shape != (n_texts, dim):
        raise EmbedderError(
            f"embedder {name!r} returned shape {matrix.shape} for {n_texts} texts; expected ({n_texts}, {dim})"
        )
    bad_rows = np.flatnonzero(~np.isfinite(matrix).all(axis=1))
    if bad_rows.size:
        raise EmbedderError(
            f"embedder {name!r} returned NaN or infinite values for text #{bad_rows[0]} of {n_texts} "
            f"({bad_rows.size} such text{'s' if bad_rows.size > 1 else ''})"
        )
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    # Rows already of unit length are left bit for bit as they are, so checking twice changes nothing.
    rescale = (norms > 0) & (np.abs(norms - 1.0) > 1e-6)
    unit = np.divide(matrix, norms, out=matrix.copy(), where=rescale)
    return np.ascontiguousarray(unit, dtype=np.float32)


class BaseEmbedder(ABC):
    """Shared ``embed``: empty input, output checks and normalisation around a model's ``_encode``.

    Subclasses set ``name``, ``params`` and ``dim`` and implement ``_encode(texts) -> raw matrix``.
    ``fit`` is a no-op for pretrained models.
    """

    name: str
    params: dict[str, Any]
    dim: int

    def fit(self, texts: Sequence[str]) -> BaseEmbedder:
        """Pretrained models learn nothing from the corpus."""
        return self

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed ``texts`` (documents) into a float32 ``(len(texts), dim)`` matrix of unit (or zero) rows."""
        return self._checked(texts, self._encode)

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        """Embed search queries; the same as ``embed`` unless the model encodes queries differently (e5)."""
        return self._checked(texts, self._encode_queries)

    def _checked(self, texts: Sequence[str], encode: Any) -> np.ndarray:
        if isinstance(texts, str):
            raise TypeError(f"embedder {self.name!r} takes a sequence of texts, not a single string")
        texts = list(texts)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return finish_embeddings(encode(texts), len(texts), self.dim, self.name)

    def _encode_queries(self, texts: list[str]) -> np.ndarray:
        """Raw query vectors; models with a query side (e5's ``query: `` prefix) override this."""
        return self._encode(texts)

    @abstractmethod
    def _encode(self, texts: list[str]) -> np.ndarray:
        """Raw vectors of ``texts`` (any float dtype, normalised or not)."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.params})"


def embed_queries(embedder: Embedder, texts: Sequence[str]) -> np.ndarray:
    """``embedder.embed_queries(texts)`` when it has one (query/passage models such as e5), else ``embed``.

    ``embed_queries`` is optional in the contract so that any object with ``embed`` stays an embedder;
    ``embed`` is always the document (passage) side, which is what the corpus cache stores.
    """
    method = getattr(embedder, "embed_queries", None)
    return method(texts) if callable(method) else embedder.embed(texts)


def check_positive_int(key: str, value: Any) -> None:
    """Raise ``EmbedderError`` naming ``key`` unless ``value`` is a positive integer."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise EmbedderError(f"{key} must be a positive integer, got {value!r}")


def check_model_dim(name: str, dim: Any, native: int) -> None:
    """A pretrained model has one size: ``dim`` may be omitted (``None``) or equal to it, nothing else."""
    if dim is not None and dim != native:
        raise EmbedderError(
            f"{name} vectors have {native} dimensions, not dim={dim!r}; remove dim or set dim = {native}"
        )


DEVICES = ("auto", "cpu", "cuda")
TORCH_HINT = 'pip install "zerda-eval[torch]"'  # CUDA, st: model folders, cross-encoders, e5-small-sparse


def default_threads() -> int:
    """The CPUs this process may run on: a corpus encode's threads by default."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def resolve_device(name: str, device: str) -> str:
    """The torch device ``device`` names for embedder ``name``: ``auto`` is CUDA when torch sees a GPU, else CPU
    (also where torch is not installed).

    ``cuda`` on a machine where torch sees none is ``EmbedderUnavailable`` (one line), never a silent CPU run.
    """
    if device not in DEVICES:
        raise EmbedderError(f"{name} device must be one of {', '.join(DEVICES)}, got {device!r}")
    if device == "cpu":
        return "cpu"
    try:
        import torch
    except ImportError as exc:  # the lean install: no torch, so no CUDA device to run on
        if device == "cuda":
            raise EmbedderUnavailable(
                f"{name} device = 'cuda' runs on torch, which is not installed; {TORCH_HINT}"
            ) from exc
        return "cpu"
    if torch.cuda.is_available():
        return "cuda"
    if device == "cuda":
        raise EmbedderUnavailable(f"{name} device = 'cuda', but torch sees no CUDA device here; use auto or cpu")
    return "cpu"


def first_line(exc: BaseException) -> str:
    """The first line of an exception's message (library errors can span many lines)."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
