"""Corpus texts read from ir_datasets on demand, for corpora too large to hold as a list of strings.

A collection of more than ``STREAM_ABOVE_DOCS`` documents keeps only its doc ids; its ``texts`` is a
``StreamedTexts``: iterating streams ``docs_iter()`` (what building a BM25 index, hashing the corpus
or embedding it in batches needs), and ``texts[i]`` reads one document from ``docs_store()``. The
seed's reference systems (zerda chunks, pipeline contexts) still build their own in-memory objects:
that is their specification.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, overload

from zerda_eval.datasets.opening import open_dataset
from zerda_eval.datasets.records import record_text
from zerda_eval.errors import DataFormatError

STREAM_ABOVE_DOCS = 500_000  # MS MARCO passages (8.8M), mMARCO-ar, MIRACL-ar stream; every bundled set loads


class StreamedTexts(Sequence[str]):
    """The texts of ``dataset_id``'s corpus in ``doc_ids`` order, never all in memory at once."""

    def __init__(self, dataset_id: str, doc_ids: Sequence[str], title: bool = True):
        self.dataset_id = dataset_id
        self._doc_ids = doc_ids
        self.title = title

    def __len__(self) -> int:
        return len(self._doc_ids)

    def __iter__(self) -> Iterator[str]:
        for position, doc in enumerate(self._dataset().docs_iter()):
            if position >= len(self._doc_ids) or doc.doc_id != self._doc_ids[position]:
                raise DataFormatError(
                    f"{self.dataset_id}: corpus changed since it was loaded (document {position} is {doc.doc_id!r}); "
                    "rerun to reload it"
                )
            yield record_text(doc, self.title)

    @overload
    def __getitem__(self, index: int) -> str: ...

    @overload
    def __getitem__(self, index: slice) -> list[str]: ...

    def __getitem__(self, index: int | slice) -> str | list[str]:
        store = self._dataset().docs_store()
        if isinstance(index, slice):
            wanted = self._doc_ids[index]
            found = store.get_many(wanted)
            return [record_text(found[doc_id], self.title) for doc_id in wanted]
        return record_text(store.get(self._doc_ids[index]), self.title)

    def _dataset(self) -> Any:
        return open_dataset(self.dataset_id)
