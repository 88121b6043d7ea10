"""Fault hooks: ``ZERDA_EVAL_FAULT`` stops a run at a precise point, so tests of Ctrl-C and crashes are
deterministic (no sleeping and hoping). Unset, as in every normal run, each hook does nothing.

Values:
- ``interrupt-at-startup``: SIGINT to this process while ``zerda_eval`` is being imported;
- ``interrupt-after-cell:N``: SIGINT once N cells of the grid have finished (computed or reused);
- ``kill-after-cell:N``: SIGKILL at that point, a crash that no handler sees.

The signals are real (``os.kill`` of this process), so what runs is what a user's Ctrl-C or an OOM
kill would run. Only the standard library is imported: ``zerda_eval/__init__.py`` calls ``at_startup``.
"""

from __future__ import annotations

import os
import signal

FAULT_VARIABLE = "ZERDA_EVAL_FAULT"
STARTUP = "interrupt-at-startup"
AFTER_CELL = {"interrupt-after-cell": signal.SIGINT, "kill-after-cell": signal.SIGKILL}


def at_startup() -> None:
    """SIGINT now when ``ZERDA_EVAL_FAULT=interrupt-at-startup``."""
    if os.environ.get(FAULT_VARIABLE) == STARTUP:
        os.kill(os.getpid(), signal.SIGINT)


def after_cell(finished: int) -> None:
    """SIGINT or SIGKILL now when ``ZERDA_EVAL_FAULT`` is ``interrupt-after-cell:N`` / ``kill-after-cell:N``
    and ``finished`` (cells finished so far) is N."""
    name, _, count = os.environ.get(FAULT_VARIABLE, "").partition(":")
    if name in AFTER_CELL and count.isdigit() and int(count) == finished:
        os.kill(os.getpid(), AFTER_CELL[name])
