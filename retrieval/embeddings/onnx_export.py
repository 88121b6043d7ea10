"""A torch encoder exported to ONNX once per precision, stored in the model cache.

``onnx_file(graph, precision)`` returns the stored file of ``graph`` at "fp32" or "int8", built on first
use and only for the precision asked (int8 is quantised from the fp32 file, which is built and stored
first). fp32: ``torch.onnx.export`` (dynamic batch and length axes), then, when the graph declares its
attention shape, onnxruntime's BERT optimizer, which fuses each layer's attention into one
``com.microsoft.Attention`` op (plus SkipLayerNormalization and BiasGelu). int8: onnxruntime's
``quantize_dynamic`` of the MatMuls and fused Attentions (weights int8 per channel, activations quantised
at run time: VNNI on CPUs that have it; the fused Attention becomes ``QAttention``). Each precision lives
in its own folder ``<name>-<recipe>-<export recipe>``, built under a file lock into a temporary folder
renamed into place, with a manifest of the file's SHA-256 checked on every load: a damaged folder is
rebuilt with a warning instead of being used. ``name`` must identify the weights (their SHA-256) and
``recipe`` the graph, so a changed model, graph or export recipe never reads an older file.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import tempfile
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from retrieval.core.hashing import file_sha256
from retrieval.embeddings.base import EmbedderError, first_line
from retrieval.embeddings.packaged import CACHE_ENV, import_neural, model_cache_root

ONNX_OPSET = 17
FP32_RECIPE = f"opset{ONNX_OPSET}-v3"  # the parts of a recipe this module decides, per precision
INT8_RECIPE = "int8dyn-perchannel-matmul-attention-v3"
ENCODER_FILE = "encoder.onnx"
MANIFEST = "manifest.json"

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class OnnxGraph:
    """What to export: ``build()`` makes the torch module and example inputs (right ranks, any sizes).

    Called only when a file is exported (torch is not imported otherwise). Every input's axes 0 and 1 and
    the output's axis 0 are dynamic. ``attention``: (heads, hidden) when the
    module's attention is written in the form onnxruntime's BERT optimizer fuses (None: exported as is).
    """

    name: str
    recipe: str
    build: Callable[[], tuple[Any, tuple[Any, ...]]]
    input_names: tuple[str, ...]
    output_name: str
    attention: tuple[int, int] | None = None


def export_recipe(graph: OnnxGraph, precision: str) -> str:
    """The recipe of ``graph``'s file at ``precision``: its folder name, and part of the vectors' cache key."""
    fp32 = f"{graph.recipe}-{FP32_RECIPE}" + ("" if graph.attention is None else "-fused{}x{}".format(*graph.attention))
    return fp32 if precision == "fp32" else f"{fp32}-{INT8_RECIPE}"


def onnx_file(graph: OnnxGraph, precision: str) -> Path:
    """The stored ONNX file of ``graph`` at ``precision`` ("fp32" or "int8"), built here on first use."""
    from filelock import FileLock

    source = onnx_file(graph, "fp32") if precision == "int8" else None
    root = model_cache_root()
    target = root / f"{graph.name}-{export_recipe(graph, precision)}"
    try:
        root.mkdir(parents=True, exist_ok=True)
        with FileLock(str(target) + ".lock"):
            problem = _damage(target)
            if problem is not None:
                if target.exists():
                    warnings.warn(f"{graph.name}: rebuilding the ONNX file in {target}: {problem}", stacklevel=2)
                shutil.rmtree(target, ignore_errors=True)
                scratch = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=root))
                try:
                    if source is None:
                        _export_fp32(graph, scratch / ENCODER_FILE)
                    else:
                        _quantise(source, scratch / ENCODER_FILE)
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


def _export_fp32(graph: OnnxGraph, path: Path) -> None:
    """``torch.onnx.export`` of the module into ``path``, then the attention fusion when the graph has one."""
    torch = import_neural("torch", "torch")
    logger.info("exporting %s to ONNX (once) into %s", graph.name, path.parent)
    names = list(graph.input_names)
    dynamic = {name: {0: "batch", 1: "length"} for name in names} | {graph.output_name: {0: "batch"}}
    exported = path if graph.attention is None else path.with_suffix(".unfused.onnx")
    module, example = graph.build()
    with warnings.catch_warnings(), torch.inference_mode():
        warnings.simplefilter("ignore")  # the legacy exporter's deprecation notice
        torch.onnx.export(
            module, example, str(exported), input_names=names, output_names=[graph.output_name],
            dynamic_axes=dynamic, opset_version=ONNX_OPSET, dynamo=False,
        )  # fmt: skip
    if graph.attention is None:
        return
    optimizer = import_neural("onnxruntime.transformers.optimizer", "onnxruntime")
    heads, hidden = graph.attention
    with _quiet_root_logger():
        model = optimizer.optimize_model(
            str(exported), model_type="bert", num_heads=heads, hidden_size=hidden, opt_level=0
        )
    fused = model.get_fused_operator_statistics().get("Attention", 0)
    if fused == 0:  # the module's attention is not in the fusable form: a bug of this package, said loudly
        raise EmbedderError(f"{graph.name}: onnxruntime's optimizer fused no attention in {exported}")
    model.save_model_to_file(str(path))
    exported.unlink()


def _quantise(source: Path, path: Path) -> None:
    """Dynamic int8 of the fp32 file: MatMul and fused Attention weights per channel, embedding tables fp32."""
    onnx = import_neural("onnx", "onnx")
    quantization = import_neural("onnxruntime.quantization", "onnxruntime")
    logger.info("quantising %s to int8 (once) into %s", source, path.parent)
    with _quiet_root_logger():
        quantization.quantize_dynamic(
            str(source), str(path), weight_type=quantization.QuantType.QInt8, per_channel=True,
            op_types_to_quantize=["MatMul", "Attention"],  # quantising embedding tables cost MiniLM 0.03 cosine
            # the fused graph's contrib ops defeat ONNX shape inference: their outputs are float32
            extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT},
        )  # fmt: skip


@contextlib.contextmanager
def _quiet_root_logger() -> Iterator[None]:
    """onnxruntime's optimizer and quantiser log hints on the root logger: silenced while they run."""
    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.ERROR)
    try:
        yield
    finally:
        root.setLevel(level)
