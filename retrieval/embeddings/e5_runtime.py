"""Where e5-small's encoder runs: torch (fp32, CPU or CUDA) or onnxruntime (CPU; the embedder uses it for int8).

Both take a padded batch of windows (token ids ``[B, L]`` and a 0/1 mask) and return each window's
mean hidden state (``e5_graph``). The ONNX files are exported from the torch module (its attention in
the fusable form, fused into one Attention op per layer) only at the precision asked, stored in the model
cache under ``e5-small-onnx-<image sha256[:16]>-<recipes>`` by ``onnx_export``, which checks them on every
load and rebuilds a damaged folder with a warning.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from retrieval.embeddings import onnx_export
from retrieval.embeddings.e5_graph import build_encoder, word_vectors
from retrieval.embeddings.e5_image import E5Image
from retrieval.embeddings.onnx_sessions import SessionPool
from retrieval.embeddings.packaged import import_neural

# Changes whenever the exported graph changes (onnx_export adds its own export and quantisation recipe).
GRAPH_RECIPE = "window-means-v2"


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


class OnnxRuntime:
    """onnxruntime sessions on one intra-op thread each (``onnx_sessions``); a corpus runs several batches at
    once, each on its own session.

    ``recipe``: the file's export recipe (``onnx_recipe``), which the embedder puts in its params.
    """

    name = "onnxruntime"

    def __init__(self, image: E5Image, path: Path, recipe: str):
        self._image, self.recipe = image, recipe
        self._sessions = SessionPool(path)

    def window_means(self, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        """Mean last hidden state of each padded window (``e5_graph``), float32 ``[B, H]``."""
        return self._sessions.run({"word_vectors": word_vectors(self._image, ids), "mask": mask})[0]


def onnx_graph(image: E5Image, image_sha256: str) -> onnx_export.OnnxGraph:
    """What ``onnx_export`` exports for ``image``: the encoder with its attention in the fusable form."""
    config = image.config

    def build() -> tuple[Any, tuple[Any, ...]]:
        torch = import_neural("torch", "torch")
        return build_encoder(image, fusable_attention=True), (torch.zeros(2, 7, config.hidden), torch.ones(2, 7))

    return onnx_export.OnnxGraph(
        name=f"e5-small-onnx-{image_sha256[:16]}",
        recipe=GRAPH_RECIPE,
        build=build,
        input_names=("word_vectors", "mask"),
        output_name="mean",
        attention=(config.heads, config.hidden),
    )


def onnx_file(image: E5Image, image_sha256: str, precision: str) -> Path:
    """The stored ONNX export of ``image`` at ``precision`` ("fp32" or "int8"), built and checked by ``onnx_export``."""
    return onnx_export.onnx_file(onnx_graph(image, image_sha256), precision)


def onnx_recipe(image: E5Image, image_sha256: str, precision: str) -> str:
    """The recipe of that file (graph, export, quantisation): part of the vectors' cache key."""
    return onnx_export.export_recipe(onnx_graph(image, image_sha256), precision)
