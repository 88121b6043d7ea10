"""Running the grid: one cell (index, search, time, evaluate, write), the grid in order, and where
cells run (serially here, or as Dask tasks).

Layer 8 of the one-way flow: it imports the spec, systems, fusion, evaluation and the store.
"""
