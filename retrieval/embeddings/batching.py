"""Encode a long list of texts chunk by chunk behind one progress bar (neural models take minutes per corpus)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

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
