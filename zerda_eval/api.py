"""The Python API: everything ``zerda-eval run`` / ``report`` / ``systems`` do, from a notebook.

    from zerda_eval import Experiment

    experiment = Experiment.from_toml("experiments/quickstart.toml")   # or Experiment.from_dict({...})
    results = experiment.run()                                         # resumable, like the CLI
    results.table                                                      # one row per cell (pandas)
    results.compare(baseline="bm25", tests=["t-test"])                 # paired tests, corrected
    results.report("reports/quickstart")                               # report.md + report.html

The CLI is a thin layer over this module: the same validation, one-line errors and files on disk.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from zerda_eval.analysis.compare import COMPARE_KEYS, compare_to_baseline, measure_columns, parse_compare
from zerda_eval.analysis.grid import analyse_grid
from zerda_eval.analysis.settings import AnalysisSettings, parse_analysis
from zerda_eval.config.experiment import ExperimentSpec, load_experiment, resolve_experiment
from zerda_eval.errors import ConfigError, unknown_value_message
from zerda_eval.execution.cell import CellResult
from zerda_eval.execution.executors import Scheduler, open_executor
from zerda_eval.execution.runner import run_experiment
from zerda_eval.fusion import FUSION_METHODS
from zerda_eval.report import DEFAULT_FORMATS as DEFAULT_REPORT_FORMATS
from zerda_eval.report import write_report
from zerda_eval.store.run_dir import (
    EXPERIMENT_FILE,
    check_run_dir,
    finished_results,
    read_cell_run,
    read_experiment_json,
    read_tables,
)
from zerda_eval.systems import SYSTEMS
from zerda_eval.systems.user import PythonSystem, is_factory_path

DICT_SOURCE = "Experiment.from_dict"


class Experiment:
    """A validated experiment: its grid of cells, analysis settings and the user systems it runs."""

    def __init__(self, spec: ExperimentSpec, analysis: AnalysisSettings, systems: Mapping[str, Any] | None = None):
        self.spec = spec
        self.analysis = analysis
        self.systems = dict(systems or {})

    @classmethod
    def from_toml(cls, path: str | Path) -> Experiment:
        """Read and validate an experiment file (one-line ``ConfigError`` naming file and key)."""
        spec = load_experiment(path)
        return cls._checked(spec, str(path), {})

    @classmethod
    def from_dict(
        cls, mapping: Mapping[str, Any], systems: Mapping[str, Any] | None = None, source: str = DICT_SOURCE
    ) -> Experiment:
        """An experiment from a mapping shaped like the TOML file (``tomllib.load`` of one gives the same grid).

        ``systems``: your own retrievers by name (``index(collection)`` / ``search(query_text, k)``, or
        a callable ``f(query_text, k)``). One not named by a ``[[systems]]`` entry's ``object`` is added
        as ``{name, family = "python", params = {object = name, version = obj.version}}``.
        """
        if systems is not None and not isinstance(systems, Mapping):
            raise ConfigError(f"{source}: systems= takes a mapping {{name: your system}}, got {type(systems).__name__}")
        systems = dict(systems or {})
        if not isinstance(mapping, Mapping):
            resolve_experiment(mapping, source)  # the one-line ConfigError for a non-mapping
        raw = copy.deepcopy(dict(mapping))
        entries = raw.setdefault("systems", [])
        if not isinstance(entries, list):
            raise ConfigError(f"{source}: systems must be a list of tables ([[systems]])")
        named = {e.get("params", {}).get("object") for e in entries if isinstance(e, Mapping)}
        for name, obj in systems.items():
            if name not in named:
                entries.append({"name": name, "family": PythonSystem.family, "params": _api_params(name, obj, source)})
        spec = resolve_experiment(raw, source)
        return cls._checked(spec, source, systems)

    @classmethod
    def _checked(cls, spec: ExperimentSpec, source: str, systems: dict[str, Any]) -> Experiment:
        analysis = parse_analysis(spec.resolved, source)
        for entry in spec.resolved["systems"]:
            if entry["family"] != PythonSystem.family:
                continue
            for variant in entry["variants"]:
                name = variant["params"]["object"]
                if not is_factory_path(name) and name not in systems:
                    raise ConfigError(
                        f"{source}: system {entry['name']!r}: object {name!r} is neither 'package.module:factory' nor "
                        "a system given to Experiment.from_dict(..., systems={...})"
                    )
        return cls(spec, analysis, systems)

    @property
    def name(self) -> str:
        """``[experiment].name``."""
        return self.spec.name

    @property
    def output_dir(self) -> Path:
        """Where the runs are written (``[experiment].output_dir``)."""
        return self.spec.output_dir

    @property
    def cells(self) -> pd.DataFrame:
        """The grid in run order: cell_id, dataset, system label, kind, and a fusion's input cells."""
        rows = [
            {"cell_id": c.cell_id, "dataset": c.dataset, "system": c.label, "kind": c.kind, "inputs": list(c.inputs)}
            for c in self.spec.cells
        ]
        return pd.DataFrame(rows, columns=["cell_id", "dataset", "system", "kind", "inputs"])

    def finished_cells(self) -> int:
        """How many cells of the experiment are finished (verified) in its output directory."""
        every_id = [cell.cell_id for cell in self.spec.every_cell]
        return len(finished_results(self.output_dir, every_id))

    def only(self, label: str) -> Experiment:
        """The experiment restricted to one system or fusion (name or label) plus the cells it needs."""
        return Experiment(self.spec.only(label), self.analysis, self.systems)

    def run(self, scheduler: str | Scheduler | None = None, force: bool = False, progress: bool = True) -> Results:
        """Run every cell not finished yet (``force``: all, rebuilding their store entries) and return the results.

        ``scheduler``: ``None`` / ``"serial"`` (this process), ``"local:N"`` (Dask, N workers) or
        ``"tcp://HOST:PORT"``. Interrupted runs resume: finished cells are reused, by content hash.
        """
        counts = {True: 0, False: 0}  # reused -> cells

        def count(outcome: CellResult) -> None:
            counts[outcome.reused] += 1

        with open_executor(scheduler or "serial") as executor:
            run_experiment(
                self.spec, force=force, progress=progress, on_cell=count, executor=executor, systems=self.systems
            )
        results = Results(self.output_dir)
        results.reused, results.computed = counts[True], counts[False]
        return results

    def prepare(self) -> dict[str, float]:
        """Read the datasets, make the models' stored files and compile the kernels a first run would
        (``execution.prepare``); returns the seconds each step took. The run directory is not touched."""
        from zerda_eval.execution.prepare import prepare

        return prepare(self.spec.cells)


