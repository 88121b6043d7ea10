"""Protocol options of each dataset: defaults, validation, and the rules they switch on.

Every option is explicit and ends up in ``Collection.options`` (hence in every result):

- ``normalization`` ("none" | "light"): Arabic normalisation for the harness's own analyzers
  (``retrieval.core.analyzer``); recorded here, applied by the systems. Default "none", the seed
  tokenizer unchanged.
- ``ignore_identical_ids`` (bool): drop a retrieved doc whose id equals the query id (BEIR's self-hit
  rule, on by default in BEIR's evaluator). On for ``beir/*`` ids and BEIR-format folders, to match
  BEIR's published numbers (for SciFact it changes nothing: no doc id equals a query id); off
  elsewhere, where equal ids are a coincidence (cranfield and vaswani number both from 1) and the
  filter would drop real hits. When it is on and the qrels judge a doc whose id equals its query's,
  loading warns (one line: the count and the option) and the count is recorded in each result.
- ``title`` (bool, ``beir/*`` ids and user folders): the document text is title + " " + text (BEIR's
  convention, default) or the text alone.
- ``relevance`` (cranfield only): "5-code" (default) turns Cleverdon's codes 1 (complete answer) ..
  4 (minimum interest) into grades 4 .. 1 and drops code -1 (the query's source document); "raw"
  keeps ir_datasets' codes, which invert graded measures such as nDCG.
- ``no_answer`` (Qur'an QA only): "task_rule" (default) keeps the no-answer questions, scored with
  ``evaluation.no_answer.task_scores``; "drop" evaluates on answerable questions only.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from retrieval.core.tokenize import NORMALIZATIONS
from zerda_eval.checks import check_keys
from zerda_eval.columnar import ColumnarRun, doc_table
from zerda_eval.datasets.collection import Collection
from zerda_eval.datasets.quranqa import OFFICIAL_MEASURES, RUN_DEPTH
from zerda_eval.errors import ConfigError

CHOICES: dict[str, tuple[Any, ...]] = {
    "normalization": NORMALIZATIONS,
    "ignore_identical_ids": (True, False),
    "relevance": ("5-code", "raw"),
    "no_answer": ("task_rule", "drop"),
    "title": (True, False),
}


def cranfield_relevance(code: int) -> int | None:
    """Cleverdon code -> grade, higher is better: 1..4 -> 4..1; -1 (source document) -> dropped."""
    return None if code == -1 else 5 - code


def default_options(dataset_id: str, beir_format: bool = False, user_folder: bool = False) -> dict[str, Any]:
    """The protocol options of ``dataset_id`` (a user's folder, in BEIR format when ``beir_format``) with defaults."""
    options: dict[str, Any] = {
        "normalization": "none",
        "ignore_identical_ids": beir_format or dataset_id.startswith("beir/"),
    }
    if user_folder or dataset_id.startswith("beir/"):
        options["title"] = True
    if dataset_id == "cranfield":
        options["relevance"] = "5-code"
    if dataset_id.startswith("quranqa23/"):
        options.update(no_answer="task_rule", run_depth=RUN_DEPTH, official_measures=list(OFFICIAL_MEASURES))
    return options


def dataset_options(
    dataset_id: str, given: Mapping[str, Any], bundled: bool, where: str | None = None
) -> dict[str, Any]:
    """The options a dataset is loaded under: the ONE resolution the config records and the loader applies.

    ``given`` with ``path`` is a user's folder (``format`` "beir" by default, whose ``split`` defaults to
    "test"; its files are looked up here, so a missing one is reported against its key); ``bundled`` says
    whether ``dataset_id`` is one of ours (others may set ``language``). ``where``, the key path of the
    dataset's entry (``x.toml: datasets[2]``), prefixes every error.
    """
    from zerda_eval.datasets.user import USER_OPTIONS, source_files

    if "path" not in given:
        return resolve_options(dataset_id, given, extra=() if bundled else ("language",), where=where)
    given = {**given, "path": str(given["path"])}
    beir_format = given.get("format", "beir") == "beir"
    options = resolve_options(dataset_id, given, USER_OPTIONS, beir_format=beir_format, user_folder=True, where=where)
    source_files(dataset_id, options, where)
    options.setdefault("format", "beir")
    if beir_format:
        options.setdefault("split", "test")
    return options


def resolve_options(
    dataset_id: str,
    given: Mapping[str, Any],
    extra: Sequence[str] = (),
    beir_format: bool = False,
    user_folder: bool = False,
    where: str | None = None,
) -> dict[str, Any]:
    """Defaults of ``dataset_id`` overridden by ``given``; unknown names or values raise ``ConfigError``
    naming the key (``where``: the key path of the dataset's entry, when known).

    ``extra`` names options the caller handles itself (e.g. ``path`` for a user's collection).
    """
    from zerda_eval.datasets.user import option_key

    options = default_options(dataset_id, beir_format, user_folder)
    settable = {name for name in options if name in CHOICES} | set(extra)
    check_keys(given, settable, "", "option", locate=lambda name: option_key(where, dataset_id, name))
    for name, value in given.items():
        if name in CHOICES and not any(type(value) is type(c) and value == c for c in CHOICES[name]):
            allowed = ", ".join(map(repr, CHOICES[name]))
            key = option_key(where, dataset_id, name)
            raise ConfigError(f"{key}: {name}={value!r} is invalid; use one of {allowed}")
        options[name] = value
    return options


def drop_self_hits(run: ColumnarRun, collection: Collection) -> ColumnarRun:
    """The run without docs whose id equals the query id, when the collection's option asks for it."""
    if not collection.options.get("ignore_identical_ids") or not run.docs.size:
        return run
    own = doc_table(run.query_ids, "query ids")  # each query's id, looked up in the run's sorted doc table
    place = np.minimum(np.searchsorted(run.doc_ids, own), max(run.doc_ids.size - 1, 0))
    self_doc = np.where(run.doc_ids[place] == own, place, -1)
    return run.keep(run.docs != np.repeat(self_doc, run.lengths()))
