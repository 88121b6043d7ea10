"""Each SparseBM25 traversal forced on every query of one index: the figures ``_choose`` (the auto rule) rests on.

For each corpus (``bm25_corpora``) and size, one index (default settings, so materialised up to
``MATERIALISE_MAX_POSTINGS`` postings); every query is timed through each traversal (``TRAVERSALS``) and
"auto", one query per call, best of ``--repeat`` calls, after checking that all of them return the exhaustive
traversal's arrays. Printed: p50 / p95 / p99 ms per traversal, the per-query best of them (what a perfect rule
would get), and by the number of the query's common terms (each in at least ``COMMON_DF_SHARE`` of the
documents) the median and p90 of the pruning traversal (impact). ``--traversals`` times only some (the
exhaustive arrays are still the reference).

    python benchmarks/bench_bm25_traversals.py --passages 200000 1000000
    python benchmarks/bench_bm25_traversals.py --passages 10000000 --corpus real --traversals impact
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchmarks.bench_bm25_latency import N_QUERIES, PERCENTILES, SEED, K, latencies
from benchmarks.bm25_corpora import CORPORA, passages, queries
from benchmarks.conftest import machine_line
from retrieval.core.bm25_fast import TRAVERSALS, SparseBM25

COMMON_DF_SHARE = 1 / 256  # a query's term in at least this share of the documents is "common"
BUCKETS = ((0, 8), (8, 12), (12, 16), (16, 1 << 30))  # common terms per query


def common_terms(index: SparseBM25, query: list[str]) -> int:
    """How many distinct terms of ``query`` are each in at least ``COMMON_DF_SHARE`` of the documents."""
    df = np.diff(index.indptr)
    rows = {index.vocabulary[token] for token in query if token in index.vocabulary}
    return sum(int(df[row]) >= COMMON_DF_SHARE * index.n_docs for row in rows)


def timed(index: SparseBM25, asked: list[list[str]], repeat: int, traversals: list[str]) -> dict[str, np.ndarray]:
    """Each query's best-of-``repeat`` ms through each of ``traversals`` and "auto", once each agrees with
    exhaustive."""
    index.traversal = "exhaustive"
    expected = index.top_k_batch(asked, K)
    times = {}
    for traversal in (*traversals, "auto"):
        index.traversal = traversal
        got = index.top_k_batch(asked, K)
        if not (np.array_equal(got[0], expected[0]) and np.array_equal(got[1], expected[1])):
            raise SystemExit(f"traversal {traversal} and exhaustive return different top-{K}")
        search = lambda q: index.top_k_batch([q], K)  # noqa: E731
        for query in asked[:3]:
            search(query)
        times[traversal] = np.array(latencies(search, asked, repeat))
    return times


def report(corpus: str, n: int, repeat: int, traversals: list[str]) -> None:
    index = SparseBM25().fit(passages(corpus, n, SEED))
    asked = [query for query in queries(corpus, N_QUERIES, SEED + 1) if query]
    times = timed(index, asked, repeat, traversals)
    times["best of them"] = np.min([times[t] for t in traversals], axis=0)
    kind = "materialised" if index._materialised else "large"
    for name, ms in times.items():
        figures = " / ".join(f"{np.percentile(ms, p):.3f}" for p in PERCENTILES)
        print(f"| {corpus} | {n:,} ({kind}) | {name} | {figures} |", flush=True)
    common = np.array([common_terms(index, query) for query in asked])
    pruning = [traversal for traversal in traversals if traversal != "exhaustive"]
    for low, high in BUCKETS:
        chosen = (common >= low) & (common < high)
        if chosen.any() and pruning:
            medians = " / ".join(f"{np.median(times[t][chosen]):.3f}" for t in pruning)
            p90s = " / ".join(f"{np.percentile(times[t][chosen], 90):.3f}" for t in pruning)
            print(
                f"|   | common terms {low}-{min(high - 1, 99)}: {int(chosen.sum())} queries | "
                f"{' / '.join(pruning)} median {medians} | p90 {p90s} |"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--passages", type=int, nargs="+", default=[200_000])
    parser.add_argument("--corpus", choices=CORPORA, nargs="+", default=list(CORPORA))
    parser.add_argument("--repeat", type=int, default=3, help="calls per query; its fastest is kept")
    parser.add_argument("--traversals", choices=TRAVERSALS, nargs="+", default=list(TRAVERSALS))
    args = parser.parse_args()
    print(machine_line())
    print(f"one query per call, top-{K}, best of {args.repeat} calls per query")
    print("| corpus | passages (index) | traversal | p50 / p95 / p99 ms |")
    print("|---|---|---|---|")
    for n in args.passages:
        for corpus in args.corpus:
            report(corpus, n, args.repeat, args.traversals)


if __name__ == "__main__":
    main()
