"""The per-query explorer's data equals the run directory and the collection: values, top 10s, judgements."""

from __future__ import annotations

import json
import re

from tests.zerda_eval.report.conftest import quranqa_dev
from zerda_eval.report import write_report
from zerda_eval.report.explorer import EXPLORER_TOP, explorer_block
from zerda_eval.report.tables import load_run_dir
from zerda_eval.store.run_dir import read_cell_run


def test_the_explorer_holds_each_cells_values_rankings_and_the_judgements(run_dir, shared_dir):
    data = load_run_dir(run_dir)
    block = explorer_block(data)
    (dataset,) = block.payload["datasets"]  # toy-en is no loadable collection: left out, and said so
    assert dataset["name"] == "quranqa23/taskA/dev"
    assert any(note.startswith("toy-en: left out") for note in block.notes)
    _, queries, qrels = quranqa_dev(shared_dir)  # read straight from the shared files
    rows = data.results[data.results["dataset"] == dataset["name"]]
    assert dataset["labels"] == list(rows["system"]) and dataset["labels"][dataset["baseline"]] == "bm25"
    assert dataset["texts"] == [queries[qid] for qid in dataset["queries"]]
    for s, cell in enumerate(rows["cell_id"]):
        own = data.per_query[(data.per_query["cell_id"] == cell) & (data.per_query["measure"] == "ndcg@10")]
        expected = dict(zip(own["query_id"], own["value"], strict=True))
        got = dict(zip(dataset["queries"], dataset["values"]["ndcg@10"][s], strict=True))
        assert got == {q: round(v, 6) for q, v in expected.items()}
        run = read_cell_run(run_dir, cell)
        for q, qid in enumerate(dataset["queries"]):
            shown = [dataset["docs"][d] for d in dataset["top"][s][q]]
            assert shown == [doc for doc, _ in run.get(qid, [])[:EXPLORER_TOP]]
            for doc in dataset["top"][s][q]:
                assert dataset["grades"][q].get(str(doc)) == qrels.get(qid, {}).get(dataset["docs"][doc])


def test_report_html_loads_the_explorer_data_from_its_file_and_markdown_points_to_it(run_dir, tmp_path):
    report = write_report(run_dir, tmp_path / "report")
    page = (tmp_path / "report" / "report.html").read_text(encoding="utf-8")
    assert '<script src="explorer-data.js"></script>' in page and 'src="http' not in page
    script = (tmp_path / "report" / "explorer-data.js").read_text(encoding="utf-8")
    found = re.fullmatch(r"window\.zerdaExplorerData = (.*);\n", script, re.S)
    assert found and json.loads(found.group(1)) == explorer_block(load_run_dir(run_dir)).payload
    assert "## Per-query explorer" in report.read_text(encoding="utf-8")
