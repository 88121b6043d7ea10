"""Text and ids of ir_datasets records, as every loader reads them."""

from __future__ import annotations

import re
from typing import Any

from zerda_eval.errors import DataFormatError

_WHITESPACE = re.compile(r"\s")


def check_id(value: str, kind: str, where: str) -> str:
    """``value`` if it can be a doc or query id of a TREC run file, else a one-line ``DataFormatError``.

    A TREC line is whitespace-separated (``qid Q0 docid rank score tag``): an id with a space, tab or
    line break (or an empty id) would shift its columns.
    """
    if not value or _WHITESPACE.search(value):
        raise DataFormatError(
            f"{where}: {kind} id {value!r} is empty or contains whitespace, which a TREC run file cannot hold; "
            "rename it"
        )
    return value


def record_text(record: Any, title: bool = True) -> str:
    """ir_datasets' own text of a record (``default_text()``: BEIR's title + " " + text), else ``.text``.

    ``title=False`` gives a titled record's text alone (the ``title`` protocol option).
    """
    if not title and hasattr(record, "title"):
        return record.text
    return record.default_text() if hasattr(record, "default_text") else record.text
