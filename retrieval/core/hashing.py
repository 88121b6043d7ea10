"""The SHA-256 recipes of the reference side, one per kind of thing hashed (the harness's
``zerda_eval.hashing`` imports them and adds its JSON and corpus recipes; ``retrieval`` never imports it).

- ``bytes_sha256(data)``: SHA-256 hex of bytes (a module's source, a tokenizer's JSON, a result file).
- ``file_sha256(path)``: SHA-256 hex of a file's bytes, streamed, memoised per file version (model weights,
  run files, cache entries, dataset files).
- ``folder_sha256(folder)``: SHA-256 hex over every file of a folder (relative path, then its file hash).
- ``normalized_text_sha256(text)``: SHA-256 hex of text lower-cased with whitespace collapsed: zerda's
  hybrid merge key (``ScoredChunk.content_hash``, seed 000: results "keyed by content_hash").
- ``memory_md5(content)``: MD5 hex of UTF-8 text, the documented pipeline library's de-duplication key of a
  memory entry (seed 004's quirk, kept: the key is part of that API, not a checksum of ours).
"""

from __future__ import annotations

import hashlib
import os
from functools import lru_cache
from pathlib import Path

_FILE_DIGESTS: dict[tuple[str, int, int, int, int], str] = {}


def bytes_sha256(data: bytes) -> str:
    """SHA-256 hex of ``data``."""
    return hashlib.sha256(data).hexdigest()


def file_sha256(path: str | Path) -> str:
    """SHA-256 hex of a file's bytes: hashed once per process and file version.

    Memoised by (path, size, mtime, inode, ctime): any write changes one of them (a replaced file gets
    another inode; an edit in place changes the ctime even when ``cp -p`` / ``rsync -t`` / ``touch -d``
    put the mtime back), and then the file is hashed again.
    """
    info = os.stat(path)
    key = (str(Path(path).absolute()), info.st_size, info.st_mtime_ns, info.st_ino, info.st_ctime_ns)
    digest = _FILE_DIGESTS.get(key)
    if digest is None:
        digest = _FILE_DIGESTS[key] = _read_sha256(Path(path))
    return digest


def _read_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while block := handle.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


def folder_sha256(folder: Path) -> str:
    """SHA-256 hex over every file of ``folder`` (relative path, length-prefixed, then its file hash), sorted.

    A user's model folder is named by its path only; hashing its contents keeps the embedding cache
    from serving vectors of an earlier model saved to the same path.
    """
    digest = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        name = path.relative_to(folder).as_posix().encode("utf-8")
        digest.update(len(name).to_bytes(8, "little") + name)
        digest.update(file_sha256(path).encode("ascii"))
    return digest.hexdigest()


@lru_cache(maxsize=1 << 16)
def normalized_text_sha256(text: str) -> str:
    """SHA-256 hex of ``text`` lower-cased with whitespace collapsed: zerda's hybrid merge key.

    Memoised: the hybrid merge asks for the same chunk's key once per branch and query.
    """
    return bytes_sha256(" ".join(text.lower().split()).encode("utf-8"))


def memory_md5(content: str) -> str:
    """MD5 hex of the UTF-8 content: the documented pipeline library's de-duplication key of a memory entry."""
    return hashlib.md5(content.encode("utf-8"), usedforsecurity=False).hexdigest()
