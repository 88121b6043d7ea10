"""Experiment TOML -> a validated, fully resolved ``Experiment`` and its grid cells.

The whole file is checked before any work starts: an unknown key, dataset, system family, measure or
parameter, or a value of the wrong type or range, is a one-line ``ConfigError`` naming the file and
the key (with the allowed values and a "did you mean"). The resolved config is plain JSON; each cell
is a pure function of its ``CellSpec.config``, whose SHA-256 (canonical JSON) is the ``cell_id``.
Everything that can change a cell's numbers is in that config: dataset id and protocol options,
the content hash of the files the dataset is read from (``datasets.fingerprint``), query cut, family
and every parameter (defaults filled in), depth, measures, the tie-break rule, the RRF convention,
the versions of the libraries that compute results, and a hash of the source of the modules the
cell executes (``code_fingerprint``).
"""

from __future__ import annotations

import copy
import dataclasses
import itertools
import json
import math
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

from zerda_eval.checks import (
    check_finite,
    check_keys,
    check_name,
    check_positive_int,
    check_string,
    check_unique,
    get_array,
    get_inline_table,
    get_table,
)
from zerda_eval.config.reranks import MODEL_PREFIX, RERANK, RERANK_LIBRARIES, parse_rerank
from zerda_eval.config.tuning import (
    TUNED,
    Tuning,
    check_tuned_inputs,
    is_staged,
    parse_tune,
    parse_tuning,
    tuned_groups,
    tuned_reference,
)
from zerda_eval.errors import ConfigError, unknown_value_message
from zerda_eval.evaluation.measures import DEFAULT_MEASURES, parse_measure
from zerda_eval.hashing import canonical_json, content_hash
from zerda_eval.ranking import TIE_BREAK

TOP_LEVEL_KEYS = ("experiment", "datasets", "systems", "fusions", "reranks", "tuning", "compare", "study")
EXPERIMENT_KEYS = ("name", "description", "output_dir", "seed", "depth", "measures", "cache_dir", "max_cells")
DATASET_KEYS = ("id", "name", "max_queries", "measures")  # every other key is a protocol option of load_collection
SYSTEM_KEYS = ("name", "family", "params", "grid", "tune")
FUSION_KEYS = ("name", "inputs", "method", "params", "grid", "tune")
DEFAULT_DEPTH = 100
# The largest grid expanded without [experiment].max_cells: counted from the axes' lengths before any
# expansion, so a typo'd million-cell grid is one line in milliseconds, not minutes and gigabytes.
DEFAULT_MAX_CELLS = 10_000
DEFAULT_SEED = 0  # [experiment].seed (it deals the folds of tuned rows)
TUNING_MODULE = "zerda_eval.execution.tuning"  # what a tuned cell executes (its code fingerprint's root)
RERANK_MODULE = "zerda_eval.execution.rerank"  # what a rerank cell executes
TUNED_FUSION_MODULE = "zerda_eval.execution.tuned_fusion"  # ... a tuned cell of a staged fusion
CONVENTIONS = {
    "tie_break": TIE_BREAK,
    "rrf": "1-based rank contributes weight / (k + rank)",
    "mean_over": "all judged queries; a query without results scores 0",
}
# Distributions whose version can change a number in a result (scores, tokens, vectors, measures).
RESULT_LIBRARIES = (
    "zerda-eval",
    "numpy",
    "scipy",
    "ranx",
    "rank-bm25",
    "wordllama",
    "scikit-learn",
    "PyStemmer",
    "ir-datasets",
    "numba",
)


@dataclass(frozen=True)
class CellSpec:
    """One cell of the grid: a dataset with a system (or a fusion of other cells) and its full config."""

    cell_id: str
    kind: str  # "system" | "fusion" | "tuned" | "rerank"
    dataset: str  # dataset label (its id, or name of a user's folder)
    label: str  # system / fusion label, e.g. "bm25[b=0.5]"
    name: str  # system / fusion name from the file (label without the grid part)
    config: dict[str, Any]
    inputs: tuple[str, ...] = ()  # fusion: the cells fused, in order; tuned: its grid cells (+ train split);
    # rerank: the one cell whose run it re-ranks


