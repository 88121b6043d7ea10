"""``[[reranks]]``: a local cross-encoder re-ranks the top k of a system, fusion or tuned row of the grid.

The reference for the scores and the order is sentence-transformers' own ``CrossEncoder.predict`` on the
same (query, document text) pairs, over the input cell's stored run; latency adds up as documented.
"""

from __future__ import annotations

import json
import math
import shutil

import pytest

from tests.conftest import experiment_header, trec_dataset, write_trec_folder
from tests.cross_encoder_model import write_tiny_cross_encoder
from zerda_eval import Experiment
from zerda_eval.errors import ConfigError, ZerdaEvalError
from zerda_eval.store.run_dir import load_result, read_cell_run

DOCS = {
    "d1": "the cat sat on the mat",
    "d2": "the dog ran to the cat",
    "d3": "the volcano erupted and lava ran",
    "d4": "magma and lava in the volcano",
    "d5": "a bee in the flower of the hive",
    "d6": "honey of the bee and the hive",
    "d7": "the cat and the dog in the sun",
}
QUERIES = {"q1": "the cat", "q2": "lava volcano", "q3": "bee hive honey"}
QRELS = [("q1", "d1", 1), ("q2", "d4", 1), ("q3", "d6", 1)]
K = 4


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    return write_tiny_cross_encoder(tmp_path_factory.mktemp("tiny-ce") / "model")


def write_experiment(tmp_path, model, rerank: str, extra: str = "") -> object:
    data = write_trec_folder(tmp_path / "toy", DOCS, QUERIES, QRELS)
    path = tmp_path / "rerank.toml"
    path.write_text(
        experiment_header(tmp_path, "rerank")
        + trec_dataset("toy", data)
        + """
[[systems]]
name = "bm25"
family = "zerda.keyword"

[[systems]]
name = "bm25_fast"
family = "zerda.keyword"
params = { engine = "fast", k1 = 1.2 }
"""
        + extra
        + rerank.replace("MODEL", f"st:{model}"),
        encoding="utf-8",
    )
    return path


RERANK = f'\n[[reranks]]\nname = "ce"\ninput = "bm25"\nmodel = "MODEL"\nk = {K}\nbatch_size = 3\n'


def test_the_rerank_is_cross_encoder_predict_over_the_input_top_k(tmp_path, model):
    from sentence_transformers import CrossEncoder

    results = Experiment.from_toml(write_experiment(tmp_path, model, RERANK)).run(progress=False)
    run_dir = results.run_dir
    rerank_id, bm25_id = results.cell_id("ce", dataset="toy"), results.cell_id("bm25", dataset="toy")
    reranked, first_stage = read_cell_run(run_dir, rerank_id), read_cell_run(run_dir, bm25_id)
    reference = CrossEncoder(str(model), device="cpu", local_files_only=True)
    reordered = 0
    for qid, query in QUERIES.items():
        candidates = [doc for doc, _ in first_stage[qid][:K]]
        scores = reference.predict([[query, DOCS[doc]] for doc in candidates]).tolist()
        by_id = sorted(zip(candidates, scores, strict=True), key=lambda pair: pair[0].encode(), reverse=True)
        expected = sorted(by_id, key=lambda pair: -pair[1])  # trec_eval's order
        assert [doc for doc, _ in reranked[qid]] == [doc for doc, _ in expected]
        assert [s for _, s in reranked[qid]] == pytest.approx([s for _, s in expected], rel=1e-6, abs=1e-6)
        reordered += [doc for doc, _ in expected] != candidates
    assert reordered >= 1  # the model changed some order: the check above could fail
    rerank, bm25 = load_result(run_dir, rerank_id), load_result(run_dir, bm25_id)
    own, total = rerank["stats"]["rerank_latency_ms"], rerank["stats"]["latency_ms"]
    for qid in QUERIES:
        assert total[qid] == pytest.approx(bm25["stats"]["latency_ms"][qid] + own[qid], rel=1e-9)
        assert own[qid] > 0
    assert rerank["efficiency"]["index_time_s"] > bm25["efficiency"]["index_time_s"]  # plus loading the model
    assert rerank["stats"]["threads"]["torch"] == 1
    row = results.table.set_index("system").loc["ce"]
    assert row["family"] == "rerank" and json.loads(row["params"]) == {
        "batch_size": 3,
        "k": K,
        "model": f"st:{model}",
    }
    assert rerank["config"]["rerank"]["model_sha256"] == load_result(run_dir, rerank_id)["stats"]["model_sha256"]


