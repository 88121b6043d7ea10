"""Qur'an QA 2023 shared task A: passage retrieval over the Thematic Qur'an Passage Collection v1.1.

Files are the organisers' originals: ``QQA23_TaskA_QPC_v1.1.tsv`` (passage id, text),
``QQA23_TaskA_{train,dev}.tsv`` (question id, text) and ``QQA23_TaskA_qrels_{train,dev}.gold`` (TREC
qrels). A qrels row with passage id ``-1`` marks a question with no answer in the Qur'an.

The task's scoring rule (Malhas et al., Qur'an QA 2023 overview): runs are cut at 10 passages; on a
no-answer question a run gets full credit iff it is exactly ``["-1"]``, else zero. Official measures:
MAP@10 (primary) and MRR@10. The rule is applied by ``zerda_eval.evaluation.no_answer`` (an evaluation
rule, beside the measures); ``answerable_only`` gives the collection without no-answer questions, for the
metrics reported beside it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path

from ir_datasets.formats import GenericDoc, GenericQuery, TrecQrel

from zerda_eval.datasets.bundled import QURAN_SPLITS
from zerda_eval.datasets.collection import Collection
from zerda_eval.datasets.paths import source_file
from zerda_eval.errors import DataFormatError

FOLDER = "quranqa23-taskA"
RUN_DEPTH = 10
OFFICIAL_MEASURES = ("map@10", "mrr@10")


def _tsv_rows(path: Path) -> Iterator[tuple[str, str]]:
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        cols = line.split("\t")
        if len(cols) != 2:
            raise DataFormatError(f"{path}:{number}: expected 'id<TAB>text', got {len(cols)} columns")
        yield cols[0], cols[1]


def _qrels_rows(path: Path) -> Iterator[TrecQrel]:
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        cols = line.split()
        if not cols:
            continue
        if len(cols) != 4 or not cols[3].lstrip("-").isdigit():
            raise DataFormatError(f"{path}:{number}: expected 'qid Q0 passage_id relevance', got {line!r}")
        yield TrecQrel(cols[0], cols[2], int(cols[3]), cols[1])


def passages() -> list[GenericDoc]:
    """The 1,266 passages of the Thematic QPC v1.1, in file order."""
    return [GenericDoc(pid, text) for pid, text in _tsv_rows(source_file(FOLDER, "QQA23_TaskA_QPC_v1.1.tsv"))]


def questions(split: str) -> list[GenericQuery]:
    """The questions of ``train``, ``dev`` or ``train+dev`` (train first), in file order."""
    return [
        GenericQuery(qid, text)
        for part in QURAN_SPLITS[split]
        for qid, text in _tsv_rows(source_file(FOLDER, f"QQA23_TaskA_{part}.tsv"))
    ]


def qrels(split: str) -> list[TrecQrel]:
    """The qrels rows of ``split``, including the ``-1`` rows of no-answer questions."""
    files = [source_file(FOLDER, f"QQA23_TaskA_qrels_{part}.gold") for part in QURAN_SPLITS[split]]
    return [row for path in files for row in _qrels_rows(path)]


def answerable_only(collection: Collection) -> Collection:
    """The collection without its no-answer questions (queries and qrels), options marked accordingly."""
    keep = [qid for qid in collection.queries if qid not in collection.no_answer_qids]
    return dataclasses.replace(
        collection,
        queries={qid: collection.queries[qid] for qid in keep},
        qrels={qid: collection.qrels[qid] for qid in keep},
        no_answer_qids=frozenset(),
        options={**collection.options, "no_answer": "drop"},
    )
