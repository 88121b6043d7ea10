"""A corpus above ``STREAM_ABOVE_DOCS`` keeps only its doc ids: texts stream from ir_datasets, answers unchanged."""

from __future__ import annotations

import pytest

from zerda_eval.datasets import load_collection, loader, streamed
from zerda_eval.datasets.streamed import StreamedTexts
from zerda_eval.errors import DataFormatError
from zerda_eval.store.run_dir import RUN_FILE
from zerda_eval.systems import build_system

DATASET = "vaswani"  # 11,429 abstracts


@pytest.fixture
def both(monkeypatch):
    """The same dataset loaded as lists, then streamed (threshold lowered below its size)."""
    loaded = load_collection(DATASET)
    monkeypatch.setattr(streamed, "STREAM_ABOVE_DOCS", 1_000)
    loader._cached.cache_clear()
    try:
        yield loaded, load_collection(DATASET)
    finally:
        loader._cached.cache_clear()


def test_streamed_collection_holds_ids_not_texts(both):
    loaded, streaming = both
    assert isinstance(loaded.texts, list)
    assert isinstance(streaming.texts, StreamedTexts)
    # its only list is the collection's own doc ids: no copy of the texts anywhere
    assert [v for v in vars(streaming.texts).values() if isinstance(v, list)] == [streaming.doc_ids]
    assert streaming.doc_ids == loaded.doc_ids
    assert (streaming.queries, streaming.qrels) == (loaded.queries, loaded.qrels)
    assert len(streaming.texts) == len(loaded.texts)
    assert list(streaming.texts) == loaded.texts
    assert streaming.texts[7] == loaded.texts[7]
    assert streaming.texts[-1] == loaded.texts[-1]
    assert streaming.texts[100:103] == loaded.texts[100:103]


@pytest.mark.parametrize(
    ("family", "params"),
    [("zerda.keyword", {"engine": "fast"}), ("pipeline.dense", {"embedder": "lsa", "dim": 64})],
)
def test_systems_over_a_streamed_corpus_answer_as_over_lists(both, tmp_path, family, params):
    loaded, streaming = both
    queries = dict(list(loaded.queries.items())[:25])
    runs = []
    for collection, cache in ((loaded, None), (streaming, tmp_path)):  # in memory vs streamed + cache_dir
        system = build_system(family, params)
        system.index(collection, cache)
        runs.append(system.search(queries, 20))
    assert runs[0].keys() == runs[1].keys()
    for qid in runs[0]:
        assert [d for d, _ in runs[0][qid]] == [d for d, _ in runs[1][qid]], qid
        assert [s for _, s in runs[0][qid]] == pytest.approx([s for _, s in runs[1][qid]], abs=1e-6), qid


def test_a_corpus_that_changed_on_disk_is_an_error():
    loaded = load_collection(DATASET)
    texts = StreamedTexts(DATASET, ["not-the-first-id", *loaded.doc_ids[1:]])
    with pytest.raises(DataFormatError, match="corpus changed since it was loaded"):
        next(iter(texts))


def test_a_grid_over_a_streamed_corpus_writes_the_same_runs(monkeypatch, tmp_path):
    """End to end through the runner: same run files whether vaswani's texts are a list or streamed."""
    from zerda_eval.config.experiment import resolve_experiment
    from zerda_eval.execution.runner import run_experiment

    def run(folder):
        raw = {
            "experiment": {
                "name": "streamed",
                "depth": 50,
                "measures": ["ndcg@10"],
                "output_dir": str(folder),
                "cache_dir": str(folder / "cache"),
            },
            "datasets": [{"id": DATASET}],
            "systems": [{"name": "bm25", "family": "zerda.keyword", "params": {"engine": "fast"}}],
        }
        run_experiment(resolve_experiment(raw, "streamed.toml"), progress=False)
        return {p.parent.name: p.read_bytes() for p in sorted((folder / "cells").glob(f"*/{RUN_FILE}"))}

    loader._cached.cache_clear()
    in_memory = run(tmp_path / "lists")
    monkeypatch.setattr(streamed, "STREAM_ABOVE_DOCS", 1_000)
    loader._cached.cache_clear()
    try:
        assert isinstance(load_collection(DATASET).texts, StreamedTexts)
        assert run(tmp_path / "streamed") == in_memory
    finally:
        loader._cached.cache_clear()
    assert len(in_memory) == 1
