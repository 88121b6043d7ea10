"""Cross-modal encoding/retrieval and late interaction (MaxSim) on tiny hand-checked matrices."""

import math

import pytest

from retrieval.pipeline import (
    ContextItem,
    CrossModalEncoder,
    LateInteractionRetriever,
    LateInteractionScorer,
    MaxSimScorer,
    QueryBundle,
    RetrieverError,
    SharedSpaceRetriever,
)

R2 = 1 / math.sqrt(2)


TEXTS = {"cat": [1.0, 0.0], "dog": [0.0, 1.0]}
IMAGES = {"cat.png": [0.9, 0.1], "dog.png": [0.0, 1.0], "both.png": [1.0, 1.0]}


def encoder():
    return CrossModalEncoder({"text": TEXTS.__getitem__, "image": IMAGES.__getitem__})


def test_cross_modal_encoder():
    enc = encoder()
    assert enc.modalities == ["image", "text"]
    assert enc.encode("dog.png", "image") == [0.0, 1.0]
    with pytest.raises(ValueError, match="unknown modality 'audio'; known modalities: image, text"):
        enc.encode("x.wav", "audio")


def test_shared_space_retriever_uses_metadata_modality_default_text():
    retriever = SharedSpaceRetriever(encoder())
    retriever.index(
        [
            ContextItem(id="p1", content="cat.png", metadata={"modality": "image"}),
            ContextItem(id="p2", content="both.png", metadata={"modality": "image"}),
            ContextItem(id="t1", content="dog"),  # no modality: "text"
        ]
    )
    results = retriever.retrieve(QueryBundle(query_str="cat"), top_k=3)
    assert [r.id for r in results] == ["p1", "p2", "t1"]
    assert [r.score for r in results] == pytest.approx([0.9 / math.hypot(0.9, 0.1), R2, 0.0])
    assert [r.metadata["modality"] for r in results] == ["image", "image", "text"]


def test_shared_space_explicit_modality_and_errors():
    retriever = SharedSpaceRetriever(encoder(), query_modality="image", similarity_fn=lambda a, b: a[1] * b[1])
    retriever.index([ContextItem(id="d", content="dog.png"), ContextItem(id="c", content="cat.png")], "image")
    assert [r.id for r in retriever.retrieve(QueryBundle(query_str="both.png"), top_k=1)] == ["d"]
    with pytest.raises(ValueError, match="known modalities"):
        retriever.index([ContextItem(content="a.wav", metadata={"modality": "audio"})])


def test_maxsim_on_tiny_matrices():
    query = [[1.0, 0.0], [0.0, 1.0]]
    # q1: max(1, 1/sqrt2) = 1; q2: max(0, 1/sqrt2) = 1/sqrt2
    assert MaxSimScorer().score(query, [[1.0, 0.0], [1.0, 1.0]]) == pytest.approx(1 + R2)
    # unnormalised vectors: cosine, not dot product
    assert MaxSimScorer().score([[3.0, 0.0]], [[5.0, 0.0], [0.0, 7.0]]) == pytest.approx(1.0)
    assert MaxSimScorer().score(query, [[-1.0, 0.0]]) == pytest.approx(-1.0)
    assert MaxSimScorer().score([], [[1.0]]) == 0.0 and MaxSimScorer().score([[1.0]], []) == 0.0


def test_late_interaction_scorer_default_and_custom():
    assert LateInteractionScorer().score([[1.0, 0.0]], [[1.0, 1.0]]) == pytest.approx(R2)
    assert LateInteractionScorer(lambda q, d: len(q) * len(d)).score([[1.0]], [[1.0], [2.0]]) == 2


WORDS = {"red": [1.0, 0.0, 0.0], "car": [0.0, 1.0, 0.0], "blue": [0.0, 0.0, 1.0]}


class WordEncoder:
    def encode_tokens(self, text):
        return [WORDS[w] for w in text.split()]


class FirstStage:
    def __init__(self):
        self.asked = []

    def retrieve(self, query, top_k=10):
        self.asked.append(top_k)
        docs = [("d1", "blue car", 0.9), ("d2", "red car", 0.8), ("d3", "blue", 0.7)]
        return [ContextItem(id=i, content=c, score=s) for i, c, s in docs][:top_k]


def test_late_interaction_retriever_rescores_first_stage():
    first = FirstStage()
    retriever = LateInteractionRetriever(first, WordEncoder(), first_stage_k=3)
    results = retriever.retrieve(QueryBundle(query_str="red car"), top_k=2)
    assert first.asked == [3]
    # MaxSim: d2 = 1 + 1 = 2, d1 = 0 + 1 = 1, d3 = 0 + 0 = 0; ordered by the raw sum, score clamped to [0, 1]
    assert [r.id for r in results] == ["d2", "d1"]
    assert [r.metadata["late_interaction_score"] for r in results] == pytest.approx([2.0, 1.0])
    assert [r.score for r in results] == [1.0, 1.0]
    assert [r.metadata["first_stage_score"] for r in results] == [0.8, 0.9]


def test_late_interaction_retriever_unit_scores_kept_and_errors():
    retriever = LateInteractionRetriever(
        FirstStage(), WordEncoder(), LateInteractionScorer(lambda q, d: len(d) / 10), first_stage_k=2
    )
    results = retriever.retrieve(QueryBundle(query_str="red"))
    assert [(r.id, r.score) for r in results] == [("d1", 0.2), ("d2", 0.2)]  # tie: first-stage order
    with pytest.raises(RetrieverError, match="first_stage_k must be >= 1"):
        LateInteractionRetriever(FirstStage(), WordEncoder(), first_stage_k=0)
