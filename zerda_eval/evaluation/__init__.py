"""Rankings (the one run type and its tie-break), effectiveness measures and efficiency figures.

Layer 4 of the one-way flow: it imports ``errors`` and ``datasets`` (the Qur'an QA official scorer).
"""
