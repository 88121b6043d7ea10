"""Studies: plug-ins that read a finished run directory and add a section to its report.

Each study is one module (``rrf_order``: what fixing seed 000's RRF ordering bug changes; ``goals``: each
dataset's best held-out row against a reference number) configured
by its own ``[study.<name>]`` table. Generic comparison and report code knows only ``StudySection``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from zerda_eval.analysis.studies import goals, rrf_order
from zerda_eval.analysis.studies.base import FinishedRun, StudySection
from zerda_eval.errors import ConfigError, unknown_value_message

STUDIES = {"goals": goals, "rrf_order": rrf_order}


def parse_studies(document: Mapping[str, Any], where: str) -> dict[str, Any]:
    """The settings of every ``[study.<name>]`` table of ``document``; unknown names and keys are errors."""
    tables = document.get("study", {})
    if not isinstance(tables, Mapping):
        raise ConfigError(f"{where}: study must be a table ([study.<name>])")
    settings = {}
    for name, table in tables.items():
        if name not in STUDIES:
            raise ConfigError(unknown_value_message("study", name, STUDIES, f"{where}: [study]"))
        if not isinstance(table, Mapping):
            raise ConfigError(f"{where}: study.{name} must be a table ([study.{name}])")
        settings[name] = STUDIES[name].parse(table, document, where)
    return settings


def run_studies(settings: Mapping[str, Any], finished: FinishedRun) -> list[StudySection]:
    """Each configured study's section (a study with nothing to pair or compare adds none)."""
    sections = []
    for name, own in settings.items():
        section = STUDIES[name].run(own, finished)
        if section is not None:
            sections.append(section)
    return sections
