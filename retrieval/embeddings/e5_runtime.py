"""Where e5-small's encoder runs: torch (fp32, CPU or CUDA) or OpenVINO (CPU int8).

Both take a padded batch of windows (token ids ``[B, L]`` and a 0/1 mask) and return each window's
mean hidden state (``e5_graph``). The int8 file is exported from the torch module (its attention written
out, ``explicit_attention``) with its MatMul weights stored as int8 (``onnx_export``'s "int8-weights"), in
the model cache under ``e5-small-onnx-<image sha256[:16]>-<recipes>``, checked on every load and rebuilt
with a warning when damaged; OpenVINO runs it with int8 GEMMs (``onnx_sessions``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from retrieval.embeddings import onnx_export
from retrieval.embeddings.e5_graph import build_encoder, word_vectors
from retrieval.embeddings.e5_image import E5Image
from retrieval.embeddings.onnx_sessions import OPENVINO_ACTIVATION_GROUP, SessionPool
from retrieval.embeddings.packaged import import_neural

# Changes whenever the exported graph changes (onnx_export adds its own export and quantisation recipe).
GRAPH_RECIPE = "window-means-v2"
INT8_EXPORT = "int8-weights"  # onnx_export's precision of the file OpenVINO runs
LENGTH_STEP = 16  # OpenVINO's windows are padded to a multiple of this many tokens (512, the longest, is one)


class TorchRuntime:
    """The torch module in fp32 on ``device``; threads are torch's intra-op pool."""

    name = "torch"
    recipe = None  # no export: the module runs as built

    def __init__(self, image: E5Image, device: str):
        self._torch = import_neural("torch", "torch")
        self._image = image
        self._device = device
        self._encoder = build_encoder(image).to(device)

    def window_means(self, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        """Mean last hidden state of each padded window (``e5_graph``), float32 ``[B, H]``."""
        torch = self._torch
        with torch.inference_mode():
            vectors = torch.from_numpy(word_vectors(self._image, ids)).to(self._device)
            means = self._encoder(vectors, torch.from_numpy(mask).to(self._device))
        return means.float().cpu().numpy()


class OpenVinoRuntime:
    """OpenVINO sessions of the int8 file on one thread each (``onnx_sessions``); a corpus runs several batches
    at once, each on its own session.

    ``recipe`` (``int8_recipe``): the file's export recipe and how OpenVINO ran it (activation group, the
    precision the other operations ran in: ``precision`` asked, or f32 where the CPU lacks bfloat16), which the
    embedder puts in its params.
    """

    name = "openvino"

    def __init__(self, image: E5Image, path: Path, recipe: str, precision: str):
        self._image = image
        self._sessions = SessionPool(path, engine="openvino", precision=precision)
        self.recipe = f"{recipe}-openvino-act{OPENVINO_ACTIVATION_GROUP}-{self._sessions.inference_precision}"

    def window_means(self, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        """Mean last hidden state of each padded window (``e5_graph``), float32 ``[B, H]``.

        Windows are padded further, to a multiple of ``LENGTH_STEP`` tokens: OpenVINO prepares its kernels
        again whenever the input's shape changes, which costs about as much as a short query's encode.
        """
        extra = -ids.shape[1] % LENGTH_STEP
        if extra:
            ids = np.pad(ids, ((0, 0), (0, extra)), constant_values=self._image.pad)
            mask = np.pad(mask, ((0, 0), (0, extra)))
        return self._sessions.run({"word_vectors": word_vectors(self._image, ids), "mask": mask})[0]


def onnx_graph(image: E5Image, image_sha256: str) -> onnx_export.OnnxGraph:
    """What ``onnx_export`` exports for ``image``: the encoder with its attention written out (no sdpa guards)."""
    config = image.config

    def build() -> tuple[Any, tuple[Any, ...]]:
        torch = import_neural("torch", "torch")
        return build_encoder(image, explicit_attention=True), (torch.zeros(2, 7, config.hidden), torch.ones(2, 7))

    return onnx_export.OnnxGraph(
        name=f"e5-small-onnx-{image_sha256[:16]}",
        recipe=GRAPH_RECIPE,
        build=build,
        input_names=("word_vectors", "mask"),
        output_name="mean",
    )


def int8_file(image: E5Image, image_sha256: str) -> Path:
    """The stored int8 ONNX export of ``image`` (``INT8_EXPORT``), built and checked by ``onnx_export``."""
    return onnx_export.onnx_file(onnx_graph(image, image_sha256), INT8_EXPORT)


def int8_recipe(image: E5Image, image_sha256: str) -> str:
    """The recipe of that file (graph, export, quantisation): part of the vectors' cache key."""
    return onnx_export.export_recipe(onnx_graph(image, image_sha256), INT8_EXPORT)