@dataclass(frozen=True)
class ExperimentSpec:
    """A validated experiment file: resolved config, its hash, and the cells in run order."""

    path: Path
    name: str
    output_dir: Path
    cache_dir: Path
    resolved: dict[str, Any]
    config_hash: str
    cells: list[CellSpec] = field(default_factory=list)
    grid_cells: list[CellSpec] = field(default_factory=list)  # set by ``only``: every cell of the file

    @property
    def every_cell(self) -> list[CellSpec]:
        """Every cell of the experiment file, also after ``only``: the results tables cover them all."""
        return self.grid_cells or self.cells

    def only(self, label: str) -> ExperimentSpec:
        """The experiment restricted to one system or fusion (by name or label) plus the cells it needs."""
        names = {c.name for c in self.cells} | {c.label for c in self.cells}
        if label not in names:
            raise ConfigError(unknown_value_message("system for --only", label, names, str(self.path)))
        wanted = {c.cell_id for c in self.cells if label in (c.name, c.label)}
        for cell in reversed(self.cells):  # a cell's inputs come before it: inputs of inputs are reached too
            if cell.cell_id in wanted:
                wanted.update(cell.inputs)
        cells = [c for c in self.cells if c.cell_id in wanted]
        return dataclasses.replace(self, cells=cells, grid_cells=self.every_cell)


def library_versions(names: tuple[str, ...] = RESULT_LIBRARIES) -> dict[str, str]:
    """Installed versions of the distributions ``names`` ("absent" when not installed)."""
    versions = {}
    for name in names:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = "absent"
    return versions


def load_experiment(path: str | Path) -> ExperimentSpec:
    """Read and validate ``path``; raise ``ConfigError`` (one line, naming file and key) on any mistake."""
    path = Path(path)
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"{path}: experiment file not found; check the path") from None
    except IsADirectoryError:
        raise ConfigError(f"{path}: is a directory; give the experiment's .toml file") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read the experiment file ({exc.strerror}); check the path") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text (byte {exc.start}); save the file as UTF-8") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: malformed TOML: {exc}") from None
    return resolve_experiment(paths_from(raw, path.parent), str(path))


def paths_from(raw: dict[str, Any], folder: Path) -> dict[str, Any]:
    """``raw`` with each relative ``path`` (a ``[[datasets]]`` entry's, a ``run_file`` system's, in its
    params or grid) joined to ``folder``, the experiment file's: a file names its data wherever it is run
    from. Absolute paths, and anything that is not a string, are left as they are."""

    def joined(value: Any) -> Any:
        return str(folder / value) if isinstance(value, str) and not Path(value).is_absolute() else value

    from zerda_eval.systems.run_file import RunFileSystem

    raw = copy.deepcopy(raw)
    for entry in raw.get("datasets", []) if isinstance(raw.get("datasets"), list) else []:
        if isinstance(entry, dict) and "path" in entry:
            entry["path"] = joined(entry["path"])
    for entry in raw.get("systems", []) if isinstance(raw.get("systems"), list) else []:
        if not (isinstance(entry, dict) and entry.get("family") == RunFileSystem.family):
            continue
        for key in ("params", "grid"):
            table = entry.get(key)
            if isinstance(table, dict) and "path" in table:
                value = table["path"]
                table["path"] = (
                    [joined(v) for v in value] if key == "grid" and isinstance(value, list) else joined(value)
                )
    for entry in raw.get("reranks", []) if isinstance(raw.get("reranks"), list) else []:
        model = entry.get("model") if isinstance(entry, dict) else None
        if isinstance(model, str) and model.startswith(MODEL_PREFIX):
            entry["model"] = MODEL_PREFIX + joined(model[len(MODEL_PREFIX) :])
    return raw


