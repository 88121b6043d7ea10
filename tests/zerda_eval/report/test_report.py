"""write_report on a real run directory: every plot type rendered, tables equal to the saved results."""

from __future__ import annotations

import re

import matplotlib.image
import numpy as np
import pandas as pd
import pytest

from zerda_eval.analysis.compare import compare_to_baseline
from zerda_eval.report import write_report
from zerda_eval.report.plots import CSS_DPI, DPI, pareto_front, plot_label
from zerda_eval.report.tables import MARKERS, load_run_dir

DATASETS = ["quranqa23_taskA_dev", "toy_en"]
PLOTS = [
    *[f"metrics_{d}" for d in DATASETS],
    *[f"per_query_{d}_ndcg_10" for d in DATASETS],
    "win_tie_loss_ndcg_10",
    *[f"pareto_{d}_ndcg_10" for d in DATASETS],
    "sweep_k_ndcg_10",
    "sweep_weights_ndcg_10",
    "sweep_vector_weight_ndcg_10",
    "rrf_order_delta",
    *[f"effects_{d}_ndcg_10" for d in DATASETS],
    *[f"ranks_{d}_ndcg_10" for d in DATASETS],
]


@pytest.fixture(scope="module")
def report(run_dir, tmp_path_factory):
    report_dir = tmp_path_factory.mktemp("reports") / "tiny"
    return write_report(run_dir, report_dir)


def test_report_files_exist(report):
    folder = report.parent
    assert report.name == "report.md"
    for name in ("report.md", "report.html", "results.csv", "results.parquet"):
        assert (folder / name).stat().st_size > 1000


@pytest.mark.parametrize("name", PLOTS)
def test_every_plot_type_is_rendered_png_and_svg(report, name):
    png, svg = report.parent / "plots" / f"{name}.png", report.parent / "plots" / f"{name}.svg"
    assert png.stat().st_size > 10_000 and svg.stat().st_size > 10_000
    height, width = matplotlib.image.imread(png).shape[:2]
    assert width >= 500 and height >= 300
    # drawn for its printed size: shown at 96 CSS px per inch, never wider than a 1280 px page's column
    assert width * CSS_DPI / DPI <= 1000
    assert svg.read_text(encoding="utf-8").lstrip().startswith("<?xml")
    assert f"plots/{name}.png" in report.read_text(encoding="utf-8")


def test_html_needs_nothing_outside_the_report_folder(report):
    page = (report.parent / "report.html").read_text(encoding="utf-8")
    sources = re.findall(r'src="([^"]+)"', page)
    assert sorted(s for s in sources if s.startswith("plots/")) == sorted(f"plots/{name}.png" for name in PLOTS)
    assert all((report.parent / source).is_file() for source in sources) and "<link" not in page


def test_results_copies_equal_the_run(report, run_dir):
    saved = pd.read_parquet(run_dir / "results.parquet")
    pd.testing.assert_frame_equal(pd.read_parquet(report.parent / "results.parquet"), saved)
    pd.testing.assert_frame_equal(pd.read_csv(report.parent / "results.csv"), pd.read_csv(run_dir / "results.csv"))


def markdown_tables(text: str) -> list[list[list[str]]]:
    tables, current = [], []
    for line in text.splitlines():
        if line.startswith("|"):
            current.append([c.strip() for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]])
        elif current:
            tables.append(current)
            current = []
    return tables


def number(cell: str) -> float:
    return float(re.sub(r"[*†]", "", cell.replace("**", "")))


def test_metric_tables_equal_saved_results_with_baseline_bold_and_markers(report, run_dir):
    data = load_run_dir(run_dir)
    results = data.results
    text = report.read_text(encoding="utf-8")
    per_dataset = [t for t in markdown_tables(text) if t[0][0] == "system" and data.measures[0] in t[0]]
    assert len(per_dataset) == results["dataset"].nunique()
    comparisons = compare_to_baseline(results, data.per_query, data.spec)
    significant = {(r["cell_id"], r["measure"]): r for _, r in comparisons.iterrows()}
    for dataset, table in zip(dict.fromkeys(results["dataset"]), per_dataset, strict=True):
        header, rows = table[0], table[2:]
        expected = results[results["dataset"] == dataset].reset_index(drop=True)
        assert len(rows) == len(expected)
        for measure in data.measures:
            j = header.index(measure)
            best = expected[measure].max()
            for i, row in expected.iterrows():
                cell = rows[i][j]
                assert number(cell) == pytest.approx(row[measure], abs=5e-5)
                assert cell.startswith("**") == (row[measure] == best)
                comparison = significant.get((row["cell_id"], measure))
                markers = (
                    ""
                    if comparison is None
                    else "".join(MARKERS[t] for t in data.spec.tests if comparison[f"significant_{t}"])
                )
                plain = cell.replace("**", "")
                assert plain.endswith(markers) if markers else plain[-1] not in "*†"
        baseline_rows = [r[0] for r in rows if r[0].endswith("(baseline)")]
        assert baseline_rows == ["bm25 (baseline)"]
        assert [r[0].removesuffix(" (baseline)") for r in rows] == [data.labels[s] for s in expected["system"]]


