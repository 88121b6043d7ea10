"""TREC qrels are read in one place (``store.run_files.read_qrels_lines``): the in-memory API's
``read_qrels`` and a user's TREC folder give the same judgements and the same one-line errors, each naming
the file and the line (and, for a pair judged twice with two grades, both lines)."""

from __future__ import annotations

from pathlib import Path

import pytest

import zerda_eval as ze
from zerda_eval.datasets import load_collection
from zerda_eval.errors import DataFormatError

CORPUS = "d1\tfirst doc\nd2\tsecond doc\nd3\tthird doc\n"
QUERIES = "q1\tfirst query\nq2\tsecond query\n"


def folder_with(tmp_path: Path, qrels: str | bytes) -> Path:
    """A user's TREC folder (corpus.tsv, queries.tsv, qrels) whose qrels file holds ``qrels``."""
    (tmp_path / "corpus.tsv").write_text(CORPUS, encoding="utf-8")
    (tmp_path / "queries.tsv").write_text(QUERIES, encoding="utf-8")
    path = tmp_path / "qrels"
    path.write_bytes(qrels if isinstance(qrels, bytes) else qrels.encode("utf-8"))
    return path


def both_errors(tmp_path: Path, qrels: str | bytes) -> tuple[str, str]:
    path = folder_with(tmp_path, qrels)
    with pytest.raises(DataFormatError) as in_memory:
        ze.read_qrels(path)
    with pytest.raises(DataFormatError) as in_folder:
        load_collection("mine", path=tmp_path, format="trec")
    return str(in_memory.value), str(in_folder.value)


def test_both_readers_give_the_same_judgements(tmp_path):
    # a BOM, CRLF line ends, blank lines, a pair judged twice with one grade (kept once), a negative grade
    path = folder_with(tmp_path, "\ufeffq1 0 d1 2\r\n\nq1 0 d2 0\r\nq2 Q0 d3 -1\nq1 0 d1 2\n")
    expected = {"q1": {"d1": 2, "d2": 0}, "q2": {"d3": -1}}
    assert ze.read_qrels(path) == expected
    assert load_collection("mine", path=tmp_path, format="trec").qrels == expected


@pytest.mark.parametrize(
    ("qrels", "message"),
    [
        ("q1 0 d1 1\nq1 0 d2\n", ":2: expected 'qid iter docid grade' (4 columns, integer grade), got 'q1 0 d2'"),
        ("q1 0 d1 high\n", ":1: expected 'qid iter docid grade' (4 columns, integer grade), got 'q1 0 d1 high'"),
        (
            "q1 0 d1 1\nq1 0 d2 0\n\nq1 0 d1 2\n",
            ":4: query 'q1' and doc 'd1' are judged 2 here and 1 on line 1; keep one judgement per pair",
        ),
        ("q1 0 d1 1\nq1 0 d\xe9 1\n".encode("latin-1"), ":2: not UTF-8 text (invalid continuation byte at byte 6)"),
    ],
)
def test_both_readers_name_the_file_and_line_alike(tmp_path, qrels, message):
    in_memory, in_folder = both_errors(tmp_path, qrels)
    assert in_memory == in_folder
    assert in_memory.startswith(f"{tmp_path / 'qrels'}{message}") and "\n" not in in_memory
