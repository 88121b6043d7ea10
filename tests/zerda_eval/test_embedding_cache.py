"""Corpus embeddings cached on disk: one computation per (model, params, corpus), safe against corruption."""

from __future__ import annotations

import numpy as np
import pytest

from retrieval.embeddings import BaseEmbedder, finish_embeddings
from retrieval.embeddings.lsa import LSAEmbedder
from zerda_eval.errors import RunError, ZerdaEvalWarning
from zerda_eval.store.embeddings import cache_key, embed_corpus, texts_sha256

TEXTS = ["alpha beta", "gamma delta epsilon", "beta gamma", "zeta eta theta"]


def cache_files(folder) -> list[str]:
    """Files in a cache folder and below (stored chunks), without the lock files builders synchronise on."""
    return sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file() and p.suffix != ".lock")


class InOrderOnly(list):
    """A list that refuses random access: what embedding a streamed corpus may use."""

    def __getitem__(self, index):
        raise AssertionError("a streamed corpus is read in order, not indexed")


class CountingEmbedder(BaseEmbedder):
    """Character-count vectors; counts how many texts it embedded."""

    def __init__(self, dim: int = 8, name: str = "counting"):
        self.name, self.dim, self.params = name, dim, {"dim": dim}
        self.embedded = 0

    def _encode(self, texts):
        self.embedded += len(texts)
        return np.array([[t.count(c) + 0.5 for c in "abcdefgh"[: self.dim]] for t in texts])


def test_second_call_reads_the_cache(tmp_path):
    embedder = CountingEmbedder()
    first = embed_corpus(embedder, TEXTS, tmp_path)
    second = embed_corpus(embedder, TEXTS, tmp_path)
    assert embedder.embedded == len(TEXTS)
    np.testing.assert_array_equal(first, second)
    np.testing.assert_array_equal(second, CountingEmbedder().embed(TEXTS))
    key = cache_key(embedder, TEXTS)
    assert cache_files(tmp_path) == [f"{key}.json", f"{key}.npy"]  # the entry and the array; no temp left


def test_key_depends_on_model_params_and_corpus():
    base = cache_key(CountingEmbedder(), TEXTS)
    assert cache_key(CountingEmbedder(), list(TEXTS)) == base
    assert cache_key(CountingEmbedder(dim=4), TEXTS) != base
    assert cache_key(CountingEmbedder(name="other"), TEXTS) != base
    assert cache_key(CountingEmbedder(), TEXTS[::-1]) != base
    assert texts_sha256(["ab", "c"]) != texts_sha256(["a", "bc"])


def test_mmap_returns_a_read_only_map(tmp_path):
    embedder = CountingEmbedder()
    for _ in range(2):  # miss, then hit
        mapped = embed_corpus(embedder, TEXTS, tmp_path, mmap=True)
        assert isinstance(mapped, np.memmap) and not mapped.flags.writeable
        np.testing.assert_array_equal(mapped, CountingEmbedder().embed(TEXTS))


@pytest.mark.parametrize(
    "damage",
    [
        lambda path: path.write_bytes(path.read_bytes()[:-20]),  # truncated
        lambda path: path.write_bytes(b"not a numpy file"),
        lambda path: np.save(path, np.zeros((2, 8), dtype=np.float32)),  # wrong shape
        lambda path: np.save(path, np.full((4, 8), np.nan, dtype=np.float32)),  # non-finite
    ],
)
def test_corrupt_cache_is_recomputed(tmp_path, damage):
    embedder = CountingEmbedder()
    expected = embed_corpus(embedder, TEXTS, tmp_path)
    path = tmp_path / f"{cache_key(embedder, TEXTS)}.npy"
    damage(path)
    with pytest.warns(ZerdaEvalWarning, match="corrupt"):
        recomputed = embed_corpus(embedder, TEXTS, tmp_path)
    assert embedder.embedded == 2 * len(TEXTS)
    np.testing.assert_array_equal(recomputed, expected)
    np.testing.assert_array_equal(np.load(path), expected)


def test_failed_embedding_leaves_no_file(tmp_path):
    class Failing(CountingEmbedder):
        def _encode(self, texts):
            raise RuntimeError("model crashed")

    with pytest.raises(RuntimeError, match="model crashed"):
        embed_corpus(Failing(), TEXTS, tmp_path / "cache")
    assert not (tmp_path / "cache").exists() or not cache_files(tmp_path / "cache")


