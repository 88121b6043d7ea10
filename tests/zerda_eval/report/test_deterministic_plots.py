"""A plot drawn twice is the same bytes: a fixed SVG hash salt (clip-path ids) and no date in the metadata,
so regenerating a committed report changes no file whose numbers did not change."""

from __future__ import annotations

import matplotlib.pyplot as plt

from zerda_eval.report.plots import _save


def draw(out_dir, name):
    fig, ax = plt.subplots(figsize=(4, 3))
    ax.plot([1, 2, 3], [0.2, 0.5, 0.4], marker="o", label="bm25")
    ax.bar([1, 2], [0.3, 0.6], label="dense")  # bars and a legend: clip paths with generated ids
    ax.legend()
    return _save(fig, out_dir, name, "caption")


def test_the_same_plot_twice_is_byte_identical_and_undated(tmp_path):
    first, second = draw(tmp_path / "a", "p"), draw(tmp_path / "b", "p")
    svg = first.svg.read_text(encoding="utf-8")
    assert "<dc:date>" not in svg and "clip-path" in svg
    assert first.svg.read_bytes() == second.svg.read_bytes()
    assert first.png.read_bytes() == second.png.read_bytes()
