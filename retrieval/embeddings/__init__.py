"""Offline text embedders behind one contract: ``embed(texts) -> float32 (n, dim)``, unit rows.

``wordllama`` (weights in the wheel, English), ``lsa`` (fitted on the searched corpus, any language)
and adapters for local sentence-transformers / fastembed / model2vec models. Heavy libraries are
imported only when an embedder is built.
"""

from retrieval.embeddings.base import (
    BaseEmbedder,
    CorpusFitted,
    Embedder,
    EmbedderError,
    EmbedderUnavailable,
    EmbedderWarning,
    finish_embeddings,
)
from retrieval.embeddings.registry import EMBEDDERS, load_embedder

__all__ = [
    "EMBEDDERS",
    "BaseEmbedder",
    "CorpusFitted",
    "Embedder",
    "EmbedderError",
    "EmbedderUnavailable",
    "EmbedderWarning",
    "finish_embeddings",
    "load_embedder",
]
