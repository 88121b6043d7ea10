"""The experiment spec: TOML or a mapping -> a validated ``ExperimentSpec`` and its grid cells.

It imports datasets, evaluation, systems and fusion to check names and fill defaults; nothing below
imports it (the layers: ``docs/ARCHITECTURE.md``).
"""
