"""End to end: a tiny real experiment through ``zerda-eval run``, then ``zerda-eval report``."""

from __future__ import annotations

import textwrap

import pytest

from zerda_eval import cli

EXPERIMENT = """
[experiment]
name = "tiny_rrf"
output_dir = "{out}/runs/tiny_rrf"
cache_dir = "{out}/cache"
depth = 20
measures = ["ndcg@10", "mrr@10"]

[[datasets]]
id = "quranqa23/taskA/dev"
max_queries = 10

[[systems]]
name = "bm25"
family = "zerda.keyword"

[[systems]]
name = "hybrid"
family = "zerda.hybrid"
params = {{ embedder = "lsa", dim = 64 }}
grid = {{ rrf_order = ["as_documented", "fixed"] }}

[compare]
baseline = "bm25"

[study.rrf_order]
system = "hybrid"
"""


@pytest.mark.slow
def test_run_then_report(tmp_path, monkeypatch, shared_dir):
    config = tmp_path / "tiny_rrf.toml"
    config.write_text(textwrap.dedent(EXPERIMENT.format(out=tmp_path.as_posix())), encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    assert cli.main(["run", str(config)]) == 0
    run_dir = tmp_path / "runs" / "tiny_rrf"
    assert (run_dir / "results.parquet").exists()
    assert cli.main(["report", str(run_dir)]) == 0
    report = tmp_path / "reports" / "tiny_rrf" / "report.md"
    text = report.read_text(encoding="utf-8")
    assert "RRF-ordering study" in text and "Over 1 dataset(s) and 1 paired setting(s)" in text
    assert (report.parent / "plots" / "rrf_order_delta.png").stat().st_size > 10_000