def resolve_experiment(raw: Mapping[str, Any], source: str) -> ExperimentSpec:
    """Validate a parsed experiment table (``source`` names it in errors) and expand its grid."""
    if not isinstance(raw, Mapping):
        raise ConfigError(
            f"{source}: give a mapping shaped like the experiment file (an 'experiment' table, 'datasets' and "
            f"'systems' lists), got {type(raw).__name__}"
        )
    check_keys(raw, TOP_LEVEL_KEYS, source, "top-level table")
    check_finite(raw, source)
    exp = get_table(raw, "experiment", source, required=True)
    check_keys(exp, EXPERIMENT_KEYS, source, "key in [experiment]")
    name = check_name(exp.get("name"), f"{source}: [experiment].name")
    depth = check_positive_int(exp.get("depth", DEFAULT_DEPTH), f"{source}: [experiment].depth")
    seed = exp.get("seed", DEFAULT_SEED)
    if not isinstance(seed, int) or isinstance(seed, bool):
        raise ConfigError(f"{source}: [experiment].seed must be an integer, got {seed!r}")
    max_cells = check_positive_int(exp.get("max_cells", DEFAULT_MAX_CELLS), f"{source}: [experiment].max_cells")
    _check_grid_size(raw, max_cells, source)
    measures = _measures(exp.get("measures", list(DEFAULT_MEASURES)), depth, source)
    output_dir = Path(check_string(exp.get("output_dir", f"runs/{name}"), f"{source}: [experiment].output_dir"))
    cache_dir = Path(check_string(exp.get("cache_dir", "cache"), f"{source}: [experiment].cache_dir"))

    common = {
        "depth": depth,
        "measures": measures,
        "seed": seed,
        "conventions": CONVENTIONS,
        "versions": library_versions(),
    }
    datasets = [
        _dataset(entry, f"{source}: datasets[{i}]") for i, entry in enumerate(get_array(raw, "datasets", source))
    ]
    for i, (dataset, entry) in enumerate(zip(datasets, raw["datasets"], strict=True)):
        dataset["measures"] = _dataset_measures(
            dataset, entry.get("measures"), measures, depth, f"{source}: datasets[{i}]"
        )
    check_unique([d["label"] for d in datasets], f"{source}: datasets", "dataset")
    systems = [_system(entry, f"{source}: systems[{i}]") for i, entry in enumerate(get_array(raw, "systems", source))]
    check_unique([s["name"] for s in systems], f"{source}: systems", "system name")
    fusions = [_fusion(e, f"{source}: fusions[{i}]") for i, e in enumerate(get_array(raw, "fusions", source, False))]
    check_unique(
        [s["name"] for s in systems] + [f["name"] for f in fusions],
        f"{source}: fusions",
        "system or fusion name",
    )
    reranks = [
        parse_rerank(entry, f"{source}: reranks[{i}]", depth)
        for i, entry in enumerate(get_array(raw, "reranks", source, False))
    ]
    check_unique(
        [s["name"] for s in systems] + [f["name"] for f in fusions] + [r["name"] for r in reranks],
        f"{source}: reranks",
        "system, fusion or rerank name",
    )
    check_tuned_inputs(systems, fusions, source)

    tuned = any(entry["tune"] is not None for entry in [*systems, *fusions])
    tuning = parse_tuning(raw, datasets, measures, tuned, source)
    cells = _cells(datasets, systems, fusions, common, source, tuning)
    cells += _rerank_cells(datasets, reranks, cells, common, source)
    resolved = {
        "experiment": {
            "name": name,
            "description": exp.get("description", ""),
            "seed": seed,
            "depth": depth,
            "measures": measures,
        },
        "datasets": datasets,
        "systems": systems,
        "fusions": fusions,
        **({"reranks": reranks} if reranks else {}),
        "tuning": dataclasses.asdict(tuning) if tuning else {},
        **_analysis_tables(raw, source),
        "conventions": CONVENTIONS,
        "versions": common["versions"],
    }
    return ExperimentSpec(Path(source), name, output_dir, cache_dir, resolved, content_hash(resolved), cells)


# --- sections -------------------------------------------------------------------------------------


