"""What a study plug-in hands the report: a titled section of text, tables and figures.

A study is a module with ``KEYS`` (its keys under ``[study.<name>]``), ``parse(table, document,
where) -> settings`` (one-line ``ConfigError`` on a mistake) and ``run(settings, finished) ->
StudySection | None``; ``analysis.studies.STUDIES`` lists them. The report renders any section without
knowing which study wrote it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from zerda_eval.analysis.compare import CompareSpec


@dataclass(frozen=True)
class FinishedRun:
    """What a study reads: the run directory, its results and per-query tables, the comparison settings."""

    run_dir: Path
    results: pd.DataFrame
    per_query: pd.DataFrame
    compare: CompareSpec
    measures: list[str]


@dataclass(frozen=True)
class StudyFigure:
    """A figure of a study: ``draw(label)`` returns a matplotlib figure; ``label`` makes text drawable."""

    name: str
    caption: str
    draw: Callable[[Callable[[str], str]], Any]


@dataclass(frozen=True)
class StudySection:
    """A study's part of the report: headline text, tables (caption, frame of display strings), figures,
    and detail tables shown after the comparisons."""

    title: str
    summary: str
    tables: list[tuple[str, pd.DataFrame]] = field(default_factory=list)
    figures: list[StudyFigure] = field(default_factory=list)
    detail: list[tuple[str, pd.DataFrame]] = field(default_factory=list)
    data: Any = None  # the study's own numbers, for callers of the Python API
