"""Grid cells -> runs on disk -> one results table.

``run_experiment`` holds the run directory for its grid (``store.run_dir.held_by_grid``: a run of another
grid meanwhile is refused), writes ``experiment.json``, checks every dataset once, runs the cells (fusions after
their inputs) through an executor (``execution.executors``: serially or as Dask tasks) and rebuilds
the results tables from every finished cell of the experiment, so a partial run (``--only``) never
shrinks them. What one cell does is ``execution.cell.run_cell``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import partial
from typing import Any

import pandas as pd
from tqdm import tqdm

from zerda_eval.config.experiment import ExperimentSpec
from zerda_eval.evaluation.efficiency import EFFICIENCY_COLUMNS, figure
from zerda_eval.evaluation.tie_aware import tie_aware_columns
from zerda_eval.execution.cell import CellResult, check_collections, run_cell
from zerda_eval.execution.executors import Executor, run_serially
from zerda_eval.faults import fault_point
from zerda_eval.hashing import canonical_json
from zerda_eval.store.build_costs import forget_rebuilt
from zerda_eval.store.files import check_writable, remove_temp_files
from zerda_eval.store.run_dir import finished_results, held_by_grid, write_experiment_json, write_tables


def run_experiment(
    experiment: ExperimentSpec,
    force: bool = False,
    progress: bool = True,
    on_cell: Callable[[CellResult], None] | None = None,
    executor: Executor | None = None,
    systems: Mapping[str, Any] | None = None,
) -> pd.DataFrame:
    """Run every cell (fusions after their inputs), then write the experiment-level files.

    ``executor`` runs the cells: serially in this process by default, or as Dask tasks; tasks get
    absolute paths, so workers with another working directory find them. ``systems``: objects the
    Python API was given by name. Returns the results table (one row per finished cell).
    """
    output_dir = experiment.output_dir
    check_writable(output_dir)
    check_writable(experiment.cache_dir, key="cache_dir")
    with held_by_grid(output_dir, experiment.name, experiment.config_hash):
        return _run_held(experiment, force, progress, on_cell, executor, systems)


def _run_held(
    experiment: ExperimentSpec,
    force: bool,
    progress: bool,
    on_cell: Callable[[CellResult], None] | None,
    executor: Executor | None,
    systems: Mapping[str, Any] | None,
) -> pd.DataFrame:
    """``run_experiment``'s work, done while the run directory is held for this grid (``held_by_grid``)."""
    output_dir = experiment.output_dir
    remove_temp_files(output_dir)
    forget_rebuilt()
    every_id = [cell.cell_id for cell in experiment.every_cell]
    write_experiment_json(output_dir, experiment.config_hash, experiment.resolved, every_id)
    check_collections(experiment.cells)
    executor = executor or run_serially
    task = partial(
        run_cell,
        output_dir=output_dir.resolve(),
        cache_dir=experiment.cache_dir.resolve(),
        force=force,
        progress=progress and executor is run_serially,
        systems=systems,
    )
    finished = {}
    bar = tqdm(total=len(experiment.cells), desc=f"grid {experiment.name}", unit="cell", disable=not progress)
    for outcome in executor(experiment.cells, task):
        bar.update()
        bar.set_postfix_str(f"{outcome.result['dataset']} | {outcome.result['system']}")
        finished[outcome.cell_id] = outcome.result
        if on_cell is not None:
            on_cell(outcome)
        fault_point("after-cell", len(finished))
    bar.close()
    remove_temp_files(output_dir)  # what a worker killed mid-cell left behind
    table = results_table(finished_results(output_dir, every_id, finished))
    write_tables(output_dir, table)
    return table


ANN_RECALL_COLUMN = "ann_recall"


def _ann_recall(result: Mapping[str, Any]) -> dict[str, float]:
    """``{"ann_recall": r}`` for a cell searched through an approximate vector index (its recall against exact
    search at the cell's depth, ``stats["vector_index"]``), else nothing: the column exists when one does."""
    recall = result.get("stats", {}).get("vector_index", {}).get("recall")
    return {} if recall is None else {ANN_RECALL_COLUMN: recall}


def results_table(results: list[Mapping[str, Any]]) -> pd.DataFrame:
    """One row per cell: dataset, system, family, params (JSON), cell_id, means, efficiency (and ``ann_recall``
    when a cell searched an approximate vector index), then each mean's expected value and range over the
    orders of tied documents (``evaluation.tie_aware``)."""
    rows = []
    for result in results:
        config = result["config"]
        part = config[config["kind"]]
        family = part.get("family") or f"fusion.{part['method']}"
        means = result["means"]  # a reused result.json has sorted keys: order columns as the config does
        ordered = [m for m in config["measures"] if m in means] + sorted(set(means) - set(config["measures"]))
        rows.append(
            {
                "dataset": result["dataset"],
                "system": result["system"],
                "family": family,
                "params": canonical_json(part["params"]),
                "cell_id": result["cell_id"],
                **{m: means[m] for m in ordered},
                **{k: figure(result["efficiency"].get(k)) for k in EFFICIENCY_COLUMNS},
                **_ann_recall(result),
                **tie_aware_columns(result, ordered),
            }
        )
    return pd.DataFrame(rows)
