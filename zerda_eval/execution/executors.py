"""Where grid cells run: serially in this process, or as Dask tasks on a local or an existing cluster.

An executor takes the cells (fusions after their inputs) and a task ``CellSpec -> CellResult`` (the
runner's ``run_cell`` with its output and cache directories bound) and yields the results in cell
order. Cells are pure functions of their config that write their files atomically to the shared
output directory, ``result.json`` last, so a Dask task that dies with its worker is simply run again
(on another worker): a finished cell is reused, an unfinished one is recomputed over its partial
files. Only cell configs and small result dicts cross the scheduler; collections and embeddings are
shared through the on-disk caches (ir_datasets' and ``cache_dir``), which the client warms first.

Dask is an optional extra (``pip install "zerda-eval[dask]"``), imported only here and only when a
Dask scheduler is asked for.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from itertools import islice
from pathlib import Path
from typing import Any

from zerda_eval.config.experiment import CellSpec
from zerda_eval.errors import ConfigError, RunError
from zerda_eval.execution.cell import CellResult, load_cell_collection
from zerda_eval.hashing import content_hash

Task = Callable[[CellSpec], CellResult]
Executor = Callable[[Sequence[CellSpec], Task], Iterator[CellResult]]

DEFAULT_LOCAL_WORKERS = 2
TASK_RETRIES = 2  # a task raising (e.g. a flaky shared filesystem); a dead worker is rescheduled anyway
CONNECT_TIMEOUT_S = 10
INSTALL_HINT = 'pip install "zerda-eval[dask]"'
_LOCAL = re.compile(r"^local(?::(\d+))?$")
_ADDRESS = re.compile(r"^tcp://[^\s:/]+:\d{1,5}$")
# Dask's nanny pins these to 1 in each worker it spawns; another BLAS thread count can change the last
# bit of a float sum (an LSA projection), so local workers keep this process's settings instead and
# write the same run files as a serial run.
BLAS_THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")


@dataclass(frozen=True)
class Scheduler:
    """A parsed ``--scheduler`` value: ``serial``, ``local`` with N worker processes, or ``tcp`` address."""

    kind: str  # "serial" | "local" | "tcp"
    workers: int = 1
    address: str | None = None


def parse_scheduler(text: str) -> Scheduler:
    """``serial`` | ``local`` | ``local:N`` | ``tcp://HOST:PORT``; anything else is a one-line ConfigError."""
    if text == "serial":
        return Scheduler("serial")
    local = _LOCAL.match(text)
    if local and (local.group(1) is None or int(local.group(1)) >= 1):
        return Scheduler("local", workers=int(local.group(1) or DEFAULT_LOCAL_WORKERS))
    if _ADDRESS.match(text):
        return Scheduler("tcp", address=text)
    raise ConfigError(
        f"--scheduler {text!r}: expected 'serial', 'local', 'local:N' (N >= 1 worker processes) "
        "or 'tcp://HOST:PORT' (the address of a running Dask scheduler)"
    )


def run_serially(cells: Sequence[CellSpec], task: Task) -> Iterator[CellResult]:
    """The default executor: each cell in turn, in this process (no Dask needed)."""
    for cell in cells:
        yield task(cell)


@contextmanager
def open_executor(scheduler: Scheduler | str) -> Iterator[Executor]:
    """An executor for ``scheduler``; a Dask cluster started here is shut down on exit."""
    if isinstance(scheduler, str):
        scheduler = parse_scheduler(scheduler)
    if scheduler.kind == "serial":
        yield run_serially
        return
    distributed = _import_distributed(scheduler)
    if scheduler.kind == "local":
        import dask

        with (
            dask.config.set({"distributed.nanny.pre-spawn-environ": _worker_environ(dask)}),
            distributed.LocalCluster(
                n_workers=scheduler.workers,
                threads_per_worker=1,
                processes=True,
                host="127.0.0.1",
                dashboard_address=None,
                silence_logs=logging.ERROR,
            ) as cluster,
            distributed.Client(cluster) as client,
        ):
            yield DaskExecutor(client)
        return
    try:
        client = distributed.Client(scheduler.address, timeout=f"{CONNECT_TIMEOUT_S}s")
    except OSError as exc:  # TimeoutError / ConnectionRefusedError / CommClosedError are OSErrors
        raise RunError(
            f"--scheduler {scheduler.address}: no Dask scheduler answered within {CONNECT_TIMEOUT_S} s "
            f"({type(exc).__name__}); start `dask scheduler`, then `dask worker ADDRESS` on each machine"
        ) from None
    with client:
        yield DaskExecutor(client)