def _api_params(name: str, obj: Any, source: str) -> dict[str, Any]:
    version = getattr(obj, "version", None)
    if not isinstance(version, str) or not version:
        raise ConfigError(
            f"{source}: system {name!r} needs a version string (set {name}.version = '1', or give a [[systems]] "
            f"entry with params = {{object = {name!r}, version = '1'}}); it keys the reuse of its finished cells"
        )
    return {"object": name, "version": version}


class Results:
    """The results of a run directory: tables, runs, comparisons and the report."""

    def __init__(self, run_dir: str | Path):
        self.run_dir = Path(run_dir)
        check_run_dir(self.run_dir)
        self.config: dict[str, Any] = read_experiment_json(self.run_dir)["config"]
        self.table, self.per_query = read_tables(self.run_dir)
        self.analysis = parse_analysis(self.config, str(self.run_dir / EXPERIMENT_FILE))
        # the cells this process's ``Experiment.run`` reused and computed (None for a run directory loaded)
        self.reused: int | None = None
        self.computed: int | None = None

    @classmethod
    def load(cls, run_dir: str | Path) -> Results:
        """The results of a finished run directory (``[experiment].output_dir``)."""
        return cls(run_dir)

    def cell_id(self, cell: str, dataset: str | None = None) -> str:
        """The id of a cell given by id, or by system label (and ``dataset`` when the label runs on several)."""
        if cell in set(self.table["cell_id"]):
            return cell
        rows = self.table[self.table["system"] == cell]
        if dataset is not None:
            rows = rows[rows["dataset"] == dataset]
        if len(rows) == 1:
            return str(rows["cell_id"].iloc[0])
        if rows.empty:
            known = list(dict.fromkeys(self.table["system"]))
            raise ConfigError(unknown_value_message("cell (system label or cell id)", cell, known, str(self.run_dir)))
        datasets = ", ".join(rows["dataset"])
        raise ConfigError(f"{self.run_dir}: {cell!r} ran on several datasets ({datasets}); pass dataset=")

    def run(self, cell: str, dataset: str | None = None) -> Any:
        """The run of one cell as a ``ranx.Run`` (the scores the system gave, inserted in trec_eval's order:
        score descending, then doc id descending, the order the harness's numbers are computed on)."""
        from ranx import Run

        cell_id = self.cell_id(cell, dataset)
        ranking = read_cell_run(self.run_dir, cell_id)
        label = str(self.table.loc[self.table["cell_id"] == cell_id, "system"].iloc[0])
        return Run({qid: dict(docs) for qid, docs in ranking.items()}, name=label)

    def compare(
        self,
        baseline: str | None = None,
        measures: Sequence[str] | None = None,
        tests: Sequence[str] | None = None,
        correction: str | None = None,
        alpha: float | None = None,
        n_permutations: int | None = None,
        seed: int | None = None,
        min_effect: float | None = None,
        power: float | None = None,
    ) -> pd.DataFrame:
        """Every (dataset, system, measure) against the baseline; settings not given come from ``[compare]``.

        One row per comparison (``analysis.compare.test_pairs``): the mean difference ``delta`` with its t
        interval (``t_low``, ``t_high``) and BCa bootstrap interval (``ci_low``, ``ci_high``), the standardised
        effect ``cohens_d`` (d_z); the raw p-value of every test (``p_t-test``, ``p_fisher``, ``p_wilcoxon``) and
        ``tests_agree`` at alpha; per configured test the corrected (``p_<test>_adj``) and Benjamini-Hochberg
        (``p_<test>_bh``) p-values and ``significant_<test>``; the power: ``mde`` (minimum detectable effect at
        ``power``), ``queries_needed`` for ``min_effect``, and ``underpowered`` (not significant, mde > min_effect).
        """
        values = (baseline, measures, tests, correction, alpha, n_permutations, seed, min_effect, power)
        given = dict(zip(COMPARE_KEYS, values, strict=True))
        table = {**self.config.get("compare", {}), **{k: v for k, v in given.items() if v is not None}}
        for key in ("measures", "tests"):
            if table.get(key) is not None:
                table[key] = list(table[key])
        spec = parse_compare({**self.config, "compare": table}, "Results.compare")
        if spec.baseline is None:
            raise ConfigError("Results.compare: give baseline= (a system or fusion name of the experiment)")
        return compare_to_baseline(self.table, self.per_query, spec)

    def grid(self, measure: str | None = None) -> dict[str, pd.DataFrame]:
        """Every row of each dataset at once on ``measure`` (default: the first compared one), as the report's
        "Every row" section shows it (``analysis.grid``): ``"ranks"`` (mean, rank, probability of being best
        and 95% rank interval from a bootstrap over queries, whether the randomised Tukey HSD tells it from
        the best row), ``"pairs"`` (every pair's Tukey HSD p-value) and ``"anova"`` (topic x system, with the
        variance components); each frame has a ``dataset`` column. Tests and seed come from ``[compare]``."""
        spec = self.analysis.compare
        measure = measure or measure_columns(self.table, self.per_query, spec)[0]
        analyses = analyse_grid(self.table, self.per_query, measure, spec)
        return {
            part: pd.concat([getattr(a, part).assign(dataset=a.dataset) for a in analyses], ignore_index=True)
            if analyses
            else pd.DataFrame()
            for part in ("ranks", "pairs", "anova")
        }

    def report(self, path: str | Path, formats: Sequence[str] = DEFAULT_REPORT_FORMATS) -> Path:
        """Write the report into ``path`` in ``formats`` ("markdown": report.md, "html": a self-contained
        report.html, "latex": report.tex booktabs tables), with plots and the results tables; a report whose
        inputs did not change is left as it is. Returns the path of the first format's file."""
        return write_report(self.run_dir, Path(path), formats)


def describe_systems() -> pd.DataFrame:
    """Every system family and fusion method with its parameters: type, default, allowed values, one line each."""
    rows = []
    for family, cls in SYSTEMS.items():
        for parameter, spec in cls.all_specs().items():
            rows.append(_row("system", family, cls.description, parameter, spec))
    for method, specs in FUSION_METHODS.items():
        for parameter, spec in specs.items():
            rows.append(_row("fusion", method, f"[[fusions]] method = {method!r}", parameter, spec))
    return pd.DataFrame(rows)


def _row(kind: str, name: str, description: str, parameter: str, spec: Any) -> dict[str, Any]:
    default = "(required)" if spec.required else "none" if spec.default is None else repr(spec.default)
    return {
        "kind": kind,
        "name": name,
        "description": description,
        "parameter": parameter,
        "type": spec.kind,
        "default": default,
        "allowed": spec.describe(),
        "help": spec.help,
    }
