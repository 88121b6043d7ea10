"""Array helpers shared by tests."""

from __future__ import annotations

import numpy as np


def backed_by_memmap(array: np.ndarray) -> bool:
    """True when ``array`` or one of the arrays it views is a ``np.memmap`` (no copy was made)."""
    while isinstance(array, np.ndarray):
        if isinstance(array, np.memmap):
            return True
        array = array.base
    return False
