"""Relative ``path``s of an experiment file are read from the file's folder, whatever the working directory."""

from __future__ import annotations

import pytest

from tests.conftest import write_trec_folder
from zerda_eval import Experiment
from zerda_eval.store.run_dir import read_cell_run

DOCS = {"d1": "cats purr", "d2": "dogs bark", "d3": "birds sing"}
QUERIES = {"q1": "cats", "q2": "dogs"}
QRELS = [("q1", "d1", 1), ("q2", "d2", 1)]


def test_dataset_and_run_file_paths_resolve_against_the_toml_folder(tmp_path, monkeypatch):
    project = tmp_path / "project"
    write_trec_folder(project / "data" / "toy", DOCS, QUERIES, QRELS)
    (project / "runs_in").mkdir()
    (project / "runs_in" / "toy.trec").write_text("q1 Q0 d1 1 2.0 x\nq2 Q0 d3 1 1.0 x\n", encoding="utf-8")
    toml = project / "experiments" / "exp.toml"
    toml.parent.mkdir()
    toml.write_text(
        f"""
[experiment]
name = "rel"
output_dir = "{tmp_path / "out"}"
cache_dir = "{tmp_path / "cache"}"
depth = 10
measures = ["P@1"]

[[datasets]]
name = "toy"
path = "../data/toy"
format = "trec"

[[systems]]
name = "external"
family = "run_file"
params = {{ path = "../runs_in/{{dataset}}.trec" }}
""",
        encoding="utf-8",
    )
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    results = Experiment.from_toml(toml).run(progress=False)
    assert read_cell_run(results.run_dir, results.cell_id("external")) == {"q1": [("d1", 2.0)], "q2": [("d3", 1.0)]}
    assert results.table.set_index("system").loc["external", "P@1"] == pytest.approx(0.5)


def test_absolute_paths_stay_as_written(tmp_path):
    folder = write_trec_folder(tmp_path / "toy", DOCS, QUERIES, QRELS)
    toml = tmp_path / "sub" / "exp.toml"
    toml.parent.mkdir()
    toml.write_text(
        f'[experiment]\nname = "abs"\n[[datasets]]\nname = "toy"\npath = "{folder}"\nformat = "trec"\n'
        '[[systems]]\nname = "bm25"\nfamily = "zerda.keyword"\n',
        encoding="utf-8",
    )
    assert Experiment.from_toml(toml).spec.resolved["datasets"][0]["given"]["path"] == str(folder)
