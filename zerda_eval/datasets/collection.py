"""The in-memory test collection every system and measure of the harness works on."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from zerda_eval.datasets.records import check_id, record_text
from zerda_eval.datasets.streamed import StreamedTexts
from zerda_eval.errors import DataFormatError, ZerdaEvalWarning

NO_ANSWER_ID = "-1"


@dataclass(frozen=True)
class Collection:
    """Corpus, queries and qrels of one dataset, with the protocol options they were loaded under.

    Collections are cached per process and shared: treat every field as read-only.
    """

    id: str
    language: str
    doc_ids: list[str]
    texts: Sequence[str]  # a list, or ``StreamedTexts`` for a corpus too large to hold
    queries: dict[str, str]
    qrels: dict[str, dict[str, int]]
    no_answer_qids: frozenset[str] = frozenset()
    options: dict[str, Any] = field(default_factory=dict)
    self_judged_pairs: int = 0  # judged (query, doc) pairs whose doc id equals the query id


def count_self_judged(dataset_id: str, qrels: dict[str, dict[str, int]], options: dict[str, Any]) -> int:
    """Judged pairs whose doc id equals the query id; warns (one line) when ``ignore_identical_ids`` drops them."""
    count = sum(qid in docs for qid, docs in qrels.items())
    if count and options.get("ignore_identical_ids"):
        warnings.warn(
            f"{dataset_id}: {count} judged pair(s) have doc id == query id and ignore_identical_ids = true "
            "removes those docs from every run; set ignore_identical_ids = false if the ids are unrelated",
            ZerdaEvalWarning,
            stacklevel=2,
        )
    return count


def build_collection(
    dataset_id: str,
    language: str,
    docs: Iterable[Any],
    queries: Iterable[Any],
    qrels: Iterable[Any],
    options: dict[str, Any],
    relevance: Callable[[int], int | None] = lambda grade: grade,
    stream_texts: bool = False,
) -> Collection:
    """Collect ir_datasets records into a ``Collection``.

    ``stream_texts`` keeps only the doc ids; the texts are then read from ir_datasets when iterated
    (``zerda_eval.datasets.streamed``). ``relevance`` maps each raw grade to the protocol's grade, or to
    None to drop the pair. Queries without any remaining judgement are left out, as trec_eval does; a
    question whose only judgement is the document ``"-1"`` is a no-answer question (Qur'an QA 2023).
    """
    doc_ids: list[str] = []
    texts: list[str] = []
    seen: set[str] = set()
    title = options.get("title", True)
    for doc in docs:
        if doc.doc_id in seen:
            raise DataFormatError(f"{dataset_id}: duplicate doc id {doc.doc_id!r}; doc ids must be unique")
        seen.add(check_id(doc.doc_id, "doc", dataset_id))
        doc_ids.append(doc.doc_id)
        if not stream_texts:
            texts.append(record_text(doc, title))
    raw: dict[tuple[str, str], int] = {}
    judged: dict[str, dict[str, int]] = {}
    for qrel in qrels:
        pair = (qrel.query_id, qrel.doc_id)
        if raw.setdefault(pair, qrel.relevance) != qrel.relevance:
            raise DataFormatError(
                f"{dataset_id}: query {pair[0]!r} judges doc {pair[1]!r} twice, {raw[pair]} and {qrel.relevance}; "
                "keep one judgement per pair"
            )
        grade = relevance(qrel.relevance)
        if grade is not None:
            judged.setdefault(qrel.query_id, {})[qrel.doc_id] = grade
    query_texts: dict[str, str] = {}
    for query in queries:
        if query.query_id in query_texts:
            raise DataFormatError(f"{dataset_id}: duplicate query id {query.query_id!r}; query ids must be unique")
        if query.query_id in judged:
            query_texts[check_id(query.query_id, "query", dataset_id)] = record_text(query)
    qrels_in_order = {qid: judged[qid] for qid in query_texts}
    no_answer = frozenset(qid for qid, docs_ in qrels_in_order.items() if set(docs_) == {NO_ANSWER_ID})
    if stream_texts:
        texts = StreamedTexts(dataset_id, doc_ids, title)
    self_judged = count_self_judged(dataset_id, qrels_in_order, options)
    return Collection(
        dataset_id, language, doc_ids, texts, query_texts, qrels_in_order, no_answer, options, self_judged
    )
