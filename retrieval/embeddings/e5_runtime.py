"""Where e5-small's encoder runs: torch (fp32, CPU or CUDA) or onnxruntime (CPU; the embedder uses it for int8).

Both take a padded batch of windows (token ids ``[B, L]`` and a 0/1 mask) and return each window's
mean hidden state (``e5_graph``). The ONNX files are exported from the torch module once, quantised
for int8 with onnxruntime's ``quantize_dynamic``, and stored in the model cache under
``e5-small-onnx-<image sha256[:16]>-<recipe>``, built under a file lock into a temporary folder renamed
into place. A manifest holds each file's SHA-256, checked on every load: a damaged folder is rebuilt
with a warning instead of being used.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
import warnings
from pathlib import Path

import numpy as np

from retrieval.embeddings.base import EmbedderError, first_line
from retrieval.embeddings.e5_graph import build_encoder, word_vectors
from retrieval.embeddings.e5_image import E5Image
from retrieval.embeddings.packaged import CACHE_ENV, file_sha256, import_neural, model_cache_root

ONNX_OPSET = 17
# Changes whenever the export or the quantisation changes, so an older cached file is never reused.
ONNX_RECIPE = f"opset{ONNX_OPSET}-int8dyn-perchannel-v1"
ONNX_FILES = {"fp32": "encoder.fp32.onnx", "int8": "encoder.int8.onnx"}
MANIFEST = "manifest.json"

logger = logging.getLogger(__name__)


class TorchRuntime:
    """The torch module in fp32 on ``device``; threads are torch's intra-op pool."""

    name = "torch"

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
    """An onnxruntime session on one intra-op thread; a corpus runs several batches at once, one per thread."""

    name = "onnxruntime"

    def __init__(self, image: E5Image, path: Path, intra_op_threads: int = 1):
        ort = import_neural("onnxruntime", "onnxruntime")
        options = ort.SessionOptions()
        options.intra_op_num_threads = intra_op_threads
        options.inter_op_num_threads = 1
        self._image = image
        self._session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])

    def window_means(self, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        """Mean last hidden state of each padded window (``e5_graph``), float32 ``[B, H]``."""
        feed = {"word_vectors": word_vectors(self._image, ids), "mask": mask}
        return self._session.run(None, feed)[0]


def onnx_file(image: E5Image, image_sha256: str, precision: str) -> Path:
    """The cached ONNX export of ``image`` for ``precision`` ("fp32" or "int8"), built (and checked) here."""
    from filelock import FileLock

    root = model_cache_root()
    target = root / f"e5-small-onnx-{image_sha256[:16]}-{ONNX_RECIPE}"
    try:
        root.mkdir(parents=True, exist_ok=True)
        with FileLock(str(target) + ".lock"):
            problem = _damage(target)
            if problem is None:
                return target / ONNX_FILES[precision]
            if target.exists():
                warnings.warn(f"e5-small: rebuilding the ONNX files in {target}: {problem}", stacklevel=2)
            shutil.rmtree(target, ignore_errors=True)
            scratch = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=root))
            try:
                _export(image, scratch)
                os.replace(scratch, target)
            finally:
                shutil.rmtree(scratch, ignore_errors=True)
    except OSError as exc:
        raise EmbedderError(
            f"cannot write e5-small's ONNX files into {target}: {first_line(exc)}; set {CACHE_ENV} to a writable folder"
        ) from exc
    return target / ONNX_FILES[precision]


def _damage(folder: Path) -> str | None:
    """Why ``folder`` cannot be used (missing, no manifest, a file's SHA-256 differs), or None when it is sound."""
    manifest = folder / MANIFEST
    if not manifest.is_file():
        return "no manifest"
    try:
        expected = json.loads(manifest.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return f"{manifest} is unreadable"
    for name in ONNX_FILES.values():
        path = folder / name
        if not path.is_file() or file_sha256(path) != expected.get(name):
            return f"{path} does not match its SHA-256 in {MANIFEST}"
    return None


def _export(image: E5Image, folder: Path) -> None:
    """Write the fp32 export, its dynamic int8 quantisation and the manifest into ``folder``."""
    torch = import_neural("torch", "torch")
    quantization = import_neural("onnxruntime.quantization", "onnxruntime")
    fp32, int8 = folder / ONNX_FILES["fp32"], folder / ONNX_FILES["int8"]
    logger.info("e5-small: exporting the encoder to ONNX and quantising it (once) into %s", folder)
    example = (torch.zeros(2, 7, image.config.hidden), torch.ones(2, 7))
    dynamic = {0: "batch", 1: "length"}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the legacy exporter's deprecation notice
        torch.onnx.export(
            build_encoder(image), example, str(fp32), input_names=["word_vectors", "mask"], output_names=["mean"],
            dynamic_axes={"word_vectors": dynamic, "mask": dynamic, "mean": {0: "batch"}},
            opset_version=ONNX_OPSET, dynamo=False,
        )  # fmt: skip
    quantization.quantize_dynamic(str(fp32), str(int8), weight_type=quantization.QuantType.QInt8, per_channel=True)
    manifest = {path.name: file_sha256(path) for path in (fp32, int8)}
    (folder / MANIFEST).write_text(json.dumps(manifest, indent=1), encoding="utf-8")
