"""zerda-eval: an evaluation and benchmarking harness for hybrid retrieval, English and Arabic.

Importing the package registers the bundled collections with ``ir_datasets`` (so that
``ir_datasets.load("quranqa23/taskA/dev")`` works after ``import zerda_eval``). When ir_datasets'
cache folder cannot be used, that waits: the first use of ``zerda_eval.datasets`` raises its one-line
``DatasetError`` (the CLI shows it), instead of ``import zerda_eval`` failing.
"""

__version__ = "0.1.0"

from contextlib import suppress

from zerda_eval.errors import DatasetError

with suppress(DatasetError):
    from zerda_eval import datasets as _datasets  # noqa: F401  (registers the ir_datasets ids)
