"""At 50+ cells the quality-latency legend stays readable: one entry per grid entry (family of cells),
at most MAX_LEGEND_GROUPS of them, each with its own colour and marker; the rest are grey and named
in the caption."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from zerda_eval.analysis.settings import AnalysisSettings
from zerda_eval.report import plots
from zerda_eval.report.tables import RunData


def many_cells() -> RunData:
    rows = []
    for family in range(18):  # 18 grid entries, 3 cells each: 54 cells
        for point in range(3):
            label = f"sys{family:02d}[k={point}]"
            ndcg = 0.2 + 0.03 * family + 0.001 * point  # sys17 best, sys00 worst
            rows.append(
                {
                    "dataset": "d",
                    "system": label,
                    "cell_id": label,
                    "ndcg@10": ndcg,
                    "latency_mean_ms": 1 + family + point,
                }
            )
    results = pd.DataFrame(rows)
    per_query = pd.DataFrame(columns=["cell_id", "measure", "query_id", "value"])
    return RunData(Path("."), "many", {}, None, results, per_query, AnalysisSettings(), ["ndcg@10"])


def test_the_pareto_legend_groups_caps_and_lists_the_rest(tmp_path, monkeypatch):
    captured = {}
    real_save = plots._save

    def keep(fig, out_dir, name, caption):
        legend = fig.axes[0].get_legend()
        captured["texts"] = [t.get_text() for t in legend.get_texts()]
        captured["styles"] = [
            (
                tuple(h.get_facecolor()[0]) if hasattr(h, "get_facecolor") else None,
                getattr(h, "get_paths", None) and h.get_paths()[0].vertices.tobytes(),
            )
            for h in legend.legend_handles
        ]
        return real_save(fig, out_dir, name, caption)

    monkeypatch.setattr(plots, "_save", keep)
    figure = plots.quality_latency(many_cells(), "d", "ndcg@10", tmp_path)
    texts = captured["texts"]
    assert len(texts) <= plots.MAX_LEGEND_GROUPS + 2  # groups, "others", the Pareto front
    shown = texts[: plots.MAX_LEGEND_GROUPS - 1]
    assert shown[0] == "sys17 (3 cells)" and all(t.endswith("(3 cells)") for t in shown)  # best entries first
    assert any(t.startswith("other systems (") for t in texts) and "Pareto front" in texts
    styles = [s for s, t in zip(captured["styles"], texts, strict=True) if t.endswith("(3 cells)")]
    assert len(set(styles)) == len(styles)  # no colour and marker pair drawn twice
    assert "sys00" in figure.caption and "sys17" not in figure.caption.split("Grey")[-1]
