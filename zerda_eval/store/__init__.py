"""Everything the harness keeps on disk: atomic files and locks, run directories, and the stores of
built indexes and corpus embeddings (each entry verified by its checksums before it is used).

Layer 2 of the one-way flow: it imports only ``errors``, ``hashing`` and ``retrieval``.
"""
