"""What a finished run directory says: paired significance tests, comparisons with a baseline, and
studies (plug-ins in ``analysis.studies``).

Layer 9 of the one-way flow: it imports the store (run files) and evaluation; never execution.
"""
