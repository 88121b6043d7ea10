"""What the store entries a cell used cost to build, and rebuilding them under ``--force``.

A cell's ``index_build_s`` is its from-scratch cost: the wall time of its indexing, with the time
spent reading store entries replaced by the build seconds recorded with each entry.

A cost several systems share (one corpus encoding under a dense system and a hybrid, or under every
grid point of a dense system) is recorded by entry (``BuildCosts.shared``), so that a row made of several
cells (a fusion's inputs, a tuned row's chosen cells) counts it once (``counted_once``, through
``evaluation.efficiency.row_costs``, which also counts each system cell under the row once).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")


@dataclass
class BuildCosts:
    """The cache entries a cell read or built: their from-scratch seconds, and this run's seconds in them.

    ``shared``: the named entries among them, ``{entry: {"build_s": ..., "spent_s": ...}}``.
    """

    build_s: float = 0.0
    spent_s: float = 0.0
    shared: dict[str, dict[str, float]] = field(default_factory=dict)


SHARED_KEY = "shared_builds"  # a cell's stats: its named store entries (BuildCosts.shared)
COUNTED_ONCE_KEY = "builds_counted_once"  # a fusion's or tuned row's stats: the entries its cells share

_COSTS: ContextVar[BuildCosts | None] = ContextVar("zerda_eval_build_costs", default=None)
_REBUILD: ContextVar[bool] = ContextVar("zerda_eval_rebuild_caches", default=False)
_REBUILT: set[str] = set()  # entries rebuilt by this process under --force: once each, not once per cell


@contextmanager
def counting_builds() -> Iterator[BuildCosts]:
    """Collect ``record_build`` calls made inside the block (a cell's indexing)."""
    costs = BuildCosts()
    token = _COSTS.set(costs)
    try:
        yield costs
    finally:
        _COSTS.reset(token)


def record_build(build_s: float, spent_s: float, entry: str | None = None) -> None:
    """A cache entry was used: it cost ``build_s`` from scratch (recorded with it) and ``spent_s`` now.

    ``entry`` names a cost other systems may share (``counted_once``)."""
    costs = _COSTS.get()
    if costs is not None:
        costs.build_s += build_s
        costs.spent_s += spent_s
        if entry is not None:
            costs.shared[entry] = {"build_s": build_s, "spent_s": spent_s}


def costed(make: Callable[[], T], entry: str | None = None) -> tuple[T, float]:
    """``make()`` and its from-scratch cost (wall time, minus time in cache entries, plus their build time).

    The cost is also recorded (as ``entry``) for the enclosing ``counting_builds``; an in-process memo of
    the value replays it with ``record_build(cost, 0.0, entry)`` on reuse.
    """
    start = time.perf_counter()
    with counting_builds() as inner:
        value = make()
    wall = time.perf_counter() - start
    scratch = wall - inner.spent_s + inner.build_s
    record_build(scratch, wall, entry)
    return value, scratch


def counted_once(
    totals: Sequence[float], shared: Sequence[Mapping[str, Mapping[str, float]]], part: str
) -> tuple[float, dict[str, float]]:
    """The sum of several cells' ``totals`` with each entry they share counted once (its largest ``part``:
    ``"build_s"`` or ``"spent_s"``), and ``{entry: seconds counted once}`` for the entries shared."""
    total = float(sum(totals))
    once = {}
    for entry in dict.fromkeys(name for costs in shared for name in costs):
        seconds = [costs[entry][part] for costs in shared if entry in costs]
        if len(seconds) > 1:
            total -= sum(seconds) - max(seconds)
            once[entry] = max(seconds)
    return total, once


@contextmanager
def rebuilding_caches(active: bool) -> Iterator[None]:
    """Inside the block (``--force``), each cache entry used is rebuilt once by this process."""
    token = _REBUILD.set(active)
    try:
        yield
    finally:
        _REBUILD.reset(token)


def forget_rebuilt() -> None:
    """A new run starts: under ``--force`` every entry it uses is rebuilt again (once)."""
    _REBUILT.clear()


def must_rebuild(entry: Path) -> bool:
    """True the first time a forced cell of this process uses ``entry`` (then it is rebuilt)."""
    if not _REBUILD.get() or str(entry) in _REBUILT:
        return False
    _REBUILT.add(str(entry))
    return True
