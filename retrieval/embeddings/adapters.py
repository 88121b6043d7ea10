"""Adapters for models users bring: sentence-transformers, fastembed, model2vec, all strictly offline.

No model hub is reachable, so a model is a LOCAL directory or a hub id whose files are already in
the local Hugging Face cache. Each library is imported only when its adapter is built; a missing
package or model raises a one-line ``EmbedderUnavailable`` saying what to install or pass.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from types import ModuleType

import numpy as np

from retrieval.core.hashing import folder_sha256
from retrieval.embeddings.base import (
    BaseEmbedder,
    EmbedderUnavailable,
    check_model_dim,
    check_positive_int,
    first_line,
    resolve_device,
)
from retrieval.embeddings.batching import encode_in_chunks

# Texts given to sentence-transformers at a time: it sorts each chunk by length before batching (little
# padding); the progress bar advances once per chunk.
ST_CHUNK = 512


def import_optional(module: str, package: str) -> ModuleType:
    """Import ``module`` or raise ``EmbedderUnavailable`` naming the pip ``package`` to install."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise EmbedderUnavailable(f"{package} is not installed; pip install {package}") from exc


def resolve_local_model(model: str | Path, library: str) -> Path:
    """A local model directory: ``model`` itself if it exists, else its snapshot in the HF cache.

    Never downloads. Raises ``EmbedderUnavailable`` when neither is there.
    """
    path = Path(model).expanduser()
    if path.exists():
        return path
    try:
        from huggingface_hub import snapshot_download

        return Path(snapshot_download(str(model), local_files_only=True))
    except Exception as exc:  # not installed, invalid id, not cached: all mean "not available offline"
        raise EmbedderUnavailable(
            f"{library} model {str(model)!r} is not a local directory nor in the Hugging Face cache "
            "(no model hub is reachable); pass the path of a downloaded copy"
        ) from exc


class SentenceTransformerEmbedder(BaseEmbedder):
    """A sentence-transformers model from a local directory (or filled cache), on ``device`` (``auto``: a GPU if any).

    The harness names it ``st:/path/to/model``. ``params`` carry a hash of the folder's files, so
    vectors cached for one model are never served for another saved later under the same path.
    """

    def __init__(
        self, model: str, batch_size: int = 32, device: str = "cpu", dim: int | None = None, progress: bool = True
    ):
        check_positive_int("sentence-transformers batch_size", batch_size)
        st = import_optional("sentence_transformers", "sentence-transformers")
        path = resolve_local_model(model, "sentence-transformers")
        device = resolve_device("sentence-transformers", device)
        try:
            self._model = st.SentenceTransformer(str(path), device=device, local_files_only=True)
        except Exception as exc:
            raise EmbedderUnavailable(f"sentence-transformers cannot load {str(path)!r}: {first_line(exc)}") from exc
        self.name = "sentence-transformers"
        # sentence-transformers 5.x renamed get_sentence_embedding_dimension; older releases only have the old name.
        size = getattr(self._model, "get_embedding_dimension", None) or self._model.get_sentence_embedding_dimension
        self.dim = int(size())
        check_model_dim(f"sentence-transformers model {str(model)!r}", dim, self.dim)
        self.batch_size = batch_size
        self.progress = progress
        self.params = {
            "model": str(model),
            "model_sha256": folder_sha256(path),
            "batch_size": batch_size,
            "device": device,
        }

    def _encode(self, texts: list[str]) -> np.ndarray:
        return encode_in_chunks(texts, ST_CHUNK, self._encode_chunk, "sentence-transformers", self.progress)

    def _encode_chunk(self, texts: list[str]) -> np.ndarray:
        return self._model.encode(texts, batch_size=self.batch_size, convert_to_numpy=True, show_progress_bar=False)


class FastEmbedEmbedder(BaseEmbedder):
    """A fastembed ONNX model: ``model`` is its fastembed name; ``path`` a local copy of its files."""

    def __init__(self, model: str, path: str | None = None, cache_dir: str | None = None, batch_size: int = 64):
        check_positive_int("fastembed batch_size", batch_size)
        fastembed = import_optional("fastembed", "fastembed")
        if path is not None and not Path(path).expanduser().exists():
            raise EmbedderUnavailable(f"fastembed model path {path!r} does not exist; pass a downloaded copy")
        options = {"specific_model_path": path} if path else {}
        try:
            self._model = fastembed.TextEmbedding(
                model_name=model, cache_dir=cache_dir, local_files_only=True, **options
            )
        except Exception as exc:
            raise EmbedderUnavailable(
                f"fastembed model {model!r} is not available offline ({type(exc).__name__}); "
                "pass path= to a downloaded copy"
            ) from exc
        self.name = "fastembed"
        self.batch_size = batch_size
        self.dim = len(next(iter(self._model.embed(["dimension probe"]))))
        self.params = {"model": model, "path": path, "batch_size": batch_size}

    def _encode(self, texts: list[str]) -> np.ndarray:
        return np.stack(list(self._model.embed(texts, batch_size=self.batch_size)))


class Model2VecEmbedder(BaseEmbedder):
    """A model2vec ``StaticModel`` (distilled static embeddings) from a local directory or filled cache."""

    def __init__(self, model: str, batch_size: int = 1024):
        check_positive_int("model2vec batch_size", batch_size)
        model2vec = import_optional("model2vec", "model2vec")
        path = resolve_local_model(model, "model2vec")
        try:
            self._model = model2vec.StaticModel.from_pretrained(path, force_download=False)
        except Exception as exc:
            raise EmbedderUnavailable(f"model2vec cannot load {str(path)!r}: {first_line(exc)}") from exc
        self.name = "model2vec"
        self.dim = int(self._model.dim)
        self.batch_size = batch_size
        self.params = {"model": str(model), "batch_size": batch_size}

    def _encode(self, texts: list[str]) -> np.ndarray:
        return self._model.encode(texts, batch_size=self.batch_size, use_multiprocessing=False)
