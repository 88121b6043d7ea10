"""Where e5-small's encoder runs: OpenVINO on the CPU (fp32 or int8), torch on CUDA (fp32).

Both take a padded batch of windows (token ids ``[B, L]`` and a 0/1 mask) and return each window's
mean hidden state (``e5_graph``'s module; ``bert_graph``'s ONNX graph of the same encoder, written from the
image's weights without torch). The fp32 file, and the int8 one made from it (MatMul weights stored as int8:
``onnx_export``'s "int8-weights"), live in the model cache under ``e5-small-onnx-<image sha256[:16]>-<recipes>``,
checked on every load and rebuilt with a warning when damaged; OpenVINO runs them (``onnx_sessions``): fp32 in
f32, int8 with int8 GEMMs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from retrieval.embeddings import onnx_export
from retrieval.embeddings.bert_graph import BertShape, build_graph
from retrieval.embeddings.e5_graph import build_encoder, word_vectors
from retrieval.embeddings.e5_image import E5Image
from retrieval.embeddings.onnx_sessions import OPENVINO_LENGTH_STEP, SessionPool, openvino_recipe
from retrieval.embeddings.packaged import import_neural

# Changes whenever the exported graph changes (onnx_export adds its own export and quantisation recipe).
GRAPH_RECIPE = "window-means-v3"
INT8_EXPORT = "int8-weights"  # onnx_export's precision of the file OpenVINO runs


class TorchRuntime:
    """The torch module in fp32 on ``device`` (CUDA; ``[torch]`` extra); threads are torch's intra-op pool."""

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
    """OpenVINO sessions of a stored file on one thread each (``onnx_sessions``); a corpus runs several batches
    at once, each on its own session.

    ``recipe``: the file's export recipe and how OpenVINO ran it (``onnx_sessions.openvino_recipe``: the precision
    the other operations ran in is ``precision`` asked, or f32 where the CPU lacks bfloat16), which the embedder
    puts in its params.
    """

    name = "openvino"

    def __init__(self, image: E5Image, path: Path, recipe: str, precision: str):
        self._image = image
        self._sessions = SessionPool(path, precision)
        self.recipe = openvino_recipe(recipe, self._sessions.inference_precision)

    def window_means(self, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        """Mean last hidden state of each padded window (``e5_graph``), float32 ``[B, H]``.

        Windows are padded further, to a multiple of ``OPENVINO_LENGTH_STEP`` tokens (``onnx_sessions``).
        """
        extra = -ids.shape[1] % OPENVINO_LENGTH_STEP
        if extra:
            ids = np.pad(ids, ((0, 0), (0, extra)), constant_values=self._image.pad)
            mask = np.pad(mask, ((0, 0), (0, extra)))
        return self._sessions.run({"word_vectors": word_vectors(self._image, ids), "mask": mask})[0]


def onnx_graph(image: E5Image, image_sha256: str) -> onnx_export.OnnxGraph:
    """What ``onnx_export`` stores for ``image``: its encoder written from the dequantised weights (``bert_graph``)."""
    config = image.config

    def build() -> Any:
        shape = BertShape(config.hidden, config.heads, config.layers, config.eps)
        return build_graph(image.tensors, shape, embed_ids=False)

    return onnx_export.OnnxGraph(f"e5-small-onnx-{image_sha256[:16]}", GRAPH_RECIPE, build)


def stored_file(image: E5Image, image_sha256: str, precision: str) -> tuple[Path, str]:
    """The stored ONNX file OpenVINO runs at ``precision`` ("fp32" or "int8": ``INT8_EXPORT``), built and checked
    by ``onnx_export``, and its recipe (graph, export, quantisation: part of the vectors' cache key)."""
    graph, export = onnx_graph(image, image_sha256), "fp32" if precision == "fp32" else INT8_EXPORT
    return onnx_export.onnx_file(graph, export), onnx_export.export_recipe(graph, export)
