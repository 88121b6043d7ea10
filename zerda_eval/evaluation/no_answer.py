"""The Qur'an QA 2023 task A scoring rule for no-answer questions (Malhas et al., task overview).

Runs are cut at ``RUN_DEPTH`` (10) passages; on a no-answer question a run gets full credit iff it is
exactly ``["-1"]``, else zero. ``task_scores`` applies the rule to one measure's per-query values computed
on the answerable questions by any evaluator.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from zerda_eval.datasets.collection import NO_ANSWER_ID, Collection
from zerda_eval.datasets.quranqa import RUN_DEPTH


def cut_run(run: Mapping[str, Sequence[str]], depth: int = RUN_DEPTH) -> dict[str, list[str]]:
    """Each query's ranking cut to its first ``depth`` ids, as the task requires."""
    return {qid: list(ranking[:depth]) for qid, ranking in run.items()}


def no_answer_scores(run: Mapping[str, Sequence[str]], collection: Collection) -> dict[str, float]:
    """Per no-answer question: 1.0 iff its run (cut at 10) is exactly ``["-1"]``, else 0.0."""
    ranked = cut_run(run)
    return {qid: float(ranked.get(qid) == [NO_ANSWER_ID]) for qid in sorted(collection.no_answer_qids)}


def task_scores(
    answerable_values: Mapping[str, float], run: Mapping[str, Sequence[str]], collection: Collection
) -> dict[str, float]:
    """Per-query values under the task rule, for every question of ``collection``.

    ``answerable_values`` are one measure's per-query values on the answerable questions (computed on
    the run cut at 10, e.g. AP@10 or RR@10); a missing answerable question scores 0. No-answer
    questions get ``no_answer_scores``. The mean of the result is the task's official figure.
    """
    special = no_answer_scores(run, collection)
    return {qid: special[qid] if qid in special else answerable_values.get(qid, 0.0) for qid in collection.queries}
