"""zerda_eval.fusion.methods against hand-computed fusions and against the seed retrievers' own outputs."""

from __future__ import annotations

import numpy as np
import pytest

from retrieval.zerda.config import ContextEngineConfig, RetrieverConfig
from retrieval.zerda.models import DocumentChunk
from retrieval.zerda.retriever import HybridRetriever, KeywordRetriever, VectorRetriever
from tests.conftest import trec_order
from zerda_eval.errors import ConfigError, RunError
from zerda_eval.fusion import FUSION_METHODS, fuse_runs, resolve_fusion_params

RANX_NORMS = {"min-max": "min-max", "z-score": "zmuv", "none": None}  # our score_norm names -> ranx's

A = {"q1": [("d1", 3.0), ("d2", 2.0), ("d3", 1.0)], "q2": [("d5", 1.0)]}
RANX_KERNELS = pytest.mark.slow  # ranx's fusion kernels: about a minute of numba compiling per process here
B = {"q1": [("d3", 0.9), ("d4", 0.5), ("d1", 0.1)], "q2": [("d5", 0.4), ("d6", 0.2)]}


def scores(run: dict, qid: str) -> dict[str, float]:
    return dict(run[qid])


def test_rrf_matches_hand_computation_for_every_k():
    for k in (1, 10, 60, 100):
        fused = scores(fuse_runs("rrf", [A, B], k=k), "q1")
        assert fused["d1"] == pytest.approx(1 / (k + 1) + 1 / (k + 3))
        assert fused["d3"] == pytest.approx(1 / (k + 3) + 1 / (k + 1))
        assert fused["d2"] == pytest.approx(1 / (k + 2))
        assert fused["d4"] == pytest.approx(1 / (k + 2))


@RANX_KERNELS
def test_rrf_equals_ranx_rrf():
    from ranx import Run, fuse

    ours = fuse_runs("rrf", [A, B], k=20)
    theirs = fuse(
        [Run({q: dict(r) for q, r in run.items()}) for run in (A, B)],
        norm=None,
        method="rrf",
        params={"k": 20},
    ).to_dict()
    assert set(ours) == set(theirs)
    for qid, ranking in ours.items():
        assert dict(ranking) == pytest.approx(theirs[qid])


def test_weighted_rrf_and_pipeline_rrf_is_min_max_normalised_weighted_rrf():
    weighted = scores(fuse_runs("rrf", [A, B], k=60, weights=[1.0, 2.0]), "q1")
    assert weighted["d4"] == pytest.approx(2 / 62)
    pipeline = scores(fuse_runs("pipeline_rrf", [A, B], k=60, weights=[1.0, 2.0]), "q1")
    # rrf_fuse's min-max over the returned set: d3 = 1/63 + 2/61 is the best, d2 = 1/62 the last
    best, last = 1 / 63 + 2 / 61, 1 / 62
    assert pipeline == pytest.approx({doc: (value - last) / (best - last) for doc, value in weighted.items()})
    assert (pipeline["d3"], pipeline["d2"]) == (1.0, 0.0)


def test_pipeline_rrf_top_k_normalises_over_the_kept_documents():
    """``top_k`` goes into ``rrf_fuse`` itself, whose min-max range is the returned set (seed 004, issue 18)."""
    pipeline = fuse_runs("pipeline_rrf", [A, B], k=60, weights=[1.0, 2.0], top_k=2)["q1"]
    assert pipeline == [("d3", 1.0), ("d1", 0.0)]  # d1 = 1/61 + 2/63 is the last of the two kept
    assert fuse_runs("pipeline_rrf", [A, B], k=60, top_k=1)["q2"] == [("d5", 1.0)]  # a single item scores 1.0


@RANX_KERNELS
def test_combsum_and_combmnz_with_min_max():
    # min-max per query: A q1 -> d1 1, d2 .5, d3 0; B q1 -> d3 1, d4 .5, d1 0
    combsum = scores(fuse_runs("combsum", [A, B]), "q1")
    assert combsum == pytest.approx({"d1": 1.0, "d2": 0.5, "d3": 1.0, "d4": 0.5})
    combmnz = scores(fuse_runs("combmnz", [A, B]), "q1")
    assert combmnz == pytest.approx({"d1": 2.0, "d2": 0.5, "d3": 2.0, "d4": 0.5})


