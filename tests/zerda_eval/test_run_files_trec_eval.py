"""Every cell's ``run.trec.gz``, evaluated by pytrec_eval (trec_eval) on its own scores, gives the cell's
``per_query.csv`` values to 1e-12, on every bundled dataset, for cheap families and every fusion method.

trec_eval breaks tied scores by doc id descending (``strcmp``) and ignores the rank column; the harness
ranks, writes and evaluates in that one order, so a user who checks a cell with trec_eval gets its
numbers. ``zerda.metadata`` scores every document 1.0 (a full tie on every query), so the order of ties
reaches every measure and every fusion; the rank column must read 1, 2, ... down each query's lines. A
second grid runs the quickstart's dense and hybrid families (LSA embedder: no model files), its two
fusions and a learned fusion tuned on held-out folds (its ``[tuned]`` row's run file is the held-out
folds' runs put together) on the two smallest corpora. About 15 s of CPU in all.
"""

from __future__ import annotations

import gzip
import json

import pytest
import pytrec_eval

from tests.conftest import experiment_header
from zerda_eval import Experiment
from zerda_eval.datasets import BUNDLED_IDS, load_collection
from zerda_eval.store.run_dir import PER_QUERY_FILE, RUN_FILE, cell_dir, read_per_query_csv

MAX_QUERIES = 5  # metadata scans the collection per query: this keeps the grid to seconds
# harness name -> (trec_eval measure, its key in pytrec_eval's answer, trec_eval's -l relevance level)
TREC_EVAL = {
    "ndcg@10": ("ndcg_cut.10", "ndcg_cut_10", 1),
    "recall@10": ("recall.10", "recall_10", 1),
    "map@10": ("map_cut.10", "map_cut_10", 1),
    "precision@5": ("P.5", "P_5", 1),
    "nDCG": ("ndcg", "ndcg", 1),
    "AP": ("map", "map", 1),
    "RR": ("recip_rank", "recip_rank", 1),
    "Rprec": ("Rprec", "Rprec", 1),
    "Bpref": ("bpref", "bpref", 1),
    "Success@5": ("success.5", "success_5", 1),
    "NumRet": ("num_ret", "num_ret", 1),
    "NumRel": ("num_rel", "num_rel", 1),
    "NumRelRet": ("num_rel_ret", "num_rel_ret", 1),
    "P(rel=2)@10": ("P.10", "P_10", 2),
    "AP(rel=2)": ("map", "map", 2),
}
FUSIONS = {
    "rrf": "",
    "combsum": "",
    "combmnz": "",
    "wsum": "params = { weights = [0.7, 0.3] }",
    "zerda": 'grid = { rrf_order = ["as_documented", "fixed"] }',
    "pipeline_rrf": "params = { top_k = 15 }",
}


DENSE_DATASETS = ("cranfield", "xquad/ar")  # the smallest corpora: LSA fits in a second there
DENSE_SYSTEMS = """
[[systems]]
name = "bm25"
family = "zerda.keyword"
params = { engine = "fast" }

[[systems]]
name = "dense"
family = "pipeline.dense"
params = { embedder = "lsa" }

[[systems]]
name = "zerda_vector"
family = "zerda.vector"
params = { embedder = "lsa" }

[[systems]]
name = "zerda_hybrid"
family = "zerda.hybrid"
params = { embedder = "lsa" }
grid = { rrf_order = ["as_documented", "fixed"] }

[[fusions]]
name = "rrf_dense"
inputs = ["bm25", "dense"]
method = "rrf"

[[fusions]]
name = "wsum_dense"
inputs = ["bm25", "dense"]
method = "wsum"

[[fusions]]
name = "ltr_dense"
inputs = ["bm25", "dense"]
method = "ltr"
params = { model = "logistic" }
tune = true
"""


