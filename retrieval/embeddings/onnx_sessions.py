"""Sessions of one ONNX file on OpenVINO (the one runtime of the shipped models), one per concurrent caller.

A corpus encode runs several batches at once on threads, each batch on one thread of the engine: an OpenVINO
model compiled for one stream runs one request at a time, so each session is its own compiled model.
OpenVINO was chosen over onnxruntime by measurement (``benchmarks/results.md``, "One runtime": int8 e5-small
and MiniLM 1.02-1.43x onnxruntime's passages/s, this CPU, loaded). ``SessionPool.run`` lends each call an idle session
and opens another only when every open one is busy: a pool never holds more sessions than calls ever ran at once
(one for queries, one per worker for a corpus). The sessions are identical, so which one runs a batch never
changes its output.

OpenVINO sessions run on one thread, unpinned (two pinned sessions could share a core), with its CPU
plug-in's dynamic quantisation: a MatMul over int8 weights (``onnx_export``'s "int8-weights") quantises its
activations to int8 in groups of ``OPENVINO_ACTIVATION_GROUP`` values per row, so a row never depends on its
batch-mates; the other operations run in bfloat16 where the CPU has it (``inference_precision`` says which ran).
Which kernels run depends on the CPU (AMX tiles, AVX-512 bf16 or VNNI, other blockings), so OpenVINO's
vectors are not bit-reproducible across machines; ``$ZERDA_OPENVINO_PRECISION=f32`` pins the other operations
to float32 on any CPU (``requested_precision``; the default, ``bf16``, asks for bfloat16), and the precision
that ran is part of the recipe that keys stored vectors.
"""

from __future__ import annotations

import functools
import os
import queue
from pathlib import Path
from typing import Any

from retrieval.embeddings.base import EmbedderError
from retrieval.embeddings.packaged import import_neural

_PRECISION = "INFERENCE_PRECISION_HINT"  # OpenVINO's property: the precision its non-int8 operations run in
# Activation values per int8 scale. Same 30 SciFact windows, one thread, CPU ms per window (loaded machine):
# 64: 77-79 (cosine with fp32 >= 0.9998), 128: 74-76 (0.9996), 384: 72-76 (0.9992); onnxruntime int8 92-95
# (0.996).
OPENVINO_ACTIVATION_GROUP = 128
# Batches are padded to a multiple of this many tokens (512, the longest window, is one): OpenVINO prepares its
# kernels again whenever the input's shape changes, which costs about as much as a short query's encode.
OPENVINO_LENGTH_STEP = 16
PRECISION_ENV = "ZERDA_OPENVINO_PRECISION"
OPENVINO_PRECISIONS = ("bf16", "f32")  # asked of OpenVINO; the first is the default (f32 where the CPU lacks bf16)


def requested_precision() -> str:
    """The precision OpenVINO is asked for (``$ZERDA_OPENVINO_PRECISION``, default bf16); another value: one line."""
    value = os.environ.get(PRECISION_ENV, OPENVINO_PRECISIONS[0])
    if value not in OPENVINO_PRECISIONS:
        raise EmbedderError(
            f"{PRECISION_ENV}={value!r}: use bf16 (the default: bfloat16 where the CPU has it) or f32 (float32 on any "
            "CPU, the reference)"
        )
    return value


@functools.cache
def cpu_has_bf16() -> bool:
    """Whether OpenVINO's CPU plug-in runs bfloat16 on this CPU (AVX-512 bf16 or AMX): where it does not, a bf16
    request runs f32. Asked once per process."""
    openvino = import_neural("openvino", "openvino")
    return "BF16" in openvino.Core().get_property("CPU", "OPTIMIZATION_CAPABILITIES")


def machine_precision() -> str:
    """The precision OpenVINO's non-int8 operations will run in here: the one requested, or f32 where the CPU
    lacks bfloat16 (what ``SessionPool.inference_precision`` reports once a model is compiled)."""
    requested = requested_precision()
    return requested if requested == "f32" or cpu_has_bf16() else "f32"


def openvino_recipe(export_recipe: str, inference_precision: str) -> str:
    """How a stored file ran: its export recipe, the activation group and the precision of the other operations
    (part of the key of the vectors it made)."""
    return f"{export_recipe}-openvino-act{OPENVINO_ACTIVATION_GROUP}-{inference_precision}"


class SessionPool:
    """OpenVINO sessions of the ONNX file at ``path`` (CPU, one thread each), opened on demand; ``precision``: what
    the non-int8 operations are asked to run in (bf16 or f32; ``inference_precision`` says what runs)."""

    def __init__(self, path: Path, precision: str):
        self.path, self.precision = path, precision
        self._idle: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self.opened = 0
        first = self._open()  # opened here, so a bad file fails at load, not in the first batch
        self.inference_precision = first[0].get_property(_PRECISION).to_string()
        self._idle.put(first)

    def run(self, feed: dict[str, Any]) -> list[Any]:
        """The outputs of one idle session on ``feed``, in the file's output order."""
        session = self._lend()
        try:
            return list(session[1].infer(feed).to_tuple())
        finally:
            self._idle.put(session)

    def _lend(self) -> Any:
        try:
            return self._idle.get_nowait()
        except queue.Empty:
            return self._open()

    def _open(self) -> Any:
        session = _open_openvino(self.path, self.precision)
        self.opened += 1
        return session


def _open_openvino(path: Path, precision: str) -> tuple[Any, Any]:
    """(compiled model, its infer request), its non-int8 operations asked to run in ``precision``."""
    openvino = import_neural("openvino", "openvino")
    config = {
        "INFERENCE_NUM_THREADS": 1,
        "NUM_STREAMS": 1,
        "ENABLE_CPU_PINNING": False,
        _PRECISION: precision,  # OpenVINO falls back from bf16 to f32 on a CPU without bfloat16
        "DYNAMIC_QUANTIZATION_GROUP_SIZE": str(OPENVINO_ACTIVATION_GROUP),
    }
    compiled = openvino.Core().compile_model(str(path), "CPU", config)
    return compiled, compiled.create_infer_request()
