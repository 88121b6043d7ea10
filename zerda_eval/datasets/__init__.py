"""Test collections by ``ir_datasets`` id, offline: bundled sets, our registered ids, a user's folder.

Importing this package registers ``quranqa23/taskA/{train,dev,train+dev}``, ``tydiqa-goldp/ar/dev``
and ``xquad/ar`` with ``ir_datasets.registry``; ``load_collection`` seeds ir_datasets' cache for
``beir/scifact/*``, ``cranfield`` and ``vaswani`` from the shared files on first use.
"""

from zerda_eval.datasets.paths import check_ir_datasets_home

check_ir_datasets_home()  # before ir_datasets is imported: it would crash on an unusable folder

from zerda_eval.datasets.bundled import BUNDLED  # noqa: E402
from zerda_eval.datasets.collection import NO_ANSWER_ID, Collection  # noqa: E402
from zerda_eval.datasets.listing import list_datasets  # noqa: E402
from zerda_eval.datasets.loader import load_collection, load_recorded  # noqa: E402
from zerda_eval.datasets.registry import register_datasets  # noqa: E402

register_datasets()

BUNDLED_IDS = tuple(BUNDLED)

__all__ = [
    "BUNDLED_IDS",
    "NO_ANSWER_ID",
    "Collection",
    "list_datasets",
    "load_collection",
    "load_recorded",
    "register_datasets",
]
