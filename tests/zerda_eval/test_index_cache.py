"""The BM25 index cache: built once per (corpus, k1, b, analyzer), memory-mapped, same answers, safe to share."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from retrieval.core import analyzer, tokenize
from retrieval.core.bm25_fast import ARRAYS, SparseBM25
from tests.arrays import backed_by_memmap
from zerda_eval.errors import RunError, ZerdaEvalWarning
from zerda_eval.store import indexes
from zerda_eval.store.indexes import cached_sparse_bm25, index_key

TEXTS = ["the cat sat on the mat", "a dog and a cat", "dogs bark", "مرحبا بالعالم", "the the the cat"]
QUERIES = [tokenize("cat mat"), tokenize("dog"), tokenize("بالعالم"), tokenize("nothing here")]
PLAIN = {"normalization": "none", "stemmer": None}


def built(cache_dir, k1=1.5, b=0.75, described=PLAIN, texts=TEXTS):
    return cached_sparse_bm25(texts, tokenize, k1, b, described, cache_dir)


def test_cached_index_is_memory_mapped_and_answers_as_one_built_in_memory(tmp_path):
    reference = SparseBM25().fit([tokenize(text) for text in TEXTS])
    for _ in range(2):  # built, then read back
        index = built(tmp_path)
        assert all(backed_by_memmap(getattr(index, name)) for name in ARRAYS)
        for got, expected in zip(index.top_k_batch(QUERIES, 3), reference.top_k_batch(QUERIES, 3), strict=True):
            np.testing.assert_array_equal(got, expected)
    assert len(list((tmp_path / "bm25").iterdir())) == 2  # the index directory and its lock file


def test_a_second_call_does_not_rebuild(tmp_path, monkeypatch):
    built(tmp_path)

    def no_fit(self, corpus_tokens):
        raise AssertionError("a cached index must be loaded, not rebuilt")

    monkeypatch.setattr(SparseBM25, "fit", no_fit)
    built(tmp_path)


def test_key_separates_params_analyzer_and_corpus():
    keys = {
        index_key(1.5, 0.75, PLAIN, TEXTS),
        index_key(1.2, 0.75, PLAIN, TEXTS),
        index_key(1.5, 0.5, PLAIN, TEXTS),
        index_key(1.5, 0.75, {"normalization": "light", "stemmer": None}, TEXTS),
        index_key(1.5, 0.75, PLAIN, TEXTS[:-1]),
    }
    assert len(keys) == 5
    assert index_key(1.5, 0.75, PLAIN, list(TEXTS)) == index_key(1.5, 0.75, PLAIN, TEXTS)


def test_analyzer_options_reach_the_index(tmp_path):
    light = analyzer("light", None)
    index = cached_sparse_bm25(["أحمد في المدرسة"], light, 1.5, 0.75, {"normalization": "light"}, tmp_path)
    assert "احمد" in index.vocabulary and "أحمد" not in index.vocabulary


def test_an_index_that_does_not_load_is_rebuilt(tmp_path):
    built(tmp_path)
    directory = tmp_path / "bm25" / index_key(1.5, 0.75, PLAIN, TEXTS)
    (directory / "vocabulary.json").write_text("{broken", encoding="utf-8")
    with pytest.warns(ZerdaEvalWarning, match="rebuilding"):
        index = built(tmp_path)
    assert index.n_docs == len(TEXTS)


def test_an_index_with_other_values_of_the_same_shape_is_rebuilt(tmp_path):
    """The attack of issue 17.3: a same-shape corruption loads fine; only the checksum catches it."""
    reference = SparseBM25().fit([tokenize(text) for text in TEXTS])
    built(tmp_path)
    directory = tmp_path / "bm25" / index_key(1.5, 0.75, PLAIN, TEXTS)
    for path in directory.glob("*.npy"):
        array = np.load(path)
        if array.dtype.kind == "f":
            np.save(path, np.full_like(array, 0.25))
    with pytest.warns(ZerdaEvalWarning, match="checksum"):
        index = built(tmp_path)
    for got, expected in zip(index.top_k_batch(QUERIES, 3), reference.top_k_batch(QUERIES, 3), strict=True):
        np.testing.assert_array_equal(got, expected)


def test_entry_records_checksums_and_build_seconds(tmp_path):
    import hashlib
    import json

    built(tmp_path)
    directory = tmp_path / "bm25" / index_key(1.5, 0.75, PLAIN, TEXTS)
    entry = json.loads((directory / "entry.json").read_text(encoding="utf-8"))
    assert entry["build_s"] > 0
    names = {p.name for p in directory.iterdir()} - {"entry.json"}
    assert set(entry["files"]) == names
    for name, digest in entry["files"].items():
        assert digest == hashlib.sha256((directory / name).read_bytes()).hexdigest()


def test_concurrent_builders_build_once(tmp_path, monkeypatch):
    calls = []
    fit = SparseBM25.fit

    def counting_fit(self, corpus_tokens):
        calls.append(1)
        return fit(self, corpus_tokens)

    monkeypatch.setattr(SparseBM25, "fit", counting_fit)
    threads = [threading.Thread(target=built, args=(tmp_path,)) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(calls) == 1
    assert not [p for p in (tmp_path / "bm25").iterdir() if p.name.startswith(".")]  # no temporary left


def test_a_killed_builders_temporary_folder_is_cleared(tmp_path):
    key = index_key(1.5, 0.75, PLAIN, TEXTS)
    stale = tmp_path / "bm25" / f".{key}.killed"
    stale.mkdir(parents=True)
    (stale / "indptr.npy").write_bytes(b"half")
    built(tmp_path)
    assert not stale.exists()


def test_a_failed_build_leaves_no_index(tmp_path, monkeypatch):
    def failing_save(self, directory):
        (directory / "indptr.npy").write_bytes(b"half")
        raise OSError("disk full")

    monkeypatch.setattr(SparseBM25, "save", failing_save)
    with pytest.raises(RunError, match=r"cannot write the BM25 index .*\(disk full\)"):
        built(tmp_path)
    assert [p.name for p in (tmp_path / "bm25").iterdir()] == [f"{index_key(1.5, 0.75, PLAIN, TEXTS)}.lock"]
    assert indexes.SparseBM25 is SparseBM25


CHILD = """
import os, sys
from pathlib import Path
from retrieval.core import tokenize
from retrieval.core.bm25_fast import SparseBM25
from zerda_eval.store.indexes import cached_sparse_bm25