class DaskExecutor:
    """Runs cells as Dask tasks on ``client``'s cluster; a fusion task waits for its inputs' tasks."""

    def __init__(self, client: Any):
        self.client = client

    def __call__(self, cells: Sequence[CellSpec], task: Task) -> Iterator[CellResult]:
        preload_datasets(cells)
        options = getattr(task, "keywords", {})
        if options.get("cache_dir") is not None and not options.get("force"):
            encode_on_workers(self.client, cells, options["cache_dir"])
        futures: dict[str, Any] = {}
        try:
            for cell in cells:
                inputs = [futures[i] for i in cell.inputs if i in futures]
                futures[cell.cell_id] = self.client.submit(
                    _run_after_inputs, task, cell, *inputs, key=task_key(cell, task), retries=TASK_RETRIES
                )
            for cell in cells:
                yield futures[cell.cell_id].result()
        finally:  # an error or Ctrl-C: stop the cells still queued or running
            self.client.cancel([f for f in futures.values() if not f.done()])


def task_key(cell: CellSpec, task: Task) -> str:
    """The Dask key of a cell: its id plus a digest of the task (its output directory and options).

    A fixed key means a resubmitted or retried cell is the same task, never a second copy; the digest
    keeps two runs of the same cell into different output directories apart on a shared cluster.
    """
    options = getattr(task, "keywords", {})
    digest = content_hash({k: str(v) for k, v in sorted(options.items())})[:12]
    return f"zerda-cell-{cell.cell_id}-{digest}"


def preload_datasets(cells: Sequence[CellSpec]) -> None:
    """Load each dataset once in the client, so ir_datasets' cache (seeded files, extracts, doc stores)
    is complete before workers open it in parallel instead of racing to build it."""
    seen = set()
    for cell in cells:
        key = content_hash(cell.config["dataset"])
        if key not in seen:
            seen.add(key)
            load_cell_collection(cell.config["dataset"])


def encoding_plans(cells: Sequence[CellSpec]) -> list[tuple[str, dict[str, Any], Sequence[str]]]:
    """The distinct corpus encodes the cells' systems will ask for: (embedder, kwargs, texts) each
    (``systems.encoders.planned_encoding``)."""
    from zerda_eval.hashing import canonical_json, texts_sha256
    from zerda_eval.systems import family_class
    from zerda_eval.systems.encoders import planned_encoding

    plans: dict[tuple[str, str, str], tuple[str, dict[str, Any], Sequence[str]]] = {}
    for cell in cells:
        if cell.kind != "system":
            continue
        spec = cell.config["system"]
        params = family_class(spec["family"]).resolve_params(spec["params"], spec["family"])
        plan = planned_encoding(params, load_cell_collection(cell.config["dataset"])[0])
        if plan is not None:
            plans.setdefault((plan[0], canonical_json(plan[1]), texts_sha256(plan[2])), plan)
    return list(plans.values())


