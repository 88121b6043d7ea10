"""A user's own collection: a BEIR folder, or TREC qrels with a TSV/JSONL corpus and queries.

BEIR (``format="beir"``): ``corpus.jsonl`` (``_id``, ``title``, ``text``), ``queries.jsonl`` (``_id``,
``text``), ``qrels/<split>.tsv`` (``query-id corpus-id score``, header optional); ``split`` defaults
to "test". TREC (``format="trec"``): ``corpus.jsonl`` or ``corpus.tsv`` (``id<TAB>text`` or
``id<TAB>title<TAB>text``), ``queries.jsonl`` or ``queries.tsv``, and 4-column TREC qrels in ``qrels``,
``qrels.txt`` or ``qrels.trec``; the options ``corpus``, ``queries``, ``qrels`` name other files.
Every file must be UTF-8; any problem is a one-line error naming the file and line.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ir_datasets.formats import GenericDoc, GenericQuery, TrecQrel

from zerda_eval.datasets.collection import Collection, build_collection
from zerda_eval.errors import ConfigError, DataFormatError, DatasetError

FORMATS = ("beir", "trec")
USER_OPTIONS = ("path", "format", "split", "language", "corpus", "queries", "qrels")


def _lines(path: Path) -> Iterator[tuple[int, str]]:
    """Numbered non-blank lines of a UTF-8 file (a BOM is dropped)."""
    for number, raw in enumerate(path.read_bytes().split(b"\n"), start=1):
        try:
            line = raw.decode("utf-8").removeprefix("\ufeff").rstrip("\r")
        except UnicodeDecodeError as error:
            raise DataFormatError(
                f"{path}:{number}: not UTF-8 text ({error.reason} at byte {error.start}); re-save the file as UTF-8"
            ) from None
        if line.strip():
            yield number, line


def _records(path: Path, title: bool = True) -> Iterator[tuple[int, str, str]]:
    """(line, id, text) of a JSONL (``_id``, optional ``title``, ``text``) or TSV file.

    The text is title + " " + text when there is a title (BEIR's convention), the text alone with ``title=False``.
    """
    for number, line in _lines(path):
        if path.suffix == ".jsonl":
            try:
                row = json.loads(line)
                fields = [str(row["_id"]), row.get("title") or "", row.get("text") or ""]
            except (ValueError, KeyError, TypeError, AttributeError):
                raise DataFormatError(f"{path}:{number}: expected a JSON object with '_id' and 'text'") from None
        else:
            fields = line.split("\t")
            if len(fields) == 2:
                fields.insert(1, "")
            if len(fields) != 3:
                raise DataFormatError(f"{path}:{number}: expected 'id<TAB>text' or 'id<TAB>title<TAB>text'")
        yield number, fields[0], f"{fields[1]} {fields[2]}" if fields[1] and title else fields[2]


def _queries(path: Path) -> list[GenericQuery]:
    """Queries of a file; an empty one is an error (a wrong key would otherwise score silently 0)."""
    queries = []
    for number, qid, text in _records(path):
        if not text.strip():
            raise DataFormatError(f"{path}:{number}: query {qid!r} has no text; give it one or remove it")
        queries.append(GenericQuery(qid, text))
    return queries


def _docs(path: Path, title: bool = True) -> list[GenericDoc]:
    first_line: dict[str, int] = {}
    docs = []
    for number, doc_id, text in _records(path, title):
        if doc_id in first_line:
            raise DataFormatError(f"{path}:{number}: duplicate doc id {doc_id!r} (first on line {first_line[doc_id]})")
        first_line[doc_id] = number
        docs.append(GenericDoc(doc_id, text))
    if not docs:
        raise DataFormatError(f"{path}: no documents; add one JSON object per line with '_id' and 'text'")
    return docs


def _qrels(path: Path, trec: bool, doc_ids: set[str], query_ids: set[str]) -> list[TrecQrel]:
    expected = "'qid iter docid relevance' (4 columns)" if trec else "'query-id<TAB>corpus-id<TAB>score'"
    rows = []
    for number, line in _lines(path):
        cols = line.split() if trec else line.split("\t")
        if not trec and number == 1 and cols[0] == "query-id":
            continue
        if len(cols) != (4 if trec else 3) or not cols[-1].strip().lstrip("-").isdigit():
            raise DataFormatError(f"{path}:{number}: expected {expected}, got {line!r}")
        qid, doc_id = cols[0].strip(), cols[2 if trec else 1].strip()
        for kind, value, known in (("query", qid, query_ids), ("doc", doc_id, doc_ids)):
            if value not in known:
                raise DataFormatError(f"{path}:{number}: {kind} id {value!r} is not in the {kind} file")
        rows.append(TrecQrel(qid, doc_id, int(cols[-1]), cols[1] if trec else "0"))
    return rows


def _pick(folder: Path, given: str | None, candidates: tuple[str, ...], what: str) -> Path:
    names = (given,) if given else candidates
    for name in names:
        if (folder / name).is_file():
            return folder / name
    raise DatasetError(f"{folder}: no {what} file (looked for {', '.join(names)}); add it or name it with {what}=...")


def load_user_collection(name: str, options: dict[str, Any]) -> Collection:
    """Load the folder ``options["path"]`` in ``options["format"]`` (default "beir") as ``name``."""
    folder = Path(options["path"]).expanduser()
    fmt = options.setdefault("format", "beir")
    if fmt not in FORMATS:
        raise ConfigError(f"dataset {name!r}: format={fmt!r} is invalid; use one of {', '.join(FORMATS)}")
    if not folder.is_dir():
        raise DatasetError(f"dataset {name!r}: folder {folder} does not exist; fix path=...")
    trec = fmt == "trec"
    if trec:
        corpus = _pick(folder, options.get("corpus"), ("corpus.jsonl", "corpus.tsv"), "corpus")
        queries_file = _pick(folder, options.get("queries"), ("queries.jsonl", "queries.tsv"), "queries")
        qrels_file = _pick(folder, options.get("qrels"), ("qrels", "qrels.txt", "qrels.trec"), "qrels")
    else:
        split = options.setdefault("split", "test")
        corpus = _pick(folder, options.get("corpus"), ("corpus.jsonl",), "corpus")
        queries_file = _pick(folder, options.get("queries"), ("queries.jsonl",), "queries")
        qrels_file = _pick(folder, options.get("qrels"), (f"qrels/{split}.tsv",), "qrels")
    docs = _docs(corpus, options.get("title", True))
    queries = _queries(queries_file)
    qrels = _qrels(qrels_file, trec, {d.doc_id for d in docs}, {q.query_id for q in queries})
    language = options.pop("language", "en")
    return build_collection(name, language, docs, queries, qrels, options)
