"""The analysis settings of an experiment: ``[compare]`` and the ``[study.<name>]`` tables, validated."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from zerda_eval.analysis.compare import CompareSpec, parse_compare
from zerda_eval.analysis.studies import parse_studies


@dataclass(frozen=True)
class AnalysisSettings:
    """How a finished run is compared (``compare``) and which studies read it (``studies``: name -> settings)."""

    compare: CompareSpec = field(default_factory=CompareSpec)
    studies: dict[str, Any] = field(default_factory=dict)


def parse_analysis(document: Mapping[str, Any], where: str) -> AnalysisSettings:
    """Validate ``[compare]`` and ``[study]`` of a parsed or resolved experiment; one-line errors naming ``where``."""
    return AnalysisSettings(parse_compare(document, where), parse_studies(document, where))
