"""Grid cells on Dask: the scheduler option, and a real LocalCluster on loopback giving serial's results.

The grid (BM25 with two values of b, a sparse and a dense pipeline, the dense one through a FAISS IVF
index too, the ``dense`` family through HNSW, and an RRF fusion of the sparse and exact dense ones)
runs on a synthetic BEIR folder in tmp_path, once serially and once on ``local:2``: every run file
must be byte-identical and every effectiveness number equal. A worker that dies in the middle of a
cell (after leaving a stale run file and a temporary file) must be replaced by Dask's retry without
a duplicate or partial file left behind.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import numpy as np
import pytest

from zerda_eval.config.experiment import resolve_experiment
from zerda_eval.errors import ConfigError, RunError
from zerda_eval.execution.executors import (
    DaskExecutor,
    Scheduler,
    open_executor,
    parse_scheduler,
    run_serially,
    task_key,
)
from zerda_eval.execution.runner import run_experiment
from zerda_eval.store.files import TMP_PREFIX
from zerda_eval.store.run_dir import RUN_FILE

CELL_FILES = {RUN_FILE, "per_query.csv", "result.json"}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("serial", Scheduler("serial")),
        ("local", Scheduler("local", workers=2)),
        ("local:3", Scheduler("local", workers=3)),
        ("tcp://10.0.0.5:8786", Scheduler("tcp", address="tcp://10.0.0.5:8786")),
    ],
)
def test_parse_scheduler(text, expected):
    assert parse_scheduler(text) == expected


@pytest.mark.parametrize("text", ["dask", "local:0", "local:two", "local:", "tcp://host", "10.0.0.5:8786"])
def test_bad_scheduler_is_a_one_line_config_error(text):
    with pytest.raises(ConfigError, match=r"--scheduler .*expected 'serial', 'local', 'local:N'") as info:
        parse_scheduler(text)
    assert "\n" not in str(info.value)


def test_missing_dask_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "distributed", None)  # import distributed -> ImportError
    with (
        pytest.raises(RunError, match=r'local:2 needs Dask.*pip install "zerda-eval\[dask\]"'),
        open_executor("local:2"),
    ):
        pass


def test_serial_needs_no_dask(monkeypatch):
    monkeypatch.setitem(sys.modules, "distributed", None)
    with open_executor("serial") as executor:
        assert executor is run_serially
        assert list(executor([3, 1, 2], lambda cell: cell * 10)) == [30, 10, 20]


def test_task_key_is_stable_per_cell_and_output_dir(experiment_factory, tmp_path):
    from functools import partial

    from zerda_eval.execution.cell import run_cell

    cells = experiment_factory(tmp_path / "a").cells
    task_a = partial(run_cell, output_dir=tmp_path / "a", cache_dir=None)
    task_b = partial(run_cell, output_dir=tmp_path / "b", cache_dir=None)
    assert task_key(cells[0], task_a) == task_key(
        cells[0], partial(run_cell, output_dir=tmp_path / "a", cache_dir=None)
    )
    assert task_key(cells[0], task_a) != task_key(cells[1], task_a)
    assert task_key(cells[0], task_a) != task_key(cells[0], task_b)


# --- a real LocalCluster ---------------------------------------------------------------------------


def write_beir(folder: Path, docs: list[str], queries: dict[str, str], relevant: dict[str, str], prefix: str) -> Path:
    """A BEIR folder: ``docs`` as ``<prefix><i>``, ``queries``, and each query's one relevant doc id."""
    with (folder / "corpus.jsonl").open("w") as out:
        out.writelines(
            json.dumps({"_id": f"{prefix}{i}", "title": "", "text": text}) + "\n" for i, text in enumerate(docs)
        )
    with (folder / "queries.jsonl").open("w") as out:
        out.writelines(json.dumps({"_id": qid, "text": text}) + "\n" for qid, text in queries.items())
    (folder / "qrels").mkdir()
    (folder / "qrels" / "test.tsv").write_text(
        "query-id\tcorpus-id\tscore\n" + "".join(f"{qid}\t{doc}\t1\n" for qid, doc in relevant.items())
    )
    return folder


def beir_grid(name: str, folder: Path, output_dir: Path, depth: int, measures: list[str]) -> dict:
    """An experiment's header and its one BEIR dataset (``folder``), run into ``output_dir``; add the entries."""
    return {
        "experiment": {
            "name": name,
            "depth": depth,
            "measures": measures,
            "output_dir": str(output_dir),
            "cache_dir": str(output_dir / "cache"),
        },
        "datasets": [{"name": name, "path": str(folder), "format": "beir"}],
    }


