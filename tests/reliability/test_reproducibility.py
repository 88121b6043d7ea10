"""Same config, same machine -> byte-identical run files and identical results (timing columns aside).

Two fresh runs (separate output and cache folders, so nothing is reused) of a small grid covering the
zerda and pipeline families, a dense hybrid in both ``rrf_order`` modes and a fusion; and two fresh runs
of the README's quickstart (``experiments/quickstart.toml``, 21 cells), side by side in two processes,
with its neural dense side swapped for corpus-fitted LSA so CI does not spend minutes encoding corpora
on a CPU (every other line of the shipped file runs as is).
"""

from __future__ import annotations

import json
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

from tests.reliability.harness import (
    QRELS,
    QUERIES,
    cell_files,
    experiment_toml,
    only_cell,
    read_per_query,
    read_run,
    results_without_timing,
    write_beir,
)

SYSTEMS = [
    {"name": "bm25", "family": "zerda.keyword"},
    {"name": "bm25fast", "family": "zerda.keyword", "params": {"engine": "fast"}, "grid": {"b": [0.3, 0.9]}},
    {"name": "sparse", "family": "pipeline.sparse"},
    {"name": "hybrid", "family": "zerda.hybrid", "grid": {"rrf_order": ["as_documented", "fixed"]}},
]
FUSIONS = [{"name": "rrf", "inputs": ["bm25", "sparse"], "method": "rrf"}]


def run_twice(cli, tmp_path: Path, **toml) -> tuple[Path, Path]:
    """Run the same experiment into two fresh output (and cache) folders; return both output folders."""
    folder = write_beir(tmp_path / "collection")
    dataset = [{"path": str(folder), "format": "beir", "name": "tiny"}]
    outputs = []
    for attempt in ("first", "second"):
        root = tmp_path / attempt
        root.mkdir()
        result = cli("run", experiment_toml(root, datasets=dataset, **toml))
        assert result.code == 0, result.err
        outputs.append(root / "out")
    return outputs[0], outputs[1]


def assert_identical(first: Path, second: Path, n_cells: int) -> None:
    files = cell_files(first)
    assert len(files) == 2 * n_cells
    assert files == cell_files(second)
    rows = results_without_timing(first)
    assert len(rows) == n_cells
    assert rows == results_without_timing(second)


@pytest.mark.slow  # two runs of six cells, two of them dense (wordllama)
def test_two_runs_of_a_grid_are_identical(cli, tmp_path):
    first, second = run_twice(cli, tmp_path, systems=SYSTEMS)
    assert_identical(first, second, n_cells=6)  # 1 + 2 + 1 + 2 system cells


def test_two_runs_with_a_fusion_are_identical(cli, tmp_path):
    systems = [{"name": "bm25", "family": "zerda.keyword"}, {"name": "sparse", "family": "pipeline.sparse"}]
    first, second = run_twice(cli, tmp_path, systems=systems, fusions=FUSIONS)
    assert_identical(first, second, n_cells=3)


def test_results_record_versions_and_config_hash(cli, tmp_path):
    from zerda_eval.config.experiment import load_experiment

    config = experiment_toml(tmp_path)
    assert cli("run", config).code == 0
    output_dir = tmp_path / "out"
    expected_hash = load_experiment(config).config_hash
    assert expected_hash in (output_dir / "experiment.json").read_text(encoding="utf-8")
    cell = next((output_dir / "cells").iterdir())
    result = json.loads((cell / "result.json").read_text(encoding="utf-8"))
    assert result["cell_id"] == cell.name
    text = json.dumps(result)
    for library in ("numpy", "ranx", "scipy"):
        assert f'"{library}": "{metadata.version(library)}"' in text, library


def test_trec_eval_on_the_saved_run_file_gives_the_reported_numbers(cli, tmp_path):
    """A run file is only reproducible if a tool reading it gets the numbers the harness reported.

    The query without indexable tokens makes every score 0 (a full tie): trec_eval orders exact ties by
    doc id descending, and so does the harness. trec_eval fed the file's own scores must agree, and
    the rank column must be 1, 2, ... in the file's order, which is trec_eval's order of the scores.
    """
    import pytrec_eval

    folder = write_beir(tmp_path / "collection", queries={**QUERIES, "q3": "?! ..."})
    dataset = [{"path": str(folder), "format": "beir", "name": "tiny"}]
    assert cli("run", experiment_toml(tmp_path, datasets=dataset)).code == 0
    cell = only_cell(tmp_path / "out")
    per_query = read_per_query(cell)
    evaluator = pytrec_eval.RelevanceEvaluator(QRELS, {"ndcg_cut.10", "recall.10"})
    scored = read_run(cell, use_scores=True)
    assert len(set(scored["q3"].values())) == 1 and len(scored["q3"]) > 1  # the full tie is there
    for qid, row in evaluator.evaluate(scored).items():
        assert row["ndcg_cut_10"] == pytest.approx(per_query[(qid, "ndcg@10")], abs=1e-12), qid
        assert row["recall_10"] == pytest.approx(per_query[(qid, "recall@10")], abs=1e-12), qid
    for qid, scores in scored.items():
        by_rank = sorted(read_run(cell)[qid].items(), key=lambda item: -item[1])  # rank column: 1 / rank
        by_id = sorted(scores.items(), key=lambda item: item[0].encode("utf-8"), reverse=True)
        assert [doc for doc, _ in by_rank] == [doc for doc, _ in sorted(by_id, key=lambda item: -item[1])], qid


def quickstart_with_lsa(folder: Path) -> Path:
    """``experiments/quickstart.toml`` as shipped, each neural embedder (``neural`` at int8) replaced by ``"lsa"``."""
    import tomllib

    shipped = Path(__file__).resolve().parents[2] / "experiments" / "quickstart.toml"
    text = shipped.read_text(encoding="utf-8")
    embedders = [s["params"]["embedder"] for s in tomllib.loads(text)["systems"] if "embedder" in s.get("params", {})]
    neural = 'embedder = "neural", precision = "int8"'
    assert embedders and set(embedders) == {"neural"} and text.count(neural) == len(embedders)
    derived = folder / "quickstart.toml"
    derived.write_text(text.replace(neural, 'embedder = "lsa"'), encoding="utf-8")
    return derived


@pytest.mark.slow  # two cold quickstart runs (LSA) in parallel: about a minute on 2 cores
def test_two_runs_of_the_quickstart_are_identical(tmp_path):
    roots = [tmp_path / "first", tmp_path / "second"]
    runs = []
    for root in roots:  # separate working folders: fresh runs/ and cache/ each, nothing shared
        root.mkdir()
        config = quickstart_with_lsa(root)
        command = [sys.executable, "-m", "zerda_eval", "run", str(config), "--no-report"]
        runs.append(subprocess.Popen(command, cwd=root, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True))
    for run in runs:
        _, err = run.communicate(timeout=600)
        assert run.returncode == 0, err
    first, second = (root / "runs" / "quickstart" for root in roots)
    assert_identical(first, second, n_cells=21)  # 3 datasets x (bm25, 2 dense, 2 hybrid, 2 fusions)
    assert (first / "experiment.json").read_bytes() == (second / "experiment.json").read_bytes()
    results = [json.loads(path.read_text(encoding="utf-8")) for path in (first / "cells").glob("*/result.json")]
    assert {r.get("stats", {}).get("embedder") for r in results} == {None, "lsa"}  # BM25 and fusions: none
