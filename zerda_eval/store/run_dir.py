"""A run directory: the one module that reads and writes its files.

Layout of ``output_dir``::

    experiment.json                 resolved config, its hash, the cell ids of the grid; the directory
                                    belongs to the experiment it names (another one is refused)
    cells/<cell_id>/run.trec.gz     TREC run (``qid Q0 docid rank score tag``), trec_eval's tie-break order,
                                    zlib level 7 (no name, mtime 0: the same run gives the same bytes)
    cells/<cell_id>/per_query.csv   query_id, measure, value
    cells/<cell_id>/result.json     written LAST: means, efficiency, stats, config, the SHA-256 of
                                    the two files above and its own checksum
    results.csv, results.parquet    one row per finished cell
    per_query.parquet               every cell's per-query values, one long table
    locks/<cell_id>.lock            held while a process checks, computes or writes the cell
    locks/running-<hash>.lock       held (shared) by every run of the grid whose config hashes to <hash>,
                                    for the whole run: a run of another grid is refused meanwhile

A cell counts as done only when its ``result.json`` verifies: it names the cell id, its own checksum
(``content_hash`` of the rest of the document) matches, and so does the SHA-256 of each file it lists, which
are this version's (``CELL_FILES``: a cell an older version wrote is recomputed).

Every TREC reader here (``trec_lines``, ``trec_table``) reads a gzip file as its text (``run_file_bytes``, by
the magic bytes, whatever the name), so a user's ``run.trec.gz`` is read as the plain file is.
"""

from __future__ import annotations

import contextlib
import csv
import fcntl
import gzip
import hashlib
import io
import json
import re
import shutil
import zlib
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from filelock import FileLock

from zerda_eval.columnar import ColumnarRun, from_columns, from_run, sorted_distinct
from zerda_eval.errors import ConfigError, DataFormatError, RunError
from zerda_eval.hashing import bytes_sha256, content_hash, file_sha256
from zerda_eval.ranking import Ranking, Run, order_run
from zerda_eval.store.files import atomic_write_bytes, atomic_write_text, build_lock, replaced_atomically

RESULT_FILE = "result.json"
RUN_FILE = "run.trec.gz"
PER_QUERY_FILE = "per_query.csv"
CELL_FILES = (RUN_FILE, PER_QUERY_FILE)  # what result.json seals; another list is an older version's cell
OLDER_RUN_FILES = ("run.trec",)  # a cell's run as older versions named it, removed when the cell is rewritten
EXPERIMENT_FILE = "experiment.json"
CHECKSUM_KEY = "checksum"
RUN_TAG = "zerda-eval"
TREC_COLUMNS = ("query_id", "iteration", "doc_id", "rank", "score", "tag")
# Bytes at which Python's ``str.split`` / ``splitlines`` (the line parser) cut a TREC line where a CSV reader
# would not (tabs, \r, other ASCII separators) or NUL; each is one ``memchr`` over the file.
_NOT_SINGLE_SPACED = (b"\t", b"\r", b"\x0b", b"\x0c", b"\x1c", b"\x1d", b"\x1e", b"\x1f", b"\x00")
# The UTF-8 of the non-ASCII characters ``str.split`` / ``splitlines`` treat as whitespace or line breaks.
_UNICODE_SPACE = re.compile(rb"\xc2[\x85\xa0]|\xe1\x9a\x80|\xe2\x80[\x80-\x8a\xa8\xa9\xaf]|\xe2\x81\x9f|\xe3\x80\x80")
REPAIR = "rerun `zerda-eval run CONFIG` (finished cells are reused) to rewrite it"
GZIP_MAGIC = b"\x1f\x8b"
# zlib is not GNU gzip: at gzip's default level 6 (and zlib's default memLevel 8) a run file came out 0.05%
# larger than `gzip -6`'s; level 7 with blocks of 32k literals (memLevel 9, as GNU gzip's) is 1.3% smaller,
# for 11% more time, so the store is never larger than the gzipped TREC files (issue 46)
GZIP_LEVEL = 7
GZIP_MEM_LEVEL = 9
SCAN_BYTES = 1 << 20  # a run file's bytes checked at a time for empty fields
CHUNK_ROWS = 100_000  # TREC lines formatted and compressed at a time: the text of a whole run is never held
COPY_BYTES = 1 << 20