def test_a_model_saved_again_to_the_same_folder_is_a_new_cell(tmp_path, model):
    folder = shutil.copytree(model, tmp_path / "copy")
    path = write_experiment(tmp_path, folder, RERANK)
    before = Experiment.from_toml(path).cells.set_index("system").loc["ce", "cell_id"]
    write_tiny_cross_encoder(folder, seed=8)
    after = Experiment.from_toml(path).cells.set_index("system").loc["ce", "cell_id"]
    assert before != after


def test_a_fusion_or_a_tuned_row_can_be_the_input(tmp_path, model):
    extra = """
[[fusions]]
name = "rrf"
inputs = ["bm25", "bm25_fast"]
method = "rrf"

[[systems]]
name = "grid"
family = "zerda.keyword"
grid = { b = [0.5, 0.75] }
tune = true

[tuning]
folds = 3
"""
    rerank = RERANK + RERANK.replace('"ce"', '"ce_rrf"').replace('"bm25"', '"rrf"')
    rerank += RERANK.replace('"ce"', '"ce_tuned"').replace('"bm25"', '"grid[tuned]"')
    experiment = Experiment.from_toml(write_experiment(tmp_path, model, rerank, extra))
    cells = experiment.cells.set_index("system")
    spec = {cell.label: cell for cell in experiment.spec.cells}
    assert spec["ce_rrf"].inputs == (cells.loc["rrf", "cell_id"],)
    assert spec["ce_tuned"].inputs == (cells.loc["grid[tuned]", "cell_id"],)
    results = experiment.run(progress=False)
    assert {"ce", "ce_rrf", "ce_tuned"} <= set(results.table["system"])


@pytest.mark.parametrize(
    ("rerank", "needle"),
    [
        (RERANK.replace('"bm25"', '"bm2"'), r"reranks\[0\]\.input: unknown rerank input 'bm2'.*did you mean 'bm25'"),
        (RERANK.replace(f"k = {K}", "k = 50"), r"reranks\[0\]\.k: 50 is deeper than the runs it reads"),
        (RERANK.replace('"MODEL"', '"st:/no/such/folder"'), r"reranks\[0\]\.model: .*'/no/such/folder' not found"),
        (RERANK.replace('"MODEL"', '"/no/prefix"'), r'reranks\[0\]\.model: give "st:/path/to/folder"'),
        (RERANK.replace("batch_size = 3", "batch = 3"), r"reranks\[0\].*'batch'.*did you mean 'batch_size'"),
        (RERANK.replace('"ce"', '"bm25"'), r"reranks.*bm25"),
    ],
)
def test_rerank_mistakes_are_one_line_config_errors(tmp_path, model, rerank, needle):
    with pytest.raises(ConfigError, match=needle) as error:
        Experiment.from_toml(write_experiment(tmp_path, model, rerank))
    assert "\n" not in str(error.value)


def test_a_folder_that_is_no_cross_encoder_is_refused_naming_it(tmp_path, model):
    folder = tmp_path / "bi-encoder"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"architectures": ["BertModel"]}), encoding="utf-8")
    with pytest.raises(ConfigError, match=rf"reranks\[0\]\.model: '{folder}' is not a cross-encoder"):
        Experiment.from_toml(write_experiment(tmp_path, folder, RERANK))


def test_a_two_label_classifier_is_refused_as_not_a_one_label_cross_encoder(tmp_path):
    """A pair classifier's ``predict`` gives two numbers per pair: no score to rank by."""
    folder = write_tiny_cross_encoder(tmp_path / "two-labels", labels=2)
    with pytest.raises(
        ConfigError, match=rf"reranks\[0\]\.model: '{folder}' is not a one-label cross-encoder"
    ) as error:
        Experiment.from_toml(write_experiment(tmp_path, folder, RERANK))
    assert "2 labels" in str(error.value) and "\n" not in str(error.value)


