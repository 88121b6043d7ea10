"""pipeline.dense's ``index`` option: exact, or a FAISS approximate index whose recall the cell records.

The recall a cell records is checked against an independent count: the overlap of its run file with the
run file of the exact cell of the same embedder (exact search's top k), query by query.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pandas as pd
import pytest

from zerda_eval.config.experiment import resolve_experiment
from zerda_eval.errors import ConfigError
from zerda_eval.execution.runner import run_experiment
from zerda_eval.store.run_dir import RUN_FILE
from zerda_eval.systems import build_system

DEPTH = 50


@pytest.fixture(scope="module")
def scifact_beir(tmp_path_factory, shared_dir: Path) -> Path:
    """SciFact's first 2,000 documents; query i is 8 words from the middle of document 25 i (its one relevant doc)."""
    folder = tmp_path_factory.mktemp("scifact-2k")
    lines = (shared_dir / "datasets" / "beir-scifact" / "corpus.jsonl").read_text(encoding="utf-8").splitlines()
    docs = [json.loads(line) for line in lines[:2000]]
    (folder / "corpus.jsonl").write_text("\n".join(json.dumps(d) for d in docs) + "\n", encoding="utf-8")
    queries = {f"q{i}": " ".join(docs[25 * i]["text"].split()[10:18]) for i in range(80)}
    (folder / "queries.jsonl").write_text(
        "".join(json.dumps({"_id": qid, "text": text}) + "\n" for qid, text in queries.items()), encoding="utf-8"
    )
    (folder / "qrels").mkdir()
    (folder / "qrels" / "test.tsv").write_text(
        "query-id\tcorpus-id\tscore\n" + "".join(f"q{i}\t{docs[25 * i]['_id']}\t1\n" for i in range(80))
    )
    return folder


def experiment(folder: Path, output_dir: Path, systems: list[dict]):
    raw = {
        "experiment": {
            "name": "ann",
            "depth": DEPTH,
            "measures": ["ndcg@10"],
            "output_dir": str(output_dir),
            "cache_dir": str(output_dir / "cache"),
        },
        "datasets": [{"name": "scifact2k", "path": str(folder), "format": "beir"}],
        "systems": systems,
    }
    return resolve_experiment(raw, "ann.toml")


def dense(name: str, **params) -> dict:
    return {"name": name, "family": "pipeline.dense", "params": {"embedder": "wordllama", "dim": 64, **params}}


def run_lines(path: Path) -> list[str]:
    """The lines of a cell's gzipped run file (read by Python's ``gzip``)."""
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        return handle.read().splitlines()


def read_run(path: Path) -> dict[str, list[str]]:
    run: dict[str, list[tuple[int, str]]] = {}
    for line in run_lines(path):
        qid, _, doc, rank, _, _ = line.split()
        run.setdefault(qid, []).append((int(rank), doc))
    return {qid: [doc for _, doc in sorted(hits)] for qid, hits in run.items()}


def test_recorded_recall_equals_the_overlap_with_the_exact_cells_run(scifact_beir, tmp_path) -> None:
    spec = experiment(
        scifact_beir,
        tmp_path / "runs",
        [dense("exact"), dense("ivf", index="ivf", nlist=64, nprobe=2), dense("hnsw", index="hnsw", ef_search=16)],
    )
    table = run_experiment(spec, progress=False).set_index("system")
    cells = tmp_path / "runs" / "cells"
    exact = read_run(cells / table.loc["exact", "cell_id"] / RUN_FILE)
    assert pd.isna(table.loc["exact", "ann_recall"])
    for name in ("ivf", "hnsw"):
        result = json.loads((cells / table.loc[name, "cell_id"] / "result.json").read_text())
        approximate = read_run(cells / table.loc[name, "cell_id"] / RUN_FILE)
        shares = [len(set(approximate.get(qid, [])) & set(best)) / len(best) for qid, best in exact.items()]
        expected = sum(shares) / len(shares)
        recorded = result["stats"]["vector_index"]
        assert recorded["index"] == name and recorded["recall_k"] == DEPTH and recorded["recall_queries"] == 80
        assert recorded["recall"] == pytest.approx(expected, abs=1e-12)
        assert table.loc[name, "ann_recall"] == recorded["recall"]
        assert 0.2 < expected < 1.0  # an approximation, and not a broken one
    assert (
        json.loads((cells / table.loc["ivf", "cell_id"] / "result.json").read_text())["stats"]["vector_index"]["nprobe"]
        == 2
    )


