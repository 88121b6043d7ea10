"""The reference side's hash recipes, against hashlib directly; the harness uses the same functions."""

from __future__ import annotations

import hashlib

from retrieval.core import hashing
from zerda_eval import hashing as harness


def test_file_sha256_is_hashlib_of_the_bytes(tmp_path):
    path = tmp_path / "weights.bin"
    data = bytes(range(256)) * 9000  # more than one 1 MiB block
    path.write_bytes(data)
    assert hashing.file_sha256(path) == hashlib.sha256(data).hexdigest()
    assert hashing.bytes_sha256(data) == hashlib.sha256(data).hexdigest()


def test_folder_sha256_follows_names_and_contents(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "x.txt").write_text("one", encoding="utf-8")
    first = hashing.folder_sha256(tmp_path)
    (tmp_path / "a" / "x.txt").rename(tmp_path / "a" / "y.txt")
    renamed = hashing.folder_sha256(tmp_path)
    (tmp_path / "a" / "y.txt").write_text("two", encoding="utf-8")
    assert len({first, renamed, hashing.folder_sha256(tmp_path)}) == 3


def test_memory_md5_is_the_documented_librarys_key():
    assert hashing.memory_md5("ذاكرة") == hashlib.md5("ذاكرة".encode(), usedforsecurity=False).hexdigest()


def test_the_harness_has_no_second_recipe():
    assert harness.file_sha256 is hashing.file_sha256 and harness.bytes_sha256 is hashing.bytes_sha256
