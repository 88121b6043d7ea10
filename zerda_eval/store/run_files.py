"""Run and qrels files in the formats the ecosystem writes: TREC, ranx's JSON and Parquet.

=========  ==========================================  ==========================================
kind       run                                         qrels
=========  ==========================================  ==========================================
trec       ``qid Q0 docid rank score tag`` (any other   ``qid iter docid grade`` (trec_eval's)
           extension than the two below; gzip too)
json       ranx's ``{qid: {doc_id: score}}``            ``{qid: {doc_id: grade}}``
parquet    columns ``q_id, doc_id, score`` (ranx's)     columns ``q_id, doc_id, score`` (ranx's)
=========  ==========================================  ==========================================

The kind follows the extension (``.json``, ``.parquet`` / ``.parq``; else TREC) unless ``kind`` is
given. A run is read as ``{qid: [(doc_id, score), ...]}`` in the tie-break order (``zerda_eval.ranking``,
trec_eval's), whatever the order of the file's lines: a line's place is never a rank. A doc listed twice
for a query is an error naming the file unless a ``duplicates`` policy is given. A run is written in the
tie-break order, TREC lines by ``run_dir.format_trec``, the format of every cell's ``run.trec.gz``; a TREC
run file is read gzipped or not (``run_dir.run_file_bytes``: by its magic bytes), and one whose name ends in
``.gz`` is written gzipped (``run_dir.write_trec_gz``, as a cell's). A
malformed file is a one-line ``DataFormatError`` naming the file (and line); qrels follow
``store.qrels_text``'s rules.

``read_run_columns`` reads a run as a ``columnar.ColumnarRun`` (arrays, no tuple per line). A TREC file
goes through ``run_dir.read_trec_columns`` (the one columnar TREC parser, pyarrow's CSV reader, for a file
separated by single spaces; the line parser ``run_dir.trec_lines`` for any other), so the run or the one-line
error is the one ``read_run`` gives.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from zerda_eval.columnar import ColumnarRun, from_run
from zerda_eval.errors import DataFormatError
from zerda_eval.ranking import Run, order_run, sort_ranking
from zerda_eval.store.files import atomic_write_bytes, atomic_write_text
from zerda_eval.store.qrels_text import judgements, read_qrels_lines
from zerda_eval.store.run_dir import RUN_TAG, format_trec, read_trec, read_trec_columns, write_trec_gz

KINDS = ("trec", "json", "parquet")
PARQUET_COLUMNS = ("q_id", "doc_id", "score")  # ranx's Run/Qrels.from_parquet defaults
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
        return read_trec_columns(path, duplicates)
    return from_run(read_run(path, kind, duplicates), duplicates, str(path))


def write_run(run: Mapping[str, Any], path: str | Path, kind: str | None = None, tag: str = RUN_TAG) -> Path:
    """Write ``{qid: [(doc_id, score), ...]}`` in the tie-break order (TREC: ``tag`` in the last column,
    gzipped when the name ends in ``.gz``)."""
    path = Path(path)
    kind = file_kind(path, kind)
    ordered = {str(qid): sort_ranking(ranking) for qid, ranking in run.items()}
    if kind == "trec" and path.suffix.lower() == ".gz":
        write_trec_gz(path, ordered, tag)
    elif kind == "trec":
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
