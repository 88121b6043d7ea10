"""Reference implementations of the zerda (seed 000) and pipeline (seed 004) retrieval APIs.

This package knows nothing of evaluation: ``zerda_eval`` imports it, never the reverse.
"""

__version__ = "0.1.0"