def run_grid(tmp_path_factory, name: str, dataset_ids, body: str, depth: int | None = None):
    """Run an experiment of ``body`` (systems, fusions) over ``dataset_ids`` (``MAX_QUERIES`` each)."""
    tmp_path = tmp_path_factory.mktemp(name)
    datasets = "".join(f'\n[[datasets]]\nid = "{d}"\nmax_queries = {MAX_QUERIES}\n' for d in dataset_ids)
    header = experiment_header(tmp_path, name, json.dumps(list(TREC_EVAL)))
    if depth is not None:
        header = header.replace("depth = 10", f"depth = {depth}")
    path = tmp_path / "exp.toml"
    path.write_text(header + datasets + body, encoding="utf-8")
    return Experiment.from_toml(path).run(progress=False)


@pytest.fixture(scope="module")
def dense_grid(tmp_path_factory):
    """The quickstart's families with the LSA embedder (no model files), on two small corpora."""
    return run_grid(tmp_path_factory, "trec_eval_dense", DENSE_DATASETS, DENSE_SYSTEMS)


@pytest.fixture(scope="module")
def grid(tmp_path_factory):
    systems = """
[[systems]]
name = "bm25"
family = "zerda.keyword"
params = { engine = "fast" }

[[systems]]
name = "flat"
family = "zerda.metadata"
"""
    fusions = "".join(
        f'\n[[fusions]]\nname = "{method}"\ninputs = ["bm25", "flat"]\nmethod = "{method}"\n{extra}\n'
        for method, extra in FUSIONS.items()
    )
    return run_grid(tmp_path_factory, "trec_eval_files", BUNDLED_IDS, systems + fusions, depth=30)


def read_trec_file(path) -> dict[str, dict[str, float]]:
    """``{qid: {doc: score}}`` of a cell's gzipped run file (read by Python's ``gzip``, not our reader),
    checking the rank column reads 1, 2, ... per query."""
    run: dict[str, dict[str, float]] = {}
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        text = handle.read()
    for line in text.splitlines():
        qid, _, doc, rank, score, _ = line.split()
        run.setdefault(qid, {})[doc] = float(score)
        assert int(rank) == len(run[qid]), (path, line)
    return run


def check_cells(results, datasets) -> set[str]:
    """Assert every cell's run file, under pytrec_eval, gives its per_query.csv; the entry names checked."""
    table = results.table
    checked = set()
    for dataset in datasets:
        collection = load_collection(dataset)
        rows = table[table["dataset"] == dataset]
        for cell_id, label in zip(rows["cell_id"], rows["system"], strict=True):
            directory = cell_dir(results.run_dir, cell_id)
            run = read_trec_file(directory / RUN_FILE)
            frame = read_per_query_csv(directory / PER_QUERY_FILE)
            ours = {(m, q): v for m, q, v in zip(frame["measure"], frame["query_id"], frame["value"], strict=True)}
            qids = {q for _, q in ours} - collection.no_answer_qids  # Qur'an QA's no-answer rule is not trec_eval's
            qrels = {q: dict(collection.qrels[q]) for q in qids}
            scored = {q: docs for q, docs in run.items() if q in qids}
            for level in (1, 2):
                names = {trec for trec, _, lvl in TREC_EVAL.values() if lvl == level}
                reference = pytrec_eval.RelevanceEvaluator(qrels, names, relevance_level=level).evaluate(scored)
                for measure, (_, key, lvl) in TREC_EVAL.items():
                    if lvl != level:
                        continue
                    for qid in qids:
                        if qid in reference:
                            expected = reference[qid][key]
                        else:  # a query the run has no line for: trec_eval leaves it out, the mean counts 0
                            relevant = sum(g >= level for g in qrels[qid].values())
                            expected = float(relevant) if measure == "NumRel" else 0.0
                        assert abs(ours[(measure, qid)] - expected) < 1e-12, (dataset, label, measure, qid)
            checked.add(label.split("[")[0])
    return checked


def test_every_cells_run_file_gives_its_per_query_values_under_trec_eval(grid):
    assert set(grid.table["dataset"]) == set(BUNDLED_IDS)
    assert check_cells(grid, BUNDLED_IDS) == {"bm25", "flat", *FUSIONS}


def test_dense_and_hybrid_cells_too(dense_grid):
    names = {"bm25", "dense", "zerda_vector", "zerda_hybrid", "rrf_dense", "wsum_dense", "ltr_dense"}
    assert check_cells(dense_grid, DENSE_DATASETS) == names
