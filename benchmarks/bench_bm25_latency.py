"""One query per call, SparseBM25 beside bm25s (numba backend, one thread) in one process: the latency table.

For each corpus (``bm25_corpora``: Zipf-synthetic, real SciFact sentences) and size, both engines index the
same passages; then every query's top-10 is checked equal on both sides (``same_top_k``: ids, scores to
1e-6 relative, bm25s scoring in float32) and equal, bit for bit, to our exhaustive traversal's; only then
are the queries timed, ours and bm25s interleaved, best of ``--repeat`` calls per query. Printed, one row per
(corpus, size): p50 / p95 / p99 in ms on both sides, the ratios (bm25s time / ours, > 1: ours faster),
index bytes per passage on both sides (ours: what ``save`` writes, and in parentheses ``memory_nbytes``, with
what is derived at load: impact columns, materialised weights), and how many queries each of our traversals
answered.

    python benchmarks/bench_bm25_latency.py                                    # 10k, 100k, 200k; both corpora
    python benchmarks/bench_bm25_latency.py --passages 1000000                  # the 1M rows (~6 GB peak)
    python benchmarks/bench_bm25_latency.py --passages 10000000 --no-peer      # 10M, ours alone (streamed)
    python benchmarks/bench_bm25_latency.py --traversal exhaustive             # force one traversal

With ``--no-peer`` the corpus is streamed into ``SparseBM25.fit`` and never held (bm25s needs it whole).
"""

from __future__ import annotations

import argparse
import resource
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchmarks.bm25_corpora import CORPORA, passages, queries
from benchmarks.conftest import machine_line, same_top_k
from retrieval.core.bm25_fast import TRAVERSALS, SparseBM25

K = 10
N_QUERIES = 200  # Zipf queries (the real corpus has SciFact's 300)
SEED = 20261205
PERCENTILES = (50, 95, 99)


def bm25s_index(corpus: list[list[str]]):  # type: ignore[no-untyped-def]
    import bm25s

    peer = bm25s.BM25(k1=1.5, b=0.75, method="lucene", backend="numba")
    peer.index(corpus, show_progress=False)
    return peer


def checked(index: SparseBM25, peer, asked: list[list[str]]) -> tuple[list[list[str]], dict[str, int]]:  # type: ignore[no-untyped-def]
    """The non-empty queries, once bm25s's top-k equals ours on every one and ours equals the exhaustive path's;
    and how many of them each of our traversals answered."""
    asked = [query for query in asked if query]
    ours, scores = index.top_k_batch(asked, K)
    chosen_counts = dict(index.traversals)
    chosen, index.traversal = index.traversal, "exhaustive"
    reference = index.top_k_batch(asked, K)
    index.traversal = chosen
    if not (np.array_equal(ours, reference[0]) and np.array_equal(scores, reference[1])):
        raise SystemExit("the chosen traversals and the exhaustive one return different top-k")
    if peer is not None:
        theirs = peer.retrieve(asked, k=K, show_progress=False, n_threads=0)[0]
        differ = [i for i, q in enumerate(asked) if not same_top_k(theirs[i], ours[i], index.scores(q), 1e-6)]
        if differ:
            raise SystemExit(f"bm25s and SparseBM25 differ on {len(differ)} of {len(asked)} top-{K} lists")
    return asked, chosen_counts


def latencies(search, asked: list[list[str]], repeat: int) -> list[float]:  # type: ignore[no-untyped-def]
    """Each query's best of ``repeat`` calls, in ms."""
    best = []
    for query in asked:
        times = []
        for _ in range(repeat):
            start = time.perf_counter()
            search(query)
            times.append(time.perf_counter() - start)
        best.append(min(times) * 1000)
    return best