# --- cells ----------------------------------------------------------------------------------------


def cell_dir(output_dir: Path, cell_id: str) -> Path:
    """``output_dir/cells/<cell_id>``."""
    return Path(output_dir) / "cells" / cell_id


def cell_lock(output_dir: Path, cell_id: str) -> FileLock:
    """The lock one process holds while it checks, computes or writes the cell (``locks/<cell_id>.lock``)."""
    return build_lock(Path(output_dir) / "locks" / cell_id)


def seal(result: dict[str, Any], digests: dict[str, str]) -> dict[str, Any]:
    """``result`` with the SHA-256 of each file (``digests``: name -> hex digest) and its own checksum."""
    sealed = {k: v for k, v in result.items() if k != CHECKSUM_KEY}
    sealed["files"] = dict(digests)
    sealed[CHECKSUM_KEY] = content_hash(sealed)
    return sealed


def write_cell(
    directory: Path, result: dict[str, Any], run: Mapping[str, Ranking], per_query_text: str
) -> dict[str, Any]:
    """Write the run (``write_trec_gz``: a dict ``Run`` or a ``ColumnarRun``, in the tie-break order) and the
    per-query values, then ``result.json`` sealed with their checksums; a cell never finished is removed.

    Called under the cell's lock. A failed write leaves a previously finished version of the cell alone
    (its checksums then no longer match, so the next run recomputes it): a finished cell is never deleted.
    The run file an older version wrote (``OLDER_RUN_FILES``) goes once the new cell is sealed.
    """
    finished_before = (directory / RESULT_FILE).exists()
    try:
        per_query = per_query_text.encode("utf-8")
        digests = {RUN_FILE: write_trec_gz(directory / RUN_FILE, run)}
        atomic_write_bytes(directory / PER_QUERY_FILE, per_query)
        digests[PER_QUERY_FILE] = bytes_sha256(per_query)
        sealed = seal(result, digests)
        atomic_write_text(directory / RESULT_FILE, json.dumps(sealed, indent=2, sort_keys=True, ensure_ascii=False))
    except RunError:
        if not finished_before:
            for name in CELL_FILES:
                (directory / name).unlink(missing_ok=True)
            with contextlib.suppress(OSError):  # other files in it: not ours to remove
                directory.rmdir()
        raise
    for name in OLDER_RUN_FILES:
        (directory / name).unlink(missing_ok=True)
    return sealed


def verified_result(output_dir: Path, cell_id: str) -> tuple[dict[str, Any] | None, str]:
    """The finished cell's ``result.json`` and ``""`` if it verifies, else ``None`` and what is wrong.

    "what is wrong" is empty when the cell was never finished (no ``result.json``): nothing to warn about.
    """
    directory = cell_dir(output_dir, cell_id)
    path = directory / RESULT_FILE
    if not path.is_file():
        return None, ""
    try:
        result = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        return None, f"{RESULT_FILE} is unreadable ({type(exc).__name__})"
    if not isinstance(result, dict) or result.get("cell_id") != cell_id:
        return None, f"{RESULT_FILE} does not describe this cell"
    body = {k: v for k, v in result.items() if k != CHECKSUM_KEY}
    try:
        intact = result.get(CHECKSUM_KEY) == content_hash(body)
    except (TypeError, ValueError):
        intact = False
    files = result.get("files")
    if not intact or not isinstance(files, dict) or not files:
        return None, f"{RESULT_FILE} does not match its checksum (edited or damaged)"
    if sorted(files) != sorted(CELL_FILES):
        return None, (
            f"written by an older version of zerda-eval (its files: {', '.join(sorted(files))}; "
            f"this version writes {', '.join(CELL_FILES)})"
        )
    for name, digest in files.items():
        try:
            if file_sha256(directory / name) != digest:
                return None, f"{name} does not match its checksum (edited or truncated)"
        except OSError:
            return None, f"{name} is missing"
    return result, ""


