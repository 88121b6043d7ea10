"""The bundled datasets, and the ones we register with ``ir_datasets.registry`` as first-class ids.

``beir/scifact/{test,train}``, ``cranfield`` and ``vaswani`` are ir_datasets' own entries (their cache
is seeded by ``seeding``). ``quranqa23/taskA/*``, ``tydiqa-goldp/ar/dev`` and ``xquad/ar`` are ours:
after ``import zerda_eval.datasets``, ``ir_datasets.load(id)`` yields their ``GenericDoc``,
``GenericQuery`` and ``TrecQrel`` records, parsed from the bundled files on first use.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from functools import lru_cache

import ir_datasets
from ir_datasets.datasets.base import Dataset
from ir_datasets.formats import BaseDocs, BaseQrels, BaseQueries, GenericDoc, GenericQuery, TrecQrel

from zerda_eval.datasets import quranqa
from zerda_eval.datasets.bundled import BUNDLED, QURAN_SPLITS
from zerda_eval.datasets.fingerprint import content_fingerprint
from zerda_eval.datasets.paths import source_file
from zerda_eval.datasets.squad import squad_records

Records = tuple[list[GenericDoc], list[GenericQuery], list[TrecQrel]]


def _quranqa(split: str) -> Callable[[], Records]:
    return lambda: (quranqa.passages(), quranqa.questions(split), quranqa.qrels(split))


def _squad(folder: str, name: str) -> Callable[[], Records]:
    return lambda: squad_records(source_file(folder, name))


PARSERS: dict[str, Callable[[], Records]] = {
    **{f"quranqa23/taskA/{split}": _quranqa(split) for split in QURAN_SPLITS},
    "tydiqa-goldp/ar/dev": _squad("tydiqa-goldp-ar", "tydiqa-goldp-dev-arabic.json"),
    "xquad/ar": _squad("xquad-ar", "xquad.ar.json"),
}


def parsed_records(dataset_id: str) -> Records:
    """The records of one of our registered ids, parsed once per process and content of its files."""
    return _parsed(dataset_id, tuple(sorted(content_fingerprint(dataset_id, {}).items())))


@lru_cache(maxsize=16)
def _parsed(dataset_id: str, content: tuple[tuple[str, str], ...]) -> Records:
    return PARSERS[dataset_id]()


class _Docs(BaseDocs):
    def __init__(self, dataset_id: str, lang: str) -> None:
        self._id, self._lang = dataset_id, lang

    def docs_iter(self) -> Iterator[GenericDoc]:
        return iter(parsed_records(self._id)[0])

    def docs_count(self) -> int:
        return len(parsed_records(self._id)[0])

    def docs_lang(self) -> str:
        return self._lang


class _Queries(BaseQueries):
    def __init__(self, dataset_id: str, lang: str) -> None:
        self._id, self._lang = dataset_id, lang

    def queries_iter(self) -> Iterator[GenericQuery]:
        return iter(parsed_records(self._id)[1])

    def queries_lang(self) -> str:
        return self._lang


class _Qrels(BaseQrels):
    def __init__(self, dataset_id: str) -> None:
        self._id = dataset_id

    def qrels_iter(self) -> Iterator[TrecQrel]:
        return iter(parsed_records(self._id)[2])

    def qrels_cls(self) -> type:
        return TrecQrel

    def qrels_defs(self) -> dict[int, str]:
        return {1: "relevant"}


def register_datasets() -> None:
    """Register our ids with ``ir_datasets.registry`` (idempotent; nothing is parsed until used)."""
    known = set(ir_datasets.registry)
    for dataset_id in PARSERS:
        if dataset_id not in known:
            lang = BUNDLED[dataset_id].language
            dataset = Dataset(_Docs(dataset_id, lang), _Queries(dataset_id, lang), _Qrels(dataset_id))
            ir_datasets.registry.register(dataset_id, dataset)
