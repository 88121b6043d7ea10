"""Tie-aware measures equal brute force: pytrec_eval (trec_eval) on every order of the tied documents.

Small random runs (hypothesis): few distinct scores, so ties everywhere and cutoffs inside tie groups;
graded qrels, unjudged documents, judged documents not retrieved, queries with no relevant document and
queries the run misses. Each order of each query is a run of strictly decreasing scores given to
pytrec_eval (``test_measure_names.trec_eval_value``: trec_eval's measure, mapped here from the name
independently of the harness's name table); the expected value is the mean over all orders, min and
max their extremes. Agreement to 1e-9: the closed forms sum up to a few hundred float64 terms.
"""

from __future__ import annotations

import itertools
import re
from statistics import fmean

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.zerda_eval.test_measure_names import judged_rate, trec_eval_value
from zerda_eval.columnar import from_run
from zerda_eval.datasets.collection import Collection
from zerda_eval.evaluation.measures import KERNEL_FAMILIES, evaluate_run, parse_measure
from zerda_eval.evaluation.tie_aware import EXPECTED, HIGH, LOW, tie_aware_collection, tie_aware_run

NAMES = [
    *("nDCG@1", "nDCG@3", "nDCG", "ndcg@2", "AP@2", "AP@4", "AP", "AP(rel=2)", "map@3"),
    *("RR@1", "RR@3", "RR", "RR(rel=2)@4", "mrr@2", "R@2", "R(rel=2)@3", "recall@4"),
    *("P@1", "P@3", "P(rel=2)@2", "precision@5", "Success@1", "Success@3", "Success(rel=3)@4"),
    *("Judged@2", "Judged@5", "Rprec", "Rprec(rel=2)", "Bpref", "Bpref(rel=2)"),
    *("NumRet", "NumRel", "NumRel(rel=2)", "NumRelRet", "NumRelRet(rel=2)"),
]
TREC_EVAL = {  # name -> (trec_eval measure with {k} for the cutoff, or without one, and whether to cut the run)
    "nDCG": ("ndcg_cut.{k}", "ndcg", False),
    "ndcg": ("ndcg_cut.{k}", "ndcg", False),
    "AP": ("map_cut.{k}", "map", False),
    "map": ("map_cut.{k}", "map", False),
    "RR": ("recip_rank", "recip_rank", True),
    "mrr": ("recip_rank", "recip_rank", True),
    "R": ("recall.{k}", None, False),
    "recall": ("recall.{k}", None, False),
    "P": ("P.{k}", None, False),
    "precision": ("P.{k}", None, False),
    "Success": ("success.{k}", None, False),
    "Rprec": (None, "Rprec", False),
    "Bpref": (None, "bpref", False),
    "NumRet": (None, "num_ret", False),
    "NumRel": (None, "num_rel", False),
    "NumRelRet": (None, "num_rel_ret", False),
}
NAME = re.compile(r"^(?P<base>[A-Za-z]+)(?:\(rel=(?P<rel>\d+)\))?(?:@(?P<k>\d+))?$")
TOLERANCE = 1e-9


def reference(name: str, rankings: dict[str, list], qrels: dict[str, dict[str, int]]) -> dict[str, float]:
    """pytrec_eval's value of ``name`` for each ranking (each taken in its list order)."""
    match = NAME.match(name)
    base, k = match["base"], int(match["k"]) if match["k"] else None
    level = int(match["rel"] or 1)
    if base == "Judged":
        return judged_rate(rankings, qrels, k)
    with_k, without_k, cut = TREC_EVAL[base]
    measure = with_k.format(k=k) if k is not None and with_k else without_k or with_k
    key = measure.replace(".", "_")
    return trec_eval_value(rankings, qrels, measure, key, k if cut else None, level)


def every_order(ranking: list[tuple[str, float]]) -> list[list[tuple[str, float]]]:
    """Every ranking that permutes the documents within each group of equal scores (score order kept)."""
    ordered = sorted(ranking, key=lambda pair: -pair[1])
    groups = [list(group) for _, group in itertools.groupby(ordered, key=lambda pair: pair[1])]
    return [list(itertools.chain.from_iterable(p)) for p in itertools.product(*map(itertools.permutations, groups))]


