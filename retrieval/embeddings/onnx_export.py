"""A torch encoder exported to ONNX once, with its dynamic int8 quantisation, stored in the model cache.

``onnx_files(name, recipe, build, example, ...)`` returns ``{"fp32": path, "int8": path}`` inside
``<model cache>/<name>-<recipe>``: exported with ``torch.onnx.export`` (dynamic batch and length axes),
quantised with onnxruntime's ``quantize_dynamic`` (the MatMuls' weights int8 per channel, activations
quantised at run time: VNNI on CPUs that have it), built under a file lock into a temporary folder renamed into place. A
manifest holds each file's SHA-256, checked on every load: a damaged folder is rebuilt with a warning
instead of being used. ``name`` must identify the weights (their SHA-256) and ``recipe`` the export and
quantisation settings, so a changed model or recipe never reads an older file.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

from retrieval.core.hashing import file_sha256
from retrieval.embeddings.base import EmbedderError, first_line
from retrieval.embeddings.packaged import CACHE_ENV, import_neural, model_cache_root

ONNX_OPSET = 17
INT8_RECIPE = f"opset{ONNX_OPSET}-int8dyn-matmul-perchannel-v2"  # the part of a recipe this module decides
PRECISION_FILES = {"fp32": "encoder.fp32.onnx", "int8": "encoder.int8.onnx"}
MANIFEST = "manifest.json"

logger = logging.getLogger(__name__)


def onnx_files(
    name: str,
    recipe: str,
    build: Callable[[], Any],
    example: tuple[Any, ...],
    input_names: list[str],
    output_name: str,
) -> dict[str, Path]:
    """The stored fp32 and int8 ONNX files of the module ``build()`` makes, exported here on first use.

    ``example``: inputs of the right ranks (any batch and length); every input's axes 0 and 1 and the
    output's axis 0 are dynamic.
    """
    from filelock import FileLock

    root = model_cache_root()
    target = root / f"{name}-{recipe}-{INT8_RECIPE}"
    try:
        root.mkdir(parents=True, exist_ok=True)
        with FileLock(str(target) + ".lock"):
            problem = _damage(target)
            if problem is not None:
                if target.exists():
                    warnings.warn(f"{name}: rebuilding the ONNX files in {target}: {problem}", stacklevel=2)
                shutil.rmtree(target, ignore_errors=True)
                scratch = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=root))
                try:
                    _export(build, example, input_names, output_name, scratch)
                    os.replace(scratch, target)
                finally:
                    shutil.rmtree(scratch, ignore_errors=True)
    except OSError as exc:
        raise EmbedderError(
            f"cannot write {name}'s ONNX files into {target}: {first_line(exc)}; set {CACHE_ENV} to a writable folder"
        ) from exc
    return {precision: target / file for precision, file in PRECISION_FILES.items()}


def _damage(folder: Path) -> str | None:
    """Why ``folder`` cannot be used (missing, no manifest, a file's SHA-256 differs), or None when it is sound."""
    manifest = folder / MANIFEST
    if not manifest.is_file():
        return "no manifest"
    try:
        expected = json.loads(manifest.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return f"{manifest} is unreadable"
    for file in PRECISION_FILES.values():
        path = folder / file
        if not path.is_file() or file_sha256(path) != expected.get(file):
            return f"{path} does not match its SHA-256 in {MANIFEST}"
    return None


def _export(
    build: Callable[[], Any], example: tuple[Any, ...], input_names: list[str], output_name: str, folder: Path
) -> None:
    """Write the fp32 export, its dynamic int8 quantisation and the manifest into ``folder``."""
    torch = import_neural("torch", "torch")
    quantization = import_neural("onnxruntime.quantization", "onnxruntime")
    fp32, int8 = (folder / PRECISION_FILES[p] for p in ("fp32", "int8"))
    logger.info("exporting an encoder to ONNX and quantising it (once) into %s", folder)
    dynamic = {name: {0: "batch", 1: "length"} for name in input_names} | {output_name: {0: "batch"}}
    with warnings.catch_warnings(), torch.inference_mode():
        warnings.simplefilter("ignore")  # the legacy exporter's deprecation notice
        torch.onnx.export(
            build(), example, str(fp32), input_names=input_names, output_names=[output_name],
            dynamic_axes=dynamic, opset_version=ONNX_OPSET, dynamo=False,
        )  # fmt: skip
    quiet = logging.getLogger()  # quantize_dynamic logs a pre-processing hint on the root logger
    level = quiet.level
    quiet.setLevel(logging.ERROR)
    try:
        quantization.quantize_dynamic(
            str(fp32), str(int8), weight_type=quantization.QuantType.QInt8, per_channel=True,
            op_types_to_quantize=["MatMul"],  # the embedding tables stay fp32 (quantising them cost MiniLM 0.03 cosine)
        )  # fmt: skip
    finally:
        quiet.setLevel(level)
    manifest = {path.name: file_sha256(path) for path in (fp32, int8)}
    (folder / MANIFEST).write_text(json.dumps(manifest, indent=1), encoding="utf-8")