def load_result(output_dir: Path, cell_id: str) -> dict[str, Any] | None:
    """The finished cell's ``result.json`` if it verifies (``verified_result``), else None."""
    return verified_result(output_dir, cell_id)[0]


def finished_results(output_dir: Path, cell_ids: list[str], known: Mapping[str, Any] | None = None) -> list[dict]:
    """The result of every finished (verified) cell of ``cell_ids``, in that order; ``known`` ones are not re-read."""
    known = known or {}
    results = []
    for cell_id in cell_ids:
        result = known.get(cell_id) or load_result(output_dir, cell_id)
        if result is not None:
            results.append(result)
    return results


# --- TREC run files -------------------------------------------------------------------------------


def format_trec(run: Mapping[str, Ranking], tag: str = RUN_TAG) -> str:
    """TREC run lines ``qid Q0 docid rank score tag``, in the order given (the tie-break order), rank 1, 2, ...

    The score column keeps the systems' real scores (repr: they read back to the same float). The
    order is trec_eval's own (score descending, then doc id descending), so trec_eval, which ignores
    the rank column and sorts by score itself, evaluates the file on the ranking the harness did.
    """
    return "".join(_trec_chunks(run, tag))


def write_trec_gz(path: Path, run: Mapping[str, Ranking], tag: str = RUN_TAG) -> str:
    """Write ``format_trec(run, tag)`` gzipped to ``path`` (atomically) and return the SHA-256 of its bytes.

    Level ``GZIP_LEVEL``, mtime 0 and no file name in the header, so a run gives the same bytes in every
    process. The text goes to zlib ``CHUNK_ROWS`` lines at a time (``_trec_chunks``): a 7,000 x 1,000 run
    never exists as one string (about 1 GB of Python text).
    """
    digest = hashlib.sha256()
    compressor = zlib.compressobj(GZIP_LEVEL, zlib.DEFLATED, 16 + zlib.MAX_WBITS, GZIP_MEM_LEVEL)
    with replaced_atomically(Path(path)) as tmp, tmp.open("wb") as handle:
        for text in _trec_chunks(run, tag):
            block = compressor.compress(text.encode("utf-8"))
            handle.write(block)
            digest.update(block)
        block = compressor.flush()
        handle.write(block)
        digest.update(block)
    return digest.hexdigest()


def _trec_chunks(run: Mapping[str, Ranking], tag: str = RUN_TAG) -> Iterator[str]:
    """``format_trec``'s text in pieces of whole queries, about ``CHUNK_ROWS`` lines each. A ``ColumnarRun``
    is read from its arrays a piece at a time (doc ids and scores of those rows only), never row by row."""
    if isinstance(run, ColumnarRun):
        offsets = run.offsets
        query = 0
        while query < len(run.query_ids):
            end = max(query + 1, int(np.searchsorted(offsets, offsets[query] + CHUNK_ROWS, side="right")) - 1)
            end = min(end, len(run.query_ids))
            bounds = (offsets[query : end + 1] - offsets[query]).tolist()
            rows = slice(int(offsets[query]), int(offsets[end]))
            docs, scores = run.doc_ids[run.docs[rows]].tolist(), run.scores[rows].tolist()
            yield "".join(
                _query_lines(qid, zip(docs[start:stop], scores[start:stop], strict=True), tag)
                for qid, start, stop in zip(run.query_ids[query:end], bounds[:-1], bounds[1:], strict=True)
            )
            query = end
        return
    pieces, rows = [], 0
    for qid, ranking in run.items():
        pieces.append(_query_lines(qid, ranking, tag))
        rows += len(ranking)
        if rows >= CHUNK_ROWS:
            yield "".join(pieces)
            pieces, rows = [], 0
    if pieces:
        yield "".join(pieces)


def _query_lines(qid: str, ranking: Iterable[tuple[str, float]], tag: str) -> str:
    """THE TREC line format: one query's lines ``qid Q0 docid rank score tag``, rank 1, 2, ..., scores by repr."""
    return "".join(f"{qid} Q0 {doc_id} {rank} {score!r} {tag}\n" for rank, (doc_id, score) in enumerate(ranking, 1))


