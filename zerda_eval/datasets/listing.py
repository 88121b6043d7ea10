"""``list_datasets``: the table behind ``zerda-eval datasets``, counted from the real records."""

from __future__ import annotations

from typing import TYPE_CHECKING

from zerda_eval.datasets.bundled import BUNDLED
from zerda_eval.datasets.opening import open_dataset

if TYPE_CHECKING:
    import pandas as pd

COLUMNS = ["name", "language", "docs", "queries", "judged pairs", "source", "licence"]


def list_datasets() -> pd.DataFrame:
    """One row per bundled dataset id, counting what ir_datasets yields for it.

    ``queries`` are the judged queries, ``judged pairs`` the qrels rows as published (cranfield's 225
    rows of code -1 and Qur'an QA's 30 no-answer rows included; see ``protocols`` for what
    evaluation keeps).
    """
    import pandas as pd  # imported here: listing is rare, and pandas costs ~0.7 s to import

    rows = []
    for dataset_id, spec in BUNDLED.items():
        dataset = open_dataset(dataset_id)
        qrels = list(dataset.qrels_iter())
        judged = {qrel.query_id for qrel in qrels}
        queries = sum(1 for query in dataset.queries_iter() if query.query_id in judged)
        docs = dataset.docs_count() or sum(1 for _ in dataset.docs_iter())
        rows.append([dataset_id, spec.language, docs, queries, len(qrels), spec.source, spec.licence])
    return pd.DataFrame(rows, columns=COLUMNS)