def test_interrupted_write_leaves_no_temp_nor_corpus_file_and_keeps_the_stored_chunks(tmp_path, monkeypatch):
    monkeypatch.setattr("zerda_eval.store.embeddings.CHUNK_TEXTS", 2)
    written = []

    def crash_on_second_chunk(matrix, n_texts, dim, name):
        written.append(n_texts)
        if len(written) == 2:
            raise OSError("disk full")
        return finish_embeddings(matrix, n_texts, dim, name)

    monkeypatch.setattr("zerda_eval.store.embeddings.finish_embeddings", crash_on_second_chunk)
    with pytest.raises(RunError, match=r"cannot write .*disk full"):
        embed_corpus(CountingEmbedder(), TEXTS, tmp_path)
    assert written == [2, 2]  # the first chunk was stored when the second failed
    first = cache_key(CountingEmbedder(), TEXTS[:2])
    assert cache_files(tmp_path) == [f"chunks/{first}.json", f"chunks/{first}.npy"]


def test_chunks_write_the_same_matrix_as_one_call(tmp_path, monkeypatch):
    whole = embed_corpus(CountingEmbedder(), TEXTS, tmp_path / "whole")
    monkeypatch.setattr("zerda_eval.store.embeddings.CHUNK_TEXTS", 3)
    embedder = CountingEmbedder()
    chunked = embed_corpus(embedder, InOrderOnly(TEXTS), tmp_path / "chunked")
    np.testing.assert_array_equal(chunked, whole)
    assert embedder.embedded == len(TEXTS)


class CrashingAt(CountingEmbedder):
    """Raises when asked to embed ``text`` (a model or a machine failing mid-corpus)."""

    def __init__(self, text: str):
        super().__init__()
        self.text = text

    def _encode(self, texts):
        if self.text in texts:
            raise KeyboardInterrupt
        return super()._encode(texts)


def test_an_interrupted_encode_resumes_from_its_stored_chunks(tmp_path, monkeypatch):
    monkeypatch.setattr("zerda_eval.store.embeddings.CHUNK_TEXTS", 1)
    with pytest.raises(KeyboardInterrupt):
        embed_corpus(CrashingAt(TEXTS[2]), TEXTS, tmp_path)
    assert len([name for name in cache_files(tmp_path) if name.endswith(".npy")]) == 2  # chunks 0 and 1
    resumed = CountingEmbedder()
    vectors = embed_corpus(resumed, TEXTS, tmp_path)
    assert resumed.embedded == 2  # only the chunks that were not stored
    np.testing.assert_array_equal(vectors, CountingEmbedder().embed(TEXTS))
    key = cache_key(resumed, TEXTS)
    assert cache_files(tmp_path) == [f"{key}.json", f"{key}.npy"]  # chunks removed once assembled


def test_a_damaged_chunk_is_encoded_again(tmp_path, monkeypatch):
    monkeypatch.setattr("zerda_eval.store.embeddings.CHUNK_TEXTS", 2)
    with pytest.raises(KeyboardInterrupt):
        embed_corpus(CrashingAt(TEXTS[3]), TEXTS, tmp_path)
    chunk = tmp_path / "chunks" / f"{cache_key(CountingEmbedder(), TEXTS[:2])}.npy"
    data = bytearray(chunk.read_bytes())
    data[-1] ^= 0xFF  # one flipped bit in the last vector
    chunk.write_bytes(bytes(data))
    resumed = CountingEmbedder()
    vectors = embed_corpus(resumed, TEXTS, tmp_path)
    assert resumed.embedded == 4
    np.testing.assert_array_equal(vectors, CountingEmbedder().embed(TEXTS))


def test_a_corpus_assembled_from_chunks_stored_elsewhere_records_their_encode_seconds(tmp_path, monkeypatch):
    import json

    from zerda_eval.store.embeddings import chunk_spans, store_chunk

    monkeypatch.setattr("zerda_eval.store.embeddings.CHUNK_TEXTS", 2)
    seconds = [store_chunk(CountingEmbedder(), TEXTS[a:b], tmp_path)[1] for a, b in chunk_spans(len(TEXTS))]
    assembler = CountingEmbedder()
    embed_corpus(assembler, TEXTS, tmp_path)
    assert assembler.embedded == 0  # every chunk came from the store (a worker's, say)
    entry = json.loads((tmp_path / f"{cache_key(assembler, TEXTS)}.json").read_text())
    assert entry["build_s"]["embed"] == pytest.approx(sum(seconds))


def test_corpus_fitted_embedder_is_fitted_even_on_a_cache_hit(tmp_path):
    first = LSAEmbedder(dim=3, min_df=1)
    vectors = embed_corpus(first, TEXTS, tmp_path)
    fresh = LSAEmbedder(dim=3, min_df=1)
    cached = embed_corpus(fresh, TEXTS, tmp_path)
    np.testing.assert_array_equal(cached, vectors)
    np.testing.assert_allclose(fresh.embed(["beta gamma"]), first.embed(["beta gamma"]), atol=1e-6)
    np.testing.assert_allclose(fresh.embed(["beta gamma"])[0], vectors[2], atol=1e-6)


