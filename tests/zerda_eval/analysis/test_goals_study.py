"""The goals study (analysis.studies.goals): each dataset's best held-out row against a reference number."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from tests.zerda_eval.analysis.frames import frames
from tests.zerda_eval.test_tuning import experiment
from zerda_eval.analysis.compare import CompareSpec
from zerda_eval.analysis.studies import goals, parse_studies
from zerda_eval.analysis.studies.base import FinishedRun
from zerda_eval.errors import ConfigError

PER_QUERY = {
    ("d", "bm25"): {"q1": 0.9, "q2": 0.1, "q3": 0.2},
    ("d", "dense"): {"q1": 0.1, "q2": 0.8, "q3": 0.3},
    ("d", "wsum[tuned]"): {"q1": 0.6, "q2": 0.6, "q3": 0.3},
    ("d", "rrf[tuned]"): {"q1": 0.5, "q2": 0.5, "q3": 0.2},
    ("e", "bm25"): {"q1": 0.4, "q2": 0.4},
    ("e", "bm25[tuned]"): {"q1": 0.4, "q2": 0.2},
}


def finished_run(tmp_path) -> FinishedRun:
    results, per_query = frames(PER_QUERY)
    results.loc[results["system"].str.endswith("[tuned]"), "family"] = "tuned"
    return FinishedRun(tmp_path, results, per_query, CompareSpec(), ["ndcg@10"])


def targets(**needs: str) -> list[goals.Target]:
    return [
        goals.Target("d", "ndcg@10", 0.55, "paper A", needs.get("d", "")),
        goals.Target("e", "ndcg@10", 0.45, "paper B", needs.get("e", "")),
        goals.Target("d", "ndcg@10", 0.5, "an easy goal"),
    ]


def test_each_goal_is_met_or_missed_by_the_best_tuned_row_and_the_oracle_is_the_per_query_best(tmp_path):
    table = goals.compute(targets(), finished_run(tmp_path))
    d, e, easy = (table.iloc[i] for i in range(3))
    # d: wsum[tuned] mean 0.5 beats rrf[tuned] 0.4; untuned rows (bm25 0.4, dense 0.4) never count
    assert d["held_out"] == "wsum[tuned]" and d["held_out_value"] == pytest.approx(0.5)
    assert d["gap"] == pytest.approx(-0.05) and not d["met"]
    # per-query oracle over all four rows of d: max(0.9, ...) = 0.9, 0.8, 0.3
    assert d["oracle"] == pytest.approx(np.mean([0.9, 0.8, 0.3]))
    assert e["held_out"] == "bm25[tuned]" and e["held_out_value"] == pytest.approx(0.3)
    assert e["oracle"] == pytest.approx(0.4) and not e["met"]
    assert easy["met"] and easy["gap"] == pytest.approx(0.0)


def test_the_verdict_says_by_how_much_and_what_would_close_each_missed_goal(tmp_path):
    section = goals.run(targets(d="a bigger dense model", e="a new signal"), finished_run(tmp_path))
    summary = section.summary
    assert summary.startswith("1 of 3 goal(s) met")
    d_text = summary.split("d: ", 1)[1].split(" e: ", 1)[0]
    assert "wsum[tuned] reaches 0.5000 ndcg@10, short of 0.5500 (paper A) by 0.0500" in d_text
    assert "a better combiner might close it" in d_text  # the oracle (0.667) is above the goal
    assert d_text.endswith("needed: a bigger dense model.")
    e_text = summary.split(" e: ", 1)[1]
    assert "no choice or fusion of these rows reaches it and a stronger signal is needed" in e_text  # 0.4 < 0.45
    assert e_text.endswith("needed: a new signal.")
    shown = section.tables[0][1]
    assert list(shown["met"]) == ["no", "no", "yes"]
    assert list(shown["gap"]) == ["-0.0500", "-0.1500", "+0.0000"]
    assert list(shown["what would close it"]) == ["a bigger dense model", "a new signal", ""]


def test_a_goal_on_a_measure_the_run_did_not_compute_is_said_not_a_crash(tmp_path):
    table = goals.compute([goals.Target("d", "map@1000", 0.5, "paper C")], finished_run(tmp_path))
    assert table.iloc[0]["held_out"] is None and not table.iloc[0]["met"]
    assert "d: no held-out (tuned) row measured map@1000." in goals.verdict(table)


@pytest.mark.parametrize(
    ("table", "needle"),
    [
        ({"targets": []}, "must be a non-empty list"),
        ({"target": [{}]}, "target"),
        ({"targets": [{"dataset": "d", "measure": "ndcg@10", "value": 0.5}]}, "targets[1] lacks source"),
        ({"targets": [{"dataset": "d", "measure": "ndcg@10", "value": "hi", "source": "s"}]}, "must be a number"),
        ({"targets": [{"dataset": "x", "measure": "ndcg@10", "value": 0.5, "source": "s"}]}, "'x' is not a dataset"),
        ({"targets": [{"dataset": "d", "measure": "ndcg@10", "value": 0.5, "source": "s", "by": 1}]}, "by"),
    ],
)
def test_goal_mistakes_are_one_line_config_errors(table, needle):
    document = {"datasets": [{"id": "d"}], "study": {"goals": table}}
    with pytest.raises(ConfigError) as error:
        parse_studies(document, "exp.toml")
    assert needle in str(error.value) and "\n" not in str(error.value)


def test_a_run_with_goals_reports_them_from_its_own_tuned_row(tmp_path):
    tuning = '[tuning]\nmeasure = "mrr@10"\ntrain = { "test" = "train" }\n'
    study = """