def _check_grid_size(raw: Mapping[str, Any], max_cells: int, source: str) -> None:
    """Refuse a grid of more than ``max_cells`` cells, counted from the lengths of its axes (never expanded):
    datasets x the sum over [[systems]] and [[fusions]] of the product of each entry's axis lengths."""
    from zerda_eval.fusion.simplex import expand_simplex

    datasets = raw.get("datasets")
    n_datasets = len(datasets) if isinstance(datasets, list) else 1
    sizes = []
    for section in ("systems", "fusions"):
        entries = raw.get(section)
        for i, entry in enumerate(entries if isinstance(entries, list) else []):
            grid = entry.get("grid", {}) if isinstance(entry, Mapping) else {}
            inputs = entry.get("inputs") if isinstance(entry, Mapping) else None
            if section == "fusions" and isinstance(inputs, list) and len(inputs) >= 2:
                grid = expand_simplex(grid, len(inputs), f"{source}: fusions[{i}]")  # counted as expanded
            if isinstance(grid, Mapping):
                axes = {str(axis): len(values) if isinstance(values, list) else 1 for axis, values in grid.items()}
                count = math.prod(axes.values())
                shape = " x ".join(f"{axis} {length}" for axis, length in axes.items())
            else:
                count = len(grid) if isinstance(grid, list) else 1
                shape = f"a list of {count} tables"
            sizes.append((count, f"{section}[{i}]" + (f" ({shape})" if shape else "")))
    total = n_datasets * sum(count for count, _ in sizes)
    if total > max_cells:
        largest = ", ".join(f"{where} {count}" for count, where in sorted(sizes, reverse=True)[:3])
        raise ConfigError(
            f"{source}: the grid has {total} cells ({n_datasets} dataset(s) x entries: {largest}), above "
            f"[experiment].max_cells = {max_cells}; shrink the grid, or raise max_cells if you mean it"
        )


def _dataset(entry: Any, where: str) -> dict[str, Any]:
    from zerda_eval.datasets import BUNDLED_IDS
    from zerda_eval.datasets.user import USER_OPTIONS

    if not isinstance(entry, dict):
        raise ConfigError(f'{where}: each [[datasets]] entry must be a table with id = "..."')
    given = {k: v for k, v in entry.items() if k not in DATASET_KEYS}
    for key in sorted(set(given) & {*USER_OPTIONS, "language"}):
        check_string(given[key], f"{where}.{key}")
    max_queries = entry.get("max_queries")
    if max_queries is not None:
        check_positive_int(max_queries, f"{where}.max_queries")
    try:
        return _dataset_options(entry, given, max_queries, BUNDLED_IDS, where)
    except ConfigError as exc:
        message = str(exc)
        raise ConfigError(message if message.startswith(where.split(":")[0]) else f"{where}: {message}") from None


def _dataset_options(entry, given, max_queries, bundled, where) -> dict[str, Any]:
    from zerda_eval.datasets.protocols import dataset_options  # what the loader applies, recorded as is

    if "path" in given:
        dataset_id = check_string(
            entry.get("name") or entry.get("id") or Path(str(given["path"])).name, f"{where}.name"
        )
        options = dataset_options(dataset_id, given, bundled=False, where=where)
    else:
        if "id" not in entry:
            raise ConfigError(f"{where}: missing key 'id' (a dataset id such as \"beir/scifact/test\") or 'path'")
        dataset_id = check_string(entry["id"], f"{where}.id")
        _check_dataset_id(dataset_id, bundled, where)
        options = dataset_options(dataset_id, given, bundled=dataset_id in bundled, where=where)
    from zerda_eval.datasets.fingerprint import content_fingerprint

    return {
        "label": dataset_id,
        "id": dataset_id,
        "given": given,
        "options": options,
        "max_queries": max_queries,
        "content": content_fingerprint(dataset_id, given),
    }


