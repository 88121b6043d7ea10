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

A pretrained model's corpus is encoded in chunks of ``CHUNK_TEXTS`` texts, each stored on its own
(``chunks/<key>.npy`` + ``.json``, the key built like the corpus's from the chunk's texts) before the
corpus file is assembled from them in corpus order: a killed encode loses at most the chunk in flight, a
rerun encodes only the chunks not stored, and Dask workers can encode a corpus's chunks in parallel
(``store_chunk``; the executor plans them) for the corpus file to be assembled from, identical to a
serial encode. Chunk files are removed once the corpus file is written. A corpus-fitted embedder (LSA) is
encoded whole: its vectors depend on the corpus it was fitted on, which a chunk's key does not name.
One progress line per corpus encode (passages/s and ETA, shown after ``PROGRESS_DELAY_S``).
"""

from __future__ import annotations

import json
import time
import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from itertools import islice
from pathlib import Path
from typing import Any

import numpy as np

from retrieval.core.dense import release_pages
from retrieval.embeddings import CorpusFitted, Embedder, EmbedderError
from retrieval.embeddings.base import finish_embeddings
from zerda_eval.errors import ZerdaEvalWarning
from zerda_eval.hashing import content_hash, file_sha256, texts_sha256
from zerda_eval.store.build_costs import must_rebuild, record_build
from zerda_eval.store.files import atomic_write_text, build_lock, replaced_atomically

EMBED_BATCH = 16_384  # texts per embed call of a corpus-fitted embedder (LSA), encoded whole
CHUNK_TEXTS = 1024  # texts per stored chunk of a pretrained model's encode: the most a killed encode loses
CHUNKS_DIR = "chunks"
PROGRESS_DELAY_S = 2.0  # an encode shorter than this shows no progress line
CHECK_CELLS = 1 << 22  # values checked finite at a time when a file is loaded (a 4 MB mask, whatever the corpus)


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
        forced = must_rebuild(path)
        entry = {} if forced else _read_entry(entry_path)
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
        if isinstance(embedder, CorpusFitted):
            embedding_since = time.perf_counter()
            _embed_to_file(embedder, texts, path)
            embed_s, chunk_paths = time.perf_counter() - embedding_since, []
        else:
            embed_s, chunk_paths = _assemble_chunks(embedder, texts, path, cache_dir, rebuild=forced)
        files = {path.name: file_sha256(path)}
        if isinstance(embedder, CorpusFitted):
            files[state_path.name] = file_sha256(state_path)
        entry = {"files": files, "build_s": {"fit": fit_s, "embed": embed_s}}
        atomic_write_text(entry_path, json.dumps(entry, indent=2, sort_keys=True))
        for chunk in chunk_paths:  # the corpus file holds them now
            chunk.unlink(missing_ok=True)
            chunk.with_suffix(".json").unlink(missing_ok=True)
    record_build(fit_s + embed_s, time.perf_counter() - start)
    return _load_valid(path, expected_shape, mmap)


def corpus_is_stored(embedder: Embedder, texts: Sequence[str], cache_dir: str | Path) -> bool:
    """True when the corpus file of ``texts`` is stored with an entry and its checksum verifies."""
    path = Path(cache_dir) / f"{cache_key(embedder, texts)}.npy"
    entry = _read_entry(path.with_suffix(".json"))
    return bool(entry) and path.exists() and _intact(entry, path)


def chunk_spans(n_texts: int) -> list[tuple[int, int]]:
    """``[(start, stop), ...]``: the corpus positions of each stored chunk, in corpus order."""
    return [(start, min(start + CHUNK_TEXTS, n_texts)) for start in range(0, n_texts, CHUNK_TEXTS)]


def chunk_path(embedder: Embedder, texts: Sequence[str], cache_dir: str | Path) -> Path:
    """Where the vectors of one chunk of ``texts`` are stored (content-addressed, like a corpus)."""
    return Path(cache_dir) / CHUNKS_DIR / f"{cache_key(embedder, texts)}.npy"


def chunk_is_stored(embedder: Embedder, texts: Sequence[str], cache_dir: str | Path) -> bool:
    """True when the chunk's vectors are stored and verify (checksum, shape, finite values)."""
    path = chunk_path(embedder, texts, cache_dir)
    return _stored_chunk(path, (len(texts), embedder.dim)) is not None


