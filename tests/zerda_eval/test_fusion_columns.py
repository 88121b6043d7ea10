"""``fuse_columns`` (the compiled fusion of columnar runs) equals ``fuse_runs`` (the dict path, pinned to ranx
and the seeds in ``test_fusion.py``) to the bit and in order, for every method and parameter; and ranx's
``fuse`` itself to 1e-12 on 1,000-deep runs."""

from __future__ import annotations

import numpy as np
import pytest

from tests.conftest import trec_order
from tests.zerda_eval.test_columnar import ODD_IDS
from zerda_eval.columnar import from_run
from zerda_eval.errors import ConfigError, RunError
from zerda_eval.fusion import FUSION_METHODS
from zerda_eval.fusion.columns import KERNEL_METHODS, QueryFusion, fuse_columns
from zerda_eval.fusion.methods import LEARNED_METHODS, fuse_runs

METHODS = [method for method in FUSION_METHODS if method not in LEARNED_METHODS]
SETTINGS = [
    {},
    {"top_k": 5},
    {"weights": [0.3, 0.7, 2.0]},
    {"score_norm": "z-score"},
    {"score_norm": "none", "top_k": 3},
    {"k": 0},
    {"rrf_order": "as_documented"},
]


def tied_runs(seed: int, n_runs: int = 3) -> list[dict[str, list[tuple[str, float]]]]:
    """Shuffled runs with many tied scores, odd ids, a query missing from some runs, an empty ranking."""
    rng = np.random.default_rng(seed)
    ids = ODD_IDS + [f"f{i}" for i in range(40)]
    runs = []
    for r in range(n_runs):
        run = {}
        for q in range(8):
            if (q + r) % 5 == 0:
                continue
            docs = rng.choice(len(ids), size=int(rng.integers(0 if q == 3 else 1, 30)), replace=False).tolist()
            run[f"q{q}"] = [(ids[d], float(rng.integers(-3, 6)) / 3) for d in docs]
        runs.append(run)
    return runs


def applicable(method: str, params: dict) -> dict:
    """The subset of ``params`` that ``method`` takes."""
    return {key: value for key, value in params.items() if key in FUSION_METHODS[method]}


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("params", SETTINGS)
@pytest.mark.parametrize("seed", range(3))
def test_fuse_columns_equals_fuse_runs_to_the_bit_and_in_order(method, params, seed):
    runs = tied_runs(seed)
    params = applicable(method, params)
    if "weights" in params and method == "zerda":
        params["weights"] = [0.6, 0.3, 0.1]
    expected = fuse_runs(method, runs, **params)
    fused = fuse_columns(method, [from_run(run) for run in runs], **params)
    assert list(fused) == list(expected)
    assert fused.to_dict() == expected  # float ==: equal to the bit, order included


@pytest.mark.parametrize("method", KERNEL_METHODS)
@pytest.mark.parametrize("params", SETTINGS)
def test_query_fusion_fuses_each_query_as_fuse_runs_fuses_it_alone(method, params):
    """One query a call, in any order and again (the scratch it keeps leaks nothing), a query some or all
    inputs lack included: ``fuse_runs`` on that query's rankings, to the bit and in order."""
    runs = tied_runs(11)
    params = applicable(method, params)
    if "weights" in params and method == "zerda":
        params["weights"] = [0.6, 0.3, 0.1]
    fusion = QueryFusion(method, [from_run(run) for run in runs], **params)
    qids = [f"q{q}" for q in (5, 0, 3, 7, 1, 9, 0, 5, 2, 4, 6)]  # q9: in no input
    for qid in qids:
        expected = fuse_runs(method, [{qid: run.get(qid, [])} for run in runs], **params)[qid]
        docs, scores = fusion.fuse(qid)
        assert list(zip(fusion.doc_ids[docs].tolist(), scores.tolist(), strict=True)) == expected
    fused = fusion.run({qid: fusion.fuse(qid) for qid in reversed(qids)})
    assert fused.to_dict() == {
        qid: fuse_runs(method, [{qid: r.get(qid, [])} for r in runs], **params)[qid] for qid in reversed(qids)
    }


@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")  # the dict path overflows, as planted
def test_a_query_whose_fused_score_overflows_is_the_dict_paths_run_error():
    runs = [{"q": [("a", 1.0)], "r": [("a", 1e308)]}, {"q": [("b", 1.0)], "r": [("a", 1e308)]}]
    fusion = QueryFusion("combsum", [from_run(run) for run in runs], score_norm="none")
    assert fusion.doc_ids[fusion.fuse("q")[0]].tolist() == ["b", "a"]
    with pytest.raises(RunError) as expected:
        fuse_runs("combsum", [{"r": run["r"]} for run in runs], score_norm="none")
    with pytest.raises(RunError) as caught:
        fusion.fuse("r")
    assert str(caught.value) == str(expected.value)


