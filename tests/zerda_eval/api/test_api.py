"""The Python API: the user guide's notebook example, user systems and run files in the grid, TOML = API."""

from __future__ import annotations

import gzip
import json
import re
import tomllib
from pathlib import Path

import pandas as pd
import pytest

from tests.conftest import experiment_header, trec_dataset, write_trec_folder
from tests.docs.doc_blocks import marked_python
from tests.zerda_eval.api.toy_systems import WordOverlap
from zerda_eval import Experiment, Results, describe_systems
from zerda_eval.errors import ConfigError, DataFormatError, RunError, ZerdaEvalWarning
from zerda_eval.fusion import FUSION_METHODS
from zerda_eval.store.run_dir import RUN_FILE, cell_dir, read_cell_run
from zerda_eval.systems import SYSTEMS

DOCS = {
    "d1": "cats purr and cats sleep",
    "d2": "dogs bark at cats",
    "d3": "a quiet house",
    "d4": "dogs and cats play",
    "d5": "birds sing at dawn",
}
QUERIES = {"q1": "cats", "q2": "dogs bark", "q3": "birds"}
QRELS = [("q1", "d1", 1), ("q2", "d2", 1), ("q3", "d5", 1), ("q1", "d4", 1)]


def readme_example() -> str:
    """The user guide's notebook example (docs/guide.md, marked <!-- readme-api-example -->)."""
    return marked_python("readme-api-example")


