"""A cell's run is stored as ``run.trec.gz``: the TREC text written line by line as before, gzipped in chunks,
the same bytes every time; every TREC reader takes a gzip file as its text, and a damaged one is never read.

References: the TREC lines written out by hand below, Python's ``gzip`` module and the real ``gzip`` binary.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import subprocess

import numpy as np
import pytest

import zerda_eval as ze
from zerda_eval.columnar import from_run
from zerda_eval.errors import DataFormatError
from zerda_eval.hashing import content_hash
from zerda_eval.ranking import order_run
from zerda_eval.store import run_dir, run_files
from zerda_eval.store.run_dir import (
    CHECKSUM_KEY,
    PER_QUERY_FILE,
    RESULT_FILE,
    RUN_FILE,
    cell_dir,
    format_trec,
    read_cell_columns,
    read_cell_run,
    read_cell_tops,
    read_trec,
    trec_lines,
    trec_table,
    verified_result,
    write_cell,
    write_trec_gz,
)

# ties (d2 / d1 at 3.0: doc id descending first), non-ASCII ids, and scores whose repr is not a plain decimal
RUN = {
    "q1": [("é-doc", 1e16), ("d2", 3.0), ("d1", 3.0), ("z", 1e-05), ("a", -0.0), ("y", -2.5)],
    "ق2": [("وثيقة", 0.1 + 0.2), ("d1", 7.0)],
    "q3": [("😀", 1.5)],
}
HAND = """q1 Q0 é-doc 1 1e+16 t
q1 Q0 d2 2 3.0 t
q1 Q0 d1 3 3.0 t
q1 Q0 z 4 1e-05 t
q1 Q0 a 5 -0.0 t
q1 Q0 y 6 -2.5 t
ق2 Q0 d1 1 7.0 t
ق2 Q0 وثيقة 2 0.30000000000000004 t
q3 Q0 😀 1 1.5 t
"""
GZIP_BINARY = "gzip"  # GNU gzip, an essential Debian package: the reference compressor and decoder


def ordered(run: dict) -> dict:
    return order_run(run, None, "test")


def random_run(queries: int, depth: int, seed: int = 0) -> dict:
    """Scores rounded to 2 decimals (many ties) over a small doc vocabulary, some ids non-ASCII."""
    rng = np.random.default_rng(seed)
    vocabulary = [f"doc{i}" for i in range(3 * depth)] + [f"وثيقة{i}" for i in range(depth)]
    run = {}
    for query in range(queries):
        docs = rng.choice(len(vocabulary), size=depth, replace=False).tolist()
        scores = np.round(rng.normal(10, 3, size=depth), 2).tolist()
        run[f"q{query}"] = [(vocabulary[d], s) for d, s in zip(docs, scores, strict=True)]
    return ordered(run)


@pytest.mark.parametrize("columnar", [False, True])
def test_the_gzip_holds_exactly_the_trec_lines_as_written_by_hand(tmp_path, columnar):
    run = ordered(RUN)
    assert format_trec(run, "t") == HAND
    path = tmp_path / "run.trec.gz"
    write_trec_gz(path, from_run(run) if columnar else run, "t")
    assert gzip.decompress(path.read_bytes()).decode("utf-8") == HAND


@pytest.mark.parametrize("chunk_rows", [1, 4, 5, 7, 1000])  # one query over several chunks, queries split at bounds
def test_chunks_of_any_size_give_the_same_text_from_a_dict_and_from_arrays(tmp_path, monkeypatch, chunk_rows):
    run = ordered(RUN)
    monkeypatch.setattr(run_dir, "CHUNK_ROWS", chunk_rows)
    for columnar in (False, True):
        path = tmp_path / f"{columnar}.gz"
        write_trec_gz(path, from_run(run) if columnar else run, "t")
        assert gzip.decompress(path.read_bytes()).decode("utf-8") == HAND


def test_a_larger_run_decompresses_to_format_trec_for_a_dict_and_a_columnar_run(tmp_path):
    run = random_run(60, 300)
    expected = "".join(
        f"{q} Q0 {d} {rank} {s!r} zerda-eval\n" for q, r in run.items() for rank, (d, s) in enumerate(r, 1)
    )
    assert format_trec(run) == expected
    for columnar in (False, True):
        path = tmp_path / f"{columnar}.gz"
        write_trec_gz(path, from_run(run) if columnar else run)
        assert gzip.decompress(path.read_bytes()).decode("utf-8") == expected


def test_the_same_run_gives_the_same_bytes_with_no_name_and_no_time_in_the_header(tmp_path):
    run = random_run(5, 50)
    first, second = tmp_path / "first.gz", tmp_path / "sub" / "second.gz"
    write_trec_gz(first, run)
    write_trec_gz(second, from_run(run))
    data = first.read_bytes()
    assert data == second.read_bytes()
    assert data[:4] == b"\x1f\x8b\x08\x00"  # gzip, deflate, no flags: no file name, no comment, no extra
    assert data[4:8] == b"\x00\x00\x00\x00"  # mtime 0


def test_the_file_is_no_larger_than_gzip_6_and_gzip_reads_it(tmp_path):
    run = random_run(200, 500, seed=3)
    path = tmp_path / "run.trec.gz"
    write_trec_gz(path, from_run(run))
    text = format_trec(run).encode("utf-8")
    reference = subprocess.run([GZIP_BINARY, "-6", "-n", "-c"], input=text, capture_output=True, check=True).stdout
    assert path.stat().st_size <= len(reference)  # issue 46: at most the gzipped TREC file
    assert path.stat().st_size < len(text) / 3
    decoded = subprocess.run([GZIP_BINARY, "-dc", str(path)], capture_output=True, check=True).stdout
    assert decoded == text


def test_every_reader_takes_a_gzipped_run_as_the_plain_file(tmp_path):
    run = random_run(20, 40)
    plain, packed = tmp_path / "run.trec", tmp_path / "run.trec.gz"
    plain.write_text(format_trec(run), encoding="utf-8")
    packed.write_bytes(gzip.compress(plain.read_bytes(), compresslevel=1))  # another writer's gzip
    renamed = tmp_path / "run.txt"  # detected by its magic bytes, not its name
    renamed.write_bytes(packed.read_bytes())
    for path in (packed, renamed):
        assert list(trec_lines(path)) == list(trec_lines(plain))
        assert read_trec(path) == read_trec(plain) == run
        assert trec_table(path).equals(trec_table(plain))
        assert run_files.read_run(path) == run_files.read_run(plain)
        assert run_files.read_run_columns(path).to_dict() == run
        assert ze.read_run(path) == ze.read_run(plain)


def test_a_run_of_several_gzip_members_is_read_whole(tmp_path):
    """``cat a.gz b.gz`` is one gzip file to ``gzip -dc``: every member is read, not the first only."""
    text = format_trec(ordered(RUN), "t").encode("utf-8")
    path = tmp_path / "run.trec.gz"
    path.write_bytes(gzip.compress(text[:50]) + gzip.compress(text[50:]))
    assert read_trec(path) == read_trec(_plain(tmp_path, text))


def _plain(tmp_path, text: bytes):
    path = tmp_path / "plain.trec"
    path.write_bytes(text)
    return path


def truncated(data: bytes) -> bytes:
    return data[: len(data) - 12]


def flipped(data: bytes) -> bytes:
    middle = len(data) // 2
    return data[:middle] + bytes([data[middle] ^ 0xFF]) + data[middle + 1 :]


def bad_crc(data: bytes) -> bytes:
    return data[:-8] + bytes([data[-8] ^ 0x01]) + data[-7:]


@pytest.mark.parametrize("damage", [truncated, flipped, bad_crc])
def test_a_damaged_gzip_user_run_is_one_line_naming_the_file(tmp_path, damage):
    path = tmp_path / "run.trec.gz"
    write_trec_gz(path, random_run(20, 40))
    path.write_bytes(damage(path.read_bytes()))
    assert trec_table(path) is None  # the columnar reader leaves it to the line parser, which says what is wrong
    for read in (read_trec, run_files.read_run, run_files.read_run_columns, ze.read_run):
        with pytest.raises(DataFormatError, match=r"run\.trec\.gz: corrupt or truncated gzip") as caught:
            read(path)
        assert "\n" not in str(caught.value) and str(path) in str(caught.value)


def test_write_run_gzips_a_name_ending_in_gz_and_reads_it_back(tmp_path):
    run = ordered(RUN)
    path = run_files.write_run(run, tmp_path / "mine.trec.gz", tag="t")
    assert gzip.decompress(path.read_bytes()).decode("utf-8") == HAND
    assert run_files.read_run(path) == run
    plain = run_files.write_run(run, tmp_path / "mine.trec", tag="t")
    assert plain.read_text(encoding="utf-8") == HAND


# --- a cell's run file --------------------------------------------------------------------------------------


def write_finished_cell(root, run) -> str:
    result = {"cell_id": "c1", "means": {"ndcg@10": 0.5}}
    write_cell(cell_dir(root, "c1"), result, run, "query_id,measure,value\nq1,ndcg@10,0.5\n")
    return "c1"


@pytest.mark.parametrize("columnar", [False, True])
def test_a_cell_seals_its_gzip_and_is_read_back_by_every_cell_reader(tmp_path, columnar):
    run = random_run(10, 30)
    cell = write_finished_cell(tmp_path, from_run(run) if columnar else run)
    folder = cell_dir(tmp_path, cell)
    result, problem = verified_result(tmp_path, cell)
    assert problem == "" and set(result["files"]) == {RUN_FILE, PER_QUERY_FILE}
    assert result["files"][RUN_FILE] == hashlib.sha256((folder / RUN_FILE).read_bytes()).hexdigest()
    assert read_cell_run(tmp_path, cell) == run
    assert read_cell_columns(tmp_path, cell).to_dict() == run
    assert read_cell_tops(tmp_path, cell, 3) == {q: [d for d, _ in r[:3]] for q, r in run.items()}


@pytest.mark.parametrize("damage", [truncated, flipped])
def test_a_damaged_cell_gzip_fails_its_checksum(tmp_path, damage):
    cell = write_finished_cell(tmp_path, random_run(10, 30))
    path = cell_dir(tmp_path, cell) / RUN_FILE
    path.write_bytes(damage(path.read_bytes()))
    result, problem = verified_result(tmp_path, cell)
    assert result is None and problem == f"{RUN_FILE} does not match its checksum (edited or truncated)"


def test_a_cell_written_by_the_older_version_with_a_plain_run_trec_is_not_read_as_new(tmp_path):
    """An intact cell of the previous version (``run.trec``, sealed): reported as older, so it is recomputed."""
    run = random_run(3, 5)
    folder = cell_dir(tmp_path, "c1")
    folder.mkdir(parents=True)
    files = {"run.trec": format_trec(run).encode("utf-8"), PER_QUERY_FILE: b"query_id,measure,value\n"}
    for name, data in files.items():
        (folder / name).write_bytes(data)
    old = {"cell_id": "c1", "means": {}, "files": {n: hashlib.sha256(d).hexdigest() for n, d in files.items()}}
    old[CHECKSUM_KEY] = content_hash(old)
    (folder / RESULT_FILE).write_text(json.dumps(old), encoding="utf-8")
    result, problem = verified_result(tmp_path, "c1")
    assert result is None
    assert problem == (
        "written by an older version of zerda-eval (its files: per_query.csv, run.trec; "
        "this version writes run.trec.gz, per_query.csv)"
    )
    write_finished_cell(tmp_path, run)  # the recomputed cell replaces it: no plain run.trec is left beside
    assert sorted(p.name for p in folder.iterdir()) == sorted([RUN_FILE, PER_QUERY_FILE, RESULT_FILE])
    assert verified_result(tmp_path, "c1")[1] == ""
