"""The small checks every table of an experiment file goes through: one key checker, one message each.

Each raises a one-line ``ConfigError`` naming the file and the key path (``where``).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Collection, Iterable, Mapping
from typing import Any

from zerda_eval.errors import ConfigError, unknown_value_message

NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


def check_keys(
    table: Iterable[str], allowed: Collection[str], where: str, kind: str, locate: Callable[[str], str] | None = None
) -> None:
    """The one key checker: a ``ConfigError`` for the first key of ``table`` not in ``allowed``.

    The message names the key's location (``where``, or ``locate(key)`` when each key has its own path),
    what kind of key it is, the closest allowed key and every allowed one.
    """
    for key in table:
        if key not in allowed:
            raise ConfigError(unknown_value_message(kind, key, allowed, locate(key) if locate else where))


def get_table(raw: Mapping[str, Any], key: str, source: str, required: bool = False) -> dict[str, Any]:
    value = raw.get(key, {})
    if key not in raw and required:
        raise ConfigError(f'{source}: missing [{key}] table (it needs at least name = "...")')
    if not isinstance(value, dict):
        raise ConfigError(f"{source}: {key} must be a table ([{key}])")
    return value


def get_array(raw: Mapping[str, Any], key: str, source: str, required: bool = True) -> list[Any]:
    value = raw.get(key, [])
    if not isinstance(value, list):
        raise ConfigError(f"{source}: {key} must be an array of tables ([[{key}]])")
    if required and not value:
        raise ConfigError(f"{source}: no [[{key}]] entries; add at least one")
    return value


def get_inline_table(entry: dict, key: str, where: str) -> dict[str, Any]:
    value = entry.get(key, {})
    if not isinstance(value, dict):
        raise ConfigError(f"{where}.{key}: must be a table such as {{ k1 = 1.2 }}, got {value!r}")
    return dict(value)


def check_name(value: Any, where: str) -> str:
    if not isinstance(value, str) or not NAME_PATTERN.match(value):
        raise ConfigError(f"{where}: give a name of letters, digits, '.', '_' or '-', got {value!r}")
    return value


def check_string(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value:
        raise ConfigError(f"{where}: expected a non-empty string, got {value!r}")
    return value


def check_positive_int(value: Any, where: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ConfigError(f"{where}: expected an integer >= 1, got {value!r}")
    return value


def check_unique(values: list[str], where: str, kind: str) -> None:
    seen = set()
    for value in values:
        if value in seen:
            raise ConfigError(f"{where}: {kind} {value!r} appears twice; names must be unique")
        seen.add(value)


def check_finite(raw: Mapping[str, Any], source: str) -> None:
    """Every number of the experiment is finite: a NaN or infinity (TOML's ``nan`` / ``inf``, or a Python
    float) is a one-line error naming its key path, before anything hashes or compares it."""
    stack: list[tuple[str, Any]] = [
        (f"[{key}]" if isinstance(value, Mapping) else str(key), value) for key, value in raw.items()
    ]
    while stack:
        path, value = stack.pop()
        if isinstance(value, float) and not math.isfinite(value):
            raise ConfigError(f"{source}: {path}: {value!r} is not a finite number; give a finite value")
        if isinstance(value, Mapping):
            stack += [(f"{path}.{key}", item) for key, item in value.items()]
        elif isinstance(value, list | tuple):
            stack += [(f"{path}[{index}]", item) for index, item in enumerate(value)]
