"""A small REAL run directory in the contract layout, built with the project's BM25 and ranx.

Two datasets: Qur'an QA 2023 task A dev (Arabic, read straight from the shared files) and a tiny
hand-written English collection. Systems: BM25 twice (two k1/b), BM25 over character trigrams, the
zerda weighted-sum + RRF fusion of those two in both ``rrf_order`` modes and two weightings, an RRF
k sweep and a weighted-RRF weight sweep (ranx's fusion kernels are left to the slow fusion tests).
Every number comes from running them; nothing is typed in.
"""

from __future__ import annotations

import csv
import gzip
import hashlib
import json
import resource
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from retrieval.core import BM25Index, tokenize
from tests.conftest import trec_order
from zerda_eval.fusion.methods import fuse_runs
from zerda_eval.store.run_dir import RUN_FILE, RUN_TAG  # the grid's run file and tag (a label may hold spaces)

MEASURES = ["ndcg@10", "mrr@10", "recall@100", "map@100", "precision@10"]
DEPTH = 100
RunDict = dict[str, list[tuple[str, float]]]

TOY_DOCS = {
    "e1": "bm25 is a ranking function used by search engines",
    "e2": "reciprocal rank fusion combines several ranked lists",
    "e3": "dense retrieval embeds queries and documents as vectors",
    "e4": "the weighted sum of normalised scores is a simple fusion",
    "e5": "arabic text needs normalisation of alef and yaa forms",
    "e6": "search engines index documents in an inverted index",
    "e7": "vectors are compared with cosine similarity",
    "e8": "significance tests compare two systems on the same queries",
    "e9": "a paired t-test and a randomisation test are common",
    "e10": "kendall tau measures agreement between two rankings",
    "e11": "the ranking of documents depends on the scoring function",
    "e12": "fusion of sparse and dense retrieval often helps",
}
TOY_QUERIES = {
    "t1": "ranking function for search",
    "t2": "rank fusion of lists",
    "t3": "dense vectors cosine",
    "t4": "paired significance test",
    "t5": "agreement between rankings",
    "t6": "sparse dense fusion",
}
TOY_QRELS = {
    "t1": {"e1": 2, "e11": 1},
    "t2": {"e2": 2, "e4": 1},
    "t3": {"e3": 1, "e7": 2},
    "t4": {"e8": 2, "e9": 2},
    "t5": {"e10": 2},
    "t6": {"e12": 2, "e2": 1},
}


def quranqa_dev(shared_dir: Path) -> tuple[dict[str, str], dict[str, str], dict[str, dict[str, int]]]:
    """Passages, dev questions and dev qrels of Qur'an QA 2023 task A (no-answer qrels "-1" dropped)."""
    folder = shared_dir / "datasets" / "quranqa23-taskA"

    def tsv(name: str) -> dict[str, str]:
        lines = (folder / name).read_text(encoding="utf-8").splitlines()
        return dict(line.split("\t", 1) for line in lines if line)

    docs, queries = tsv("QQA23_TaskA_QPC_v1.1.tsv"), tsv("QQA23_TaskA_dev.tsv")
    qrels: dict[str, dict[str, int]] = {}
    for line in filter(None, (folder / "QQA23_TaskA_qrels_dev.gold").read_text(encoding="utf-8").splitlines()):
        qid, _, doc_id, rel = line.split()
        if doc_id != "-1":
            qrels.setdefault(qid, {})[doc_id] = int(rel)
    return docs, {q: t for q, t in queries.items() if q in qrels}, qrels


def trigrams(text: str) -> list[str]:
    """Character trigrams of each token: a second, genuinely different lexical signal."""
    return [token[i : i + 3] for token in tokenize(text) for i in range(max(1, len(token) - 2))]


