"""Run and qrels files in the formats the ecosystem writes: TREC, ranx's JSON and Parquet.

=========  ==========================================  ==========================================
kind       run                                         qrels
=========  ==========================================  ==========================================
trec       ``qid Q0 docid rank score tag`` (any other   ``qid iter docid grade`` (trec_eval's)
           extension than the two below)
json       ranx's ``{qid: {doc_id: score}}``            ``{qid: {doc_id: grade}}``
parquet    columns ``q_id, doc_id, score`` (ranx's)     columns ``q_id, doc_id, score`` (ranx's)
=========  ==========================================  ==========================================

The kind follows the extension (``.json``, ``.parquet`` / ``.parq``; else TREC) unless ``kind`` is
given. A run is read as ``{qid: [(doc_id, score), ...]}`` in the tie-break order (``zerda_eval.ranking``,
trec_eval's), whatever the order of the file's lines: a line's place is never a rank. A doc listed twice
for a query is an error naming the file unless a ``duplicates`` policy is given. A run is written in the
tie-break order, TREC lines by ``run_dir.format_trec``, the format of every cell's ``run.trec``. A
malformed file is a one-line ``DataFormatError`` naming the file (and line); qrels follow
``store.qrels_text``'s rules.

``read_run_columns`` reads a run as a ``columnar.ColumnarRun`` (arrays, no tuple per line). A TREC file
separated by single spaces is parsed by pyarrow's CSV reader; any other file, and any file pyarrow does
not take, goes through the line parser (``run_dir.trec_lines``), so the run or the one-line error is the
one ``read_run`` gives.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from zerda_eval.columnar import ColumnarRun, from_columns, from_run
from zerda_eval.errors import DataFormatError
from zerda_eval.ranking import Run, order_run, sort_ranking
from zerda_eval.store.files import atomic_write_bytes, atomic_write_text
from zerda_eval.store.qrels_text import judgements, read_qrels_lines
from zerda_eval.store.run_dir import RUN_TAG, format_trec, read_trec

KINDS = ("trec", "json", "parquet")
PARQUET_COLUMNS = ("q_id", "doc_id", "score")  # ranx's Run/Qrels.from_parquet defaults
TREC_COLUMNS = ("query_id", "iteration", "doc_id", "rank", "score", "tag")
# Bytes at which Python's ``str.split`` / ``splitlines`` (the line parser) cut a TREC line where a CSV reader
# would not (tabs, \r, other ASCII separators) or NUL; runs of spaces and spaces at a line's ends show as empty
# fields once parsed. Single bytes: each is one ``memchr`` over the file.
_NOT_SINGLE_SPACED = (b"\t", b"\r", b"\x0b", b"\x0c", b"\x1c", b"\x1d", b"\x1e", b"\x00")
# The UTF-8 of the non-ASCII characters ``str.split`` / ``splitlines`` treat as whitespace or line breaks.
_UNICODE_SPACE = re.compile(rb"\xc2[\x85\xa0]|\xe1\x9a\x80|\xe2\x80[\x80-\x8a\xa8\xa9\xaf]|\xe2\x81\x9f|\xe3\x80\x80")
Qrels = dict[str, dict[str, int]]


def file_kind(path: str | Path, kind: str | None = None) -> str:
    """``kind`` if given (one of ``KINDS``), else the kind the extension names (TREC by default)."""
    if kind is not None:
        if kind not in KINDS:
            raise DataFormatError(f"{path}: unknown file kind {kind!r}; give one of {', '.join(KINDS)}")
        return kind
    suffix = Path(path).suffix.lower()
    return {".json": "json", ".parquet": "parquet", ".parq": "parquet"}.get(suffix, "trec")


def read_run(path: str | Path, kind: str | None = None, duplicates: str | None = None) -> Run:
    """A run file as ``{qid: [(doc_id, score), ...]}`` in the tie-break order (``duplicates``: None, "max", "first")."""
    path = Path(path)
    kind = file_kind(path, kind)
    if kind == "trec":
        return order_run(read_trec(path), duplicates, str(path))
    run: Run = {}
    for qid, doc_id, score in _records(path, kind, "score"):
        try:
            run.setdefault(qid, []).append((doc_id, float(score)))
        except (TypeError, ValueError):
            raise DataFormatError(f"{path}: query {qid!r}, doc {doc_id!r}: score {score!r} is not a number") from None
    return order_run(run, duplicates, str(path))


def read_run_columns(path: str | Path, kind: str | None = None, duplicates: str | None = None) -> ColumnarRun:
    """``read_run`` as a ``ColumnarRun``: the same rankings (and errors), held as arrays."""
    path = Path(path)
    if file_kind(path, kind) == "trec":
        columns = _single_spaced_trec(path)
        if columns is not None:
            return from_columns(*columns, duplicates=duplicates, where=str(path))
    return from_run(read_run(path, kind, duplicates), duplicates, str(path))


def _single_spaced_trec(path: Path) -> tuple | None:
    """``from_columns``'s first five arguments for a TREC file pyarrow parses as the line parser would (fields
    split by single spaces, ``\\n`` line ends, valid UTF-8, six fields a line, numeric scores), else None."""
    import pyarrow as pa
    import pyarrow.compute as pc
    from pyarrow import csv

    try:
        data = path.read_bytes()
    except OSError:
        return None
    if not data or any(byte in data for byte in _NOT_SINGLE_SPACED):
        return None
    if not data.isascii() and _UNICODE_SPACE.search(data):
        return None
    coded = pa.dictionary(pa.int32(), pa.string())  # each distinct id once; codes in first-seen order
    types = {**dict.fromkeys(TREC_COLUMNS, coded), "score": pa.float64()}
    try:
        table = csv.read_csv(
            pa.py_buffer(data),
            read_options=csv.ReadOptions(column_names=list(TREC_COLUMNS)),
            parse_options=csv.ParseOptions(delimiter=" ", quote_char=False, double_quote=False, escape_char=False),
            convert_options=csv.ConvertOptions(column_types=types, null_values=[], strings_can_be_null=False),
        ).unify_dictionaries()
    except (pa.ArrowException, ValueError):
        return None
    columns = {name: table[name].chunks for name in TREC_COLUMNS if name != "score"}
    if any(pc.min(pc.binary_length(chunks[0].dictionary)).as_py() == 0 for chunks in columns.values()):
        return None  # an empty field: two spaces, or one at a line's end, which str.split reads otherwise
    queries, docs = columns["query_id"][0].dictionary, columns["doc_id"][0].dictionary
    codes = [np.concatenate([chunk.indices.to_numpy() for chunk in columns[name]]) for name in ("query_id", "doc_id")]
    return queries.to_pylist(), codes[0], docs.to_numpy(zero_copy_only=False), codes[1], table["score"].to_numpy()


def write_run(run: Mapping[str, Any], path: str | Path, kind: str | None = None, tag: str = RUN_TAG) -> Path:
    """Write ``{qid: [(doc_id, score), ...]}`` in the tie-break order (TREC: ``tag`` in the last column)."""
    path = Path(path)
    kind = file_kind(path, kind)
    ordered = {str(qid): sort_ranking(ranking) for qid, ranking in run.items()}
    if kind == "trec":
        atomic_write_text(path, format_trec(ordered, tag))
    else:
        _write_records(path, kind, ((qid, doc, score) for qid, ranking in ordered.items() for doc, score in ranking))
    return path


def read_qrels(path: str | Path, kind: str | None = None) -> Qrels:
    """A qrels file as ``{qid: {doc_id: grade}}``; a pair judged twice with two grades is an error."""
    path = Path(path)
    kind = file_kind(path, kind)
    if kind == "trec":
        rows = read_qrels_lines(path)
    else:
        rows = judgements(path, ((qid, doc, grade, "0", 0) for qid, doc, grade in _records(path, kind, "grade")))
    qrels: Qrels = {}
    for judgement in rows:
        qrels.setdefault(judgement.query_id, {})[judgement.doc_id] = judgement.grade
    return qrels


def write_qrels(qrels: Mapping[str, Mapping[str, int]], path: str | Path, kind: str | None = None) -> Path:
    """Write ``{qid: {doc_id: grade}}`` (TREC: ``qid 0 docid grade`` lines, trec_eval's qrels format)."""
    path = Path(path)
    kind = file_kind(path, kind)
    rows = [(str(qid), str(doc), int(grade)) for qid, docs in qrels.items() for doc, grade in docs.items()]
    if kind == "trec":
        atomic_write_text(path, "".join(f"{qid} 0 {doc} {grade}\n" for qid, doc, grade in rows))
    else:
        _write_records(path, kind, rows)
    return path


def _records(path: Path, kind: str, value: str) -> Iterator[tuple[str, str, Any]]:
    """``(qid, doc_id, value)`` of a ranx JSON or Parquet file."""
    if kind == "json":
        try:
            document = json.loads(_text(path))
        except json.JSONDecodeError as exc:
            raise DataFormatError(f"{path}: not JSON ({exc.msg}, line {exc.lineno})") from None
        if not isinstance(document, dict) or not all(isinstance(docs, dict) for docs in document.values()):
            raise DataFormatError(f"{path}: expected ranx's JSON {{query id: {{doc id: {value}}}}}")
        for qid, docs in document.items():
            for doc_id, item in docs.items():
                yield str(qid), str(doc_id), item
        return
    try:
        frame = pd.read_parquet(path)
    except FileNotFoundError:
        raise DataFormatError(f"{path}: file not found; check the path") from None
    except Exception as exc:  # pyarrow raises several types for a file that is not Parquet
        raise DataFormatError(f"{path}: not a Parquet file ({type(exc).__name__})") from None
    missing = [column for column in PARQUET_COLUMNS if column not in frame.columns]
    if missing:
        raise DataFormatError(f"{path}: no column {', '.join(missing)}; expected ranx's {', '.join(PARQUET_COLUMNS)}")
    for qid, doc_id, item in zip(*(frame[column].tolist() for column in PARQUET_COLUMNS), strict=True):
        yield str(qid), str(doc_id), item


def _write_records(path: Path, kind: str, rows: Any) -> None:
    rows = list(rows)
    if kind == "json":
        document: dict[str, dict[str, Any]] = {}
        for qid, doc_id, item in rows:
            document.setdefault(qid, {})[doc_id] = item
        atomic_write_text(path, json.dumps(document, ensure_ascii=False))
        return
    frame = pd.DataFrame(rows, columns=list(PARQUET_COLUMNS))
    atomic_write_bytes(path, frame.to_parquet(index=False))


def _text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise DataFormatError(f"{path}: file not found; check the path") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise DataFormatError(f"{path}: cannot read the file ({type(exc).__name__})") from None
