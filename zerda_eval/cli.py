"""``zerda-eval``: run or prepare an experiment, write a report, list datasets and systems (a thin layer over ``api``).

Exit codes: 0 ok, 1 error (a ``ZerdaEvalError``: one line on stderr, no traceback), 2 usage,
130 interrupted (Ctrl-C at any moment, start-up included: "interrupted: N cells kept; rerun to
resume", N the experiment's finished cells), 141 when the reader of stdout went away (``| head``):
the rest of the output is dropped quietly, as Unix tools do, but the work goes on to the end (the
runs and the report are written). A ``ZerdaEvalWarning`` (a
damaged cell recomputed, a corrupt cache entry rebuilt) is one ``zerda-eval: warning:`` line. An
unexpected exception is a bug: its traceback is printed with a request to report it.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import logging
import numbers
import os
import signal
import sys
import traceback
import warnings
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from retrieval.embeddings.base import EmbedderWarning
from zerda_eval import __version__, startup_interrupted
from zerda_eval.errors import (
    ConfigError,
    RunError,
    UserCodeError,
    ZerdaEvalError,
    ZerdaEvalWarning,
    unknown_value_message,
)
from zerda_eval.evaluation.efficiency import EFFICIENCY_COLUMNS, NOT_MEASURED
from zerda_eval.report.formats import DEFAULT_FORMATS as DEFAULT_REPORT_FORMATS
from zerda_eval.report.formats import FORMATS as REPORT_FORMATS

if TYPE_CHECKING:
    from zerda_eval.api import Results
    from zerda_eval.execution.executors import Scheduler

EXIT_OK, EXIT_ERROR, EXIT_USAGE, EXIT_INTERRUPTED, EXIT_BROKEN_PIPE = 0, 1, 2, 130, 141
SUMMARY_COSTS = ("index_time_s", "latency_p50_ms", "qps")


def build_parser() -> argparse.ArgumentParser:
    """The parser; the global options (``-v``) are accepted before or after the subcommand."""
    parser = argparse.ArgumentParser(prog="zerda-eval", description="Evaluate hybrid retrieval systems.")
    parser.add_argument("--version", action="version", version=f"zerda-eval {__version__}")
    verbose_help = "show the libraries' log lines (downloads, warnings)"
    parser.add_argument("-v", "--verbose", action="store_true", help=verbose_help)
    common = argparse.ArgumentParser(add_help=False)  # the same option after the subcommand; SUPPRESS: no default
    common.add_argument("-v", "--verbose", action="store_true", default=argparse.SUPPRESS, help=verbose_help)
    commands = parser.add_subparsers(dest="command", required=True)
    add = functools.partial(commands.add_parser, parents=[common])
    run = add("run", help="run the grid of an experiment file")
    run.add_argument("config", type=Path, help="experiment TOML file")
    run.add_argument(
        "--force",
        action="store_true",
        help="recompute cells even when a finished run exists, and rebuild the cache entries they use",
    )
    run.add_argument("--only", metavar="SYSTEM", help="run only this system or fusion (name or label)")
    run.add_argument("--jobs", type=int, default=1, metavar="N", help="N > 1: same as --scheduler local:N")
    run.add_argument(
        "--scheduler",
        default="serial",
        metavar="WHERE",
        help="where cells run: serial (default), local[:N] (Dask, N worker processes, default 2), "
        "tcp://HOST:PORT (a running Dask scheduler; needs zerda-eval[dask])",
    )
    run.add_argument("--no-report", action="store_true", help="skip writing reports/<experiment>/")
    run.add_argument(
        "--measures",
        metavar="M,M",
        help="the measures of the printed table, comma-separated (default: every measure of the experiment)",
    )
    prepare = add(
        "prepare",
        help="make what a machine's first run of an experiment makes once: its datasets read, its models' "
        "stored files, the compiled kernels (the run stays cold: no cell, vector or index is stored)",
    )
    prepare.add_argument("config", type=Path, help="experiment TOML file")
    add("datasets", help="list the bundled datasets")
    systems = add("systems", help="list every system family and fusion method with its parameters")
    systems.add_argument("name", nargs="?", help="one family or fusion method (default: all)")
    report = add("report", help="write the report of a run directory")
    report.add_argument("run_dir", type=Path)
    report.add_argument("--out", type=Path, help="report directory (default reports/<run dir name>)")
    report.add_argument(
        "--format",
        dest="formats",
        action="append",
        choices=REPORT_FORMATS,
        metavar="FORMAT",
        help=f"markdown (report.md), html (report.html, self-contained) or latex (report.tex, booktabs tables); "
        f"repeat for several (default: {' and '.join(DEFAULT_REPORT_FORMATS)})",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the exit code (``python -m zerda_eval`` and the console script use it)."""
    for stream in (sys.stdout, sys.stderr):  # a terminal that cannot show a label (Arabic) gets it escaped
        with contextlib.suppress(AttributeError, ValueError):  # not a text stream we may reconfigure
            stream.reconfigure(errors="backslashreplace")
    args = build_parser().parse_args(argv)  # argparse exits with 2 on usage errors
    if not args.verbose:  # libraries' log lines (ir_datasets' download retries) would bury our one line
        logging.disable(logging.WARNING)
    with warnings.catch_warnings():
        warnings.simplefilter("always", ZerdaEvalWarning)
        warnings.simplefilter("always", EmbedderWarning)
        warnings.showwarning = _show_warning
        return _main(args)


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    """Our warnings (the harness's and its retrieval package's) as one ``zerda-eval: warning:`` line; any other
    library's as Python shows it."""
    if issubclass(category, ZerdaEvalWarning | EmbedderWarning):
        print(f"zerda-eval: warning: {message}", file=sys.stderr)
    else:
        sys.stderr.write(warnings.formatwarning(message, category, filename, lineno, line))