cache_dir, markers = Path(sys.argv[1]), Path(sys.argv[2])
fit = SparseBM25.fit

def marking_fit(self, corpus_tokens):
    (markers / f"built-{os.getpid()}").touch()
    return fit(self, corpus_tokens)

SparseBM25.fit = marking_fit
(markers / f"arrived-{os.getpid()}").touch()  # next: the build lock
index = cached_sparse_bm25(sys.argv[3:], tokenize, 1.5, 0.75, {"normalization": "none", "stemmer": None}, cache_dir)
print(index.n_docs)
"""


def test_a_builder_killed_mid_build_then_three_processes_build_once(tmp_path):
    """What Dask workers on one cache do: one dies inside the build, then three ask for the index at once.

    The kill lands inside the build (``ZERDA_EVAL_FAULT=kill-in-index-build``: the index saved in its
    temporary folder, no checksums yet); the three wait on the build lock this test holds until all three
    have started, so they contend for it whatever the machine's speed.
    """
    import os
    import signal
    import subprocess
    import sys
    import time

    from zerda_eval.faults import FAULT_ENV
    from zerda_eval.store.files import build_lock

    cache, markers = tmp_path / "cache", tmp_path / "markers"
    markers.mkdir()
    command = [sys.executable, "-c", CHILD, str(cache), str(markers), *TEXTS]
    env = {key: value for key, value in os.environ.items() if key != FAULT_ENV}
    directory = cache / "bm25" / index_key(1.5, 0.75, PLAIN, TEXTS)

    killed = subprocess.run(command, env={**env, FAULT_ENV: "kill-in-index-build"}, capture_output=True, text=True)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    [half_built] = directory.parent.glob(f".{directory.name}.*")  # where the kill landed: mid-build
    assert (half_built / "indptr.npy").is_file() and not (half_built / indexes.ENTRY_FILE).exists()
    assert not directory.exists()
    for marker in markers.iterdir():
        marker.unlink()

    with build_lock(directory):
        children = [
            subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for _ in range(3)
        ]
        deadline = time.monotonic() + 120
        while len(list(markers.glob("arrived-*"))) < 3 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert len(list(markers.glob("arrived-*"))) == 3, "the children did not start"
    outputs = [child.communicate(timeout=120) for child in children]
    assert [child.returncode for child in children] == [0, 0, 0], outputs
    assert [out.strip() for out, _ in outputs] == [str(len(TEXTS))] * 3
    assert len(list(markers.glob("built-*"))) == 1
    assert not half_built.exists() and indexes.verified_entry(directory) is not None
