"""Data and code are fingerprinted by content (issue 17, points 2-5, 8, 10; issue 16's code key).

A cell is reused only when everything that computed it is unchanged: the qrels, queries and corpus it
read (by content, whatever their mtime), the cached index it searched (by checksum), and the source
of the modules its family executes. Inputs that would make a number mean something else (duplicate
ids, conflicting grades, duplicate grid values, wrongly typed fields) are one-line errors.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.reliability.harness import (
    CliResult,
    assert_no_partial_output,
    assert_one_line_error,
    experiment_toml,
    only_cell,
    write_beir,
)

REPO = Path(__file__).resolve().parents[2]
FAST = [{"name": "bm25", "family": "zerda.keyword", "params": {"engine": "fast"}}]


def means(out: Path) -> dict[str, float]:
    return json.loads((only_cell(out) / "result.json").read_text(encoding="utf-8"))["means"]


def run_ok(cli, *args) -> CliResult:
    result = cli(*args)
    assert result.code == 0, result.err
    return result


# --- 2. datasets fingerprinted by content ----------------------------------------------------------


def test_same_size_qrels_edit_with_mtime_kept_is_not_reused(cli, tmp_path):
    folder = write_beir(tmp_path / "collection")
    qrels = folder / "qrels" / "test.tsv"
    config = experiment_toml(tmp_path, datasets=[{"path": str(folder), "format": "beir", "name": "tiny"}])
    run_ok(cli, "run", config, "--no-report")
    before = means(tmp_path / "out")
    kept = qrels.stat()
    text = qrels.read_text(encoding="utf-8").replace("q3\td5\t2", "q3\td8\t2")  # same size: d5 -> d8
    qrels.write_text(text, encoding="utf-8")
    os.utime(qrels, ns=(kept.st_atime_ns, kept.st_mtime_ns))  # as `cp -p` / `rsync -t` leave it
    assert qrels.stat().st_size == kept.st_size
    shutil.rmtree(tmp_path / "out")
    run_ok(cli, "run", config, "--no-report")
    assert means(tmp_path / "out") != before


def test_a_file_outside_the_folder_is_fingerprinted(cli, tmp_path):
    folder = write_beir(tmp_path / "collection")
    outside = tmp_path / "elsewhere" / "my-queries.jsonl"
    outside.parent.mkdir()
    shutil.copy(folder / "queries.jsonl", outside)
    dataset = {"path": str(folder), "format": "beir", "name": "tiny", "queries": str(outside)}
    config = experiment_toml(tmp_path, datasets=[dataset])
    run_ok(cli, "run", config, "--no-report")
    before = means(tmp_path / "out")
    outside.write_text(outside.read_text(encoding="utf-8").replace("fennec fox ears", "scorpions rocks"))
    run_ok(cli, "run", config, "--no-report")
    cells = list((tmp_path / "out" / "cells").iterdir())
    assert len(cells) == 2  # a new cell for the new content; the old one is left alone
    after = [json.loads((c / "result.json").read_text())["means"] for c in cells]
    assert before in after and any(m != before for m in after)


def test_content_hash_is_memoised_by_path_size_mtime_and_inode(tmp_path, monkeypatch):
    from retrieval.core import hashing as recipes
    from zerda_eval import hashing as fingerprint

    path = tmp_path / "qrels.tsv"
    path.write_text("q1\td1\t1\n", encoding="utf-8")
    first = fingerprint.file_sha256(path)
    calls = []
    real = recipes._read_sha256
    monkeypatch.setattr(recipes, "_read_sha256", lambda p: calls.append(p) or real(p))
    assert fingerprint.file_sha256(path) == first and not calls  # memoised
    replacement = tmp_path / "new.tsv"
    replacement.write_text("q1\td2\t1\n", encoding="utf-8")
    os.utime(replacement, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns))
    os.replace(replacement, path)  # same path, size and mtime; another inode
    assert fingerprint.file_sha256(path) != first and len(calls) == 1


@pytest.mark.slow  # two subprocess runs on a private copy of cranfield
def test_edited_bundled_file_reseeds_the_ir_datasets_cache(tmp_path, shared_dir):
    source = shared_dir / "datasets" / "cranfield"
    data = tmp_path / "data"
    shutil.copytree(source, data / "cranfield")
    config = experiment_toml(tmp_path, datasets=[{"id": "cranfield", "max_queries": 5}], systems=FAST)
    env = {
        **os.environ,
        "IR_DATASETS_HOME": str(tmp_path / "irds"),
        "ZERDA_EVAL_DATA": str(data),
        "PYTHONPATH": str(REPO),
    }

    def run(*extra: str) -> dict[str, float]:
        command = [sys.executable, "-m", "zerda_eval", "run", str(config), "--no-report", *extra]
        done = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stderr[-2000:]
        newest = max((tmp_path / "out" / "cells").glob("*/result.json"), key=lambda p: p.stat().st_mtime_ns)
        return json.loads(newest.read_text(encoding="utf-8"))["means"]

    before = run()
    qrels = data / "cranfield" / "cranqrel"
    lines = qrels.read_text(encoding="utf-8").splitlines()
    # Query 1's judgements all move to documents nobody retrieves for it: its scores must fall to 0.
    edited = [f"1 {1390 + i} {line.split()[2]}" if line.split()[0] == "1" else line for i, line in enumerate(lines)]
    qrels.write_text("\n".join(edited) + "\n", encoding="utf-8")
    after = run()
    assert after != before
    assert after == run("--force")  # and the reseeded cache gives the same numbers again


# --- 3. cached indexes carry checksums ---------------------------------------------------------------


def corrupt_bm25_cache(cache: Path) -> None:
    (entry,) = [p for p in (cache / "bm25").iterdir() if p.is_dir()]
    arrays = list(entry.glob("*.npy"))
    assert arrays
    for path in arrays:  # same shape and dtype, other values
        array = np.load(path)
        if array.dtype.kind == "f":
            np.save(path, np.full_like(array, 0.5))


def test_corrupted_cached_bm25_index_is_rebuilt(cli, tmp_path):
    config = experiment_toml(tmp_path, systems=FAST)
    run_ok(cli, "run", config, "--no-report")
    before = means(tmp_path / "out")
    corrupt_bm25_cache(tmp_path / "cache")
    # A new cell on the same index (another measure list): the entry fails its checksum and is rebuilt.
    other = tmp_path / "other"
    other.mkdir()
    config_b = experiment_toml(
        other, systems=FAST, experiment={"cache_dir": str(tmp_path / "cache"), "measures": ["ndcg@10"]}
    )
    again = run_ok(cli, "run", config_b, "--no-report")
    assert any("checksum" in line.lower() for line in again.messages), again.err
    assert means(other / "out") == {"ndcg@10": before["ndcg@10"]}
    # --force recomputes the cell and rebuilds the cache entries it uses.
    corrupt_bm25_cache(tmp_path / "cache")
    run_ok(cli, "run", config, "--force", "--no-report")
    assert means(tmp_path / "out") == before


# --- 4. duplicate query ids and conflicting qrels ---------------------------------------------------


def test_duplicate_query_id_names_file_line_and_id(cli, tmp_path):
    folder = write_beir(tmp_path / "collection")
    with (folder / "queries.jsonl").open("a", encoding="utf-8") as queries:
        queries.write(json.dumps({"_id": "q2", "text": "another text for q2"}) + "\n")
    config = experiment_toml(tmp_path, datasets=[{"path": str(folder), "format": "beir", "name": "tiny"}])
    assert_one_line_error(cli("run", config), "queries.jsonl:4", "'q2'", "duplicate")
    assert_no_partial_output(tmp_path / "out")


def test_conflicting_qrels_lines_name_file_line_and_ids(cli, tmp_path):
    folder = write_beir(tmp_path / "collection")
    with (folder / "qrels" / "test.tsv").open("a", encoding="utf-8") as qrels:
        qrels.write("q1\td6\t2\n")  # the same as line 2: harmless
        qrels.write("q1\td1\t0\n")  # line 3 gave q1/d1 grade 1
    config = experiment_toml(tmp_path, datasets=[{"path": str(folder), "format": "beir", "name": "tiny"}])
    assert_one_line_error(cli("run", config), "test.tsv:9", "'q1'", "'d1'", "line 3")


def test_conflicting_trec_qrels_are_an_error_too(cli, tmp_path):
    data = tmp_path / "trec"
    data.mkdir()
    (data / "corpus.tsv").write_text("d1\tfennec fox\nd2\tdesert oasis\n", encoding="utf-8")
    (data / "queries.tsv").write_text("q1\tfox\nq1\toasis\n", encoding="utf-8")
    (data / "qrels").write_text("q1 0 d1 1\n", encoding="utf-8")
    config = experiment_toml(tmp_path, datasets=[{"path": str(data), "format": "trec", "name": "t"}])
    assert_one_line_error(cli("run", config), "queries.tsv:2", "'q1'")


# --- 5. duplicate grid values ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("grid", "fragment"),
    [({"b": [0.5, 0.5]}, "0.5"), ({"b": [1, 1.0]}, "b"), ([{"b": 0.3}, {"b": 0.3}], "0.3")],
)
def test_duplicate_grid_values_are_one_line(grid, fragment, cli, tmp_path):
    systems = [{"name": "bm25", "family": "zerda.keyword", "grid": grid}]
    config = experiment_toml(tmp_path, systems=systems)
    if isinstance(grid, list):  # a list of tables: TOML's array of inline tables
        text = config.read_text(encoding="utf-8")
        config.write_text(text.replace("grid = [{ b = 0.3 }, { b = 0.3 }]", "grid = [{ b = 0.3 }, { b = 0.3 }]"))
    line = assert_one_line_error(cli("run", config), "grid", "twice", fragment)
    assert "experiment.toml" in line
    assert not (tmp_path / "out").exists()


# --- 10. wrongly typed fields are one line ------------------------------------------------------------


@pytest.mark.parametrize(
    ("record", "fragment"),
    [
        ({"_id": "d9", "text": 5}, "text"),
        ({"_id": "d9", "text": ["a", "list"]}, "text"),
        ({"_id": "d9", "title": "only a title"}, "text"),
        ({"_id": "d9", "title": 3, "text": "fine"}, "title"),
        ({"_id": ["d9"], "text": "fine"}, "_id"),
    ],
)
def test_corpus_field_of_the_wrong_type_is_one_line(record, fragment, cli, tmp_path):
    folder = write_beir(tmp_path / "collection")
    with (folder / "corpus.jsonl").open("a", encoding="utf-8") as corpus:
        corpus.write(json.dumps(record) + "\n")
    config = experiment_toml(tmp_path, datasets=[{"path": str(folder), "format": "beir", "name": "tiny"}])
    assert_one_line_error(cli("run", config), "corpus.jsonl:9", fragment)


@pytest.mark.parametrize(
    ("option", "value"),
    [("corpus", 5), ("language", 5), ("ignore_identical_ids", 1), ("split", ["test"]), ("format", True)],
)
def test_dataset_option_of_the_wrong_type_is_one_line(option, value, cli, tmp_path):
    folder = write_beir(tmp_path / "collection")
    dataset = {"path": str(folder), "format": "beir", "name": "tiny", option: value}
    line = assert_one_line_error(cli("run", experiment_toml(tmp_path, datasets=[dataset])), option)
    assert "experiment.toml" in line
    assert not (tmp_path / "out").exists()


def test_a_directory_given_as_the_experiment_file(cli, tmp_path):
    assert_one_line_error(cli("run", tmp_path), str(tmp_path), "toml")


# --- 8. IR_DATASETS_HOME that cannot be used ----------------------------------------------------------


@pytest.mark.parametrize("where", ["a-file", "below-a-file"])
def test_unusable_ir_datasets_home_is_one_line(where, tmp_path):
    (tmp_path / "afile").write_text("not a folder", encoding="utf-8")
    home = tmp_path / "afile" if where == "a-file" else tmp_path / "afile" / "home"
    config = experiment_toml(tmp_path)
    env = {**os.environ, "IR_DATASETS_HOME": str(home), "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, "-m", "zerda_eval", "run", str(config)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert_one_line_error(CliResult(done.returncode, done.stdout, done.stderr), "IR_DATASETS_HOME", str(home))


# --- issue 16: the code that computed a cell is in its key --------------------------------------------


def test_editing_a_scorer_invalidates_exactly_the_cells_that_use_it(monkeypatch, tmp_path):
    from zerda_eval.config import code_fingerprint
    from zerda_eval.config.experiment import load_experiment

    systems = [
        {"name": "bm25", "family": "zerda.keyword", "params": {"engine": "fast"}},
        {"name": "sparse", "family": "pipeline.sparse"},
        {"name": "lexical", "family": "zerda.keyword"},
    ]
    fusions = [{"name": "rrf", "inputs": ["bm25", "sparse"], "method": "rrf"}]
    config = experiment_toml(tmp_path, systems=systems, fusions=fusions)
    before = {c.label: c.cell_id for c in load_experiment(config).cells}
    assert load_experiment(config).cells[0].config["code"]  # the key holds the code fingerprint

    # Edit the rank-bm25 scorer behind pipeline.sparse (retrieval/pipeline/sparse.py), in memory only.
    real = code_fingerprint.module_source

    def edited(name: str) -> bytes:
        source = real(name)
        return source + b"\n# an edit\n" if name == "retrieval.pipeline.sparse" else source

    monkeypatch.setattr(code_fingerprint, "module_source", edited)
    code_fingerprint.clear_memo()
    after = {c.label: c.cell_id for c in load_experiment(config).cells}
    changed = {label for label in before if before[label] != after[label]}
    assert changed == {"sparse", "rrf"}
    code_fingerprint.clear_memo()
    monkeypatch.undo()
    assert {c.label: c.cell_id for c in load_experiment(config).cells} == before


def test_fingerprint_follows_imports_into_retrieval():
    from zerda_eval.config.code_fingerprint import modules_of

    keyword = modules_of("zerda_eval.systems.zerda")
    assert {"retrieval.core.bm25_fast", "retrieval.core.bm25", "zerda_eval.store.indexes"} <= keyword
    assert "retrieval.pipeline.sparse" not in keyword
    assert "retrieval.pipeline.sparse" in modules_of("zerda_eval.systems.pipeline")
