"""Fast BM25 indexes on disk: built once per (corpus, k1, b, analyzer), then memory-mapped by every cell.

``<cache_dir>/bm25/<key>/`` holds ``SparseBM25.save``'s files, ``key = content_hash(store and index formats,
k1, b, analyzer, texts_sha256 of the texts)``, and ``entry.json``: the SHA-256 of each of those files and
``build_s``, the seconds the build took (fit + save). The index is built in a temporary directory and renamed
into place while holding a lock file, so concurrent Dask workers build it once and no reader ever sees half an
index. An entry is verified against its checksums when opened (once per process and file version:
``hashing.file_sha256`` memoises by path, size, mtime, inode and ctime); one that fails, or does not load, is
rebuilt with a warning, and ``--force`` rebuilds it once per process. On a hit the cell's ``index_time_s`` is
the memory-mapped load and its ``index_build_s`` the recorded ``build_s``.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from retrieval.core.bm25_fast import SAVE_FORMAT, SparseBM25
from zerda_eval.errors import ZerdaEvalWarning
from zerda_eval.faults import fault_point
from zerda_eval.hashing import content_hash, file_sha256, texts_sha256
from zerda_eval.store.build_costs import must_rebuild, record_build
from zerda_eval.store.files import atomic_write_text, build_lock, file_mode, write_error

# The store's own layout (2: entry.json with checksums and build seconds); the key also carries the index's
# SAVE_FORMAT, so an index in an older format is never reused.
FORMAT_VERSION = 2
ENTRY_FILE = "entry.json"


def index_key(k1: float, b: float, analyzer: dict[str, Any], texts: Sequence[str]) -> str:
    """The cache key of the BM25 index of ``texts`` (hex SHA-256)."""
    payload = {
        "format": FORMAT_VERSION,
        "index_format": SAVE_FORMAT,
        "k1": k1,
        "b": b,
        "analyzer": analyzer,
        "texts": texts_sha256(texts),
    }
    return content_hash(payload)


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
    start = time.perf_counter()
    with build_lock(directory):
        if directory.exists() and not must_rebuild(directory):
            entry = verified_entry(directory)
            index = _load(directory) if entry is not None else None
            if index is not None:
                record_build(entry["build_s"], time.perf_counter() - start, f"BM25 index {directory.name}")
                return index
            warnings.warn(
                f"BM25 index {directory} fails its checksum or does not load (corrupt or edited); rebuilding it",
                ZerdaEvalWarning,
                stacklevel=2,
            )
        shutil.rmtree(directory, ignore_errors=True)
        for stale in directory.parent.glob(f".{directory.name}.*"):  # a killed builder's; we hold the lock
            shutil.rmtree(stale, ignore_errors=True)
        building_since = time.perf_counter()
        index = SparseBM25(k1=k1, b=b).fit(analyze(text) for text in texts)
        building = Path(tempfile.mkdtemp(prefix=f".{directory.name}.", dir=directory.parent))
        try:
            os.chmod(building, file_mode(directory=True))
            index.save(building)
            fault_point("in-index-build")
            build_s = time.perf_counter() - building_since
            checksums = {p.name: file_sha256(p) for p in sorted(building.iterdir()) if p.is_file()}
            atomic_write_text(building / ENTRY_FILE, json.dumps({"files": checksums, "build_s": build_s}, indent=2))
            os.replace(building, directory)
        except BaseException as exc:
            shutil.rmtree(building, ignore_errors=True)
            if isinstance(exc, OSError):
                raise write_error(f"the BM25 index to {directory}", exc) from exc
            raise
    index = SparseBM25.load(directory, mmap=True)
    record_build(build_s, time.perf_counter() - start, f"BM25 index {directory.name}")
    return index


def verified_entry(directory: Path) -> dict[str, Any] | None:
    """``entry.json`` of an index directory if every file it lists matches its SHA-256, else None."""
    try:
        entry = json.loads((directory / ENTRY_FILE).read_text(encoding="utf-8"))
        files, build_s = entry["files"], float(entry["build_s"])
        intact = bool(files) and all(file_sha256(directory / name) == digest for name, digest in files.items())
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    return {"files": files, "build_s": build_s} if intact else None


def _load(directory: Path) -> SparseBM25 | None:
    try:
        return SparseBM25.load(directory, mmap=True)
    except (OSError, ValueError, KeyError, json.JSONDecodeError):
        return None
