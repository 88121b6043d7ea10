"""Qrels read in one place: TREC (``qid iter docid grade``) and BEIR TSV (``query-id<TAB>corpus-id<TAB>score``)
text files, and the judgement rules every qrels reader applies (``judgements``).

Both the in-memory API (``store.run_files.read_qrels``) and a user's folder (``datasets.user``) read qrels
here, so they accept the same files and fail alike: a one-line ``DataFormatError`` naming the file and
line. A pair judged twice with one grade is kept once; with two grades it is an error naming both lines.
Text is UTF-8 (a BOM is dropped, CRLF line ends accepted; blank lines skipped).
"""

from __future__ import annotations

import numbers
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, NamedTuple

from zerda_eval.errors import DataFormatError

LAYOUTS = {
    "trec": "'qid iter docid grade' (4 columns, integer grade)",
    "beir": "'query-id<TAB>corpus-id<TAB>score' (integer score)",
}
BEIR_HEADER = "query-id"


class Judgement(NamedTuple):
    """One judgement: query, document, grade, TREC's iteration column, and its line (0: not a text file)."""

    query_id: str
    doc_id: str
    grade: int
    iteration: str = "0"
    line: int = 0


def integer_grade(value: Any) -> int | None:
    """A judgement grade as an int (an integral float or numpy integer too), None if it is not one."""
    if isinstance(value, bool):
        return None
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real) and float(value).is_integer():
        return int(value)
    return None


def numbered_lines(path: Path) -> Iterator[tuple[int, str]]:
    """Numbered non-blank lines of a UTF-8 file (a BOM and a line's ``\\r`` dropped)."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise DataFormatError(f"{path}: file not found; check the path") from None
    except OSError as exc:
        raise DataFormatError(f"{path}: cannot read the file ({exc.strerror})") from None
    for number, raw in enumerate(data.split(b"\n"), start=1):
        try:
            line = raw.decode("utf-8").removeprefix("\ufeff").rstrip("\r")
        except UnicodeDecodeError as error:
            raise DataFormatError(
                f"{path}:{number}: not UTF-8 text ({error.reason} at byte {error.start}); re-save the file as UTF-8"
            ) from None
        if line.strip():
            yield number, line


def judgements(path: Path, rows: Iterable[tuple[str, str, Any, str, int]]) -> list[Judgement]:
    """``rows`` (query, doc, grade as read, iteration, line) as judgements, each pair once, in file order.

    A grade that is not an integer, or a pair judged twice with two grades, is a ``DataFormatError`` naming
    ``path`` (and the line)."""
    first: dict[tuple[str, str], Judgement] = {}
    kept = []
    for qid, doc_id, value, iteration, line in rows:
        where = f"{path}:{line}" if line else str(path)
        grade = integer_grade(value)
        if grade is None:
            raise DataFormatError(f"{where}: query {qid!r}, doc {doc_id!r}: grade {value!r} is not an integer")
        judgement = Judgement(qid, doc_id, grade, iteration, line)
        earlier = first.setdefault((qid, doc_id), judgement)
        if earlier.grade != grade:
            on_line = f" on line {earlier.line}" if earlier.line else ""
            raise DataFormatError(
                f"{where}: query {qid!r} and doc {doc_id!r} are judged {grade} here and {earlier.grade}{on_line}; "
                "keep one judgement per pair"
            )
        if earlier is judgement:
            kept.append(judgement)
    return kept


def read_qrels_lines(path: Path, layout: str = "trec") -> list[Judgement]:
    """The judgements of a TREC or BEIR (``layout``) qrels text file, each pair once, in file order."""
    return judgements(path, _rows(path, layout))


def _rows(path: Path, layout: str) -> Iterator[Judgement]:
    trec = layout == "trec"
    for number, line in numbered_lines(path):
        columns = line.split() if trec else [column.strip() for column in line.split("\t")]
        if not trec and number == 1 and columns[0] == BEIR_HEADER:
            continue
        if len(columns) != (4 if trec else 3) or not columns[-1].lstrip("-").isdigit():
            raise DataFormatError(f"{path}:{number}: expected {LAYOUTS[layout]}, got {line!r}")
        doc_id = columns[2] if trec else columns[1]
        yield Judgement(columns[0], doc_id, int(columns[-1]), columns[1] if trec else "0", number)
