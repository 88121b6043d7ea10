"""Length-bucketed batches over threads (``batching.run_length_batched``): every row once, longest first."""

from __future__ import annotations

import threading

import numpy as np

from retrieval.embeddings.batching import run_length_batched


def _run_recording(lengths: list[int], workers: int) -> tuple[list[np.ndarray], list[tuple[np.ndarray, np.ndarray]]]:
    started, lock = [], threading.Lock()

    def run(batch: np.ndarray) -> np.ndarray:
        with lock:
            started.append(batch)
        return np.asarray(lengths)[batch] * 10

    return started, run_length_batched(lengths, run, batch_tokens=1024, max_rows=2, workers=workers)


def test_threads_start_the_longest_batch_first_and_every_row_comes_back_once():
    lengths = [5, 300, 40, 512, 7, 120, 300, 9]
    started, outputs = _run_recording(lengths, workers=2)
    assert sorted(np.concatenate([batch for batch, _ in outputs]).tolist()) == list(range(len(lengths)))
    for batch, output in outputs:  # each output belongs to its batch
        assert output.tolist() == [lengths[i] * 10 for i in batch]
    assert max(lengths) in [lengths[i] for batch in started[:2] for i in batch]  # the longest starts at once ...
    longest = [max(lengths[i] for i in batch) for batch, _ in outputs]
    assert longest == sorted(longest, reverse=True)  # ... and batches are handed out longest first


def test_one_worker_runs_shortest_first_in_the_callers_thread():
    lengths = [5, 300, 40, 512, 7]
    started, outputs = _run_recording(lengths, workers=1)
    longest = [max(lengths[i] for i in batch) for batch in started]
    assert longest == sorted(longest)
    assert [batch.tolist() for batch, _ in outputs] == [batch.tolist() for batch in started]
