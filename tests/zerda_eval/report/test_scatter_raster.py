"""A per-query scatter of many queries: each panel's dots are one image inside the SVG (the 7,000-query scatter of
``benchmarks/bench_report_scale.py`` is 5.5 MB as vectors, 0.47 MB so), the PNG is the same bytes either way, and
a scatter of few dots stays vector."""

from __future__ import annotations

import re

from zerda_eval.report import plots
from zerda_eval.report.tables import load_run_dir

DATASET, MEASURE = "quranqa23/taskA/dev", "ndcg@10"


def test_many_dots_are_an_image_in_the_svg_and_the_png_does_not_change(run_dir, tmp_path, monkeypatch):
    data = load_run_dir(run_dir)
    vector = plots.per_query_scatter(data, DATASET, MEASURE, tmp_path / "vector")
    monkeypatch.setattr(plots, "RASTER_DOTS", 1)  # every panel of this run counts as "many dots"
    raster = plots.per_query_scatter(data, DATASET, MEASURE, tmp_path / "raster")
    assert raster.png.read_bytes() == vector.png.read_bytes()
    vector_svg, raster_svg = vector.svg.read_text(encoding="utf-8"), raster.svg.read_text(encoding="utf-8")
    panels = len(re.findall(r'<g id="axes_\d+">', vector_svg))
    assert panels > 3 and "<image" not in vector_svg
    assert len(re.findall(r"<image ", raster_svg)) == panels  # one image of dots per panel
    assert (
        len(re.findall(r'<g id="PathCollection_\d+">', raster_svg))
        == 0
        < len(re.findall(r'<g id="PathCollection_\d+">', vector_svg))
    )
    again = plots.per_query_scatter(data, DATASET, MEASURE, tmp_path / "again")
    assert again.svg.read_bytes() == raster.svg.read_bytes()  # still the same bytes for the same numbers