[study.goals]
targets = [
  { dataset = "test", measure = "mrr@10", value = 0.9, source = "a made-up paper", needs = "a better run file" },
]
"""
    results = experiment(tmp_path, tuning + study).run(progress=False)
    rows = results.table.set_index(["dataset", "system"])
    tuned = float(rows.loc[("test", "ext[tuned]"), "mrr@10"])  # 0.5: the train split's choice
    report = results.report(tmp_path / "report").read_text(encoding="utf-8")
    section = report.split("## Against the goals", 1)[1].split("\n## ", 1)[0]
    assert section.lstrip().startswith("0 of 1 goal(s) met")
    per_query = pd.concat(
        results.per_query[results.per_query["cell_id"] == results.cell_id(label, dataset="test")]
        for label in rows.loc["test"].index
    )
    oracle = per_query[per_query["measure"] == "mrr@10"].groupby("query_id")["value"].max().mean()
    assert oracle == pytest.approx(1.0)  # run b ranks every test query's document first
    assert f"ext[tuned] reaches {tuned:.4f} mrr@10, short of 0.9000 (a made-up paper) by {0.9 - tuned:.4f}" in section
    assert "a better combiner might close it; needed: a better run file." in section
    assert "goals.svg" in section or "goals.png" in section


@pytest.mark.parametrize(
    ("measure", "needle"),
    [
        ("ndgc@10", "unknown measure 'ndgc@10' (did you mean 'ndcg@10'?)"),
        ("P@5", "goals.targets[1].measure 'P@5' is not a measure of dataset 'test' (it computes ndcg@10, mrr@10)"),
    ],
)
def test_a_goal_on_a_misspelt_or_uncomputed_measure_is_refused_at_validation(tmp_path, measure, needle):
    tuning = '[tuning]\nmeasure = "mrr@10"\ntrain = { "test" = "train" }\n'
    study = f'[study.goals]\ntargets = [{{ dataset = "test", measure = "{measure}", value = 0.9, source = "s" }}]\n'
    with pytest.raises(ConfigError) as error:
        experiment(tmp_path, tuning + study)
    assert needle in str(error.value) and "\n" not in str(error.value)
