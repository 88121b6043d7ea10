"""Learned fusion: a pointwise learning-to-rank combiner (scikit-learn) over the inputs' rankings.

The candidates of a query are the union of its input rankings (each cut at the experiment's depth).
Each (query, document) pair has these features, in this column order (``feature_names``):

- per input ``i``: ``score_i``, the input's score min-max normalised over the query's ranking (ranx's
  ``(s - min) / max(max - min, 1e-9)``, 0 where the input lacks the document); ``rr_i``, its reciprocal
  rank ``1 / rank`` (1-based, 0 where absent); ``present_i``, 1 where the input ranks it;
- ``query_tokens``: the query's length in tokens (``retrieval.core.tokenize``).

A pair's label is 1 when the document is judged relevant (grade > 0) for the query, else 0 (unjudged
counts as not relevant). The model (``fusion.methods.LTR_MODELS``) is scikit-learn's ``LogisticRegression`` (lbfgs,
``max_iter`` 1000) or ``HistGradientBoostingClassifier``, both seeded; a document's fused score is the
fitted model's ``decision_function`` (the log-odds: no saturation ties as ``predict_proba`` has near 1).
It is fitted only on the queries a tuned row is allowed to learn from (``execution.tuned_fusion``): a
learned fusion has no untuned grid row.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from retrieval.core import tokenize
from zerda_eval.errors import RunError
from zerda_eval.fusion.methods import score_matrix
from zerda_eval.ranking import Ranking, Run, sort_ranking, tie_break

PER_INPUT_FEATURES = ("score", "rr", "present")


def feature_names(n_inputs: int) -> list[str]:
    """The feature columns ``ltr_features`` builds for ``n_inputs`` inputs, in order."""
    return [f"{name}_{i}" for i in range(n_inputs) for name in PER_INPUT_FEATURES] + ["query_tokens"]


def ltr_features(rankings: Sequence[Ranking], query: str) -> tuple[list[str], np.ndarray]:
    """One query's candidates (first-seen order over the inputs, each in ``TIE_BREAK`` order) and their
    feature rows (``feature_names``); a rank is the position in that order, never in the list given."""
    rankings = [tie_break(ranking) for ranking in rankings]
    docs, scores, present = score_matrix(rankings, "min-max")
    column = {doc_id: j for j, doc_id in enumerate(docs)}
    reciprocal = np.zeros(scores.shape)
    for row, ranking in enumerate(rankings):
        for rank, (doc_id, _) in enumerate(ranking, start=1):
            reciprocal[row, column[doc_id]] = 1.0 / rank
    per_input = np.stack([scores, reciprocal, present.astype(np.float64)], axis=1)  # (inputs, 3, docs)
    features = per_input.reshape(-1, len(docs)).T
    length = np.full((len(docs), 1), float(len(tokenize(query))))
    return docs, np.hstack([features, length])


def training_set(
    runs: Sequence[Run], queries: Mapping[str, str], relevant: Mapping[str, set[str]], qids: Sequence[str]
) -> tuple[np.ndarray, np.ndarray]:
    """Features and binary labels of every candidate of ``qids`` (stacked in ``qids`` order)."""
    blocks, labels = [], []
    for qid in qids:
        docs, features = ltr_features([run.get(qid, []) for run in runs], queries[qid])
        blocks.append(features)
        labels.append(np.array([doc_id in relevant.get(qid, ()) for doc_id in docs], dtype=np.int64))
    width = len(feature_names(len(runs)))
    return (np.vstack(blocks) if blocks else np.zeros((0, width))), (np.concatenate(labels) if labels else np.zeros(0))


def fit_ltr(model: str, features: np.ndarray, labels: np.ndarray, seed: int, where: str) -> Any:
    """The fitted scikit-learn classifier ``model`` (``fusion.methods.LTR_MODELS``), seeded with ``seed``.

    Raises ``RunError`` naming ``where`` when the training candidates hold no relevant (or no other) pair.
    """
    if len(set(labels.tolist())) < 2:
        kind = "relevant" if not labels.any() else "non-relevant"
        raise RunError(
            f"{where}: the training queries' candidates hold no {kind} document, so the learned fusion has "
            "nothing to learn from; use more queries (fewer folds) or a deeper run"
        )
    if model == "logistic":
        from sklearn.linear_model import LogisticRegression

        estimator = LogisticRegression(max_iter=1000, random_state=seed)
    else:
        from sklearn.ensemble import HistGradientBoostingClassifier

        estimator = HistGradientBoostingClassifier(random_state=seed)
    return estimator.fit(features, labels)


def ltr_fuse(estimator: Any, runs: Sequence[Run], queries: Mapping[str, str], top_k: int | None = None) -> Run:
    """The fused run over the queries of ``runs``: each candidate scored by ``estimator.decision_function``."""
    fused = {}
    for qid in dict.fromkeys(qid for run in runs for qid in run):
        docs, features = ltr_features([run.get(qid, []) for run in runs], queries[qid])
        scores = estimator.decision_function(features).tolist() if docs else []
        fused[qid] = sort_ranking(zip(docs, scores, strict=True), top_k)
    return fused
