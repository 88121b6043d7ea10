"""Declarative parameters: each family's and fusion method's parameters with type, default, range and
one line of help (``zerda-eval systems`` prints them; the experiment file is checked against them).
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from zerda_eval.errors import ConfigError
from zerda_eval.ranking import DUPLICATE_POLICIES

KIND_TEXT = {
    "float": "a number",
    "int": "an integer",
    "str": "a string",
    "bool": "true or false",
    "floats": "a list of numbers, each",
    "strs": "a list of strings",
    "table": "a table",
}


@dataclass(frozen=True)
class ParamSpec:
    """One parameter of a family: default, accepted type, allowed values or range, and what it does.

    ``kind`` is ``"float"``, ``"int"``, ``"str"``, ``"bool"``, ``"floats"`` (list of numbers) or
    ``"strs"`` (list of strings) or ``"table"`` (a TOML table). Numbers must be finite; ``optional``
    allows the default ``None``; ``required`` has no default.
    """

    default: Any
    kind: str
    help: str
    choices: tuple | None = None
    minimum: float | None = None
    maximum: float | None = None
    positive: bool = False
    optional: bool = False
    required: bool = False  # no default: the experiment must give it

    def describe(self) -> str:
        """Short allowed-values text for error messages."""
        if self.choices is not None:
            return "one of " + ", ".join(repr(c) for c in self.choices)
        bounds = []
        if self.positive:
            bounds.append("> 0")
        if self.minimum is not None:
            bounds.append(f">= {self.minimum}")
        if self.maximum is not None:
            bounds.append(f"<= {self.maximum}")
        return KIND_TEXT[self.kind] + (" " + " and ".join(bounds) if bounds else "")

    def check(self, value: Any, where: str) -> Any:
        """Return ``value`` if it fits this spec, else raise a one-line ``ConfigError`` naming ``where``."""
        if value is None and self.optional:
            return None
        if not self._type_ok(value) or not self._range_ok(value):
            raise ConfigError(f"{where}: invalid value {value!r}; expected {self.describe()}")
        return float(value) if self.kind == "float" else value

    def _type_ok(self, value: Any) -> bool:
        if self.kind == "bool":
            return isinstance(value, bool)
        if self.kind == "str":
            return isinstance(value, str)
        if self.kind == "table":
            return isinstance(value, dict)
        if self.kind == "strs":
            return isinstance(value, list) and all(isinstance(v, str) for v in value)
        if self.kind == "floats":
            return isinstance(value, list) and all(_is_number(v) for v in value)
        if self.kind == "int":
            return isinstance(value, int) and not isinstance(value, bool)
        return _is_number(value)

    def _range_ok(self, value: Any) -> bool:
        if self.choices is not None:
            return value in self.choices
        numbers = value if self.kind == "floats" else [value] if self.kind in ("float", "int") else []
        return all(
            (not self.positive or v > 0)
            and (self.minimum is None or v >= self.minimum)
            and (self.maximum is None or v <= self.maximum)
            for v in numbers
        )


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def default_of(function: Callable[..., Any], name: str) -> Any:
    """The default of parameter ``name`` of ``function``: a seed API's own default, read rather than restated."""
    return inspect.signature(function).parameters[name].default


# A family whose rankings come from outside (a run file, a user's code) may list a doc twice: an error
# unless this parameter (in the cell id, like every parameter) says which copy counts.
DUPLICATES = ParamSpec(
    None,
    "str",
    "a doc listed twice for one query: 'max' keeps its best score, 'first' its first copy; none: an error",
    choices=DUPLICATE_POLICIES,
    optional=True,
)