def _check_dataset_id(dataset_id: str, bundled: tuple[str, ...], where: str) -> None:
    import ir_datasets

    if dataset_id in bundled or dataset_id in ir_datasets.registry._registered:
        return
    raise ConfigError(
        unknown_value_message("dataset", dataset_id, bundled, f"{where}.id")
        + ' (or any `ir_datasets list` id, or path = "..." for your own collection)'
    )


def _system(entry: Any, where: str) -> dict[str, Any]:
    from zerda_eval.systems import family_class

    if not isinstance(entry, dict):
        raise ConfigError(f"{where}: each [[systems]] entry must be a table with name and family")
    check_keys(entry, SYSTEM_KEYS, where, "key of a system")
    name = check_name(entry.get("name"), f"{where}.name")
    family = check_string(entry.get("family"), f"{where}.family")
    cls = family_class(family, f"{where}.family")
    params = get_inline_table(entry, "params", where)
    combos = _grid(entry, where, params, set(cls.all_specs()), f"parameter of {family}")
    variants = [
        {"label": _label(name, combo), "params": cls.resolve_params({**params, **combo}, f"{where}.params")}
        for combo in combos
    ]
    _unique_variants(variants, f"{where}.grid")
    keep = parse_tune(entry, {axis for combo in combos for axis in combo}, len(variants), where)
    return {"name": name, "family": family, "variants": variants, "tune": keep}


def _fusion(entry: Any, where: str) -> dict[str, Any]:
    from zerda_eval.fusion.methods import FUSION_METHODS, LEARNED_METHODS, resolve_fusion_params
    from zerda_eval.fusion.simplex import expand_simplex

    if not isinstance(entry, dict):
        raise ConfigError(f"{where}: each [[fusions]] entry must be a table with name, inputs and method")
    check_keys(entry, FUSION_KEYS, where, "key of a fusion")
    name = check_name(entry.get("name"), f"{where}.name")
    method = check_string(entry.get("method", "rrf"), f"{where}.method")
    if method not in FUSION_METHODS:
        raise ConfigError(unknown_value_message("fusion method", method, FUSION_METHODS, f"{where}.method"))
    inputs = entry.get("inputs")
    if not (isinstance(inputs, list) and len(inputs) >= 2 and all(isinstance(i, str) for i in inputs)):
        raise ConfigError(f"{where}.inputs: give a list of at least 2 system names, got {inputs!r}")
    params = get_inline_table(entry, "params", where)
    entry = {**entry, "grid": expand_simplex(entry.get("grid", {}), len(inputs), where)}
    combos = _grid(entry, where, params, set(FUSION_METHODS[method]), f"parameter of fusion {method!r}")
    variants = []
    for combo in combos:
        resolved = resolve_fusion_params(method, {**params, **combo}, f"{where}.params")
        weights = resolved.get("weights")
        if weights is not None and len(weights) != len(inputs):
            raise ConfigError(f"{where}.params.weights: {len(weights)} weights for {len(inputs)} inputs; give one each")
        if weights is not None and not all(math.isfinite(w) and w >= 0 for w in weights):
            raise ConfigError(f"{where}.params.weights: weights must be finite numbers >= 0, got {weights!r}")
        variants.append({"label": _label(name, combo), "params": resolved})
    _unique_variants(variants, f"{where}.grid")
    if method in LEARNED_METHODS and len(variants) > 1:
        raise ConfigError(
            f"{where}.grid: a learned fusion ({method}) is fitted on the training queries it would be chosen on, "
            "so a grid over it picks the best fit (the most overfit model); give one model per [[fusions]] entry"
        )
    staged = is_staged({"method": method, "inputs": inputs})
    keep = parse_tune(entry, {axis for combo in combos for axis in combo}, len(variants), where, staged)
    return {"name": name, "method": method, "inputs": inputs, "variants": variants, "tune": keep}


def _analysis_tables(raw: Mapping[str, Any], source: str) -> dict[str, dict[str, Any]]:
    """``[compare]`` and ``[study]`` as given: the analysis layer validates them (``analysis.settings``)."""
    return {key: dict(get_table(raw, key, source)) for key in ("compare", "study")}


