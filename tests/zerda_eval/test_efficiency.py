"""Efficiency labels: a fusion's costs include its inputs', peak RSS is the cell's own window."""

from __future__ import annotations

import json
import mmap
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import experiment_header, write_trec_folder
from zerda_eval.config.experiment import load_experiment
from zerda_eval.evaluation.efficiency import INCREMENT_SCOPE, RssWindow
from zerda_eval.execution.runner import run_experiment

DOCS = {"d1": "bm25 ranks by term frequency", "d2": "dense retrieval embeds text", "d3": "rank fusion of lists"}
QUERIES = {"q1": "bm25 term frequency", "q2": "rank fusion", "q3": "dense text"}


def experiment(tmp_path: Path) -> Path:
    data = write_trec_folder(tmp_path / "data", DOCS, QUERIES, [("q1", "d1", 1), ("q2", "d3", 1), ("q3", "d2", 1)])
    path = tmp_path / "fusion.toml"
    path.write_text(
        experiment_header(tmp_path, "fusion-costs")
        + f"""
[[datasets]]
name = "tiny"
path = "{data}"
format = "trec"

[[systems]]
name = "bm25"
family = "zerda.keyword"

[[systems]]
name = "sparse"
family = "pipeline.sparse"

[[fusions]]
name = "rrf"
inputs = ["bm25", "sparse"]
method = "rrf"
""",
        encoding="utf-8",
    )
    return path


def test_a_fusion_costs_its_inputs_plus_the_fusing_step(tmp_path: Path) -> None:
    config = experiment(tmp_path)
    table = run_experiment(load_experiment(config), progress=False).set_index("system")
    results = {
        path.parent.name: json.loads(path.read_text(encoding="utf-8"))
        for path in (tmp_path / "runs" / "cells").glob("*/result.json")
    }
    by_system = {r["system"]: r for r in results.values()}
    bm25, sparse, rrf = (by_system[name] for name in ("bm25", "sparse", "rrf"))
    per_query = {qid: bm25["stats"]["latency_ms"][qid] + sparse["stats"]["latency_ms"][qid] for qid in QUERIES}
    fused = rrf["stats"]["latency_ms"]
    assert all(fused[qid] > per_query[qid] for qid in QUERIES)  # inputs plus a positive fusing time
    fusing = np.array([fused[qid] - per_query[qid] for qid in QUERIES])
    assert table.loc["rrf", "latency_mean_ms"] == pytest.approx(np.mean(list(fused.values())))
    assert (
        table.loc["rrf", "latency_mean_ms"]
        > table.loc["bm25", "latency_mean_ms"] + table.loc["sparse", "latency_mean_ms"]
    )
    slowest = [max(bm25["stats"]["latency_ms"][q], sparse["stats"]["latency_ms"][q]) for q in QUERIES]
    assert table.loc["rrf", "latency_parallel_mean_ms"] == pytest.approx(np.mean(np.array(slowest) + fusing))
    assert table.loc["rrf", "index_time_s"] == pytest.approx(
        table.loc["bm25", "index_time_s"] + table.loc["sparse", "index_time_s"]
    )
    assert table.loc["rrf", "index_time_parallel_s"] == pytest.approx(
        max(table.loc["bm25", "index_time_s"], table.loc["sparse", "index_time_s"])
    )
    assert table.loc["rrf", "qps"] < min(table.loc["bm25", "qps"], table.loc["sparse", "qps"])
    for name in ("bm25", "sparse"):  # a single system: parallel = serial
        assert table.loc[name, "latency_parallel_mean_ms"] == table.loc[name, "latency_mean_ms"]
        assert by_system[name]["stats"]["peak_rss_scope"] in (INCREMENT_SCOPE, "not measured")  # says what it is
    assert "largest increment" in rrf["stats"]["peak_rss_scope"]


def test_peak_rss_is_the_cells_own_window() -> None:
    first = RssWindow()
    if first.scope != INCREMENT_SCOPE:
        pytest.skip("the kernel's RSS high-water mark cannot be reset here (not Linux)")
    # 160 MB of anonymous pages, touched, then unmapped: an mmap of its own, because whether malloc hands a
    # freed numpy block back to the kernel depends on what ran before in the process (a full test run kept it)
    block = mmap.mmap(-1, 160 * 1024 * 1024)
    np.frombuffer(block, dtype=np.uint8)[::4096] = 1
    big = first.increment_mb()
    block.close()
    second = RssWindow()  # a later cell that allocates nothing big
    assert second.increment_mb() < big - 100  # a process-wide high-water mark would repeat the earlier peak


