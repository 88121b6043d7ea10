"""What SparseBM25.fit holds in memory: the process's resident set sampled while a streamed corpus is indexed.

The corpus is streamed (``bm25_corpora.passages``), as ``bench_bm25_latency.py --no-peer`` does at 10M, so the
figures are the build's own: the resident set before fit (interpreter, numpy, numba, the SciFact sentences the
real corpus is drawn from), its peak during fit, and after fit (the index, with what is derived in memory:
``memory_nbytes``). A thread reads ``/proc/self/statm`` every few milliseconds (Linux only).

    python benchmarks/bench_bm25_build_memory.py --passages 2000000 --corpus real
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchmarks.bm25_corpora import CORPORA, passages, scifact_sentences
from benchmarks.conftest import machine_line
from retrieval.core.bm25_fast import SparseBM25

SEED = 20261205  # bench_bm25_latency's
PAGE = os.sysconf("SC_PAGE_SIZE")


def resident_bytes() -> int:
    with open("/proc/self/statm", encoding="ascii") as statm:
        return int(statm.read().split()[1]) * PAGE


class PeakSampler:
    """The largest resident set seen between ``start`` and ``stop``, read every ``interval`` seconds."""

    def __init__(self, interval: float = 0.005):
        self.interval, self.peak, self._done = interval, 0, threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._done.is_set():
            self.peak = max(self.peak, resident_bytes())
            time.sleep(self.interval)

    def start(self) -> PeakSampler:
        self._thread.start()
        return self

    def stop(self) -> int:
        self._done.set()
        self._thread.join()
        return max(self.peak, resident_bytes())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--passages", type=int, default=1_000_000)
    parser.add_argument("--corpus", choices=CORPORA, default="real")
    args = parser.parse_args()
    print(machine_line())
    if args.corpus == "real":
        scifact_sentences()  # read before the baseline: the generator's, not the build's
    before = resident_bytes()
    sampler = PeakSampler().start()
    start = time.perf_counter()
    index = SparseBM25().fit(passages(args.corpus, args.passages, SEED))
    seconds = time.perf_counter() - start
    peak, after = sampler.stop(), resident_bytes()
    gib = 2**30
    postings = len(index.doc_ids)
    print(f"{args.corpus} {args.passages:,} passages, {postings:,} postings, fit {seconds:.0f} s")
    print(f"resident before fit {before / gib:.2f} GiB, peak during fit {peak / gib:.2f} GiB, after {after / gib:.2f}")
    print(f"build's own peak (peak - before) {(peak - before) / gib:.2f} GiB")
    print(
        f"index nbytes {index.nbytes / gib:.2f} GiB, memory_nbytes {index.memory_nbytes / gib:.2f} GiB "
        f"(postings' doc ids and tfs {(index.doc_ids.nbytes + index.tfs.nbytes) / gib:.2f} GiB)"
    )


if __name__ == "__main__":
    main()