def test_a_model_changed_after_the_file_was_read_is_refused(tmp_path, model):
    folder = shutil.copytree(model, tmp_path / "copy")
    experiment = Experiment.from_toml(write_experiment(tmp_path, folder, RERANK))
    write_tiny_cross_encoder(folder, seed=9)
    with pytest.raises(ZerdaEvalError, match=r"rerank 'ce': the model folder .* changed since"):
        experiment.run(progress=False)


def test_only_a_rerank_of_a_fusion_runs_every_cell_it_needs(tmp_path, model):
    """``--only`` follows inputs of inputs: the rerank's fusion, and the systems that fusion fuses."""
    extra = '\n[[fusions]]\nname = "rrf"\ninputs = ["bm25", "bm25_fast"]\nmethod = "rrf"\n'
    rerank = RERANK.replace('"bm25"', '"rrf"')
    experiment = Experiment.from_toml(write_experiment(tmp_path, model, rerank, extra))
    only = experiment.only("ce")
    assert set(only.cells["system"]) == {"bm25", "bm25_fast", "rrf", "ce"}
    assert set(only.run(progress=False).table["system"]) == {"bm25", "bm25_fast", "rrf", "ce"}


def test_a_no_answer_from_the_input_is_kept(tmp_path, model):
    """An input that answers the no-answer id alone (its top score under no_answer_threshold) has no passage
    to score: the rerank keeps that answer; the other queries are re-ranked."""
    extra = '\n[[systems]]\nname = "picky"\nfamily = "zerda.keyword"\nparams = { no_answer_threshold = 1.5 }\n'
    results = Experiment.from_toml(write_experiment(tmp_path, model, RERANK.replace('"bm25"', '"picky"'), extra)).run(
        progress=False
    )
    picky = read_cell_run(results.run_dir, results.cell_id("picky", dataset="toy"))
    reranked = read_cell_run(results.run_dir, results.cell_id("ce", dataset="toy"))
    unanswered = [qid for qid, ranking in picky.items() if [d for d, _ in ranking] == ["-1"]]
    assert 0 < len(unanswered) < len(QUERIES)  # the threshold splits the toy queries
    for qid in QUERIES:
        if qid in unanswered:
            assert reranked[qid] == picky[qid]
        else:
            assert sorted(d for d, _ in reranked[qid]) == sorted(d for d, _ in picky[qid][:K])


def test_over_a_run_file_the_costs_are_not_measured(tmp_path, model):
    """A run file's costs are unknown, so the rerank's total latency is too ("not measured"), as a fusion's."""
    run_file = tmp_path / "external.trec"
    run_file.write_text(
        "".join(f"{qid} Q0 {doc} {rank} {10 - rank} x\n" for qid in QUERIES for rank, doc in enumerate(DOCS, 1)),
        encoding="utf-8",
    )
    extra = f'\n[[systems]]\nname = "ext"\nfamily = "run_file"\nparams = {{ path = "{run_file}" }}\n'
    results = Experiment.from_toml(write_experiment(tmp_path, model, RERANK.replace('"bm25"', '"ext"'), extra)).run(
        progress=False
    )
    row = results.table.set_index("system").loc["ce"]
    assert math.isnan(row["latency_mean_ms"]) and math.isnan(row["index_time_s"])
    reranked = read_cell_run(results.run_dir, results.cell_id("ce", dataset="toy"))
    assert all(sorted(d for d, _ in reranked[qid]) == sorted(list(DOCS)[:K]) for qid in QUERIES)


def test_the_cell_id_covers_the_code_that_scores():
    """Editing the cross-encoder glue or seed 004's reranker changes every rerank cell's id."""
    from zerda_eval.config.code_fingerprint import modules_of
    from zerda_eval.config.experiment import RERANK_MODULE

    covered = modules_of(RERANK_MODULE)
    assert {
        "retrieval.pipeline.cross_encoders",
        "retrieval.pipeline.rerankers",
        "zerda_eval.execution.rerank",
    } <= covered