def bm25_run(docs: dict[str, str], queries: dict[str, str], analyze: Callable, k1: float, b: float):
    """Run BM25 over ``docs``; returns the run (scores divided by the query's max) and latencies in ms."""
    doc_ids = list(docs)
    start = time.perf_counter()
    index = BM25Index(k1=k1, b=b).fit([analyze(docs[d]) for d in doc_ids])
    index_time = time.perf_counter() - start
    run, latencies = {}, []
    for qid, text in queries.items():
        start = time.perf_counter()
        hits = index.top_k(analyze(text), DEPTH)
        latencies.append((time.perf_counter() - start) * 1000)
        top = max((s for _, s in hits), default=0.0) or 1.0
        run[qid] = [(doc_ids[i], s / top) for i, s in hits if s > 0]
    return run, index_time, latencies


def evaluate(run: RunDict, qrels: dict[str, dict[str, int]]) -> dict[str, dict[str, float]]:
    """Per-query ranx values after the project's tie-break (trec_eval's: score desc, doc id desc); missing query = 0."""
    from ranx import Qrels, Run, evaluate

    ordered = {q: trec_order(run.get(q, [])) for q in qrels}
    scored = {q: {d: float(len(r) - i) for i, (d, _) in enumerate(r)} for q, r in ordered.items() if r}
    values = {m: dict.fromkeys(qrels, 0.0) for m in MEASURES}
    ranx_run = Run.from_dict(scored)
    evaluate(Qrels.from_dict({q: qrels[q] for q in scored}), ranx_run, MEASURES, threads=1)
    for measure in MEASURES:
        values[measure].update({q: float(v) for q, v in ranx_run.scores[measure].items()})
    return values


def label(name: str, grid: dict) -> str:
    return name + ("[" + ",".join(f"{k}={grid[k]}" for k in sorted(grid)) + "]" if grid else "")


