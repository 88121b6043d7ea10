"""Deterministic faults for tests: ``ZERDA_EVAL_FAULT`` stops this process at a named point of the code.

``ZERDA_EVAL_FAULT=<action>-<point>[:<n>]`` acts on the point's n-th passage in this process (on the first
when ``:<n>`` is omitted). Actions: ``interrupt`` sends this process SIGINT (what Ctrl-C does: Python
raises ``KeyboardInterrupt`` in the main thread), ``kill`` sends it SIGKILL (the OOM killer, a pulled plug:
nothing runs after it). Points, each a ``fault_point`` call: ``at-startup`` (``zerda_eval/__init__.py``,
before the heavy imports), ``after-cell`` (the runner, once n cells of the grid have finished, computed
or reused), ``in-index-build`` (``store.indexes``: the index saved in its temporary folder,
its checksums not yet written). A test sets the variable instead of sending a signal at a guessed moment,
then checks what was left where the fault landed. Unset (every real run), a point costs one lookup.

It imports nothing of ours, so any layer may call it (it sits on the floor of
``tests/architecture/test_imports.py``).
"""

from __future__ import annotations

import os
import re
import signal

FAULT_ENV = "ZERDA_EVAL_FAULT"
ACTIONS = {"interrupt": signal.SIGINT, "kill": signal.SIGKILL}
FAULT_PATTERN = re.compile(r"(?P<action>[a-z]+)-(?P<point>[a-z-]+?)(?::(?P<n>[1-9][0-9]*))?")


def fault_point(point: str, passage: int = 1) -> None:
    """Send this process the fault ``ZERDA_EVAL_FAULT`` names if it names ``point`` at ``passage``."""
    value = os.environ.get(FAULT_ENV)
    if not value:
        return
    match = FAULT_PATTERN.fullmatch(value)
    if match is None or match["action"] not in ACTIONS:
        raise ValueError(f"{FAULT_ENV}={value!r}: expected <{'|'.join(ACTIONS)}>-<point>[:<n>]")
    if match["point"] == point and int(match["n"] or 1) == passage:
        os.kill(os.getpid(), ACTIONS[match["action"]])