def run_file_bytes(path: Path) -> bytes:
    """The bytes of a run file, decompressed when it is gzip (by its magic bytes, whatever its name): the one
    place a run file is read. Missing, unreadable, or a corrupt or truncated gzip: a one-line ``DataFormatError``
    naming the file."""
    try:
        with open(path, "rb") as handle:
            if handle.read(len(GZIP_MAGIC)) != GZIP_MAGIC:
                handle.seek(0)
                return handle.read()
            handle.seek(0)
            text = io.BytesIO()  # grown in place: one copy of the text in memory, not a list of blocks and a join
            with gzip.GzipFile(fileobj=handle, mode="rb") as stream:
                shutil.copyfileobj(stream, text, COPY_BYTES)
            return text.getvalue()
    except FileNotFoundError:
        raise DataFormatError(f"{path}: run file not found; check the path") from None
    except (EOFError, zlib.error, gzip.BadGzipFile) as exc:
        raise DataFormatError(
            f"{path}: corrupt or truncated gzip ({type(exc).__name__}: {exc}); write the file again "
            "(`gzip -t` checks one)"
        ) from None
    except OSError as exc:
        raise DataFormatError(f"{path}: cannot read the run file ({type(exc).__name__})") from None


def trec_lines(path: Path) -> Iterator[tuple[int, str, str, float]]:
    """``(line number, qid, doc id, score)`` per line of a TREC run file (plain or gzip); a malformed line is a
    one-line ``DataFormatError`` naming the file and line."""
    try:
        text = run_file_bytes(path).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DataFormatError(f"{path}: cannot read the run file ({type(exc).__name__})") from None
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        parts = line.split()
        if len(parts) != 6:
            raise DataFormatError(f"{path}:{number}: expected 'qid Q0 docid rank score tag', got {line!r}")
        try:
            score = float(parts[4])
        except ValueError:
            raise DataFormatError(f"{path}:{number}: score {parts[4]!r} is not a number") from None
        yield number, parts[0], parts[2], score


def read_trec(path: Path) -> Run:
    """A TREC run file as ``{qid: [(doc_id, score), ...]}`` in file order."""
    run: Run = {}
    for _, qid, doc_id, score in trec_lines(path):
        run.setdefault(qid, []).append((doc_id, score))
    return run


def read_cell_run(output_dir: Path, cell_id: str) -> Run:
    """The run file of a cell."""
    return read_trec(cell_dir(output_dir, cell_id) / RUN_FILE)


def read_cell_columns(output_dir: Path, cell_id: str) -> ColumnarRun:
    """The run file of a cell as a ``ColumnarRun`` (in the tie-break order, the order the harness wrote it)."""
    return read_trec_columns(cell_dir(output_dir, cell_id) / RUN_FILE)


def read_trec_columns(path: Path, duplicates: str | None = None, where: str | None = None) -> ColumnarRun:
    """A TREC run file as a ``ColumnarRun`` in the tie-break order: ``ranking.order_run(read_trec(path))``'s
    rankings and errors, read in columns by ``trec_columns`` when it takes the file, else by the line parser."""
    where = where or str(path)
    columns = trec_columns(path)
    if columns is None:
        return from_run(order_run(read_trec(path), duplicates, where), duplicates, where)
    return from_columns(*columns, duplicates=duplicates, where=where)


def read_cell_tops(output_dir: Path, cell_id: str, k: int) -> dict[str, list[str]]:
    """The first ``k`` doc ids of each query of a cell's run file, in file order: ``read_cell_run``'s
    ``[doc for doc, _ in run[qid][:k]]``, read in columns (``trec_table``) so a report reads a 7,000 x 1,000
    run in a second instead of parsing every line in Python; a file that one does not take, by the line parser."""
    path = cell_dir(output_dir, cell_id) / RUN_FILE
    table = trec_table(path)
    if table is None:
        return {qid: [doc for doc, _ in ranking[:k]] for qid, ranking in read_trec(path).items()}
    codes = _query_codes(table)
    order = np.argsort(codes, kind="stable")  # each query's lines together, in file order
    ranked = codes[order]
    kept = np.sort(order[np.arange(ranked.size) - np.searchsorted(ranked, ranked) < k])  # its first k lines
    qids = table["query_id"].chunks[0].dictionary.to_pylist()
    tops: dict[str, list[str]] = {qid: [] for qid in qids}
    for code, doc in zip(codes[kept].tolist(), table["doc_id"].take(kept).to_pylist(), strict=True):
        tops[qids[code]].append(doc)
    return tops


