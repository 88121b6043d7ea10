"""Fast BM25 indexes on disk: built once per (corpus, k1, b, analyzer), then memory-mapped by every cell.

``<cache_dir>/bm25/<key>/`` holds ``SparseBM25.save``'s files, ``key = sha256(k1, b, analyzer, sha256
of the texts)``. The index is built in a temporary directory and renamed into place while holding a
lock file, so concurrent Dask workers build it once and no reader ever sees half an index; a directory
that does not load is rebuilt. On a hit the cell's ``index_time_s`` is the memory-mapped load.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from retrieval.core.bm25_fast import SparseBM25
from zerda_eval.cache import build_lock, write_error
from zerda_eval.embedding_cache import texts_sha256

logger = logging.getLogger(__name__)
FORMAT_VERSION = 1


def index_key(k1: float, b: float, analyzer: dict[str, Any], texts: Sequence[str]) -> str:
    """The cache key of the BM25 index of ``texts`` (hex SHA-256)."""
    payload = {"format": FORMAT_VERSION, "k1": k1, "b": b, "analyzer": analyzer, "texts": texts_sha256(texts)}
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode("utf-8")).hexdigest()


def cached_sparse_bm25(
    texts: Sequence[str],
    analyze: Callable[[str], list[str]],
    k1: float,
    b: float,
    analyzer: dict[str, Any],
    cache_dir: str | Path,
) -> SparseBM25:
    """``SparseBM25(k1, b)`` over ``analyze(text)`` of every text, memory-mapped from ``cache_dir``.

    ``analyzer`` describes ``analyze`` (its options) for the key: two analyzers must never share one.
    """
    directory = Path(cache_dir) / "bm25" / index_key(k1, b, analyzer, texts)
    with build_lock(directory):
        if (directory / "meta.json").exists():
            try:
                return SparseBM25.load(directory, mmap=True)
            except (OSError, ValueError, KeyError, json.JSONDecodeError):
                logger.warning("BM25 index %s does not load; rebuilding it", directory)
                shutil.rmtree(directory, ignore_errors=True)
        for stale in directory.parent.glob(f".{directory.name}.*"):  # a killed builder's; we hold the lock
            shutil.rmtree(stale, ignore_errors=True)
        index = SparseBM25(k1=k1, b=b).fit(analyze(text) for text in texts)
        building = Path(tempfile.mkdtemp(prefix=f".{directory.name}.", dir=directory.parent))
        try:
            index.save(building)
            os.replace(building, directory)
        except BaseException as exc:
            shutil.rmtree(building, ignore_errors=True)
            if isinstance(exc, OSError):
                raise write_error(f"the BM25 index to {directory}", exc) from exc
            raise
    return SparseBM25.load(directory, mmap=True)