def test_every_cell_encodes_its_own_queries_so_its_latency_includes_them(monkeypatch) -> None:
    """Cells on one corpus share its vectors, never their query vectors: latency means the same in each cell,
    whatever ran before it in the process (a later cell used to find every query already encoded)."""
    from retrieval.embeddings import base
    from zerda_eval.datasets.collection import Collection
    from zerda_eval.systems import build_system, encoders

    encoders._SHARED.clear()
    encoded: list[str] = []
    real = base.embed_queries
    monkeypatch.setattr(base, "embed_queries", lambda e, texts: encoded.extend(texts) or real(e, texts))
    collection = Collection("tiny", "en", list(DOCS), list(DOCS.values()), QUERIES, {"q1": {"d1": 1}})
    for family in ("pipeline.dense", "zerda.vector", "pipeline.dense"):
        system = build_system(family, {"embedder": "lsa"})
        system.index(collection)
        system.search({"q1": QUERIES["q1"]}, 2)
    assert encoded == [QUERIES["q1"]] * 3


def test_the_reranker_encodes_each_search_s_query_once(monkeypatch) -> None:
    """pipeline.rerank scores every candidate against the query: one encoding per search, none kept after it."""
    from retrieval.embeddings import base
    from zerda_eval.datasets.collection import Collection
    from zerda_eval.systems import build_system

    encoded: list[str] = []
    real = base.embed_queries
    monkeypatch.setattr(base, "embed_queries", lambda e, texts: encoded.extend(texts) or real(e, texts))
    collection = Collection("tiny", "en", list(DOCS), list(DOCS.values()), QUERIES, {"q1": {"d1": 1}})
    system = build_system("pipeline.rerank", {"embedder": "lsa"})
    system.index(collection)
    system.search({"q1": "rank fusion of term frequency lists"}, 3)  # three candidates from BM25
    system.search({"q1": "rank fusion of term frequency lists"}, 3)
    assert encoded == ["rank fusion of term frequency lists"] * 2


class ThreadProbe:
    """A toy system that records, inside each search, the thread counts of every pool it can see."""

    version = "1"

    def __init__(self) -> None:
        self.seen: list[dict[str, list[int]]] = []

    def search(self, query_text: str, k: int) -> list[tuple[str, float]]:
        import numba
        from threadpoolctl import threadpool_info

        pools: dict[str, list[int]] = {"numba": [numba.get_num_threads()]}
        for pool in threadpool_info():
            pools.setdefault(pool["user_api"], []).append(pool["num_threads"])
        self.seen.append(pools)
        return [(doc_id, 1.0 / (i + 1)) for i, doc_id in enumerate(DOCS)][:k]


def test_timed_searches_run_with_one_thread_per_pool_and_the_result_says_so(tmp_path):
    import tomllib

    from zerda_eval import Experiment

    data = write_trec_folder(tmp_path / "data", DOCS, QUERIES, [("q1", "d1", 1), ("q2", "d3", 1), ("q3", "d2", 1)])
    mapping = tomllib.loads(experiment_header(tmp_path, "threads"))
    mapping["datasets"] = [{"name": "tiny", "path": str(data), "format": "trec"}]
    probe = ThreadProbe()
    results = Experiment.from_dict(mapping, systems={"probe": probe}).run(progress=False)
    assert len(probe.seen) == len(QUERIES) + 1  # the untimed warm-up query, then each query timed
    assert "blas" in probe.seen[0]  # numpy's BLAS is loaded: the check below is not vacuous
    for pools in probe.seen:
        assert all(count == 1 for counts in pools.values() for count in counts), pools
    result = json.loads((results.run_dir / "cells" / results.cell_id("probe") / "result.json").read_text())
    threads = result["stats"]["threads"]  # torch too when an earlier test of this process loaded it
    assert {"blas", "openmp", "numba"} <= set(threads) <= {"blas", "openmp", "numba", "torch"}
    assert set(threads.values()) == {1}


def test_a_cell_s_peak_rss_is_its_own_increment_not_what_earlier_cells_left_loaded() -> None:
    """A BM25 cell run after neural cells reported 1,465 MB: the models they loaded stay resident. The figure
    is the cell's increment over the process's RSS at its start."""
    loaded = mmap.mmap(-1, 300 * 1024 * 1024)  # an earlier cell's models, still loaded
    np.frombuffer(loaded, dtype=np.uint8)[::4096] = 1
    window = RssWindow()
    if window.scope != INCREMENT_SCOPE:
        pytest.skip("the kernel's RSS high-water mark cannot be reset here (not Linux)")
    own = mmap.mmap(-1, 40 * 1024 * 1024)  # what this cell allocates
    np.frombuffer(own, dtype=np.uint8)[::4096] = 1
    increment = window.increment_mb()
    own.close()
    loaded.close()
    assert 40 <= increment < 40 + 30  # 40 MB touched; the interpreter's own churn is a few MB
