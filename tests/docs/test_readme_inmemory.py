"""The guide's "From ranx / from ir_measures" example runs as written, in a temporary folder, and its nDCG@10 is
trec_eval's."""

from __future__ import annotations

import pytrec_eval

from tests.docs.doc_blocks import marked_python


def test_the_readme_inmemory_example_runs(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    namespace: dict = {"__name__": "readme_inmemory"}
    exec(compile(marked_python("readme-inmemory-example"), "docs/guide.md", "exec"), namespace)
    assert (tmp_path / "fused.trec").is_file() and (tmp_path / "qrels.json").is_file()
    assert "| bm25 (baseline) |" in capsys.readouterr().out
    # its nDCG@10 is trec_eval's on the README's run as written (d5 and d8 tie: trec_eval puts d8 first)
    qrels, means = namespace["qrels"], namespace["means"]
    reference = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.10"}).evaluate(namespace["bm25"].to_dict())
    expected = sum(row["ndcg_cut_10"] for row in reference.values()) / 3
    assert abs(means["nDCG@10"] - expected) < 1e-12 and means["ndcg@10"] == means["nDCG@10"]
