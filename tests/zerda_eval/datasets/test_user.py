"""A user's own collection: BEIR folder and TREC files from tmp_path fixtures, and their errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from zerda_eval.datasets import load_collection
from zerda_eval.errors import ConfigError, DataFormatError, DatasetError


def _write(path: Path, text: str | bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text if isinstance(text, bytes) else text.encode("utf-8"))
    return path


def _jsonl(rows: list[dict]) -> str:
    return "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)


@pytest.fixture
def beir_folder(tmp_path: Path) -> Path:
    docs = [
        {"_id": "d1", "title": "Cats", "text": "cats purr"},
        {"_id": "d2", "title": "", "text": "القطط تموء"},
    ]
    docs.append({"_id": "q1", "text": "a document whose id equals a query id"})
    _write(tmp_path / "corpus.jsonl", _jsonl(docs))
    _write(
        tmp_path / "queries.jsonl",
        _jsonl([{"_id": "q1", "text": "purring"}, {"_id": "q2", "text": "unjudged"}]),
    )
    _write(tmp_path / "qrels" / "test.tsv", "query-id\tcorpus-id\tscore\nq1\td1\t2\nq1\td2\t0\n")
    return tmp_path


def test_beir_folder(beir_folder):
    collection = load_collection("my-beir", path=beir_folder, format="beir")
    assert collection.id == "my-beir" and collection.language == "en"
    assert collection.doc_ids == ["d1", "d2", "q1"]
    assert collection.texts[:2] == ["Cats cats purr", "القطط تموء"]
    assert collection.queries == {"q1": "purring"}  # unjudged queries are left out, as trec_eval does
    assert collection.qrels == {"q1": {"d1": 2, "d2": 0}}
    assert collection.options == {
        "path": str(beir_folder),
        "format": "beir",
        "split": "test",
        "ignore_identical_ids": True,
        "normalization": "none",
        "title": True,
    }


def test_trec_files_tsv_and_jsonl(tmp_path):
    _write(tmp_path / "corpus.tsv", "7\tfirst doc\n8\tTitle\tsecond doc\n")
    _write(tmp_path / "queries.tsv", "1\tfirst query\n")
    _write(tmp_path / "qrels.txt", "1 0 8 1\n1 0 7 0\n")
    collection = load_collection("my-trec", path=tmp_path, format="trec", language="ar")
    assert (collection.doc_ids, collection.texts) == (["7", "8"], ["first doc", "Title second doc"])
    assert collection.qrels == {"1": {"8": 1, "7": 0}} and collection.language == "ar"
    assert collection.options["ignore_identical_ids"] is False
    _write(tmp_path / "docs.jsonl", _jsonl([{"_id": "7", "text": "only doc"}, {"_id": "8", "text": "x"}]))
    from_jsonl = load_collection("my-trec-jsonl", path=tmp_path, format="trec", corpus="docs.jsonl")
    assert from_jsonl.texts == ["only doc", "x"]


def test_malformed_qrels_line_names_file_and_line(tmp_path):
    _write(tmp_path / "corpus.tsv", "7\tfirst doc\n")
    _write(tmp_path / "queries.tsv", "1\tfirst query\n")
    qrels = _write(tmp_path / "qrels", "1 0 7 1\n1 7 1\n")
    with pytest.raises(DataFormatError) as error:
        load_collection("bad", path=tmp_path, format="trec")
    message = str(error.value)
    assert "\n" not in message and message.startswith(f"{qrels}:2: expected 'qid iter docid grade'")


def test_qrels_naming_an_unknown_doc(beir_folder):
    _write(beir_folder / "qrels" / "dev.tsv", "q1\td9\t1\n")
    with pytest.raises(DataFormatError, match=r"dev\.tsv:1: doc id 'd9' is not in the doc file"):
        load_collection("unknown-doc", path=beir_folder, split="dev")


def test_duplicate_doc_ids(tmp_path):
    _write(
        tmp_path / "corpus.jsonl",
        _jsonl([{"_id": "a", "text": "x"}, {"_id": "b", "text": "y"}, {"_id": "a", "text": "z"}]),
    )
    _write(tmp_path / "queries.jsonl", _jsonl([{"_id": "q", "text": "x"}]))
    _write(tmp_path / "qrels" / "test.tsv", "q\ta\t1\n")
    with pytest.raises(DataFormatError, match=r"corpus\.jsonl:3: duplicate doc id 'a' \(first on line 1\)"):
        load_collection("dup", path=tmp_path)


def test_non_utf8_file(tmp_path):
    _write(tmp_path / "corpus.tsv", "1\tok\n2\tcaf\xe9\n".encode("latin-1"))
    _write(tmp_path / "queries.tsv", "1\tq\n")
    _write(tmp_path / "qrels", "1 0 1 1\n")
    with pytest.raises(DataFormatError, match=r"corpus\.tsv:2: not UTF-8 text .*re-save the file as UTF-8"):
        load_collection("latin", path=tmp_path, format="trec")


def test_missing_folder_file_and_bad_format(tmp_path):
    with pytest.raises(DatasetError, match=r"folder .*nowhere does not exist"):
        load_collection("gone", path=tmp_path / "nowhere")
    with pytest.raises(DatasetError, match=r"no corpus file \(looked for corpus\.jsonl\)"):
        load_collection("empty", path=tmp_path)
    with pytest.raises(ConfigError, match="format='csv' is invalid"):
        load_collection("csv", path=tmp_path, format="csv")
