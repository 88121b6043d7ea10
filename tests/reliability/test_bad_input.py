"""Bad input through the real CLI: one clear line, a non-zero exit code, no traceback, nothing half-written.

Each case is a mistake a user makes (or an input a user's code produces); the expected line names the
file / key / id / line at fault. Cases the harness must NOT treat as errors (a query without indexable
tokens, empty result lists) are checked for the documented behaviour instead: they score 0 and the
mean stays over all judged queries.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.reliability.harness import (
    DOCS,
    QRELS,
    QUERIES,
    CliResult,
    assert_no_partial_output,
    assert_one_line_error,
    cell_files,
    experiment_toml,
    only_cell,
    read_per_query,
    read_run,
    results_without_timing,
    unfinished_cells,
    write_beir,
)
from zerda_eval.faults import FAULT_ENV

REPO = Path(__file__).resolve().parents[2]

# --- the experiment file ---------------------------------------------------------------------------

KEYWORD = {"name": "bm25", "family": "zerda.keyword"}
CONFIG_CASES = {
    # case id: (experiment-table overrides, systems, fragments the error line must contain)
    "unknown-experiment-key": ({"mesures": ["ndcg@10"]}, None, ["mesures", "did you mean 'measures'"]),
    "unknown-system-family": (
        None,
        [{"name": "bm25", "family": "zerda.keywrd"}],
        ["zerda.keywrd", "did you mean 'zerda.keyword'"],
    ),
    "unknown-measure": ({"measures": ["ndgc@10"]}, None, ["ndgc@10", "did you mean 'ndcg@10'"]),
    "unknown-parameter": (None, [{**KEYWORD, "params": {"k_1": 1.2}}], ["k_1", "did you mean 'k1'"]),
    "unknown-grid-axis": (None, [{**KEYWORD, "grid": {"bb": [0.5]}}], ["bb", "did you mean 'b'"]),
    "unknown-rrf-order": (
        None,
        [{"name": "h", "family": "zerda.hybrid", "params": {"rrf_order": "fixd"}}],
        ["rrf_order", "fixd", "fixed"],
    ),
    "negative-k1": (None, [{**KEYWORD, "params": {"k1": -0.5}}], ["k1", "-0.5"]),
    "b-above-one": (None, [{**KEYWORD, "params": {"b": 1.5}}], ["b", "1.5"]),
    "b-outside-in-grid": (None, [{**KEYWORD, "grid": {"b": [0.5, -0.1]}}], ["b", "-0.1"]),
    "k1-wrong-type": (None, [{**KEYWORD, "params": {"k1": "high"}}], ["k1", "'high'"]),
    "depth-zero": ({"depth": 0}, None, ["depth", "0"]),
    "first-stage-k-zero": (
        None,
        [{"name": "rr", "family": "pipeline.rerank", "params": {"first_stage_k": 0}}],
        ["first_stage_k", "0"],
    ),
    "nan-weights": (
        None,
        [{"name": "h", "family": "pipeline.hybrid", "params": {"weights": ["nan", 1.0]}}],
        ["weights", "nan"],
    ),
    "cutoff-above-depth": ({"depth": 5, "measures": ["ndcg@10"]}, None, ["ndcg@10", "depth"]),
    "duplicate-system-name": (None, [KEYWORD, KEYWORD], ["bm25", "twice"]),
}


@pytest.mark.parametrize("case", list(CONFIG_CASES))
def test_config_mistake_is_one_line_before_any_work(case, cli, tmp_path):
    experiment, systems, fragments = CONFIG_CASES[case]
    config = experiment_toml(tmp_path, systems=systems, experiment=experiment)
    # TOML has nan; json writes the string "nan", so unquote it for the NaN case.
    config.write_text(config.read_text(encoding="utf-8").replace('"nan"', "nan"), encoding="utf-8")
    line = assert_one_line_error(cli("run", config), *fragments)
    assert "experiment.toml" in line
    assert not (tmp_path / "out").exists()  # validation happens before any work


def test_malformed_toml_names_file_and_line(cli, tmp_path):
    config = experiment_toml(tmp_path)
    text = config.read_text(encoding="utf-8").replace("depth = 10", "depth = = 10")
    config.write_text(text, encoding="utf-8")
    line_number = text.splitlines().index("depth = = 10") + 1
    assert_one_line_error(cli("run", config), "experiment.toml", f"line {line_number}")
    assert not (tmp_path / "out").exists()


def test_unknown_top_level_table(cli, tmp_path):
    config = experiment_toml(tmp_path)
    config.write_text(config.read_text(encoding="utf-8").replace("[experiment]", "[experimnt]"), encoding="utf-8")
    assert_one_line_error(cli("run", config), "experiment.toml", "experimnt", "did you mean 'experiment'")


def test_unknown_dataset_id_suggests_the_bundled_one(cli, tmp_path):
    config = experiment_toml(tmp_path, datasets=[{"id": "beir/scifct/test"}])
    assert_one_line_error(cli("run", config), "beir/scifct/test", "did you mean 'beir/scifact/test'")
    assert not (tmp_path / "out").exists()


def test_unknown_dataset_format(cli, tmp_path):
    folder = write_beir(tmp_path / "collection")
    config = experiment_toml(tmp_path, datasets=[{"path": str(folder), "format": "csv"}])
    assert_one_line_error(cli("run", config), "csv", "beir")


def test_missing_experiment_file(cli, tmp_path):
    assert_one_line_error(cli("run", tmp_path / "nope.toml"), "nope.toml")


def test_non_utf8_experiment_file(cli, tmp_path):
    config = experiment_toml(tmp_path)
    config.write_bytes(config.read_bytes().replace(b'name = "reliability"', b'name = "r\xe9liability"'))
    assert_one_line_error(cli("run", config), "experiment.toml", "utf-8")


def test_only_unknown_system_suggests(cli, tmp_path):
    config = experiment_toml(tmp_path)
    assert_one_line_error(cli("run", config, "--only", "bm52"), "bm52", "did you mean 'bm25'")
    assert_no_partial_output(tmp_path / "out")


def write_rerank(tmp_path: Path, model: str) -> Path:
    """The default experiment plus a ``[[reranks]]`` of its BM25 by ``model``."""
    config = experiment_toml(tmp_path)
    rerank = f'\n[[reranks]]\nname = "ce"\ninput = "bm25"\nmodel = "{model}"\nk = 5\n'
    config.write_text(config.read_text(encoding="utf-8") + rerank, encoding="utf-8")
    return config


@pytest.mark.parametrize("folder", ["missing", "bi-encoder"])
def test_a_rerank_model_folder_that_is_no_cross_encoder_is_one_line(folder, cli, tmp_path):
    if folder == "bi-encoder":
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "config.json").write_text('{"architectures": ["BertModel"]}', encoding="utf-8")
    config = write_rerank(tmp_path, f"st:{folder}")  # relative: to the experiment file's folder
    line = assert_one_line_error(cli("run", config), "experiment.toml", "reranks[0].model", str(tmp_path / folder))
    assert ("not found" if folder == "missing" else "is not a cross-encoder") in line
    assert not (tmp_path / "out").exists()  # validation happens before any work


def test_a_rerank_model_that_cannot_load_stops_at_its_cell_in_one_line(cli, tmp_path):
    folder = tmp_path / "weightless"
    folder.mkdir()
    config = '{"architectures": ["BertForSequenceClassification"], "id2label": {"0": "LABEL_0"}}'  # one label
    (folder / "config.json").write_text(config, encoding="utf-8")
    line = assert_one_line_error(cli("run", write_rerank(tmp_path, f"st:{folder}")), "rerank 'ce'", str(folder))
    assert "cannot load the cross-encoder" in line
    assert_no_partial_output(tmp_path / "out")


# --- the user's collection -------------------------------------------------------------------------


def run_collection(cli, tmp_path, folder: Path, *fragments: str) -> str:
    config = experiment_toml(tmp_path, datasets=[{"path": str(folder), "format": "beir", "name": "tiny"}])
    line = assert_one_line_error(cli("run", config), *fragments)
    assert_no_partial_output(tmp_path / "out")
    return line


def test_missing_dataset_folder(cli, tmp_path):
    run_collection(cli, tmp_path, tmp_path / "no-such-folder", "no-such-folder")


def test_missing_qrels_file(cli, tmp_path):
    folder = write_beir(tmp_path / "collection")
    (folder / "qrels" / "test.tsv").unlink()
    run_collection(cli, tmp_path, folder, "qrels")


def test_empty_corpus_file(cli, tmp_path):
    folder = write_beir(tmp_path / "collection")
    (folder / "corpus.jsonl").write_text("", encoding="utf-8")
    line = run_collection(cli, tmp_path, folder)
    assert "corpus.jsonl: no documents" in line, line


def test_collection_with_nothing_to_evaluate(cli, tmp_path):
    folder = write_beir(tmp_path / "collection", docs={}, qrels={})
    line = run_collection(cli, tmp_path, folder, "corpus.jsonl")
    assert "no documents" in line, line


def test_duplicate_doc_ids_name_the_line(cli, tmp_path):
    folder = write_beir(tmp_path / "collection")
    with (folder / "corpus.jsonl").open("a", encoding="utf-8") as corpus:
        corpus.write(json.dumps({"_id": "d3", "text": "a second d3"}) + "\n")
    run_collection(cli, tmp_path, folder, "corpus.jsonl:9", "'d3'", "duplicate")


def test_malformed_corpus_line(cli, tmp_path):
    folder = write_beir(tmp_path / "collection")
    lines = (folder / "corpus.jsonl").read_text(encoding="utf-8").splitlines()
    lines[4] = '{"_id": "d5", "text": '
    (folder / "corpus.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    run_collection(cli, tmp_path, folder, "corpus.jsonl:5")


def test_malformed_qrels_line_has_its_line_number(cli, tmp_path):
    folder = write_beir(tmp_path / "collection")
    qrels = folder / "qrels" / "test.tsv"
    lines = qrels.read_text(encoding="utf-8").splitlines()
    lines[3] = "q2 d3 two"
    qrels.write_text("\n".join(lines) + "\n", encoding="utf-8")
    run_collection(cli, tmp_path, folder, "test.tsv:4")


def test_qrels_matching_no_query(cli, tmp_path):
    folder = write_beir(tmp_path / "collection", qrels={"x1": {"d1": 1}, "x2": {"d2": 1}})
    run_collection(cli, tmp_path, folder, "test.tsv", "'x1'")


def test_non_utf8_corpus_names_file_and_line(cli, tmp_path):
    folder = write_beir(tmp_path / "collection")
    corpus = folder / "corpus.jsonl"
    corpus.write_bytes(corpus.read_bytes().replace(b"Camels", b"Cam\xe9ls"))
    run_collection(cli, tmp_path, folder, "corpus.jsonl:2", "utf-8")


def test_empty_query_string_names_the_query(cli, tmp_path):
    # An empty text is a broken record (e.g. the text under another key): scoring it would silently be 0.
    folder = write_beir(tmp_path / "collection", queries={**QUERIES, "q2": ""})
    run_collection(cli, tmp_path, folder, "queries.jsonl", "'q2'")


# --- where results go ------------------------------------------------------------------------------


def test_output_dir_under_a_regular_file(cli, tmp_path):
    # Tests run as root, so chmod cannot make a folder read-only: a path below a file cannot be created.
    (tmp_path / "afile").write_text("not a folder", encoding="utf-8")
    config = experiment_toml(tmp_path, experiment={"output_dir": str(tmp_path / "afile" / "sub")})
    assert_one_line_error(cli("run", config), "afile")


def test_cache_dir_under_a_regular_file(cli, tmp_path):
    (tmp_path / "afile").write_text("not a folder", encoding="utf-8")
    systems = [{"name": "bm25", "family": "zerda.keyword", "params": {"engine": "fast"}}]
    config = experiment_toml(tmp_path, systems=systems, experiment={"cache_dir": str(tmp_path / "afile" / "c")})
    line = assert_one_line_error(cli("run", config), "afile", "[experiment].cache_dir")
    assert "cache directory" in line, line
    assert_no_partial_output(tmp_path / "out")


# --- inputs that are NOT errors: documented behaviour ----------------------------------------------


@pytest.mark.parametrize("text", ["?! ... ;", "a b c"])
def test_query_without_indexable_tokens_scores_in_the_mean(text, cli, tmp_path):
    """Not an error: the query stays judged; whatever the system returns is scored and averaged in."""
    import pytrec_eval

    folder = write_beir(tmp_path / "collection", queries={**QUERIES, "q3": text})
    config = experiment_toml(tmp_path, datasets=[{"path": str(folder), "format": "beir", "name": "tiny"}])
    result = cli("run", config)
    assert result.code == 0, result.err
    assert "Traceback" not in result.out + result.err
    cell = only_cell(tmp_path / "out")
    per_query = read_per_query(cell)
    run = read_run(cell)
    for qid in QRELS:
        reference = 0.0
        if run.get(qid):
            evaluator = pytrec_eval.RelevanceEvaluator({qid: QRELS[qid]}, {"ndcg_cut.10"})
            reference = evaluator.evaluate({qid: run[qid]})[qid]["ndcg_cut_10"]
        assert per_query[(qid, "ndcg@10")] == pytest.approx(reference, abs=1e-9), qid
    means = json.loads((cell / "result.json").read_text(encoding="utf-8"))["means"]
    assert means["ndcg@10"] == pytest.approx(sum(per_query[(q, "ndcg@10")] for q in QRELS) / 3, abs=1e-12)


def test_empty_result_lists_count_as_zero_in_the_mean(cli, tmp_path):
    """ranx #51/#67: a judged query with no results scores 0 and the mean stays over all queries."""
    # The metadata family returns every document whose 'source' matches; a filter on a missing value
    # returns nothing, so every query has an empty list: all means must be exactly 0, not NaN or missing.
    systems = [{"name": "nothing", "family": "zerda.metadata", "params": {"filters": {"source": "elsewhere"}}}]
    result = cli("run", experiment_toml(tmp_path, systems=systems))
    assert result.code == 0, result.err
    cell = only_cell(tmp_path / "out")
    per_query = read_per_query(cell)
    assert {qid for qid, _ in per_query} == {"q1", "q2", "q3"}
    assert all(value == 0.0 for value in per_query.values())
    means = json.loads((cell / "result.json").read_text(encoding="utf-8"))["means"]
    assert means == {"ndcg@10": 0.0, "mrr@10": 0.0, "recall@10": 0.0}