def test_lsa_state_is_restored_instead_of_refitted_and_embeds_identically(tmp_path, monkeypatch):
    from zerda_eval.datasets import load_collection

    collection = load_collection("quranqa23/taskA/dev")
    queries = list(collection.queries.values())[:20]
    fitted = LSAEmbedder(dim=64)
    vectors = embed_corpus(fitted, collection.texts, tmp_path)
    state_file = tmp_path / f"{cache_key(fitted, collection.texts)}.fit.npz"
    assert state_file.exists()

    def no_fit(self, texts):
        raise AssertionError("a cached LSA state must be restored, not refitted")

    monkeypatch.setattr(LSAEmbedder, "fit", no_fit)
    restored = LSAEmbedder(dim=64)
    np.testing.assert_array_equal(embed_corpus(restored, collection.texts, tmp_path), vectors)
    np.testing.assert_array_equal(restored.embed(queries), fitted.embed(queries))


def test_entry_records_checksums_and_build_seconds(tmp_path):
    import hashlib
    import json

    embedder = LSAEmbedder(dim=3, min_df=1)
    embed_corpus(embedder, TEXTS, tmp_path)
    key = cache_key(embedder, TEXTS)
    entry = json.loads((tmp_path / f"{key}.json").read_text(encoding="utf-8"))
    assert set(entry["files"]) == {f"{key}.npy", f"{key}.fit.npz"}
    for name, digest in entry["files"].items():
        assert digest == hashlib.sha256((tmp_path / name).read_bytes()).hexdigest()
    assert entry["build_s"]["fit"] > 0 and entry["build_s"]["embed"] > 0


def test_same_shape_corruption_of_the_vectors_is_caught_by_the_checksum(tmp_path):
    embedder = CountingEmbedder()
    expected = embed_corpus(embedder, TEXTS, tmp_path)
    path = tmp_path / f"{cache_key(embedder, TEXTS)}.npy"
    np.save(path, np.full_like(expected, 0.5))  # finite, same shape and dtype: loads fine
    with pytest.warns(ZerdaEvalWarning, match="checksum"):
        np.testing.assert_array_equal(embed_corpus(embedder, TEXTS, tmp_path), expected)


def test_corrupt_lsa_state_is_refitted_with_a_warning(tmp_path):
    first = LSAEmbedder(dim=3)
    vectors = embed_corpus(first, TEXTS, tmp_path)
    state_file = tmp_path / f"{cache_key(first, TEXTS)}.fit.npz"
    state_file.write_bytes(b"not an npz")
    again = LSAEmbedder(dim=3)
    with pytest.warns(ZerdaEvalWarning, match="refitting"):
        np.testing.assert_array_equal(embed_corpus(again, TEXTS, tmp_path), vectors)
    np.testing.assert_array_equal(again.embed(["beta gamma"]), first.embed(["beta gamma"]))
    with np.load(state_file, allow_pickle=False) as state:  # rewritten whole
        assert set(state.files) == {"terms", "idf", "basis"}


def test_concurrent_callers_embed_a_corpus_once(tmp_path):
    import threading

    embedders = [CountingEmbedder() for _ in range(4)]
    results = [None] * len(embedders)

    def embed(i):
        results[i] = embed_corpus(embedders[i], TEXTS, tmp_path)

    threads = [threading.Thread(target=embed, args=(i,)) for i in range(len(embedders))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sum(embedder.embedded for embedder in embedders) == len(TEXTS)
    for result in results:
        np.testing.assert_array_equal(result, results[0])


def test_checking_a_mapped_corpus_file_holds_one_block_not_the_corpus(tmp_path):
    """Issue 46: the finiteness check of an 8.8M x 384 file made a 3.4 GB temporary; it now goes block by block."""
    import tracemalloc

    from zerda_eval.store.embeddings import _load_valid

    rows = np.ones((400_000, 64), dtype=np.float32)
    np.save(tmp_path / "big.npy", rows)
    del rows
    tracemalloc.start()
    try:
        loaded = _load_valid(tmp_path / "big.npy", (400_000, 64), mmap=True)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert loaded is not None and isinstance(loaded, np.memmap)
    assert peak < 8_000_000  # the corpus's bool mask would be 25.6 MB
    bad = np.lib.format.open_memmap(tmp_path / "big.npy", mode="r+")
    bad[399_999, 3] = np.nan
    bad.flush()
    del bad
    assert _load_valid(tmp_path / "big.npy", (400_000, 64), mmap=True) is None