def test_study_headline_and_verdict_match_the_runs(report, run_dir):
    text = report.read_text(encoding="utf-8")
    headline = next(t for t in markdown_tables(text) if t[0][0] == "dataset" and "settings" in t[0])
    results = pd.read_parquet(run_dir / "results.parquet")
    for row in headline[2:]:
        dataset = row[0]
        cells = results[(results["dataset"] == dataset) & results["system"].str.startswith("hybrid[")]
        fixed = cells[cells["system"].str.contains("rrf_order=fixed")]["ndcg@10"].mean()
        documented = cells[cells["system"].str.contains("rrf_order=as_documented")]["ndcg@10"].mean()
        assert float(row[2]) == pytest.approx(fixed - documented, abs=5e-5)
        assert row[1] == "2"
    verdict = text.split("## RRF-ordering study (seed 000 HybridRetriever)\n\n", 1)[1].split("\n\n", 1)[0]
    assert verdict.startswith("Over 2 dataset(s) and 4 paired setting(s)")


def test_appendix_has_config_and_versions(report):
    text = report.read_text(encoding="utf-8")
    appendix = text.split("## Appendix: configuration and library versions", 1)[1]
    assert '"baseline": "bm25"' in appendix and "numpy:" in appendix and "matplotlib:" in appendix


def test_pareto_front_by_hand():
    latency = np.array([1.0, 2.0, 3.0, 2.5, 1.0])
    quality = np.array([0.2, 0.5, 0.6, 0.4, 0.1])
    # (2.5, 0.4) is dominated by (2.0, 0.5); (1.0, 0.1) by (1.0, 0.2)
    assert pareto_front(latency, quality).tolist() == [True, True, True, False, False]


def test_arabic_labels_are_never_drawn_unshaped():
    label = plot_label("tydiqa السؤال")
    try:
        import arabic_reshaper  # noqa: F401
    except ImportError:
        assert label == "tydiqa \\u0627\\u0644\\u0633\\u0624\\u0627\\u0644"
    else:
        assert label != "tydiqa السؤال"
    assert plot_label("xquad/ar") == "xquad/ar"


def test_html_contents_link_to_every_section_and_print_rules_exist(report):
    page = (report.parent / "report.html").read_text(encoding="utf-8")
    links = re.findall(r'<a href="#([^"]+)">', page)
    ids = set(re.findall(r'<h[23] id="([^"]+)">', page))
    assert set(links) == ids and len(ids) >= 8
    assert "@media print" in page and '<nav class="toc">' in page
    markdown = report.read_text(encoding="utf-8")
    assert all(f"](#{anchor})" in markdown for anchor in ids)  # the markdown contents use the same anchors


def test_the_experiment_description_opens_the_summary(run_dir, tmp_path):
    import json
    import shutil

    described = tmp_path / "described"
    shutil.copytree(run_dir, described)
    document = json.loads((described / "experiment.json").read_text(encoding="utf-8"))
    document["config"]["experiment"]["description"] = "The neural encoders run at int8."
    (described / "experiment.json").write_text(json.dumps(document), encoding="utf-8")
    write_report(described, tmp_path / "out")
    summary = (tmp_path / "out" / "report.md").read_text(encoding="utf-8").split("\n\n")[1]
    assert summary.startswith("The neural encoders run at int8. ") and "cells over" in summary
    write_report(run_dir, tmp_path / "plain")  # no description: the summary starts with the counts
    assert (tmp_path / "plain" / "report.md").read_text(encoding="utf-8").split("\n\n")[1][0].isdigit()