@pytest.fixture(scope="module")
def tiny_beir(tmp_path_factory) -> Path:
    """300 passages of Zipfian words; query i copies 4 words of passage 7 i, which is its one relevant doc."""
    folder = tmp_path_factory.mktemp("tiny-beir")
    rng = np.random.default_rng(9)
    vocabulary = [f"word{i}" for i in range(400)]
    probabilities = 1.0 / np.arange(1, 401) ** 1.05
    docs = [
        " ".join(rng.choice(vocabulary, size=rng.integers(8, 30), p=probabilities / probabilities.sum()))
        for _ in range(300)
    ]
    queries = {f"q{q}": " ".join(docs[7 * q].split()[-4:]) for q in range(30)}
    return write_beir(folder, docs, queries, {f"q{q}": f"d{7 * q}" for q in range(30)}, "d")


@pytest.fixture
def experiment_factory(tiny_beir):
    def make(output_dir: Path):
        raw = beir_grid("scale", tiny_beir, output_dir, 20, ["ndcg@10", "recall@20"]) | {
            "systems": [
                {
                    "name": "bm25",
                    "family": "zerda.keyword",
                    "params": {"engine": "fast"},
                    "grid": {"b": [0.5, 0.75]},
                },
                {"name": "sparse", "family": "pipeline.sparse"},
                {"name": "dense", "family": "pipeline.dense", "params": {"embedder": "lsa", "dim": 64}},
                {
                    "name": "dense_ivf",
                    "family": "pipeline.dense",
                    "params": {"embedder": "lsa", "dim": 64, "index": "ivf", "nlist": 8, "nprobe": 2},
                },
                {"name": "dense_hnsw", "family": "dense", "params": {"embedder": "lsa", "dim": 64, "index": "hnsw"}},
            ],
            "fusions": [{"name": "rrf", "inputs": ["sparse", "dense"], "method": "rrf"}],
        }
        return resolve_experiment(raw, "scale.toml")

    return make


@pytest.fixture(scope="module")
def local_executor():
    """A LocalCluster of 2 worker processes."""
    with open_executor("local:2") as executor:
        yield executor


def _cell_files(output_dir: Path) -> dict[str, dict[str, bytes]]:
    cells = output_dir / "cells"
    return {d.name: {f.name: f.read_bytes() for f in d.iterdir()} for d in sorted(cells.iterdir())}


def _effectiveness(output_dir: Path) -> dict[str, dict]:
    return {cell: json.loads(files["result.json"])["means"] for cell, files in _cell_files(output_dir).items()}


def _assert_same_runs(serial_dir: Path, dask_dir: Path, n_cells: int) -> None:
    serial, dask = _cell_files(serial_dir), _cell_files(dask_dir)
    assert len(dask) == n_cells and set(dask) == set(serial)
    for cell_id, files in dask.items():
        assert set(files) == CELL_FILES, cell_id  # no temporary, partial or extra file
        assert files[RUN_FILE] == serial[cell_id][RUN_FILE], cell_id
        assert files["per_query.csv"] == serial[cell_id]["per_query.csv"], cell_id
    assert _effectiveness(dask_dir) == _effectiveness(serial_dir)
    assert not list(dask_dir.rglob(f"{TMP_PREFIX}*"))


@pytest.mark.slow
def test_local_cluster_equals_serial(experiment_factory, local_executor, tmp_path):
    serial = experiment_factory(tmp_path / "serial")
    dask = experiment_factory(tmp_path / "dask")
    assert isinstance(local_executor, DaskExecutor)
    serial_table = run_experiment(serial, progress=False)
    dask_table = run_experiment(dask, progress=False, executor=local_executor)
    _assert_same_runs(tmp_path / "serial", tmp_path / "dask", len(serial.cells))
    columns = ["dataset", "system", "cell_id", "ndcg@10", "recall@20", "ann_recall"]
    assert dask_table[columns].equals(serial_table[columns])
    assert 0.0 < dask_table.set_index("system").loc["dense_ivf", "ann_recall"] < 1.0  # an approximation, measured
    # The fusion really fused: it differs from both of its inputs.
    by_system = dict(zip(dask_table["system"], dask_table["cell_id"], strict=True))
    runs = _cell_files(tmp_path / "dask")
    assert runs[by_system["rrf"]][RUN_FILE] not in (
        runs[by_system["sparse"]][RUN_FILE],
        runs[by_system["dense"]][RUN_FILE],
    )


