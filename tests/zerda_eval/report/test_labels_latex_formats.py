"""Short grid labels, table alignment, every measure in the main table, the LaTeX export and --format."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from zerda_eval.analysis.compare import compare_to_baseline
from zerda_eval.analysis.settings import parse_analysis
from zerda_eval.errors import ConfigError
from zerda_eval.evaluation.efficiency import NOT_MEASURED
from zerda_eval.report.labels import short_labels, split_label
from zerda_eval.report.latex import escape, render_latex
from zerda_eval.report.tables import RunData, Table, efficiency_table, label_table, load_run_dir, metric_table
from zerda_eval.report.writer import check_formats

LONG = [
    "bm25",
    "hybrid[rrf_order=as_documented,vector_weight=0.6,top_k=20]",
    "hybrid[rrf_order=fixed,vector_weight=0.6,top_k=20]",
    "hybrid[rrf_order=fixed,vector_weight=0.3,top_k=20]",
    "rrf[k=10]",
    "rrf[k=60]",
    "wrrf[weights=[0.2, 0.8]]",
    "wrrf[weights=[0.8, 0.2]]",
    "one[a=1]",
]


def test_short_labels_keep_only_the_axes_that_vary():
    short = short_labels(LONG)
    assert short["bm25"] == "bm25"
    # top_k is 20 in every hybrid cell: dropped; the rest too long as key=value, so values only
    assert short[LONG[1]] == "hybrid[as_documented, 0.6]"
    assert short[LONG[3]] == "hybrid[fixed, 0.3]"
    assert short["rrf[k=10]"] == "rrf[k=10]"  # short enough to keep the axis name
    assert short["wrrf[weights=[0.2, 0.8]]"] == "wrrf[weights=[0.2, 0.8]]"  # a list value keeps its comma
    assert short["one[a=1]"] == "one"  # a grid of one cell says nothing
    assert split_label("wrrf[weights=[0.2, 0.8],k=5]") == ("wrrf", [("weights", "[0.2, 0.8]"), ("k", "5")])


def test_an_ambiguous_short_label_falls_back_to_the_full_one():
    labels = ["x[a=1,b=1]", "x[a=2,b=1]", "x[a=1,b=2]", "x[a=2,b=2]", "x[a=1]"]
    short = short_labels(labels)
    assert len(set(short.values())) == len(labels)


def frame_data() -> RunData:
    results = pd.DataFrame(
        [
            {"dataset": "d", "system": "bm25", "cell_id": "a", "ndcg@10": 0.5, "mrr@10": 0.4, "latency_mean_ms": 2.0},
            {
                "dataset": "d",
                "system": "h[w=0.3,t=20]",
                "cell_id": "b",
                "ndcg@10": 0.6,
                "mrr@10": 0.3,
                "latency_mean_ms": 5.0,
            },
            {
                "dataset": "d",
                "system": "h[w=0.7,t=20]",
                "cell_id": "c",
                "ndcg@10": 0.55,
                "mrr@10": 0.45,
                "latency_mean_ms": 4.0,
            },
            {
                "dataset": "d",
                "system": "pyserini",
                "cell_id": "e",
                "ndcg@10": 0.58,
                "mrr@10": 0.41,
                "latency_mean_ms": np.nan,
            },
        ]
    )
    config = {
        "experiment": {"name": "t", "measures": ["ndcg@10", "mrr@10"]},
        "datasets": [{"label": "d"}],
        "compare": {"baseline": "bm25", "measures": ["ndcg@10"]},
    }
    settings = parse_analysis(config, "t")
    return RunData(Path("."), "t", config, None, results, pd.DataFrame(), settings, ["ndcg@10"])


def test_the_main_table_shows_every_measure_asked_not_only_the_compared_ones():
    table = metric_table(frame_data(), "d", pd.DataFrame())
    assert table.header == ["system", "ndcg@10", "mrr@10", "latency (ms)"]  # mrr@10 is not compared, still shown
    assert [row[0] for row in table.rows] == ["bm25 (baseline)", "h[w=0.3]", "h[w=0.7]", "pyserini"]
    assert table.rows[3][3] == NOT_MEASURED  # a run file's latency: not measured, not a number
    assert (1, 1) in table.bold and (2, 2) in table.bold and (0, 3) in table.bold  # best: max, max, min latency
    assert table.numeric() == [False, True, True, True]
    assert label_table(frame_data()).rows == [["h[w=0.3]", "h[w=0.3,t=20]"], ["h[w=0.7]", "h[w=0.7,t=20]"]]


def test_efficiency_costs_not_measured_keep_saying_so():
    data = frame_data()
    data.results["qps"] = [500.0, 200.0, 250.0, np.nan]
    table = efficiency_table(data, "d")
    assert table.header[0] == "system" and "queries/s" in table.header and "latency (ms)" in table.header
    assert table.rows[3][1:] == [NOT_MEASURED, NOT_MEASURED]


def test_markdown_and_html_align_text_left_and_numbers_right():
    from zerda_eval.report.html import table_html
    from zerda_eval.report.markdown import table_markdown

    table = Table(
        header=["system", "measure", "delta", "95% CI"], rows=[["bm25", "ndcg@10", "+0.0100", "[-0.0100, +0.0300]"]]
    )
    assert table_markdown(table).splitlines()[1] == "|:---|:---|---:|---:|"
    page = table_html(table)
    assert '<td class="text">bm25' in page and '<td class="text">ndcg@10' in page and '<td class="num">+0.0100' in page


def test_latex_escapes_and_marks_like_the_markdown_table():
    assert (
        escape("a_b & 50% #1 {x} ~ ^ \\")
        == r"a\_b \& 50\% \#1 \{x\} \textasciitilde{} \textasciicircum{} \textbackslash{}"
    )
    data = frame_data()
    table = Table(
        header=["system", "ndcg@10"], rows=[["bm25 (baseline)", "0.5000"], ["h[w=0.3]", "0.6000*†"]], bold={(1, 1)}
    )
    tex = render_latex(data, [("d", table)])
    assert r"\begin{tabular}{lr}" in tex and r"\toprule" in tex and r"\midrule" in tex and r"\bottomrule" in tex
    assert r"h[w=0.3] & \textbf{0.6000}$^{*\dagger}$ \\" in tex
    assert r"\label{tab:t-d}" in tex and "holm" in tex


def test_latex_main_tables_hold_the_saved_results(run_dir, tmp_path):
    from zerda_eval.report import write_report

    tex = write_report(run_dir, tmp_path / "r", formats=["latex"]).read_text(encoding="utf-8")
    data = load_run_dir(run_dir)
    comparisons = compare_to_baseline(data.results, data.per_query, data.spec)
    assert tex.count(r"\begin{table}") == len(data.datasets)
    for dataset in data.datasets:
        table = metric_table(data, dataset, comparisons)
        for row in table.rows:
            value = float(re.sub(r"[*†]", "", row[1]))
            expected = data.results[(data.results["dataset"] == dataset)]
            assert any(abs(value - v) < 5e-5 for v in expected[table.header[1]])
        assert escape(table.rows[0][0]) in tex
    assert not (tmp_path / "r" / "report.md").exists()  # only the asked format


def test_formats_are_checked(tmp_path):
    assert check_formats(["latex", "markdown"]) == ("markdown", "latex")
    with pytest.raises(ConfigError, match="unknown report format 'pdf'"):
        check_formats(["pdf"])


def test_cli_report_format_latex(run_dir, tmp_path, capsys):
    from zerda_eval import cli

    assert cli.main(["report", str(run_dir), "--out", str(tmp_path / "out"), "--format", "latex"]) == 0
    assert capsys.readouterr().out.strip().endswith("report.tex")
    assert (tmp_path / "out" / "report.tex").read_text(encoding="utf-8").count(r"\toprule") == 2


def test_api_report_formats(run_dir, tmp_path):
    from zerda_eval.api import Results

    assert Results.load(run_dir).report(tmp_path / "api", formats=["latex"]).name == "report.tex"


def test_a_large_grid_is_drawn_against_the_baseline_by_its_best_cell_each():
    """Beyond 12 systems, the per-query plots show plain systems, tuned rows and the best cell of each grid,
    best first (g[k=13]: mean 0.575; g[tuned]: 0.55; dense: 0.5)."""
    from tests.zerda_eval.analysis.frames import frames
    from zerda_eval.analysis.compare import CompareSpec
    from zerda_eval.analysis.settings import AnalysisSettings
    from zerda_eval.report import plots

    values = {("d", "bm25"): {"q1": 0.5, "q2": 0.5}, ("d", "dense"): {"q1": 0.1, "q2": 0.9}}
    values |= {("d", f"g[k={k}]"): {"q1": k / 20, "q2": 0.5} for k in range(14)}
    values |= {("d", "g[tuned]"): {"q1": 0.6, "q2": 0.5}}
    results, per_query = frames(values)
    settings = AnalysisSettings(compare=CompareSpec(baseline="bm25"))
    data = RunData(Path("."), "t", {}, None, results, per_query, settings, ["ndcg@10"])
    pairs, drawn = plots._paired(data, "d", "ndcg@10")
    assert [system for system, _ in pairs] == ["g[k=13] (best of 14)", "g[tuned]", "dense"]
    assert drawn.hidden_cells == 13 and drawn.hidden_entries == ()
    small = RunData(Path("."), "t", {}, None, results.iloc[:5], per_query, settings, ["ndcg@10"])
    pairs, drawn = plots._paired(small, "d", "ndcg@10")
    assert len(pairs) == 4 and drawn.hidden_cells == 0