def _cells(
    datasets: list, systems: list, fusions: list, common: dict, source: str, tuning: Tuning | None
) -> list[CellSpec]:
    """datasets x systems x grid, then the fusion cells (after the cells they fuse), then the tuned rows."""
    cells: list[CellSpec] = []
    of_entry: dict[tuple[str, str], list[CellSpec]] = {}  # (dataset label, entry name) -> cells in grid order
    for dataset in datasets:
        ds = _cell_dataset(dataset)
        own = {**common, "measures": dataset["measures"]}
        by_name: dict[str, list[CellSpec]] = {}
        for system in systems:
            for variant in system["variants"]:
                part = {"name": system["name"], "label": variant["label"], "family": system["family"]}
                cell = _cell("system", ds, {**part, "params": variant["params"]}, {}, own, dataset["label"], source)
                cells.append(cell)
                of_entry.setdefault((dataset["label"], system["name"]), []).append(cell)
                for key in {system["name"], variant["label"]}:
                    by_name.setdefault(key, []).append(cell)
        for i, fusion in enumerate(fusions):
            if is_staged(fusion):  # its one row is tuned: _tuned_cells
                continue
            inputs = [_one_cell(by_name, name, f"{source}: fusions[{i}].inputs") for name in fusion["inputs"]]
            input_ids = [c.cell_id for c in inputs]
            for variant in fusion["variants"]:
                part = {"name": fusion["name"], "label": variant["label"], "method": fusion["method"]}
                extra = {"inputs": input_ids}
                cell = _cell("fusion", ds, {**part, "params": variant["params"]}, extra, own, dataset["label"], source)
                cells.append(cell)
                of_entry.setdefault((dataset["label"], fusion["name"]), []).append(cell)
    if tuning is not None:
        cells += _tuned_cells(datasets, [*systems, *fusions], of_entry, common, source, tuning)
    return cells


def _rerank_cells(datasets: list, reranks: list, cells: list[CellSpec], common: dict, source: str) -> list[CellSpec]:
    """One rerank cell per ``[[reranks]]`` entry and dataset, reading the one cell its ``input`` names there
    (a system, fusion or tuned row, by name or label)."""
    out = []
    for dataset in datasets:
        by_name: dict[str, list[CellSpec]] = {}
        for cell in cells:
            if cell.dataset == dataset["label"]:
                for key in {cell.name, cell.label}:
                    by_name.setdefault(key, []).append(cell)
        own = {**common, "measures": dataset["measures"]}
        for i, rerank in enumerate(reranks):
            source_cell = _one_cell(by_name, rerank["input"], f"{source}: reranks[{i}].input", "rerank input")
            part = {"name": rerank["name"], "label": rerank["name"], "family": RERANK, **rerank}
            extra = {"inputs": [source_cell.cell_id]}
            out.append(_cell(RERANK, _cell_dataset(dataset), part, extra, own, dataset["label"], source))
    return out


def _cell_dataset(dataset: dict[str, Any]) -> dict[str, Any]:
    """What a cell's config records of its dataset."""
    return {k: dataset[k] for k in ("id", "given", "options", "max_queries", "content")}


