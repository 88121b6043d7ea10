"""A rerank cell: a local cross-encoder re-scores the top ``k`` of another cell's stored run.

The input cell (a system, fusion or tuned row; ``spec.reranks``) has run first; its ``run.trec.gz`` gives each
query's candidates in the harness's tie-break order, and the collection gives their texts. Each query's
top ``k`` go through seed 004's ``CrossEncoderReranker`` backed by the model
(``retrieval.pipeline.cross_encoders``); the run keeps those ``k`` with the model's raw scores (ties by the
one tie-break rule when the cell is finished). Queries are re-ranked one at a time after an untimed
warm-up, with one thread per pool, as the grid times every system: a query's latency is the input's
recorded latency for it plus the re-ranking's own, and the index time the input's plus loading the model.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from retrieval.core.hashing import folder_sha256
from retrieval.pipeline.cross_encoders import LocalCrossEncoder, cross_encoder_class
from retrieval.pipeline.errors import RetrieverError
from retrieval.pipeline.models import ContextItem, QueryBundle
from zerda_eval.config.experiment import CellSpec
from zerda_eval.config.reranks import model_folder
from zerda_eval.datasets.collection import NO_ANSWER_ID
from zerda_eval.errors import ConfigError, RunError
from zerda_eval.evaluation.efficiency import (
    LATENCY_KEY,
    PEAK_COLUMN,
    Efficiency,
    RssWindow,
    figure,
    largest,
    not_measured,
    query_thread_limits,
)
from zerda_eval.ranking import Ranking, Run
from zerda_eval.store.run_dir import load_result, read_cell_columns

MODEL_LOAD_KEY = "model_load_s"


def reranked_run(
    cell: CellSpec, output_dir: Path, collection: Any, queries: Mapping[str, str]
) -> tuple[Run, Efficiency, dict[str, Any]]:
    """The input cell's top ``k`` per query re-ranked by the cross-encoder, timed per query."""
    spec = cell.config["rerank"]
    params = spec["params"]
    (input_id,) = cell.inputs
    source = load_result(output_dir, input_id)
    if source is None:
        raise RunError(f"rerank {cell.label!r}: input cell {input_id} has no finished run; rerun without --only")
    candidates = read_cell_columns(output_dir, input_id)  # arrays; a query's list is built when it is reranked
    memory = RssWindow()
    model, load_s = _load_model(cell.label, params, spec["model_sha256"])
    texts = dict(zip(collection.doc_ids, collection.texts, strict=True))
    run: Run = {}
    own: dict[str, float] = {}
    with query_thread_limits() as threads:
        if queries:
            first = next(iter(queries))
            _rerank_one(model, queries[first], candidates.get(first, []), params["k"], texts)  # warm-up, not timed
        for qid, text in queries.items():
            start = time.perf_counter()
            run[qid] = _rerank_one(model, text, candidates.get(qid, []), params["k"], texts)
            own[qid] = time.perf_counter() - start
    stats: dict[str, Any] = {
        "model": params["model"],
        "model_sha256": spec["model_sha256"],
        "device": "cpu",
        "threads": threads,
        MODEL_LOAD_KEY: load_s,
        "rerank_latency_ms": {qid: seconds * 1000.0 for qid, seconds in own.items()},
    }
    input_latencies = source.get("stats", {}).get(LATENCY_KEY)
    input_index = figure(source.get("efficiency", {}).get("index_time_s"))
    if input_latencies is None or math.isnan(input_index):  # the input's costs are unknown (a run file)
        return run, not_measured(), {**stats, "peak_rss_scope": "not measured", LATENCY_KEY: None}
    total = {qid: input_latencies.get(qid, 0.0) / 1000.0 + seconds for qid, seconds in own.items()}
    peak = largest([memory.increment_mb(), figure(source["efficiency"].get(PEAK_COLUMN))])
    efficiency = Efficiency.from_timings(input_index + load_s, list(total.values()), peak)
    stats = {
        **stats,
        "peak_rss_scope": "the larger increment of the input cell and the re-ranking",
        LATENCY_KEY: {qid: seconds * 1000.0 for qid, seconds in total.items()},
    }
    return run, efficiency, stats


def _load_model(label: str, params: Mapping[str, Any], recorded_sha256: str) -> tuple[LocalCrossEncoder, float]:
    """The cross-encoder, checked to be the folder content the cell id was computed from, and the seconds
    loading it took (sentence-transformers' import, shared by every model, is left out)."""
    folder = model_folder(params["model"])
    try:
        cross_encoder_class()
        if folder_sha256(folder) != recorded_sha256:
            raise RunError(
                f"rerank {label!r}: the model folder {str(folder)!r} changed since the experiment was loaded; "
                "run the experiment again"
            )
        start = time.perf_counter()
        model = LocalCrossEncoder(folder, batch_size=params["batch_size"])
        return model, time.perf_counter() - start
    except (RetrieverError, OSError) as exc:
        raise ConfigError(f"rerank {label!r}: {exc}") from None


def _rerank_one(model: LocalCrossEncoder, query: str, ranking: Ranking, k: int, texts: Mapping[str, str]) -> Ranking:
    """The top ``k`` of ``ranking`` ordered by the cross-encoder's scores of (query, document text).

    An input that answered "no answer" (the no-answer id alone, Qur'an QA's rule) keeps that answer: there
    is no passage to score.
    """
    if [doc_id for doc_id, _ in ranking] == [NO_ANSWER_ID]:
        return list(ranking)
    items = [ContextItem(id=doc_id, content=texts[doc_id]) for doc_id, _ in ranking[:k]]
    reranked = model.rerank(QueryBundle(query_str=query), items, len(items))
    return [(item.id, item.metadata["raw_score"]) for item in reranked]
