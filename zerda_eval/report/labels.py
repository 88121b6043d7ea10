"""Short system labels for tables and plots: a grid cell's label keeps only the axes that vary.

A grid cell is labelled ``name[axis=value,...]`` with every axis of its grid
(``hybrid[order=documented,vector_weight=0.6,top_k=20]``). Over the cells of one system
an axis with a single value says nothing, so the short label drops it; a label still longer than
``MAX_SHORT`` keeps the values only (``hybrid[documented, 0.6]``). The report prints the full
labels beside the short ones (``label_legend``), and a short label that would be ambiguous falls back
to the full one.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

MAX_SHORT = 28
AXIS_SPLIT = re.compile(r",(?=[A-Za-z_][A-Za-z0-9_]*=)")  # commas that start a new "axis=" (values may hold ", ")


def split_label(label: str) -> tuple[str, list[tuple[str, str]]]:
    """``name[a=1,b=x]`` -> ``("name", [("a", "1"), ("b", "x")])``; a label without a grid -> ``(label, [])``."""
    if not (label.endswith("]") and "[" in label):
        return label, []
    name, grid = label[:-1].split("[", 1)
    axes = [part.split("=", 1) for part in AXIS_SPLIT.split(grid)]
    if not all(len(axis) == 2 for axis in axes):
        return label, []
    return name, [(key, value) for key, value in axes]


def short_labels(labels: Iterable[str]) -> dict[str, str]:
    """``{full label: short label}`` for every label (unchanged when nothing can be dropped)."""
    labels = list(dict.fromkeys(labels))
    parsed = {label: split_label(label) for label in labels}
    values: dict[tuple[str, str], set[str]] = {}
    for name, axes in parsed.values():
        for key, value in axes:
            values.setdefault((name, key), set()).add(value)
    by_system: dict[str, dict[str, list[tuple[str, str]]]] = {}
    for label, (name, axes) in parsed.items():
        varying = [(key, value) for key, value in axes if len(values[(name, key)]) > 1]
        by_system.setdefault(name, {})[label] = varying
    shorts: dict[str, str] = {}
    for name, cells in by_system.items():
        spelled = {label: ", ".join(f"{k}={v}" for k, v in axes) for label, axes in cells.items()}
        if any(len(name) + len(text) + 2 > MAX_SHORT for text in spelled.values()):
            spelled = {label: ", ".join(v for _, v in axes) for label, axes in cells.items()}
        for label, text in spelled.items():
            shorts[label] = f"{name}[{text}]" if text else name
    counts: dict[str, int] = {}
    for short in shorts.values():
        counts[short] = counts.get(short, 0) + 1
    return {label: short if counts[short] == 1 else label for label, short in shorts.items()}
