"""``retrieval.pipeline.cross_encoders``: a local CrossEncoder folder behind seed 004's CrossEncoderReranker.

The reference is sentence-transformers itself: a ``CrossEncoder`` loaded here from the same tiny folder
(``tests/cross_encoder_model.py``) and its ``predict`` on the same (query, passage) pairs.
"""

from __future__ import annotations

import json

import pytest

from retrieval.pipeline.cross_encoders import LocalCrossEncoder, cross_encoder_folder
from retrieval.pipeline.errors import RetrieverError
from retrieval.pipeline.models import ContextItem, QueryBundle
from tests.cross_encoder_model import write_tiny_cross_encoder

PASSAGES = [
    "the cat sat on the mat",
    "the volcano erupted and lava ran",
    "a bee in the flower of the hive",
    "jet engine fuel and the plane",
    "bread flour in the oven",
    "the dog ran to the cat",
    "water and sun to the plant",
]


@pytest.fixture(scope="module")
def model_folder(tmp_path_factory):
    return write_tiny_cross_encoder(tmp_path_factory.mktemp("tiny-ce") / "model")


@pytest.fixture(scope="module")
def reference(model_folder):
    from sentence_transformers import CrossEncoder

    return CrossEncoder(str(model_folder), device="cpu", local_files_only=True)


def test_scores_are_cross_encoder_predict(model_folder, reference):
    pairs = [("lava volcano", passage) for passage in PASSAGES]
    ours = LocalCrossEncoder(model_folder, batch_size=3).predict(pairs)
    theirs = reference.predict([list(pair) for pair in pairs], batch_size=3)
    assert ours == pytest.approx(theirs.tolist(), rel=1e-6, abs=1e-6)
    assert len(set(ours)) == len(ours)  # distinct scores: the order below is a real test


def test_rerank_orders_by_predict_keeps_raw_scores_and_cuts(model_folder, reference):
    items = [ContextItem(id=f"d{i}", content=text) for i, text in enumerate(PASSAGES)]
    reranked = LocalCrossEncoder(model_folder).rerank(QueryBundle(query_str="the cat"), items, top_k=5)
    theirs = reference.predict([["the cat", passage] for passage in PASSAGES]).tolist()
    expected = sorted(range(len(PASSAGES)), key=lambda i: -theirs[i])[:5]
    assert [item.id for item in reranked] == [f"d{i}" for i in expected]
    assert [item.metadata["raw_score"] for item in reranked] == pytest.approx([theirs[i] for i in expected], rel=1e-6)
    assert all(item.metadata["rerank_method"] == "cross_encoder" for item in reranked)  # seed 004's reranker ran
    assert reranked != [] and [item.id for item in reranked] != [f"d{i}" for i in range(5)]  # it reordered


def test_a_missing_folder_or_a_folder_that_is_no_cross_encoder_is_one_line(tmp_path):
    with pytest.raises(RetrieverError, match=r"not found") as missing:
        cross_encoder_folder(tmp_path / "nowhere")
    assert str(tmp_path / "nowhere") in str(missing.value) and "\n" not in str(missing.value)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(RetrieverError, match=r"no readable config.json"):
        cross_encoder_folder(empty)
    bi_encoder = tmp_path / "bi"
    bi_encoder.mkdir()
    (bi_encoder / "config.json").write_text(json.dumps({"architectures": ["BertModel"]}), encoding="utf-8")
    with pytest.raises(RetrieverError, match=r"is not a cross-encoder .*BertModel") as wrong:
        cross_encoder_folder(bi_encoder)
    assert "\n" not in str(wrong.value)


def test_a_folder_whose_weights_are_missing_is_one_line(model_folder, tmp_path):
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "config.json").write_bytes((model_folder / "config.json").read_bytes())
    with pytest.raises(RetrieverError, match=r"cannot load the cross-encoder") as error:
        LocalCrossEncoder(broken)
    assert str(broken) in str(error.value) and "\n" not in str(error.value)
