"""``ir_datasets.load`` for any id, after seeding the cache of a bundled one; one-line errors."""

from __future__ import annotations

from typing import Any

import ir_datasets

from zerda_eval.datasets.bundled import BUNDLED
from zerda_eval.datasets.seeding import seed_cache
from zerda_eval.errors import DatasetError, did_you_mean


def open_dataset(dataset_id: str) -> Any:
    """``ir_datasets.load(dataset_id)``, after seeding the cache for the bundled ids; one-line errors."""
    try:
        seed_cache(dataset_id)
        return ir_datasets.load(dataset_id)
    except KeyError:
        hint = did_you_mean(dataset_id, ir_datasets.registry)
        bundled = ", ".join(BUNDLED)
        raise DatasetError(
            f"unknown dataset id {dataset_id!r}{hint}; bundled: {bundled}; "
            "or any id of `ir_datasets list`, or path=... for your own collection"
        ) from None
