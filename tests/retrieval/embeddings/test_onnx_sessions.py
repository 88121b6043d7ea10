"""SessionPool: one OpenVINO session per concurrent caller, reused afterwards, outputs as the
file computes."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from retrieval.embeddings.onnx_sessions import SessionPool


@pytest.fixture
def doubling_model(tmp_path):
    """An ONNX file computing ``y = 2 * x`` for ``x`` of shape [batch, 3]."""
    import onnx

    helper = onnx.helper
    graph = helper.make_graph(
        [helper.make_node("Mul", ["x", "two"], ["y"])],
        "doubling",
        [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["batch", 3])],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, ["batch", 3])],
        [helper.make_tensor("two", onnx.TensorProto.FLOAT, [], [2.0])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    path = tmp_path / "doubling.onnx"
    onnx.save(model, str(path))
    return path


def test_outputs_are_the_files_and_sequential_calls_share_one_session(doubling_model):
    pool = SessionPool(doubling_model, "f32")
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    for _ in range(3):
        np.testing.assert_array_equal(pool.run({"x": x})[0], 2 * x)
    assert pool.opened == 1


def test_openvino_runs_int8_weights_behind_a_dequantize_linear(tmp_path):
    """The form ``onnx_export`` gives int8 weights: OpenVINO computes x @ (w_int8 * scale), activations at int8."""
    import onnx

    rng = np.random.default_rng(0)
    weights = rng.integers(-127, 128, size=(256, 32)).astype(np.int8)
    scale = rng.uniform(0.001, 0.01, size=32).astype(np.float32)
    helper = onnx.helper
    graph = helper.make_graph(
        [
            helper.make_node("DequantizeLinear", ["w", "scale", "zero"], ["dequantised"], axis=1),
            helper.make_node("MatMul", ["x", "dequantised"], ["y"]),
        ],
        "int8_weights",
        [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["batch", 256])],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, ["batch", 32])],
        [
            onnx.numpy_helper.from_array(weights, "w"),
            onnx.numpy_helper.from_array(scale, "scale"),
            onnx.numpy_helper.from_array(np.zeros(32, dtype=np.int8), "zero"),
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(tmp_path / "int8.onnx"))
    pool = SessionPool(tmp_path / "int8.onnx", "bf16")
    x = rng.standard_normal((4, 256)).astype(np.float32)
    expected = x @ (weights.astype(np.float32) * scale)
    got = pool.run({"x": x})[0]
    cosine = (got * expected).sum(axis=1) / (np.linalg.norm(got, axis=1) * np.linalg.norm(expected, axis=1))
    assert got.shape == (4, 32) and cosine.min() >= 0.999
    assert pool.inference_precision in ("bf16", "f32")


def test_concurrent_calls_each_get_their_own_session_and_keep_them(doubling_model):
    pool = SessionPool(doubling_model, "f32")
    both_inside = threading.Barrier(2, timeout=10)
    sessions_used = []

    class Recording:
        """An infer request that waits until the other caller is inside too, then says which session it is."""

        def __init__(self, request):
            self.request = request

        def infer(self, feed):
            both_inside.wait()  # a shared session would also get here; the ids below tell them apart
            sessions_used.append(id(self))
            return self.request.infer(feed)

    def recorded(session):  # (compiled model, infer request), its request recorded
        return session[0], Recording(session[1])

    opened = pool._open
    pool._idle.put(recorded(pool._idle.get()))
    pool._open = lambda: recorded(opened())
    x = np.ones((1, 3), dtype=np.float32)
    with ThreadPoolExecutor(2) as threads:
        outputs = list(threads.map(lambda _: pool.run({"x": x})[0], range(2)))
    assert [output.tolist() for output in outputs] == [[[2.0, 2.0, 2.0]]] * 2
    assert len(set(sessions_used)) == 2 and pool.opened == 2
    both_inside = threading.Barrier(1)
    pool.run({"x": x})  # a later call reuses an idle session
    assert pool.opened == 2


def test_a_file_that_is_not_onnx_fails_when_the_pool_is_made(tmp_path):
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"not a model")
    with pytest.raises(Exception, match=r"(?i)protobuf|load|invalid|parse|read"):
        SessionPool(bad, "f32")


@pytest.mark.parametrize("asked", ["bf16", "f32"])
def test_openvino_runs_the_precision_asked_or_f32_where_the_cpu_lacks_bfloat16(doubling_model, asked, monkeypatch):
    """Reference: OpenVINO's own list of the CPU's capabilities ("BF16" when it runs bfloat16 here)."""
    import openvino

    from retrieval.embeddings.onnx_sessions import PRECISION_ENV, machine_precision

    has_bf16 = "BF16" in openvino.Core().get_property("CPU", "OPTIMIZATION_CAPABILITIES")
    expected = asked if asked == "f32" or has_bf16 else "f32"
    pool = SessionPool(doubling_model, asked)
    assert pool.inference_precision == expected
    monkeypatch.setenv(PRECISION_ENV, asked)
    assert machine_precision() == expected


def test_an_unknown_openvino_precision_is_one_line_naming_the_setting(monkeypatch):
    from retrieval.embeddings import EmbedderError
    from retrieval.embeddings.onnx_sessions import PRECISION_ENV, requested_precision

    monkeypatch.setenv(PRECISION_ENV, "fp16")
    with pytest.raises(EmbedderError, match=r"ZERDA_OPENVINO_PRECISION='fp16': use bf16 .* or f32") as error:
        requested_precision()
    assert "\n" not in str(error.value)
