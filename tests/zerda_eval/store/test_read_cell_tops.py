"""``read_cell_tops`` (columnar, for the report) equals the prefix of ``read_cell_run`` (line by line)."""

from __future__ import annotations

import gzip

import pytest

from zerda_eval.errors import DataFormatError
from zerda_eval.store.run_dir import RUN_FILE, cell_dir, read_cell_run, read_cell_tops


def write_run(root, lines: list[str]) -> str:
    folder = cell_dir(root, "c1")
    folder.mkdir(parents=True)
    text = "".join(line + "\n" for line in lines).encode("utf-8")
    (folder / RUN_FILE).write_bytes(gzip.compress(text, mtime=0))  # as a cell stores it
    return "c1"


@pytest.mark.parametrize("k", [1, 2, 3, 10])
def test_the_first_k_of_each_query_in_file_order_as_the_line_reader_reads_them(tmp_path, k):
    # queries interleaved, a doc id with a quote and one with '#', a blank line, scores out of order
    lines = [
        "q2 Q0 d9 1 3.5 t",
        'q1 Q0 "quoted 1 2.0 t',
        "q2 Q0 d#1 2 3.5 t",
        "",
        "q1 Q0 d3 2 9.0 t",
        "q10 Q0 d1 1 1 t",
        "q2 Q0 d2 3 0.5 t",
        "q1 Q0 d4 3 1e-3 t",
        "q2 Q0 d7 4 -1 t",
    ]
    cell = write_run(tmp_path, lines)
    expected = {qid: [doc for doc, _ in ranking[:k]] for qid, ranking in read_cell_run(tmp_path, cell).items()}
    assert read_cell_tops(tmp_path, cell, k) == expected
    assert list(read_cell_tops(tmp_path, cell, k)) == ["q2", "q1", "q10"]  # first appearance, as read_trec


def test_a_malformed_or_missing_run_file_is_one_line_naming_it(tmp_path):
    cell = write_run(tmp_path, ["q1 Q0 d1 1 2.0 t", "q1 Q0 d2 2.0 t"])
    with pytest.raises(DataFormatError, match=r"c1/run\.trec\.gz:2: expected 'qid Q0 docid rank score tag'") as raised:
        read_cell_tops(tmp_path, cell, 10)
    assert "\n" not in str(raised.value)
    with pytest.raises(DataFormatError, match=r"c2/run\.trec\.gz: run file not found"):
        read_cell_tops(tmp_path, "c2", 10)


@pytest.mark.parametrize("lines", [[], [""], ["", ""]])
def test_a_run_that_returned_nothing_has_no_tops(tmp_path, lines):
    cell = write_run(tmp_path, lines)
    assert read_cell_run(tmp_path, cell) == {}
    assert read_cell_tops(tmp_path, cell, 10) == {}