@RANX_KERNELS
@pytest.mark.parametrize("score_norm", ["min-max", "z-score", "none"])
def test_wsum_matches_numpy_normalisation(score_norm):
    def normalise(ranking):
        values = np.array([s for _, s in ranking])
        if score_norm == "min-max":
            values = (values - values.min()) / (values.max() - values.min())
        elif score_norm == "z-score":
            values = (values - values.mean()) / values.std()
        return {d: v for (d, _), v in zip(ranking, values, strict=True)}

    a, b = normalise(A["q1"]), normalise(B["q1"])
    fused = scores(fuse_runs("wsum", [A, B], score_norm=score_norm, weights=[0.3, 0.7]), "q1")
    expected = {d: 0.3 * a.get(d, 0.0) + 0.7 * b.get(d, 0.0) for d in set(a) | set(b)}
    assert fused == pytest.approx(expected)


def test_ties_broken_by_doc_id_descending_and_top_k_cuts():
    run = fuse_runs("rrf", [{"q": [("b", 1.0), ("a", 0.5)]}, {"q": [("a", 1.0), ("b", 0.5)]}], top_k=1)
    assert run == {"q": [("b", pytest.approx(1 / 61 + 1 / 62))]}  # "a" and "b" tie; "b" first, as trec_eval


def test_query_missing_from_one_run_is_fused_with_an_empty_list():
    fused = fuse_runs("zerda", [A, {"q1": B["q1"]}])
    assert [d for d, _ in fused["q2"]] == ["d5"]


def test_runs_sharing_no_query_are_refused():
    with pytest.raises(RunError, match=r"input runs share no query id \(run 1: 'x'; run 2: 'y'\); fuse runs of"):
        fuse_runs("rrf", [{"x": [("d", 1.0)]}, {"y": [("e", 1.0)]}])


def test_resolved_params_record_method_score_norm_k_weights():
    assert resolve_fusion_params("wsum", {"weights": [0.2, 0.8]}) == {
        "method": "wsum",
        "score_norm": "min-max",
        "weights": [0.2, 0.8],
        "top_k": None,
    }
    assert resolve_fusion_params("rrf", {})["k"] == 60
    assert set(FUSION_METHODS) == {"rrf", "combsum", "combmnz", "wsum", "zerda", "pipeline_rrf", "ltr"}


@pytest.mark.parametrize(
    ("method", "params", "needle"),
    [
        ("rff", {}, "did you mean 'rrf'"),
        ("rrf", {"kk": 3}, "did you mean 'k'"),
        ("wsum", {"score_norm": "zscore"}, "'min-max', 'z-score', 'none'"),
        ("zerda", {"rrf_order": "fix"}, "'as_documented', 'fixed'"),
        ("rrf", {"k": -1}, "rrf.k: invalid value -1"),
        ("wsum", {"weights": "0.5"}, "list of numbers"),
    ],
)
def test_bad_params_are_one_line_config_errors(method, params, needle):
    with pytest.raises(ConfigError, match=needle) as info:
        resolve_fusion_params(method, params, where="exp.toml [[fusions]] 'x'")
    assert "exp.toml" in str(info.value) and "\n" not in str(info.value)


def test_weights_must_match_runs():
    with pytest.raises(ConfigError, match="3 weights for 2 input runs"):
        fuse_runs("rrf", [A, B], weights=[1, 1, 1])


TEXTS = [
    "linear regression fits a line to data",
    "neural networks learn representations of data",
    "the regression line minimises squared error",
    "gradient descent trains neural networks",
    "data cleaning before regression",
    "a line is straight",
]


def embed(text: str) -> np.ndarray:
    """Deterministic non-negative bag-of-letters vector (enough to give a distinct vector ranking)."""
    vector = np.zeros(26)
    for char in text.lower():
        if "a" <= char <= "z":
            vector[ord(char) - 97] += 1
    return vector


