"""The per-query explorer's data equals the run directory and the collection: values, top 10s, judgements,
whichever of its paged files holds them; the files a report writes are exactly the explorer's."""

from __future__ import annotations

import json
import re
from pathlib import Path

from tests.zerda_eval.report.conftest import quranqa_dev
from zerda_eval.report import explorer, write_report
from zerda_eval.report.explorer import (
    EXPLORER_TOP,
    explorer_block,
    explorer_files,
    queries_file,
    values_file,
    write_explorer,
)
from zerda_eval.report.tables import load_run_dir
from zerda_eval.store.run_dir import read_cell_run

CHUNK = 5  # queries per file in these tests: the 21 judged dev questions span five files, the last one short


def read_script(path: Path, pattern: str) -> object:
    found = re.fullmatch(pattern, path.read_text(encoding="utf-8"), re.S)
    assert found, path
    return json.loads(found.group(1))


def test_the_explorer_holds_each_cells_values_rankings_and_the_judgements(run_dir, shared_dir, monkeypatch):
    monkeypatch.setattr(explorer, "CHUNK_QUERIES", CHUNK)
    data = load_run_dir(run_dir)
    block = explorer_block(data)
    (dataset,) = block.payload["datasets"]  # toy-en is no loadable collection: left out, and said so
    assert dataset["name"] == "quranqa23/taskA/dev" and block.payload["chunk"] == CHUNK
    assert any(note.startswith("toy-en: left out") for note in block.notes)
    _, queries, qrels = quranqa_dev(shared_dir)  # read straight from the shared files
    rows = data.results[data.results["dataset"] == dataset["name"]]
    assert dataset["labels"] == list(rows["system"]) and dataset["labels"][dataset["baseline"]] == "bm25"
    assert sorted(dataset["queries"]) == sorted(queries) and len(queries) > 3 * CHUNK
    assert dataset["texts"] == [queries[qid] for qid in dataset["queries"]]
    files = len(dataset["measures"]) + -(-len(queries) // CHUNK)
    assert len(block.chunks) == files  # one per measure, one per CHUNK queries: nothing else
    for m, measure in enumerate(dataset["measures"]):
        values = block.chunks[values_file(0, m)]
        for s, cell in enumerate(rows["cell_id"]):
            own = data.per_query[(data.per_query["cell_id"] == cell) & (data.per_query["measure"] == measure)]
            expected = {q: round(v, 6) for q, v in zip(own["query_id"], own["value"], strict=True)}
            assert dict(zip(dataset["queries"], values[s], strict=True)) == expected
    for s, cell in enumerate(rows["cell_id"]):
        run = read_cell_run(run_dir, cell)
        for q, qid in enumerate(dataset["queries"]):
            chunk = block.chunks[queries_file(0, q // CHUNK)]
            shown = chunk["top"][s][q % CHUNK]
            assert shown == [doc for doc, _ in run.get(qid, [])[:EXPLORER_TOP]]
            for doc in shown:
                assert chunk["grades"][q % CHUNK].get(doc) == qrels.get(qid, {}).get(doc)
    graded = [g for name, c in block.chunks.items() if "queries" in name for g in c["grades"]]
    assert sum(map(len, graded)) > 0  # the judgements are tested on documents that have some


def test_report_html_loads_the_explorer_index_and_its_pages_are_files_beside_it(run_dir, tmp_path, monkeypatch):
    monkeypatch.setattr(explorer, "CHUNK_QUERIES", CHUNK)
    report = write_report(run_dir, tmp_path / "report")
    folder = tmp_path / "report"
    page = (folder / "report.html").read_text(encoding="utf-8")
    assert '<script src="explorer-data.js"></script>' in page and 'src="http' not in page
    block = explorer_block(load_run_dir(run_dir))
    assert read_script(folder / "explorer-data.js", r"window\.zerdaExplorerData = (.*);\n") == block.payload
    written = {str(path.relative_to(folder)) for path in explorer_files(folder)}
    assert written == {"explorer-data.js", *(f"explorer/{name}.js" for name in block.chunks)}
    for name, value in block.chunks.items():
        call = rf'window\.zerdaExplorerChunk\("{re.escape(name)}", (.*)\);\n'
        assert read_script(folder / "explorer" / f"{name}.js", call) == value
    assert "## Per-query explorer" in report.read_text(encoding="utf-8")


def test_rewritten_explorer_files_drop_those_it_no_longer_has(run_dir, tmp_path, monkeypatch):
    folder, data = tmp_path / "report", load_run_dir(run_dir)
    (folder / "explorer").mkdir(parents=True)
    (folder / "explorer" / "d3-values-0.js").write_text("window.zerdaExplorerChunk('old', 1);\n")  # an old report's
    monkeypatch.setattr(explorer, "CHUNK_QUERIES", 3)  # 7 files of rankings
    write_explorer(folder, explorer_block(data))
    many = {path.name for path in explorer_files(folder)}
    monkeypatch.setattr(explorer, "CHUNK_QUERIES", 12)  # 2: the other 5 must go
    block = explorer_block(data)
    write_explorer(folder, block)
    few = {path.name for path in explorer_files(folder)}
    assert {name for name in many if "queries" in name} == {f"{queries_file(0, c)}.js" for c in range(7)}
    assert few == {"explorer-data.js", *(f"{name}.js" for name in block.chunks)}
    assert {name for name in few if "queries" in name} == {f"{queries_file(0, c)}.js" for c in range(2)}
    assert {p.name for p in (folder / "explorer").iterdir()} == few - {"explorer-data.js"}
    write_explorer(folder, None)  # a report without an explorer keeps none of its files
    assert explorer_files(folder) == []
