"""The quickstart grid end to end: wall time and peak RSS of `zerda-eval run experiments/quickstart.toml`.

Three runs in fresh subprocesses in one empty working directory: the first as on a new machine (no
run, report or stored corpus vectors: every corpus is encoded by its neural model), then a warm rerun
with the run directory removed (every cell recomputed, corpus vectors read from the store, kernels
compiled, ir_datasets cache seeded), then a fully cached rerun (nothing recomputed). Issue 20's targets:
the first command under 10 minutes on 2 cores including the install (timed here without it), a warm
rerun under 30 s. Peak RSS is the children's `ru_maxrss`. Nothing is asserted: the figures are printed
and kept in pytest-benchmark's JSON.
"""

from __future__ import annotations

import os
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _run_quickstart(workdir: Path, *extra: str) -> tuple[float, float]:
    """(wall seconds, peak RSS MB) of one quickstart run in ``workdir``."""
    shutil.copy(REPO / "experiments" / "quickstart.toml", workdir / "quickstart.toml")
    env = {**os.environ, "ZERDA_EVAL_DATA": str(REPO.parent / "shared" / "datasets")}
    start = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "zerda_eval", "run", "quickstart.toml", *extra],
        cwd=workdir,
        env=env,
        check=True,
        capture_output=True,
    )
    wall = time.perf_counter() - start
    return wall, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024.0


def test_quickstart_end_to_end(benchmark, tmp_path):
    benchmark.group = "quickstart end to end"
    first_wall, first_rss = _run_quickstart(tmp_path)
    shutil.rmtree(tmp_path / "runs")
    warm = benchmark.pedantic(_run_quickstart, args=(tmp_path,), rounds=1, iterations=1)
    cached, _ = _run_quickstart(tmp_path)
    benchmark.extra_info.update(
        first_run_s=round(first_wall, 1),
        first_peak_rss_mb=round(first_rss),
        warm_s=round(warm[0], 1),
        cached_s=round(cached, 1),
    )
    print(
        f"\nquickstart: first run {first_wall:.1f} s (target with the install < 600 s), peak RSS {first_rss:.0f} MB; "
        f"warm rerun (cells recomputed, vectors stored) {warm[0]:.1f} s (target < 30 s); fully cached {cached:.1f} s"
    )