@pytest.mark.slow
def test_the_readme_notebook_example_runs(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    namespace: dict = {"__name__": "readme_example"}
    exec(compile(readme_example(), "docs/guide.md", "exec"), namespace)
    results = namespace["results"]
    assert list(results.table["system"]) == ["bm25", "overlap", "rrf"]
    assert (tmp_path / "reports" / "notebook" / "report.md").is_file()
    # the user system's run is the ranking it returned for the depth (100), ties put by doc id descending
    own = namespace["WordOverlap"]()
    from zerda_eval.datasets import load_collection

    collection = load_collection("cranfield")
    own.index(collection)
    qid = next(iter(collection.queries))
    by_id = sorted(own.search(collection.queries[qid], 100), key=lambda hit: hit[0].encode(), reverse=True)
    expected = sorted(by_id, key=lambda hit: -hit[1])
    cell = results.cell_id("overlap")
    assert read_cell_run(results.run_dir, cell)[qid] == expected
    assert "p_t-test_adj" in capsys.readouterr().out


def toy_experiment(tmp_path: Path, run_file: Path, extra: str = "", suffix: str = ".trec") -> Path:
    folder = write_trec_folder(tmp_path / "toy", DOCS, QUERIES, QRELS)
    path = tmp_path / "exp.toml"
    path.write_text(
        experiment_header(tmp_path, "api", '["ndcg@10", "recall@10"]')
        + trec_dataset("toy", folder)
        + f"""
[[systems]]
name = "bm25"
family = "zerda.keyword"

[[systems]]
name = "overlap"
family = "python"
params = {{ object = "tests.zerda_eval.api.toy_systems:make_overlap", version = "1", options = {{ weight = 2.0 }} }}

[[systems]]
name = "pyserini"
family = "run_file"
params = {{ path = "{run_file.parent}/{{dataset}}{suffix}" }}

[[fusions]]
name = "rrf"
inputs = ["pyserini", "bm25"]
method = "rrf"

[compare]
baseline = "pyserini"
tests = ["t-test"]
"""
        + extra,
        encoding="utf-8",
    )
    return path


USER_RUN = """q1 Q0 d4 1 9.5 pyserini
q1 Q0 d1 2 7.0 pyserini
q1 Q0 d2 3 1.0 pyserini
q2 Q0 d4 1 3.0 pyserini
q2 Q0 d2 2 2.0 pyserini
q3 Q0 d5 1 4.0 pyserini
"""


def test_a_user_system_and_a_run_file_go_through_grid_fusion_compare_and_report(tmp_path):
    run_file = tmp_path / "external" / "toy.trec"
    run_file.parent.mkdir()
    run_file.write_text(USER_RUN, encoding="utf-8")
    results = Experiment.from_toml(toy_experiment(tmp_path, run_file)).run(progress=False)
    table = results.table.set_index("system")
    # the run file is evaluated as written: q1 has d4, d1 (both relevant) on top; q2 finds d2 second; q3 d5 first
    assert read_cell_run(results.run_dir, results.cell_id("pyserini"))["q1"] == [("d4", 9.5), ("d1", 7.0), ("d2", 1.0)]
    assert table.loc["pyserini", "recall@10"] == pytest.approx(1.0)
    # the user's factory got its options: scores are twice the overlap counts
    overlap = read_cell_run(results.run_dir, results.cell_id("overlap"))
    assert overlap["q1"][:2] == [("d1", 4.0), ("d4", 2.0)]  # d1 holds "cats" twice; d2 and d4 once: d4 first
    # the fusion of the run file and bm25 is RRF by hand over the two rankings
    bm25 = read_cell_run(results.run_dir, results.cell_id("bm25"))
    fused = dict(read_cell_run(results.run_dir, results.cell_id("rrf"))["q2"])
    pyserini_q2 = ["d4", "d2"]
    bm25_q2 = [d for d, _ in bm25["q2"]]
    for doc in set(pyserini_q2) | set(bm25_q2):
        expected = sum(1 / (60 + r.index(doc) + 1) for r in (pyserini_q2, bm25_q2) if doc in r)
        assert fused[doc] == pytest.approx(expected)
    # costs of the run file and of the fusion over it were not measured here: NaN, and the report says so
    assert pd.isna(table.loc["pyserini", "latency_mean_ms"]) and pd.isna(table.loc["rrf", "latency_mean_ms"])
    assert table.loc["bm25", "latency_mean_ms"] > 0
    comparisons = results.compare()
    assert set(comparisons["system"]) == {"bm25", "overlap", "rrf"}
    report = results.report(tmp_path / "report").read_text(encoding="utf-8")
    assert "not measured" in report and "pyserini (baseline)" in report


def test_a_gzipped_run_file_is_evaluated_as_the_plain_one(tmp_path):
    """A ``run_file`` system reads ``toy.trec.gz`` (gzip, as ``gzip toy.trec`` leaves it) as ``toy.trec``."""
    tables, runs = [], []
    for suffix in (".trec", ".trec.gz"):
        root = tmp_path / suffix.strip(".")
        run_file = root / "external" / f"toy{suffix}"
        run_file.parent.mkdir(parents=True)
        data = USER_RUN.encode("utf-8")
        run_file.write_bytes(gzip.compress(data) if suffix.endswith(".gz") else data)
        experiment = Experiment.from_toml(toy_experiment(root, run_file, suffix=suffix)).only("pyserini")
        results = experiment.run(progress=False)
        tables.append(results.table[["ndcg@10", "recall@10"]].to_dict("records"))
        runs.append(read_cell_run(results.run_dir, results.cell_id("pyserini")))
    assert runs[0] == runs[1] and runs[0]["q1"] == [("d4", 9.5), ("d1", 7.0), ("d2", 1.0)]
    assert tables[0] == tables[1]


def test_a_run_file_that_changes_after_loading_is_refused(tmp_path):
    run_file = tmp_path / "external" / "toy.trec"
    run_file.parent.mkdir()
    run_file.write_text(USER_RUN, encoding="utf-8")
    experiment = Experiment.from_toml(toy_experiment(tmp_path, run_file))
    first = experiment.cells.set_index("system").loc["pyserini", "cell_id"]
    run_file.write_text(USER_RUN.replace("9.5", "0.5"), encoding="utf-8")
    with pytest.raises(DataFormatError, match="changed since the experiment was loaded"):
        experiment.only("pyserini").run(progress=False)
    again = Experiment.from_toml(toy_experiment(tmp_path, run_file)).cells.set_index("system")
    assert again.loc["pyserini", "cell_id"] != first  # the file's hash is part of the cell id


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        (USER_RUN.replace("q2 Q0 d2 2", "q2 Q0 zz 2"), r"toy.trec:5: doc id 'zz' is not a document"),
        (USER_RUN.replace("q3 Q0 d5", "q9 Q0 d5"), r"toy.trec:6: query id 'q9' is not a query"),
        (USER_RUN.replace("q1 Q0 d1 2 7.0 pyserini", "q1 d1 2 7.0"), r"toy.trec:2: expected 'qid Q0 docid rank"),
        (USER_RUN.replace("7.0", "high"), r"toy.trec:2: score 'high' is not a number"),
    ],
)
def test_a_bad_run_file_is_one_line_naming_file_and_line(tmp_path, content, needle):
    run_file = tmp_path / "external" / "toy.trec"
    run_file.parent.mkdir()
    run_file.write_text(content, encoding="utf-8")
    with pytest.raises(DataFormatError, match=needle) as info:
        Experiment.from_toml(toy_experiment(tmp_path, run_file)).only("pyserini").run(progress=False)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize(
    ("policy", "q1"), [(None, None), ("max", [("d4", 9.5), ("d2", 8.0), ("d1", 7.0)]), ("first", None)]
)
def test_a_doc_listed_twice_in_a_run_file_is_an_error_unless_the_cell_asks_for_a_policy(tmp_path, policy, q1):
    """``duplicates`` is a parameter of the family, so the policy is in the cell config and id."""
    run_file = tmp_path / "external" / "toy.trec"
    run_file.parent.mkdir()
    run_file.write_text(USER_RUN + "q1 Q0 d2 4 8.0 pyserini\n", encoding="utf-8")
    path = toy_experiment(tmp_path, run_file)
    if policy is not None:
        text = path.read_text(encoding="utf-8").replace('.trec" }', f'.trec", duplicates = "{policy}" }}')
        path.write_text(text, encoding="utf-8")
    experiment = Experiment.from_toml(path).only("pyserini")
    if policy is None:
        with pytest.raises(
            RunError, match=r"toy.trec, query 'q1': document 'd2' is listed 2 times; .*duplicates = 'max'"
        ):
            experiment.run(progress=False)
        return
    results = experiment.run(progress=False)
    cell = results.cell_id("pyserini")
    assert (
        json.loads((cell_dir(results.run_dir, cell) / "result.json").read_text())["config"]["system"]["params"][
            "duplicates"
        ]
        == policy
    )
    expected = q1 or [("d4", 9.5), ("d1", 7.0), ("d2", 1.0)]
    assert read_cell_run(results.run_dir, cell)["q1"] == expected


