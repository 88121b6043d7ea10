"""At 60+ cells every per-system plot stays readable: each grid entry is drawn by its best cell, at most
``plots.MAX_DRAWN`` bars or panels (``MAX_LEGEND_GROUPS`` sweep lines), the baseline first, and the figure
itself says how many cells it left out and where they are. Asserted on the saved SVG (matplotlib writes
each drawn text as a comment before its glyphs) and on the drawn figure.

The synthetic grid: a baseline ``base``, 20 grid entries ``sysNN[k=0..2]`` (60 cells) and a tuned row,
62 cells on one dataset. Entry ``sysNN`` scores 0.2 + 0.03 NN; within an entry the best cell is ``k=2``
for an even NN and ``k=0`` for an odd one; the tuned row beats every cell; the baseline is the worst.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from matplotlib.container import BarContainer

from zerda_eval.analysis.compare import CompareSpec
from zerda_eval.analysis.settings import AnalysisSettings
from zerda_eval.report import plots
from zerda_eval.report.tables import RunData

MEASURES = ["ndcg@10", "recall@100"]
QUERIES = [f"q{i}" for i in range(10)]
SPREAD = np.array([-0.05, 0.05] * 5)  # per-query offsets around a cell's mean (mean 0)
ENTRIES = 20


def mean_of(entry: int, point: int) -> float:
    best = 2 if entry % 2 == 0 else 0
    return 0.2 + 0.03 * entry - (0.0 if point == best else 0.001 * (1 + point))


def many_cells() -> RunData:
    cells = [("base", {}, 0.1)]
    cells += [(f"sys{e:02d}[k={p}]", {"k": p}, mean_of(e, p)) for e in range(ENTRIES) for p in range(3)]
    cells += [("sys05[tuned]", {}, 0.9)]
    rows, per_query = [], []
    for label, params, mean in cells:
        row = {"dataset": "d", "system": label, "family": "f", "params": json.dumps(params), "cell_id": label}
        for shift, measure in enumerate(MEASURES):
            values = mean + 0.01 * shift + SPREAD
            row[measure] = float(values.mean())
            per_query += [
                {"dataset": "d", "cell_id": label, "system": label, "query_id": q, "measure": measure, "value": v}
                for q, v in zip(QUERIES, values, strict=True)
            ]
        rows.append(row)
    settings = AnalysisSettings(CompareSpec(baseline="base"))
    config = {"experiment": {"name": "many", "measures": MEASURES}}
    return RunData(Path("."), "many", config, None, pd.DataFrame(rows), pd.DataFrame(per_query), settings, MEASURES)


def svg_texts(figure: plots.Figure) -> list[str]:
    """Every text the SVG draws (matplotlib writes each one as a comment before its glyph paths)."""
    return re.findall(r"<!-- (.*?) -->", figure.svg.read_text(encoding="utf-8"), re.S)


@pytest.fixture
def drawn(monkeypatch) -> dict:
    """The figure each plot saves, kept for inspection."""
    kept: dict = {}
    real_save = plots._save

    def keep(fig, out_dir, name, caption):
        kept[name] = fig
        return real_save(fig, out_dir, name, caption)

    monkeypatch.setattr(plots, "_save", keep)
    return kept


BY_ENTRY = [f"sys{e:02d}[k={2 if e % 2 == 0 else 0}] (best of 3)" for e in reversed(range(ENTRIES))]


def test_metric_bars_draw_the_baseline_and_best_entries_and_say_how_many_more(tmp_path, drawn):
    figure = plots.metric_bars(many_cells(), "d", tmp_path)
    assert plots.MAX_DRAWN == 12
    expected = ["base (baseline)", "sys05[tuned]", *BY_ENTRY[:10]]  # sys19 .. sys10
    fig = drawn[figure.name]
    for ax in fig.axes:  # one panel per measure, MAX_DRAWN bars each (+ the baseline's hatched overlay)
        bars = [c for c in ax.containers if isinstance(c, BarContainer)]
        assert [len(c) for c in bars] == [plots.MAX_DRAWN, 1]
    texts = svg_texts(figure)
    assert [t for t in texts if t in expected or t.startswith("sys")] == expected
    assert not any(t.startswith(("sys09", "sys00")) for t in texts)
    assert any("+ 50 more cells" in t and "table" in t for t in texts)  # 62 cells, 12 drawn
    hidden = figure.caption.split("Not drawn:")[1]
    assert all(f"sys{e:02d}" in hidden for e in range(10)) and "sys10" not in hidden


def test_scatter_and_win_tie_loss_cap_their_panels_and_rows(tmp_path, drawn):
    data = many_cells()
    scatter = plots.per_query_scatter(data, "d", "ndcg@10", tmp_path)
    expected = ["sys05[tuned]", *BY_ENTRY[:11]]  # the baseline is the x axis, not a panel
    fig = drawn[scatter.name]
    assert len(fig.axes) == plots.MAX_DRAWN
    assert [ax.get_title().split("\n")[0] for ax in fig.axes] == expected
    assert any("+ 49 more cells" in t for t in svg_texts(scatter))  # 61 systems against the baseline
    assert "sys08" in scatter.caption and "sys09" not in scatter.caption.split("Not drawn:")[1]

    bars = plots.win_tie_loss_bars(data, "ndcg@10", tmp_path)
    ax = drawn[bars.name].axes[0]
    assert [label.get_text() for label in ax.get_yticklabels()] == expected
    assert [len(c) for c in ax.containers] == [plots.MAX_DRAWN] * 3  # better, tied, worse
    assert any("+ 49 more cells" in t for t in svg_texts(bars))


def test_sweep_curves_draw_the_best_series_and_name_the_rest(tmp_path, drawn):
    data = many_cells()
    figure = plots.sweep_curves(data.results, "ndcg@10", "k", "k", tmp_path)
    fig = drawn[figure.name]
    lines = [line.get_label() for line in fig.axes[0].get_lines()]
    assert lines == [f"sys{e:02d}" for e in reversed(range(10, ENTRIES))]
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    assert legend == lines and len(set(line.get_color() for line in fig.axes[0].get_lines())) == len(lines)
    assert any("+ 10 more series" in t for t in svg_texts(figure))
    hidden = figure.caption.split("Not drawn:")[1]
    assert all(f"sys{e:02d}" in hidden for e in range(10)) and "sys10" not in hidden


def test_a_small_grid_is_drawn_whole_in_results_order(tmp_path, drawn):
    data = many_cells()
    few = data.results.iloc[:7]  # the baseline and two entries' cells
    small = RunData(Path("."), "few", data.config, None, few, data.per_query, data.settings, MEASURES)
    figure = plots.metric_bars(small, "d", tmp_path)
    labels = [label.get_text() for label in drawn[figure.name].axes[0].get_yticklabels()]
    assert labels == ["base (baseline)", *[small.labels[s] for s in few["system"].iloc[1:]]]
    assert "Not drawn" not in figure.caption and not any("more cells" in t for t in svg_texts(figure))


def test_effect_intervals_lay_out_long_names_without_collapsing_the_axes(tmp_path, drawn):
    """reports/best's effect plots (names like ``bm25_grid[1.5, 0.75, none, english, english] (best of 30)``):
    the legend sat above the axes as the axes' own artist, wider than the axes, so matplotlib's constrained
    layout gave up ("axes sizes collapsed to zero") and drew the figure unlaid-out."""
    import warnings

    from zerda_eval.analysis.compare import compare_to_baseline

    data = many_cells()
    prefix = "an_entry_named_at_length_as_grid_rows_are_"
    long = {label: label if label == "base" else prefix + label for label in data.results["system"]}
    data.results["system"] = data.results["system"].map(long)
    data.per_query["system"] = data.per_query["system"].map(long)
    comparisons = compare_to_baseline(data.results, data.per_query, data.spec)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        figure = plots.effect_intervals(data, comparisons, "d", "ndcg@10", tmp_path)
    fig = drawn[figure.png.stem]
    ax = fig.axes[0]
    assert ax.get_position().width > 0.2  # the data area keeps a fifth of the figure's width
    assert fig.legends and not ax.get_legend()  # the legend is the figure's, laid out outside the axes
