"""A corpus larger than comfortable: SparseBM25 on 1M synthetic Zipfian passages, in memory and memory-mapped.

Reported: index time (the corpus streamed into ``SparseBM25.fit``, generated chunk by chunk, never whole
in memory), peak RSS of building the index, the index size on disk, and for a fresh process that reloads
the saved index (``SparseBM25.load(dir, mmap=True)`` and, for comparison, ``mmap=False``): RSS after the
load and after the queries (anonymous = private memory; file = pages of the memory-mapped arrays, which the
OS can drop), peak RSS, and top-k latency. The reloaded index must return the very same top-k as the one
built in memory (checked, not timed).

Passages and queries come from ``bm25_corpora.zipf_token_lists`` (Zipf(1.1) over 200,000 words,
20-80 tokens per passage, 3-10 per query), seeded. The default is 100,000 passages; ZERDA_BENCH_1M=1
(or ``--passages N``) runs 1,000,000.

    python benchmarks/bench_large_corpus.py
    ZERDA_BENCH_1M=1 python benchmarks/bench_large_corpus.py
    python benchmarks/bench_large_corpus.py --passages 10000000          # the 10M run (about 5 min, 6 GB)

Latency beside bm25s (p50 / p95 / p99, both corpora): ``bench_bm25_latency.py``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from retrieval.core.bm25_fast import SparseBM25

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bm25_corpora import zipf_token_lists  # shared by every BM25 benchmark
from test_bench_scaling import N_QUERIES, K

SEED = 20261202


def memory_mb() -> dict[str, float]:
    """Current RSS (MB) split into anonymous and file-backed pages, and the peak so far (``VmHWM``).

    ``VmHWM`` is the peak of this process image; ``ru_maxrss`` (reported for the build) would do in
    the parent, but Linux carries it across ``execve``, so a child would report the parent's peak.
    """
    fields = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if name in ("VmRSS", "RssAnon", "RssFile", "VmHWM"):
            fields[name] = int(value.split()[0]) / 1024  # kB
    return {k: round(v, 1) for k, v in fields.items()}


def latency(index: SparseBM25, queries: list[list[str]]) -> dict[str, float]:
    """Batched throughput and single-query latency of ``top_k_batch`` (after one warm-up call)."""
    index.top_k_batch(queries[:2], K)
    start = time.perf_counter()
    index.top_k_batch(queries, K)
    batch_s = time.perf_counter() - start
    single = []
    for query in queries:
        start = time.perf_counter()
        index.top_k_batch([query], K)
        single.append(time.perf_counter() - start)
    return {
        "batch_qps": round(len(queries) / batch_s, 1),
        "single_p50_ms": round(float(np.percentile(single, 50)) * 1000, 2),
        "single_p95_ms": round(float(np.percentile(single, 95)) * 1000, 2),
    }


def streamed_passages(seed: int, passages: int, chunk: int = 50_000) -> Iterator[list[str]]:
    """The synthetic corpus generated chunk by chunk: it is never whole in memory, as a streamed ir_datasets corpus."""
    rng = np.random.default_rng(seed)
    for start in range(0, passages, chunk):
        yield from zipf_token_lists(rng, min(chunk, passages - start), 20, 80)


def build(passages: int, directory: Path) -> dict:
    """Stream the corpus into the index, time the queries in memory, save; queries and top-k go beside the index."""
    queries = zipf_token_lists(np.random.default_rng(SEED + 1), N_QUERIES, 3, 10)
    figures: dict = {"passages": passages, "before_index": memory_mb()}
    start = time.perf_counter()
    index = SparseBM25().fit(streamed_passages(SEED, passages))  # one pass: generation included
    figures["generate_and_index_s"] = round(time.perf_counter() - start, 1)
    figures["tokens"] = round(index.avg_dl * index.n_docs)
    figures["after_index"] = memory_mb()
    figures["build_ru_maxrss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    figures["in_memory"] = latency(index, queries)
    start = time.perf_counter()
    index.save(directory / "index")
    figures["save_s"] = round(time.perf_counter() - start, 1)
    figures["disk_mb"] = round(sum(p.stat().st_size for p in (directory / "index").iterdir()) / 2**20, 1)
    (directory / "queries.json").write_text(json.dumps(queries))
    np.save(directory / "top_k.npy", index.top_k_batch(queries, K)[0])
    return figures


def reload(directory: Path, mmap: bool) -> dict:
    """In a fresh process: load the saved index, check its top-k, time the queries, measure memory."""
    queries = json.loads((directory / "queries.json").read_text())
    figures: dict = {"before_load": memory_mb()}
    start = time.perf_counter()
    index = SparseBM25.load(directory / "index", mmap=mmap)
    figures["load_s"] = round(time.perf_counter() - start, 2)
    figures["after_load"] = memory_mb()
    if not np.array_equal(index.top_k_batch(queries, K)[0], np.load(directory / "top_k.npy")):
        raise SystemExit("the reloaded index ranks differently from the index built in memory")
    figures.update(latency(index, queries))
    figures["after_queries"] = memory_mb()
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    default = 1_000_000 if os.environ.get("ZERDA_BENCH_1M") == "1" else 100_000
    parser.add_argument("--passages", type=int, default=default)
    parser.add_argument("--reload", type=Path, help=argparse.SUPPRESS)  # child mode: index directory
    parser.add_argument("--no-mmap", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.reload:
        print(json.dumps(reload(args.reload, mmap=not args.no_mmap)))
        return
    with tempfile.TemporaryDirectory(prefix="bench-large-") as tmp:
        figures = build(args.passages, Path(tmp))
        for mode, flags in (("mmap", []), ("loaded", ["--no-mmap"])):
            child = subprocess.run(
                [sys.executable, __file__, "--reload", tmp, *flags],
                capture_output=True,
                text=True,
                check=True,
            )
            figures[f"reload_{mode}"] = json.loads(child.stdout)
    print(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
