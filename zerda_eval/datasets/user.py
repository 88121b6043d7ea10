"""A user's own collection: a BEIR folder, or TREC qrels with a TSV/JSONL corpus and queries.

BEIR (``format="beir"``): ``corpus.jsonl`` (``_id``, ``title``, ``text``), ``queries.jsonl`` (``_id``,
``text``), ``qrels/<split>.tsv`` (``query-id corpus-id score``, header optional); ``split`` defaults
to "test". TREC (``format="trec"``): ``corpus.jsonl`` or ``corpus.tsv`` (``id<TAB>text`` or
``id<TAB>title<TAB>text``), ``queries.jsonl`` or ``queries.tsv``, and 4-column TREC qrels in ``qrels``,
``qrels.txt`` or ``qrels.trec``; the options ``corpus``, ``queries``, ``qrels`` name other files.
Every file must be UTF-8; any problem is a one-line error naming the file and line: a field of the
wrong type (``text`` and ``title`` are strings, ``_id`` a string or an integer), a missing ``text``,
an id with whitespace (a TREC run file cannot hold it), a duplicate doc or query id, or a qrels pair
judged twice with different grades (the same grade twice is kept once).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ir_datasets.formats import GenericDoc, GenericQuery, TrecQrel

from zerda_eval.datasets.collection import Collection, build_collection
from zerda_eval.datasets.records import check_id
from zerda_eval.errors import ConfigError, DataFormatError, DatasetError
from zerda_eval.store.qrels_text import numbered_lines, read_qrels_lines

FORMATS = ("beir", "trec")
USER_OPTIONS = ("path", "format", "split", "language", "corpus", "queries", "qrels")


def _records(path: Path, kind: str, title: bool = True) -> Iterator[tuple[int, str, str]]:
    """(line, id, text) of a JSONL (``_id``, optional ``title``, ``text``) or TSV file of ``kind`` records.

    The text is title + " " + text when there is a title (BEIR's convention), the text alone with ``title=False``.
    """
    for number, line in numbered_lines(path):
        where = f"{path}:{number}"
        if path.suffix == ".jsonl":
            fields = _json_fields(line, where)
        else:
            fields = line.split("\t")
            if len(fields) == 2:
                fields.insert(1, "")
            if len(fields) != 3:
                raise DataFormatError(f"{where}: expected 'id<TAB>text' or 'id<TAB>title<TAB>text'")
        yield number, check_id(fields[0], kind, where), f"{fields[1]} {fields[2]}" if fields[1] and title else fields[2]


def _json_fields(line: str, where: str) -> list[str]:
    """``[_id, title, text]`` of one JSONL record, each checked for its type."""
    try:
        row = json.loads(line)
    except ValueError:
        raise DataFormatError(f"{where}: expected a JSON object with '_id' and 'text'") from None
    if not isinstance(row, dict) or "_id" not in row or "text" not in row:
        raise DataFormatError(f"{where}: expected a JSON object with '_id' and 'text'")
    record_id, title, text = row["_id"], row.get("title"), row["text"]
    if isinstance(record_id, bool) or not isinstance(record_id, str | int):
        raise DataFormatError(f"{where}: '_id' must be a string, got {record_id!r}")
    for key, value in (("title", title), ("text", text)):
        if not isinstance(value, str) and (key == "text" or value is not None):
            raise DataFormatError(f"{where}: '{key}' must be a string, got {type(value).__name__} {value!r}")
    return [str(record_id), title or "", text or ""]


def _queries(path: Path) -> list[GenericQuery]:
    """Queries of a file; an empty one is an error (a wrong key would otherwise score silently 0)."""
    first_line: dict[str, int] = {}
    queries = []
    for number, qid, text in _records(path, "query"):
        if qid in first_line:
            first = first_line[qid]
            raise DataFormatError(
                f"{path}:{number}: duplicate query id {qid!r} (first on line {first}); ids must be unique"
            )
        first_line[qid] = number
        if not text.strip():
            raise DataFormatError(f"{path}:{number}: query {qid!r} has no text; give it one or remove it")
        queries.append(GenericQuery(qid, text))
    return queries


def _docs(path: Path, title: bool = True) -> list[GenericDoc]:
    first_line: dict[str, int] = {}
    docs = []
    for number, doc_id, text in _records(path, "doc", title):
        if doc_id in first_line:
            raise DataFormatError(f"{path}:{number}: duplicate doc id {doc_id!r} (first on line {first_line[doc_id]})")
        first_line[doc_id] = number
        docs.append(GenericDoc(doc_id, text))
    if not docs:
        raise DataFormatError(f"{path}: no documents; add one JSON object per line with '_id' and 'text'")
    return docs


def _qrels(path: Path, trec: bool, doc_ids: set[str], query_ids: set[str]) -> list[TrecQrel]:
    """The folder's judgements (``store.qrels_text``), each naming a query and a document of the folder."""
    rows = read_qrels_lines(path, "trec" if trec else "beir")
    for row in rows:
        for kind, value, known in (("query", row.query_id, query_ids), ("doc", row.doc_id, doc_ids)):
            if value not in known:
                raise DataFormatError(f"{path}:{row.line}: {kind} id {value!r} is not in the {kind} file")
    return [TrecQrel(row.query_id, row.doc_id, row.grade, row.iteration) for row in rows]


def option_key(where: str | None, dataset: str, key: str) -> str:
    """How an error names a dataset's option: its key path (``x.toml: datasets[2].format``) when ``where``,
    the path of the dataset's entry, is known; else the dataset (``load_collection`` called directly)."""
    return f"{where}.{key}" if where else f"dataset {dataset!r}"


def _pick(folder: Path, given: str | None, candidates: tuple[str, ...], what: str, key: str) -> Path:
    names = (given,) if given else candidates
    for name in names:
        if (folder / name).is_file():
            return folder / name
    raise DatasetError(
        f'{key}: no {what} file (looked for {", ".join(names)}) in {folder}; add it or name it with {what} = "..."'
    )


def source_files(name: str, options: dict[str, Any], where: str | None = None) -> dict[str, Path]:
    """The corpus, queries and qrels files the folder ``options["path"]`` is read from (``format``, default beir).

    A file option (``corpus``, ``queries``, ``qrels``) may name a file outside the folder. ``where`` (the
    dataset entry's key path) prefixes the errors.
    """
    folder = Path(options["path"]).expanduser()
    fmt = options.get("format", "beir")
    if fmt not in FORMATS:
        raise ConfigError(
            f"{option_key(where, name, 'format')}: format={fmt!r} is invalid; use one of {', '.join(FORMATS)}"
        )
    if not folder.is_dir():
        raise DatasetError(f"{option_key(where, name, 'path')}: folder {folder} does not exist; fix path")
    if fmt == "trec":
        candidates = {
            "corpus": ("corpus.jsonl", "corpus.tsv"),
            "queries": ("queries.jsonl", "queries.tsv"),
            "qrels": ("qrels", "qrels.txt", "qrels.trec"),
        }
    else:
        split = options.get("split", "test")
        candidates = {"corpus": ("corpus.jsonl",), "queries": ("queries.jsonl",), "qrels": (f"qrels/{split}.tsv",)}
    keys = {what: option_key(where, name, what if what in options else "path") for what in candidates}
    return {what: _pick(folder, options.get(what), names, what, keys[what]) for what, names in candidates.items()}


def load_user_collection(name: str, options: dict[str, Any]) -> Collection:
    """Load the folder ``options["path"]`` in ``options["format"]`` (default "beir") as ``name``."""
    files = source_files(name, options)
    trec = options.setdefault("format", "beir") == "trec"
    if not trec:
        options.setdefault("split", "test")
    docs = _docs(files["corpus"], options.get("title", True))
    queries = _queries(files["queries"])
    qrels = _qrels(files["qrels"], trec, {d.doc_id for d in docs}, {q.query_id for q in queries})
    language = options.pop("language", "en")
    return build_collection(name, language, docs, queries, qrels, options)