def write_cell(out: Path, dataset: str, system: str, family: str, params: dict, run: RunDict, qrels, timing) -> dict:
    """Write one cell (run.trec.gz, per_query.csv, result.json last) and return its results row."""
    cell_id = hashlib.sha256(json.dumps([dataset, system, params], sort_keys=True).encode()).hexdigest()[:16]
    folder = out / "cells" / cell_id
    folder.mkdir(parents=True)
    with gzip.open(folder / RUN_FILE, "wt", encoding="utf-8") as handle:
        for qid, ranking in run.items():
            for rank, (doc_id, score) in enumerate(trec_order(ranking), start=1):
                handle.write(f"{qid} Q0 {doc_id} {rank} {score:.12g} {RUN_TAG}\n")
    values = evaluate(run, qrels)
    with open(folder / "per_query.csv", "w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["query_id", "measure", "value"])
        for measure, per_query in values.items():
            writer.writerows([q, measure, v] for q, v in per_query.items())
    index_time, latencies = timing
    lat = np.asarray(latencies)
    row = {
        "dataset": dataset,
        "system": system,
        "family": family,
        "params": json.dumps(params, sort_keys=True),
    }
    row |= {"cell_id": cell_id} | {m: float(np.mean(list(values[m].values()))) for m in MEASURES}
    row |= {
        "index_time_s": index_time,
        "latency_mean_ms": float(lat.mean()),
        "latency_p50_ms": float(np.percentile(lat, 50)),
        "latency_p95_ms": float(np.percentile(lat, 95)),
        "latency_p99_ms": float(np.percentile(lat, 99)),
        "qps": float(1000 / lat.mean()) if lat.mean() > 0 else 0.0,
        "peak_rss_increment_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }
    result = {"cell_id": cell_id, "config": {"dataset": dataset, "system": system, "params": params}}
    result |= {"means": {m: row[m] for m in MEASURES}, "library_versions": {"numpy": np.__version__}}
    (folder / "result.json").write_text(json.dumps(result, indent=2), encoding="utf-8")
    per_query_rows = [
        {"cell_id": cell_id, "dataset": dataset, "system": system, "query_id": q, "measure": m, "value": v}
        for m, per_query in values.items()
        for q, v in per_query.items()
    ]
    return row, per_query_rows


def build_run_dir(out: Path, collections: dict[str, tuple[dict, dict, dict]], name: str = "tiny") -> Path:
    """Run every system on every collection and write the whole run directory; returns ``out``."""
    rows, per_query = [], []

    def add(dataset, system, family, params, run, qrels, timing):
        row, pq = write_cell(out, dataset, system, family, params, run, qrels, timing)
        rows.append(row)
        per_query.extend(pq)

    for dataset, (docs, queries, qrels) in collections.items():
        bm25, index_time, lat = bm25_run(docs, queries, tokenize, 1.5, 0.75)
        add(dataset, "bm25", "zerda.keyword", {"k1": 1.5, "b": 0.75}, bm25, qrels, (index_time, lat))
        tuned, index_time, lat = bm25_run(docs, queries, tokenize, 0.9, 0.4)
        grid = {"k1": 0.9, "b": 0.4}
        add(dataset, label("bm25_tuned", grid), "zerda.keyword", grid, tuned, qrels, (index_time, lat))
        tri, index_time, tri_lat = bm25_run(docs, queries, trigrams, 1.2, 0.75)
        add(dataset, "trigram", "zerda.keyword", {"k1": 1.2, "b": 0.75}, tri, qrels, (index_time, tri_lat))
        both = (index_time, [a + b for a, b in zip(lat, tri_lat, strict=True)])
        for weight in (0.3, 0.7):
            for order in ("as_documented", "fixed"):
                grid = {"vector_weight": weight, "keyword_weight": round(1 - weight, 10), "rrf_order": order}
                fused = fuse_runs("zerda", [tri, bm25], weights=[weight, 1 - weight], rrf_order=order, top_k=DEPTH)
                add(dataset, label("hybrid", grid), "zerda.hybrid", grid, fused, qrels, both)
        for k in (10, 60):
            add(
                dataset,
                label("rrf", {"k": k}),
                "fusion.rrf",
                {"k": k},
                fuse_runs("rrf", [tri, bm25], k=k),
                qrels,
                both,
            )
        for weights in ([0.2, 0.8], [0.5, 0.5], [0.8, 0.2]):
            fused = fuse_runs("rrf", [tri, bm25], weights=weights)
            add(
                dataset,
                label("wrrf", {"weights": weights}),
                "fusion.rrf",
                {"weights": weights},
                fused,
                qrels,
                both,
            )
    results = pd.DataFrame(rows)
    results.to_csv(out / "results.csv", index=False)
    results.to_parquet(out / "results.parquet", index=False)
    pd.DataFrame(per_query).to_parquet(out / "per_query.parquet", index=False)
    config = {
        "experiment": {"name": name, "depth": DEPTH, "measures": MEASURES, "seed": 13},
        "datasets": [{"id": d} for d in collections],
        "systems": [{"name": n} for n in ("bm25", "bm25_tuned", "trigram")]
        + [{"name": "hybrid", "grid": {"rrf_order": ["as_documented", "fixed"]}}],
        "fusions": [{"name": "rrf", "method": "rrf"}, {"name": "wrrf", "method": "rrf"}],
        "compare": {"baseline": "bm25", "tests": ["t-test", "fisher"], "correction": "holm"},
        "study": {"rrf_order": {"system": "hybrid"}},
    }
    (out / "experiment.json").write_text(json.dumps({"config": config, "hash": "test"}, indent=2), encoding="utf-8")
    return out


@pytest.fixture(scope="session")
def run_dir(tmp_path_factory, shared_dir: Path) -> Path:
    """The real run directory (built once per session)."""
    collections = {
        "quranqa23/taskA/dev": quranqa_dev(shared_dir),
        "toy-en": (TOY_DOCS, TOY_QUERIES, TOY_QRELS),
    }
    return build_run_dir(tmp_path_factory.mktemp("runs") / "tiny", collections)
