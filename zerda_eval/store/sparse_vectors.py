"""Sparse corpus vectors on disk (a learned-sparse encoder's), content-addressed in chunks like dense ones.

A corpus is encoded in the dense store's chunks (``store.embeddings.chunk_spans``, ``CHUNK_TEXTS`` texts
each); chunk ``i`` is ``<cache_dir>/sparse/<key>.npz`` (CSR arrays ``indptr``, ``indices``, ``values``,
no pickle) with ``key = content_hash(encoder.name, encoder.params, texts_sha256 of the chunk's texts)``
(the params name the model and head files' SHA-256, ``top_k``, precision, device and the recipe), and
``<key>.json``, written last, its entry: the file's SHA-256 and the seconds encoding it took. There is
no assembled corpus file: the corpus is its chunks in order, so a killed encode loses one chunk and a
rerun encodes only the missing ones. A chunk that fails its checksum or its checks (shape, ids in
range, at most ``top_k`` finite positive values per row) is re-encoded with a warning. Writes are atomic
and under ``build_lock``; ``--force`` re-encodes a chunk once per process.
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

from zerda_eval.errors import ZerdaEvalWarning
from zerda_eval.hashing import content_hash, file_sha256, texts_sha256
from zerda_eval.store.build_costs import must_rebuild, record_build
from zerda_eval.store.embeddings import chunk_spans, corpus_progress
from zerda_eval.store.files import atomic_write_text, build_lock, replaced_atomically

SPARSE_DIR = "sparse"


def sparse_corpus(encoder: Any, texts: Sequence[str], cache_dir: str | Path, workers: int = 1) -> Any:
    """The ``[len(texts), encoder.dim]`` CSR matrix of ``texts`` from ``encoder.encode``, stored chunk by chunk.

    ``encoder`` has ``name``, ``params``, ``dim``, ``top_k`` and ``encode(texts, workers) -> csr_matrix``.
    Records the from-scratch encode seconds of the chunks (``record_build``), stored ones included.
    """
    from scipy.sparse import vstack

    start, build_s, blocks = time.perf_counter(), 0.0, []
    remaining = iter(texts)
    with corpus_progress(encoder.name, len(texts)) as bar:
        for first, stop in chunk_spans(len(texts)):
            block, seconds = _chunk(encoder, list(islice(remaining, stop - first)), Path(cache_dir), workers)
            blocks.append(block)
            build_s += seconds
            bar.update(stop - first)
    record_build(build_s, time.perf_counter() - start)
    return vstack(blocks, format="csr", dtype=np.float32) if blocks else _empty(encoder.dim)


def chunk_file(encoder: Any, texts: Sequence[str], cache_dir: str | Path) -> Path:
    """Where the sparse vectors of one chunk of ``texts`` are stored."""
    key = content_hash({"name": encoder.name, "params": encoder.params, "texts": texts_sha256(texts)})
    return Path(cache_dir) / SPARSE_DIR / f"{key}.npz"


def _chunk(encoder: Any, texts: list[str], cache_dir: Path, workers: int) -> tuple[Any, float]:
    """One chunk's CSR matrix and its encode seconds: read back if stored and valid, else encoded and stored."""
    path = chunk_file(encoder, texts, cache_dir)
    with build_lock(path):
        forced = must_rebuild(path)
        stored = None if forced else _stored(path, encoder, len(texts))
        if stored is not None:
            return stored
        if path.exists() and not forced:
            warnings.warn(
                f"sparse vector file {path} is corrupt or fails its checksum; encoding it again",
                ZerdaEvalWarning,
                stacklevel=3,
            )
        since = time.perf_counter()
        matrix = encoder.encode(texts, workers)
        encode_s = time.perf_counter() - since
        with replaced_atomically(path) as tmp, tmp.open("wb") as handle:
            np.savez(handle, indptr=matrix.indptr, indices=matrix.indices, values=matrix.data)
        entry = {"files": {path.name: file_sha256(path)}, "build_s": {"encode": encode_s}}
        atomic_write_text(path.with_suffix(".json"), json.dumps(entry, indent=2, sort_keys=True))
    return matrix, encode_s


def _stored(path: Path, encoder: Any, n_texts: int) -> tuple[Any, float] | None:
    """The stored chunk and its encode seconds when the entry, checksum and arrays verify, else ``None``."""
    from scipy.sparse import csr_matrix

    try:
        entry = json.loads(path.with_suffix(".json").read_text(encoding="utf-8"))
        encode_s = float(entry["build_s"]["encode"])
        if entry["files"][path.name] != file_sha256(path):
            return None
        with np.load(path, allow_pickle=False) as arrays:
            indptr, indices, values = arrays["indptr"], arrays["indices"], arrays["values"]
    except (OSError, ValueError, KeyError, TypeError, EOFError):
        return None
    counts = np.diff(indptr)
    valid = (
        indptr.shape == (n_texts + 1,)
        and indptr[0] == 0
        and indptr[-1] == indices.size == values.size
        and (counts >= 0).all()
        and (counts <= encoder.top_k).all()
        and values.dtype == np.float32
        and (values > 0).all()
        and np.isfinite(values).all()
        and (indices.size == 0 or (indices.min() >= 0 and indices.max() < encoder.dim))
    )
    return (csr_matrix((values, indices, indptr), shape=(n_texts, encoder.dim)), encode_s) if valid else None


def _empty(dim: int) -> Any:
    from scipy.sparse import csr_matrix

    return csr_matrix((0, dim), dtype=np.float32)
