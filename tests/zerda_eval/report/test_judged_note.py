"""The report's note that Judged@k cannot differ from P@k: given exactly when the judgements hold no non-relevant
document, and true then (Judged@10 by our kernel against trec_eval's P@10 through pytrec_eval)."""

from __future__ import annotations

import random
from types import SimpleNamespace

import pytest
import pytrec_eval

from zerda_eval.errors import DatasetError
from zerda_eval.evaluation.measures import evaluate_run
from zerda_eval.report.document import judged_note

MEASURES = ["ndcg@10", "P@10", "Judged@10", "answerable:map@10"]


def collection(qrels):
    return SimpleNamespace(qrels=qrels)


def test_the_note_names_the_pair_when_every_judged_document_is_relevant():
    note = judged_note(MEASURES, collection({"q1": {"d1": 1, "d2": 3}, "q2": {"d5": 2}}))
    assert note is not None and note.startswith("Judged@10 and P@10 cannot differ here")


def test_no_note_with_a_judged_non_relevant_document_a_missing_pair_or_no_collection():
    assert judged_note(MEASURES, collection({"q1": {"d1": 1, "d2": 0}})) is None
    assert judged_note(["Judged@10", "P@5"], collection({"q1": {"d1": 1}})) is None
    assert judged_note(["Judged@10", "P(rel=2)@10"], collection({"q1": {"d1": 2}})) is None
    assert judged_note(MEASURES, DatasetError("not here")) is None


def test_what_the_note_says_holds_against_trec_eval():
    rng = random.Random(7)
    docs = [f"d{i}" for i in range(60)]
    qrels = {f"q{q}": {d: rng.randint(1, 3) for d in rng.sample(docs, 8)} for q in range(20)}
    run = {q: {d: rng.random() for d in rng.sample(docs, 15)} for q in qrels}
    assert judged_note(["Judged@10", "P@10"], collection(qrels)) is not None
    ours = evaluate_run({q: list(scores.items()) for q, scores in run.items()}, qrels, ["Judged@10"])["Judged@10"]
    trec = pytrec_eval.RelevanceEvaluator(qrels, {"P_10"}).evaluate(run)
    assert ours == pytest.approx({q: trec[q]["P_10"] for q in qrels}, abs=1e-12) and len(set(ours.values())) > 1