def test_every_index_option_enters_the_cell_id(scifact_beir, tmp_path) -> None:
    variants = [
        {},
        {"index": "ivf"},
        {"index": "ivf", "nlist": 10},
        {"index": "ivf", "nprobe": 3},
        {"index": "ivfpq"},
        {"index": "ivfpq", "pq_m": 8},
        {"index": "ivfpq", "pq_nbits": 6},
        {"index": "hnsw"},
        {"index": "hnsw", "hnsw_m": 8},
        {"index": "hnsw", "ef_construction": 80},
        {"index": "hnsw", "ef_search": 32},
    ]
    spec = experiment(scifact_beir, tmp_path, [dense(f"s{i}", **variant) for i, variant in enumerate(variants)])
    assert len({cell.cell_id for cell in spec.cells}) == len(variants)


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"nprobe": 4}, r"\.nprobe: applies to index = 'ivf' or 'ivfpq', not 'exact'; remove it"),
        ({"index": "hnsw", "nlist": 4}, r"\.nlist: applies to index = 'ivf' or 'ivfpq', not 'hnsw'"),
        ({"index": "ivf", "ef_search": 4}, r"\.ef_search: applies to index = 'hnsw', not 'ivf'"),
        ({"index": "ivf", "pq_m": 4}, r"\.pq_m: applies to index = 'ivfpq', not 'ivf'"),
        ({"index": "annoy"}, r"\.index: invalid value 'annoy'"),
    ],
)
def test_an_option_the_index_cannot_apply_is_a_one_line_config_error(params, message) -> None:
    with pytest.raises(ConfigError, match=message) as info:
        build_system("pipeline.dense", {"embedder": "wordllama", **params})
    assert "\n" not in str(info.value)


def test_the_lean_dense_family_ranks_as_pipeline_dense_and_records_its_recall(scifact_beir, tmp_path) -> None:
    """``dense`` holds no seed objects; its exact run is pipeline.dense's (whose scores are the same cosines
    clipped to [0, 1]: compared where none is clipped), and an IVF cell's recall is its overlap with it."""
    lean = {"name": "lean", "family": "dense", "params": {"embedder": "wordllama", "dim": 64}}
    lean_ivf = {**lean, "name": "lean_ivf", "params": {**lean["params"], "index": "ivf", "nlist": 64, "nprobe": 2}}
    spec = experiment(scifact_beir, tmp_path / "runs", [dense("seed"), lean, lean_ivf])
    table = run_experiment(spec, progress=False).set_index("system")
    cells = tmp_path / "runs" / "cells"
    seed, exact, ivf = (
        read_run(cells / table.loc[name, "cell_id"] / RUN_FILE) for name in ("seed", "lean", "lean_ivf")
    )
    scores = {}
    for line in run_lines(cells / table.loc["seed", "cell_id"] / RUN_FILE):
        qid, _, _, _, score, _ = line.split()
        scores.setdefault(qid, []).append(float(score))
    unclipped = [qid for qid, values in scores.items() if min(values) > 0.0 and max(values) < 1.0]
    assert len(unclipped) > 40
    assert all(exact[qid] == seed[qid] for qid in unclipped)
    shares = [len(set(ivf.get(qid, [])) & set(best)) / len(best) for qid, best in exact.items()]
    assert table.loc["lean_ivf", "ann_recall"] == pytest.approx(sum(shares) / len(shares), abs=1e-12)
