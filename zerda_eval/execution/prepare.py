"""``zerda-eval prepare``: what a machine's first run of an experiment would make once, made ahead of it.

- each dataset of the grid read once (ir_datasets' extracts and document stores from the local files);
- each neural model the grid encodes with loaded, which makes its stored ONNX files (``retrieval.embeddings.
  onnx_export``: e5-small's int8 file, minilm's), and one query encoded (the tokenizer's compiled kernels);
- the numba kernels the harness runs, compiled into numba's cache: BM25 (``SparseBM25`` fitted, saved and
  memory-mapped as the index store serves it, both traversals, one query per call as the grid times them,
  one- and two-byte document lengths: the widths ``fit`` picks for real corpora), the measure kernel and
  the fusion kernels (a fusion cell's query a call, a whole run at once). A kernel called another way (a
  batch of queries, two-byte term frequencies, an index in memory through the Python API) still compiles
  in the run, once per machine.

Nothing goes into the experiment's run directory or ``cache_dir``: the run that follows is still a cold run
(no vector, index or cell stored), it only finds the models installed and the kernels compiled, as every
later run on the machine does.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable, Sequence

from zerda_eval.config.experiment import CellSpec
from zerda_eval.hashing import canonical_json

# Toy corpora whose widths (``_smallest_uint``) cover what real ones get: short documents (lengths in one
# byte) and one long document (two bytes).
SHORT = [["alpha", "beta", "gamma"], ["beta", "delta"], ["alpha", "alpha", "epsilon", "zeta"]]
LONG = [*SHORT, ["omega"] * 10 + ["alpha", "beta"] * 150]
QUERIES = [["alpha", "beta"], ["zeta"], ["alpha", "delta", "alpha"], ["unknown"]]


def prepare(cells: Sequence[CellSpec], say: Callable[[str], None] = print) -> dict[str, float]:
    """Load the cells' datasets and models and compile the kernels; returns the seconds each step took."""
    from zerda_eval.execution.executors import encoding_plans, preload_datasets

    seconds = {}
    since = time.perf_counter()
    say(f"reading {len({cell.dataset for cell in cells})} dataset(s)")
    preload_datasets(cells)
    seconds["datasets"] = time.perf_counter() - since
    since = time.perf_counter()
    for name, kwargs in _distinct_models(encoding_plans(cells)):
        say(f"preparing {name} {kwargs or ''}".rstrip())
        _load_model(name, kwargs)
    seconds["models"] = time.perf_counter() - since
    since = time.perf_counter()
    say("compiling the numba kernels (BM25, measures, fusion)")
    compile_kernels()
    seconds["kernels"] = time.perf_counter() - since
    return seconds


def _distinct_models(plans: Sequence[tuple[str, dict, Sequence[str]]]) -> list[tuple[str, dict]]:
    seen: dict[str, tuple[str, dict]] = {}
    for name, kwargs, _ in plans:
        seen.setdefault(canonical_json([name, kwargs]), (name, kwargs))
    return list(seen.values())


def _load_model(name: str, kwargs: dict) -> None:
    """Loads the embedder (its stored files are made on first load) and encodes one query."""
    from retrieval.embeddings import load_embedder

    embedder = load_embedder(name, **kwargs, progress=False)
    embedder.embed_queries(["prepare"])


def compile_kernels() -> None:
    """Runs each numba kernel once on toy inputs, so that numba compiles it into its cache now."""
    from retrieval.core.bm25_fast import TRAVERSALS, SparseBM25
    from zerda_eval.columnar import from_run
    from zerda_eval.evaluation.measures import evaluate_run
    from zerda_eval.fusion.columns import QueryFusion

    with tempfile.TemporaryDirectory(prefix="zerda-prepare-") as folder:
        for name, corpus in (("short", SHORT), ("long", LONG)):
            SparseBM25().fit(corpus).save(f"{folder}/{name}")
            # as the index store serves it: memory-mapped, read-only arrays (kernels of their own types)
            index = SparseBM25.load(f"{folder}/{name}", mmap=True)
            for traversal in TRAVERSALS:
                index.traversal = traversal
                for query in QUERIES:
                    index.top_k_batch([query], 2)
    evaluate_run({"q": [("d1", 2.0), ("d2", 1.0)]}, {"q": {"d1": 1, "d3": 0}}, ["ndcg@10", "map@100", "recall@100"])
    runs = [from_run({"q": [("d1", 2.0), ("d2", 1.0)]}), from_run({"q": [("d2", 3.0), ("d3", 1.0)]})]
    fusion = QueryFusion("rrf", runs)
    fusion.fuse("q")
    fusion.fuse_all()
