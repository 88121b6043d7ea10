"""The in-memory API on columnar runs beside ranx: read, evaluate, compare, fuse, optimize_fusion.

``bench_columnar.run_all`` runs each (side, stage) in its own process and asserts both sides give the same
answer; this prints its table. Quick mode (``ZERDA_BENCH_QUICK=1``, ``.ci/run``): 200 queries x 100 deep,
the answers checked in a few minutes; otherwise issue 46's 5,000 x 1,000 (about 15 minutes on 2 loaded cores).
"""

from __future__ import annotations

from benchmarks.bench_columnar import STAGES, run_all, table
from benchmarks.conftest import QUICK

QUERIES, DEPTH = (200, 100) if QUICK else (5_000, 1_000)


def test_in_memory_api_beside_ranx(tmp_path):
    rows = run_all(tmp_path, QUERIES, DEPTH)  # asserts the same answers, stage by stage
    print(f"\n{QUERIES:,} queries x {DEPTH:,}\n{table(rows)}")
    assert [row["stage"] for row in rows] == list(STAGES)
