"""Corpus embeddings on disk, so a grid embeds each corpus once per (model, parameters, corpus).

The file is ``<cache_dir>/<key>.npy`` with ``key = sha256(embedder.name, embedder.params as sorted
JSON, sha256 of the texts)``. A corpus-fitted embedder (LSA) also leaves its fitted state in
``<key>.fit.npz`` (plain arrays, no pickle), so a rerun restores it instead of refitting.
Writes are atomic (``cache.replaced_atomically``: temporary file + ``os.replace``), so a crash never
leaves a half-written file under the final name; a file that is still unreadable, of the wrong shape
or with non-finite values is treated as a miss and rewritten.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Sequence
from itertools import islice
from pathlib import Path

import numpy as np

from retrieval.embeddings import CorpusFitted, Embedder, EmbedderError
from retrieval.embeddings.base import finish_embeddings
from zerda_eval.cache import build_lock, replaced_atomically

logger = logging.getLogger(__name__)
EMBED_BATCH = 16_384  # texts per embed call; every bundled corpus fits in one (identical to one call)


def texts_sha256(texts: Sequence[str]) -> str:
    """SHA-256 of the texts in order, each length-prefixed so ``["ab", "c"]`` differs from ``["a", "bc"]``."""
    digest = hashlib.sha256()
    for text in texts:
        data = text.encode("utf-8")
        digest.update(len(data).to_bytes(8, "little"))
        digest.update(data)
    return digest.hexdigest()


def cache_key(embedder: Embedder, texts: Sequence[str]) -> str:
    """The cache key of ``texts`` embedded by ``embedder`` (hex SHA-256)."""
    payload = json.dumps(
        {"name": embedder.name, "params": embedder.params, "texts": texts_sha256(texts)},
        sort_keys=True,
        ensure_ascii=False,
    )
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


def embed_corpus(embedder: Embedder, texts: Sequence[str], cache_dir: str | Path, mmap: bool = False) -> np.ndarray:
    """Embeddings of ``texts`` (float32, ``(len(texts), embedder.dim)``), from the cache when present.

    The embedder leaves fitted on ``texts`` (a corpus-fitted one, LSA, must be, to embed queries
    later, even on a cache hit): restored from its saved state when there is one, else ``fit(texts)``,
    which is what makes the key (which hashes ``texts``) determine the vectors. For pretrained models
    ``fit`` is a no-op. ``mmap=True`` returns a read-only memory map of the cached file.
    """
    cache_dir = Path(cache_dir)
    key = cache_key(embedder, texts)
    path = cache_dir / f"{key}.npy"
    expected_shape = (len(texts), embedder.dim)
    with build_lock(path):  # concurrent workers: one fits and embeds, the others then read its files
        _fit_or_restore(embedder, texts, cache_dir / f"{key}.fit.npz")
        if path.exists():
            cached = _load_valid(path, expected_shape, mmap)
            if cached is not None:
                return cached
            logger.warning("embedding cache file %s is corrupt or incomplete; recomputing it", path)
        _embed_to_file(embedder, texts, path)
    return _load_valid(path, expected_shape, mmap)


def _embed_to_file(embedder: Embedder, texts: Sequence[str], path: Path) -> None:
    """Embed ``texts`` batch by batch straight into the ``.npy`` file ``path`` (written atomically).

    Batches are consumed from one pass over ``texts``, so a streamed corpus is never held in memory.
    """
    with replaced_atomically(path) as tmp:
        out = np.lib.format.open_memmap(tmp, mode="w+", dtype=np.float32, shape=(len(texts), embedder.dim))
        start, remaining = 0, iter(texts)
        while batch := list(islice(remaining, EMBED_BATCH)):
            block = finish_embeddings(embedder.embed(batch), len(batch), embedder.dim, embedder.name)
            out[start : start + len(batch)] = block
            start += len(batch)
        out.flush()
        del out


def _fit_or_restore(embedder: Embedder, texts: Sequence[str], state_path: Path) -> None:
    """Restore a corpus-fitted embedder from ``state_path`` if it is readable, else fit it and save its state."""
    if not isinstance(embedder, CorpusFitted):
        embedder.fit(texts)
        return
    if state_path.exists():
        try:
            with np.load(state_path, allow_pickle=False) as state:
                embedder.restore(state)
            return
        except (OSError, ValueError, EOFError, KeyError, EmbedderError):
            logger.warning("fitted-state file %s is corrupt or incomplete; refitting", state_path)
    embedder.fit(texts)
    with replaced_atomically(state_path) as tmp, tmp.open("wb") as handle:
        np.savez(handle, **embedder.fitted_state())


def _load_valid(path: Path, shape: tuple[int, int], mmap: bool) -> np.ndarray | None:
    """The array in ``path`` if it is a float32 array of ``shape`` with finite values, else ``None``."""
    try:
        array = np.load(path, mmap_mode="r" if mmap else None, allow_pickle=False)
    except (OSError, ValueError, EOFError):
        return None
    if array.dtype != np.float32 or array.shape != shape or not np.isfinite(array).all():
        return None
    return array
