"""zerda-eval: an evaluation and benchmarking harness for hybrid retrieval, English and Arabic.

Importing the package registers the bundled collections with ``ir_datasets`` (so that
``ir_datasets.load("quranqa23/taskA/dev")`` works after ``import zerda_eval``).
"""

__version__ = "0.1.0"

from zerda_eval import datasets as _datasets  # noqa: F401  (registers the ir_datasets ids)
