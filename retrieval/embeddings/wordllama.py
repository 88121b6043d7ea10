"""WordLlama: static token embeddings whose weights ship inside the ``wordllama`` wheel (English only).

The plain ``WordLlama.load()`` tries a download (the wheel ships the tokenizer under ``tokenizers/``
while the loader looks under ``tokenizer/``). Loading with the package directory as ``cache_dir`` and
``disable_download=True`` works offline and writes nothing (see shared/MODELS.md).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from retrieval.embeddings.base import (
    BaseEmbedder,
    EmbedderError,
    EmbedderUnavailable,
    check_positive_int,
    first_line,
)

FULL_DIM = 256
DIMS = (256, 128, 64)
# Batches are padded to their longest text: 16 ran about 1.6-2.4x faster than 64 on SciFact abstracts
# and TyDi-ar paragraphs here (the vectors are the same up to float rounding).
DEFAULT_BATCH_SIZE = 16


class WordLlamaEmbedder(BaseEmbedder):
    """``l2_supercat`` WordLlama, optionally truncated to 128 or 64 dimensions (Matryoshka training).

    Vectors are mean-pooled token embeddings; batches are padded to their longest text, so a smaller
    ``batch_size`` is faster on long texts. Output is deterministic (no sampling, no threads).
    """

    def __init__(self, dim: int = FULL_DIM, batch_size: int = DEFAULT_BATCH_SIZE):
        if dim not in DIMS:
            raise EmbedderError(f"wordllama dim={dim!r} is not available offline; use one of {DIMS}")
        check_positive_int("wordllama batch_size", batch_size)
        self.name = "wordllama"
        self.dim = dim
        self.batch_size = batch_size
        self.params = {"config": "l2_supercat", "dim": dim, "batch_size": batch_size}
        self._model = _load_model(dim)

    def _encode(self, texts: list[str]) -> np.ndarray:
        # norm=False: wordllama divides by a zero norm for texts without tokens (NaN rows);
        # finish_embeddings normalises and keeps such rows at zero.
        return self._model.embed(texts, norm=False, batch_size=self.batch_size)


def _load_model(dim: int):
    try:
        import wordllama
        from wordllama import WordLlama
    except ImportError as exc:
        raise EmbedderUnavailable("wordllama is not installed; pip install wordllama") from exc
    package_dir = Path(wordllama.__file__).parent
    try:
        return WordLlama.load(cache_dir=package_dir, disable_download=True, trunc_dim=None if dim == FULL_DIM else dim)
    except (FileNotFoundError, OSError) as exc:
        raise EmbedderUnavailable(
            f"wordllama weights not found under {package_dir} ({first_line(exc)}); reinstall wordllama>=0.4"
        ) from exc
