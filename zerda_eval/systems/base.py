"""What every system family shares: declarative parameter specs, the System base class, doc-id mapping.

A family is a ``System`` subclass with a ``family`` name and ``param_specs``. Like a scikit-learn
estimator, ``__init__`` only stores parameters; ``index(collection)`` builds the index and
``search(queries, k)`` returns ``{qid: [(doc_id, score), ...]}`` with the collection's doc ids, best
first. Parameters are checked against their ``ParamSpec`` when the experiment file is read, so a bad
value fails before any work starts.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from zerda_eval.datasets.collection import NO_ANSWER_ID
from zerda_eval.errors import ConfigError, unknown_value_message

Results = list[tuple[str, float]]


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
    allows the default ``None``.
    """

    default: Any
    kind: str
    help: str
    choices: tuple | None = None
    minimum: float | None = None
    maximum: float | None = None
    positive: bool = False
    optional: bool = False

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


COMMON_PARAMS = {
    "no_answer_threshold": ParamSpec(
        None,
        "float",
        "Qur'an QA: answer only the no-answer id '-1' when the top hit's raw score is below this "
        "(BM25 families: the BM25 score before max-normalisation; dense: the cosine; others: the ranking score)",
        optional=True,
    ),
}


class System:
    """Base of every family. Subclasses set ``family``, ``param_specs`` and implement ``_index``/``_search``."""

    family: ClassVar[str]
    description: ClassVar[str]
    param_specs: ClassVar[dict[str, ParamSpec]]

    def __init__(self, **params: Any):
        self.params = params
        self.stats: dict[str, Any] = {}

    @classmethod
    def all_specs(cls) -> dict[str, ParamSpec]:
        """The family's parameters plus the ones every family takes."""
        return {**cls.param_specs, **COMMON_PARAMS}

    @classmethod
    def resolve_params(cls, params: Mapping[str, Any], where: str) -> dict[str, Any]:
        """Defaults filled in and every value checked; unknown names get a "did you mean"."""
        specs = cls.all_specs()
        for name in params:
            if name not in specs:
                raise ConfigError(unknown_value_message(f"parameter of {cls.family}", name, specs, where))
        resolved = {
            name: spec.check(params[name], f"{where}.{name}") if name in params else spec.default
            for name, spec in specs.items()
        }
        cls.check_combination(resolved, where)
        return resolved

    @classmethod
    def check_combination(cls, params: dict[str, Any], where: str) -> None:
        """Cross-parameter rules (none by default); raise ``ConfigError``."""

    def index(self, collection: Any, cache_dir: Path | None = None) -> None:
        """Build the index over ``collection`` (a ``zerda_eval.datasets.Collection``)."""
        self.collection = collection
        self._index(collection, cache_dir)

    def analysis(self, collection: Any) -> Any:
        """The resolved analysis options on ``collection`` (recorded in ``stats["analysis"]``)."""
        from zerda_eval.systems.analysis import resolve_analysis

        analysis = resolve_analysis(self.params, collection)
        self.stats["analysis"] = analysis.describe()
        return analysis

    def search(self, queries: Mapping[str, str], k: int) -> dict[str, Results]:
        """``{qid: [(doc_id, score), ...]}`` best first, at most ``k`` per query.

        With ``no_answer_threshold``, a query whose top hit's raw score (``_scored``) is below it, or
        that has no hit, is answered with the no-answer id alone.
        """
        threshold = self.params.get("no_answer_threshold")
        run = {}
        for qid, text in queries.items():
            results, top = self._scored(text, k)
            if threshold is not None and (top is None or top < threshold):
                results = [(NO_ANSWER_ID, 1.0)]
            run[qid] = results
        return run

    def _index(self, collection: Any, cache_dir: Path | None) -> None:
        raise NotImplementedError

    def _scored(self, text: str, k: int) -> tuple[Results, float | None]:
        """The results and the raw score of the top hit (None without a hit); families that rescale
        their scores (BM25's max-normalisation) override this to return the score before rescaling."""
        results = self._search(text, k)
        return results, (results[0][1] if results else None)

    def _search(self, text: str, k: int) -> Results:
        raise NotImplementedError