def trec_table(path: Path) -> Any:
    """THE columnar TREC parser: a ``pyarrow.Table`` of the file's ``query_id`` (dictionary-coded, codes in
    first-seen order), ``doc_id`` (large_string) and ``score`` (float64) in file order, for a file pyarrow
    parses as the line parser (``trec_lines``) would: fields split by single spaces, ``\\n`` line ends, valid
    UTF-8, six fields a line, numeric scores. None for any other file (missing, empty, or malformed too), which
    the caller then reads with the line parser, so the run or the one-line error is that parser's."""
    import pyarrow as pa
    from pyarrow import csv

    try:
        data = run_file_bytes(path)
    except DataFormatError:
        return None
    if not data or any(byte in data for byte in _NOT_SINGLE_SPACED) or _empty_field(data):
        return None
    if not data.isascii():
        try:
            data.decode("utf-8")  # every column, the ones not read too
        except UnicodeDecodeError:
            return None
        if _UNICODE_SPACE.search(data):
            return None
    types = {"query_id": pa.dictionary(pa.int32(), pa.string()), "doc_id": pa.large_string(), "score": pa.float64()}
    try:
        table = csv.read_csv(
            pa.py_buffer(data),
            read_options=csv.ReadOptions(column_names=list(TREC_COLUMNS)),
            parse_options=csv.ParseOptions(delimiter=" ", quote_char=False, double_quote=False, escape_char=False),
            convert_options=csv.ConvertOptions(
                column_types=types, include_columns=list(types), null_values=[], strings_can_be_null=False
            ),
        ).unify_dictionaries()
    except (pa.ArrowException, ValueError):
        return None
    return table if table.num_rows else None  # blank lines only: the line parser's empty run


def _empty_field(data: bytes) -> bool:
    """Whether a line of ``data`` has an empty field (two spaces, or one at the line's start or end), which
    ``str.split`` reads otherwise; in numpy (``b"  " in data`` is a slow search where spaces are common), a
    window of ``SCAN_BYTES`` at a time so its masks stay small beside a 7M-line file."""
    text = np.frombuffer(data, dtype=np.uint8)
    if text[0] == ord(" ") or text[-1] == ord(" "):
        return True
    for start in range(0, text.size - 1, SCAN_BYTES):
        window = text[start : start + SCAN_BYTES + 1]  # one byte shared with the next window: pairs across it
        space, newline = window == ord(" "), window == ord("\n")
        if (space[1:] & (space[:-1] | newline[:-1])).any() or (space[:-1] & newline[1:]).any():
            return True
    return False


def _query_codes(table: Any) -> np.ndarray:
    """``trec_table``'s query codes, one int64 a line."""
    return np.concatenate([chunk.indices.to_numpy() for chunk in table["query_id"].chunks]).astype(np.int64)


