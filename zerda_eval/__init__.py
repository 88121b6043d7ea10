"""zerda-eval: an evaluation and benchmarking harness for hybrid retrieval, English and Arabic."""

__version__ = "0.1.0"
