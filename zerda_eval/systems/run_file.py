"""A TREC run file as a system (``family = "run_file"``): runs made elsewhere (Pyserini, Anserini,
Elasticsearch, a past run) evaluated, fused and compared like any system of the grid.

``path`` is one file, or a pattern with ``{dataset}`` (replaced by the dataset's label, its ``name``
or id: ``runs/{dataset}.trec``). Every line is checked against the dataset when the cell runs: an
unknown query or doc id is a one-line error naming the file and line. The file's SHA-256 is part of
the cell id, so an edited file is never served from an old cell. Its rankings were computed
elsewhere, so its latency, index time and memory are "not measured" (NaN in the tables), and so are a
fusion's over it.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

from zerda_eval.errors import ConfigError, DataFormatError, ZerdaEvalWarning
from zerda_eval.hashing import file_sha256
from zerda_eval.ranking import Ranking, Run, sort_ranking
from zerda_eval.store.run_dir import trec_lines
from zerda_eval.systems.base import System
from zerda_eval.systems.params import DUPLICATES, ParamSpec

DATASET_FIELD = "{dataset}"


def run_file_path(pattern: str, dataset: str) -> Path:
    """The run file of ``dataset``: ``pattern`` with ``{dataset}`` replaced by the dataset's label."""
    return Path(pattern.replace(DATASET_FIELD, dataset))


class RunFileSystem(System):
    """The rankings of a TREC run file (``qid Q0 docid rank score tag``), per query as the file scores them."""

    family = "run_file"
    description = "a TREC run file made elsewhere (path, or a pattern with {dataset}); latency not measured"
    timed: ClassVar[bool] = False
    param_specs: ClassVar[dict[str, ParamSpec]] = {
        "path": ParamSpec(
            None, "str", "TREC run file, or a pattern with {dataset} (the dataset's name or id)", required=True
        ),
        "duplicates": DUPLICATES,
    }

    @classmethod
    def content_key(cls, params: Mapping[str, Any], dataset: str, where: str) -> dict[str, Any]:
        path = run_file_path(params["path"], dataset)
        try:
            return {"run_file": str(path), "sha256": file_sha256(path)}
        except OSError:
            raise ConfigError(
                f"{where}: run file {str(path)!r} for dataset {dataset!r} not found; check path"
            ) from None

    def _index(self, collection: Any, cache_dir: Path | None) -> None:
        path = Path(self.content["run_file"])
        if file_sha256(path) != self.content["sha256"]:
            raise DataFormatError(f"{path}: changed since the experiment was loaded; run the experiment again")
        doc_ids = frozenset(collection.doc_ids)
        self._run: Run = {}
        for number, qid, doc_id, score in trec_lines(path):
            if qid not in collection.queries:
                raise DataFormatError(f"{path}:{number}: query id {qid!r} is not a query of {collection.id!r}")
            if doc_id not in doc_ids:
                raise DataFormatError(f"{path}:{number}: doc id {doc_id!r} is not a document of {collection.id!r}")
            self._run.setdefault(qid, []).append((doc_id, score))
        self.stats["run_file"] = {"path": str(path), "queries": len(self._run)}

    def _scored(self, text: str, k: int) -> tuple[Ranking, float | None]:
        raise NotImplementedError  # search is by query id: see search

    def search(self, queries: dict[str, str], k: int) -> dict[str, Ranking]:
        """The file's ranking of each query (tie-break order, at most ``k``); a query it lacks gets none.

        A doc listed twice for a query is an error naming the file, unless ``duplicates`` is set; a file
        that lacks some of the queries gives one warning with the counts (those queries score 0)."""
        run = {}
        path = self.content["run_file"]
        missing = sum(qid not in self._run for qid in queries)
        if missing:
            warnings.warn(
                f"{path}: no lines for {missing} of the {len(queries)} queries evaluated on {self.collection.id!r} "
                "(they score 0 in every mean); check that the file covers the dataset's queries",
                ZerdaEvalWarning,
                stacklevel=2,
            )
        for qid in queries:
            ranking = sort_ranking(self._run.get(qid, []), k, self.params["duplicates"], f"{path}, query {qid!r}")
            run[qid] = self.answer(ranking, ranking[0][1] if ranking else None)
        return run