def trec_columns(path: Path) -> tuple[list[str], np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
    """``columnar.from_columns``' first five arguments for a file ``trec_table`` takes (else None): query ids
    (first-seen order) and codes, the sorted doc-id table and codes into it, scores. The doc ids are ordered
    by bytes once (``columnar.sorted_distinct``), and the table built from the distinct ones."""
    table = trec_table(path)
    if table is None:
        return None
    docs = table["doc_id"].combine_chunks()
    doc_codes, doc_ids = sorted_distinct(docs, str(path))
    query_ids = table["query_id"].chunks[0].dictionary.to_pylist()
    return query_ids, _query_codes(table), doc_ids, doc_codes, table["score"].to_numpy()


# --- per-query values -----------------------------------------------------------------------------


def per_query_csv(per_query: Mapping[str, Mapping[str, float]]) -> str:
    """``query_id,measure,value`` rows, quoted where an id needs it (a comma, a quote, a line break)."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(("query_id", "measure", "value"))
    for measure, values in per_query.items():
        writer.writerows((qid, measure, repr(value)) for qid, value in values.items())
    return buffer.getvalue()


def read_per_query_csv(path: Path) -> pd.DataFrame:
    """A cell's ``per_query.csv`` (columns query_id, measure, value); ids read verbatim ("NA" stays "NA")."""
    return pd.read_csv(path, dtype={"query_id": str, "measure": str}, keep_default_na=False, na_filter=False)


def read_cell_per_query(output_dir: Path, cell_id: str, measure: str) -> dict[str, float]:
    """``{query_id: value}`` of one measure from a cell's ``per_query.csv``, in file order."""
    frame = read_per_query_csv(cell_dir(output_dir, cell_id) / PER_QUERY_FILE)
    rows = frame[frame["measure"] == measure]
    return dict(zip(rows["query_id"], rows["value"].astype(float), strict=True))


def per_query_table(output_dir: Path, cells: pd.DataFrame) -> pd.DataFrame:
    """The long per-query table of ``cells`` (rows with cell_id, dataset, system): the one join of cells'
    ``per_query.csv`` files with their results rows."""
    frames = []
    for cell_id, dataset, system in zip(cells["cell_id"], cells["dataset"], cells["system"], strict=True):
        frame = read_per_query_csv(cell_dir(output_dir, str(cell_id)) / PER_QUERY_FILE)
        frame.insert(0, "system", system)
        frame.insert(0, "dataset", dataset)
        frame.insert(0, "cell_id", str(cell_id))
        frames.append(frame)
    columns = ["cell_id", "dataset", "system", "query_id", "measure", "value"]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=columns)


# --- experiment-level files -----------------------------------------------------------------------


RUNNING_PREFIX = "running-"


@contextlib.contextmanager
def held_by_grid(output_dir: Path, name: str, config_hash: str) -> Iterator[None]:
    """Hold ``output_dir`` for a run of the grid whose resolved config hashes to ``config_hash``, while the block runs.

    Runs of the same grid share the directory (they share its cells under the cells' locks); a run of another grid
    (an edited file, or another file with the same name and output_dir) started meanwhile would rewrite
    ``experiment.json`` and the tables under this one, so it is a one-line ``ConfigError``. Each run holds a shared
    ``flock`` on ``locks/running-<hash>.lock`` (released by the OS if the process dies); claims are made one at a
    time under ``locks/owner``, where the marks of finished runs are removed.
    """
    locks = Path(output_dir) / "locks"
    mine = locks / f"{RUNNING_PREFIX}{config_hash[:16]}.lock"
    with build_lock(locks / "owner"):
        for other in sorted(locks.glob(f"{RUNNING_PREFIX}*.lock")):
            if other != mine and _in_use(other):
                raise ConfigError(
                    f"output_dir {output_dir} is in use by a run of another grid ({other.name}); experiment {name!r} "
                    "would rewrite its experiment.json and tables: wait for that run to finish, or give this file "
                    "another [experiment].output_dir"
                )
        handle = mine.open("a")
        fcntl.flock(handle, fcntl.LOCK_SH)
    try:
        yield
    finally:
        handle.close()


def _in_use(mark: Path) -> bool:
    """Whether a live run holds ``mark``; one nobody holds (its run ended) is removed (called under the owner lock)."""
    try:
        with mark.open("a") as handle:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return True
            mark.unlink()
    except FileNotFoundError:
        pass
    return False


