"""Content fingerprints of datasets: the SHA-256 of exactly the files each dataset is read from."""

from __future__ import annotations

import hashlib

from zerda_eval.datasets.fingerprint import content_fingerprint


def sha256(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_a_bundled_id_hashes_the_files_it_reads(shared):
    test = content_fingerprint("beir/scifact/test", {})
    train = content_fingerprint("beir/scifact/train", {})
    assert test == {
        name: sha256(shared / "beir-scifact" / name) for name in ("corpus.jsonl", "queries.jsonl", "qrels/test.tsv")
    }
    assert {k: v for k, v in train.items() if k != "qrels/train.tsv"} == {
        k: v for k, v in test.items() if k != "qrels/test.tsv"
    }
    dev = content_fingerprint("quranqa23/taskA/dev", {})
    assert set(dev) == {"QQA23_TaskA_QPC_v1.1.tsv", "QQA23_TaskA_dev.tsv", "QQA23_TaskA_qrels_dev.gold"}
    assert content_fingerprint("miracl/ar/dev", {}) == {}  # any other id: its id and ir_datasets' version


def test_a_user_folder_hashes_its_three_files_wherever_they_are(tmp_path):
    folder = tmp_path / "mine"
    (folder / "qrels").mkdir(parents=True)
    (folder / "corpus.jsonl").write_text('{"_id": "d1", "text": "x"}\n', encoding="utf-8")
    (folder / "queries.jsonl").write_text('{"_id": "q1", "text": "x"}\n', encoding="utf-8")
    (folder / "qrels" / "test.tsv").write_text("q1\td1\t1\n", encoding="utf-8")
    (folder / "README").write_text("not read", encoding="utf-8")
    outside = tmp_path / "other-queries.jsonl"
    outside.write_text('{"_id": "q1", "text": "y"}\n', encoding="utf-8")
    plain = content_fingerprint("mine", {"path": str(folder)})
    assert plain == {
        "corpus": sha256(folder / "corpus.jsonl"),
        "queries": sha256(folder / "queries.jsonl"),
        "qrels": sha256(folder / "qrels" / "test.tsv"),
    }
    moved = content_fingerprint("mine", {"path": str(folder), "queries": str(outside)})
    assert moved == {**plain, "queries": sha256(outside)}
