"""onnxruntime sessions of one ONNX file, one per concurrent caller.

A corpus encode runs several batches at once on threads, each batch on one intra-op thread. Sharing one
session between those threads was about 5 % slower than giving each its own (e5-small int8 on 300 random
SciFact abstracts, 2 quiet cores, 4 runs each: 16.4-18.0 passages/s shared, 17.7-18.1 one session per
thread), so ``SessionPool.run`` lends each call an idle session and opens another only when every open one
is busy: a pool never holds more sessions than calls ever ran at once (one for queries, one per worker for
a corpus). The sessions are identical, so which one runs a batch never changes its output.
"""

from __future__ import annotations

import queue
from pathlib import Path
from typing import Any

from retrieval.embeddings.packaged import import_neural


class SessionPool:
    """Sessions of the ONNX file at ``path`` (CPU, one intra-op and one inter-op thread each), opened on demand."""

    def __init__(self, path: Path):
        self.path = path
        self._idle: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self.opened = 0
        self._idle.put(self._open())  # opened here, so a bad file fails at load, not in the first batch

    def run(self, feed: dict[str, Any]) -> list[Any]:
        """The outputs of one idle session on ``feed`` (``InferenceSession.run(None, feed)``)."""
        session = self._lend()
        try:
            return session.run(None, feed)
        finally:
            self._idle.put(session)

    def _lend(self) -> Any:
        try:
            return self._idle.get_nowait()
        except queue.Empty:
            return self._open()

    def _open(self) -> Any:
        ort = import_neural("onnxruntime", "onnxruntime")
        options = ort.SessionOptions()
        options.intra_op_num_threads = 1
        options.inter_op_num_threads = 1
        session = ort.InferenceSession(str(self.path), options, providers=["CPUExecutionProvider"])
        self.opened += 1
        return session
