"""``[tuning]`` and ``tune``: which grid entries get a held-out "tuned" row, and how it is chosen.

```toml
[tuning]
measure = "ndcg@10"                                      # maximised (default: the first measure)
folds = 5                                                # k-fold cross-validation over each dataset's queries
train = { "beir/scifact/test" = "beir/scifact/train" }   # optional: choose on another split's queries
overlap = "refuse"                                       # or "drop": train queries that are test queries

[[fusions]]
name = "wsum"
...
grid = { weights = [[0.7, 0.3], [0.5, 0.5]], score_norm = ["min-max", "z-score"] }
tune = true                                              # or tune = { keep = ["rrf_order"] }

[[fusions]]
name = "wsum_tuned_bm25"
inputs = ["bm25_grid[tuned]", "dense"]                   # bm25_grid: a system with a grid and tune = true
method = "wsum"                                          # or "ltr" (learned: fusion.ltr)
grid = { weights = { simplex = 0.1 } }                   # every weight vector in steps of 0.1 summing to 1
tune = true                                              # required: its one row is chosen per fold
```

A tuned entry gets, per dataset (a dataset used only as a ``train`` split gets none), one row
``<name>[tuned]`` (with ``keep``: one per value of the kept axes, ``<name>[rrf_order=fixed,tuned]``).
Its run is assembled from the grid's own runs: with ``train``, the grid point best on the train split
answers every test query; otherwise, per fold, the grid point best on the other folds answers that
fold's queries (PyTerrier's ``KFoldGridSearch``). Folds come from the experiment's ``seed``; queries
with the same text share a fold. Nothing is retrieved again: folds only choose among finished runs
(``execution.tuning``).

A fusion over a tuned input (``"<name>[tuned]"``) or with a learned method (``ltr``) is "staged"
(``is_staged``): it has no grid rows, only its tuned row, where per fold each input's grid point is
chosen first, then the fusion's, on the same training queries (``execution.tuned_fusion``).

A train split that holds test queries (the same query id, or the same text) is not held out: the run
is refused, naming the overlap, unless ``overlap = "drop"``, which leaves those train queries out of the
choice (recorded in the tuned row's ``stats["tuning"]["left_out_of_train"]``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from zerda_eval.checks import check_keys, check_positive_int, check_string, get_table
from zerda_eval.errors import ConfigError, did_you_mean, unknown_value_message

TUNING_KEYS = ("measure", "folds", "train", "overlap")
OVERLAP_RULES = ("refuse", "drop")  # what a train split holding test queries gets; the first is the default
TUNE_KEYS = ("keep",)
DEFAULT_FOLDS = 5
TUNED = "tuned"


@dataclass(frozen=True)
class Tuning:
    """The resolved ``[tuning]`` table: the measure maximised, the fold count, test label -> train label."""

    measure: str
    folds: int
    train: dict[str, str]
    overlap: str = OVERLAP_RULES[0]

    def describe(self, dataset: str) -> str:
        """How the tuned rows of ``dataset`` are chosen, as the results record it."""
        if dataset in self.train:
            return f"best {self.measure} on {self.train[dataset]}"
        return f"{self.folds}-fold cross-validation on {self.measure}"


def tuned_reference(name: str) -> str | None:
    """The entry named by a fusion input written ``<name>[tuned]`` (chosen per fold), else None."""
    suffix = f"[{TUNED}]"
    return name[: -len(suffix)] if name.endswith(suffix) else None


def is_staged(fusion: Mapping[str, Any]) -> bool:
    """A fusion whose every row is chosen per fold (``execution.tuned_fusion``): over a tuned input, or learned."""
    from zerda_eval.fusion.methods import LEARNED_METHODS

    return fusion["method"] in LEARNED_METHODS or any(tuned_reference(name) for name in fusion["inputs"])


def check_tuned_inputs(systems: list[dict[str, Any]], fusions: list[dict[str, Any]], source: str) -> None:
    """Each ``<name>[tuned]`` fusion input names a system with ``tune = true`` (no ``keep``)."""
    tuned = {system["name"]: system["tune"] for system in systems}
    for i, fusion in enumerate(fusions):
        for name in fusion["inputs"]:
            entry = tuned_reference(name)
            if entry is None:
                continue
            where = f"{source}: fusions[{i}].inputs"
            if entry not in tuned:
                raise ConfigError(unknown_value_message("tuned system", entry, sorted(tuned), where))
            if tuned[entry] is None:
                raise ConfigError(
                    f"{where}: {name!r} names system {entry!r}, which is not tuned; add tune = true to it"
                )
            if tuned[entry]:
                raise ConfigError(
                    f"{where}: {name!r} keeps axes {tuned[entry]} (several tuned rows); a fusion input needs one: "
                    "give that system tune = true"
                )


def parse_tune(
    entry: Mapping[str, Any], axes: set[str], n_variants: int, where: str, staged: bool = False
) -> list[str] | None:
    """The kept axes of a ``tune`` key (``true`` -> none kept), or None when the entry is not tuned.

    ``staged`` (``is_staged``): a fusion chosen per fold even without a grid of its own, which must be tuned.
    """
    tune = entry.get("tune", False)
    if tune is False and staged:
        raise ConfigError(
            f"{where}: a fusion over a tuned input (<name>[tuned]) or a learned one (ltr) is chosen on training "
            "queries per fold; add tune = true"
        )
    if tune is False:
        return None
    if tune is True:
        keep: list[str] = []
    elif isinstance(tune, Mapping):
        check_keys(tune, TUNE_KEYS, where, "key in tune")
        keep = tune.get("keep", [])
        if not (isinstance(keep, list) and all(isinstance(axis, str) for axis in keep)):
            raise ConfigError(f"{where}.tune.keep: give a list of grid axes, got {keep!r}")
        for axis in keep:
            if axis not in axes:
                raise ConfigError(unknown_value_message("grid axis in tune.keep", axis, sorted(axes), where))
    else:
        raise ConfigError(f'{where}.tune: give true, or a table such as {{ keep = ["rrf_order"] }}, got {tune!r}')
    if n_variants < 2 and not staged:
        raise ConfigError(f"{where}.tune: the entry has no grid to tune; give it grid = {{ axis = [values] }}")
    return keep


def parse_tuning(
    raw: Mapping[str, Any], datasets: list[dict[str, Any]], measures: list[str], tuned: bool, source: str
) -> Tuning | None:
    """The ``[tuning]`` table, checked against the datasets; None when no entry is tuned."""
    table = get_table(raw, "tuning", source)
    where = f"{source}: [tuning]"
    if not tuned:
        if table:
            raise ConfigError(f"{where}: no [[systems]] or [[fusions]] entry has tune = true; add one or remove it")
        return None
    check_keys(table, TUNING_KEYS, source, "key in [tuning]")
    measure = check_string(table.get("measure", measures[0]), f"{where}.measure")
    folds = check_positive_int(table.get("folds", DEFAULT_FOLDS), f"{where}.folds")
    if folds < 2:
        raise ConfigError(f"{where}.folds: give at least 2 folds, got {folds}")
    train = table.get("train", {})
    if not isinstance(train, Mapping):
        raise ConfigError(f'{where}.train: give a table {{ "test dataset" = "train dataset" }}, got {train!r}')
    overlap = check_string(table.get("overlap", OVERLAP_RULES[0]), f"{where}.overlap")
    if overlap not in OVERLAP_RULES:
        raise ConfigError(unknown_value_message("overlap rule", overlap, OVERLAP_RULES, f"{where}.overlap"))
    labels = [d["label"] for d in datasets]
    for test, split in train.items():
        for label in (test, split):
            if label not in labels:
                raise ConfigError(
                    f"{where}.train: {label!r} must be listed in [[datasets]] (a train split is loaded like any "
                    f"dataset; its cells are run to choose on){did_you_mean(label, labels)}; "
                    f"listed: {', '.join(labels)}"
                )
        if test == split:
            raise ConfigError(f"{where}.train: {test!r} cannot be its own train split; name another [[datasets]] entry")
    for dataset in datasets:
        if measure not in dataset["measures"]:
            raise ConfigError(
                f"{where}.measure: {measure} is not a measure of dataset {dataset['label']!r} "
                f"(it has {', '.join(dataset['measures'])})"
            )
    return Tuning(measure, folds, dict(train), overlap)


def tuned_groups(variants: list[dict[str, Any]], keep: list[str]) -> list[tuple[dict[str, Any], list[int]]]:
    """The variants grouped by their values of the kept axes: ``(kept values, variant indices)`` in grid order."""
    groups: dict[str, tuple[dict[str, Any], list[int]]] = {}
    for index, variant in enumerate(variants):
        kept = {axis: variant["params"][axis] for axis in keep}
        groups.setdefault(repr(sorted(kept.items())), (kept, []))[1].append(index)
    return list(groups.values())
