"""Quick mode of ``bench_scale.py`` (issue 46's scale benchmark): every stage once on 2,000 passages, 200 queries.

Asserts what the full run prints: fusion equal to ranx's (RRF on the queries without tied input scores, wsum
on all), evaluation equal to pytrec_eval's (trec_eval) on the BM25, dense and fused runs, and the IVF recall
against exact search within [0, 1]. The figures at 1M passages are in ``results.md`` (issue 46).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_scale import main


@pytest.mark.skipif(not Path("/proc/self/clear_refs").exists(), reason="peak RSS per stage is read from Linux's /proc")
def test_scale_benchmark_stages_compute_the_peers_answers() -> None:
    outcome = main(["--passages", "2000", "--queries", "200", "--depth", "100", "--ivf"])
    assert outcome.checks and all(outcome.checks.values()), outcome.checks
    assert set(outcome.checks) == {"fuse rrf", "fuse wsum", "evaluate bm25 0.9/0.4", "evaluate dense", "evaluate rrf"}
    names = [stage.name for stage in outcome.stages]
    assert {"build corpus", "dense exact search", "dense IVF search", "tune rrf ours", "tune wsum ours"} <= set(names)
    assert all(stage.wall_s >= 0 and stage.peak_rss_mb > 0 for stage in outcome.stages)
