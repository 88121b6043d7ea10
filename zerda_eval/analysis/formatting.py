"""Numbers as a report prints them, defined once for the report's tables and the studies' tables."""

from __future__ import annotations

from typing import Any

import pandas as pd

DIGITS = 4
DIFFER = "differ"  # a comparison whose t-test, Wilcoxon and randomisation test disagree at alpha
UNDERPOWERED = "n.s., underpowered"  # not significant AND unable to detect [compare].min_effect


def fmt(value: Any, digits: int = DIGITS) -> str:
    """A number with ``digits`` decimals ("-" for missing); anything else as text."""
    if value is None or (isinstance(value, float) and pd.isna(value)):
        return "-"
    if isinstance(value, float | int) and not isinstance(value, bool):
        return f"{value:.{digits}f}"
    return str(value)


def fmt_delta(value: float, digits: int = DIGITS) -> str:
    """A signed difference (``+0.0123``)."""
    return f"{value:+.{digits}f}"


def fmt_ci(low: float, high: float, digits: int = DIGITS) -> str:
    """A confidence interval of a difference (``[-0.0100, +0.0300]``)."""
    return f"[{fmt_delta(low, digits)}, {fmt_delta(high, digits)}]"


def fmt_p(value: float) -> str:
    """A p-value: three significant digits, "<1e-4" below that."""
    if pd.isna(value):
        return "-"
    return "<1e-4" if value < 1e-4 else f"{value:.3g}"


def fmt_count(value: float) -> str:
    """A count (of queries): digits with thousands separators, "∞" for an infinite one, "-" when unknown."""
    if pd.isna(value):
        return "-"
    return "∞" if value == float("inf") else f"{int(value):,}"