def test_a_run_file_lacking_some_queries_gives_one_warning_with_the_counts(tmp_path):
    run_file = tmp_path / "external" / "toy.trec"
    run_file.parent.mkdir()
    run_file.write_text(USER_RUN.replace("q3 Q0 d5 1 4.0 pyserini\n", ""), encoding="utf-8")
    with pytest.warns(ZerdaEvalWarning) as caught:
        Experiment.from_toml(toy_experiment(tmp_path, run_file)).only("pyserini").run(progress=False)
    messages = [str(w.message) for w in caught if "no lines for" in str(w.message)]
    assert messages == [
        f"{run_file}: no lines for 1 of the 3 queries evaluated on 'toy' (they score 0 in every mean); "
        "check that the file covers the dataset's queries"
    ]


def test_a_missing_run_file_fails_when_the_experiment_is_loaded(tmp_path):
    with pytest.raises(ConfigError, match=r"exp.toml: system 'pyserini': run file .*nowhere/toy.trec.* not found"):
        Experiment.from_toml(toy_experiment(tmp_path, tmp_path / "nowhere" / "toy.trec"))


def test_toml_and_api_give_byte_identical_runs(tmp_path):
    run_file = tmp_path / "external" / "toy.trec"
    run_file.parent.mkdir()
    run_file.write_text(USER_RUN, encoding="utf-8")
    path = toy_experiment(tmp_path, run_file)
    from_toml = Experiment.from_toml(path).run(progress=False)
    mapping = tomllib.loads(path.read_text(encoding="utf-8"))
    mapping["experiment"]["output_dir"] = str(tmp_path / "api-runs")
    from_dict = Experiment.from_dict(mapping).run(progress=False)
    assert list(from_toml.table["cell_id"]) == list(from_dict.table["cell_id"])
    for cell_id in from_toml.table["cell_id"]:
        first = (cell_dir(from_toml.run_dir, cell_id) / RUN_FILE).read_bytes()
        assert first == (cell_dir(from_dict.run_dir, cell_id) / RUN_FILE).read_bytes()


def test_an_object_given_to_from_dict_is_a_system_of_the_grid(tmp_path):
    folder = write_trec_folder(tmp_path / "toy", DOCS, QUERIES, QRELS)
    mapping = tomllib.loads(experiment_header(tmp_path, "objects"))
    mapping["datasets"] = [{"name": "toy", "path": str(folder), "format": "trec"}]
    mapping["systems"] = [{"name": "bm25", "family": "zerda.keyword"}]

    def by_length(query_text: str, k: int) -> list[tuple[str, float]]:  # a plain callable
        return sorted(((d, -float(len(t))) for d, t in DOCS.items()), key=lambda hit: -hit[1])[:k]

    by_length.version = "2"
    results = Experiment.from_dict(mapping, systems={"mine": WordOverlap(), "short": by_length}).run(progress=False)
    assert list(results.table["system"]) == ["bm25", "mine", "short"]
    assert [d for d, _ in read_cell_run(results.run_dir, results.cell_id("short"))["q1"]] == [
        "d3",
        "d2",
        "d5",  # d4 and d5 tie (18 characters): doc id descending, as trec_eval
        "d4",
        "d1",
    ]
    run = results.run("mine")
    assert type(run).__name__ == "Run" and run.name == "mine" and run["q1"]["d1"] == 2.0


