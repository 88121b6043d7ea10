"""Issue 46 items 1-2: the in-memory API on a 5,000-query x 1,000-deep run set, ours beside ranx, wall and memory.

Stages (ours: ``zerda_eval``'s in-memory API on columnar runs; the peer: ranx, the library users reach for):
read one TREC run; evaluate 8 measures; compare 5 runs (Fisher's randomisation test, 10,000 permutations);
fuse two runs by RRF and by min-max weighted sum; optimize_fusion's weighted-sum grid (step 0.1) on nDCG@100.
Each (side, stage) runs in a fresh process (``--side --stage``): inputs are read, the stage's code is called
once on a tiny input (numba compiles and ranx's kernels stay out of the figures), Linux's peak RSS
(``VmHWM``) is reset, then the stage is timed once; the memory figure is the peak minus the RSS before the
stage. Both sides must give the same answer, which the driver asserts: the rankings of 25 sampled queries
(read, fuse: scores to 1e-12, ours in trec_eval's order of ranx's scores), every measure's mean (evaluate,
compare: 1e-12), the chosen weights (optimize_fusion; ours also holds each of 5 folds out).

Data: MS MARCO-like passage ids (numbers below 8,841,823) in per-query pools of 1,500; each run ranks its
pool by a shared relevance signal plus its own noise (distinct float64 scores, no ties, so ranx's order is
trec_eval's); qrels grade the 8 pool docs of highest signal 1-3 and judge 6 others non-relevant.

    python benchmarks/bench_columnar.py                     # 5,000 x 1,000: about 15 minutes on 2 loaded cores
    python benchmarks/bench_columnar.py --per-query --queries 1000   # the fusion cell's per-query call, in us
    ZERDA_BENCH_QUICK=1 python -m pytest benchmarks/test_bench_columnar.py   # 200 x 100, seconds
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.bench_scale import memory_mb

REPO = Path(__file__).resolve().parents[1]
SEED = 46
N_RUNS = 5
POOL = 1.5  # pool size / depth
MSMARCO_PASSAGES = 8_841_823
MEASURES = ["ndcg@10", "ndcg@100", "mrr@10", "recall@100", "recall@1000", "map@100", "map@1000", "precision@10"]
COMPARE_MEASURES = ["ndcg@10", "mrr@10", "recall@100", "map@100"]
PERMUTATIONS = 10_000
WEIGHTS = [0.3, 0.7]
TUNED_MEASURE = "ndcg@100"
SAMPLE = 25  # queries whose rankings both sides must agree on
TINY_RUN = "tiny.trec"
STAGES = ("read", "evaluate", "compare", "fuse_rrf", "fuse_wsum", "optimize_fusion")
SIDES = ("ours", "ranx")


def make_data(folder: Path, n_queries: int, depth: int) -> None:
    """``run1.trec`` .. ``run5.trec`` and ``qrels.txt`` in ``folder`` (see the module docstring)."""
    import pandas as pd

    rng = np.random.default_rng(SEED)
    pool = int(depth * POOL)
    pids = np.stack([rng.choice(MSMARCO_PASSAGES, size=pool, replace=False) for _ in range(n_queries)])
    signal = rng.normal(size=(n_queries, pool))
    qids = np.array([f"{1_000_000 + q}" for q in range(n_queries)])
    for r in range(1, N_RUNS + 1):
        scores = signal + rng.normal(scale=0.5 + 0.25 * r, size=signal.shape)
        top = np.argsort(-scores, axis=1)[:, :depth]
        rows = np.arange(n_queries)[:, None]
        frame = pd.DataFrame(
            {
                "q": np.repeat(qids, depth),
                "it": "Q0",
                "doc": pids[rows, top].ravel(),
                "rank": np.tile(np.arange(1, depth + 1), n_queries),
                "score": (scores[rows, top] * 7.0).ravel(),
                "tag": f"run{r}",
            }
        )
        frame.to_csv(folder / f"run{r}.trec", sep=" ", header=False, index=False)
    best = np.argsort(-signal, axis=1)
    lines = []
    for q in range(n_queries):
        for rank, j in enumerate(best[q, :8]):
            lines.append(f"{qids[q]} 0 {pids[q, j]} {3 - rank // 3}\n")
        for j in rng.choice(np.arange(8, pool), size=6, replace=False):
            lines.append(f"{qids[q]} 0 {pids[q, best[q, j]]} 0\n")
    (folder / "qrels.txt").write_text("".join(lines), encoding="utf-8")
    (folder / TINY_RUN).write_text("q Q0 a 1 2.5 t\nq Q0 b 2 1.5 t\n", encoding="utf-8")  # the read stage's warm-up


# --- one (side, stage) in this process --------------------------------------------------------------------


def sample_rankings(run: Any, qids: list[str]) -> dict[str, list[tuple[str, float]]]:
    """``{qid: [(doc, score), ...]}`` of ``qids`` (a ranx run's by score descending), for the answer check."""
    return {q: sorted(dict(run[q]).items(), key=lambda pair: -pair[1]) for q in qids if q in run}


def stage_ours(stage: str, folder: Path) -> tuple[Any, Any]:
    """(tiny call, timed call) of ``stage`` on our side; each returns the stage's answer."""
    import zerda_eval as ze

    paths = [folder / f"run{r}.trec" for r in range(1, N_RUNS + 1)]
    tiny_qrels = {"q": {"a": 1}}
    tiny = [{"q": [("a", 1.0), ("b", 0.5)]}, {"q": [("b", 2.0), ("c", 0.5)]}]
    if stage == "read":
        return lambda: ze.read_run(folder / TINY_RUN), lambda: ze.read_run(paths[0])
    qrels = ze.read_qrels(folder / "qrels.txt")
    runs = [ze.read_run(path) for path in paths[: N_RUNS if stage == "compare" else 2]]
    if stage == "evaluate":
        return lambda: ze.evaluate(tiny_qrels, tiny[0], MEASURES), lambda: ze.evaluate(qrels, runs[0], MEASURES)
    if stage == "compare":

        def compare(judged: Any, given: list[Any]) -> Any:
            named = {f"run{i}": run for i, run in enumerate(given, 1)}
            report = ze.compare(judged, named, "run1", COMPARE_MEASURES, tests=["fisher"], n_permutations=PERMUTATIONS)
            return report.means.to_dict(orient="index")

        return lambda: compare(tiny_qrels, tiny), lambda: compare(qrels, runs)
    if stage.startswith("fuse"):
        params = {"method": "rrf"} if stage == "fuse_rrf" else {"method": "wsum", "weights": WEIGHTS}
        return lambda: ze.fuse(tiny, **params), lambda: ze.fuse(runs, **params)
    choose = {"method": "wsum", "measure": TUNED_MEASURE, "folds": 2}
    return (
        lambda: ze.optimize_fusion({"q": {"a": 1}, "r": {"b": 1}}, [{**t, "r": t["q"]} for t in tiny], **choose),
        lambda: ze.optimize_fusion(qrels, runs, **{**choose, "folds": 5}).best_params,
    )


def stage_ranx(stage: str, folder: Path) -> tuple[Any, Any]:
    """(tiny call, timed call) of ``stage`` with ranx."""
    from ranx import Qrels, Run, compare, evaluate, fuse, optimize_fusion

    paths = [str(folder / f"run{r}.trec") for r in range(1, N_RUNS + 1)]
    tiny_qrels = Qrels({"q": {"a": 1}, "r": {"b": 1}})

    def tiny() -> list[Any]:
        return [
            Run({"q": {"a": 1.0, "b": 0.5}, "r": {"b": 1.0}}, name="t1"),
            Run({"q": {"b": 2.0}, "r": {"b": 3.0}}, name="t2"),
        ]

    if stage == "read":
        return lambda: Run.from_file(str(folder / TINY_RUN), kind="trec"), lambda: Run.from_file(paths[0], kind="trec")
    qrels = Qrels.from_file(str(folder / "qrels.txt"), kind="trec")
    runs = [Run.from_file(path, kind="trec", name=f"run{i}") for i, path in enumerate(paths, 1)][
        : N_RUNS if stage == "compare" else 2
    ]
    if stage == "evaluate":
        return lambda: evaluate(tiny_qrels, tiny()[0], MEASURES), lambda: evaluate(qrels, runs[0], MEASURES)
    if stage == "compare":

        def ranx_compare(judged: Any, given: list[Any]) -> Any:
            report = compare(judged, given, COMPARE_MEASURES, stat_test="fisher", n_permutations=PERMUTATIONS)
            return {name: dict(report.results[name]) for name in report.results}

        return lambda: ranx_compare(tiny_qrels, tiny()), lambda: ranx_compare(qrels, runs)
    if stage.startswith("fuse"):
        norm, method, params = (None, "rrf", {}) if stage == "fuse_rrf" else ("min-max", "wsum", {"weights": WEIGHTS})
        return (
            lambda: fuse(tiny(), norm=norm, method=method, params=params),
            lambda: fuse(runs, norm=norm, method=method, params=params),
        )
    choose = {"norm": "min-max", "method": "wsum", "metric": TUNED_MEASURE, "step": 0.1}
    return (
        lambda: optimize_fusion(tiny_qrels, tiny(), **choose),
        lambda: {"weights": [round(w, 10) for w in optimize_fusion(qrels, runs, **choose)["weights"]]},
    )


def run_stage(side: str, stage: str, folder: Path) -> dict[str, Any]:
    """Time ``stage`` of ``side`` once, its peak RSS beyond the inputs, and its answer (JSON-able)."""
    warnings.simplefilter("ignore")  # ranx's numba type-safety warnings
    tiny, timed = (stage_ours if side == "ours" else stage_ranx)(stage, folder)
    tiny()
    before = memory_mb()["VmRSS"]
    Path("/proc/self/clear_refs").write_text("5")  # resets VmHWM to the current RSS (Linux >= 4.0)
    start = time.perf_counter()
    answer = timed()
    wall = time.perf_counter() - start
    peak = memory_mb()["VmHWM"]
    qids = json.loads((folder / "sample.json").read_text())
    if stage == "read" or stage.startswith("fuse"):
        answer = answer.to_dict() if side == "ranx" else answer
        answer = {"rows": int(sum(len(answer[q]) for q in answer)), "sample": sample_rankings(answer, qids)}
    return {
        "side": side,
        "stage": stage,
        "wall_s": round(wall, 3),
        "rss_mb": before,
        "peak_extra_mb": round(peak - before, 1),
        "answer": answer,
    }


def per_query_fusion(folder: Path) -> dict[str, dict[str, float]]:
    """Microseconds a query of ``fusion.columns.QueryFusion.fuse`` (the step a grid's fusion cell times) fusing
    ``run1`` and ``run2`` (1,000 deep), by method: median, mean and 90th percentile over every query, after one
    untimed query; the inputs are put on one doc table first (untimed there too), that time reported apart."""
    import zerda_eval as ze
    from zerda_eval.fusion.columns import QueryFusion

    runs = [ze.read_run(folder / f"run{r}.trec") for r in (1, 2)]
    methods = {"rrf": {}, "wsum": {"weights": WEIGHTS, "score_norm": "min-max"}, "zerda": {}}
    figures = {}
    for method, params in methods.items():
        start = time.perf_counter()
        fusion = QueryFusion(method, runs, **params)
        prepare = time.perf_counter() - start
        fusion.fuse(runs[0].query_ids[0])
        spent = []
        for qid in runs[0].query_ids:
            start = time.perf_counter()
            fusion.fuse(qid)
            spent.append((time.perf_counter() - start) * 1e6)
        figures[method] = {
            "median_us": round(float(np.median(spent)), 1),
            "mean_us": round(float(np.mean(spent)), 1),
            "p90_us": round(float(np.percentile(spent, 90)), 1),
            "one_table_s": round(prepare, 3),
        }
    return figures


# --- the driver ------------------------------------------------------------------------------------------


def same_answer(stage: str, ours: Any, theirs: Any) -> None:
    """Assert both sides computed the same thing (see the module docstring)."""
    if stage in ("read", "fuse_rrf", "fuse_wsum"):
        assert ours["rows"] == theirs["rows"], (stage, ours["rows"], theirs["rows"])
        assert ours["sample"].keys() == theirs["sample"].keys()
        for qid, ranking in ours["sample"].items():
            reference = dict(theirs["sample"][qid])
            assert {doc for doc, _ in ranking} == reference.keys(), (stage, qid)
            assert max(abs(score - reference[doc]) for doc, score in ranking) <= 1e-12, (stage, qid)
            trec = sorted(sorted(reference.items(), key=lambda p: p[0].encode(), reverse=True), key=lambda p: -p[1])
            assert [doc for doc, _ in ranking] == [doc for doc, _ in trec], (stage, qid)
    elif stage == "evaluate":
        assert ours.keys() == theirs.keys()
        assert all(abs(ours[m] - theirs[m]) <= 1e-12 for m in ours), (ours, theirs)
    elif stage == "compare":
        for name, means in ours.items():
            assert all(abs(means[m] - theirs[name][m]) <= 1e-12 for m in COMPARE_MEASURES), (name, means, theirs[name])
    else:
        assert [round(w, 6) for w in ours["weights"]] == [round(w, 6) for w in theirs["weights"]], (ours, theirs)


def run_all(folder: Path, n_queries: int, depth: int, stages: tuple[str, ...] = STAGES) -> list[dict[str, Any]]:
    """Every stage on both sides, each in its own process; the answers asserted equal."""
    make_data(folder, n_queries, depth)
    rng = np.random.default_rng(SEED)
    sample = sorted(rng.choice(n_queries, size=min(SAMPLE, n_queries), replace=False).tolist())
    (folder / "sample.json").write_text(json.dumps([f"{1_000_000 + q}" for q in sample]))
    rows = []
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    for stage in stages:
        results = {}
        for side in SIDES:
            command = [sys.executable, __file__, "--side", side, "--stage", stage, "--folder", str(folder)]
            done = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
            if done.returncode:
                raise RuntimeError(f"{side} {stage} failed:\n{done.stderr[-3000:]}")
            results[side] = json.loads(done.stdout.strip().splitlines()[-1])
            print(json.dumps({k: v for k, v in results[side].items() if k != "answer"}), flush=True)
        same_answer(stage, results["ours"]["answer"], results["ranx"]["answer"])
        rows.append({"stage": stage, "ours": results["ours"], "ranx": results["ranx"]})
    return rows


def table(rows: list[dict[str, Any]]) -> str:
    """The markdown table of ``run_all``'s rows."""
    lines = [
        "| stage | ours wall | ranx wall | speed-up | ours peak RSS beyond inputs | ranx peak RSS beyond inputs |",
        "|---|---|---|---|---|---|",
    ]
    for row in rows:
        ours, ranx = row["ours"], row["ranx"]
        lines.append(
            f"| {row['stage']} | {ours['wall_s']:.2f} s | {ranx['wall_s']:.2f} s "
            f"| {ranx['wall_s'] / ours['wall_s']:.1f}x "
            f"| {ours['peak_extra_mb']:,.0f} MB (inputs {ours['rss_mb']:,.0f}) "
            f"| {ranx['peak_extra_mb']:,.0f} MB (inputs {ranx['rss_mb']:,.0f}) |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, default=5_000)
    parser.add_argument("--depth", type=int, default=1_000)
    parser.add_argument("--stages", default=",".join(STAGES))
    parser.add_argument("--side", choices=SIDES)
    parser.add_argument("--stage", choices=STAGES)
    parser.add_argument("--folder", type=Path)
    parser.add_argument("--per-query", action="store_true", help="time the fusion cell's per-query call only")
    args = parser.parse_args()
    if args.side:
        print(json.dumps(run_stage(args.side, args.stage, args.folder)))
        return
    if args.per_query:
        with tempfile.TemporaryDirectory() as folder:
            make_data(Path(folder), args.queries, args.depth)
            print(json.dumps(per_query_fusion(Path(folder)), indent=1))
        return
    with tempfile.TemporaryDirectory() as folder:
        start = time.time()
        rows = run_all(Path(folder), args.queries, args.depth, tuple(args.stages.split(",")))
        print(
            f"\n{args.queries:,} queries x {args.depth:,}; {platform.processor() or platform.machine()}, "
            f"load average {os.getloadavg()[0]:.1f} at the end, {time.time() - start:.0f} s in all\n"
        )
        print(table(rows))


if __name__ == "__main__":
    sys.path.insert(0, str(REPO))
    main()
