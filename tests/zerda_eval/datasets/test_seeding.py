"""Seeding ir_datasets' cache from the shared files: from scratch, atomically, never overwriting."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import ir_datasets

from zerda_eval.datasets.paths import ir_datasets_home
from zerda_eval.datasets.seeding import seed_cache

REPO = Path(__file__).resolve().parents[3]


def test_seeded_files_are_the_originals(tmp_path, shared):
    assert seed_cache("beir/scifact/test", home=tmp_path) and seed_cache("cranfield", home=tmp_path)
    with zipfile.ZipFile(tmp_path / "beir" / "scifact" / "source.zip") as archive:
        names = sorted(archive.namelist())
        assert archive.read("scifact/qrels/test.tsv") == (shared / "beir-scifact/qrels/test.tsv").read_bytes()
    assert names == [
        "scifact/corpus.jsonl",
        "scifact/qrels/test.tsv",
        "scifact/qrels/train.tsv",
        "scifact/queries.jsonl",
    ]
    for cached, original in (
        ("docs.txt", "cran.all.1400"),
        ("queries.txt", "cran.qry"),
        ("qrels.txt", "cranqrel"),
    ):
        assert (tmp_path / "cranfield" / cached).read_bytes() == (shared / "cranfield" / original).read_bytes()
    assert not list(tmp_path.rglob("*.tmp"))


def test_vaswani_is_written_in_the_glasgow_layout(tmp_path):
    seed_cache("vaswani", home=tmp_path)
    docs = (tmp_path / "vaswani" / "docs.txt").read_text()
    assert docs.startswith("1\ncompact memories have flexible capacities")
    assert docs.count("\n   /\n") == 11429
    qrels = (tmp_path / "vaswani" / "qrels.txt").read_text().split("   /\n")
    assert qrels[0].split("\n")[0] == "1" and qrels[0].split()[1] == "1239"


def test_a_folder_seeded_from_other_files_is_reseeded_whole(tmp_path, shared):
    """A file ir_datasets reads that is not what the bundled source gives is replaced, with its derivatives."""
    mine = tmp_path / "cranfield" / "qrels.txt"
    derived = tmp_path / "cranfield" / "docs.pklz4" / "bin"
    derived.parent.mkdir(parents=True)
    mine.write_text("1 184 2\n")
    derived.write_bytes(b"a docstore built from other files")
    seed_cache("cranfield", home=tmp_path)
    assert mine.read_bytes() == (shared / "cranfield" / "cranqrel").read_bytes()
    assert not derived.exists() and (tmp_path / "cranfield" / "docs.txt").exists()
    assert not seed_cache("xquad/ar", home=tmp_path) and not seed_cache("beir/nfcorpus", home=tmp_path)


def test_an_edited_source_file_reseeds_and_an_unchanged_one_does_not(tmp_path, shared, monkeypatch):
    data = tmp_path / "data"
    shutil.copytree(shared / "cranfield", data / "cranfield")
    monkeypatch.setenv("ZERDA_EVAL_DATA", str(data))
    home = tmp_path / "home"
    seed_cache("cranfield", home=home)
    seeded = home / "cranfield" / "qrels.txt"
    derived = home / "cranfield" / "docs.pklz4"
    derived.mkdir()
    inode = seeded.stat().st_ino
    seed_cache("cranfield", home=home)
    assert seeded.stat().st_ino == inode and derived.exists()  # same sources: nothing rewritten
    (data / "cranfield" / "cranqrel").write_text("1 184 2\n", encoding="utf-8")
    seed_cache("cranfield", home=home)
    assert seeded.read_text() == "1 184 2\n" and not derived.exists()


def test_seeded_files_follow_the_umask(tmp_path):
    import stat

    old = os.umask(0o022)
    try:
        seed_cache("cranfield", home=tmp_path)
    finally:
        os.umask(old)
    for path in (tmp_path / "cranfield").iterdir():
        assert stat.S_IMODE(path.stat().st_mode) == 0o644, path


def test_home_is_the_folder_ir_datasets_reads(monkeypatch, tmp_path):
    expected = Path(ir_datasets.registry["vaswani"].docs_handler().docs_path(force=False)).parents[1]
    monkeypatch.setenv("IR_DATASETS_HOME", str(tmp_path))  # after import: ir_datasets keeps its folder
    assert ir_datasets_home() == expected


def test_every_bundled_id_loads_through_ir_datasets_from_an_empty_cache(tmp_path):
    """A fresh process, empty IR_DATASETS_HOME: seeded at first use, then read by ir_datasets itself."""
    script = """
import json, ir_datasets, zerda_eval.datasets as zd
counts = {}
for dataset_id in zd.BUNDLED_IDS:
    zd.load_collection(dataset_id)
    ds = ir_datasets.load(dataset_id)
    counts[dataset_id] = [sum(1 for _ in ds.docs_iter()), len(list(ds.qrels_iter()))]
print(json.dumps(counts))
"""
    env = {**os.environ, "IR_DATASETS_HOME": str(tmp_path / "home")}
    done = subprocess.run([sys.executable, "-c", script], env=env, cwd=REPO, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    counts = json.loads(done.stdout.strip().splitlines()[-1])
    assert counts["beir/scifact/test"] == [5183, 339] and counts["cranfield"] == [1400, 1837]
    assert counts["vaswani"] == [11429, 2083] and counts["quranqa23/taskA/train+dev"] == [1266, 1132]
    assert (tmp_path / "home" / "beir" / "scifact" / "source.zip").is_file()
    assert not list(REPO.rglob("source.zip"))