class Interrupted(KeyboardInterrupt):
    """Ctrl-C during a run, with the number of the experiment's finished cells (kept for the rerun)."""

    def __init__(self, kept: int):
        super().__init__(kept)
        self.kept = kept


class _KeptStdout:
    """``sys.stdout`` while a command runs: when its reader goes away (``| head``), the rest of the output
    is dropped, never the work (the runs and the report are still written); the command then ends with 141."""

    def __init__(self, stream: Any):
        self.stream = stream
        self.lost = False

    def write(self, text: str) -> int:
        if not self.lost:
            try:
                return self.stream.write(text)
            except BrokenPipeError:
                self._lose()
        return len(text)

    def flush(self) -> None:
        if not self.lost:
            try:
                self.stream.flush()
            except BrokenPipeError:
                self._lose()

    def _lose(self) -> None:
        self.lost = True
        _silence_stdout(self.stream)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.stream, name)


def _silence_stdout(stream: Any) -> None:
    """Point ``stream``'s file descriptor at /dev/null, so the interpreter's final flush cannot fail again."""
    with contextlib.suppress(OSError, ValueError, AttributeError):  # no file descriptor: nothing to flush
        os.dup2(os.open(os.devnull, os.O_WRONLY), stream.fileno())


def _main(args: argparse.Namespace) -> int:
    stdout = sys.stdout = _KeptStdout(sys.stdout)
    try:
        if startup_interrupted():
            raise KeyboardInterrupt
        code = COMMANDS[args.command](args)
        stdout.flush()
        return EXIT_BROKEN_PIPE if stdout.lost and code == EXIT_OK else code
    except BrokenPipeError:  # a write that did not go through sys.stdout: the reader is gone; end quietly
        _silence_stdout(stdout.stream)
        return EXIT_BROKEN_PIPE
    except ZerdaEvalError as exc:
        if isinstance(exc, UserCodeError) and exc.user_traceback:  # the user's code failed: theirs to read
            sys.stderr.write(exc.user_traceback)
        print(f"zerda-eval: error: {exc}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt as exc:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C must not cut this line short
        if isinstance(exc, Interrupted):
            print(f"\nzerda-eval: interrupted: {exc.kept} cells kept; rerun to resume", file=sys.stderr)
        else:
            print("\nzerda-eval: interrupted before any cell ran; rerun to resume", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception:
        traceback.print_exc()
        print("zerda-eval: internal error (a bug); please report it with the traceback above", file=sys.stderr)
        return EXIT_ERROR
    finally:
        sys.stdout = stdout.stream


def _run(args: argparse.Namespace) -> int:
    from zerda_eval.api import Experiment

    try:
        scheduler = _scheduler(args)
    except ZerdaEvalError as exc:
        print(f"zerda-eval: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    experiment = Experiment.from_toml(args.config)
    if args.only:
        experiment = experiment.only(args.only)
    try:
        with _no_library_bars():
            results = experiment.run(scheduler=scheduler, force=args.force, progress=sys.stderr.isatty())
        print(_summary(results.table, _measures(args.measures, results.table)))
        print(f"\n{results.reused} cell{'' if results.reused == 1 else 's'} reused, {results.computed} computed")
        print(f"runs: {experiment.output_dir}")
        rebuild = f"zerda-eval report {experiment.output_dir}"
        if args.only:
            print(f"report: not rewritten (--only runs part of the grid); write it with `{rebuild}`")
        elif args.no_report:
            print(f"report: not written (--no-report); write it with `{rebuild}`")
        else:
            print(f"report: {_write_report(results, Path('reports') / experiment.name, rebuild)}")
    except KeyboardInterrupt:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # counting what is kept must not be cut short
        raise Interrupted(experiment.finished_cells()) from None
    return EXIT_OK


def _prepare(args: argparse.Namespace) -> int:
    from zerda_eval.api import Experiment

    experiment = Experiment.from_toml(args.config)
    with _no_library_bars():  # each step is one line of ours
        seconds = experiment.prepare()
    print("prepared: " + ", ".join(f"{step} {value:.1f} s" for step, value in seconds.items()))
    return EXIT_OK


def _measures(choice: str | None, table: pd.DataFrame) -> list[str]:
    """The measures to print: ``--measures`` (each one a column of the run), else every measure the run has."""
    columns = list(table.columns)  # results_table: keys, means, efficiency, then the tie-aware figures
    means_end = next((i for i, c in enumerate(columns) if c in EFFICIENCY_COLUMNS), len(columns))
    present = columns[columns.index("cell_id") + 1 : means_end]
    if choice is None:
        return present
    chosen = [m.strip() for m in choice.split(",") if m.strip()]
    for measure in chosen:
        if measure not in present:
            raise ConfigError(f"--measures: {unknown_value_message('measure of this run', measure, set(present))}")
    return chosen


def _summary(table: pd.DataFrame, measures: Sequence[str]) -> str:
    """The results table as printed: ``measures`` and costs; costs not measured (a run file) say so,
    and a measure a dataset does not take (Qur'an QA's runs are cut at 10) is "-"."""
    columns = ["dataset", "system", *measures, *SUMMARY_COSTS]
    shown = table[columns].astype(object)
    for column in columns[2:]:
        missing = NOT_MEASURED if column in SUMMARY_COSTS else "-"  # "-": a measure this dataset does not take
        shown[column] = [missing if pd.isna(v) else f"{v:.4f}" for v in table[column]]
    return aligned(shown)


def aligned(table: pd.DataFrame) -> str:
    """``table`` as text: a header line, text columns left-aligned, numbers right-aligned, two spaces between
    columns (pandas' ``to_string`` right-aligns text and runs long text columns together)."""
    rows = [[str(name) for name in table.columns]] + [
        [f"{v:,}" if isinstance(v, numbers.Integral) else str(v) for v in row] for row in table.itertuples(index=False)
    ]
    numeric = [all(_is_number(row[i]) for row in rows[1:]) and len(rows) > 1 for i in range(len(table.columns))]
    widths = [max(len(row[i]) for row in rows) for i in range(len(table.columns))]
    lines = [
        "  ".join(c.rjust(w) if right else c.ljust(w) for c, w, right in zip(row, widths, numeric, strict=True))
        for row in rows
    ]
    return "\n".join(line.rstrip() for line in lines)


def _is_number(text: str) -> bool:
    """A printed number (``1,400``, ``0.2500``), or a placeholder in a numeric column ("-", "not measured")."""
    return text in ("-", NOT_MEASURED) or text.replace(",", "").replace(".", "", 1).lstrip("-").isdigit()


def _write_report(
    results: Results, report_dir: Path, rebuild: str, formats: Sequence[str] = DEFAULT_REPORT_FORMATS
) -> Path:
    """``results.report``; a failure is one line saying the runs are safe and the command that rebuilds it."""
    run_dir = results.run_dir
    try:
        return results.report(report_dir, formats=formats)
    except (ZerdaEvalError, OSError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise RunError(
            f"the report could not be written to {report_dir} ({reason}); the runs in {run_dir} are safe: "
            f"fix that, then rebuild the report with `{rebuild}`"
        ) from None


def _scheduler(args: argparse.Namespace) -> Scheduler:
    """``--scheduler``, with ``--jobs N`` (N > 1) as a shorthand for ``local:N``."""
    from zerda_eval.execution.executors import Scheduler, parse_scheduler

    scheduler = parse_scheduler(args.scheduler)
    if args.jobs == 1:
        return scheduler
    if args.jobs < 1 or scheduler.kind != "serial":
        raise ConfigError(f"--jobs {args.jobs}: give N >= 1, or the worker count once: --scheduler local:N")
    return Scheduler("local", workers=args.jobs)


def _datasets(args: argparse.Namespace) -> int:
    from zerda_eval.datasets import list_datasets

    with _no_library_bars():
        table = list_datasets()
    print(aligned(table))
    return EXIT_OK


@contextlib.contextmanager
def _no_library_bars() -> Iterator[None]:
    """ir_datasets' progress bars off inside (it draws one per docstore it builds on a dataset's first use, before
    our table or between our lines); ours stay. ir_datasets takes its tqdm from ``lazy_libs``' cache: a module
    whose ``tqdm`` is always disabled goes there while the block runs."""
    import types

    import tqdm
    from ir_datasets import lazy_libs

    class Quiet(tqdm.tqdm):
        def __init__(self, *args: Any, **kwargs: Any):
            super().__init__(*args, **{**kwargs, "disable": True})

    previous = lazy_libs._cache.get("tqdm")
    lazy_libs._cache["tqdm"] = types.SimpleNamespace(tqdm=Quiet)
    try:
        yield
    finally:
        if previous is None:
            lazy_libs._cache.pop("tqdm", None)
        else:
            lazy_libs._cache["tqdm"] = previous


def _report(args: argparse.Namespace) -> int:
    from zerda_eval.api import Results

    results = Results.load(args.run_dir)
    report_dir = args.out or Path("reports") / args.run_dir.name
    formats = args.formats or DEFAULT_REPORT_FORMATS
    print(_write_report(results, report_dir, f"zerda-eval report {args.run_dir} --out DIR", formats))
    return EXIT_OK


def _systems(args: argparse.Namespace) -> int:
    from zerda_eval.api import describe_systems

    table = describe_systems()
    if args.name is not None:
        if args.name not in set(table["name"]):
            raise ConfigError(unknown_value_message("system family or fusion method", args.name, set(table["name"])))
        table = table[table["name"] == args.name]
    counts = table["allowed"].value_counts()
    shared: dict[str, str] = {}  # a long list of allowed values that several parameters share -> its name
    for parameter, allowed in zip(table["parameter"], table["allowed"], strict=True):
        if counts[allowed] > 1 and len(allowed) > SHARED_VALUES_MIN_CHARS:
            shared.setdefault(allowed, f"{parameter} values")
    for (kind, name, description), rows in table.groupby(["kind", "name", "description"], sort=False):
        print(f"{name}  ({kind}) {description}")
        for _, row in rows.iterrows():
            allowed = f"{shared[row['allowed']]}: below" if row["allowed"] in shared else row["allowed"]
            print(f"    {row['parameter']} = {row['default']}  [{allowed}]  {row['help']}")
    for allowed, label in shared.items():
        print(f"\n{label}: {allowed}")
    return EXIT_OK


SHARED_VALUES_MIN_CHARS = 80  # `systems` prints a longer list of allowed values once, after the families


COMMANDS = {"run": _run, "prepare": _prepare, "datasets": _datasets, "report": _report, "systems": _systems}

if __name__ == "__main__":
    sys.exit(main())
