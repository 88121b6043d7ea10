"""Issue 46 item 1: one cell's run stored as ``run.trec.gz``, written in chunks from a ``ColumnarRun``'s arrays.

One process, stages one after the other, each timed once with its peak RSS (Linux's ``VmHWM``, reset before
the stage; the figure is the peak minus the RSS before it): write the run as a cell does
(``store.run_dir.write_trec_gz``), write it as plain text as the previous version did (``format_trec``, one
string, then the file), read each back (``store.run_dir.read_trec_columns``, as ``read_cell_columns`` does).
Sizes: the gzip, the plain file, and the real ``gzip -6 -n`` of the plain file. The read-back runs must equal
the written one (the same query ids, offsets, doc ids and scores), which the script asserts.

Data: MS MARCO dev-like: 7,000 queries x 1,000 passage ids (numbers below 8,841,823, distinct in a query),
float64 scores ``30 * U(0, 1)`` (17 significant digits, as BM25 and cosine scores print), built with
``columnar.from_columns``.

    python benchmarks/bench_run_store.py                       # 7,000 x 1,000: about a minute
    python benchmarks/bench_run_store.py --queries 200 --depth 100
"""

from __future__ import annotations

import argparse
import json
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.bench_scale import memory_mb

SEED = 46
MSMARCO_PASSAGES = 8_841_823


def make_run(n_queries: int, depth: int) -> Any:
    """The benchmark's ``ColumnarRun`` (see the module docstring)."""
    from zerda_eval.columnar import from_columns

    rng = np.random.default_rng(SEED)
    pids = np.concatenate([rng.choice(MSMARCO_PASSAGES, size=depth, replace=False) for _ in range(n_queries)])
    distinct, codes = np.unique(pids, return_inverse=True)
    scores = rng.random(pids.size) * 30.0
    query_ids = [str(1_000_000 + q) for q in range(n_queries)]
    query_codes = np.repeat(np.arange(n_queries), depth)
    return from_columns(query_ids, query_codes, distinct.astype(str), codes, scores)


def stage(name: str, work: Callable[[], Any]) -> tuple[Any, dict[str, Any]]:
    """Run ``work`` once: its answer, and its wall time and peak RSS increment."""
    before = memory_mb()["VmRSS"]
    Path("/proc/self/clear_refs").write_text("5")  # resets VmHWM to the current RSS (Linux >= 4.0)
    start = time.perf_counter()
    answer = work()
    wall = time.perf_counter() - start
    figures = {
        "stage": name,
        "seconds": round(wall, 2),
        "peak_rss_increment_mb": round(memory_mb()["VmHWM"] - before, 1),
    }
    print(json.dumps(figures), flush=True)
    return answer, figures


def same_run(read: Any, written: Any) -> bool:
    return (
        read.query_ids == written.query_ids
        and np.array_equal(read.offsets, written.offsets)
        and np.array_equal(read.scores, written.scores)
        and read.doc_ids[read.docs].tolist() == written.doc_ids[written.docs].tolist()
    )


def main() -> None:
    from zerda_eval.execution.machine import cpu
    from zerda_eval.store.files import atomic_write_text
    from zerda_eval.store.run_dir import format_trec, read_trec_columns, write_trec_gz

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, default=7_000)
    parser.add_argument("--depth", type=int, default=1_000)
    args = parser.parse_args()
    print(json.dumps({"cpu": cpu(), "queries": args.queries, "depth": args.depth}), flush=True)
    run = make_run(args.queries, args.depth)
    with tempfile.TemporaryDirectory() as folder:
        packed, plain = Path(folder) / "run.trec.gz", Path(folder) / "run.trec"
        stage("write run.trec.gz (write_trec_gz, chunks)", lambda: write_trec_gz(packed, run))
        stage("write run.trec (format_trec, one string)", lambda: atomic_write_text(plain, format_trec(run)))
        read_packed, _ = stage("read run.trec.gz (read_trec_columns)", lambda: read_trec_columns(packed))
        assert same_run(read_packed, run)
        del read_packed
        read_plain, _ = stage("read run.trec (read_trec_columns)", lambda: read_trec_columns(plain))
        assert same_run(read_plain, run)
        del read_plain
        with plain.open("rb") as text:
            reference = subprocess.run(["gzip", "-6", "-n", "-c"], stdin=text, capture_output=True, check=True).stdout
        sizes = {"gz_bytes": packed.stat().st_size, "plain_bytes": plain.stat().st_size, "gzip_6_bytes": len(reference)}
        sizes["plain_over_gz"] = round(sizes["plain_bytes"] / sizes["gz_bytes"], 2)
        sizes["gz_over_gzip_6"] = round(sizes["gz_bytes"] / sizes["gzip_6_bytes"], 6)
        print(json.dumps(sizes), flush=True)


if __name__ == "__main__":
    main()
