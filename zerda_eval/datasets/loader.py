"""``load_collection``: any dataset id (bundled, ours, or ir_datasets') or a user's folder -> Collection."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from functools import lru_cache
from typing import Any

from filelock import FileLock

from zerda_eval.datasets import protocols, streamed
from zerda_eval.datasets.bundled import BUNDLED
from zerda_eval.datasets.collection import Collection, build_collection
from zerda_eval.datasets.fingerprint import changed_files, content_fingerprint
from zerda_eval.datasets.opening import open_dataset
from zerda_eval.datasets.paths import ir_datasets_home
from zerda_eval.datasets.quranqa import answerable_only
from zerda_eval.datasets.user import load_user_collection
from zerda_eval.errors import DatasetError

# What ir_datasets raises when a download fails: requests' ConnectionError is an OSError; several
# failed mirrors give RuntimeError("All download sources failed", ...).
_DOWNLOAD_ERRORS = (OSError, RuntimeError)


def load_collection(dataset_id: str, **options: Any) -> Collection:
    """Load ``dataset_id`` under its protocol ``options`` (see ``protocols``); cached per process.

    The per-process cache is keyed by the content of the files the dataset is read from
    (``fingerprint``): an edited file is read again; one edited while it is read is a
    ``DatasetError`` (and nothing is cached). With ``path=...`` (and ``format="beir"|"trec"``) the
    collection is a user's folder and ``dataset_id`` only names it.
    """
    resolved = protocols.dataset_options(dataset_id, options, bundled=dataset_id in BUNDLED)
    content = _freeze(content_fingerprint(dataset_id, resolved))
    if "path" in options:
        return _cached_user(dataset_id, _freeze(resolved), content)
    return _cached(dataset_id, _freeze(resolved), content)


def load_recorded(dataset_id: str, recorded: Mapping[str, str], options: Mapping[str, Any]) -> Collection:
    """``load_collection(dataset_id, **options)`` when its files still hold the ``recorded`` content (the
    fingerprint a cell id covers); a one-line ``DatasetError`` naming the changed file otherwise."""
    resolved = protocols.dataset_options(dataset_id, options, bundled=dataset_id in BUNDLED)
    changed = changed_files(dataset_id, resolved, recorded)
    if changed:
        raise DatasetError(
            f"dataset {dataset_id!r}: {', '.join(map(str, changed))} changed since the experiment was read (the "
            "cell ids cover its old content); finished cells are kept: rerun to compute on the new data"
        )
    return load_collection(dataset_id, **options)


def _checked_after_reading(dataset_id: str, options: dict[str, Any], content: tuple, collection: Collection):
    """``collection`` if the files still hold ``content`` now that they were read, else a ``DatasetError``."""
    changed = changed_files(dataset_id, options, _thaw(content))
    if changed:
        raise DatasetError(
            f"dataset {dataset_id!r}: {', '.join(map(str, changed))} changed while it was read; rerun once it is "
            "no longer being written"
        )
    return collection


def _freeze(options: dict[str, Any]) -> tuple[tuple[str, Any], ...]:
    return tuple(sorted((name, tuple(v) if isinstance(v, list) else v) for name, v in options.items()))


def _thaw(frozen: tuple[tuple[str, Any], ...]) -> dict[str, Any]:
    return {name: list(v) if isinstance(v, tuple) else v for name, v in frozen}


@lru_cache(maxsize=32)
def _cached_user(name: str, frozen: tuple[tuple[str, Any], ...], content: tuple[tuple[str, Any], ...]) -> Collection:
    return _checked_after_reading(name, _thaw(frozen), content, load_user_collection(name, _thaw(frozen)))


@lru_cache(maxsize=32)
def _cached(dataset_id: str, frozen: tuple[tuple[str, Any], ...], content: tuple[tuple[str, Any], ...]) -> Collection:
    options = _thaw(frozen)
    with _first_build_lock(dataset_id):
        return _checked_after_reading(dataset_id, _thaw(frozen), content, _build(dataset_id, options))


@contextmanager
def _first_build_lock(dataset_id: str) -> Iterator[None]:
    """One process at a time reads a dataset family whose ir_datasets cache may still be unbuilt.

    ir_datasets builds a docstore (e.g. ``beir/scifact/docs.pklz4``) on first read without any lock: two
    processes building it together leave one that repeats documents, for good. A read-only cache (built
    beforehand) needs no lock.
    """
    home = ir_datasets_home()
    lock = FileLock(str(home / f".zerda-build-{dataset_id.split('/')[0]}.lock"))
    try:
        lock.acquire()
    except OSError:
        yield
        return
    try:
        yield
    finally:
        lock.release()


def _build(dataset_id: str, options: dict[str, Any]) -> Collection:
    dataset = open_dataset(dataset_id)
    for part in ("docs", "queries", "qrels"):
        if not getattr(dataset, f"has_{part}")():
            raise DatasetError(f"ir_datasets id {dataset_id!r} has no {part}; pick an id with docs, queries and qrels")
    language = options.pop("language", None) or _language(dataset_id, dataset)
    relevance = protocols.cranfield_relevance if options.get("relevance") == "5-code" else (lambda grade: grade)
    try:
        collection = build_collection(
            dataset_id,
            language,
            dataset.docs_iter(),
            dataset.queries_iter(),
            dataset.qrels_iter(),
            options,
            relevance,
            stream_texts=(dataset.docs_count() or 0) > streamed.STREAM_ABOVE_DOCS,
        )
    except _DOWNLOAD_ERRORS as error:
        raise DatasetError(_offline_message(dataset_id, error)) from None
    return answerable_only(collection) if options.get("no_answer") == "drop" else collection


def _language(dataset_id: str, dataset: Any) -> str:
    if dataset_id in BUNDLED:
        return BUNDLED[dataset_id].language
    return dataset.docs_lang() or "unknown"


def _offline_message(dataset_id: str, error: BaseException) -> str:
    folder = ir_datasets_home() / dataset_id.split("/")[0]
    return (
        f"dataset {dataset_id!r} is not available offline (ir_datasets' download failed: "
        f"{type(error).__name__}); put its files in ir_datasets' cache under {folder} "
        "(set IR_DATASETS_HOME to use another cache) or run once with network access"
    )