def store_chunk(
    embedder: Embedder, texts: Sequence[str], cache_dir: str | Path, rebuild: bool = False
) -> tuple[np.ndarray, float]:
    """The vectors of one chunk of a corpus and the seconds encoding them cost, encoded unless stored.

    Built under a lock (one process encodes a chunk; the others wait and read it) and written
    atomically; the seconds are the encode's, recorded in the chunk's entry, so a corpus assembled from
    chunks that Dask workers encoded still reports what its encoding cost. ``rebuild`` (``--force``)
    encodes it again.
    """
    path = chunk_path(embedder, texts, cache_dir)
    shape = (len(texts), embedder.dim)
    with build_lock(path):
        stored = None if rebuild else _stored_chunk(path, shape)
        if stored is not None:
            return stored
        since = time.perf_counter()
        with _embedder_progress_off(embedder):  # the caller shows the corpus's progress
            block = finish_embeddings(embedder.embed(list(texts)), len(texts), embedder.dim, embedder.name)
        embed_s = time.perf_counter() - since
        with replaced_atomically(path) as tmp, tmp.open("wb") as handle:
            np.save(handle, block, allow_pickle=False)
        entry = {"files": {path.name: file_sha256(path)}, "build_s": {"embed": embed_s}}
        atomic_write_text(path.with_suffix(".json"), json.dumps(entry, indent=2, sort_keys=True))
    return block, embed_s


def _stored_chunk(path: Path, shape: tuple[int, int]) -> tuple[np.ndarray, float] | None:
    """A stored chunk's vectors and encode seconds when its entry, checksum and array verify, else ``None``."""
    try:
        entry = json.loads(path.with_suffix(".json").read_text(encoding="utf-8"))
        embed_s = float(entry["build_s"]["embed"])
        intact = entry["files"][path.name] == file_sha256(path)
    except (OSError, ValueError, KeyError, TypeError):
        return None
    array = _load_valid(path, shape, mmap=False) if intact else None
    return None if array is None else (array, embed_s)


def _assemble_chunks(
    embedder: Embedder, texts: Sequence[str], path: Path, cache_dir: Path, rebuild: bool
) -> tuple[float, list[Path]]:
    """Write the corpus file ``path`` from its chunks (stored, or encoded now), in corpus order.

    Returns the seconds encoding every chunk cost (recorded ones included) and the chunk files used.
    Memory holds one chunk at a time: texts are read chunk by chunk (a streamed corpus stays on disk).
    """
    embed_s, used = 0.0, []
    with replaced_atomically(path) as tmp, corpus_progress(embedder.name, len(texts)) as bar:
        out = np.lib.format.open_memmap(tmp, mode="w+", dtype=np.float32, shape=(len(texts), embedder.dim))
        remaining = iter(texts)
        for start, stop in chunk_spans(len(texts)):
            chunk = list(islice(remaining, stop - start))
            block, seconds = store_chunk(embedder, chunk, cache_dir, rebuild=rebuild)
            out[start:stop] = block
            embed_s += seconds
            used.append(chunk_path(embedder, chunk, cache_dir))
            bar.update(stop - start)
        out.flush()
        del out
    return embed_s, used


@contextmanager
def corpus_progress(name: str, total: int, enabled: bool = True) -> Iterator[Any]:
    """One tqdm line for a corpus encode: passages done, passages/s and the ETA; left on screen when done."""
    from tqdm.auto import tqdm

    desc = f"encoding with {name}"
    with tqdm(total=total, desc=desc, unit="passage", delay=PROGRESS_DELAY_S, disable=not enabled) as bar:
        yield bar


@contextmanager
def _embedder_progress_off(embedder: Embedder) -> Iterator[None]:
    """The corpus line replaces an embedder's own bar (its ``progress`` attribute) while chunks are encoded."""
    previous = getattr(embedder, "progress", None)
    if previous is not None:
        embedder.progress = False  # type: ignore[attr-defined]
    try:
        yield
    finally:
        if previous is not None:
            embedder.progress = previous  # type: ignore[attr-defined]


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
    """Embed a corpus-fitted embedder's ``texts`` batch by batch into the ``.npy`` file ``path`` (atomically).

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
    if array.dtype != np.float32 or array.shape != shape or not _all_finite(array):
        return None
    return array


def _all_finite(array: np.ndarray) -> bool:
    """True when every value is finite; checked a block of rows at a time (a mapped block's pages are then
    released), so an 8.8M x 384 corpus needs no 3.4 GB mask and does not stay resident."""
    rows = max(1, CHECK_CELLS // max(1, array.shape[1]))
    for start in range(0, len(array), rows):
        finite = bool(np.isfinite(array[start : start + rows]).all())
        release_pages(array, start, min(start + rows, len(array)))
        if not finite:
            return False
    return True
