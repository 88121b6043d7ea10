"""Rankings (the one run type and its tie-break), effectiveness measures and efficiency figures.

It imports ``errors`` and ``datasets`` (the Qur'an QA official scorer). ``ranking`` imports nothing of
ours but ``errors``: the run store below ``datasets`` writes its run type (see ``docs/ARCHITECTURE.md``).
"""