def encode_on_workers(client: Any, cells: Sequence[CellSpec], cache_dir: Path, progress: bool = True) -> None:
    """Encode the corpora the cells will embed, chunk by chunk over the workers, into the embedding store.

    Each chunk not yet stored is one task (``store.embeddings.store_chunk``); the cells then assemble
    their corpus file from the stored chunks, in corpus order, as a serial run would. A worker killed
    mid-encode costs its chunk (Dask reruns the task); a rerun encodes only what is not stored.
    Skipped under ``--force``: the cells then encode, and rebuild, what they use themselves.
    """
    from distributed import as_completed

    from retrieval.embeddings import load_embedder
    from zerda_eval.hashing import texts_sha256
    from zerda_eval.store.embeddings import chunk_is_stored, chunk_spans, corpus_is_stored, corpus_progress

    threads = _threads_per_worker(client)
    for name, kwargs, texts in encoding_plans(cells):
        embedder = load_embedder(name, **kwargs)  # in the client, for the store's keys
        if corpus_is_stored(embedder, texts, cache_dir):
            continue
        futures, remaining = {}, iter(texts)
        for start, stop in chunk_spans(len(texts)):
            chunk = list(islice(remaining, stop - start))
            if not chunk_is_stored(embedder, chunk, cache_dir):
                key = f"zerda-encode-{content_hash([name, kwargs, texts_sha256(chunk), str(cache_dir)])[:24]}"
                task = (_encode_chunk, name, kwargs, chunk, cache_dir, threads)
                futures[client.submit(*task, key=key, retries=TASK_RETRIES)] = stop - start
        if not futures:
            continue
        workers = len(client.scheduler_info()["workers"])
        with corpus_progress(f"{embedder.name} on {workers} workers", len(texts), progress) as bar:
            bar.update(len(texts) - sum(futures.values()))
            for future in as_completed(list(futures)):
                future.result()  # a task's error (a missing model, bad vectors) is the run's error
                bar.update(futures[future])


_WORKER_EMBEDDERS: dict[str, Any] = {}  # one loaded model per worker process and configuration


def _encode_chunk(name: str, kwargs: dict[str, Any], texts: list[str], cache_dir: Path, threads: int | None) -> int:
    """A worker's task: store one chunk's vectors (``store_chunk``) with ``threads`` threads per pool
    (``evaluation.efficiency.thread_limits``; ``None``: the libraries' defaults)."""
    from retrieval.embeddings import load_embedder
    from retrieval.embeddings.registry import takes_parameter
    from zerda_eval.evaluation.efficiency import thread_limits
    from zerda_eval.hashing import canonical_json
    from zerda_eval.store.embeddings import store_chunk

    key = canonical_json([name, kwargs])
    if key not in _WORKER_EMBEDDERS:  # an encoder's own thread count (not in its params) follows the worker's
        threaded = {"num_threads": threads} if threads and takes_parameter(name, "num_threads") else {}
        _WORKER_EMBEDDERS[key] = load_embedder(name, **kwargs, **threaded)
    with thread_limits(threads) if threads else nullcontext():
        store_chunk(_WORKER_EMBEDDERS[key], texts, cache_dir)
    return len(texts)


def _threads_per_worker(client: Any) -> int | None:
    """CPU threads an encoding task may use: this machine's CPUs shared by a local cluster's workers.

    ``None`` (the libraries' defaults) on a remote cluster, whose machines this process cannot see.
    """
    workers = client.scheduler_info()["workers"]
    local = all(str(address).startswith(("tcp://127.0.0.1", "inproc://")) for address in workers)
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return max(1, cpus // max(1, len(workers))) if local else None


def _run_after_inputs(task: Task, cell: CellSpec, *inputs: CellResult) -> CellResult:
    """``task(cell)``; ``inputs`` (the results of a fusion's input cells) only order the tasks."""
    return task(cell)


def _worker_environ(dask: Any) -> dict[str, Any]:
    """Dask's pre-spawn environment for workers, with the BLAS thread counts of this process."""
    environ = dask.config.get("distributed.nanny.pre-spawn-environ", {})
    kept = {k: v for k, v in environ.items() if k not in BLAS_THREAD_VARIABLES}
    return kept | {k: os.environ[k] for k in BLAS_THREAD_VARIABLES if k in os.environ}


def _import_distributed(scheduler: Scheduler) -> Any:
    try:
        import distributed
    except ImportError:
        name = scheduler.address or f"local:{scheduler.workers}"
        raise RunError(f"--scheduler {name} needs Dask distributed (not installed); {INSTALL_HINT}") from None
    return distributed
