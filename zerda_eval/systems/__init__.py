"""Registry of system families: a family name plus a params dict builds a ``System``.

``SYSTEMS`` maps every family to its class; ``SYSTEMS[family].all_specs()`` lists its parameters
with defaults, allowed values and a one-line description (``zerda-eval systems`` prints them).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from zerda_eval.errors import ConfigError, unknown_value_message
from zerda_eval.systems.base import System
from zerda_eval.systems.dense import Dense
from zerda_eval.systems.learned_sparse import LearnedSparse
from zerda_eval.systems.params import ParamSpec
from zerda_eval.systems.pipeline import (
    PipelineDense,
    PipelineHybrid,
    PipelineLateInteraction,
    PipelineRerank,
    PipelineRouted,
    PipelineSparse,
)
from zerda_eval.systems.run_file import RunFileSystem
from zerda_eval.systems.user import PythonSystem
from zerda_eval.systems.zerda import ZerdaHybrid, ZerdaKeyword, ZerdaMetadata, ZerdaVector

SYSTEMS: dict[str, type[System]] = {
    cls.family: cls
    for cls in (
        ZerdaKeyword,
        ZerdaVector,
        ZerdaMetadata,
        ZerdaHybrid,
        PipelineSparse,
        PipelineDense,
        PipelineHybrid,
        PipelineRerank,
        PipelineRouted,
        PipelineLateInteraction,
        LearnedSparse,
        Dense,
        PythonSystem,
        RunFileSystem,
    )
}


def family_class(family: str, where: str = "") -> type[System]:
    """The class of ``family``; an unknown name is a ``ConfigError`` with a "did you mean"."""
    if family not in SYSTEMS:
        raise ConfigError(unknown_value_message("system family", family, SYSTEMS, where))
    return SYSTEMS[family]


def resolve_params(family: str, params: Mapping[str, Any], where: str = "") -> dict[str, Any]:
    """Every parameter of ``family`` with defaults filled in, each value checked."""
    return family_class(family, where).resolve_params(params, where or family)


def build_system(
    family: str,
    params: Mapping[str, Any] | None = None,
    objects: Mapping[str, Any] | None = None,
    content: Mapping[str, Any] | None = None,
    label: str = "",
) -> System:
    """A new, unindexed system of ``family`` with ``params`` (checked, defaults filled in).

    ``objects``: the user systems handed to the Python API by name (``family = "python"``);
    ``content``: the cell's ``content_key`` of the family (a run file's path and hash); ``label``: the
    cell's system label, which messages about the system name.
    """
    cls = family_class(family)
    system = cls(**cls.resolve_params(params or {}, family))
    if objects:
        system.objects = objects
    if content:
        system.content = content
    if label:
        system.label = label
    return system


__all__ = ["SYSTEMS", "ParamSpec", "System", "build_system", "family_class", "resolve_params"]
