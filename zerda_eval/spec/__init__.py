"""The experiment spec: TOML or a mapping -> a validated ``ExperimentSpec`` and its grid cells.

Layer 6 of the one-way flow (see ``docs/ARCHITECTURE.md``): it imports datasets, evaluation, systems
and fusion to check names and fill defaults; nothing below imports it.
"""
