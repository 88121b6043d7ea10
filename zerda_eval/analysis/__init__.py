"""What a finished run directory says: paired significance tests, comparisons with a baseline, and
studies (plug-ins in ``analysis.studies``).

It reads run directories through the store; it never imports execution (runs are finished before).
"""
