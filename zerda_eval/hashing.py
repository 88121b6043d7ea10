"""The one content-hash recipe: every key, id and checksum the harness writes is made here.

- ``content_hash(value)``: SHA-256 hex of ``canonical_json(value)`` (key-sorted, compact, UTF-8,
  no NaN). Cell ids, result checksums, store keys (indexes, embeddings) and Dask task keys use it.
- ``texts_sha256(texts)``: SHA-256 of a corpus, each text length-prefixed (``["ab", "c"]`` differs
  from ``["a", "bc"]``), streamed so a corpus never has to be joined in memory.
- ``file_sha256(path)``: SHA-256 of a file's bytes, memoised per file version.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from retrieval.embeddings.packaged import file_sha256 as _sha256_of_file


def canonical_json(value: Any) -> str:
    """Key-sorted, compact JSON: the byte string hashes are taken of."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def content_hash(value: Any) -> str:
    """SHA-256 hex of ``canonical_json(value)``."""
    return bytes_sha256(canonical_json(value).encode("utf-8"))


def bytes_sha256(data: bytes) -> str:
    """SHA-256 hex of ``data``."""
    return hashlib.sha256(data).hexdigest()


def texts_sha256(texts: Iterable[str]) -> str:
    """SHA-256 of the texts in order, each length-prefixed."""
    digest = hashlib.sha256()
    for text in texts:
        data = text.encode("utf-8")
        digest.update(len(data).to_bytes(8, "little"))
        digest.update(data)
    return digest.hexdigest()


_DIGESTS: dict[tuple[str, int, int, int, int], str] = {}


def file_sha256(path: Path) -> str:
    """SHA-256 hex of a file's bytes: hashed once per process and file version.

    Memoised by (path, size, mtime, inode, ctime): any write changes one of them (the store replaces
    files, so the inode changes; an edit in place changes the ctime even when ``cp -p`` / ``rsync -t`` /
    ``touch -d`` put the mtime back), and then the file is hashed again.
    """
    info = os.stat(path)
    key = (str(Path(path).absolute()), info.st_size, info.st_mtime_ns, info.st_ino, info.st_ctime_ns)
    digest = _DIGESTS.get(key)
    if digest is None:
        digest = _DIGESTS[key] = _sha256_of_file(Path(path))
    return digest
