"""The report at MS MARCO dev size (issue 46 item 5): build time, peak RSS, sizes, and the page's open time.

A run directory of MS MARCO dev's shape, made by the harness itself: a BEIR folder of real sentences and
queries (``bench_scale.build_corpus``: the bundled English collections' sentences as passages, their queries
then word windows of sentences, 7,000 by default) run by ``zerda-eval run --no-report`` on a grid of 10 cells
(BM25 as the baseline, BM25 stemmed, a 2 x 2 k1 / b grid, and RRF, wsum, CombSUM and CombMNZ over the first
two) at ``--depth`` 100 or 1,000. Then, each timed in its own process: ``zerda-eval report`` (wall time and its
peak RSS from ``wait4``), the sizes of report.html and the explorer's files, and report.html opened over
file:// in headless Chromium (``devtools.Browser``): the time from navigation to the explorer's first rows.

    python benchmarks/bench_report_scale.py                      # 7,000 queries, depth 100
    python benchmarks/bench_report_scale.py --depth 1000
    ZERDA_BENCH_QUICK=1 python -m pytest benchmarks/test_bench_report_scale.py
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_scale import build_corpus, cpu_model

ROOT = Path(__file__).resolve().parent.parent
MEASURES = ["ndcg@10", "mrr@10", "recall@100", "map@100", "precision@10", "Judged@10"]
FIRST_ROWS = "document.querySelectorAll('#ex-table tbody tr').length"


@dataclass
class Outcome:
    queries: int
    cells: int
    run_s: float
    report_s: float
    report_peak_rss_mb: float
    html_bytes: int
    explorer_bytes: int  # the explorer's index file and every chunk
    explorer_files: int
    open_s: float  # navigation to the explorer's first rows in headless Chromium
    load_average: tuple[float, float, float]


def write_collection(folder: Path, passages: int, queries: int) -> None:
    """A BEIR folder (corpus.jsonl, queries.jsonl, qrels/test.tsv) of ``build_corpus``'s passages and queries."""
    corpus = build_corpus(passages, queries)
    (folder / "qrels").mkdir(parents=True, exist_ok=True)
    with open(folder / "corpus.jsonl", "w", encoding="utf-8") as out:
        for doc_id, text in zip(corpus.doc_ids, corpus.texts(), strict=True):
            out.write(json.dumps({"_id": doc_id, "text": text}) + "\n")
    qids = [qid.replace(":", "_").replace("/", "_") for qid in corpus.qids]  # an id is one token
    with open(folder / "queries.jsonl", "w", encoding="utf-8") as out:
        for qid, text in zip(qids, corpus.queries, strict=True):
            out.write(json.dumps({"_id": qid, "text": text}) + "\n")
    with open(folder / "qrels" / "test.tsv", "w", encoding="utf-8") as out:
        out.write("query-id\tcorpus-id\tscore\n")
        for qid, original in zip(qids, corpus.qids, strict=True):
            out.writelines(f"{qid}\t{doc}\t{grade}\n" for doc, grade in corpus.qrels[original].items())


def experiment_toml(collection: Path, output_dir: Path, depth: int) -> str:
    """The 10-cell grid over ``collection``, its run directory ``output_dir``."""
    fusions = "".join(
        f'[[fusions]]\nname = "{method}"\ninputs = ["bm25", "bm25_stem"]\nmethod = "{method}"\n\n'
        for method in ("rrf", "wsum", "combsum", "combmnz")
    )
    return (
        f'[experiment]\nname = "report-scale"\nseed = 13\ndepth = {depth}\nmeasures = {json.dumps(MEASURES)}\n'
        f'output_dir = "{output_dir}"\n\n'
        f'[[datasets]]\nid = "msmarco-shape"\npath = "{collection}"\nformat = "beir"\n\n'
        '[[systems]]\nname = "bm25"\nfamily = "zerda.keyword"\nparams = { engine = "fast" }\n\n'
        '[[systems]]\nname = "bm25_stem"\nfamily = "zerda.keyword"\n'
        'params = { engine = "fast", stemmer = "english" }\n\n'
        '[[systems]]\nname = "bm25_grid"\nfamily = "zerda.keyword"\nparams = { engine = "fast" }\n'
        "grid = { k1 = [0.9, 1.5], b = [0.4, 0.9] }\n\n"
        f'{fusions}[compare]\nbaseline = "bm25"\nmeasures = ["ndcg@10", "recall@100"]\n'
    )


def cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "zerda_eval", *args]


def environment() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT)}


def make_run_dir(folder: Path, passages: int, queries: int, depth: int) -> tuple[Path, float]:
    """The collection, the experiment file and its run directory under ``folder``; the run's wall time."""
    write_collection(folder / "collection", passages, queries)
    config = folder / "experiment.toml"
    config.write_text(experiment_toml(folder / "collection", folder / "run", depth), encoding="utf-8")
    start = time.perf_counter()
    subprocess.run(cli("run", str(config), "--no-report"), check=True, env=environment(), capture_output=True)
    return folder / "run", time.perf_counter() - start


def timed_report(run_dir: Path, report_dir: Path) -> tuple[float, float]:
    """``zerda-eval report`` in its own process: (wall seconds, peak RSS in MB)."""
    start = time.perf_counter()
    child = subprocess.Popen(cli("report", str(run_dir), "--out", str(report_dir)), env=environment())
    _, status, usage = os.wait4(child.pid, 0)
    wall = time.perf_counter() - start
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode:
        raise RuntimeError(f"zerda-eval report exited {child.returncode}")
    return wall, usage.ru_maxrss / 1024


def open_time(page: Path, chromium: str) -> float:
    """Seconds from navigating to ``page`` to the explorer's first rows, in headless Chromium at 1280 px."""
    sys.path.insert(0, str(ROOT))
    from tests.zerda_eval.report.devtools import Browser

    with Browser(chromium, 1280) as browser:
        start = time.perf_counter()
        browser.open(page.as_uri())
        while not browser.read(FIRST_ROWS):
            if time.perf_counter() - start > 120:
                raise RuntimeError(f"{page}: the explorer showed no rows in 120 s")
            time.sleep(0.02)
        return time.perf_counter() - start


def main(argv: list[str] | None = None, folder: Path | None = None) -> Outcome:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--passages", type=int, default=50_000)
    parser.add_argument("--queries", type=int, default=7_000)
    parser.add_argument("--depth", type=int, default=100)
    parser.add_argument("--chromium", default="/usr/bin/chromium")
    parser.add_argument("--folder", type=Path, help="where to build (kept); a temporary folder otherwise")
    args = parser.parse_args(argv)
    import tempfile

    with tempfile.TemporaryDirectory() as temporary:
        where = Path(args.folder or folder or temporary)
        run_dir, run_s = make_run_dir(where, args.passages, args.queries, args.depth)
        report_s, peak = timed_report(run_dir, where / "report")
        from zerda_eval.report.explorer import explorer_files

        files = explorer_files(where / "report")
        outcome = Outcome(
            queries=args.queries,
            cells=len(list((run_dir / "cells").iterdir())),
            run_s=run_s,
            report_s=report_s,
            report_peak_rss_mb=peak,
            html_bytes=(where / "report" / "report.html").stat().st_size,
            explorer_bytes=sum(path.stat().st_size for path in files),
            explorer_files=len(files),
            open_s=open_time(where / "report" / "report.html", args.chromium),
            load_average=os.getloadavg(),
        )
    print(json.dumps({**outcome.__dict__, "cpu": cpu_model(), "depth": args.depth}))
    return outcome


if __name__ == "__main__":
    main()
