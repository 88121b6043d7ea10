"""Running the grid: one cell (index, search, time, evaluate, write), the grid in order, and where
cells run (serially here, or as Dask tasks).

It imports the spec, systems, fusion, evaluation and the store; never analysis or report.
"""