def brute_force(run: dict, qrels: dict, name: str) -> dict[str, tuple[float, float, float]]:
    """Per query: (mean, min, max) of pytrec_eval's value over every order of its tied documents."""
    out = {}
    for qid, docs in qrels.items():
        orders = every_order(run.get(qid, [])) or [[]]
        fake = {f"{qid}#{i}": order for i, order in enumerate(orders)}
        values = list(reference(name, fake, dict.fromkeys(fake, docs)).values())
        out[qid] = (fmean(values), min(values), max(values))
    return out


@st.composite
def runs_and_qrels(draw) -> tuple[dict, dict]:
    """1-3 queries over 8 documents: 0-6 retrieved with scores from 3 values; grades 0-3 or unjudged."""
    docs = [f"d{i}" for i in range(8)]
    run, qrels = {}, {}
    for q in range(draw(st.integers(1, 3))):
        qid = f"q{q}"
        grades = draw(st.lists(st.sampled_from([None, 0, 0, 1, 2, 3]), min_size=len(docs), max_size=len(docs)))
        qrels[qid] = {doc: grade for doc, grade in zip(docs, grades, strict=True) if grade is not None}
        if not qrels[qid]:
            qrels[qid] = {"d7": 0}  # judged, nothing relevant
        retrieved = draw(st.permutations(docs))[: draw(st.integers(0, 6))]
        if retrieved:
            scores = draw(st.lists(st.sampled_from([0.5, 1.0, 2.0]), min_size=len(retrieved), max_size=len(retrieved)))
            run[qid] = list(zip(retrieved, scores, strict=True))
    return run, qrels


@settings(max_examples=60, deadline=None)
@given(runs_and_qrels())
def test_expected_min_and_max_equal_every_order_through_trec_eval(case) -> None:
    run, qrels = case
    computed = tie_aware_run(run, qrels, NAMES)
    for name in NAMES:
        for qid, (mean, low, high) in brute_force(run, qrels, name).items():
            got = (computed[EXPECTED][name][qid], computed[LOW][name][qid], computed[HIGH][name][qid])
            assert np.allclose(got, (mean, low, high), rtol=0, atol=TOLERANCE), (name, qid, got, (mean, low, high))


def test_the_names_cover_every_family() -> None:
    assert {parse_measure(name).family for name in NAMES} == set(KERNEL_FAMILIES)


def test_a_large_tie_group_with_the_cutoff_inside() -> None:
    """20 tied documents, 3 relevant, cut at 5: each closed form against pytrec_eval on 4,000 random orders
    (sampling error ~1/sqrt(4000) of the spread; the exact brute force would need 20! orders)."""
    rng = np.random.default_rng(0)
    docs = [f"d{i:02d}" for i in range(20)]
    qrels = {"q": {"d03": 1, "d11": 2, "d17": 1, "d05": 0, "d06": 0}}
    run = {"q": [("x", 9.0)] + [(doc, 1.0) for doc in docs]}  # one unjudged doc above the group
    names = ["AP@5", "AP", "RR@5", "nDCG@5", "P@5", "Success@5", "Bpref", "Judged@5"]
    computed = tie_aware_run(run, qrels, names)[EXPECTED]
    orders = {f"q#{i}": [run["q"][0]] + [run["q"][1 + j] for j in rng.permutation(20)] for i in range(4000)}
    for name in names:
        sampled = np.array(list(reference(name, orders, dict.fromkeys(orders, qrels["q"])).values()))
        assert abs(computed[name]["q"] - sampled.mean()) < 4 * sampled.std() / np.sqrt(sampled.size) + 1e-12, name


def test_without_ties_all_three_are_the_ranking_s_value() -> None:
    run = {"q": [("a", 3.0), ("b", 2.0), ("c", 1.0)], "r": [("c", 1.0)]}
    qrels = {"q": {"b": 1, "c": 2, "z": 1}, "r": {"a": 1}}
    single = evaluate_run(run, qrels, NAMES)
    bounds = tie_aware_run(run, qrels, NAMES)
    for bound in (EXPECTED, LOW, HIGH):
        for name in NAMES:
            assert bounds[bound][name] == pytest.approx(single[name], abs=1e-15), (bound, name)


