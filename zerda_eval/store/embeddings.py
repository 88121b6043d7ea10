"""Corpus embeddings on disk, so a grid embeds each corpus once per (model, parameters, corpus).

The file is ``<cache_dir>/<key>.npy`` with ``key = content_hash(embedder.name, embedder.params,
texts_sha256 of the texts)``. A corpus-fitted embedder (LSA) also leaves its fitted state in
``<key>.fit.npz`` (plain arrays, no pickle), so a rerun restores it instead of refitting.
``<key>.json``, written last, is the entry: the SHA-256 of each file and the seconds fitting and
embedding took (``build_s``: the cell's ``index_build_s`` on a hit). Writes are atomic
(``store.files.replaced_atomically``: temporary file + ``os.replace``), so a crash never leaves a
half-written file under the final name; a file that fails its checksum, is unreadable, of the wrong
shape or with non-finite values is recomputed with a warning. ``--force`` recomputes an entry once
per process.
"""

from __future__ import annotations

import json
import time
import warnings
from collections.abc import Sequence
from itertools import islice
from pathlib import Path
from typing import Any

import numpy as np

from retrieval.embeddings import CorpusFitted, Embedder, EmbedderError
from retrieval.embeddings.base import finish_embeddings
from zerda_eval.errors import ZerdaEvalWarning
from zerda_eval.hashing import content_hash, file_sha256, texts_sha256
from zerda_eval.store.build_costs import must_rebuild, record_build
from zerda_eval.store.files import atomic_write_text, build_lock, replaced_atomically

EMBED_BATCH = 16_384  # texts per embed call; every bundled corpus fits in one (identical to one call)


def cache_key(embedder: Embedder, texts: Sequence[str]) -> str:
    """The cache key of ``texts`` embedded by ``embedder`` (hex SHA-256)."""
    return content_hash({"name": embedder.name, "params": embedder.params, "texts": texts_sha256(texts)})


def embed_corpus(embedder: Embedder, texts: Sequence[str], cache_dir: str | Path, mmap: bool = False) -> np.ndarray:
    """Embeddings of ``texts`` (float32, ``(len(texts), embedder.dim)``), from the cache when present.

    The embedder leaves fitted on ``texts`` (a corpus-fitted one, LSA, must be, to embed queries
    later, even on a cache hit): restored from its saved state when there is one, else ``fit(texts)``,
    which is what makes the key (which hashes ``texts``) determine the vectors. For pretrained models
    ``fit`` is a no-op. ``mmap=True`` returns a read-only memory map of the cached file.
    """
    cache_dir = Path(cache_dir)
    key = cache_key(embedder, texts)
    path, state_path, entry_path = (cache_dir / f"{key}{suffix}" for suffix in (".npy", ".fit.npz", ".json"))
    expected_shape = (len(texts), embedder.dim)
    start = time.perf_counter()
    with build_lock(path):  # concurrent workers: one fits and embeds, the others then read its files
        entry = {} if must_rebuild(path) else _read_entry(entry_path)
        fit_s = _fit_or_restore(embedder, texts, state_path, entry)
        if entry and path.exists():
            cached = _load_valid(path, expected_shape, mmap) if _intact(entry, path) else None
            if cached is not None:
                record_build(fit_s + entry["build_s"]["embed"], time.perf_counter() - start)
                return cached
            warnings.warn(
                f"embedding cache file {path} is corrupt (fails its checksum or its shape); recomputing it",
                ZerdaEvalWarning,
                stacklevel=2,
            )
        embedding_since = time.perf_counter()
        _embed_to_file(embedder, texts, path)
        embed_s = time.perf_counter() - embedding_since
        files = {path.name: file_sha256(path)}
        if isinstance(embedder, CorpusFitted):
            files[state_path.name] = file_sha256(state_path)
        entry = {"files": files, "build_s": {"fit": fit_s, "embed": embed_s}}
        atomic_write_text(entry_path, json.dumps(entry, indent=2, sort_keys=True))
    record_build(fit_s + embed_s, time.perf_counter() - start)
    return _load_valid(path, expected_shape, mmap)


def _read_entry(path: Path) -> dict[str, Any]:
    """The entry file (checksums, build seconds), or ``{}`` when it is missing or malformed."""
    try:
        entry = json.loads(path.read_text(encoding="utf-8"))
        float(entry["build_s"]["fit"]) + float(entry["build_s"]["embed"])
        dict(entry["files"])
    except (OSError, ValueError, KeyError, TypeError):
        return {}
    return entry


def _intact(entry: dict[str, Any], path: Path) -> bool:
    """True when ``path`` matches the SHA-256 the entry recorded for it."""
    return entry["files"].get(path.name) == file_sha256(path)


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


def _fit_or_restore(embedder: Embedder, texts: Sequence[str], state_path: Path, entry: dict[str, Any]) -> float:
    """Restore a corpus-fitted embedder from ``state_path`` if it verifies, else fit it and save its state.

    Returns the seconds fitting costs from scratch: measured now, or recorded in the entry when restored.
    """
    if not isinstance(embedder, CorpusFitted):
        since = time.perf_counter()
        embedder.fit(texts)
        return time.perf_counter() - since
    if entry and state_path.name in entry["files"] and state_path.exists():
        try:
            if not _intact(entry, state_path):
                raise ValueError("checksum")
            with np.load(state_path, allow_pickle=False) as state:
                embedder.restore(state)
            return float(entry["build_s"]["fit"])
        except (OSError, ValueError, EOFError, KeyError, EmbedderError):
            warnings.warn(
                f"fitted-state file {state_path} is corrupt or fails its checksum; refitting",
                ZerdaEvalWarning,
                stacklevel=3,
            )
    since = time.perf_counter()
    embedder.fit(texts)
    fit_s = time.perf_counter() - since
    with replaced_atomically(state_path) as tmp, tmp.open("wb") as handle:
        np.savez(handle, **embedder.fitted_state())
    return fit_s


def _load_valid(path: Path, shape: tuple[int, int], mmap: bool) -> np.ndarray | None:
    """The array in ``path`` if it is a float32 array of ``shape`` with finite values, else ``None``."""
    try:
        array = np.load(path, mmap_mode="r" if mmap else None, allow_pickle=False)
    except (OSError, ValueError, EOFError):
        return None
    if array.dtype != np.float32 or array.shape != shape or not np.isfinite(array).all():
        return None
    return array