def write_experiment_json(output_dir: Path, config_hash: str, config: dict[str, Any], cell_ids: list[str]) -> None:
    """``experiment.json``: the resolved config, its hash and the cell ids of the whole grid.

    A run directory belongs to one experiment (by ``[experiment].name``): one holding another
    experiment's ``experiment.json`` is a one-line ``ConfigError``, checked and written under a lock so
    two experiments started together cannot both claim it.
    """
    name = config["experiment"]["name"]
    document = {"config_hash": config_hash, "config": config, "cells": cell_ids}
    text = json.dumps(document, indent=2, sort_keys=True, ensure_ascii=False)
    with build_lock(Path(output_dir) / "locks" / EXPERIMENT_FILE):
        owner = _owner(Path(output_dir))
        if owner is not None and owner != name:
            raise ConfigError(
                f"output_dir {output_dir} holds the runs of experiment {owner!r}; experiment {name!r} cannot write "
                "there (its results and report would mix two grids): give it another [experiment].output_dir"
            )
        atomic_write_text(Path(output_dir) / EXPERIMENT_FILE, text)


def _owner(run_dir: Path) -> str | None:
    """The experiment name ``run_dir``'s ``experiment.json`` records; None when there is none to read."""
    try:
        return str(json.loads((run_dir / EXPERIMENT_FILE).read_text(encoding="utf-8"))["config"]["experiment"]["name"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def read_experiment_json(run_dir: Path) -> dict[str, Any]:
    """``experiment.json`` of a run directory; unreadable or foreign: one-line ``DataFormatError``."""
    path = Path(run_dir) / EXPERIMENT_FILE
    if not path.is_file():
        raise DataFormatError(f"{run_dir}: not a run directory (no {EXPERIMENT_FILE}); give the output_dir of a run")
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise DataFormatError(f"{path}: unreadable ({type(exc).__name__}); {REPAIR}") from None
    if not isinstance(document, dict) or not isinstance(document.get("config"), dict):
        raise DataFormatError(f"{path}: not the experiment.json of a run; {REPAIR}")
    return document


def write_tables(output_dir: Path, table: pd.DataFrame) -> None:
    """``results.csv``, ``results.parquet`` and the long ``per_query.parquet``, each atomically."""
    atomic_write_text(Path(output_dir) / "results.csv", table.to_csv(index=False))
    atomic_write_bytes(Path(output_dir) / "results.parquet", parquet_bytes(table))
    long = per_query_table(output_dir, table) if not table.empty else pd.DataFrame()
    atomic_write_bytes(Path(output_dir) / "per_query.parquet", parquet_bytes(long))


def read_tables(run_dir: Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(results, per-query) tables of a run directory; a missing or damaged file, or tables holding cells
    of another grid than ``experiment.json``'s, is a one-line error."""
    run_dir = Path(run_dir)
    frames = []
    for name in ("results.parquet", "per_query.parquet"):
        try:
            frames.append(pd.read_parquet(run_dir / name))
        except FileNotFoundError:
            raise DataFormatError(f"{run_dir / name}: missing; {REPAIR}") from None
        except Exception as exc:  # pyarrow raises several types for a damaged file
            raise DataFormatError(f"{run_dir / name}: unreadable ({type(exc).__name__}); {REPAIR}") from None
    results, per_query = frames
    if results.empty or per_query.empty:
        raise DataFormatError(f"{run_dir}: no finished cells; run `zerda-eval run CONFIG` first")
    results, per_query = results.astype({"cell_id": str}), per_query.astype({"query_id": str, "cell_id": str})
    grid = read_experiment_json(run_dir).get("cells")  # every run writes it; a hand-made directory may not
    foreign = sorted(set(results["cell_id"]) - set(grid)) if isinstance(grid, list) else []
    if foreign:  # a rerun of an edited grid stopped before rewriting the tables: never mix the two
        raise DataFormatError(
            f"{run_dir / 'results.parquet'}: {len(foreign)} results row(s) (cell {foreign[0]}, ...) are not cells of "
            f"the grid {EXPERIMENT_FILE} describes (written by an earlier version of the experiment); {REPAIR}"
        )
    return results, per_query


def check_run_dir(run_dir: Path) -> None:
    """A one-line ``DataFormatError`` naming the experiment-level file of ``run_dir`` that cannot be read."""
    read_experiment_json(run_dir)
    read_tables(run_dir)


def parquet_bytes(table: pd.DataFrame) -> bytes:
    """``table`` as Parquet bytes (for an atomic write)."""
    buffer = io.BytesIO()
    table.to_parquet(buffer, index=False)
    return buffer.getvalue()
