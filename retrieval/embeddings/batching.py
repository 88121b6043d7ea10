"""Batching for neural encoders: chunks behind one progress bar, and length-bucketed batches over threads.

Neural models take minutes per corpus: ``in_chunks`` / ``encode_in_chunks`` advance one progress bar
chunk by chunk; ``run_length_batched`` sorts rows by token length and pads each batch only to its own
longest row (no padding to the longest text of a random batch), running batches on every core.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack

import numpy as np


def in_chunks(texts: Sequence[str], chunk: int, desc: str, progress: bool) -> Iterator[list[str]]:
    """Consecutive chunks of ``chunk`` texts, the bar advanced as each one is done.

    A tqdm bar on stderr shows texts done when there is more than one chunk and ``progress`` is true
    (``TQDM_DISABLE=1`` in the environment also turns it off).
    """
    from tqdm.auto import tqdm

    with tqdm(total=len(texts), desc=desc, unit="text", disable=not progress or len(texts) <= chunk) as bar:
        for start in range(0, len(texts), chunk):
            block = list(texts[start : start + chunk])
            yield block
            bar.update(len(block))


def encode_in_chunks(
    texts: list[str], chunk: int, encode: Callable[[list[str]], np.ndarray], desc: str, progress: bool
) -> np.ndarray:
    """``encode`` applied to consecutive chunks of ``chunk`` texts (``in_chunks``), stacked in order."""
    parts = [np.asarray(encode(block), dtype=np.float32) for block in in_chunks(texts, chunk, desc, progress)]
    return np.concatenate(parts) if parts else np.zeros((0, 0), dtype=np.float32)


MIN_SPLIT_TOKENS = 1024  # a small corpus is cut into batches of at least this many padded tokens ...
BATCHES_PER_WORKER = 4  # ... so that every thread gets this many batches and stays busy to the end


def length_batches(lengths: Sequence[int], batch_tokens: int, max_rows: int | None = None) -> list[np.ndarray]:
    """Indices of ``lengths`` sorted by length, cut so each batch's rows x longest row <= ``batch_tokens``.

    Each batch is padded to its own longest row, so padding is only the spread of neighbouring lengths.
    """
    order = np.argsort(lengths, kind="stable")
    batches, current = [], []
    for index in order:
        longest = lengths[index]  # ascending: the newcomer is the batch's longest
        if current and ((len(current) + 1) * longest > batch_tokens or (max_rows and len(current) == max_rows)):
            batches.append(np.array(current))
            current = []
        current.append(index)
    if current:
        batches.append(np.array(current))
    return batches


def padded(rows: Sequence[Sequence[int]], pad_id: int = 0, length_step: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """Token id rows as one int64 ``[B, L]`` array padded with ``pad_id`` to the longest row (rounded up to a
    multiple of ``length_step``: fewer shapes for OpenVINO to prepare kernels for), and its 0/1 mask."""
    longest = max(map(len, rows))
    ids = np.full((len(rows), longest + -longest % length_step), pad_id, dtype=np.int64)
    mask = np.zeros_like(ids)
    for r, row in enumerate(rows):
        ids[r, : len(row)] = row
        mask[r, : len(row)] = 1
    return ids, mask


def run_length_batched(
    lengths: Sequence[int],
    run: Callable[[np.ndarray], np.ndarray],
    batch_tokens: int,
    max_rows: int | None,
    workers: int,
    done: Callable[[np.ndarray], None] | None = None,
) -> list[tuple[np.ndarray, np.ndarray]]:
    """``run(batch)`` over length-bucketed batches of the rows whose ``lengths`` are given: ``[(batch, output)]``.

    With ``workers`` > 1 that many batches run at once on threads (an engine that releases the GIL, such
    as onnxruntime with one intra-op thread per call, then uses every core), and a small input is cut into
    smaller batches so every thread has work to the end, started longest first; ``workers == 1`` runs in
    the caller's thread. ``done(batch)`` is called in order as each batch finishes (a progress bar).
    """
    if workers > 1:
        batch_tokens = min(batch_tokens, max(MIN_SPLIT_TOKENS, sum(lengths) // (BATCHES_PER_WORKER * workers)))
    batches = length_batches(lengths, batch_tokens, max_rows)
    serial = workers == 1 or len(batches) == 1
    if not serial:  # longest first: the last batches to start are the shortest, so no thread idles long at the end
        batches.reverse()
    outputs: list[tuple[np.ndarray, np.ndarray]] = []
    with ExitStack() as stack:
        mapper = map if serial else stack.enter_context(ThreadPoolExecutor(workers)).map
        for batch, output in zip(batches, mapper(run, batches), strict=True):
            outputs.append((batch, output))
            if done is not None:
                done(batch)
    return outputs
