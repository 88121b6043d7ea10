"""An encoder's ONNX graph stored once per precision in the model cache.

``onnx_file(graph, precision)`` returns the stored file of ``graph`` at one of ``PRECISIONS``, built on first
use and only for the precision asked (an int8 file is made from the fp32 file, which is built and stored
first). "fp32": the graph as built (``bert_graph``, from numpy weights: no torch). "int8-weights": each
MatMul's constant weight matrix stored as int8 per output channel (symmetric, scale = largest magnitude / 127)
behind a ``DequantizeLinear``: the form OpenVINO reads as compressed weights and runs as int8 GEMMs with
activations quantised at run time (``onnx_sessions``). Each precision lives in its own folder
``<name>-<recipe>-<export recipe>``, built under a file lock into a temporary folder renamed into place, with
a manifest of the file's SHA-256 checked on every load: a damaged folder is rebuilt with a warning instead of
being used. ``name`` must identify the weights (their SHA-256) and ``recipe`` the graph, so a changed model,
graph or export recipe never reads an older file.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from retrieval.core.hashing import file_sha256
from retrieval.embeddings.base import EmbedderError, EmbedderWarning, first_line
from retrieval.embeddings.bert_graph import GRAPH_RECIPE, ONNX_OPSET
from retrieval.embeddings.packaged import CACHE_ENV, import_neural, model_cache_root

FP32_RECIPE = f"{GRAPH_RECIPE}-opset{ONNX_OPSET}"  # the parts of a recipe decided here and in bert_graph
INT8_WEIGHTS_RECIPE = "int8w-perchannel-sym-v1"
PRECISIONS = ("fp32", "int8-weights")
ENCODER_FILE = "encoder.onnx"
MANIFEST = "manifest.json"

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class OnnxGraph:
    """What to store: ``build()`` makes the fp32 ``onnx.ModelProto`` (called only when the file is written)."""

    name: str
    recipe: str
    build: Callable[[], Any]


def export_recipe(graph: OnnxGraph, precision: str) -> str:
    """The recipe of ``graph``'s file at ``precision``: its folder name, and part of the vectors' cache key."""
    fp32 = f"{graph.recipe}-{FP32_RECIPE}"
    return {"fp32": fp32, "int8-weights": f"{fp32}-{INT8_WEIGHTS_RECIPE}"}[precision]


def onnx_file(graph: OnnxGraph, precision: str) -> Path:
    """The stored ONNX file of ``graph`` at ``precision`` (one of ``PRECISIONS``), built here on first use."""
    from filelock import FileLock

    source = None if precision == "fp32" else onnx_file(graph, "fp32")
    root = model_cache_root()
    target = root / f"{graph.name}-{export_recipe(graph, precision)}"
    try:
        root.mkdir(parents=True, exist_ok=True)
        with FileLock(str(target) + ".lock"):
            problem = _damage(target)
            if problem is not None:
                if target.exists():
                    warnings.warn(
                        f"{graph.name}: rebuilding the ONNX file in {target}: {problem}", EmbedderWarning, stacklevel=2
                    )
                shutil.rmtree(target, ignore_errors=True)
                scratch = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=root))
                try:
                    if source is None:
                        _save_fp32(graph, scratch / ENCODER_FILE)
                    else:
                        _int8_weights(source, scratch / ENCODER_FILE)
                    manifest = {ENCODER_FILE: file_sha256(scratch / ENCODER_FILE)}
                    (scratch / MANIFEST).write_text(json.dumps(manifest, indent=1), encoding="utf-8")
                    os.replace(scratch, target)
                finally:
                    shutil.rmtree(scratch, ignore_errors=True)
    except OSError as exc:
        raise EmbedderError(
            f"cannot write {graph.name}'s ONNX file into {target}: {first_line(exc)}; "
            f"set {CACHE_ENV} to a writable folder"
        ) from exc
    return target / ENCODER_FILE


def _damage(folder: Path) -> str | None:
    """Why ``folder`` cannot be used (missing, no manifest, the file's SHA-256 differs), or None when it is sound."""
    manifest = folder / MANIFEST
    if not manifest.is_file():
        return "no manifest"
    try:
        expected = json.loads(manifest.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return f"{manifest} is unreadable"
    path = folder / ENCODER_FILE
    if not path.is_file() or file_sha256(path) != expected.get(ENCODER_FILE):
        return f"{path} does not match its SHA-256 in {MANIFEST}"
    return None


def _save_fp32(graph: OnnxGraph, path: Path) -> None:
    """The built graph written into ``path``."""
    onnx = import_neural("onnx", "onnx")
    logger.info("writing %s's ONNX graph (once) into %s", graph.name, path.parent)
    onnx.save(graph.build(), str(path))


def _int8_weights(source: Path, path: Path) -> None:
    """The fp32 file with every MatMul's constant 2-D weight as int8 per output channel behind a DequantizeLinear."""
    onnx = import_neural("onnx", "onnx")
    logger.info("storing %s's MatMul weights as int8 (once) into %s", source, path.parent)
    model = onnx.load(str(source))
    weights = {tensor.name: tensor for tensor in model.graph.initializer}
    dequantised: dict[str, str] = {}  # weight name -> its DequantizeLinear's output (a weight may feed two MatMuls)
    nodes = []
    for node in model.graph.node:
        name = node.input[1] if node.op_type == "MatMul" else ""
        if name in weights and len(weights[name].dims) == 2:
            if name not in dequantised:
                nodes.append(_dequantise_node(onnx, model.graph, weights[name]))
                dequantised[name] = nodes[-1].output[0]
            node.input[1] = dequantised[name]
        nodes.append(node)
    del model.graph.node[:]
    model.graph.node.extend(nodes)
    onnx.save(model, str(path))


def _dequantise_node(onnx: Any, graph: Any, tensor: Any) -> Any:
    """Replaces ``tensor`` (fp32 ``[in, out]``) in ``graph`` by int8 values and a scale per output channel."""
    matrix = onnx.numpy_helper.to_array(tensor).astype(np.float32)
    scale = np.abs(matrix).max(axis=0) / 127.0
    scale[scale == 0] = 1.0  # an all-zero column stays zero
    values = np.clip(np.round(matrix / scale), -127, 127).astype(np.int8)
    name = tensor.name
    graph.initializer.remove(tensor)
    graph.initializer.extend([
        onnx.numpy_helper.from_array(values, f"{name}.int8"),
        onnx.numpy_helper.from_array(scale.astype(np.float32), f"{name}.scale"),
        onnx.numpy_helper.from_array(np.zeros(scale.shape, dtype=np.int8), f"{name}.zero"),
    ])  # fmt: skip
    inputs = [f"{name}.int8", f"{name}.scale", f"{name}.zero"]
    return onnx.helper.make_node("DequantizeLinear", inputs, [f"{name}.dequantised"], axis=1)