def test_a_no_answer_question_scores_the_same_in_every_order() -> None:
    """Qur'an QA: the task rule (exactly ["-1"]) is order-free; answerable questions are tie-aware."""
    collection = Collection(
        "quran",
        "ar",
        ["-1", "a", "b"],
        ["", "x", "y"],
        {"q1": "...", "q2": "..."},
        {"q1": {"a": 1}, "q2": {"-1": 1}},
        no_answer_qids=frozenset({"q2"}),
    )
    run = {"q1": [("a", 1.0), ("b", 1.0)], "q2": [("-1", 1.0)]}
    means = tie_aware_collection(run, collection, ["q1", "q2"], ["RR@10"])
    assert means["RR@10"] == {EXPECTED: (0.75 + 1.0) / 2, LOW: (0.5 + 1.0) / 2, HIGH: 1.0}
    assert means["answerable:RR@10"] == {EXPECTED: 0.75, LOW: 0.5, HIGH: 1.0}


class TiedSystem:
    """A toy system (the Python API) that scores every document by the query's word count in it, so most tie."""

    version = "1"

    def __init__(self, docs: dict[str, str]) -> None:
        self.docs = docs

    def search(self, query_text: str, k: int) -> list[tuple[str, float]]:
        words = set(query_text.split())
        scored = [(doc, float(len(words & set(text.split())))) for doc, text in self.docs.items()]
        return sorted(scored, key=lambda pair: -pair[1])[:k]


def test_each_cell_records_the_expected_value_and_range_and_the_table_carries_them(tmp_path) -> None:
    import json
    import tomllib

    from tests.conftest import experiment_header, write_trec_folder
    from zerda_eval import Experiment

    docs = {f"d{i}": text for i, text in enumerate(["a b", "a c", "b c", "a", "b", "c", "a b c", "x"])}
    queries = {"q1": "a b", "q2": "c", "q3": "x y"}
    qrels = [("q1", "d0", 2), ("q1", "d4", 1), ("q1", "d5", 0), ("q2", "d5", 1), ("q2", "d1", 1), ("q3", "d3", 1)]
    data = write_trec_folder(tmp_path / "data", docs, queries, qrels)
    measures = ["nDCG@3", "AP", "RR@2", "P@2"]
    mapping = tomllib.loads(experiment_header(tmp_path, "ties", json.dumps(measures)))
    mapping["datasets"] = [{"name": "tiny", "path": str(data), "format": "trec"}]
    system = TiedSystem(docs)
    results = Experiment.from_dict(mapping, systems={"tied": system}).run(progress=False)
    result = json.loads((results.run_dir / "cells" / results.cell_id("tied") / "result.json").read_text())
    run = {qid: system.search(text, 10) for qid, text in queries.items()}
    judged = {}
    for qid, doc, grade in qrels:
        judged.setdefault(qid, {})[doc] = grade
    row = results.table.set_index("system").loc["tied"]
    for name in measures:
        per_query = brute_force(run, judged, name).values()
        expected, low, high = (fmean(values) for values in zip(*per_query, strict=True))
        assert result["tie_aware"][name] == pytest.approx({EXPECTED: expected, LOW: low, HIGH: high}, abs=1e-12)
        assert [row[f"{name} {bound}"] for bound in (EXPECTED, LOW, HIGH)] == pytest.approx([expected, low, high])
        assert low <= row[name] <= high
    assert high - low > 1e-3  # the check above is not vacuous: this run's ties move the last measure


@settings(max_examples=40, deadline=None)
@given(runs_and_qrels())
def test_a_columnar_run_has_the_bounds_of_the_same_run_as_lists(case) -> None:
    run, qrels = case  # the grid's cells hand over ColumnarRuns; brute force above checks the list path
    assert tie_aware_run(from_run(run), qrels, NAMES) == tie_aware_run(run, qrels, NAMES)