# --- a user-supplied embedder that misbehaves ------------------------------------------------------


def bad_embedder(kind: str, problem: str):
    """A user's embedder: a subclass of the documented ``BaseEmbedder``, or a bare protocol object."""
    from retrieval.embeddings import BaseEmbedder

    def vectors(texts: list[str], dim: int) -> np.ndarray:
        rng = np.random.default_rng(len(texts))
        out = rng.normal(size=(len(texts), dim if problem != "dimension" else dim - 3))
        if problem in ("nan", "inf"):
            out[len(texts) // 2, 0] = math.nan if problem == "nan" else math.inf
        return out

    if kind == "base":

        class UserEmbedder(BaseEmbedder):
            name, params, dim = "user-embedder", {"problem": problem}, 256

            def _encode(self, texts):
                return vectors(texts, self.dim)

        return UserEmbedder()

    class RawEmbedder:
        name, params, dim = "user-embedder", {"problem": problem}, 256

        def fit(self, texts):
            return self

        def embed(self, texts):
            return vectors(list(texts), self.dim).astype(np.float32)

    return RawEmbedder()


EMBEDDER_CASES = [
    pytest.param("base", "nan"),
    pytest.param("base", "inf"),
    pytest.param("base", "dimension"),
    pytest.param("raw", "nan"),
    pytest.param("raw", "inf"),
    pytest.param("raw", "dimension"),
]


@pytest.mark.parametrize(("kind", "problem"), EMBEDDER_CASES)
def test_misbehaving_user_embedder_is_one_line(problem, kind, cli, tmp_path, monkeypatch):
    import retrieval.embeddings

    monkeypatch.setattr(retrieval.embeddings, "load_embedder", lambda name, **params: bad_embedder(kind, problem))
    systems = [{"name": "dense", "family": "zerda.vector"}]
    # A corpus of its own per case: the harness may keep corpus vectors per (embedder name, texts).
    folder = write_beir(tmp_path / "collection", docs={**DOCS, "d9": f"case {kind} {problem}"})
    datasets = [{"path": str(folder), "format": "beir", "name": "tiny"}]
    line = assert_one_line_error(cli("run", experiment_toml(tmp_path, datasets=datasets, systems=systems)))
    assert "user-embedder" in line or "embedder" in line.lower(), line
    assert_no_partial_output(tmp_path / "out")


# --- interruptions: a full disk, Ctrl-C, an unreachable dataset ------------------------------------

GRID = [
    {
        "name": "bm25",
        "family": "zerda.keyword",
        "params": {"engine": "fast"},
        "grid": {"b": [0.1, 0.3, 0.5, 0.7]},
    },
    {"name": "sparse", "family": "pipeline.sparse"},
]


@pytest.mark.slow  # three runs of a five-cell grid
def test_disk_full_mid_grid_then_clean_resume(cli, tmp_path, monkeypatch):
    import errno

    dataset = [{"path": str(write_beir(tmp_path / "collection")), "format": "beir", "name": "tiny"}]
    real_replace, real_rename = os.replace, os.rename
    calls = {"n": 0, "fail_at": None}
    reference_root, root = tmp_path / "reference", tmp_path / "full"

    def counting(real):
        def move(src, dst, *args, **kwargs):
            if str(dst).startswith(str(tmp_path)) and "cache" not in Path(dst).parts:
                calls["n"] += 1
                if calls["n"] == calls["fail_at"]:
                    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(dst))
            return real(src, dst, *args, **kwargs)

        return move

    monkeypatch.setattr(os, "replace", counting(real_replace))
    monkeypatch.setattr(os, "rename", counting(real_rename))
    for folder in (reference_root, root):
        folder.mkdir()
    reference = experiment_toml(reference_root, datasets=dataset, systems=GRID)
    assert cli("run", reference).code == 0
    writes = calls["n"]
    assert writes >= 5, f"only {writes} atomic renames for 5 cells: run files are not written atomically"

    calls.update(n=0, fail_at=writes // 2)
    config = experiment_toml(root, datasets=dataset, systems=GRID)
    failed = cli("run", config)
    unfinished = unfinished_cells(root / "out")
    assert len(list((root / "out" / "cells").glob("*/result.json"))) < 5  # stopped mid-grid

    calls.update(n=0, fail_at=None)
    resumed = cli("run", config)
    assert resumed.code == 0, resumed.err
    assert cell_files(root / "out") == cell_files(reference_root / "out")
    assert results_without_timing(root / "out") == results_without_timing(reference_root / "out")
    # What the user saw when the disk filled up, and what it left behind.
    assert_one_line_error(failed, "space")
    assert not unfinished, f"unfinished cells left behind: {unfinished}"


def python_m_zerda_eval(args: list[str], cwd: Path, fault: str = "", **kwargs) -> subprocess.Popen:
    """``python -m zerda_eval`` in ``cwd``; ``fault``: a ``ZERDA_EVAL_FAULT`` (``zerda_eval.faults``)."""
    env = {**os.environ, "IR_DATASETS_HOME": str(cwd / "ir_datasets"), "PYTHONPATH": str(REPO)}
    env.pop(FAULT_ENV, None)
    if fault:
        env[FAULT_ENV] = fault
    return subprocess.Popen(
        [sys.executable, "-m", "zerda_eval", *args],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        **kwargs,
    )


def synthetic_collection(folder: Path, n_docs: int = 400, n_queries: int = 20) -> Path:
    """A small synthetic BEIR collection: random 40-word documents over 400 words, one qrel per query."""
    rng = np.random.default_rng(7)
    words = [f"w{i}" for i in range(400)]
    docs = {f"d{i}": " ".join(rng.choice(words, size=40)) for i in range(n_docs)}
    queries = {f"q{i}": " ".join(rng.choice(words, size=4)) for i in range(n_queries)}
    qrels = {q: {f"d{int(rng.integers(n_docs))}": 1} for q in queries}
    return write_beir(folder, docs, queries, qrels)


@pytest.mark.slow
def test_ctrl_c_stops_cleanly_and_the_grid_resumes(tmp_path):
    dataset = [{"path": str(synthetic_collection(tmp_path / "collection")), "format": "beir", "name": "synthetic"}]
    b_values = [round(0.1 * i, 1) for i in range(1, 9)]
    systems = [{"name": "bm25", "family": "zerda.keyword", "grid": {"b": b_values}}]
    config = experiment_toml(tmp_path, datasets=dataset, systems=systems)
    cells = tmp_path / "out" / "cells"
    # Ctrl-C (SIGINT from the process itself) once the third cell is written: no guessed moment.
    process = python_m_zerda_eval(["run", str(config), "--no-report"], tmp_path, fault="interrupt-after-cell:3")
    out, err = process.communicate(timeout=300)
    result = CliResult(process.returncode, out, err)
    assert result.code == 130, (result.code, err[-2000:])
    assert "Traceback" not in out + err
    assert len(result.messages) == 1, err[-2000:]
    assert_no_partial_output(tmp_path / "out")
    finished = {p: p.stat().st_mtime_ns for p in cells.glob("*/result.json")}
    assert len(finished) == 3, "the interrupt landed after the third cell, in the middle of the grid"

    resumed = python_m_zerda_eval(["run", str(config), "--no-report"], tmp_path)
    out, err = resumed.communicate(timeout=600)
    assert resumed.returncode == 0, err[-2000:]
    assert len(list(cells.glob("*/result.json"))) == len(b_values)
    assert all(path.stat().st_mtime_ns == mtime for path, mtime in finished.items()), "finished cells redone"
    rows = results_without_timing(tmp_path / "out")
    assert len(rows) == len({row["cell_id"] for row in rows}) == len(b_values)


@pytest.mark.slow
def test_unreachable_ir_datasets_id_offline(tmp_path):
    config = experiment_toml(tmp_path, datasets=[{"id": "miracl/ar/dev"}])
    process = python_m_zerda_eval(["run", str(config), "--no-report"], tmp_path)
    out, err = process.communicate(timeout=300)
    line = assert_one_line_error(CliResult(process.returncode, out, err), "miracl/ar/dev", "offline")
    assert "IR_DATASETS_HOME" in line or "cache" in line
    assert_no_partial_output(tmp_path / "out")