@pytest.mark.parametrize("rrf_order", ["as_documented", "fixed"])
def test_zerda_fusion_reproduces_the_seed_hybrid_retriever(rrf_order):
    """Fusing the two branch runs gives HybridRetriever's own composite scores and order.

    The seed lists tied branch hits in corpus order, the harness ranks them by doc id descending
    (trec_eval's order, from the scores, never from a list's order); the ids here descend with the corpus
    position, so both orders are one and the RRF bonus of every hit agrees."""
    chunks = [DocumentChunk(text=t, doc_id=f"d{len(TEXTS) - i}") for i, t in enumerate(TEXTS)]
    config = ContextEngineConfig(retriever=RetrieverConfig(rrf_order=rrf_order))
    vector = VectorRetriever(config)
    vector.index_chunks(chunks, embed)
    keyword = KeywordRetriever(config, chunks)
    hybrid = HybridRetriever(config, vector_retriever=vector, keyword_retriever=keyword)
    for query in ("regression line", "neural data", "straight line data"):
        top_k = 3
        vec_run = {"q": [(h.doc_id, h.vector_score) for h in vector.retrieve(query, top_k * 2)]}
        kw_run = {"q": [(h.doc_id, h.keyword_score) for h in keyword.retrieve(query, top_k * 2)]}
        fused = fuse_runs("zerda", [vec_run, kw_run], rrf_order=rrf_order, top_k=top_k)["q"]
        expected = [(h.doc_id, h.composite_score) for h in hybrid.retrieve(query, top_k=top_k)]
        assert [d for d, _ in fused] == [d for d, _ in expected]
        assert [s for _, s in fused] == pytest.approx([s for _, s in expected])


def test_zerda_orders_differ_exactly_by_the_bonus():
    documented = scores(fuse_runs("zerda", [A, B], rrf_order="as_documented", weights=[0.5, 0.5]), "q1")
    fixed = scores(fuse_runs("zerda", [A, B], rrf_order="fixed", weights=[0.5, 0.5]), "q1")
    assert documented["d1"] == pytest.approx(0.5 * 3.0 + 0.5 * 0.1)
    rrf = {"d1": 1 / 61 + 1 / 63, "d2": 1 / 62, "d3": 1 / 63 + 1 / 61, "d4": 1 / 62}
    for doc, value in rrf.items():
        assert fixed[doc] - documented[doc] == pytest.approx(0.2 * value / max(rrf.values()))


@pytest.fixture(scope="module")
def two_real_runs():
    """Top-100 of 60 SciFact queries by two BM25 settings: overlapping, differently scored lists."""
    from retrieval.core import tokenize
    from retrieval.core.bm25_fast import SparseBM25
    from zerda_eval.datasets import load_collection

    collection = load_collection("beir/scifact/test")
    tokens = [tokenize(text) for text in collection.texts]
    qids = list(collection.queries)[:60]
    runs = []
    for k1, b in ((1.5, 0.75), (0.6, 0.2)):
        docs, values = (
            SparseBM25(k1=k1, b=b).fit(tokens).top_k_batch([tokenize(collection.queries[q]) for q in qids], 100)
        )
        runs.append(
            {
                qid: [(collection.doc_ids[d], float(s)) for d, s in zip(docs[i], values[i], strict=True)]
                for i, qid in enumerate(qids)
            }
        )
    return runs


@RANX_KERNELS
@pytest.mark.parametrize("method", ["combsum", "combmnz", "wsum"])
@pytest.mark.parametrize("score_norm", ["min-max", "z-score", "none"])
@pytest.mark.filterwarnings("ignore::numba.core.errors.NumbaTypeSafetyWarning")  # inside ranx, the reference
def test_combinations_equal_ranx_fuse_on_real_runs(two_real_runs, method, score_norm):
    from ranx import Run, fuse

    params = {"weights": [0.3, 0.7]} if method == "wsum" else {}
    ours = fuse_runs(method, two_real_runs, score_norm=score_norm, **params)
    ranx_method = {"combsum": "sum", "combmnz": "mnz", "wsum": "wsum"}[method]
    theirs = fuse(
        [Run({q: dict(r) for q, r in run.items()}) for run in two_real_runs],
        norm=RANX_NORMS[score_norm],
        method=ranx_method,
        params=params,
    ).to_dict()
    assert ours.keys() == theirs.keys()
    for qid, ranking in ours.items():
        assert dict(ranking) == pytest.approx(theirs[qid], rel=1e-12, abs=1e-12), qid


