"""Weight grids on the simplex: every weight vector of ``n`` inputs, steps of ``step``, summing to 1.

A three-way weighted fusion tunes its weights over this grid (``grid = { weights = { simplex = 0.1 } }``
in a ``[[fusions]]`` entry): with ``step = 0.1`` and three inputs, 66 vectors.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from typing import Any

from zerda_eval.errors import ConfigError

SIMPLEX_KEY = "simplex"  # grid = { weights = { simplex = <step> } }


def simplex_weights(n_inputs: int, step: float) -> list[list[float]]:
    """Every ``n_inputs``-vector of non-negative multiples of ``step`` summing to 1, in lexicographic order
    (``[0, 0, 1]`` first: a tie between grid points goes to the first). ``step`` must divide 1 (0.1, 0.25, ...)."""
    if n_inputs < 2:
        raise ConfigError(f"simplex weights: give at least 2 inputs, got {n_inputs}")
    parts = round(1.0 / step) if step > 0 else 0
    if parts < 1 or abs(parts * step - 1.0) > 1e-9:
        raise ConfigError(f"simplex weights: step {step!r} must divide 1 (e.g. 0.1, 0.2, 0.25, 0.5)")
    vectors = []
    for cut in itertools.combinations(range(parts + n_inputs - 1), n_inputs - 1):  # stars and bars
        bounds = (-1, *cut, parts + n_inputs - 1)
        counts = [bounds[i + 1] - bounds[i] - 1 for i in range(n_inputs)]
        vectors.append([round(count / parts, 10) for count in counts])
    return sorted(vectors)


def expand_simplex(grid: Any, n_inputs: int, where: str) -> Any:
    """``grid`` with a ``weights = { simplex = <step> }`` axis replaced by its ``simplex_weights`` list."""
    if not (isinstance(grid, Mapping) and isinstance(grid.get("weights"), Mapping)):
        return grid
    table = grid["weights"]
    step = table.get(SIMPLEX_KEY)
    if set(table) != {SIMPLEX_KEY} or isinstance(step, bool) or not isinstance(step, int | float):
        raise ConfigError(f"{where}.grid.weights: give a list of weight lists or {{ simplex = 0.1 }}, got {table!r}")
    try:
        return {**grid, "weights": simplex_weights(n_inputs, float(step))}
    except ConfigError as exc:
        raise ConfigError(f"{where}.grid.weights: {exc}") from None