def _tuned_cells(
    datasets: list, entries: list, of_entry: dict, common: dict, source: str, tuning: Tuning
) -> list[CellSpec]:
    """One tuned cell per tuned entry, dataset (not only a train split) and group of kept axis values."""
    by_label = {d["label"]: d for d in datasets}
    only_train = set(tuning.train.values()) - set(tuning.train)
    cells = []
    for dataset in datasets:
        if dataset["label"] in only_train:
            continue
        split = tuning.train.get(dataset["label"])
        own = {**common, "measures": dataset["measures"]}
        for entry in entries:
            if entry["tune"] is None:
                continue
            for kept, indices in tuned_groups(entry["variants"], entry["tune"]):
                label = _label(entry["name"], kept)
                label = f"{label[:-1]},{TUNED}]" if kept else f"{entry['name']}[{TUNED}]"
                part = {
                    "name": entry["name"],
                    "label": label,
                    "family": TUNED,
                    "params": {**kept, TUNED: tuning.describe(dataset["label"])},
                    "tuning": {
                        "measure": tuning.measure,
                        "folds": tuning.folds,
                        "train": split,
                        **({"overlap": tuning.overlap} if split else {}),
                    },
                }
                if "method" in entry and is_staged(entry):
                    part["fusion"] = {"method": entry["method"], "variants": [entry["variants"][i] for i in indices]}
                    where = f"{source}: fusion {entry['name']!r}.inputs"
                    stages = _input_stages(entry["inputs"], dataset["label"], of_entry, where)
                    train_stages = _input_stages(entry["inputs"], split, of_entry, where) if split else []
                    inputs = [cell_id for stage in stages for cell_id in stage]
                    train_inputs = [cell_id for stage in train_stages for cell_id in stage]
                    staged = {"input_stages": stages, "train_input_stages": train_stages}
                else:
                    inputs = [of_entry[(dataset["label"], entry["name"])][i].cell_id for i in indices]
                    train_inputs = [of_entry[(split, entry["name"])][i].cell_id for i in indices] if split else []
                    staged = {}
                extra = {
                    "inputs": inputs,
                    "train_inputs": train_inputs,
                    "train_dataset": _cell_dataset(by_label[split]) if split else None,
                    **staged,
                }
                cells.append(_cell(TUNED, _cell_dataset(dataset), part, extra, own, dataset["label"], source))
    return cells


def _input_stages(names: list[str], dataset: str, of_entry: dict, where: str) -> list[list[str]]:
    """Per input of a staged fusion, the cell ids it chooses among: a tuned system's grid, or one cell."""
    stages = []
    for name in names:
        entry = tuned_reference(name)
        if entry is not None:
            stages.append([cell.cell_id for cell in of_entry[(dataset, entry)]])
        else:
            found = [cell for (label, _), cells in of_entry.items() if label == dataset for cell in cells]
            stages.append([_one_cell(_by_name(found), name, where).cell_id])
    return stages


def _by_name(cells: list[CellSpec]) -> dict[str, list[CellSpec]]:
    """Cells by entry name and by label (a grid's name maps to all its cells)."""
    by_name: dict[str, list[CellSpec]] = {}
    for cell in cells:
        for key in {cell.name, cell.label}:
            by_name.setdefault(key, []).append(cell)
    return by_name


def _cell(kind: str, dataset: dict, part: dict, extra: dict, common: dict, dataset_label: str, source: str) -> CellSpec:
    """One cell: its resolved config (``kind``, dataset, the system or fusion ``part``, ...) and its hash."""
    from zerda_eval.config.code_fingerprint import code_fingerprint
    from zerda_eval.systems import family_class
    from zerda_eval.systems.libraries import optional_libraries

    if kind == "system":
        family = family_class(part["family"], "")
        root = family.__module__
        content = family.content_key(part["params"], dataset_label, f"{source}: system {part['label']!r}")
        part = {**part, "content": content} if content else part
        # the optional libraries it runs (torch, onnxruntime, faiss, ...): a new version is a new cell
        common = {**common, "versions": {**common["versions"], **library_versions(optional_libraries(part["params"]))}}
    elif kind == RERANK:
        root = RERANK_MODULE
        common = {**common, "versions": {**common["versions"], **library_versions(RERANK_LIBRARIES)}}
    else:
        root = "zerda_eval.fusion.methods"
        if kind == TUNED:
            root = TUNED_FUSION_MODULE if "input_stages" in extra else TUNING_MODULE
    config = {"kind": kind, "dataset": dataset, kind: part, **extra, **common, "code": code_fingerprint(root)}
    inputs = tuple(extra.get("inputs", ())) + tuple(extra.get("train_inputs", ()))
    return CellSpec(content_hash(config)[:16], kind, dataset_label, part["label"], part["name"], config, inputs)