C = {"q1": [("d4", 7.0), ("d2", 5.0)], "q3": [("d9", 1.0)]}  # a third input: partial overlap, one query of its own


def test_three_inputs_fuse_as_the_hand_formulas_say():
    """RRF, CombSUM, CombMNZ, weighted sum and seed 000's fusion over three runs, computed here by hand."""
    k = 10
    rrf = scores(fuse_runs("rrf", [A, B, C], k=k), "q1")
    assert rrf == pytest.approx(
        {
            "d1": 1 / (k + 1) + 1 / (k + 3),
            "d2": 1 / (k + 2) + 1 / (k + 2),
            "d3": 1 / (k + 3) + 1 / (k + 1),
            "d4": 1 / (k + 2) + 1 / (k + 1),
        }
    )
    # min-max per query and input: A (3, 2, 1) -> (1, .5, 0); B (.9, .5, .1) -> (1, .5, 0); C (7, 5) -> (1, 0)
    a, b, c = {"d1": 1.0, "d2": 0.5, "d3": 0.0}, {"d3": 1.0, "d4": 0.5, "d1": 0.0}, {"d4": 1.0, "d2": 0.0}
    weights = [0.5, 0.3, 0.2]
    wsum = scores(fuse_runs("wsum", [A, B, C], weights=weights), "q1")
    assert wsum == pytest.approx(
        {
            d: weights[0] * a.get(d, 0) + weights[1] * b.get(d, 0) + weights[2] * c.get(d, 0)
            for d in ("d1", "d2", "d3", "d4")
        }
    )
    combsum = scores(fuse_runs("combsum", [A, B, C]), "q1")
    assert combsum == pytest.approx({d: a.get(d, 0) + b.get(d, 0) + c.get(d, 0) for d in ("d1", "d2", "d3", "d4")})
    holders = {"d1": 2, "d2": 2, "d3": 2, "d4": 2}
    combmnz = scores(fuse_runs("combmnz", [A, B, C]), "q1")
    assert combmnz == pytest.approx({d: combsum[d] * holders[d] for d in holders})
    fixed = scores(fuse_runs("zerda", [A, B, C], rrf_order="fixed", weights=[1.0, 1.0, 1.0], k=k), "q1")
    raw = {"d1": 3.0 + 0.1, "d2": 2.0 + 5.0, "d3": 1.0 + 0.9, "d4": 0.5 + 7.0}  # score_norm "none": raw scores
    top = max(rrf.values())
    assert fixed == pytest.approx({d: raw[d] + 0.20 * rrf[d] / top for d in raw})
    assert scores(fuse_runs("rrf", [A, B, C]), "q3") == pytest.approx({"d9": 1 / 61})  # a query one input holds


# --- the order: ranks from the scores (trec_eval's tie-break), never from a container's order ----------

RANK_METHODS = {
    "rrf": {"k": 10},
    "pipeline_rrf": {"k": 10},
    "zerda": {"rrf_order": "fixed"},
    "combsum": {},
    "combmnz": {},
    "wsum": {"weights": [0.3, 0.7]},
}


def tied_runs(seed: int, n_runs: int = 2) -> list[dict[str, dict[str, float]]]:
    """Runs as ranx-style dicts in a shuffled (not score) order, with many tied scores and odd ids."""
    rng = np.random.default_rng(seed)
    ids = [f"d{i}" for i in range(25)] + ["D7", "é", "z"]
    runs = []
    for _ in range(n_runs):
        run = {}
        for qid in ("q1", "q2", "q3"):
            docs = rng.choice(ids, size=int(rng.integers(2, 15)), replace=False).tolist()
            run[qid] = {doc: float(rng.integers(0, 4)) / 2 for doc in docs}
        runs.append(run)
    return runs


def sorted_runs(runs: list[dict[str, dict[str, float]]]) -> list[dict[str, dict[str, float]]]:
    return [{qid: dict(trec_order(scored)) for qid, scored in run.items()} for run in runs]