def test_pipeline_rrf_is_not_the_kernels():
    assert "pipeline_rrf" not in KERNEL_METHODS
    with pytest.raises(ConfigError, match="'pipeline_rrf' is not fused by the kernel"):
        QueryFusion("pipeline_rrf", [from_run(run) for run in tied_runs(0, n_runs=2)])


@pytest.mark.parametrize("method", ["rrf", "combmnz", "zerda"])
def test_two_runs_with_the_seeds_default_weights(method):
    runs = tied_runs(7, n_runs=2)
    assert fuse_columns(method, [from_run(run) for run in runs]).to_dict() == fuse_runs(method, runs)


def test_fused_rankings_are_in_trec_eval_order():
    fused = fuse_columns("combsum", [from_run(run) for run in tied_runs(1)], score_norm="none")
    for ranking in fused.values():
        assert ranking == trec_order(ranking)


@pytest.mark.parametrize(
    ("method", "params", "runs", "error", "needle"),
    [
        ("ltr", {}, 2, ConfigError, "is learned from judged queries"),
        ("rrf", {}, 1, ConfigError, "needs at least 2 input runs"),
        ("wsum", {"weights": [1.0]}, 2, ConfigError, "1 weights for 2 input runs"),
        ("wsum", {"weights": [0.0, 0.0]}, 2, ConfigError, "weights are all 0"),
        ("rrf", {"k": -1}, 2, ConfigError, "rrf.k"),
    ],
)
def test_bad_parameters_are_the_dict_paths_errors(method, params, runs, error, needle):
    inputs = tied_runs(0)[:runs]
    with pytest.raises(error, match=needle) as caught:
        fuse_columns(method, [from_run(run) for run in inputs], **params)
    with pytest.raises(error) as expected:
        fuse_runs(method, inputs, **params)
    assert str(caught.value) == str(expected.value)


def test_runs_sharing_no_query_are_refused_as_the_dict_path_refuses():
    first, second = {"a": [("d", 1.0)]}, {"b": [("d", 1.0)]}
    with pytest.raises(RunError) as expected:
        fuse_runs("rrf", [first, second])
    with pytest.raises(RunError) as caught:
        fuse_columns("rrf", [from_run(first), from_run(second)])
    assert str(caught.value) == str(expected.value)


@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")  # the dict path overflows, as planted
def test_an_overflowing_fused_score_is_the_dict_paths_run_error():
    runs = [{"q": [("a", 1e308)]}, {"q": [("a", 1e308)]}]
    with pytest.raises(RunError) as expected:
        fuse_runs("combsum", runs, score_norm="none")
    with pytest.raises(RunError) as caught:
        fuse_columns("combsum", [from_run(run) for run in runs], score_norm="none")
    assert str(caught.value) == str(expected.value)


RANX = {"rrf": ("rrf", {"k": 60}), "combsum": ("sum", {}), "combmnz": ("mnz", {}), "wsum": ("wsum", {})}


@pytest.mark.slow  # ranx's fusion kernels: about a minute of numba compiling per process here
@pytest.mark.filterwarnings("ignore::numba.core.errors.NumbaTypeSafetyWarning")  # inside ranx, the reference
@pytest.mark.parametrize("method", list(RANX))
@pytest.mark.parametrize("score_norm", ["min-max", "z-score"])
def test_fuse_columns_equals_ranx_fuse_at_depth_1000(method, score_norm):
    """Two 20-query x 1,000-deep runs with distinct scores: ranx's values to 1e-12, the same order."""
    from ranx import Run, fuse

    rng = np.random.default_rng(5)
    runs = []
    for _ in range(2):
        run = {}
        for q in range(20):
            docs = rng.choice(5000, size=1000, replace=False)
            run[f"q{q}"] = {f"doc{d}": float(s) for d, s in zip(docs, rng.normal(size=1000), strict=True)}
        runs.append(run)
    name, params = RANX[method]
    if method == "wsum":
        params = {"weights": [0.3, 0.7]}
    norm = None if method == "rrf" else {"min-max": "min-max", "z-score": "zmuv"}[score_norm]
    theirs = fuse([Run(run) for run in runs], norm=norm, method=name, params=params).to_dict()
    ours_params = {**params} if method == "rrf" else {**params, "score_norm": score_norm}
    ours = fuse_columns(method, [from_run(run) for run in runs], **ours_params)
    assert ours.keys() == theirs.keys()  # ranx sorts its query ids
    for qid, ranking in ours.items():
        assert dict(ranking) == pytest.approx(theirs[qid], abs=1e-12, rel=0)
        assert [doc for doc, _ in ranking] == [doc for doc, _ in trec_order(list(theirs[qid].items()))]