def _one_cell(by_name: dict[str, list[CellSpec]], name: str, where: str, kind: str = "fusion input") -> CellSpec:
    found = by_name.get(name)
    if found is None:
        raise ConfigError(unknown_value_message(kind, name, by_name, where))
    if len(found) != 1:
        labels = ", ".join(c.label for c in found)
        raise ConfigError(
            f"{where}: {name!r} is a grid of {len(found)} cells; name one of them ({labels}), or "
            f'"{name}[tuned]" if the entry has tune = true (chosen per fold)'
        )
    return found[0]


# --- small checks ---------------------------------------------------------------------------------


def _grid(entry: dict, where: str, params: dict, allowed: set[str], kind: str) -> list[dict[str, Any]]:
    """The grid as a list of parameter combinations: a table of axes (cartesian) or a list of tables."""
    grid = entry.get("grid", {})
    if isinstance(grid, dict):
        for axis, values in grid.items():
            if not isinstance(values, list) or not values:
                raise ConfigError(f"{where}.grid.{axis}: give a non-empty list of values, got {values!r}")
        combos = [dict(zip(grid, values, strict=True)) for values in itertools.product(*grid.values())]
    elif isinstance(grid, list) and grid and all(isinstance(c, dict) for c in grid):
        combos = [dict(c) for c in grid]
    else:
        raise ConfigError(f"{where}.grid: give a table of value lists or a list of tables, got {grid!r}")
    for combo in combos:
        check_keys(combo, allowed, f"{where}.grid", kind)
        for axis in combo:
            if axis in params:
                raise ConfigError(f"{where}.grid.{axis}: also set in params; keep it in one place")
    seen = set()
    for combo in combos:
        if canonical_json(combo) in seen:
            raise ConfigError(f"{where}.grid: the combination {_label('', combo)} appears twice; remove one")
        seen.add(canonical_json(combo))
    return combos


def _unique_variants(variants: list[dict[str, Any]], where: str) -> None:
    """Two grid values that resolve to the same parameters (``b = [1, 1.0]``) would be one cell twice."""
    first: dict[str, str] = {}
    for variant in variants:
        key = canonical_json(variant["params"])
        if key in first:
            raise ConfigError(
                f"{where}: {variant['label']} and {first[key]} are the same parameters (a value appears twice); "
                "remove one"
            )
        first[key] = variant["label"]


def _label(name: str, combo: dict[str, Any]) -> str:
    if not combo:
        return name
    parts = [f"{k}={v if isinstance(v, str) else json.dumps(v)}" for k, v in combo.items()]
    return f"{name}[{','.join(parts)}]"


def _measures(value: Any, depth: int, source: str, where: str | None = None) -> list[str]:
    where = where or f"{source}: [experiment].measures"
    if not isinstance(value, list) or not value or not all(isinstance(m, str) for m in value):
        raise ConfigError(f'{where}: give a non-empty list of measure names such as "ndcg@10"')
    for measure in value:
        cutoff = parse_measure(measure, where).cutoff
        if cutoff is not None and cutoff > depth:
            raise ConfigError(f"{where}: {measure} needs a run of depth >= {cutoff}; raise [experiment].depth")
    check_unique(value, where, "measure")
    return list(value)


def _dataset_measures(dataset: dict, own: Any, measures: list[str], depth: int, where: str) -> list[str]:
    """The measures of one dataset: its own ``measures`` or the experiment's, none deeper than its run depth
    (Qur'an QA cuts runs at 10: a recall@100 there would be a depth-10 number), plus its official measures."""
    chosen = measures if own is None else _measures(own, depth, where.split(":")[0], f"{where}.measures")
    run_depth = dataset["options"].get("run_depth")
    for measure in chosen:
        cutoff = parse_measure(measure).cutoff
        if run_depth is not None and cutoff is not None and cutoff > run_depth:
            raise ConfigError(
                f"{where}.measures: measure {measure} is deeper than the run depth {run_depth} of dataset "
                f"{dataset['label']!r} (its runs are cut at {run_depth}); "
                f"give this dataset measures = [...] at most @{run_depth}"
            )
    official = [m for m in dataset["options"].get("official_measures", []) if m not in chosen]
    return [*chosen, *official]