@pytest.mark.parametrize("method", list(RANK_METHODS))
@pytest.mark.parametrize("seed", range(3))
def test_fusion_of_runs_in_any_order_equals_fusion_of_runs_in_score_order(method, seed):
    """A dict's insertion order (or a file's line order) is never a rank: values AND order agree."""
    runs = tied_runs(seed)
    given = [{qid: list(scored.items()) for qid, scored in run.items()} for run in runs]
    ordered = [{qid: list(scored.items()) for qid, scored in run.items()} for run in sorted_runs(runs)]
    fused = fuse_runs(method, given, **RANK_METHODS[method])
    assert fused == fuse_runs(method, ordered, **RANK_METHODS[method])
    for ranking in fused.values():
        assert ranking == trec_order(dict(ranking))  # the fused run itself in trec_eval's order


@pytest.mark.parametrize("seed", range(3))
def test_rrf_equals_the_definition_on_ranks_from_scores(seed):
    """RRF by hand: a doc's 1-based rank is its place in trec_eval's order of its run's scores."""
    runs = tied_runs(seed, n_runs=3)
    fused = fuse_runs("rrf", [{q: list(s.items()) for q, s in run.items()} for run in runs], k=5, weights=[1, 2, 0.5])
    for qid in ("q1", "q2", "q3"):
        expected: dict[str, float] = {}
        for weight, run in zip([1, 2, 0.5], runs, strict=True):
            for rank, (doc, _) in enumerate(trec_order(run[qid]), start=1):
                expected[doc] = expected.get(doc, 0.0) + weight / (5 + rank)
        assert [d for d, _ in fused[qid]] == [d for d, _ in trec_order(expected)]
        assert dict(fused[qid]) == pytest.approx(expected, abs=1e-15)


@pytest.mark.parametrize("method", list(RANK_METHODS))
def test_a_non_finite_score_is_refused_by_every_method(method):
    bad = {"q1": [("d1", 1.0), ("d2", float("nan"))]}
    with pytest.raises(RunError, match=r"input run 2, query 'q1': non-finite score nan for document 'd2'"):
        fuse_runs(method, [A, bad], **RANK_METHODS[method])


@pytest.mark.parametrize("method", ["rrf", "wsum", "zerda", "pipeline_rrf"])
def test_all_zero_weights_are_refused(method):
    with pytest.raises(ConfigError, match=rf"{method}.weights are all 0 \(\[0.0, 0.0\]\).*at least one positive"):
        fuse_runs(method, [A, B], weights=[0.0, 0.0])


def test_a_doc_listed_twice_in_an_input_is_refused():
    twice = {"q1": [("d1", 1.0), ("d1", 0.5)]}
    with pytest.raises(RunError, match=r"input run 1, query 'q1': document 'd1' is listed 2 times"):
        fuse_runs("rrf", [twice, B])


RANX_METHODS = {"rrf": ("rrf", {"k": 10}), "combsum": ("sum", {}), "combmnz": ("mnz", {})}
RANX_METHODS["wsum"] = ("wsum", {"weights": [0.3, 0.7]})


@RANX_KERNELS
@pytest.mark.parametrize("method", list(RANX_METHODS))
@pytest.mark.parametrize("seed", range(2))
def test_fusion_equals_ranx_fuse_on_runs_in_any_order(method, seed):
    """ranx keeps insertion order among tied scores, so it is fed the runs already in trec_eval's order;
    the harness gets them shuffled. Values equal to 1e-12; the order is the fused scores' trec_eval order."""
    from ranx import Run, fuse

    runs = tied_runs(seed)
    ranx_name, params = RANX_METHODS[method]
    norm = "min-max" if method != "rrf" else None
    theirs = fuse([Run(run) for run in sorted_runs(runs)], norm=norm, method=ranx_name, params=params).to_dict()
    ours = fuse_runs(method, [{q: list(s.items()) for q, s in run.items()} for run in runs], **params)
    assert ours.keys() == theirs.keys()
    for qid, ranking in ours.items():
        assert dict(ranking) == pytest.approx(theirs[qid], abs=1e-12)
        assert [d for d, _ in ranking] == [d for d, _ in trec_order(theirs[qid])]
