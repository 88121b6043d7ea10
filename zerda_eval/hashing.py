"""The harness's hash recipes: every key, id and checksum the harness writes is made here.

- ``content_hash(value)``: SHA-256 hex of ``canonical_json(value)`` (key-sorted, compact, UTF-8,
  no NaN). Cell ids, result checksums, store keys (indexes, embeddings) and Dask task keys use it.
- ``texts_sha256(texts)``: SHA-256 of a corpus, each text length-prefixed (``["ab", "c"]`` differs
  from ``["a", "bc"]``), streamed so a corpus never has to be joined in memory.
- ``bytes_sha256(data)`` and ``file_sha256(path)`` (memoised per file version): the reference side's
  recipes, ``retrieval.core.hashing``, which the model loaders in ``retrieval`` use too.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from typing import Any

from retrieval.core.hashing import bytes_sha256, file_sha256

__all__ = ["bytes_sha256", "canonical_json", "content_hash", "file_sha256", "texts_sha256"]


def canonical_json(value: Any) -> str:
    """Key-sorted, compact JSON: the byte string hashes are taken of."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def content_hash(value: Any) -> str:
    """SHA-256 hex of ``canonical_json(value)``."""
    return bytes_sha256(canonical_json(value).encode("utf-8"))


def texts_sha256(texts: Iterable[str]) -> str:
    """SHA-256 of the texts in order, each length-prefixed."""
    digest = hashlib.sha256()
    for text in texts:
        data = text.encode("utf-8")
        digest.update(len(data).to_bytes(8, "little"))
        digest.update(data)
    return digest.hexdigest()
