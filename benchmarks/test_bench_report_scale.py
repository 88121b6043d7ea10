"""``bench_report_scale.py`` as a benchmark: the report of a grid of MS MARCO dev's shape (7,000 queries x 10 cells;
quick mode, ``ZERDA_BENCH_QUICK=1``: 300 queries over 5,000 passages), built by ``zerda-eval report`` in its own
process and opened over file:// in headless Chromium.

Asserts what the report must hold at any size: report.html at most 2 MB, the explorer's index (query ids and
texts) and one file per measure and per 100 queries, every query of the run in the index, the page showing its
first rows. Prints the build's wall time and peak RSS, the page's open time and the load average (in
``results.md`` and ``docs/SCALE.md`` for the full size).
"""

from __future__ import annotations

import json
import math
import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_report_scale import MEASURES, main

from benchmarks.conftest import QUICK
from tests.conftest import CHROMIUM
from zerda_eval.report.explorer import CHUNK_QUERIES

PASSAGES, QUERIES = (5_000, 300) if QUICK else (50_000, 7_000)
HTML_LIMIT = 2 * 1024 * 1024


@pytest.mark.skipif(CHROMIUM is None, reason="no chromium binary (Debian: apt-get install -y chromium)")
def test_the_report_of_a_7000_query_grid_stays_light(tmp_path: Path) -> None:
    argv = ["--passages", str(PASSAGES), "--queries", str(QUERIES), "--depth", "100", "--chromium", CHROMIUM]
    outcome = main([*argv, "--folder", str(tmp_path)])
    assert outcome.cells == 10 and outcome.html_bytes <= HTML_LIMIT
    assert outcome.explorer_files == 1 + len(MEASURES) + math.ceil(QUERIES / CHUNK_QUERIES)
    index = (tmp_path / "report" / "explorer-data.js").read_text(encoding="utf-8")
    payload = json.loads(index.split(" = ", 1)[1].rstrip().rstrip(";"))
    (dataset,) = payload["datasets"]
    assert len(dataset["queries"]) == QUERIES == len(set(dataset["queries"])) == len(dataset["texts"])
    assert outcome.open_s > 0 and outcome.report_s > 0 and outcome.report_peak_rss_mb > 0
    print(
        f"\nreport of {QUERIES:,} queries x {outcome.cells} cells: built in {outcome.report_s:.1f} s "
        f"(peak RSS {outcome.report_peak_rss_mb:,.0f} MB), report.html {outcome.html_bytes / 1e6:.2f} MB, "
        f"explorer {outcome.explorer_bytes / 1e6:.1f} MB in {outcome.explorer_files} files, opened in "
        f"{outcome.open_s:.2f} s; load average {os.getloadavg()}"
    )
