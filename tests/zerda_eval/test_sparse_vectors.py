"""``store.sparse_vectors``: chunks written, read back, verified, re-encoded when damaged (a toy encoder, no model)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from scipy.sparse import csr_matrix

from zerda_eval.errors import ZerdaEvalWarning
from zerda_eval.store import sparse_vectors
from zerda_eval.store.sparse_vectors import chunk_file, sparse_corpus


class LetterCounts:
    """A toy sparse encoder: feature = a letter's position in the alphabet, value = its count (top_k kept)."""

    name = "letters"
    dim = 26

    def __init__(self, top_k: int = 26):
        self.top_k, self.params, self.calls = top_k, {"top_k": top_k}, []

    def encode(self, texts: list[str], workers: int = 1) -> csr_matrix:
        self.calls.append(len(texts))
        rows = np.zeros((len(texts), self.dim), dtype=np.float32)
        for r, text in enumerate(texts):
            for char in text:
                if "a" <= char <= "z":
                    rows[r, ord(char) - ord("a")] += 1
            rows[r, np.argsort(-rows[r], kind="stable")[self.top_k :]] = 0
        return csr_matrix(rows)


TEXTS = ["abc", "hello world", "zzz", "", "banana"]


def expected(texts: list[str]) -> np.ndarray:
    out = np.zeros((len(texts), 26))
    for r, text in enumerate(texts):
        for char in text:
            if char.isalpha():
                out[r, ord(char) - ord("a")] += 1
    return out


def test_chunks_are_stored_and_read_back_in_corpus_order(tmp_path, monkeypatch):
    monkeypatch.setattr(sparse_vectors, "chunk_spans", lambda n: [(0, 2), (2, n)])
    encoder = LetterCounts()
    first = sparse_corpus(encoder, TEXTS, tmp_path)
    np.testing.assert_array_equal(first.toarray(), expected(TEXTS))
    assert encoder.calls == [2, 3] and len(list((tmp_path / "sparse").glob("*.npz"))) == 2
    again = LetterCounts()
    np.testing.assert_array_equal(sparse_corpus(again, TEXTS, tmp_path).toarray(), expected(TEXTS))
    assert again.calls == []  # both chunks from the store
    entry = json.loads(chunk_file(encoder, TEXTS[:2], tmp_path).with_suffix(".json").read_text())
    assert set(entry) == {"files", "build_s"} and entry["build_s"]["encode"] >= 0


def test_the_key_names_the_encoders_params_and_the_texts(tmp_path):
    assert chunk_file(LetterCounts(3), TEXTS, tmp_path) != chunk_file(LetterCounts(4), TEXTS, tmp_path)
    assert chunk_file(LetterCounts(3), TEXTS, tmp_path) != chunk_file(LetterCounts(3), TEXTS[:-1], tmp_path)


def test_a_file_failing_its_checksum_is_encoded_again(tmp_path):
    sparse_corpus(LetterCounts(), TEXTS, tmp_path)
    path = chunk_file(LetterCounts(), TEXTS, tmp_path)
    data = bytearray(path.read_bytes())
    data[-30] ^= 0xFF
    path.write_bytes(bytes(data))
    encoder = LetterCounts()
    with pytest.warns(ZerdaEvalWarning, match=f"{path.name} is corrupt or fails its checksum; encoding it again"):
        np.testing.assert_array_equal(sparse_corpus(encoder, TEXTS, tmp_path).toarray(), expected(TEXTS))
    assert encoder.calls == [len(TEXTS)]


@pytest.mark.parametrize(
    "damage",
    [
        lambda a: {**a, "values": -a["values"]},  # values must be positive
        lambda a: {**a, "indices": a["indices"] + 26},  # ids out of range
        lambda a: {**a, "indptr": a["indptr"][:-1]},  # a row missing
    ],
    ids=["negative values", "ids out of range", "row missing"],
)
def test_arrays_that_verify_by_checksum_but_not_by_shape_are_encoded_again(tmp_path, damage):
    from zerda_eval.hashing import file_sha256

    sparse_corpus(LetterCounts(), TEXTS, tmp_path)
    path = chunk_file(LetterCounts(), TEXTS, tmp_path)
    with np.load(path) as stored:
        arrays = damage(dict(stored))
    with path.open("wb") as handle:
        np.savez(handle, **arrays)
    entry_path = path.with_suffix(".json")
    entry = json.loads(entry_path.read_text())
    entry["files"][path.name] = file_sha256(path)  # a consistent entry: only the arrays' checks can catch it
    entry_path.write_text(json.dumps(entry))
    encoder = LetterCounts()
    with pytest.warns(ZerdaEvalWarning, match="encoding it again"):
        np.testing.assert_array_equal(sparse_corpus(encoder, TEXTS, tmp_path).toarray(), expected(TEXTS))
    assert encoder.calls == [len(TEXTS)]


def test_more_terms_than_top_k_in_a_row_is_refused(tmp_path):
    sparse_corpus(LetterCounts(26), TEXTS, tmp_path)
    narrow = LetterCounts(26)
    narrow.top_k = 2  # same key, a stricter reader: "hello world" has 7 letters
    with pytest.warns(ZerdaEvalWarning, match="encoding it again"):
        sparse_corpus(narrow, TEXTS, tmp_path)
    assert narrow.calls == [len(TEXTS)]