@pytest.mark.slow
def test_killed_worker_is_retried_without_duplicates(experiment_factory, local_executor, tmp_path):
    serial = experiment_factory(tmp_path / "serial")
    dask = experiment_factory(tmp_path / "dask")
    run_experiment(serial, progress=False)
    victim = next(c.cell_id for c in dask.cells if c.name == "dense")  # an input of the fusion
    marker = tmp_path / "killed-once"

    def crash_once(cells, task):
        def task_or_die(cell):
            if cell.cell_id == victim and not marker.exists():
                marker.touch()
                directory = tmp_path / "dask" / "cells" / cell.cell_id
                directory.mkdir(parents=True, exist_ok=True)
                (directory / RUN_FILE).write_text("q0 Q0 d1 1 1.0 stale\n")  # a stale, partial run
                (directory / f"{TMP_PREFIX}half-written").write_text("q0 Q0")
                os._exit(1)  # the worker process dies mid-cell, no exception to report
            return task(cell)

        return local_executor(cells, task_or_die)

    run_experiment(dask, progress=False, executor=crash_once)
    assert marker.exists()
    _assert_same_runs(tmp_path / "serial", tmp_path / "dask", len(serial.cells))


def test_unreachable_scheduler_is_a_one_line_run_error(monkeypatch):
    monkeypatch.setattr("zerda_eval.execution.executors.CONNECT_TIMEOUT_S", 1)
    with (
        pytest.raises(RunError, match=r"tcp://127\.0\.0\.1:9: no Dask scheduler answered") as info,
        open_executor("tcp://127.0.0.1:9"),
    ):
        pass
    assert "\n" not in str(info.value)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--scheduler", "dask"], "expected 'serial', 'local', 'local:N'"),
        (["--jobs", "0"], "--jobs 0: give N >= 1"),
        (["--jobs", "2", "--scheduler", "local:3"], "the worker count once: --scheduler local:N"),
    ],
)
def test_cli_scheduler_mistakes_are_usage_errors(tmp_path, capsys, args, message):
    from zerda_eval.cli import EXIT_USAGE, main

    assert main(["run", str(tmp_path / "x.toml"), *args]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


# --- corpus encoding over the workers ---------------------------------------------------------------


@pytest.fixture(scope="module")
def three_chunk_beir(tmp_path_factory) -> Path:
    """2,500 short English passages (three stored chunks of ``CHUNK_TEXTS``), 20 queries."""
    from zerda_eval.store.embeddings import CHUNK_TEXTS

    folder = tmp_path_factory.mktemp("three-chunk-beir")
    rng = np.random.default_rng(4)
    words = [
        "river",
        "bank",
        "money",
        "loan",
        "water",
        "fish",
        "boat",
        "city",
        "bridge",
        "road",
        "car",
        "engine",
        "wing",
        "flight",
        "lift",
    ]
    docs = [" ".join(rng.choice(words, size=rng.integers(4, 14))) for _ in range(2 * CHUNK_TEXTS + 452)]
    queries = {f"q{q}": " ".join(docs[100 * q].split()[:3]) for q in range(20)}
    return write_beir(folder, docs, queries, {f"q{q}": f"d{100 * q}" for q in range(20)}, "d")


def _dense_experiment(folder: Path, output_dir: Path):
    raw = beir_grid("encode", folder, output_dir, 10, ["ndcg@10"]) | {
        "systems": [{"name": "dense", "family": "pipeline.dense", "params": {"embedder": "wordllama"}}],
    }
    return resolve_experiment(raw, "encode.toml")


@pytest.mark.slow
def test_workers_encode_a_corpus_in_chunks_identical_to_a_serial_encode(three_chunk_beir, local_executor, tmp_path):
    from zerda_eval.execution.executors import encode_on_workers
    from zerda_eval.store.embeddings import CHUNK_TEXTS

    serial = _dense_experiment(three_chunk_beir, tmp_path / "serial")
    dask = _dense_experiment(three_chunk_beir, tmp_path / "dask")
    run_experiment(serial, progress=False)
    cache = (tmp_path / "dask" / "cache").resolve()
    encode_on_workers(local_executor.client, dask.cells, cache, progress=False)
    chunks = sorted((cache / "chunks").glob("*.npy"))
    assert [len(np.load(c)) for c in chunks] == sorted([CHUNK_TEXTS, CHUNK_TEXTS, 452])  # stored by the workers
    run_experiment(dask, progress=False, executor=local_executor)
    _assert_same_runs(tmp_path / "serial", tmp_path / "dask", len(serial.cells))
    [serial_vectors] = (tmp_path / "serial" / "cache").glob("*.npy")
    [dask_vectors] = cache.glob("*.npy")
    np.testing.assert_array_equal(np.load(dask_vectors), np.load(serial_vectors))
    assert not list((cache / "chunks").glob("*.npy"))  # assembled into the corpus file, then removed
    encode_on_workers(local_executor.client, dask.cells, cache, progress=False)  # a rerun encodes nothing
    assert not list((cache / "chunks").glob("*.npy"))


KILLED_ENCODE = """
import os, sys
import numpy as np
from retrieval.embeddings import BaseEmbedder
from zerda_eval.store import embeddings

embeddings.CHUNK_TEXTS = 2

class DiesOnThirdChunk(BaseEmbedder):
    name, dim, params = "counting", 2, {}
    def _encode(self, texts):
        if "c" in texts:
            os._exit(9)  # the process is killed mid-encode: no exception, no clean-up
        return np.array([[len(t), 1.0] for t in texts])

embeddings.embed_corpus(DiesOnThirdChunk(), list("abcdef"), sys.argv[1])
"""


def test_a_killed_encode_costs_only_its_chunk(tmp_path):
    import subprocess

    from retrieval.embeddings import BaseEmbedder
    from zerda_eval.store import embeddings

    done = subprocess.run([sys.executable, "-c", KILLED_ENCODE, str(tmp_path)], capture_output=True, text=True)
    assert done.returncode == 9, done.stderr

    class Counting(BaseEmbedder):
        name, dim, params = "counting", 2, {}

        def __init__(self):
            self.encoded: list[str] = []

        def _encode(self, texts):
            self.encoded += texts
            return np.array([[len(t), 1.0] for t in texts])

    embedder = Counting()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(embeddings, "CHUNK_TEXTS", 2)
        vectors = embeddings.embed_corpus(embedder, list("abcdef"), tmp_path)
    assert embedder.encoded == ["c", "d", "e", "f"]  # chunk "ab" was stored before the kill
    np.testing.assert_array_equal(vectors, Counting().embed(list("abcdef")))


# --- a million passages on a local cluster (the scale set: pytest -m scale) --------------------------

MILLION = 1_000_000


@pytest.fixture(scope="module")
def million_beir(tmp_path_factory) -> Path:
    """1,000,000 passages of 8-40 Zipfian words from a 20,000-word vocabulary; 200 queries, query i copying 5
    words of passage 4,999 i, which is its one relevant doc."""
    folder = tmp_path_factory.mktemp("million-beir")
    rng = np.random.default_rng(46)
    vocabulary = np.array([f"w{i}" for i in range(20_000)])
    probabilities = 1.0 / np.arange(1, 20_001) ** 1.07
    lengths = rng.integers(8, 41, size=MILLION)
    words = vocabulary[rng.choice(20_000, size=int(lengths.sum()), p=probabilities / probabilities.sum())]
    bounds = np.concatenate([[0], np.cumsum(lengths)])
    docs = [" ".join(words[bounds[i] : bounds[i + 1]]) for i in range(MILLION)]
    queries = {f"q{q}": " ".join(docs[4_999 * q].split()[:5]) for q in range(200)}
    return write_beir(folder, docs, queries, {f"q{q}": f"p{4_999 * q}" for q in range(200)}, "p")


def _million_experiment(folder: Path, output_dir: Path):
    raw = beir_grid("million", folder, output_dir, 100, ["ndcg@10", "recall@100"]) | {
        "systems": [
            {"name": "bm25", "family": "zerda.keyword", "params": {"engine": "fast"}},
            {"name": "bm25_b", "family": "zerda.keyword", "params": {"engine": "fast"}, "grid": {"b": [0.3, 0.9]}},
            {"name": "dense", "family": "dense", "params": {"embedder": "wordllama"}},
        ],
        "fusions": [
            {"name": "rrf", "inputs": ["bm25", "dense"], "method": "rrf"},
            {"name": "wsum", "inputs": ["bm25", "dense"], "method": "wsum", "params": {"score_norm": "min-max"}},
        ],
    }
    return resolve_experiment(raw, "million.toml")


@pytest.mark.scale
def test_a_million_passages_on_a_local_cluster_equal_the_serial_run(million_beir, local_executor, tmp_path):
    """Issue 46: the grid at 1M passages, serially and on two Dask workers that encode the corpus in chunks and
    run the cells: the same run files to the byte, the same measures."""
    from zerda_eval.execution.executors import encode_on_workers

    serial = _million_experiment(million_beir, tmp_path / "serial")
    dask = _million_experiment(million_beir, tmp_path / "dask")
    serial_table = run_experiment(serial, progress=False)
    encode_on_workers(local_executor.client, dask.cells, (tmp_path / "dask" / "cache").resolve(), progress=False)
    dask_table = run_experiment(dask, progress=False, executor=local_executor)
    _assert_same_runs(tmp_path / "serial", tmp_path / "dask", len(serial.cells))
    columns = ["dataset", "system", "cell_id", "ndcg@10", "recall@100"]
    assert dask_table[columns].equals(serial_table[columns])
    assert serial_table["ndcg@10"].min() > 0.0  # every cell found the copied passages somewhere in its top 10
