"""Fusion of runs: ranx's score combinations, RRF, and the two seed APIs' own fusion steps.

It imports ``zerda_eval.ranking`` (the run type and tie-break), ``zerda_eval.columnar`` (the run as arrays,
which ``fusion.columns`` fuses in compiled code), ``systems.params`` and ``retrieval``.
"""

from zerda_eval.fusion.methods import FUSION_METHODS, SCORE_NORMS, fuse_runs, resolve_fusion_params

__all__ = ["FUSION_METHODS", "SCORE_NORMS", "fuse_runs", "resolve_fusion_params"]