def test_api_mistakes_are_one_line_config_errors(tmp_path):
    folder = write_trec_folder(tmp_path / "toy", DOCS, QUERIES, QRELS)
    base = tomllib.loads(experiment_header(tmp_path, "mistakes"))
    base["datasets"] = [{"name": "toy", "path": str(folder), "format": "trec"}]
    base["systems"] = [{"name": "bm25", "family": "zerda.keyword"}]
    unversioned = WordOverlap()
    unversioned.version = None
    cases = [
        (dict(base), {"mine": unversioned}, "system 'mine' needs a version string"),
        (
            {**base, "systems": [{"name": "x", "family": "python", "params": {"object": "mine", "version": "1"}}]},
            {},
            "object 'mine' is neither 'package.module:factory' nor a system given",
        ),
        (
            {
                **base,
                "systems": [
                    {"name": "x", "family": "python", "params": {"object": "no_such.module:f", "version": "1"}}
                ],
            },
            {},
            "cannot import 'no_such.module'",
        ),
        ({**base, "systems": [{"name": "x", "family": "python", "params": {"version": "1"}}]}, {}, "object: required"),
        ({**base, "systems": [{"name": "x", "family": "run_file"}]}, {}, "path: required"),
        ({**base, "compare": {"baseline": "bm2"}}, {}, "did you mean 'bm25'"),
    ]
    for mapping, systems, needle in cases:
        with pytest.raises(ConfigError, match=re.escape(needle)) as info:
            Experiment.from_dict(mapping, systems=systems)
        assert "\n" not in str(info.value)


def test_results_compare_validates_its_arguments_like_the_file(tmp_path):
    run_file = tmp_path / "external" / "toy.trec"
    run_file.parent.mkdir()
    run_file.write_text(USER_RUN, encoding="utf-8")
    results = Experiment.from_toml(toy_experiment(tmp_path, run_file)).run(progress=False)
    reloaded = Results.load(results.run_dir)
    pd.testing.assert_frame_equal(reloaded.table, results.table)
    against_bm25 = reloaded.compare(baseline="bm25", correction="bonferroni")
    assert set(against_bm25["system"]) == {"overlap", "pyserini", "rrf"}
    with pytest.raises(ConfigError, match="did you mean 'holm'"):
        reloaded.compare(correction="holms")
    # effects, agreement and power are columns of the same frame; BH beside the configured correction
    wide = reloaded.compare(baseline="bm25", correction="bh", tests=["wilcoxon"], min_effect=0.1)
    for column in ("t_low", "ci_high", "p_t-test", "p_fisher", "p_wilcoxon_adj", "p_wilcoxon_bh", "tests_agree"):
        assert column in wide.columns
    assert (wide["p_wilcoxon_adj"] == wide["p_wilcoxon_bh"]).all()
    assert wide["underpowered"].tolist() == [
        not significant and mde > 0.1
        for significant, mde in zip(wide["significant_wilcoxon"], wide["mde"], strict=True)
    ]
    grid = reloaded.grid("ndcg@10")
    ranks = grid["ranks"]
    assert set(ranks["system"]) == set(reloaded.table["system"])
    assert ranks["p_best"].sum() == pytest.approx(1.0)  # per dataset: one dataset here
    assert len(grid["pairs"]) == len(ranks) * (len(ranks) - 1) // 2
    assert list(grid["anova"]["source"]) == ["system", "topic", "residual"]
    with pytest.raises(ConfigError, match="did you mean 'overlap'"):
        reloaded.run("overlp")


def test_describe_systems_lists_every_family_and_fusion_method():
    table = describe_systems()
    assert set(table.loc[table["kind"] == "system", "name"]) == set(SYSTEMS)
    assert set(table.loc[table["kind"] == "fusion", "name"]) == set(FUSION_METHODS)
    run_file = table[table["name"] == "run_file"].set_index("parameter")
    assert run_file.loc["path", "default"] == "(required)" and "{dataset}" in run_file.loc["path", "help"]
    assert table["help"].str.len().min() > 0


def test_the_cli_lists_systems(capsys):
    from zerda_eval.cli import main

    assert main(["systems", "wsum"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("wsum  (fusion)") and "score_norm = 'min-max'" in out
    assert main(["systems", "wsun"]) == 1
    assert "did you mean 'wsum'" in capsys.readouterr().err


def test_a_user_system_returning_an_unknown_doc_id_is_a_run_error(tmp_path):
    folder = write_trec_folder(tmp_path / "toy", DOCS, QUERIES, QRELS)
    mapping = tomllib.loads(experiment_header(tmp_path, "unknown"))
    mapping["datasets"] = [{"name": "toy", "path": str(folder), "format": "trec"}]

    def wrong(query_text: str, k: int) -> list[tuple[str, float]]:
        return [("d1", 1.0), ("nope", 0.5)]

    wrong.version = "1"
    with pytest.raises(RunError, match="returned doc id 'nope', which is not in dataset"):
        Experiment.from_dict(mapping, systems={"wrong": wrong}).run(progress=False)
