"""Everything the harness keeps on disk: atomic files and locks, run directories, and the stores of
built indexes and corpus embeddings (each entry verified by its checksums before it is used).

It imports only ``errors``, ``hashing``, ``zerda_eval.ranking`` (the run type) and ``retrieval``.
"""
