"""``[[reranks]]``: a cross-encoder re-ranking the top ``k`` of another entry's stored run.

```toml
[[reranks]]
name = "bm25_ce"
input = "bm25"                      # a system, fusion or tuned row of the file (one cell per dataset)
model = "st:/path/to/cross-encoder" # a local sentence-transformers CrossEncoder folder (relative: to the file)
k = 100                             # the input's top k re-ranked (at most [experiment].depth); default 100
batch_size = 32                     # pairs per CrossEncoder.predict batch
```

The model folder is checked when the file is read (missing, or not a one-label sequence-classification model: one
line naming it) and hashed (``folder_sha256``) into each rerank cell's id, so a model saved again to the
same path is a new cell. The cells themselves are made by ``spec.experiment`` (one per dataset, after
the cell they read); ``execution.rerank`` runs them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from retrieval.core.hashing import folder_sha256
from retrieval.pipeline.cross_encoders import DEFAULT_BATCH_SIZE, cross_encoder_folder
from retrieval.pipeline.errors import RetrieverError
from zerda_eval.checks import check_keys, check_name, check_positive_int, check_string
from zerda_eval.errors import ConfigError

RERANK = "rerank"  # the cell kind, and the results table's family
RERANK_KEYS = ("name", "input", "model", "k", "batch_size")
DEFAULT_RERANK_K = 100
MODEL_PREFIX = "st:"  # as an ``st:`` embedder names its folder
# What a rerank cell runs beyond the harness's own libraries: their versions are part of its id.
RERANK_LIBRARIES = ("sentence-transformers", "transformers", "torch", "tokenizers")


def parse_rerank(entry: Any, where: str, depth: int) -> dict[str, Any]:
    """One ``[[reranks]]`` entry, validated and resolved (defaults filled in, the model folder hashed)."""
    if not isinstance(entry, dict):
        raise ConfigError(f'{where}: each [[reranks]] entry must be a table with name, input and model = "st:/path"')
    check_keys(entry, RERANK_KEYS, where, "key of a rerank")
    name = check_name(entry.get("name"), f"{where}.name")
    input_name = check_string(entry.get("input"), f"{where}.input")
    model = check_string(entry.get("model"), f"{where}.model")
    if not model.startswith(MODEL_PREFIX) or len(model) == len(MODEL_PREFIX):
        raise ConfigError(
            f'{where}.model: give "{MODEL_PREFIX}/path/to/folder" (a local sentence-transformers CrossEncoder), '
            f"got {model!r}"
        )
    k = check_positive_int(entry.get("k", DEFAULT_RERANK_K), f"{where}.k")
    if k > depth:
        raise ConfigError(
            f"{where}.k: {k} is deeper than the runs it reads ([experiment].depth = {depth}); lower k or raise depth"
        )
    batch_size = check_positive_int(entry.get("batch_size", DEFAULT_BATCH_SIZE), f"{where}.batch_size")
    try:
        folder = cross_encoder_folder(model_folder(model))
    except RetrieverError as exc:
        raise ConfigError(f"{where}.model: {exc}") from None
    return {
        "name": name,
        "input": input_name,
        "params": {"model": model, "k": k, "batch_size": batch_size},
        "model_sha256": folder_sha256(folder),
    }


def model_folder(model: str) -> Path:
    """The folder an ``st:`` model names."""
    return Path(model[len(MODEL_PREFIX) :])
