"""Side-by-side benchmarks: every group times ours and its peers in one process and prints the ratios.

The ``timed`` fixture, ``timed(group, name, fn, units=..., role="ours" | "peer")``, times ``fn`` with
pytest-benchmark (one warm-up round, so numba/ranx compiles and caches stay out of the figures) and
keeps the fastest round, the one least disturbed by other processes on a shared machine. The
terminal summary prints, per group, units per second and for every (ours, peer) pair the speed
ratio ``peer time / our time`` (> 1 means ours is faster).

Quick mode (``ZERDA_BENCH_QUICK=1 pytest benchmarks/ --benchmark-disable``, what ``.ci/run`` does): every
benchmark runs its code once, untimed, on the small sizes only, so the outputs each test asserts equal (ours
and the peer's) are checked in a few minutes. ``same_top_k`` is that check for exact engines.
"""

from __future__ import annotations

import math
import os
import platform
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np
import pytest

LIBRARIES = ("numpy", "scipy", "numba", "faiss-cpu", "bm25s", "rank-bm25", "ranx", "pytrec-eval-terrier")


@dataclass(frozen=True)
class Timing:
    name: str
    role: str
    seconds: float  # fastest round (the least disturbed by other load), or the median one where asked
    units: int  # queries (or passages) handled per call
    unit: str
    gflop: float | None = None  # floating-point work of one call, when known: the summary prints GFLOP/s


_TIMINGS: dict[str, list[Timing]] = defaultdict(list)
QUICK = os.environ.get("ZERDA_BENCH_QUICK") == "1"


def same_top_k(found: np.ndarray, best: np.ndarray, scores: np.ndarray, rtol: float) -> bool:
    """Whether ``found`` (a peer's top-k row ids) is a top-k of ``scores`` as exact as ``best`` (ours).

    Both must name k distinct rows whose ``scores`` are the same multiset, to ``rtol``: the same top-k
    up to the order of rows whose scores tie within the peer's float precision (bm25s and FAISS score in
    float32), never a row that scores below the k-th best.
    """
    found, best = np.asarray(found), np.asarray(best)
    if found.shape != best.shape or len(set(found.tolist())) != len(found):
        return False
    return bool(np.allclose(np.sort(scores[found]), np.sort(scores[best]), rtol=rtol, atol=0))


def run_timed(
    benchmark: Any,
    group: str,
    name: str,
    fn: Callable[[], Any],
    *,
    units: int = 1,
    unit: str = "q",
    role: str = "ours",
    rounds: int = 5,
    warmup: bool = True,
    stat: str = "min",
    gflop: float | None = None,
) -> Any:
    """Time ``fn`` (after one warm-up call) and record it under ``group`` for the ratio summary.

    ``stat`` is the round statistic compared: "min" (the fastest round) or "median" (e.g. the p50 of
    per-query latencies, when each round runs one query). ``role="limit"`` marks a hardware reference
    (a GEMM), printed but not compared; ``gflop``: the work of one call, printed as GFLOP/s.
    """
    benchmark.group = group
    benchmark.extra_info.update(name=name, role=role, units=units, unit=unit, gflop=gflop)
    result = benchmark.pedantic(fn, rounds=rounds, iterations=1, warmup_rounds=int(warmup))
    if benchmark.disabled:  # --benchmark-disable: fn ran once, untimed
        return result
    _TIMINGS[group].append(Timing(name, role, getattr(benchmark.stats.stats, stat), units, unit, gflop))
    return result


def machine_line() -> str:
    """CPU count and model, BLAS core type if forced, and library versions (for ``results.md``)."""
    cpuinfo = Path("/proc/cpuinfo")
    lines = cpuinfo.read_text().splitlines() if cpuinfo.exists() else []
    models = [line.split(":", 1)[1].strip() for line in lines if line.startswith("model name")]
    cpu = models[0] if models else platform.processor() or "unknown CPU"
    versions = []
    for library in LIBRARIES:
        try:
            versions.append(f"{library} {metadata.version(library)}")
        except metadata.PackageNotFoundError:
            versions.append(f"{library} (not installed)")
    blas = os.environ.get("OPENBLAS_CORETYPE")
    blas_note = f", OPENBLAS_CORETYPE={blas}" if blas else ""
    return f"{os.cpu_count()} CPUs ({cpu}{blas_note}), Python {platform.python_version()}; " + ", ".join(versions)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not _TIMINGS:
        return
    write = terminalreporter.write_line
    terminalreporter.section("ratios (peer time / our time; > 1 means ours is faster)")
    write(machine_line())
    for group, timings in _TIMINGS.items():
        write(f"[{group}]")
        for timing in timings:
            rate = timing.units / timing.seconds if timing.seconds > 0 else math.inf
            seconds = f"{timing.seconds * 1e3:10.2f} ms"
            flops = f"  {timing.gflop / timing.seconds:7.1f} GFLOP/s" if timing.gflop else ""
            write(f"  {timing.name:42} {seconds}  {rate:14,.1f} {timing.unit}/s{flops}")
        for ours in (t for t in timings if t.role == "ours"):
            for peer in (t for t in timings if t.role == "peer"):
                write(f"  {ours.name} vs {peer.name}: {peer.seconds / ours.seconds:.2f}x")


@pytest.fixture
def timed(benchmark: Any) -> Callable[..., Any]:
    """``run_timed`` bound to this test's ``benchmark`` fixture."""
    return lambda *args, **kwargs: run_timed(benchmark, *args, **kwargs)