def row(corpus: str, n: int, traversal: str, with_peer: bool, repeat: int) -> dict:
    """Index ``n`` passages of ``corpus`` on both sides, check, time; the table row's figures."""
    asked = queries(corpus, N_QUERIES, SEED + 1)
    start = time.perf_counter()
    if with_peer:
        texts = list(passages(corpus, n, SEED))
        index = SparseBM25(traversal=traversal).fit(texts)
        index_s = time.perf_counter() - start
        peer = bm25s_index(texts)
        del texts
    else:
        index, peer = SparseBM25(traversal=traversal).fit(passages(corpus, n, SEED)), None
        index_s = time.perf_counter() - start
    asked, chosen = checked(index, peer, asked)
    ours_search = lambda q: index.top_k_batch([q], K)  # noqa: E731
    peer_search = lambda q: peer.retrieve([q], k=K, show_progress=False, n_threads=0)  # noqa: E731
    for query in asked[:3]:  # warm-up: numba dispatch, caches
        ours_search(query)
        if peer is not None:
            peer_search(query)
    ours, theirs = [], []
    for query in asked:  # interleaved, so load on the machine hits both sides alike
        ours += latencies(ours_search, [query], repeat)
        if peer is not None:
            theirs += latencies(peer_search, [query], repeat)
    figures = {
        "corpus": corpus,
        "passages": n,
        "queries": len(asked),
        "ours_ms": [float(np.percentile(ours, p)) for p in PERCENTILES],
        "ours_bytes": index.nbytes / n,
        "ours_memory_bytes": index.memory_nbytes / n,
        "index_s": index_s,
        "traversals": chosen,
        "peak_rss_gb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20,
    }
    if peer is not None:
        figures["bm25s_ms"] = [float(np.percentile(theirs, p)) for p in PERCENTILES]
        figures["bm25s_bytes"] = sum(peer.scores[name].nbytes for name in ("data", "indices", "indptr")) / n
    return figures


def markdown(figures: dict) -> str:
    ours = " / ".join(f"{t:.3f}" for t in figures["ours_ms"])
    cells = [figures["corpus"], f"{figures['passages']:,}", ours]
    if "bm25s_ms" in figures:
        theirs = figures["bm25s_ms"]
        ratios = " / ".join(f"{b / a:.2f}x" for a, b in zip(figures["ours_ms"], theirs, strict=True))
        cells += [" / ".join(f"{t:.3f}" for t in theirs), ratios]
        cells.append(f"{figures['ours_bytes']:.0f} ({figures['ours_memory_bytes']:.0f}) / {figures['bm25s_bytes']:.0f}")
    else:
        cells += ["-", "-", f"{figures['ours_bytes']:.0f} ({figures['ours_memory_bytes']:.0f}) / -"]
    traversals = ", ".join(f"{name} {count}" for name, count in sorted(figures["traversals"].items()))
    cells += [traversals, f"{figures['peak_rss_gb']:.1f}"]
    return "| " + " | ".join(cells) + " |"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--passages", type=int, nargs="+", default=[10_000, 100_000, 200_000])
    parser.add_argument("--corpus", choices=CORPORA, nargs="+", default=list(CORPORA))
    parser.add_argument("--traversal", choices=["auto", *TRAVERSALS], default="auto")
    parser.add_argument("--repeat", type=int, default=3, help="calls per query; its fastest is kept")
    parser.add_argument("--no-peer", action="store_true", help="ours alone, corpus streamed (for 10M)")
    args = parser.parse_args()
    print(machine_line())
    print(f"one query per call, top-{K}, best of {args.repeat} calls per query; traversal {args.traversal}")
    print("| corpus | passages | ours p50 / p95 / p99 ms | bm25s p50 / p95 / p99 ms | ratio p50 / p95 / p99 |", end="")
    print(" bytes/passage ours saved (in memory) / bm25s | our traversals | peak RSS GB |")
    print("|---|---|---|---|---|---|---|---|")
    for n in args.passages:
        for corpus in args.corpus:
            print(markdown(row(corpus, n, args.traversal, not args.no_peer, args.repeat)), flush=True)


if __name__ == "__main__":
    main()
